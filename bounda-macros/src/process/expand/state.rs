//! `impl ProcessState` for the state struct, and the checks that need types or the handlers.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote, quote_spanned};
use syn::Path;
use syn::spanned::Spanned;

use crate::names;
use crate::paths;
use crate::process::ast::State;
use crate::process::attr::ProcessArgs;
use crate::process::expand::event_info;

/// The `ProcessState` impl and the state-side checks.
pub(crate) fn process_state(
    args: &ProcessArgs,
    state: &State,
    (version, shapes_listed): (u32, bool),
) -> TokenStream {
    let private = paths::private();
    let (option, result, str) = (paths::option(), paths::result(), paths::str());
    let ident = &state.item.ident;
    let name = names::plain(ident);
    let patch = names::patch_type(ident);
    let aggregate = match &args.on {
        Some(path) => quote!(#path),
        None => quote!(#private::NoAggregate),
    };
    let started_by = event_keys(&args.started_by);
    let completed_by = event_keys(&args.completed_by);
    let declared_shapes = args
        .started_by
        .iter()
        .chain(&args.completed_by)
        .map(|event| {
            let info = event_info(event);
            quote!(#info.shapes)
        });
    let timeout = match &args.timeout {
        Some(lit) => quote_spanned! {lit.span()=>
            #option::Some(match #private::Duration::parse_const(#lit) {
                #result::Ok(duration) => duration,
                #result::Err(_) => #private::Duration::ZERO,
            })
        },
        None => quote!(#option::None),
    };
    let field_names = state.fields.iter().map(|field| field.name());
    let mut deadlines: Vec<_> = state.deadlines().collect();
    deadlines.sort_by_key(|field| field.name());
    let deadline_fields = deadlines.iter().map(|field| {
        let (member, field_name, ty, key) = (&field.ident, field.name(), &field.ty, &field.key);
        // Reading the field through `DeadlineType` is also the check that its type is `Deadline`
        // (rule 5), reported at the field's type.
        let read = quote_spanned! {ty.span()=>
            <#ty as #private::DeadlineType>::deadline(&state.#member)
        };
        quote! {
            #private::DeadlineField { name: #field_name, key: #key, get: |state: &#ident| #read }
        }
    });
    let merges = state.fields.iter().map(|field| {
        let member = &field.ident;
        quote! {
            if let #option::Some(value) = patch.#member {
                self.#member = value;
            }
        }
    });
    let checks = checks(args, state);
    let shapes: &[Path] = match &args.migrate {
        Some((_, shapes)) if shapes_listed => shapes,
        _ => &[],
    };
    let (migrate, shape_fns) = migrate(ident, shapes, version);
    let ports = crate::ports::expand(&args.ports);
    // The one place the state's `Default` is asked for, spanned at its name.
    let initial = quote_spanned!(ident.span()=> #private::initial_state::<Self>());
    let initial_fn = quote::format_ident!("{}", crate::symbol::INITIAL_FN);
    quote! {
        #shape_fns

        impl #ident {
            #[doc(hidden)]
            fn #initial_fn() -> Self {
                <Self as #private::ProcessState>::initial()
            }
        }

        impl #private::ProcessState for #ident {
            const NAME: &'static #str = #name;
            const STARTED_BY: &'static [#private::EventKey] = &[#(#started_by),*];
            const COMPLETED_BY: &'static [#private::EventKey] = &[#(#completed_by),*];
            const TIMEOUT: #option<#private::Duration> = #timeout;
            const FIELDS: &'static [&'static #str] = &[#(#field_names),*];
            const DEADLINES: &'static [#private::DeadlineField<Self>] = &[#(#deadline_fields),*];
            const DECLARED_SHAPES: &'static [&'static [#private::EventShape]] =
                &[#(#declared_shapes),*];

            #ports

            type Aggregate = #aggregate;
            type Patch = #patch;

            fn merge(&mut self, patch: #patch) {
                #(#merges)*
            }

            fn initial() -> Self {
                #initial
            }

            #migrate
        }

        #checks
    }
}

/// `VERSION`, and `migrate` and `dropped` for each older version: its shape read, then brought
/// up one `From` at a time, each step spanned at the user's shape so a missing `From` is
/// reported there. Each older shape is reached through one hidden function, spanned at the
/// shape, so a shape that does not deserialise is reported once.
fn migrate(ident: &syn::Ident, shapes: &[Path], version: u32) -> (TokenStream, TokenStream) {
    let private = paths::private();
    let (result, string) = (paths::result(), paths::string());
    let shape_fn = |older: u32| quote::format_ident!("__bounda_state_v{older}");
    let shape_fns = shapes.iter().enumerate().map(|(index, shape)| {
        let older = index as u32 + 1;
        let name = shape_fn(older);
        let get = quote_spanned!(shape.span()=> #private::state_shape::<#shape>());
        quote! {
            #[doc(hidden)]
            fn #name() -> #private::StateShape<#shape> {
                #get
            }
        }
    });
    let shape_fns = quote! {
        impl #ident {
            #(#shape_fns)*
        }
    };
    let migrate_arms = shapes.iter().enumerate().map(|(index, shape)| {
        let older = index as u32 + 1;
        let name = shape_fn(older);
        let steps = crate::derive::versions::upcast_steps(shapes, index);
        quote! {
            #older => {
                let shape: #shape = (#ident::#name().read)(
                    <Self as #private::ProcessState>::NAME,
                    #older,
                    state,
                )?;
                #steps
                #result::Ok(shape)
            }
        }
    });
    let dropped_arms = (1..=shapes.len() as u32).map(|older| {
        let name = shape_fn(older);
        quote!(#older => (#ident::#name().dropped)(state),)
    });
    let migrate = quote! {
        const VERSION: ::core::primitive::u32 = #version;

        fn migrate(
            version: ::core::primitive::u32,
            state: &#private::serde_json::Value,
        ) -> #result<Self, #private::Error> {
            match version {
                #version => #private::read_state_shape::<Self>(<Self as #private::ProcessState>::NAME, version, state),
                #(#migrate_arms)*
                stored => #result::Err(#private::Error::NewerState {
                    process: #string::from(<Self as #private::ProcessState>::NAME),
                    stored,
                    known: #version,
                }),
            }
        }

        fn dropped(
            version: ::core::primitive::u32,
            state: &#private::serde_json::Value,
        ) -> ::std::vec::Vec<#string> {
            match version {
                #(#dropped_arms)*
                _ => #private::dropped_fields::<Self>(state),
            }
        }
    };
    (migrate, shape_fns)
}

