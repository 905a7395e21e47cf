//! The rules the macros can decide from syntax alone, one `check_*` each. Rules that need types
//! are asserted in the expansion through `::bounda::__private` (see `expand/checks.rs`).

use proc_macro2::Span;
use quote::ToTokens;
use syn::{ImplItem, ReturnType};

use crate::errors::Errors;
use crate::names;
use crate::process::ast::{Handlers, State};
use crate::process::attr::ProcessArgs;
use crate::symbol;

/// A process names its main aggregate and what starts it.
pub(crate) fn check_required_args(args: &ProcessArgs, errors: &mut Errors) {
    if args.on.is_none() {
        errors.push(syn::Error::new(
            Span::call_site(),
            "`#[process]` needs the aggregate it follows; add `on = Order`",
        ));
    }
    if args.started_by.is_empty() {
        errors.push(syn::Error::new(
            Span::call_site(),
            "`#[process]` needs the events that start it; add `started_by = [OrderPlaced]`",
        ));
    }
}

/// No deadline field is named `timeout`: that deadline is the process lifetime (spec 97, 189).
pub(crate) fn check_reserved_deadline(state: &State, errors: &mut Errors) {
    for field in state.deadlines() {
        if field.name() == symbol::RESERVED_DEADLINE {
            errors.at(
                &field.ident,
                "a deadline cannot be named `timeout`: `timeout` is reserved for the process lifetime, \
                 set by `#[process(timeout = ..)]` and handled by `at_timeout`; rename the field",
            );
        }
    }
}

/// One handler per event: a second handler for the same event is left out (spec 53).
pub(crate) fn check_duplicate_events(handlers: &mut Handlers, errors: &mut Errors) {
    let mut seen: Vec<(String, syn::Ident)> = Vec::new();
    let mut dropped = Vec::new();
    handlers.on.retain(|handler| {
        let key = handler.event.to_token_stream().to_string();
        if let Some((_, first)) = seen.iter().find(|(seen, _)| *seen == key) {
            let event = &handler
                .event
                .segments
                .last()
                .map(|s| s.ident.to_string())
                .unwrap_or(key);
            errors.at(
                &handler.event,
                format!(
                    "event `{event}` already has a handler, `{first}`; merge `{}` into it",
                    handler.ident
                ),
            );
            dropped.push(handler.ident.clone());
            return false;
        }
        seen.push((key, handler.ident.clone()));
        true
    });
    drop_functions(handlers, &dropped);
}

/// One handler per deadline: a second `at_<field>` of the same name is left out.
pub(crate) fn check_duplicate_deadlines(handlers: &mut Handlers, errors: &mut Errors) {
    let mut seen: Vec<String> = Vec::new();
    let mut dropped = Vec::new();
    handlers.at.retain(|handler| {
        if seen.contains(&handler.field) {
            errors.at(
                &handler.ident,
                format!(
                    "deadline `{}` already has a handler `{}`; keep one",
                    handler.field, handler.ident
                ),
            );
            dropped.push(handler.ident.clone());
            return false;
        }
        seen.push(handler.field.clone());
        true
    });
    // Both duplicates share a name: keep the first function, drop the later ones.
    let mut kept = Vec::new();
    handlers.item.items.retain(|item| match item {
        ImplItem::Fn(function) if dropped.contains(&function.sig.ident) => {
            if kept.contains(&function.sig.ident) {
                false
            } else {
                kept.push(function.sig.ident.clone());
                true
            }
        }
        _ => true,
    });
}

/// An `at_<field>` handler does not return another deadline's `At<Field>` (spec 84).
pub(crate) fn check_at_return_names(handlers: &Handlers, errors: &mut Errors) {
    for handler in handlers.at.iter().filter(|handler| !handler.is_timeout()) {
        let expected = names::at_type(&handler.field);
        let ReturnType::Type(_, ty) = &handler.output else {
            continue;
        };
        let tokens = ty.to_token_stream();
        for token in tokens.into_iter().flat_map(flatten) {
            let proc_macro2::TokenTree::Ident(ident) = token else {
                continue;
            };
            let text = ident.to_string();
            let looks_like_at = text.len() > 2
                && text.starts_with("At")
                && text[2..].starts_with(|c: char| c.is_ascii_uppercase());
            if looks_like_at && ident != expected {
                errors.at(
                    &ident,
                    format!(
                        "`{}` returns `{text}`, the result of another deadline; return `{expected}`",
                        handler.ident
                    ),
                );
            }
        }
    }
}

/// Every token of a tree, groups opened.
fn flatten(token: proc_macro2::TokenTree) -> Vec<proc_macro2::TokenTree> {
    match token {
        proc_macro2::TokenTree::Group(group) => {
            group.stream().into_iter().flat_map(flatten).collect()
        }
        other => vec![other],
    }
}

/// Removes the functions named in `dropped` from the emitted `impl`.
fn drop_functions(handlers: &mut Handlers, dropped: &[syn::Ident]) {
    handlers.item.items.retain(|item| match item {
        ImplItem::Fn(function) => !dropped.contains(&function.sig.ident),
        _ => true,
    });
}
