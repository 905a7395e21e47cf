//! `#[policy]` on an `async fn <action>_on_<event>(cx: Reaction<'_, Event>) -> Result<()>`:
//! a unit struct named after the function that implements `Policy`.

use heck::{ToSnakeCase, ToUpperCamelCase};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::{Expr, FnArg, GenericArgument, ItemFn, LitStr, PathArguments, Token, Type};

use crate::errors::Errors;
use crate::member;
use crate::names;
use crate::paths;
use crate::register;
use crate::symbol;

/// `delay = "1m"` or `delay = env("VAR", "1m")`.
enum Delay {
    Literal(LitStr),
    Env { var: LitStr, default: LitStr },
}

/// The arguments of `#[policy(..)]`.
struct PolicyArgs {
    delay: Option<Delay>,
    /// The ports it reads.
    ports: Vec<Type>,
}

impl Parse for PolicyArgs {
    fn parse(input: ParseStream<'_>) -> syn::Result<PolicyArgs> {
        let mut delay = None;
        let mut ports: Option<Vec<Type>> = None;
        while !input.is_empty() {
            let key: syn::Ident = input.parse()?;
            if key == symbol::PORTS {
                if ports.is_some() {
                    return Err(syn::Error::new_spanned(
                        &key,
                        "`ports` is given twice; keep one",
                    ));
                }
                input.parse::<Token![=]>()?;
                ports = Some(crate::ports::parse(input)?.1);
                if !input.is_empty() {
                    input.parse::<Token![,]>()?;
                }
                continue;
            }
            if key != symbol::DELAY {
                return Err(syn::Error::new_spanned(
                    &key,
                    format!("unknown `#[policy]` argument `{key}`; expected `delay` or `ports`"),
                ));
            }
            if delay.is_some() {
                return Err(syn::Error::new_spanned(
                    &key,
                    "`delay` is given twice; keep one",
                ));
            }
            input.parse::<Token![=]>()?;
            let value: Expr = input.parse()?;
            delay = Some(parse_delay(&value)?);
            if !input.is_empty() {
                input.parse::<Token![,]>()?;
            }
        }
        Ok(PolicyArgs {
            delay,
            ports: ports.unwrap_or_default(),
        })
    }
}

fn parse_delay(value: &Expr) -> syn::Result<Delay> {
    let string = |expr: &Expr| match expr {
        Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(lit),
            ..
        }) => Some(lit.clone()),
        _ => None,
    };
    if let Some(lit) = string(value) {
        return Ok(Delay::Literal(lit));
    }
    if let Expr::Call(call) = value
        && matches!(&*call.func, Expr::Path(path) if path.path.is_ident(symbol::ENV))
        && call.args.len() == 2
        && let (Some(var), Some(default)) = (string(&call.args[0]), string(&call.args[1]))
    {
        return Ok(Delay::Env { var, default });
    }
    Err(syn::Error::new_spanned(
        value,
        "`delay` takes a duration literal, like `delay = \"1m\"`, or `delay = env(\"WELCOME_DELAY\", \"1m\")`",
    ))
}

