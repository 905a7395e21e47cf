//! Collects errors so one pass reports every mistake, each at its own token.

use std::fmt::Display;

use proc_macro2::TokenStream;
use quote::ToTokens;

/// An accumulator of spanned errors.
#[derive(Default)]
pub(crate) struct Errors {
    errors: Vec<syn::Error>,
}

impl Errors {
    /// Records `message` at the tokens of `at`.
    pub(crate) fn at<T: ToTokens, M: Display>(&mut self, at: T, message: M) {
        self.errors.push(syn::Error::new_spanned(at, message));
    }

    /// Records an error already built.
    pub(crate) fn push(&mut self, error: syn::Error) {
        self.errors.push(error);
    }

    /// The errors as `compile_error!` invocations, empty when there are none.
    pub(crate) fn to_compile_errors(&self) -> TokenStream {
        self.errors
            .iter()
            .map(syn::Error::to_compile_error)
            .collect()
    }

    /// The messages recorded, in order.
    #[cfg(test)]
    pub(crate) fn messages(&self) -> Vec<String> {
        self.errors.iter().map(ToString::to_string).collect()
    }

    /// Whether nothing was recorded.
    pub(crate) fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }
}