/// `EventKey`s of the listed events, each spanned at the user's path.
fn event_keys(events: &[Path]) -> Vec<TokenStream> {
    events
        .iter()
        .map(|event| {
            let info = event_info(event);
            quote!(#info.key)
        })
        .collect()
}

/// The checks only the compiler can decide: they run as `const` items, each reporting at the
/// user's token with a message written here.
fn checks(args: &ProcessArgs, state: &State) -> TokenStream {
    let private = paths::private();
    let ident = &state.item.ident;
    let process = names::plain(ident);
    // Every use of the handlers goes through this one call, spanned at the state's name, so a
    // missing `#[process] impl` is one error.
    let handlers = quote_spanned!(ident.span()=> #private::handlers::<#ident>());
    let mut checks = vec![quote_spanned! {ident.span()=>
        const _: #private::HandlerInfo = #handlers;
    }];
    // Every deadline has its `at_<field>` handler (rule 1, spec 189).
    for field in state.deadlines() {
        let field_name = field.name();
        if field_name == crate::symbol::RESERVED_DEADLINE {
            continue;
        }
        let message = paths::panic_message(&format!(
            "deadline `{field_name}` has no handler; add `async fn at_{field_name}(cx: At<'_, Self>) -> Result<{}>` to `#[process] impl {process}`",
            names::at_type(&field_name)
        ));
        let panic = paths::panic_at(field.ident.span());
        checks.push(quote_spanned! {field.ident.span()=>
            const _: () = if !#private::contains(#handlers.at, #field_name) {
                #panic(#message)
            };
        });
    }
    // The `timeout` literal is a duration (rule 9, spec 211), and not zero: a lifetime of
    // nothing would end each instance as it starts.
    if let Some(lit) = &args.timeout {
        let message = paths::panic_message(&format!(
            "`timeout = {:?}` is not a duration; write a number and a unit (ms, s, m, h or d), like `\"30d\"`, `\"72h\"` or `\"1.5s\"`",
            lit.value()
        ));
        let zero = paths::panic_message(&format!(
            "`timeout = {:?}` would end each instance as it starts; give a lifetime longer than zero, like `\"30d\"`, or leave `timeout` out for none",
            lit.value()
        ));
        let panic = paths::panic_at(lit.span());
        checks.push(quote_spanned! {lit.span()=>
            const _: () = if #private::Duration::parse_const(#lit).is_err() {
                #panic(#message)
            } else if #private::is_zero_duration(#lit) {
                #panic(#zero)
            };
        });
    }
    // Starting and completing events reach the process (rule 11, spec 56, 190). One with a
    // handler is checked by the handler side, which also knows its correlator.
    if let Some(aggregate) = &args.on {
        for event in args.started_by.iter().chain(&args.completed_by) {
            let info = event_info(event);
            let handled = quote!(#private::has_key(#handlers.on, #info.key));
            checks.push(crate::member::in_its_aggregate(
                quote!((#info.declared || #handled)),
                &crate::member::name(event),
                syn::spanned::Spanned::span(event),
                crate::member::LIFECYCLE,
            ));
            checks.push(reach_check(ident, Some(aggregate), event, handled));
        }
    }
    quote!(#(#checks)*)
}

/// Asserts that `event` names an instance of the process, unless `exempt` (a `const` bool)
/// holds: it belongs to the main aggregate, or has the main aggregate's id field (rule 11).
/// `aggregate` is the main aggregate's name where the macro can see it.
pub(crate) fn reach_check(
    process: &impl ToTokens,
    aggregate: Option<&Path>,
    event: &Path,
    exempt: TokenStream,
) -> TokenStream {
    let private = paths::private();
    let panic = paths::panic_at(event.span());
    let last = |path: &Path| {
        path.segments
            .last()
            .map(|segment| names::plain(&segment.ident))
            .unwrap_or_default()
    };
    let event_name = last(event);
    let process_name = process
        .to_token_stream()
        .into_iter()
        .last()
        .map(|token| token.to_string())
        .unwrap_or_default();
    let (of, field) = match aggregate {
        Some(aggregate) => {
            let name = last(aggregate);
            let id_field = heck::ToSnakeCase::to_snake_case(name.as_str()) + "_id";
            (
                format!("`{name}`"),
                format!("no field naming the `{name}` (`{id_field}` by convention)"),
            )
        }
        None => (
            "the aggregate it follows".to_owned(),
            "no field naming that aggregate's instance (its `Aggregate::ID_FIELD`, like `order_id`)"
                .to_owned(),
        ),
    };
    let message = paths::panic_message(&format!(
        "event `{event_name}` cannot reach process `{process_name}`: it is not an event of {of} and its payload has {field}; add the field to `{event_name}` or put `#[correlate(..)]` on its handler"
    ));
    let info = event_info(event);
    quote_spanned! {event.span()=>
        const _: () = if !(#exempt) && !#private::reaches::<#process>(#info, false) {
            #panic(#message)
        };
    }
}
