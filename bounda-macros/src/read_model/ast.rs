//! The read model as the user wrote it, keeping their tokens for errors.

use heck::ToShoutySnakeCase;
use proc_macro2::TokenStream;
use syn::parse::Parser;
use syn::{FnArg, GenericArgument, ImplItem, ItemImpl, ItemStruct, LitStr, PathArguments, Type};

use crate::errors::Errors;
use crate::names;

/// The helper attributes of a field.
pub(crate) const KEY: &str = "key";
pub(crate) const INDEX: &str = "index";
pub(crate) const UNIQUE: &str = "unique";

/// A row struct and its table.
pub(crate) struct Table {
    pub(crate) ident: syn::Ident,
    pub(crate) vis: syn::Visibility,
    pub(crate) generics: syn::Generics,
    /// The `name = ".."` literal.
    pub(crate) name: LitStr,
    pub(crate) fields: Vec<Field>,
}

/// One field: one column.
pub(crate) struct Field {
    pub(crate) ident: syn::Ident,
    pub(crate) ty: Type,
    /// The `#[key]`, `#[index]` and `#[unique]` attributes, as written.
    pub(crate) key: Option<syn::Attribute>,
    pub(crate) index: Option<syn::Attribute>,
    pub(crate) unique: Option<syn::Attribute>,
}

impl Field {
    /// The column's name.
    pub(crate) fn column(&self) -> String {
        names::plain(&self.ident)
    }

    /// The associated constant naming its column (`CUSTOMER_ID`).
    pub(crate) fn constant(&self) -> syn::Ident {
        syn::Ident::new(&self.column().to_shouty_snake_case(), self.ident.span())
    }
}

impl Table {
    /// Reads `#[read_model(name = "..")]` and the struct, taking its fields' helper attributes
    /// off; `None` when the struct is not one a table can be made of.
    pub(crate) fn parse(
        args: TokenStream,
        item: &mut ItemStruct,
        errors: &mut Errors,
    ) -> Option<Table> {
        let name = parse_name(args, &item.ident, errors);
        let syn::Fields::Named(fields) = &mut item.fields else {
            errors.at(
                &item.ident,
                format!(
                    "read model `{}` needs named fields, one per column: `struct {} {{ #[key] id: String, .. }}`",
                    item.ident, item.ident
                ),
            );
            return None;
        };
        let mut parsed = Vec::new();
        for field in &mut fields.named {
            let mut taken = |name: &str| {
                let at = field
                    .attrs
                    .iter()
                    .position(|attr| attr.path().is_ident(name))?;
                Some(field.attrs.remove(at))
            };
            let (key, index, unique) = (taken(KEY), taken(INDEX), taken(UNIQUE));
            for attr in &field.attrs {
                for helper in [KEY, INDEX, UNIQUE] {
                    if attr.path().is_ident(helper) {
                        errors.at(attr, format!("`#[{helper}]` is given twice; keep one"));
                    }
                }
            }
            let Some(ident) = field.ident.clone() else {
                continue;
            };
            parsed.push(Field {
                ident,
                ty: field.ty.clone(),
                key,
                index,
                unique,
            });
        }
        Some(Table {
            ident: item.ident.clone(),
            vis: item.vis.clone(),
            generics: item.generics.clone(),
            // Without a name (reported), the expansion goes on with the one the error suggests, so
            // the one mistake is not reported again at every use.
            name: name.unwrap_or_else(|| LitStr::new(&suggested(&item.ident), item.ident.span())),
            fields: parsed,
        })
    }

    /// The primary key's field, once validation has found exactly one.
    pub(crate) fn key(&self) -> Option<&Field> {
        self.fields.iter().find(|field| field.key.is_some())
    }
}

/// `name = ".."`.
fn parse_name(args: TokenStream, ident: &syn::Ident, errors: &mut Errors) -> Option<LitStr> {
    let help = format!(
        "a read model needs its name: `#[read_model(name = \"{}\")]`",
        suggested(ident)
    );
    if args.is_empty() {
        errors.at(ident, help);
        return None;
    }
    let parser = |input: syn::parse::ParseStream<'_>| {
        let key: syn::Ident = input.parse()?;
        if key != crate::symbol::NAME {
            return Err(syn::Error::new_spanned(
                &key,
                format!("unknown `#[read_model]` argument `{key}`; expected `name = \"..\"`"),
            ));
        }
        input.parse::<syn::Token![=]>()?;
        let name: LitStr = input.parse()?;
        let _ = input.parse::<Option<syn::Token![,]>>()?;
        if !input.is_empty() {
            return Err(input.error("`#[read_model]` takes one argument, `name = \"..\"`"));
        }
        Ok(name)
    };
    match parser.parse2(args) {
        Ok(name) => Some(name),
        Err(error) => {
            errors.push(error);
            None
        }
    }
}

/// The name suggested for the row struct `ident`: its name in kebab case.
fn suggested(ident: &syn::Ident) -> String {
    heck::ToKebabCase::to_kebab_case(names::plain(ident).as_str())
}

/// The projections' `impl` block.
pub(crate) struct Projections {
    pub(crate) projections: Vec<Projection>,
}

/// One `async fn on_<event>(event: Projected<'_, Event>, table: &mut Table<'_, Self>)`.
pub(crate) struct Projection {
    pub(crate) function: syn::Ident,
    /// Whether it is `async`: one that is not is reported, and left out of the dispatch.
    pub(crate) is_async: bool,
    /// The event type, when the first argument names one.
    pub(crate) event: Option<Type>,
    /// Whether `validate` refused its event type already (one its name does not say): left
    /// out of the expansion, so the refusal is its one error.
    pub(crate) refused: bool,
}

impl Projections {
    /// Reads each function of the block; what is not a function is reported.
    pub(crate) fn parse(item: &ItemImpl, errors: &mut Errors) -> Projections {
        let mut projections = Vec::new();
        for member in &item.items {
            let ImplItem::Fn(function) = member else {
                errors.at(
                    member,
                    "a read model's `#[read_model] impl` holds only its projections, `async fn on_<event>(..)`; put queries and helpers in another `impl` block",
                );
                continue;
            };
            let event = match function.sig.inputs.first() {
                Some(FnArg::Typed(arg)) => event_of(&arg.ty),
                _ => None,
            };
            projections.push(Projection {
                function: function.sig.ident.clone(),
                is_async: function.sig.asyncness.is_some(),
                refused: false,
                event,
            });
        }
        Projections { projections }
    }
}

/// `Event` in `Projected<'_, Event>`.
fn event_of(ty: &Type) -> Option<Type> {
    let Type::Path(path) = ty else { return None };
    let last = path.path.segments.last()?;
    if last.ident != crate::symbol::PROJECTED_CONTEXT {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    args.args.iter().rev().find_map(|arg| match arg {
        GenericArgument::Type(ty) => Some(ty.clone()),
        _ => None,
    })
}
