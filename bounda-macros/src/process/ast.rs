//! The intermediate form: the state struct and the handler `impl`, keeping the user's tokens for
//! spans.

use heck::ToSnakeCase;
use syn::ext::IdentExt;
use syn::{
    Attribute, Fields, FnArg, GenericArgument, Ident, ImplItem, ImplItemFn, ItemImpl, ItemStruct,
    Path, PathArguments, ReturnType, Type,
};

use crate::errors::Errors;
use crate::symbol;

/// The state struct of a process.
pub(crate) struct State {
    /// The struct as it will be emitted: `#[deadline]` attributes removed.
    pub(crate) item: ItemStruct,
    /// Its named fields.
    pub(crate) fields: Vec<StateField>,
}

/// One field of the state.
pub(crate) struct StateField {
    /// The field's name as written (possibly `r#timeout`).
    pub(crate) ident: Ident,
    /// The field's type.
    pub(crate) ty: Type,
    /// The field's visibility, reused by its patch field.
    pub(crate) vis: syn::Visibility,
    /// The `#[deadline]` attribute, if the field has one.
    pub(crate) deadline: Option<Attribute>,
    /// The field's `#[doc]` attributes, copied onto its patch field.
    pub(crate) docs: Vec<Attribute>,
    /// The key serde writes the field under.
    pub(crate) key: String,
}

impl StateField {
    /// The name without `r#`, as handlers and storage spell it.
    pub(crate) fn name(&self) -> String {
        self.ident.unraw().to_string()
    }
}

/// The struct with every `#[deadline]` removed: what an early abort emits, so the one error is
/// not followed by rustc refusing the attribute.
pub(crate) fn strip_deadlines(mut item: ItemStruct) -> ItemStruct {
    for field in item.fields.iter_mut() {
        field.attrs.retain(|attr| !is_deadline_attr(attr));
    }
    item
}

/// The impl with every `#[correlate]` removed, for an early abort.
pub(crate) fn strip_correlates(mut item: ItemImpl) -> ItemImpl {
    for impl_item in &mut item.items {
        if let ImplItem::Fn(function) = impl_item {
            function
                .attrs
                .retain(|attr| !attr.path().is_ident(symbol::CORRELATE));
        }
    }
    item
}

/// Whether `attr` is `#[deadline]` (or `#[bounda::deadline]`).
pub(crate) fn is_deadline_attr(attr: &Attribute) -> bool {
    attr.path()
        .segments
        .last()
        .is_some_and(|segment| segment.ident == symbol::DEADLINE)
}

