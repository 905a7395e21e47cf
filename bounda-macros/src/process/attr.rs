//! `#[process(on = .., started_by = [..], completed_by = [..], timeout = "..")]` to typed options.

use syn::parse::discouraged::Speculative;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Expr, Ident, LitStr, Path, Token};

use crate::errors::Errors;
use crate::symbol;

/// The arguments of `#[process(..)]` on the state struct, each keeping the user's tokens.
pub(crate) struct ProcessArgs {
    /// The main aggregate.
    pub(crate) on: Option<Path>,
    /// The starting events.
    pub(crate) started_by: Vec<Path>,
    /// The completing events.
    pub(crate) completed_by: Vec<Path>,
    /// The lifetime literal.
    pub(crate) timeout: Option<LitStr>,
    /// The state's version literal.
    pub(crate) version: Option<syn::LitInt>,
    /// `migrate = [FlowV1, ..]`: the key, and the shape of each older version from 1.
    pub(crate) migrate: Option<(Ident, Vec<Path>)>,
    /// `ports = [GatewayPort, Arc<dyn Mailer>]`: the ports its handlers read.
    pub(crate) ports: Vec<syn::Type>,
    /// The keys given, well-formed or not: a malformed one is reported once, not again as
    /// missing.
    pub(crate) given: Vec<String>,
}

/// One `key = value` argument as written; `ports` lists types, which are no expression.
struct Arg {
    key: Ident,
    value: Expr,
    types: Option<Vec<syn::Type>>,
}

impl Parse for Arg {
    fn parse(input: ParseStream<'_>) -> syn::Result<Arg> {
        let key: Ident = input.call(syn::ext::IdentExt::parse_any)?;
        input.parse::<Token![=]>()?;
        if key == symbol::PORTS {
            // A list that does not read as types is reported with the other arguments, as
            // written, so the state still gets its impl.
            let fork = input.fork();
            if let Ok((tokens, types)) = crate::ports::parse(&fork) {
                input.advance_to(&fork);
                return Ok(Arg {
                    key,
                    value: Expr::Verbatim(tokens),
                    types: Some(types),
                });
            }
        }
        let value = input.parse()?;
        Ok(Arg {
            key,
            value,
            types: None,
        })
    }
}

/// A list of `key = value` arguments.
pub(crate) struct RawArgs(Punctuated<Arg, Token![,]>);

impl Parse for RawArgs {
    fn parse(input: ParseStream<'_>) -> syn::Result<RawArgs> {
        Punctuated::parse_terminated(input).map(RawArgs)
    }
}

impl RawArgs {
    /// The first key, to point an error at.
    pub(crate) fn first_key(&self) -> Option<&Ident> {
        self.0.first().map(|arg| &arg.key)
    }

    /// Reads the arguments, recording each unknown, duplicated or malformed one.
    pub(crate) fn into_process_args(self, errors: &mut Errors) -> ProcessArgs {
        let mut args = ProcessArgs {
            on: None,
            started_by: Vec::new(),
            completed_by: Vec::new(),
            timeout: None,
            version: None,
            migrate: None,
            ports: Vec::new(),
            given: Vec::new(),
        };
        let mut seen: Vec<String> = Vec::new();
        for Arg { key, value, types } in self.0 {
            let name = key.to_string();
            if !symbol::PROCESS_ARGS.contains(&name.as_str()) {
                errors.at(
                    &key,
                    format!(
                        "unknown `#[process]` argument `{name}`; expected one of `on`, `started_by`, `completed_by`, `timeout`, `version`, `migrate`, `ports`"
                    ),
                );
                continue;
            }
            if seen.contains(&name) {
                errors.at(&key, format!("`{name}` is given twice; keep one"));
                continue;
            }
            seen.push(name.clone());
            match name.as_str() {
                symbol::ON => args.on = path(&value, &key, errors),
                symbol::STARTED_BY => {
                    args.started_by = paths(&value, &key, errors);
                    if args.started_by.is_empty()
                        && matches!(value, Expr::Array(ref array) if array.elems.is_empty())
                    {
                        errors.at(&value, "`started_by` lists no event; name at least one, like `started_by = [OrderPlaced]`");
                    }
                }
                symbol::COMPLETED_BY => args.completed_by = paths(&value, &key, errors),
                symbol::VERSION => args.version = lit_int(&value, errors),
                symbol::MIGRATE => {
                    let shapes = shape_paths(&value, errors);
                    args.migrate = Some((key.clone(), shapes));
                }
                symbol::PORTS => match types {
                    Some(types) => args.ports = types,
                    None => errors.at(&value, crate::ports::EXPECTED),
                },
                _ => args.timeout = lit_str(&value, errors),
            }
        }
        // An event that both starts and completes would end each instance on its first step.
        for event in &args.completed_by {
            if args.started_by.contains(event) {
                let name = quote::ToTokens::to_token_stream(event)
                    .to_string()
                    .replace(' ', "");
                errors.at(
                    event,
                    format!(
                        "`{name}` both starts and completes the process, so each instance would end on the event that starts it; list it in `started_by` or in `completed_by`, not both"
                    ),
                );
            }
        }
        args.given = seen;
        args
    }
}

