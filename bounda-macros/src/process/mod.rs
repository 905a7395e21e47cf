//! `#[process]`: on the state struct, and on the `impl` that holds its handlers.

mod ast;
mod attr;
mod expand;
mod validate;

use proc_macro2::TokenStream;
use quote::{ToTokens, quote};
use syn::Item;

use crate::errors::Errors;

/// Expands `#[process(..)] struct` or `#[process] impl`.
pub(crate) fn expand(args: TokenStream, input: TokenStream) -> TokenStream {
    let item = match syn::parse2::<Item>(input.clone()) {
        Ok(item) => item,
        Err(error) => return error.to_compile_error(),
    };
    let args = match syn::parse2::<attr::RawArgs>(args) {
        Ok(args) => args,
        Err(error) => {
            let error = error.to_compile_error();
            let item = match item {
                Item::Struct(item) => ast::strip_deadlines(item).into_token_stream(),
                Item::Impl(item) => ast::strip_correlates(item).into_token_stream(),
                other => other.into_token_stream(),
            };
            return quote!(#error #item);
        }
    };
    match item {
        Item::Struct(item) => state(args, item),
        Item::Impl(item) => handlers(args, item),
        other => {
            let error = syn::Error::new_spanned(
                item_token(&other),
                "`#[process(..)]` goes on the state struct of a process, and `#[process]` on the `impl` block with its handlers",
            )
            .to_compile_error();
            quote!(#error #other)
        }
    }
}

/// The state struct: patch types, `ProcessState`, checks.
fn state(args: attr::RawArgs, item: syn::ItemStruct) -> TokenStream {
    let mut errors = Errors::default();
    let args = args.into_process_args(&mut errors);
    let state = match ast::State::from_item(item.clone(), &mut errors) {
        Ok(state) => state,
        Err(error) => {
            let error = error.to_compile_error();
            let item = ast::strip_deadlines(item);
            return quote!(#error #item);
        }
    };
    validate::check_required_args(&args, &mut errors);
    validate::check_reserved_deadline(&state, &mut errors);
    validate::check_reserved_field(&state, &mut errors);
    let (version, shapes_listed) = validate::check_state_version(&args, &state, &mut errors);
    let item = &state.item;
    let patch = expand::patch_types(&state);
    let process_state = expand::process_state(&args, &state, (version, shapes_listed));
    let errors = errors.to_compile_errors();
    quote! {
        #errors
        #item
        #patch
        #process_state
    }
}

/// The handler block: `Process`, dispatch, checks.
fn handlers(args: attr::RawArgs, item: syn::ItemImpl) -> TokenStream {
    let mut errors = Errors::default();
    if let Some(key) = args.first_key() {
        errors.at(
            key,
            "`#[process]` on the handlers takes no arguments; they go on the state struct's `#[process(..)]`",
        );
    }
    let mut handlers = match ast::Handlers::from_item(item.clone(), &mut errors) {
        Ok(handlers) => handlers,
        Err(error) => {
            let error = error.to_compile_error();
            let item = ast::strip_correlates(item);
            return quote!(#error #item);
        }
    };
    validate::check_duplicate_events(&mut handlers, &mut errors);
    validate::check_duplicate_deadlines(&mut handlers, &mut errors);
    validate::check_at_return_names(&mut handlers, &mut errors);
    let item = &handlers.item;
    let process = expand::process(&handlers);
    let errors = errors.to_compile_errors();
    quote! {
        #errors
        #item
        #process
    }
}

/// The token that names what kind of item `item` is, to point an error at.
fn item_token(item: &Item) -> TokenStream {
    match item {
        Item::Enum(item) => {
            let token = item.enum_token;
            quote!(#token)
        }
        Item::Fn(item) => {
            let sig = &item.sig;
            quote!(#sig)
        }
        Item::Trait(item) => {
            let token = item.trait_token;
            quote!(#token)
        }
        other => quote!(#other),
    }
}
