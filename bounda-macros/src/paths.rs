//! Every path generated code uses, absolute so a user's `Option`, `Result` or `core` cannot
//! shadow it.

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
