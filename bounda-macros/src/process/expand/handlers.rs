//! `impl Process` for the handler block: the dispatch tables and the handler-side checks.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::ReturnType;
use syn::spanned::Spanned;

use crate::member;
use crate::paths;
use crate::process::ast::Handlers;
use crate::process::expand::event_info;
use crate::process::expand::state::reach_check;
use crate::register;

/// The `Process` impl and the handler-side checks.
pub(crate) fn process(handlers: &Handlers) -> TokenStream {
    let private = paths::private();
    let (option, str, string) = (paths::option(), paths::str(), paths::string());
    let self_ty = &handlers.self_ty;

    let on_keys = handlers.on.iter().map(|handler| {
        let info = event_info(&handler.event);
        quote!(#info.key)
    });
    let on_shapes = handlers.on.iter().map(|handler| {
        let info = event_info(&handler.event);
        quote!(#info.shapes)
    });
    let on_arms = handlers.on.iter().map(|handler| {
        let (event, ident) = (&handler.event, &handler.ident);
        let convert = quote_spanned! {output_span(&handler.output, ident)=>
            #private::handler_result::<Self, _>(ret)
        };
        let info = event_info(event);
        quote! {
            if event.has_key(#info.key) {
                return #option::Some(#private::boxed::<Self, _>(async move {
                    let payload = #private::decode_payload::<#event>(event)?;
                    let ret = Self::#ident(#private::On::new(cx, &payload, event)).await;
                    #convert
                }));
            }
        }
    });
    let at_names = handlers.at.iter().flat_map(|handler| {
        std::iter::once(handler.field.as_str()).chain(handler.stands_for.as_deref())
    });
    let correlated = handlers
        .on
        .iter()
        .filter(|handler| handler.correlate.is_some())
        .map(|handler| {
            let info = event_info(&handler.event);
            quote!(#info.key)
        });
    let at_arms = handlers.at.iter().map(|handler| {
        let (field, ident) = (&handler.field, &handler.ident);
        let span = output_span(&handler.output, ident);
        // `at_timeout` returns any patch; every other deadline handler its `At<Field>` (rule 4).
        let convert = if handler.is_timeout() || handler.refused {
            quote_spanned!(span=> #private::handler_result::<Self, _>(ret))
        } else {
            let strict = quote!({ #private::is_deadline::<#self_ty>(#field) });
            quote_spanned!(span=> #private::deadline_result::<Self, #strict, _>(ret))
        };
        quote! {
            #field => #option::Some(#private::boxed::<Self, _>(async move {
                let ret = Self::#ident(#private::At::new(cx, #field)).await;
                #convert
            })),
        }
    });
    let correlate_arms = handlers.on.iter().filter_map(|handler| {
        let correlate = handler.correlate.as_ref()?;
        let event = &handler.event;
        let call = quote_spanned! {correlate.span()=>
            #private::correlated(#correlate(&payload))
        };
        let info = event_info(event);
        Some(quote! {
            if event.has_key(#info.key) {
                return #option::Some(
                    #private::decode_payload::<#event>(event)
                        .map_err(#private::anyhow::Error::from)
                        .and_then(|payload| #call),
                );
            }
        })
    });
    let checks = checks(handlers);
    let registration = register::registration(register::Kind::Process, self_ty);
    quote! {
        #registration

        impl #private::Process for #self_ty {
            const ON: &'static [#private::EventKey] = &[#(#on_keys),*];
            const AT: &'static [&'static #str] = &[#(#at_names),*];
            const CORRELATED: &'static [#private::EventKey] = &[#(#correlated),*];
            const HANDLED_SHAPES: &'static [&'static [#private::EventShape]] = &[#(#on_shapes),*];

            fn on_event<'a>(
                cx: #private::Context<'a, Self>,
                event: &'a #private::RecordedEvent,
            ) -> #option<#private::HandlerFuture<'a, Self>> {
                let _ = (&cx, &event);
                #(#on_arms)*
                #option::None
            }

            fn at_deadline<'a>(
                cx: #private::Context<'a, Self>,
                field: &#str,
            ) -> #option<#private::HandlerFuture<'a, Self>> {
                let _ = &cx;
                match field {
                    #(#at_arms)*
                    _ => #option::None,
                }
            }

            fn correlate(
                event: &#private::RecordedEvent,
            ) -> #option<#private::anyhow::Result<#option<#string>>> {
                let _ = &event;
                #(#correlate_arms)*
                #option::None
            }
        }

        #checks
    }
}

