//! The rules the macros can decide from syntax alone, one `check_*` each. Rules that need types
//! or both items are asserted in the expansion through `::bounda::__private` (see
//! `expand/state.rs` and `expand/handlers.rs`). The shape of each handler is checked while it is
//! read (`ast.rs`), since a handler of the wrong shape is left out of the dispatch.

use heck::ToSnakeCase;
use proc_macro2::Span;
use quote::ToTokens;
use syn::{ImplItem, ReturnType};

use crate::errors::Errors;
use crate::names;
use crate::process::ast::{Handlers, State};
use crate::process::attr::ProcessArgs;
use crate::symbol;

/// A process names its main aggregate and what starts it (a malformed value is reported where it
/// is parsed).
pub(crate) fn check_required_args(args: &ProcessArgs, errors: &mut Errors) {
    let given = |key: &str| args.given.iter().any(|given| given == key);
    if !given(symbol::ON) {
        errors.push(syn::Error::new(
            Span::call_site(),
            "`#[process]` needs the aggregate it follows; add `on = Order`",
        ));
    }
    if !given(symbol::STARTED_BY) {
        errors.push(syn::Error::new(
            Span::call_site(),
            "`#[process]` needs the events that start it; add `started_by = [OrderPlaced]`",
        ));
    }
}

