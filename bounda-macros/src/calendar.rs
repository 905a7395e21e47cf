//! `zone!`, `time!` and `rule!`: civil-time literals checked while compiling. A zone is looked
//! up here, in the database the runtime bundles; a time of day and a rule are read by the
//! runtime's own `const` parsers in a `const` item, so a literal that does not read is a
//! compile error at its token, in the words a run-time refusal uses.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::LitStr;

use crate::paths;

/// `zone!("Europe/Paris")`: the zone, or an error naming the zones it may have meant.
pub(crate) fn zone(input: TokenStream) -> syn::Result<TokenStream> {
    let name = literal(input, "zone", "\"Europe/Paris\"", "Zone::named")?;
    let text = name.value();
    if jiff::tz::db().get(&text).is_err() {
        let message = match guess(&text) {
            Some(known) => format!(
                "`{text}` is not a time zone of the IANA database: did you mean `{known}`? \
                 Zones are named `Area/City` (`Europe/Paris`, `America/New_York`), or `UTC`"
            ),
            None => format!(
                "`{text}` is not a time zone of the IANA database: name one as `Area/City` \
                 (`Europe/Paris`, `America/New_York`) or `UTC`"
            ),
        };
        return Err(syn::Error::new(name.span(), message));
    }
    let private = paths::private();
    Ok(quote!(#private::known_zone(#name)))
}

/// `time!("09:00")`: the time of day, built while compiling.
pub(crate) fn time(input: TokenStream) -> syn::Result<TokenStream> {
    let text = literal(input, "time", "\"09:00\"", "LocalTime::parse")?;
    let (private, result) = (paths::private(), paths::result());
    let panic = paths::panic_at(text.span());
    Ok(quote_spanned! {text.span()=>
        {
            const TIME: #private::LocalTime = match #private::LocalTime::parse_const(#text) {
                #result::Ok(time) => time,
                #result::Err(why) => #panic("{}", why.message()),
            };
            TIME
        }
    })
}

/// `rule!("FREQ=WEEKLY;BYDAY=MO;BYHOUR=8")`: the recurrence, its rule read while compiling.
pub(crate) fn rule(input: TokenStream) -> syn::Result<TokenStream> {
    let text = literal(
        input,
        "rule",
        "\"FREQ=WEEKLY;BYDAY=MO;BYHOUR=8\"",
        "Recurrence::parse",
    )?;
    let (private, result) = (paths::private(), paths::result());
    let panic = paths::panic_at(text.span());
    Ok(quote_spanned! {text.span()=>
        {
            const PARTS: #private::RuleParts = match #private::RuleParts::parse(#text) {
                #result::Ok(parts) => parts,
                #result::Err(error) => #panic("{}", error.why.message()),
            };
            #private::Recurrence::of_parts(#text, PARTS)
        }
    })
}

/// The macro's one argument, a string literal; otherwise an error saying what it takes and
/// what reads text that arrives at run time.
fn literal(
    input: TokenStream,
    name: &str,
    example: &str,
    at_run_time: &str,
) -> syn::Result<LitStr> {
    syn::parse2::<LitStr>(input.clone()).map_err(|_| {
        let span = input
            .clone()
            .into_iter()
            .next()
            .map_or_else(proc_macro2::Span::call_site, |token| token.span());
        syn::Error::new(
            span,
            format!(
                "`{name}!` takes one string literal, like `{name}!({example})`; read text that \
                 arrives at run time with `{at_run_time}`"
            ),
        )
    })
}

/// The zone `text` was likely meant to name: one that differs in its city's spelling of
/// spaces, or whose city is the same.
fn guess(text: &str) -> Option<String> {
    let wanted = text.replace(' ', "_").to_ascii_lowercase();
    let city = wanted.rsplit('/').next().unwrap_or(&wanted).to_owned();
    let names: Vec<String> = jiff::tz::db()
        .available()
        .map(|name| name.to_string())
        .collect();
    names
        .iter()
        .find(|name| name.to_ascii_lowercase() == wanted)
        .or_else(|| {
            names.iter().find(|name| {
                name.to_ascii_lowercase()
                    .rsplit('/')
                    .next()
                    .is_some_and(|known| known == city)
            })
        })
        .cloned()
}