impl State {
    /// Reads the struct, stripping `#[deadline]`; only a struct of the wrong shape fails.
    pub(crate) fn from_item(mut item: ItemStruct, errors: &mut Errors) -> syn::Result<State> {
        if !item.generics.params.is_empty() {
            return Err(syn::Error::new_spanned(
                &item.generics,
                "a process state cannot be generic; declare one state struct per process",
            ));
        }
        let rename_all = crate::serde_names::serde_value(&item.attrs, "rename_all");
        // A field added after instances were stored reads as the state's `Default` has it, so a
        // deploy that adds a field does not stop every live instance.
        // Filled from `ProcessState::initial`, the one place the state's `Default` is asked
        // for, so a state without one is one error.
        if crate::serde_names::derives(&item.attrs, "Deserialize")
            && !crate::serde_names::serde_has(&item.attrs, "default")
        {
            let initial = format!("{}::{}", item.ident, crate::symbol::INITIAL_FN);
            item.attrs
                .push(syn::parse_quote!(#[serde(default = #initial)]));
        }
        let Fields::Named(named) = &mut item.fields else {
            return Err(syn::Error::new_spanned(
                &item.ident,
                "a process state needs named fields, like `struct OrderPayment { paid: bool }`",
            ));
        };
        let mut fields = Vec::new();
        for field in &mut named.named {
            let mut deadline = None;
            field.attrs.retain(|attr| {
                if !is_deadline_attr(attr) {
                    return true;
                }
                if deadline.is_some() {
                    errors.at(attr, "`#[deadline]` is given twice on this field; keep one");
                } else if !matches!(attr.meta, syn::Meta::Path(_)) {
                    errors.at(attr, "`#[deadline]` takes no arguments");
                    deadline = Some(attr.clone());
                } else {
                    deadline = Some(attr.clone());
                }
                false
            });
            let Some(ident) = field.ident.clone() else {
                continue;
            };
            // A deadline serde skips is lost each time the state is stored and read back, so it
            // would never come due.
            let skips = |attr: &&syn::Attribute| {
                ["skip", "skip_serializing", "skip_deserializing"]
                    .iter()
                    .any(|key| crate::serde_names::serde_has(std::slice::from_ref(*attr), key))
            };
            if deadline.is_some()
                && let Some(attr) = field.attrs.iter().find(skips)
            {
                errors.at(
                    attr,
                    format!(
                        "deadline `{ident}` is skipped by serde, so it would be lost between steps and never come due; remove the `#[serde(skip..)]`"
                    ),
                );
            }
            // A field that may be compiled out would leave the patch, the merge and the tables
            // naming a field that is not there: report it, and generate nothing for it.
            if let Some(attr) = field.attrs.iter().find(|attr| attr.path().is_ident("cfg")) {
                errors.at(
                    attr,
                    "a process state field cannot be conditional: its patch and dispatch need every field; \
                     move the `#[cfg]` to the whole process",
                );
                continue;
            }
            let docs = field
                .attrs
                .iter()
                .filter(|attr| attr.path().is_ident("doc"))
                .cloned()
                .collect();
            let key = crate::serde_names::key(
                &ident.unraw().to_string(),
                &field.attrs,
                rename_all.as_deref(),
            );
            fields.push(StateField {
                ident,
                ty: field.ty.clone(),
                vis: field.vis.clone(),
                deadline,
                docs,
                key,
            });
        }
        Ok(State { item, fields })
    }

    /// The deadline fields, in declaration order.
    pub(crate) fn deadlines(&self) -> impl Iterator<Item = &StateField> {
        self.fields.iter().filter(|field| field.deadline.is_some())
    }
}

/// The `impl` block holding a process's handlers.
pub(crate) struct Handlers {
    /// The block as it will be emitted: duplicate handlers and `#[correlate]` removed.
    pub(crate) item: ItemImpl,
    /// The state type (`OrderPayment`).
    pub(crate) self_ty: Type,
    /// The `on_<event>` handlers.
    pub(crate) on: Vec<OnHandler>,
    /// The `at_<field>` handlers, `at_timeout` included.
    pub(crate) at: Vec<AtHandler>,
}

/// An `on_<event>` handler.
pub(crate) struct OnHandler {
    /// The function's name.
    pub(crate) ident: Ident,
    /// The event type, from `On<'_, Self, Event>`.
    pub(crate) event: Path,
    /// The correlator from `#[correlate(path)]`.
    pub(crate) correlate: Option<Path>,
    /// The declared return type, to point errors at.
    pub(crate) output: ReturnType,
}

/// An `at_<field>` handler.
pub(crate) struct AtHandler {
    /// The function's name.
    pub(crate) ident: Ident,
    /// The deadline it handles: the name after `at_`.
    pub(crate) field: String,
    /// The declared return type, to point errors at.
    pub(crate) output: ReturnType,
    /// Whether its return type was refused by name already: the dispatch then converts it as
    /// any patch, so that one error stands alone.
    pub(crate) refused: bool,
    /// The deadline its refused return type names, when no handler of the impl takes it: the
    /// error says to rename the handler after it, so it counts as that deadline's handler
    /// meanwhile, and no second error says the deadline has none.
    pub(crate) stands_for: Option<String>,
}

impl AtHandler {
    /// Whether this is `at_timeout`, the handler of the reserved deadline.
    pub(crate) fn is_timeout(&self) -> bool {
        self.field == symbol::RESERVED_DEADLINE
    }
}

impl Handlers {
    /// Reads the handlers. Functions whose names start with neither `on_` nor `at_` are left
    /// alone, unless they take a handler's context; a handler of the wrong shape is recorded and left out of the dispatch.
    pub(crate) fn from_item(mut item: ItemImpl, errors: &mut Errors) -> syn::Result<Handlers> {
        if let Some((_, trait_path, _)) = &item.trait_ {
            return Err(syn::Error::new_spanned(
                trait_path,
                "`#[process]` goes on the inherent `impl` that holds the handlers, not on a trait impl",
            ));
        }
        if !item.generics.params.is_empty() {
            return Err(syn::Error::new_spanned(
                &item.generics,
                "a process cannot be generic; remove the parameters",
            ));
        }
        let self_ty = (*item.self_ty).clone();
        let mut on = Vec::new();
        let mut at = Vec::new();
        for impl_item in &mut item.items {
            let ImplItem::Fn(function) = impl_item else {
                continue;
            };
            let correlate = take_correlate(function, errors);
            let name = function.sig.ident.unraw().to_string();
            if let Some(event_name) = name.strip_prefix(symbol::ON_PREFIX) {
                if let Some(handler) = on_handler(function, event_name, correlate, errors) {
                    on.push(handler);
                }
            } else if let Some(field) = name.strip_prefix(symbol::AT_PREFIX) {
                if let Some(attr) = correlate {
                    errors.at(
                        attr,
                        "`#[correlate]` goes on an `on_<event>` handler; a deadline needs no routing",
                    );
                }
                if check_handler_shape(function, errors) {
                    at.push(AtHandler {
                        ident: function.sig.ident.clone(),
                        field: field.to_owned(),
                        output: function.sig.output.clone(),
                        refused: false,
                        stands_for: None,
                    });
                }
            } else {
                if let Some(attr) = correlate {
                    errors.at(attr, "`#[correlate]` goes on an `on_<event>` handler");
                }
                unnamed_handler(function, &name, errors);
            }
        }
        Ok(Handlers {
            item,
            self_ty,
            on,
            at,
        })
    }
}

/// Refuses a function that takes a handler's context (`On<..>` or `At<..>`) under a name that
/// is not a handler's: the dispatch finds handlers by name, so it would never run.
fn unnamed_handler(function: &ImplItemFn, name: &str, errors: &mut Errors) {
    let Some(syn::FnArg::Typed(argument)) = function.sig.inputs.first() else {
        return;
    };
    let syn::Type::Path(path) = &*argument.ty else {
        return;
    };
    let Some(last) = path.path.segments.last() else {
        return;
    };
    let hint = match last.ident.to_string().as_str() {
        "On" => format!(
            "`{name}` takes an event's context (`On<..>`) but its name does not start with `on_`, so it would never run; name it after the event it handles, like `on_order_paid` for `OrderPaid`"
        ),
        "At" => format!(
            "`{name}` takes a deadline's context (`At<..>`) but its name does not start with `at_`, so it would never run; name it after its deadline field, like `at_payment_deadline`"
        ),
        _ => return,
    };
    errors.at(&function.sig.ident, hint);
}

/// Removes `#[correlate(..)]` from `function` and returns it.
fn take_correlate(function: &mut ImplItemFn, errors: &mut Errors) -> Option<Attribute> {
    let mut found = None;
    function.attrs.retain(|attr| {
        if !attr.path().is_ident(symbol::CORRELATE) {
            return true;
        }
        if found.is_some() {
            errors.at(attr, "`#[correlate]` is given twice; keep one");
        } else {
            found = Some(attr.clone());
        }
        false
    });
    found
}

/// Checks what every handler shares: `async`, no `self`, one argument. Records each problem.
fn check_handler_shape(function: &ImplItemFn, errors: &mut Errors) -> bool {
    let sig = &function.sig;
    let name = &sig.ident;
    let context = if name.to_string().starts_with(symbol::ON_PREFIX) {
        "cx: On<'_, Self, Event>"
    } else {
        "cx: At<'_, Self>"
    };
    let mut ok = true;
    if sig.asyncness.is_none() {
        errors.at(
            sig.fn_token,
            format!("handler `{name}` must be `async`; write `async fn {name}(..)`"),
        );
        ok = false;
    }
    if let Some(FnArg::Receiver(receiver)) = sig.inputs.first() {
        errors.at(
            receiver,
            format!("handler `{name}` takes `{context}`, not `self`; the state is `cx.state()`"),
        );
        return false;
    }
    if sig.inputs.len() != 1 {
        errors.at(
            &sig.inputs,
            format!("handler `{name}` takes one argument, `{context}`"),
        );
        ok = false;
    }
    if !sig.generics.params.is_empty() {
        errors.at(&sig.generics, format!("handler `{name}` cannot be generic"));
        ok = false;
    }
    ok
}

/// Reads an `on_<event>` handler: its event type comes from its `On<'_, Self, Event>` argument.
fn on_handler(
    function: &ImplItemFn,
    event_name: &str,
    correlate: Option<Attribute>,
    errors: &mut Errors,
) -> Option<OnHandler> {
    if !check_handler_shape(function, errors) {
        return None;
    }
    let name = &function.sig.ident;
    let Some(FnArg::Typed(arg)) = function.sig.inputs.first() else {
        return None;
    };
    let Some(event) = event_of(&arg.ty) else {
        errors.at(
            &arg.ty,
            format!("handler `{name}` takes `cx: On<'_, Self, Event>` with the event it handles"),
        );
        return None;
    };
    let ident = &event.segments.last()?.ident;
    let snake = ident.unraw().to_string().to_snake_case();
    if event_name != snake && !event_name.ends_with(&format!("_{snake}")) {
        errors.at(
            name,
            format!("handler `{name}` takes `{ident}`; name it `on_{snake}`"),
        );
    }
    let correlate = correlate.and_then(|attr| match attr.parse_args::<Path>() {
        Ok(path) => Some(path),
        Err(_) => {
            errors.at(
                &attr,
                "`#[correlate]` takes the function that names the instance, like `#[correlate(Self::order_of)]`",
            );
            None
        }
    });
    Some(OnHandler {
        ident: name.clone(),
        event,
        correlate,
        output: function.sig.output.clone(),
    })
}

/// The `Event` of `On<'_, Self, Event>`: the last type argument.
fn event_of(ty: &Type) -> Option<Path> {
    let Type::Path(path) = ty else {
        return None;
    };
    let last = path.path.segments.last()?;
    if last.ident != symbol::ON_CONTEXT {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match args.args.iter().rev().find_map(|arg| match arg {
        GenericArgument::Type(ty) => Some(ty),
        _ => None,
    })? {
        Type::Path(event) if event.qself.is_none() && !event.path.is_ident("Self") => {
            Some(event.path.clone())
        }
        _ => None,
    }
}
