//! Every path generated code uses, spelled once and absolute, so a user's `Option`, `Result`,
//! `str` or `core` cannot shadow it.

use proc_macro2::TokenStream;
use quote::quote;

/// `::bounda::__private`, where the runtime items generated code needs are re-exported.
pub(crate) fn private() -> TokenStream {
    quote!(::bounda::__private)
}

/// `::core::option::Option`.
pub(crate) fn option() -> TokenStream {
    quote!(::core::option::Option)
}

/// `::core::result::Result`.
pub(crate) fn result() -> TokenStream {
    quote!(::core::result::Result)
}

/// `::core::primitive::str`.
pub(crate) fn str() -> TokenStream {
    quote!(::core::primitive::str)
}

/// `::std::string::String`.
pub(crate) fn string() -> TokenStream {
    quote!(::std::string::String)
}

/// `::core::default::Default`.
pub(crate) fn default() -> TokenStream {
    quote!(::core::default::Default)
}

/// `::core::fmt::Debug`.
pub(crate) fn debug() -> TokenStream {
    quote!(::core::fmt::Debug)
}

/// `::core::convert::From`.
pub(crate) fn from() -> TokenStream {
    quote!(::core::convert::From)
}

/// `::core::panic!`, spanned at `span`: a failed `const` check is reported where its panic is.
pub(crate) fn panic_at(span: proc_macro2::Span) -> TokenStream {
    quote::quote_spanned!(span=> ::core::panic!)
}

/// `::std::format!`.
pub(crate) fn format() -> TokenStream {
    quote!(::std::format!)
}

/// A message for `panic!` in a generated check: braces escaped, so user text such as a
/// `timeout` literal cannot be read as a format argument.
pub(crate) fn panic_message(message: &str) -> String {
    message.replace('{', "{{").replace('}', "}}")
}
