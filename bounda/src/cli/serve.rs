//! `serve`: the operator page, and its metrics, on a socket until told to stop.

use clap::Args;

use crate::{App, Error};

/// Where and for whom the operator page is served. The token that lets the page act (retry,
/// discard, pause) comes from `PAGE_TOKEN`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Where to listen: loopback unless told otherwise.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: std::net::SocketAddr,
    /// Host names the page answers to besides loopback's, comma-separated: the name a reverse
    /// proxy passes on. Requests for any other name are refused.
    #[arg(long = "host", env = "PAGE_HOSTS", value_delimiter = ',')]
    pub hosts: Vec<String>,
    /// Origins whose forms may act besides the page's own, comma-separated
    /// (`https://ops.example.com`): the address operators open when a proxy rewrites `Host`.
    #[arg(long = "origin", env = "PAGE_ORIGINS", value_delimiter = ',')]
    pub origins: Vec<String>,
    /// The path to serve the page under (`/ops`), for a proxy that passes on a path of its own;
    /// the root unless told otherwise.
    #[arg(long, env = "PAGE_PATH", default_value = "", value_parser = page_path)]
    pub path: String,
}

/// A path to serve the page under: segments of letters, digits, `-`, `.`, `_` and `~`.
fn page_path(text: &str) -> Result<String, String> {
    let path = text.trim_matches('/');
    let segment = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
    };
    if path.is_empty() || path.split('/').all(segment) {
        Ok(path.to_owned())
    } else {
        Err("segments of letters, digits, `-`, `.`, `_` and `~`, such as `/ops`".to_owned())
    }
}

/// Serves the page as `args` say until `shutdown`, with `/metrics` beside it.
pub(super) async fn serve(
    app: App,
    args: ServeArgs,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let token = std::env::var("PAGE_TOKEN")
        .ok()
        .filter(|token| !token.is_empty());
    if let Some(Err(Error::Configuration { message })) =
        token.as_deref().map(crate::page::check_token)
    {
        return Err(Error::Configuration {
            message: format!("PAGE_TOKEN: {message}"),
        });
    }
    // The page lists and counts process instances from the store's index: a store without one
    // is refused here, not answered with errors page by page.
    if let Err(lacking) = app.store().capabilities().instances() {
        return Err(Error::Configuration {
            message: format!(
                "the operator page lists process instances, and {lacking}: serve it from a \
                 store that keeps them"
            ),
        });
    }
    let writable = token.is_some();
    let tidy = |names: Vec<String>| {
        names
            .into_iter()
            .map(|name| name.trim().to_owned())
            .filter(|name| !name.is_empty())
            .collect()
    };
    let path = args.path;
    let options = crate::page::Options {
        token,
        hosts: tidy(args.hosts),
        origins: tidy(args.origins),
        path: path.clone(),
        metrics: Some(crate::page::Metrics::install()?),
    };
    let mut page = crate::page::router(app, options);
    if !path.is_empty() {
        page = axum::Router::new().nest(&format!("/{path}"), page);
    }
    let listen = args.listen;
    let failed = |what: String| {
        move |error: std::io::Error| Error::Configuration {
            message: format!("{what}: {error}"),
        }
    };
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(failed(format!("cannot listen on {listen}")))?;
    let address = listener
        .local_addr()
        .map_err(failed("cannot read the address listened on".to_owned()))?;
    println!(
        "operator page on http://{address}/{path} ({})",
        if writable {
            "it acts with the token"
        } else {
            "read-only: set PAGE_TOKEN to act"
        }
    );
    axum::serve(listener, page)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(failed("the page stopped".to_owned()))
}