/// Where to report a problem with a handler's result: its return type, or its name.
fn output_span(output: &ReturnType, ident: &syn::Ident) -> proc_macro2::Span {
    match output {
        ReturnType::Type(_, ty) => ty.span(),
        ReturnType::Default => ident.span(),
    }
}

/// The handler-side checks.
fn checks(handlers: &Handlers) -> TokenStream {
    let private = paths::private();
    let self_ty = &handlers.self_ty;
    let mut checks = Vec::new();
    // One handler per event, however its type is spelled (rule 10; the same spelling twice is
    // reported by `validate`): each pair spelled differently is compared by the event's key,
    // and a match is reported at the later one's event type, naming both handlers.
    for (j, later) in handlers.on.iter().enumerate() {
        for (i, earlier) in handlers.on.iter().enumerate().take(j) {
            if earlier.event == later.event {
                continue;
            }
            let message = paths::panic_message(&format!(
                "`{}` takes the same event as `{}`, spelled another way; merge them into one handler",
                later.ident, earlier.ident
            ));
            let span = later.event.span();
            let panic = paths::panic_at(span);
            checks.push(quote_spanned! {span=>
                const _: () = if #private::key_eq(
                    <#self_ty as #private::Process>::ON[#i],
                    <#self_ty as #private::Process>::ON[#j],
                ) {
                    #panic(#message)
                };
            });
        }
    }
    // Every `at_<field>` handler has its deadline field (rule 2, spec 189); one whose result was
    // refused already has its error, which says what to rename.
    for handler in handlers
        .at
        .iter()
        .filter(|handler| !handler.is_timeout() && !handler.refused)
    {
        let (field, ident) = (&handler.field, &handler.ident);
        let process = quote_spanned!(ident.span()=> #self_ty);
        let missing = paths::panic_message(&format!(
            "handler `{ident}` has no deadline: the state declares no field `{field}`; add `#[deadline] {field}: Deadline` to the state, or rename the handler after a deadline field"
        ));
        let unmarked = paths::panic_message(&format!(
            "handler `{ident}` has no deadline: field `{field}` is not marked `#[deadline]`; mark it, and give it type `Deadline`"
        ));
        let panic = paths::panic_at(ident.span());
        checks.push(quote_spanned! {ident.span()=>
            const _: () = if !#private::is_field::<#process>(#field) {
                #panic(#missing)
            } else if !#private::is_deadline::<#process>(#field) {
                #panic(#unmarked)
            };
        });
    }
    // Every handled event can reach the process (rule 11, spec 56–57, 190).
    for handler in &handlers.on {
        let info = event_info(&handler.event);
        checks.push(member::in_its_aggregate(
            quote!(#info.declared),
            &member::name(&handler.event),
            handler.event.span(),
            member::HANDLER,
        ));
        // A correlator routes another aggregate's events; the followed aggregate's own events
        // name their instance themselves, so one on their handler would never be called.
        if let Some(correlator) = &handler.correlate {
            let event_name = handler
                .event
                .segments
                .last()
                .map(|segment| segment.ident.to_string())
                .unwrap_or_default();
            let message = paths::panic_message(&format!(
                "the correlator of `{}` would never be called: `{event_name}` is an event of the aggregate this process follows, and names its instance itself; remove `#[correlate(..)]`",
                handler.ident
            ));
            let span = correlator.span();
            let panic = paths::panic_at(span);
            checks.push(quote_spanned! {span=>
                const _: () = if #private::of_main_aggregate::<#self_ty>(#info) {
                    #panic(#message)
                };
            });
        }
        let correlated = if handler.correlate.is_some() {
            quote!(true)
        } else {
            quote!(false)
        };
        checks.push(reach_check(self_ty, None, &handler.event, correlated));
    }
    quote!(#(#checks)*)
}
