//! Generated names, by their documented patterns.

use heck::ToUpperCamelCase;
use proc_macro2::Span;
use syn::Ident;

/// `<Name>Patch`.
pub(crate) fn patch_type(state: &Ident) -> Ident {
    Ident::new(&format!("{state}Patch"), state.span())
}

/// `At<Field>`: what `at_<field>` returns.
pub(crate) fn at_type(field: &str) -> Ident {
    Ident::new(
        &format!("At{}", field.to_upper_camel_case()),
        Span::call_site(),
    )
}
