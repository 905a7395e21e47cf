//! Expansion: cannot fail once validation has passed; with errors it still emits the user's
//! items and the trait impls, so one mistake gives one error.

mod handlers;
mod patch;
mod state;

pub(crate) use handlers::process;
pub(crate) use patch::patch_types;
pub(crate) use state::process_state;

use proc_macro2::TokenStream;
use quote::quote_spanned;
use syn::spanned::Spanned;

/// `event_info::<Event>()`, spanned at the user's event type: every use of the event type that
/// needs it to be an `Event` goes through here, so a type that is not gives one error.
pub(crate) fn event_info(event: &syn::Path) -> TokenStream {
    let private = crate::paths::private();
    quote_spanned!(event.span()=> #private::event_info::<#event>())
}
