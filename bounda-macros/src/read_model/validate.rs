//! The rules a read model's declaration and projections follow, each error at the user's token.

use heck::{ToSnakeCase, ToUpperCamelCase};
use syn::{ImplItem, ItemImpl, Type};

use crate::errors::Errors;
use crate::names;
use crate::read_model::ast::{Field, INDEX, Projections, Table, UNIQUE};

/// The table's rules: a name, one key, helper attributes that mean something.
pub(crate) fn table(table: &Table, errors: &mut Errors) {
    check_name(table, errors);
    if !table.generics.params.is_empty() {
        errors.at(
            &table.generics,
            format!(
                "read model `{}` cannot be generic: its table has one set of columns",
                table.ident
            ),
        );
    }
    check_key(table, errors);
    for field in &table.fields {
        for attr in [&field.key, &field.index, &field.unique]
            .into_iter()
            .flatten()
        {
            if !matches!(attr.meta, syn::Meta::Path(_)) {
                errors.at(
                    attr,
                    "this attribute takes no arguments; write it alone, like `#[index]`",
                );
            }
        }
    }
}

fn check_name(table: &Table, errors: &mut Errors) {
    let name = table.name.value();
    let plain = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !plain {
        errors.at(
            &table.name,
            format!(
                "read model name `{name}` names its table and its checkpoint: use lowercase letters, digits and `-`, starting with a letter, like `order-summary`"
            ),
        );
    }
}

fn check_key(table: &Table, errors: &mut Errors) {
    let keys: Vec<&Field> = table.fields.iter().filter(|f| f.key.is_some()).collect();
    match keys.as_slice() {
        [] => errors.at(
            &table.ident,
            format!(
                "read model `{}` has no primary key; mark the field that tells its rows apart `#[key]`",
                table.ident
            ),
        ),
        [_] => {}
        [first, rest @ ..] => {
            for other in rest {
                errors.at(
                    other.key.as_ref(),
                    format!(
                        "read model `{}` has two primary keys, `{}` and `{}`; a row has one: keep one `#[key]`, and mark another column `#[unique]` or `#[index]` for its lookups",
                        table.ident,
                        first.column(),
                        other.column()
                    ),
                );
            }
        }
    }
    for key in keys {
        for (attr, helper) in [(&key.index, INDEX), (&key.unique, UNIQUE)] {
            if let Some(attr) = attr {
                errors.at(
                    attr,
                    format!(
                        "the primary key `{}` is unique and indexed already; remove `#[{helper}]`",
                        key.column()
                    ),
                );
            }
        }
    }
}

/// The projections' rules: an inherent impl of `async fn on_<event>(event: Projected<'_, E>,
/// table: &mut Table<'_, Self>)`, at least one, one per event type.
pub(crate) fn projections(item: &ItemImpl, block: &mut Projections, errors: &mut Errors) {
    if let Some((_, path, _)) = &item.trait_ {
        errors.at(
            path,
            "`#[read_model]` goes on the read model's own `impl` block of projections, not a trait impl",
        );
    }
    if !item.generics.params.is_empty() {
        errors.at(
            &item.generics,
            "a read model's projections cannot be generic",
        );
    }
    if block.projections.is_empty() && item.items.is_empty() {
        errors.at(
            &item.self_ty,
            "this read model projects no event; write `async fn on_<event>(event: Projected<'_, Event>, table: &mut Table<'_, Self>) -> Result<()>`",
        );
    }
    let mut seen: Vec<String> = Vec::new();
    let mut refused: Vec<syn::Ident> = Vec::new();
    for member in &item.items {
        let ImplItem::Fn(function) = member else {
            continue;
        };
        let sig = &function.sig;
        let name = names::plain(&sig.ident);
        if sig.asyncness.is_none() {
            errors.at(
                sig.fn_token,
                format!("projection `{name}` must be `async`; write `async fn {name}(..)`"),
            );
        }
        if !sig.generics.params.is_empty() {
            errors.at(
                &sig.generics,
                format!("projection `{name}` cannot be generic"),
            );
        }
        let event = block
            .projections
            .iter()
            .find(|p| p.function == sig.ident)
            .and_then(|p| p.event.as_ref());
        let two_args = sig.inputs.len() == 2
            && sig
                .inputs
                .iter()
                .all(|arg| matches!(arg, syn::FnArg::Typed(_)));
        let Some(event) = event.filter(|_| two_args) else {
            errors.at(
                &sig.inputs,
                format!(
                    "projection `{name}` takes two arguments: `event: Projected<'_, Event>, table: &mut Table<'_, Self>`"
                ),
            );
            continue;
        };
        let event_name = match event {
            Type::Path(path) => path.path.segments.last().map(|s| names::plain(&s.ident)),
            _ => None,
        }
        .unwrap_or_default();
        let snake = event_name.to_snake_case();
        if name != format!("on_{snake}") {
            // A well-formed name says which event it meant: the type may be what is wrong (an
            // aggregate given for its event), so that comes first, at the type.
            match name.strip_prefix("on_").filter(|rest| !rest.is_empty()) {
                Some(meant) => {
                    errors.at(
                        event,
                        format!(
                            "projection `{name}` takes `{event_name}`, not the event its name \
                             says: take `Projected<'_, {}>`, or, if `{event_name}` is the event \
                             it projects, name it `on_{snake}`",
                            meant.to_upper_camel_case()
                        ),
                    );
                    refused.push(sig.ident.clone());
                }
                None => errors.at(
                    &sig.ident,
                    format!("projection `{name}` takes `{event_name}`; name it `on_{snake}`"),
                ),
            }
        }
        if seen.contains(&snake) {
            errors.at(
                &sig.ident,
                format!("`{event_name}` is projected twice; keep one `on_{snake}`"),
            );
        }
        seen.push(snake);
    }
    for projection in &mut block.projections {
        projection.refused = refused.contains(&projection.function);
    }
}
