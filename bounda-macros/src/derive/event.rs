//! `#[derive(Event)]` on an event payload struct.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{DeriveInput, LitStr, Path};

use crate::derive::versions::{self, Versions};
use crate::errors::Errors;
use crate::names;
use crate::paths;
use crate::serde_names::{rename, serde_value};
use crate::symbol;

/// `impl Event`: the aggregate, the type name and the payload's field names as serialised.
pub(crate) fn expand(input: DeriveInput) -> TokenStream {
    let mut errors = Errors::default();
    let mut aggregate: Option<Path> = None;
    let mut name: Option<LitStr> = None;
    let mut versions = Versions::default();
    for attr in input
        .attrs
        .iter()
        .filter(|attr| attr.path().is_ident(symbol::EVENT))
    {
        let parsed = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident(symbol::AGGREGATE) {
                if aggregate.is_some() {
                    return Err(meta.error("`aggregate` is given twice; keep one"));
                }
                aggregate = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident(symbol::NAME) {
                if name.is_some() {
                    return Err(meta.error("`name` is given twice; keep one"));
                }
                name = Some(meta.value()?.parse()?);
            } else if !versions.parse(&meta)? {
                return Err(meta.error(
                    "unknown `#[event]` argument; expected `aggregate = Type`, `name = \"..\"`, `version = 2`, `upcast(1 = ..)` or `renamed_from(\"..\")`",
                ));
            }
            Ok(())
        });
        if let Err(error) = parsed {
            errors.push(error);
        }
    }
    let ident = &input.ident;
    let rename_all = serde_value(&input.attrs, "rename_all");
    let fields: Vec<String> = match &input.data {
        syn::Data::Struct(data) => data
            .fields
            .iter()
            .filter_map(|field| {
                let ident = field.ident.as_ref()?;
                let name = serde_value(&field.attrs, "rename").unwrap_or_else(|| {
                    let plain = names::plain(ident);
                    rename_all
                        .as_deref()
                        .and_then(|rule| rename(&plain, rule))
                        .unwrap_or(plain)
                });
                Some(name)
            })
            .collect(),
        _ => {
            errors.at(
                ident,
                "`#[derive(Event)]` goes on a struct; gather an aggregate's events in an enum with `#[derive(Events)]`",
            );
            Vec::new()
        }
    };
    if !input.generics.params.is_empty() {
        errors.at(&input.generics, "an event cannot be generic");
    }
    let Some(aggregate) = aggregate else {
        errors.at(
            ident,
            format!("event `{ident}` needs its aggregate; add `#[event(aggregate = Order)]`"),
        );
        return errors.to_compile_errors();
    };
    let type_name = name.map_or_else(|| names::plain(ident), |name| name.value());
    let shape_ok = errors.is_empty();
    let (version, shapes) = versions.validate(&type_name, &mut errors);
    if errors.is_empty() {
        let renamed_from = versions.renamed_from();
        return event_impl(ident, &aggregate, &type_name, &fields, &renamed_from, {
            versions::expand_read(version, &shapes)
        });
    }
    if !shape_ok {
        return errors.to_compile_errors();
    }
    // Only its versions are wrong: the impl still stands, at version 1 with no older shapes,
    // so the enum and the handlers that use the event report nothing more. The error above is
    // the one to fix.
    let errors = errors.to_compile_errors();
    let standing = event_impl(
        ident,
        &aggregate,
        &type_name,
        &fields,
        &[],
        versions::expand_read(1, &[]),
    );
    quote!(#errors #standing)
}

/// `impl Event for ident`.
fn event_impl(
    ident: &syn::Ident,
    aggregate: &Path,
    type_name: &str,
    fields: &[String],
    renamed_from: &[String],
    read: TokenStream,
) -> TokenStream {
    let private = paths::private();
    let str = paths::str();
    quote! {
        impl #private::Event for #ident {
            type Aggregate = #aggregate;
            const TYPE: &'static #str = #type_name;
            const FIELDS: &'static [&'static #str] = &[#(#fields),*];
            const RENAMED_FROM: &'static [&'static #str] = &[#(#renamed_from),*];
            #read
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_names_follow_serde_renames() {
        let input: DeriveInput = syn::parse_quote! {
            #[event(aggregate = Payment)]
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct PaymentSettled {
                order_id: String,
                #[serde(rename = "ref", default)]
                reference: String,
                r#type: String,
            }
        };
        let output = expand(input).to_string();
        assert!(
            output.contains(r#"& ["orderId" , "ref" , "type"]"#),
            "{output}"
        );
    }
}