/// Expands `#[policy(..)] async fn ..`.
pub(crate) fn expand(args: TokenStream, input: TokenStream) -> TokenStream {
    if let Ok(item) = syn::parse2::<syn::ItemImpl>(input.clone()) {
        return register::expand_impl(register::Kind::Policy, args, item);
    }
    let function = match syn::parse2::<ItemFn>(input.clone()) {
        Ok(function) => function,
        Err(_) => {
            // At the item's first tokens (`pub struct`), the thing that is not a policy.
            let span = input
                .clone()
                .into_iter()
                .next()
                .map_or_else(Span::call_site, |token| token.span());
            let error = syn::Error::new(
                span,
                "`#[policy]` goes on an `async fn <action>_on_<event>(cx: Reaction<'_, Event>) -> Result<()>`, or on an `impl Policy for YourPolicy`",
            )
            .to_compile_error();
            return quote!(#error #input);
        }
    };
    let args = match syn::parse2::<PolicyArgs>(args) {
        Ok(args) => args,
        Err(error) => {
            let error = error.to_compile_error();
            return quote!(#error #function);
        }
    };
    let mut errors = Errors::default();
    let event = check_signature(&function, &mut errors);
    let Some(event) = event else {
        let errors = errors.to_compile_errors();
        return quote!(#errors #function);
    };
    let errors = errors.to_compile_errors();
    let policy = policy_impl(&function, &event, args.delay.as_ref(), &args.ports);
    let member = match &event {
        Type::Path(path) => {
            let policy = policy_ident(&function.sig.ident);
            let private = paths::private();
            member::in_its_aggregate(
                quote!(<#policy as #private::PolicyChecks>::EVENT_DECLARED),
                &member::name(&path.path),
                syn::spanned::Spanned::span(path),
                member::HANDLER,
            )
        }
        _ => TokenStream::new(),
    };
    quote! {
        #errors
        #function
        #policy
        #member
    }
}

/// The shape rules; the event type, when the argument names one.
fn check_signature(function: &ItemFn, errors: &mut Errors) -> Option<Type> {
    let sig = &function.sig;
    let name = names::plain(&sig.ident);
    if sig.asyncness.is_none() {
        errors.at(
            sig.fn_token,
            format!("policy `{name}` must be `async`; write `async fn {name}(..)`"),
        );
    }
    if !sig.generics.params.is_empty() {
        errors.at(&sig.generics, format!("policy `{name}` cannot be generic"));
    }
    let event = match (sig.inputs.len(), sig.inputs.first()) {
        (1, Some(FnArg::Typed(arg))) => event_of(&arg.ty),
        _ => None,
    };
    let Some(event) = event else {
        errors.at(
            &sig.inputs,
            format!("policy `{name}` takes one argument, `cx: Reaction<'_, Event>`"),
        );
        return None;
    };
    let event_name = match &event {
        Type::Path(path) => path.path.segments.last().map(|s| names::plain(&s.ident)),
        _ => None,
    }
    .unwrap_or_default();
    let snake = event_name.to_snake_case();
    if !name.ends_with(&format!("on_{snake}")) || name == format!("on_{snake}") {
        errors.at(
            &sig.ident,
            format!("policy `{name}` takes `{event_name}`; name it `<action>_on_{snake}`, like `notify_on_{snake}`"),
        );
    }
    Some(event)
}

/// `Event` in `Reaction<'_, Event>`.
fn event_of(ty: &Type) -> Option<Type> {
    let Type::Path(path) = ty else { return None };
    let last = path.path.segments.last()?;
    if last.ident != symbol::REACTION_CONTEXT {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    args.args.iter().rev().find_map(|arg| match arg {
        GenericArgument::Type(ty) => Some(ty.clone()),
        _ => None,
    })
}

/// The unit struct and its `Policy` impl.
/// The unit struct named after the policy's function: `notify_on_order_placed` →
/// `NotifyOnOrderPlaced`.
fn policy_ident(function: &syn::Ident) -> syn::Ident {
    format_ident!(
        "{}",
        names::plain(function).to_upper_camel_case(),
        span = function.span()
    )
}

fn policy_impl(
    function: &ItemFn,
    event: &Type,
    delay: Option<&Delay>,
    ports: &[Type],
) -> TokenStream {
    let ports = crate::ports::expand(ports);
    let private = paths::private();
    let (option, result, str) = (paths::option(), paths::result(), paths::str());
    let vis = &function.vis;
    let ident = &function.sig.ident;
    let name = names::plain(ident);
    let policy = policy_ident(ident);
    let doc = format!("The policy [`{name}`], generated by `#[policy]`; it registers itself.");
    // A function that is not `async` is reported once; it is called without `.await` here.
    let call = if function.sig.asyncness.is_some() {
        quote!(#ident(cx).await)
    } else {
        quote!(#ident(cx))
    };
    let delay = delay.map(|delay| {
        let described = match delay {
            Delay::Literal(lit) => format!("`delay = {:?}`", lit.value()),
            Delay::Env { var, default } => {
                format!("the default of `{}`, {:?},", var.value(), default.value())
            }
        };
        let (check, value) = match delay {
            Delay::Literal(lit) => (lit, quote!(#result::Ok(#option::Some(#private::Duration::parse_const(#lit).unwrap_or(#private::Duration::ZERO))))),
            Delay::Env { var, default } => (
                default,
                quote!(#private::env_duration(#var, #private::Duration::parse_const(#default).unwrap_or(#private::Duration::ZERO)).map(#option::Some)),
            ),
        };
        let panic = paths::panic_at(check.span());
        let message = paths::panic_message(&format!(
            "{described} is not a duration; write a number and a unit (ms, s, m, h or d), like `\"1m\"` or `\"500ms\"`"
        ));
        // The check stands at the top level, so rustc names no generated function in its label.
        let checked = quote_spanned! {check.span()=>
            const _: () = if #private::Duration::parse_const(#check).is_err() {
                #panic(#message)
            };
        };
        let function = quote_spanned! {check.span()=>
            fn delay() -> #result<#option<#private::Duration>, #private::DurationError> {
                #value
            }
        };
        (function, checked)
    });
    let (delay, delay_check) = delay.unzip();
    let policy_ty: Type = syn::parse_quote!(#policy);
    let registration = register::registration(register::Kind::Policy, &policy_ty);
    quote! {
        #[doc = #doc]
        #[allow(non_camel_case_types, reason = "named after the policy's function")]
        #vis struct #policy;

        #delay_check

        #registration

        impl #private::Policy for #policy {
            const NAME: &'static #str = #name;
            type Event = #event;
            #ports

            #delay

            fn handle(
                cx: #private::Reaction<'_, #event>,
            ) -> impl ::core::future::Future<Output = #private::anyhow::Result<()>> + ::core::marker::Send {
                async move { #private::handler_result_unit(#call) }
            }
        }
    }
}
