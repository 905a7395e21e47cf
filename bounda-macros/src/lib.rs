//! The macros of bounda. Use them through the `bounda` crate, which re-exports them and documents
//! them; this crate's items are not meant to be named directly.
//!
//! Every macro follows the same pipeline: `attr` (arguments to typed options, with spans), `ast`
//! (an intermediate form keeping the user's tokens), `validate` (small `check_*` functions that
//! collect errors), `expand` (which cannot fail). Rules that need types are asserted in the
//! expansion through `::bounda::__private`, spanned at the user's token.

mod calendar;
mod derive;
mod errors;
mod member;
mod names;
mod paths;
mod policy;
mod ports;
mod process;
mod read_model;
mod register;
mod serde_names;
mod symbol;

use proc_macro::TokenStream;

/// Declares a process: on its state struct with arguments, on its handler `impl` without.
///
/// See the `bounda` crate's documentation of `process` for the full contract.
#[proc_macro_attribute]
pub fn process(args: TokenStream, input: TokenStream) -> TokenStream {
    let output = process::expand(args.into(), input.into());
    debug("process", &output);
    output.into()
}

/// Declares a policy on an `async fn <action>_on_<event>(cx: Reaction<'_, Event>)`, or
/// registers a hand-written `impl Policy for ..`.
#[proc_macro_attribute]
pub fn policy(args: TokenStream, input: TokenStream) -> TokenStream {
    let output = policy::expand(args.into(), input.into());
    debug("policy", &output);
    output.into()
}

/// Declares a read model: `#[read_model(name = "..")]` on its row struct, `#[read_model]` on
/// the `impl` block of its projections.
///
/// See the `bounda` crate's documentation of `read_model` for the full contract.
#[proc_macro_attribute]
pub fn read_model(args: TokenStream, input: TokenStream) -> TokenStream {
    let output = read_model::expand(args.into(), input.into());
    debug("read_model", &output);
    output.into()
}

/// Registers a hand-written `impl Command for ..`, so apps can run it when it is scheduled.
#[proc_macro_attribute]
pub fn command(args: TokenStream, input: TokenStream) -> TokenStream {
    let input = proc_macro2::TokenStream::from(input);
    let output = match syn::parse2::<syn::ItemImpl>(input.clone()) {
        Ok(item) => register::expand_impl(register::Kind::Command, args.into(), item),
        Err(_) => {
            let error = syn::Error::new(
                proc_macro2::Span::call_site(),
                "`#[command]` goes on an `impl Command for YourCommand`",
            )
            .to_compile_error();
            quote::quote!(#error #input)
        }
    };
    debug("command", &output);
    output.into()
}

/// A time zone of the bundled IANA database, its name checked while compiling.
#[proc_macro]
pub fn zone(input: TokenStream) -> TokenStream {
    expand_with(input, calendar::zone)
}

/// A time of day (`"09:00"`, `"17:30:15"`), read while compiling.
#[proc_macro]
pub fn time(input: TokenStream) -> TokenStream {
    expand_with(input, calendar::time)
}

/// A recurring rule (an RFC 5545 subset), read while compiling.
#[proc_macro]
pub fn rule(input: TokenStream) -> TokenStream {
    expand_with(input, calendar::rule)
}

/// Runs a function-like macro's expansion, its error as a compile error.
fn expand_with(
    input: TokenStream,
    expand: fn(proc_macro2::TokenStream) -> syn::Result<proc_macro2::TokenStream>,
) -> TokenStream {
    expand(input.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Marks a deadline field of a `#[process]` state. `#[process]` reads and removes it; anywhere
/// else it is an error.
#[proc_macro_attribute]
pub fn deadline(_args: TokenStream, input: TokenStream) -> TokenStream {
    let input = proc_macro2::TokenStream::from(input);
    let error = syn::Error::new(
        proc_macro2::Span::call_site(),
        "`#[deadline]` goes on a field of a `#[process(..)]` state struct, like `#[deadline] payment_deadline: Deadline`",
    )
    .to_compile_error();
    quote::quote!(#error #input).into()
}

/// Implements `Event` for an event payload struct; needs `#[event(aggregate = ..)]`.
#[proc_macro_derive(Event, attributes(event))]
pub fn derive_event(input: TokenStream) -> TokenStream {
    derive_with(input, derive::event::expand)
}

/// Implements `EventSet` for the enum of one aggregate's events.
#[proc_macro_derive(Events)]
pub fn derive_events(input: TokenStream) -> TokenStream {
    derive_with(input, derive::events::expand)
}

/// Implements `Rejection` for a command's rejection enum; messages from `#[rejection("..")]`.
#[proc_macro_derive(Rejection, attributes(rejection))]
pub fn derive_rejection(input: TokenStream) -> TokenStream {
    derive_with(input, derive::rejection::expand)
}

/// Parses a derive input and runs `expand` on it.
fn derive_with(
    input: TokenStream,
    expand: fn(syn::DeriveInput) -> proc_macro2::TokenStream,
) -> TokenStream {
    let output = match syn::parse::<syn::DeriveInput>(input) {
        Ok(input) => expand(input),
        Err(error) => error.to_compile_error(),
    };
    debug("derive", &output);
    output.into()
}

/// Prints the expansion when `BOUNDA_MACROS_DEBUG` is set.
fn debug(what: &str, output: &proc_macro2::TokenStream) {
    if std::env::var_os("BOUNDA_MACROS_DEBUG").is_some() {
        eprintln!("bounda {what} expansion:\n{output}");
    }
}