/// The state's version, from 1, with the shape of each older one: `version = 3` reads
/// versions 1 and 2 through `migrate = [FlowV1, FlowV2]`, in order, each shape listed once.
/// Returns the version (1 when it is not given or is refused), and whether its older shapes
/// are well listed, so that they are expanded.
pub(crate) fn check_state_version(
    args: &ProcessArgs,
    state: &State,
    errors: &mut Errors,
) -> (u32, bool) {
    let version = match &args.version {
        None => 1,
        Some(literal) => match literal.base10_parse::<u32>() {
            Ok(0) => {
                errors.at(
                    literal,
                    "versions count from 1: a state as first deployed is `version = 1`",
                );
                return (1, false);
            }
            Ok(version) if version > crate::derive::versions::MAX_VERSION => {
                errors.at(
                    literal,
                    format!(
                        "a version above {} is not a version a state reaches; count one per change of its shape",
                        crate::derive::versions::MAX_VERSION
                    ),
                );
                return (1, false);
            }
            Ok(version) => version,
            Err(error) => {
                errors.push(error);
                return (1, false);
            }
        },
    };
    let name = names::plain(&state.item.ident);
    let example = |version: u32| {
        (1..version)
            .map(|older| format!("{name}V{older}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match (&args.migrate, &args.version) {
        (Some((key, _)), None) => {
            errors.at(
                key,
                "`migrate` reads the older versions of a versioned state: say which version this one is, `version = 2` after one change",
            );
            (1, false)
        }
        (None, Some(literal)) if version > 1 => {
            errors.at(
                literal,
                format!(
                    "a state at version {version} reads every older version as stored: list their shapes from version 1, `migrate = [{}]`",
                    example(version)
                ),
            );
            (version, false)
        }
        (Some((key, shapes)), Some(_)) => {
            let mut ok = true;
            for (index, shape) in shapes.iter().enumerate() {
                if shapes[..index].contains(shape) {
                    ok = false;
                    errors.at(
                        shape,
                        "this shape is listed twice; each older version has a shape of its own",
                    );
                }
            }
            if shapes.len() != version as usize - 1 {
                ok = false;
                errors.at(
                    key,
                    format!(
                        "a state at version {version} has {} older version(s), and `migrate` lists {} shape(s): list one for each, from version 1, `migrate = [{}]`",
                        version - 1,
                        shapes.len(),
                        example(version)
                    ),
                );
            }
            (version, ok)
        }
        _ => (version, true),
    }
}

/// No deadline field is named `timeout`: that deadline is the process lifetime.
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

/// No field is named `new` when deadlines exist: `At<Field>::new(next)` is the constructor
/// that makes a deadline handler set its deadline.
pub(crate) fn check_reserved_field(state: &State, errors: &mut Errors) {
    if state.deadlines().next().is_none() {
        return;
    }
    for field in &state.fields {
        if field.name() == symbol::RESERVED_FIELD {
            errors.at(
                &field.ident,
                "a process with deadlines cannot have a field named `new`: `At<Field>::new(..)` \
                 builds what its deadline handlers return; rename the field",
            );
        }
    }
}

/// One handler per event: a second handler for the same event is left out.
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

/// An `at_<field>` handler returns its own `At<Field>`: not another deadline's, and not the
/// state's plain patch, which could leave the deadline where it is. Only the first type argument
/// of its return type is read (`Result<AtOther, _>`), so an error type that happens to start with
/// `At` is not mistaken for one; what this cannot tell by name the type check still refuses.
pub(crate) fn check_at_return_names(handlers: &mut Handlers, errors: &mut Errors) {
    let patch = match &handlers.self_ty {
        syn::Type::Path(path) => path
            .path
            .segments
            .last()
            .map(|segment| names::patch_type(&segment.ident)),
        _ => None,
    };
    let fields: Vec<String> = handlers.at.iter().map(|h| h.field.clone()).collect();
    for handler in handlers
        .at
        .iter_mut()
        .filter(|handler| !handler.is_timeout())
    {
        let expected = names::at_type(&handler.field);
        let Some(returned) = first_type_argument(&handler.output) else {
            continue;
        };
        let text = returned.to_string();
        let rest = text
            .strip_prefix(symbol::AT_TYPE_PREFIX)
            .unwrap_or_default();
        let message = if rest.starts_with(|c: char| c.is_ascii_uppercase()) && *returned != expected
        {
            // The result names a deadline no other handler of this impl takes: most likely the
            // handler's name is what is misspelt (`at_remindat` returning `AtRemindAt`), so
            // that comes first, and the result this name asks for second.
            let named = rest.to_snake_case();
            if fields.contains(&named) {
                format!(
                    "`{}` returns `{text}`, the result of another deadline; return `{expected}`",
                    handler.ident
                )
            } else {
                handler.stands_for = Some(named.clone());
                format!(
                    "`{}` returns `{text}`, the result of deadline `{named}`: if it is that \
                     deadline's handler, name it `at_{named}`; if it is `{}`'s, return \
                     `{expected}`",
                    handler.ident, handler.field
                )
            }
        } else if patch.as_ref().is_some_and(|patch| *returned == *patch) {
            format!(
                "`{}` returns `{text}`, which may leave `{}` due, to run again at once; return `{expected}`, built with `{expected}::new(next)` where `next` is a later moment (`cx.after(..)`) or `Deadline::none()`",
                handler.ident, handler.field
            )
        } else {
            continue;
        };
        errors.at(returned, message);
        handler.refused = true;
    }
}

/// `AtX` in `-> Result<AtX, E>`: the last identifier of the first type argument.
fn first_type_argument(output: &ReturnType) -> Option<&syn::Ident> {
    let ReturnType::Type(_, ty) = output else {
        return None;
    };
    let syn::Type::Path(path) = &**ty else {
        return None;
    };
    let syn::PathArguments::AngleBracketed(args) = &path.path.segments.last()?.arguments else {
        return None;
    };
    match args.args.first()? {
        syn::GenericArgument::Type(syn::Type::Path(inner)) => {
            Some(&inner.path.segments.last()?.ident)
        }
        _ => None,
    }
}

/// Removes the functions named in `dropped` from the emitted `impl`.
fn drop_functions(handlers: &mut Handlers, dropped: &[syn::Ident]) {
    handlers.item.items.retain(|item| match item {
        ImplItem::Fn(function) => !dropped.contains(&function.sig.ident),
        _ => true,
    });
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::*;

    fn handlers(tokens: proc_macro2::TokenStream) -> (Handlers, Errors) {
        let mut errors = Errors::default();
        let item = syn::parse2(tokens).expect("an impl");
        let handlers = Handlers::from_item(item, &mut errors).expect("the right shape");
        (handlers, errors)
    }

    fn state(tokens: proc_macro2::TokenStream) -> (State, Errors) {
        let mut errors = Errors::default();
        let item = syn::parse2(tokens).expect("a struct");
        let state = State::from_item(item, &mut errors).expect("the right shape");
        (state, errors)
    }

    #[test]
    fn reads_handlers_and_their_events() {
        let (handlers, errors) = handlers(quote! {
            impl OrderPayment {
                async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> Result<()> { Ok(()) }
                #[correlate(Self::order_of)]
                async fn on_payment_settled(cx: On<'_, Self, payment::PaymentSettled>) -> Result<()> { Ok(()) }
                async fn at_next_reminder(cx: At<'_, Self>) -> Result<AtNextReminder> { todo!() }
                async fn at_timeout(cx: At<'_, Self>) -> Result<()> { Ok(()) }
                fn order_of(e: &PaymentSettled) -> Option<String> { None }
            }
        });
        assert!(errors.is_empty(), "{:?}", errors.messages());
        let events: Vec<_> = handlers
            .on
            .iter()
            .map(|h| h.event.to_token_stream().to_string().replace(' ', ""))
            .collect();
        assert_eq!(events, ["OrderPlaced", "payment::PaymentSettled"]);
        assert!(handlers.on[1].correlate.is_some());
        let fields: Vec<_> = handlers.at.iter().map(|h| h.field.as_str()).collect();
        assert_eq!(fields, ["next_reminder", "timeout"]);
        assert!(handlers.at[1].is_timeout());
        assert_eq!(handlers.item.items.len(), 5, "helpers stay in the impl");
    }

    #[test]
    fn duplicate_handlers_are_reported_and_left_out() {
        let (mut handlers, mut errors) = handlers(quote! {
            impl P {
                async fn on_order_paid(cx: On<'_, Self, OrderPaid>) -> Result<()> { Ok(()) }
                async fn on_again_order_paid(cx: On<'_, Self, OrderPaid>) -> Result<()> { Ok(()) }
                async fn at_ping(cx: At<'_, Self>) -> Result<AtPing> { todo!() }
                async fn at_ping(cx: At<'_, Self>) -> Result<AtPing> { todo!() }
            }
        });
        check_duplicate_events(&mut handlers, &mut errors);
        check_duplicate_deadlines(&mut handlers, &mut errors);
        assert_eq!(
            errors.messages(),
            [
                "event `OrderPaid` already has a handler, `on_order_paid`; merge `on_again_order_paid` into it",
                "deadline `ping` already has a handler `at_ping`; keep one",
            ]
        );
        assert_eq!(handlers.on.len(), 1);
        assert_eq!(handlers.at.len(), 1);
        assert_eq!(
            handlers.item.items.len(),
            2,
            "the duplicates are not emitted"
        );
    }

    #[test]
    fn handler_shapes_are_checked() {
        let (handlers, errors) = handlers(quote! {
            impl P {
                fn on_order_paid(cx: On<'_, Self, OrderPaid>) -> Result<()> { Ok(()) }
                async fn on_order_placed(cx: On<'_, Self, OrderPaid>) -> Result<()> { Ok(()) }
                async fn on_thing(cx: Context<'_, Self>) -> Result<()> { Ok(()) }
                async fn at_ping(&self) -> Result<AtPing> { todo!() }
                async fn at_pong(a: At<'_, Self>, b: u32) -> Result<AtPong> { todo!() }
            }
        });
        assert_eq!(
            errors.messages(),
            [
                "handler `on_order_paid` must be `async`; write `async fn on_order_paid(..)`",
                "handler `on_order_placed` takes `OrderPaid`; name it `on_order_paid`",
                "handler `on_thing` takes `cx: On<'_, Self, Event>` with the event it handles",
                "handler `at_ping` takes `cx: At<'_, Self>`, not `self`; the state is `cx.state()`",
                "handler `at_pong` takes one argument, `cx: At<'_, Self>`",
            ]
        );
        assert_eq!(
            handlers.on.len(),
            1,
            "only the well-formed `on_order_placed` is dispatched"
        );
        assert!(handlers.at.is_empty());
    }

    #[test]
    fn reserved_deadline_is_refused_raw_or_not() {
        let (state, mut errors) = state(quote! {
            struct P {
                #[deadline] timeout: Deadline,
                #[deadline] r#timeout: Deadline,
                timeout_note: u32,
                #[deadline] #[deadline] ping: Deadline,
            }
        });
        check_reserved_deadline(&state, &mut errors);
        let messages = errors.messages();
        assert_eq!(messages.len(), 3, "{messages:?}");
        assert!(messages[0].contains("given twice"));
        assert!(messages[1].starts_with("a deadline cannot be named `timeout`"));
        assert!(messages[2].starts_with("a deadline cannot be named `timeout`"));
        assert_eq!(state.deadlines().count(), 3);
        let emitted = state.item.to_token_stream().to_string();
        assert!(
            !emitted.contains("deadline"),
            "`#[deadline]` is stripped: {emitted}"
        );
    }

    #[test]
    fn a_deadline_handler_returning_another_deadlines_type_is_refused() {
        let (mut handlers, mut errors) = handlers(quote! {
            impl P {
                async fn at_next_reminder(cx: At<'_, Self>) -> Result<AtPaymentDeadline> { todo!() }
                async fn at_payment_deadline(cx: At<'_, Self>) -> Result<AtPaymentDeadline> { todo!() }
                async fn at_timeout(cx: At<'_, Self>) -> Result<AtPaymentDeadline> { todo!() }
            }
        });
        check_at_return_names(&mut handlers, &mut errors);
        assert_eq!(
            errors.messages(),
            [
                "`at_next_reminder` returns `AtPaymentDeadline`, the result of another deadline; return `AtNextReminder`"
            ]
        );
    }

    #[test]
    fn a_deadline_handler_whose_name_is_misspelt_is_told_to_rename_first() {
        let (mut handlers, mut errors) = handlers(quote! {
            impl P {
                async fn at_remindat(cx: At<'_, Self>) -> Result<AtRemindAt> { todo!() }
            }
        });
        check_at_return_names(&mut handlers, &mut errors);
        assert_eq!(
            errors.messages(),
            [
                "`at_remindat` returns `AtRemindAt`, the result of deadline `remind_at`: if it is that deadline's handler, name it `at_remind_at`; if it is `remindat`'s, return `AtRemindat`"
            ]
        );
    }
}
