//! Expansion: cannot fail once validation has passed; with errors it still emits the user's
//! items and the trait impls, so one mistake gives one error.

mod handlers;
mod patch;
mod state;

pub(crate) use handlers::process;
pub(crate) use patch::patch_types;
pub(crate) use state::process_state;
