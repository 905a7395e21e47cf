//! Who runs an operator's command: kept with what it pauses and the retries it requests.

/// The operator's name: `by` as given (`--by`, else `$USER`), else `$LOGNAME`; refused when
/// none is set, saying what the name is kept for (`what`: "who pauses it").
pub(super) fn operator(by: Option<String>, what: &str) -> Result<String, crate::Error> {
    by.or_else(|| std::env::var("LOGNAME").ok())
        .filter(|by| !by.trim().is_empty())
        .ok_or_else(|| crate::Error::MissingArgument {
            argument: "--by <name>".to_owned(),
            why: format!("{what}: USER and LOGNAME are not set"),
        })
}
