//! The check that a handled event is a variant of its aggregate's events enum: an event left
//! out of it can never be stored, so a handler of it could never run.

use proc_macro2::{Span, TokenStream};
use quote::quote_spanned;

use crate::paths;

/// What an event that is never stored means for a handler.
pub(crate) const HANDLER: &str = "this handler can never run";
/// What it means for a starting or completing event.
pub(crate) const LIFECYCLE: &str = "it can never start or complete this process";

/// A `const` check that `declared` (a `bool` expression: is the event in its aggregate's enum?)
/// holds, reported at `span`, the event type named `name`; `consequence` says what it breaks.
pub(crate) fn in_its_aggregate(
    declared: TokenStream,
    name: &str,
    span: Span,
    consequence: &str,
) -> TokenStream {
    let message = paths::panic_message(&format!(
        "event `{name}` is not in its aggregate's events enum, so it is never stored and {consequence}; add a variant wrapping `{name}` to the aggregate's `#[derive(Events)]` enum"
    ));
    let panic = paths::panic_at(span);
    quote_spanned! {span=>
        const _: () = if !#declared {
            #panic(#message)
        };
    }
}

/// The name of the event type `path`, as the user wrote it.
pub(crate) fn name(path: &syn::Path) -> String {
    path.segments
        .last()
        .map(|segment| crate::names::plain(&segment.ident))
        .unwrap_or_default()
}
