//! Generated names, by their documented patterns. Raw identifiers (`r#Type`) lose their `r#`.

use heck::ToUpperCamelCase;
use proc_macro2::Span;
use quote::format_ident;
use syn::Ident;
use syn::ext::IdentExt;

/// `<Name>Patch`.
pub(crate) fn patch_type(state: &Ident) -> Ident {
    format_ident!("{}Patch", state.unraw(), span = state.span())
}

/// `At<Field>`: what `at_<field>` returns.
pub(crate) fn at_type(field: &str) -> Ident {
    Ident::new(
        &format!("At{}", field.to_upper_camel_case()),
        Span::call_site(),
    )
}

/// The name users and storage see: the identifier without `r#`.
pub(crate) fn plain(ident: &Ident) -> String {
    ident.unraw().to_string()
}