/// `on = Order`.
fn path(value: &Expr, key: &Ident, errors: &mut Errors) -> Option<Path> {
    match value {
        Expr::Path(path) if path.qself.is_none() => Some(path.path.clone()),
        _ => {
            errors.at(
                value,
                format!("`{key}` takes the aggregate type, like `{key} = Order`"),
            );
            None
        }
    }
}

/// `started_by = [OrderPlaced, ..]`.
fn paths(value: &Expr, key: &Ident, errors: &mut Errors) -> Vec<Path> {
    let Expr::Array(array) = value else {
        errors.at(
            value,
            format!("`{key}` takes a list of event types, like `{key} = [OrderPlaced]`"),
        );
        return Vec::new();
    };
    let mut out: Vec<Path> = Vec::new();
    for element in &array.elems {
        match element {
            Expr::Path(path) if path.qself.is_none() => {
                if out.iter().any(|seen| seen == &path.path) {
                    errors.at(element, "this event is listed twice; keep one");
                } else {
                    out.push(path.path.clone());
                }
            }
            _ => errors.at(element, "expected an event type, like `OrderPlaced`"),
        }
    }
    out
}

/// `version = 2`.
fn lit_int(value: &Expr, errors: &mut Errors) -> Option<syn::LitInt> {
    match value {
        Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(lit),
            ..
        }) => Some(lit.clone()),
        _ => {
            errors.at(
                value,
                "`version` takes the state's version, a number from 1, like `version = 2`",
            );
            None
        }
    }
}

/// `migrate = [FlowV1, FlowV2]`: the shapes of versions 1, 2, ...
fn shape_paths(value: &Expr, errors: &mut Errors) -> Vec<Path> {
    let Expr::Array(array) = value else {
        errors.at(
            value,
            "`migrate` lists the state's older shapes from version 1, like `migrate = [FlowV1]`",
        );
        return Vec::new();
    };
    let mut out = Vec::new();
    for element in &array.elems {
        match element {
            Expr::Path(path) if path.qself.is_none() => out.push(path.path.clone()),
            _ => errors.at(
                element,
                "expected the type of an older state, like `FlowV1`",
            ),
        }
    }
    out
}

/// `timeout = "30d"`.
fn lit_str(value: &Expr, errors: &mut Errors) -> Option<LitStr> {
    match value {
        Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(lit),
            ..
        }) => Some(lit.clone()),
        _ => {
            errors.at(
                value,
                "`timeout` takes a duration literal, like `timeout = \"30d\"`",
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::*;

    fn parse(tokens: proc_macro2::TokenStream) -> (ProcessArgs, Vec<String>) {
        let raw: RawArgs = syn::parse2(tokens).expect("well-formed arguments");
        let mut errors = Errors::default();
        let args = raw.into_process_args(&mut errors);
        (args, errors.messages())
    }

    #[test]
    fn reads_every_argument() {
        let (args, errors) = parse(quote!(
            on = Order,
            started_by = [OrderPlaced],
            completed_by = [OrderFulfilled, OrderCancelled],
            timeout = "30d",
        ));
        assert!(errors.is_empty(), "{errors:?}");
        assert!(args.on.is_some_and(|on| on.is_ident("Order")));
        assert_eq!(args.started_by.len(), 1);
        assert_eq!(args.completed_by.len(), 2);
        assert_eq!(args.timeout.map(|lit| lit.value()).as_deref(), Some("30d"));
    }

    #[test]
    fn collects_every_mistake_in_one_pass() {
        let (args, errors) = parse(quote!(
            on = Order,
            started_by = [OrderPlaced, OrderPlaced],
            timout = "7d",
            on = Payment,
            completed_by = OrderCancelled,
            timeout = 30,
        ));
        assert_eq!(
            errors,
            [
                "this event is listed twice; keep one",
                "unknown `#[process]` argument `timout`; expected one of `on`, `started_by`, `completed_by`, `timeout`, `version`, `migrate`, `ports`",
                "`on` is given twice; keep one",
                "`completed_by` takes a list of event types, like `completed_by = [OrderPlaced]`",
                "`timeout` takes a duration literal, like `timeout = \"30d\"`",
            ]
        );
        assert!(
            args.on.is_some_and(|on| on.is_ident("Order")),
            "the first `on` stands"
        );
    }

    #[test]
    fn an_empty_started_by_is_refused() {
        let (_, errors) = parse(quote!(on = Order, started_by = []));
        assert_eq!(
            errors,
            ["`started_by` lists no event; name at least one, like `started_by = [OrderPlaced]`"]
        );
    }
}
