//! The operator page: the app at a glance (lag, waiting deadlines, a timeline of what is due,
//! the dead letters) and one instance's story, as an `axum` router to serve from the app's own
//! binary or to nest in its own server.
//!
//! ```no_run
//! # async fn serve(app: bounda::App) -> std::io::Result<()> {
//! let page = bounda::page::router(app, bounda::page::Options::default());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, page).await
//! # }
//! ```
//!
//! Safe by default: without [`Options::token`](crate::page::Options::token) the page only reads;
//! with it, an operator signs in once with the token and their name, and acts (retries, pauses,
//! rebuilds) in that session: a signed, `HttpOnly`, `SameSite=Strict` cookie that expires, each
//! form carrying a token of its own, each action from the page's own origin. Everything shown is
//! escaped, and every answer carries a content security policy that allows no script. Serve it
//! on loopback, or behind the operators' own authentication.

mod bulk;
mod guard;
mod instances;
mod lateness;
mod metrics;
mod pauses;
mod session;
mod signin;
mod timeline;

pub use guard::{MIN_TOKEN_CHARS, check_token};
pub use metrics::Metrics;

use std::sync::Arc;

use askama::Template;
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use crate::app::App;
use crate::explain::Explained;
use crate::store::{DeadLetter, LetterFilter, RetryOutcome};
use crate::{Duration, Instant, hours};

/// How the page is served.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The token an operator signs in with to act (retry, discard, pause, rebuild); `None`: the
    /// page only reads. Sessions are signed with keys derived from it, so every process serving
    /// the page with the same token reads the same sessions. At least [`MIN_TOKEN_CHARS`]
    /// characters (`openssl rand -hex 24` makes one). Wrong tokens share one budget per page:
    /// a few are free, then each doubles the wait before the next is compared, and twenty in a
    /// row lock sign-in for fifteen minutes.
    pub token: Option<String>,
    /// The host names the page answers to besides loopback's (`localhost`, `127.0.0.1`,
    /// `[::1]`): the name a reverse proxy passes on. A request for any other name, or naming
    /// none, is refused, so a web page elsewhere cannot point its own name at this address and
    /// read it.
    pub hosts: Vec<String>,
    /// The origins besides the page's own whose forms may retry and discard
    /// (`https://ops.example.com`): the address operators open when a reverse proxy passes the
    /// page a `Host` of its own, so the browser's `Origin` no longer matches it.
    pub origins: Vec<String>,
    /// The path the page is nested at in a larger router (`/ops`), which its links, forms and
    /// redirects start with; empty (the default) when it is served at the root. Nest it with
    /// `Router::nest("/ops", router(app, options))`.
    pub path: String,
    /// The process's metrics recorder: with it, the page serves `/metrics` in Prometheus's
    /// text format, the gauges surveyed from the store at each scrape. Like every page, it
    /// answers only the host names above.
    pub metrics: Option<Metrics>,
}

/// What the page's handlers share.
struct Shared {
    app: App,
    token: Option<String>,
    /// The keys of the sessions and their forms, with a token.
    keys: Option<session::Keys>,
    hosts: Vec<String>,
    /// Whether a bulk action of letters runs now.
    bulk: Arc<std::sync::atomic::AtomicBool>,
    /// The budget of wrong tokens, for every request.
    guard: guard::Guard,
    origins: Vec<String>,
    links: Links,
}

/// The page's own addresses, under the path it is served at: every link, form and redirect is
/// made here, each id encoded as one path segment.
#[derive(Debug, Clone)]
struct Links {
    /// `""` at the root, else `/ops`: a leading slash, none after.
    base: String,
    /// Whether the page can be signed in to: it was given a token.
    signs_in: bool,
    /// The signed-in operator's session and the keys of its forms, on a request that has one.
    signed: Option<Arc<(session::Keys, session::Session)>>,
}

impl Links {
    fn new(path: &str, signs_in: bool) -> Links {
        let path = path.trim_matches('/');
        Links {
            base: if path.is_empty() {
                String::new()
            } else {
                format!("/{path}")
            },
            signs_in,
            signed: None,
        }
    }

    /// Whether the request is signed in, so the page shows its forms.
    fn signed_in(&self) -> bool {
        self.signed.is_some()
    }

    /// The signed-in operator's name, or nothing.
    fn operator(&self) -> &str {
        self.signed
            .as_ref()
            .map_or("", |signed| signed.1.name.as_str())
    }

    /// The token of the form posting to `action` in this session; empty when signed out.
    fn form_token(&self, action: &str) -> String {
        self.signed.as_ref().map_or_else(String::new, |signed| {
            let (keys, session) = signed.as_ref();
            keys.form_token(session, action)
        })
    }

    /// The sign-in page and its form's target.
    fn signin(&self) -> String {
        format!("{}/signin", self.base)
    }

    /// Signing out.
    fn signout(&self) -> String {
        format!("{}/signout", self.base)
    }

    /// The overview: `/`, or the path itself (a router nested at `/ops` answers `/ops`).
    fn home(&self) -> String {
        if self.base.is_empty() {
            "/".to_owned()
        } else {
            self.base.clone()
        }
    }

    /// The overview, reporting what an action did.
    fn done(&self, code: &str) -> String {
        format!("{}?done={code}", self.home())
    }

    /// The explain form's target.
    fn search(&self) -> String {
        format!("{}/explain", self.base)
    }

    /// The list of instances.
    fn instances(&self) -> String {
        format!("{}/instances", self.base)
    }

    /// The lag panel.
    fn lag(&self) -> String {
        format!("{}/lag", self.base)
    }

    /// Instance `id` of `process`.
    fn instance(&self, process: &str, id: &str) -> String {
        format!("{}/instances/{}/{}", self.base, encode(process), encode(id))
    }

    /// Letter `id`'s `action` (`retry`, `discard`).
    fn letter(&self, id: &str, action: &str) -> String {
        format!("{}/letters/{}/{action}", self.base, encode(id))
    }

    /// A pause's `action` (`pause`, `resume`).
    fn pause(&self, action: &str) -> String {
        format!("{}/pauses/{action}", self.base)
    }

    /// The confirmation of a pause's `action` on the target of `kind`, `name` and `instance`.
    fn confirm_pause(&self, action: &str, kind: &str, name: &str, instance: &str) -> String {
        let mut href = format!(
            "{}/pauses/{action}?kind={}&name={}",
            self.base,
            percent(kind),
            percent(name)
        );
        if !instance.is_empty() {
            href.push_str(&format!("&instance={}", percent(instance)));
        }
        href
    }

    /// The bulk page of letters.
    fn bulk(&self) -> String {
        format!("{}/letters/bulk", self.base)
    }

    /// A bulk `action` (`retry`, `discard`) of letters.
    fn bulk_action(&self, action: &str) -> String {
        format!("{}/letters/bulk/{action}", self.base)
    }

    /// The rebuild of read model `name`.
    fn rebuild(&self, name: &str) -> String {
        format!("{}/read-models/{}/rebuild", self.base, encode(name))
    }
}

impl Shared {
    /// The page's addresses for a request, with its session when it carries one that holds.
    fn links(&self, headers: &HeaderMap) -> Links {
        let mut links = self.links.clone();
        if let (Some(keys), Some(value)) = (&self.keys, session::cookie(headers)) {
            let now = self.app.clock().now();
            links.signed = keys
                .open(value, now)
                .map(|session| Arc::new((keys.clone(), session)));
        }
        links
    }
}

/// The page's routes on `app`. A token shorter than [`MIN_TOKEN_CHARS`] is not taken: the page
/// only reads, and the log says why; check one first with [`check_token`].
pub fn router(app: App, options: Options) -> axum::Router {
    let token = options.token.filter(|token| match check_token(token) {
        Ok(()) => true,
        Err(error) => {
            tracing::error!("the operator page only reads: {error}");
            false
        }
    });
    let shared = Arc::new(Shared {
        app,
        keys: token.as_deref().map(session::Keys::of),
        links: Links::new(&options.path, token.is_some()),
        token,
        hosts: options.hosts,
        origins: options
            .origins
            .into_iter()
            .map(|origin| origin.trim_end_matches('/').to_owned())
            .collect(),
        bulk: Arc::default(),
        guard: guard::Guard::default(),
    });
    let router = match options.metrics {
        Some(metrics) => axum::Router::new().route(
            "/metrics",
            get(move |state| metrics_text(state, metrics.clone())),
        ),
        None => axum::Router::new(),
    };
    router
        .route("/", get(overview))
        .route("/lag", get(lag_panel))
        .route("/explain", get(search))
        .route("/instances", get(instances::page))
        .route("/instances/{process}/{id}", get(instance))
        .route("/letters/bulk", get(bulk::page))
        .route("/letters/bulk/{action}", post(bulk::act))
        .route("/letters/{id}/{action}", post(act))
        .route("/pauses/{action}", get(pauses::confirm).post(pauses::act))
        .route("/read-models/{name}/rebuild", post(rebuild))
        .route("/signin", get(signin::page).post(signin::sign_in))
        .route("/signout", post(signin::sign_out))
        .layer(axum::middleware::from_fn_with_state(
            shared.clone(),
            known_host,
        ))
        .layer(axum::middleware::map_response_with_state(
            shared.clone(),
            as_page,
        ))
        .layer(axum::middleware::map_response(secure))
        .with_state(shared)
}

/// `/metrics`: the gauges surveyed now, then everything recorded, in Prometheus's text format.
async fn metrics_text(State(shared): State<Arc<Shared>>, metrics: Metrics) -> Response {
    if let Err(error) = shared.app.survey_metrics().await {
        let message = crate::error::chain(&error);
        tracing::warn!("the metrics' gauges could not be read: {message}");
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the metrics' gauges could not be read: {message}\n"),
        )
            .into_response();
    }
    metrics.exposition()
}

/// A refusal the web framework answered itself in plain text (a form that does not read, a body
/// too large, not a form at all), as one of the page's own: its reason, and the way back.
async fn as_page(State(shared): State<Arc<Shared>>, response: Response) -> Response {
    let plain = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|kind| kind.starts_with("text/plain"));
    let status = response.status();
    if !plain || !status.is_client_error() {
        return response;
    }
    let text = match axum::body::to_bytes(response.into_body(), 16 * 1024).await {
        Ok(body) => String::from_utf8_lossy(&body).into_owned(),
        Err(_) => String::new(),
    };
    let title = status.canonical_reason().unwrap_or("Refused");
    message(&shared.links, status, title, text)
}

/// Headers every answer carries: no script may run, no frame may hold the page (but the
/// overview may hold its own lag panel), nothing is sniffed, and no address leaks to another
/// site. The referrer policy is `same-origin`, not `no-referrer`: under `no-referrer` a browser
/// sends the page's own forms with `Origin: null`, which the origin check must refuse.
async fn secure(mut response: Response) -> Response {
    let framed = response.extensions().get::<Framed>().is_some();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(if framed {
            "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'self'; \
             base-uri 'none'"
        } else {
            "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; \
             frame-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        }),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::X_FRAME_OPTIONS,
        HeaderValue::from_static(if framed { "SAMEORIGIN" } else { "DENY" }),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    response
}

/// Refuses a request for a host name the page does not answer to (DNS rebinding).
async fn known_host(
    State(shared): State<Arc<Shared>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    // HTTP/1.1 names the host in `Host`; HTTP/2 in the address's authority.
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|host| host.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()))
        .unwrap_or("")
        .to_owned();
    let name = match host.strip_prefix('[') {
        Some(v6) => v6
            .split(']')
            .next()
            .map(|n| format!("[{n}]"))
            .unwrap_or_default(),
        None => host.split(':').next().unwrap_or("").to_owned(),
    };
    let known = ["localhost", "127.0.0.1", "[::1]"].contains(&name.as_str())
        || shared
            .hosts
            .iter()
            .any(|allowed| allowed.eq_ignore_ascii_case(&name));
    if !known {
        return message(
            &shared.links,
            StatusCode::MISDIRECTED_REQUEST,
            "Unknown host",
            if name.is_empty() {
                "This page answers only to requests that name their host.".to_owned()
            } else {
                format!("This page answers to loopback and the hosts it was given, not `{name}`.")
            },
        );
    }
    next.run(request).await
}

/// How far ahead the timeline may look: its name in the address, its label, its length. The
/// next hour (for processes whose deadlines are minutes apart), the first hours, two days
/// (unless told otherwise), or a week.
const WINDOWS: [(&str, &str, Duration); 4] = [
    ("1h", "hour", hours(1)),
    ("6h", "6 hours", hours(6)),
    ("48h", "48 hours", hours(48)),
    ("7d", "7 days", hours(24 * 7)),
];

/// The window the timeline shows unless the address names another.
const DEFAULT_WINDOW: usize = 2;

/// The most instances the timeline reads: the soonest, through the due-moment index.
const TIMELINE_INSTANCES: usize = 500;

/// The most open letters the overview lists: the oldest, which have waited longest.
const LETTERS: usize = 200;

/// How long a retry from the page waits for a worker to run it before the page answers that it
/// is requested.
const RETRY_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// One subscriber's line on the overview.
struct LagLine {
    name: String,
    position: u64,
    lag: u64,
    held: Option<String>,
    /// Where its checkpoint passed held events.
    passed: Vec<String>,
}

/// One read model's line on the overview.
struct ReadModelLine {
    name: String,
    position: u64,
    lag: u64,
    held: Option<String>,
    /// The rebuild under way: how far it has come.
    rebuilding: Option<u64>,
}

/// One letter's line on the overview.
struct LetterLine {
    /// Its instance's story, for a process letter.
    story: Option<String>,
    id: String,
    status: &'static str,
    kind: String,
    handler: String,
    failed: String,
    error: String,
    attempts: u32,
    parked: usize,
    open: bool,
}

#[derive(Template)]
#[template(path = "page/lag.html")]
struct LagPanel {
    now: Instant,
    lag: Vec<LagLine>,
    stale: Vec<LagLine>,
    max_lag: u64,
    waiting: u64,
    held: u64,
    drifted: u64,
    /// Scheduler entries whose due moment does not read.
    unclaimable: u64,
    /// The limits holding work back, each as a line.
    limited: Vec<String>,
    /// Each relay: its name, its sink, what it has yet to publish, since when, and the publish
    /// that fails.
    relays: Vec<RelayLine>,
    /// Each source of commands: its name, and what waits there (or why that is unknown).
    sources: Vec<(String, String)>,
}

/// One relay's line on the lag panel.
struct RelayLine {
    name: String,
    sink: String,
    behind: u64,
    /// How long the oldest event it has yet to publish has waited (`5m`), if one has.
    waited: Option<String>,
    failing: Option<String>,
}

#[derive(Template)]
#[template(path = "page/overview.html")]
struct Overview {
    links: Links,
    now: Instant,
    /// The timeline's window, as a person reads it (`48 hours`).
    window: &'static str,
    /// The windows to choose from: label, address, whether it is this one.
    windows: Vec<(&'static str, String, bool)>,
    timeline: timeline::Timeline,
    /// Deadlines drawn.
    shown: usize,
    /// Whether deadlines come after the window.
    later: bool,
    /// Instances left out of the timeline: process, instance, why their state does not read.
    unreadable: Vec<(String, String, String)>,
    /// The oldest open letters, oldest first.
    letters: Vec<LetterLine>,
    /// How many letters are open, those not shown included.
    open_letters: u64,
    writable: bool,
    /// Whether the page reloads itself: not while a token may be typed into it.
    refresh: bool,
    processes: Vec<instances::ProcessLine>,
    /// What operators paused: each as a line, and its target's kind, name and instance.
    pauses: Vec<(String, &'static str, String, String)>,
    /// The app's policies, each with its pause.
    policies: Vec<(String, Option<String>)>,
    /// How late the recent deadlines ran.
    lateness: lateness::Lateness,
    read_models: Vec<ReadModelLine>,
    /// The log's head, which rebuilds run up to.
    head: u64,
    notice: Option<String>,
}

#[derive(Template)]
#[template(path = "page/instance.html")]
struct InstancePage {
    links: Links,
    writable: bool,
    status: &'static str,
    story: Explained,
    lines: Vec<StepLine>,
    now: Instant,
}

/// One step of a story, as the page shows it.
struct StepLine {
    position: u64,
    at: Instant,
    ago: String,
    what: String,
    correlation: String,
    details: Vec<String>,
}

#[derive(Template)]
#[template(path = "page/message.html")]
struct Message {
    links: Links,
    title: String,
    text: String,
}

/// A page that says what went wrong, with its status.
fn message(links: &Links, status: StatusCode, title: &str, text: impl Into<String>) -> Response {
    let page = Message {
        links: links.clone(),
        title: title.to_owned(),
        text: text.into(),
    };
    match page.render() {
        Ok(html) => (status, Html(html)).into_response(),
        Err(error) => (status, format!("{title}: {error}")).into_response(),
    }
}

/// A rendered template, or the error that stopped it.
fn html(links: &Links, page: impl Template) -> Response {
    match page.render() {
        Ok(html) => Html(html).into_response(),
        Err(error) => message(
            links,
            StatusCode::INTERNAL_SERVER_ERROR,
            "The page could not be drawn",
            error.to_string(),
        ),
    }
}

/// A runtime error as a page.
fn failed(links: &Links, error: &crate::Error) -> Response {
    let status = match error {
        crate::Error::NotFound { .. } => StatusCode::NOT_FOUND,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    message(
        links,
        status,
        "That did not work",
        crate::error::chain(error),
    )
}

#[derive(Deserialize)]
struct OverviewQuery {
    done: Option<String>,
    /// The timeline's window, by name (`6h`, `48h`, `7d`).
    window: Option<String>,
}

/// What an action's redirect reports, by a fixed code: the page says nothing a link makes up.
fn notice(code: &str) -> Option<String> {
    Some(
        match code {
            "retried" => "The letter was retried.",
            "failed-again" => {
                "The letter's step ran, then a later step failed: see the new letter."
            }
            "rejected" => "The letter's command was rejected on the state now.",
            "retry-requested" => {
                "The retry is requested, but no worker ran it yet: it runs when a worker runs, \
                 and the letter's status then says how it went."
            }
            "discarded" => "The letter was discarded.",
            "paused" => "Paused: every runner leaves it until it is resumed.",
            "paused-already" => "It was paused already; the pause is as it was.",
            "resumed" => "Resumed: what waited runs in order, its deadlines late.",
            "not-paused" => "It was not paused.",
            "rebuild-started" => {
                "The rebuild started: a new table fills beside the live one, which keeps serving; it is swapped in once it reaches the log's head."
            }
            "no-read-model" => "This app has no such read model.",
            "signed-in" => "Signed in: what you do here keeps your name.",
            "signed-out" => "Signed out.",
            "bulk-retry-started" => {
                "The retry of the matching letters started: they run in batches in the background; each letter's status says how it went."
            }
            "bulk-busy" => {
                "Another bulk action of letters is still running: wait for it, then count again."
            }
            "bulk-discard-started" => {
                "The discard of the matching letters started: they run in batches in the background."
            }
            _ => return None,
        }
        .to_owned(),
    )
}

async fn overview(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Query(query): Query<OverviewQuery>,
) -> Response {
    let window = query
        .window
        .as_deref()
        .and_then(|name| WINDOWS.iter().position(|(known, ..)| *known == name))
        .unwrap_or(DEFAULT_WINDOW);
    let links = shared.links(&headers);
    match overview_page(
        &shared,
        &links,
        query.done.as_deref().and_then(notice),
        window,
    )
    .await
    {
        Ok(page) => html(&links, page),
        Err(error) => failed(&links, &error),
    }
}

async fn overview_page(
    shared: &Shared,
    links: &Links,
    notice: Option<String>,
    window: usize,
) -> Result<Overview, crate::Error> {
    let (_, label, length) = WINDOWS[window];
    let app = &shared.app;
    let now = app.clock().now();
    let ahead = app.pending_until(now + length, TIMELINE_INSTANCES).await?;
    let open = LetterFilter {
        status: Some(crate::store::LetterStatus::Failed),
        ..LetterFilter::default()
    };
    let open_letters = app.dead_letters().count(&open).await?;
    let letters = app
        .dead_letters()
        .list(&LetterFilter {
            limit: Some(LETTERS),
            ..open
        })
        .await?;
    let mut lines = Vec::with_capacity(letters.len());
    for letter in letters {
        let parked = app.dead_letters().parked(&letter).await?;
        lines.push(letter_line(links, letter, parked));
    }
    // Not reloaded under a signed-in operator, who may be typing into a form.
    let refresh = !links.signed_in();
    let paused = app.paused().await?;
    let head = app.store().head().await?;
    Ok(Overview {
        links: links.clone(),
        now,
        timeline: timeline::lay_out(&ahead.pending, now, length),
        window: label,
        windows: WINDOWS
            .iter()
            .enumerate()
            .map(|(index, (name, label, _))| {
                let href = format!("{}?window={name}", links.home());
                (*label, href, index == window)
            })
            .collect(),
        shown: ahead.pending.len(),
        later: ahead.later,
        unreadable: ahead
            .unreadable
            .into_iter()
            .map(|state| (state.process, state.instance, state.problem.to_string()))
            .collect(),
        letters: lines,
        open_letters,
        writable: links.signed_in(),
        refresh,
        processes: instances::process_lines(links, app, &paused).await?,
        lateness: lateness::Lateness::read(app, head).await?,
        policies: app
            .policies()
            .map(|policy| {
                let name = policy.name();
                (
                    name.to_owned(),
                    paused.policy(name).map(ToString::to_string),
                )
            })
            .collect(),
        pauses: paused
            .all()
            .iter()
            .map(|pause| {
                let target = &pause.target;
                let (name, instance) = (target.name().to_owned(), target.instance().to_owned());
                (pause.to_string(), target.kind(), name, instance)
            })
            .collect(),
        read_models: read_model_lines(app).await?,
        head,
        notice,
    })
}

/// Each read model of the app: its lag, what holds it, the rebuild under way.
async fn read_model_lines(app: &App) -> Result<Vec<ReadModelLine>, crate::Error> {
    let Some(tables) = app.store().capabilities().read_models else {
        return Ok(Vec::new());
    };
    let subscribers = app.subscriber_lags().await?.subscribers;
    let mut lines = Vec::new();
    for model in app.read_models() {
        let lag = subscribers
            .iter()
            .find(|s| s.subscriber == model.subscriber());
        lines.push(ReadModelLine {
            name: model.name().to_owned(),
            position: lag.map_or(0, |s| s.position),
            lag: lag.map_or(0, |s| s.lag),
            held: lag
                .and_then(|s| s.failing.as_ref())
                .map(|f| format!("held on {} at {}: {}", f.event_type, f.position, f.message)),
            rebuilding: tables
                .rebuilding(model.name())
                .await?
                .map(|(_, position)| position),
        });
    }
    Ok(lines)
}

/// Starts rebuilding a read model in the background, and goes back to the overview: a rebuild
/// of a long log outlasts a request. Its end, or its failure, is logged.
async fn rebuild(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    Form(form): Form<ActionForm>,
) -> Response {
    if let Err(refused) = authorize(&shared, &headers, &shared.links.rebuild(&name), &form.csrf) {
        return refused;
    }
    if !shared.app.read_models().any(|model| model.name() == name) {
        return Redirect::to(&shared.links.done("no-read-model")).into_response();
    }
    let app = shared.app.clone();
    tokio::spawn(async move {
        match app.rebuild(&name, |_| {}).await {
            Ok(done) => tracing::info!(
                read_model = %name,
                position = done.position,
                "rebuild started from the page swapped in"
            ),
            Err(error) => tracing::error!(
                read_model = %name,
                code = error.code(),
                "rebuild started from the page failed: {}",
                crate::error::chain(&error)
            ),
        }
    });
    Redirect::to(&shared.links.done("rebuild-started")).into_response()
}

/// The lag panel the overview frames: it reloads itself every few seconds, also while the
/// overview around it holds still under a signed-in operator.
async fn lag_panel(State(shared): State<Arc<Shared>>) -> Response {
    let app = &shared.app;
    let lag = match app.lag().await {
        Ok(lag) => lag,
        Err(error) => return failed(&shared.links, &error),
    };
    let line = |s: &crate::SubscriberLag| LagLine {
        name: s.subscriber.clone(),
        position: s.position,
        lag: s.lag,
        held: s
            .failing
            .as_ref()
            .map(|f| format!("held by {} on {}: {}", f.handler, f.event_type, f.message)),
        passed: s
            .passed
            .iter()
            .map(|bookmark| format!("passed {bookmark} while held"))
            .collect(),
    };
    let mut page = html(
        &shared.links,
        LagPanel {
            now: app.clock().now(),
            lag: lag.subscribers.iter().map(line).collect(),
            stale: lag.stale.iter().map(line).collect(),
            max_lag: lag.max_lag,
            waiting: lag.waiting_deadlines,
            held: lag.held_deadlines,
            drifted: lag.drifted_entries,
            unclaimable: lag.unclaimable_entries,
            limited: lag.limited.iter().map(ToString::to_string).collect(),
            relays: lag
                .relays
                .iter()
                .map(|relay| RelayLine {
                    name: relay.relay.clone(),
                    sink: relay.sink.clone(),
                    behind: relay.behind,
                    waited: relay
                        .oldest
                        .map(|oldest| app.clock().now().saturating_since(oldest).to_string()),
                    failing: relay.failing.as_ref().map(|f| {
                        format!(
                            "failing on {}: {}; attempt {}",
                            f.event_type, f.message, f.attempts
                        )
                    }),
                })
                .collect(),
            sources: lag
                .ingress
                .iter()
                .map(|source| {
                    let waits = match &source.behind {
                        Ok(behind) => match behind.oldest {
                            Some(oldest) => format!(
                                "{} waiting, the oldest sent {} ago",
                                behind.messages,
                                app.clock().now().saturating_since(oldest)
                            ),
                            None => format!("{} waiting", behind.messages),
                        },
                        Err(error) => format!("cannot tell: {error}"),
                    };
                    (source.source.clone(), waits)
                })
                .collect(),
        },
    );
    page.extensions_mut().insert(Framed);
    page
}

/// Marks an answer the page's own overview may frame.
#[derive(Clone, Copy)]
struct Framed;

fn letter_line(links: &Links, letter: DeadLetter, parked: usize) -> LetterLine {
    // A process letter is of one instance: its story tells what led to it.
    let story = (letter.kind == crate::store::LetterKind::Process)
        .then(|| crate::app::processes::writes::LetterPayload::of(&letter))
        .flatten()
        .map(|payload| links.instance(&letter.handler, &payload.instance));
    LetterLine {
        story,
        open: letter.status == crate::store::LetterStatus::Failed,
        status: letter.status.as_str(),
        kind: letter.kind.as_str().to_owned(),
        handler: letter.handler,
        failed: letter.event_type.unwrap_or_else(|| "-".to_owned()),
        error: letter.error_message,
        attempts: letter.attempts,
        parked,
        id: letter.id,
    }
}

#[derive(Deserialize)]
struct SearchQuery {
    process: String,
    id: String,
}

/// The search form's answer: the instance's page.
async fn search(State(shared): State<Arc<Shared>>, Query(query): Query<SearchQuery>) -> Redirect {
    Redirect::to(&shared.links.instance(&query.process, query.id.trim()))
}

/// `text` as one path segment; `.` and `..` too, which a browser would otherwise resolve.
fn encode(text: &str) -> String {
    if text.bytes().all(|byte| byte == b'.') {
        return text.bytes().map(|_| "%2E").collect();
    }
    percent(text)
}

/// `text` percent-encoded but for the characters an address keeps as they are: a query's value,
/// or (but for dot segments) a path segment.
fn percent(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (byte as char).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

async fn instance(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Path((process, id)): Path<(String, String)>,
) -> Response {
    let app = &shared.app;
    let links = shared.links(&headers);
    match app.explain_named(&process, &id).await {
        Ok(Some(story)) => {
            let now = app.clock().now();
            let lines = story
                .steps
                .iter()
                .map(|step| step_line(step, now))
                .collect();
            let status = story.status.as_text();
            html(
                &links,
                InstancePage {
                    writable: links.signed_in(),
                    links: links.clone(),
                    status,
                    story,
                    lines,
                    now,
                },
            )
        }
        Ok(None) => message(
            &links,
            StatusCode::NOT_FOUND,
            "No such instance",
            format!("{process} has no instance `{id}`: it never started."),
        ),
        Err(error) => failed(&links, &error),
    }
}

fn step_line(step: &crate::explain::Step, now: Instant) -> StepLine {
    let moment = |at: Option<Instant>| at.map_or_else(|| "-".to_owned(), |at| at.to_string());
    StepLine {
        position: step.position,
        at: step.at,
        ago: crate::instant::ago(step.at, now),
        what: step.describe(),
        correlation: step.correlation_id.clone(),
        details: step.details(moment),
    }
}

/// What a form that only acts sends: its form token.
#[derive(Deserialize)]
struct ActionForm {
    #[serde(default)]
    csrf: String,
}

/// Retries or discards letter `id`, once the request may act, then reports on the overview.
async fn act(
    State(shared): State<Arc<Shared>>,
    Path((id, action)): Path<(String, String)>,
    headers: HeaderMap,
    Form(form): Form<ActionForm>,
) -> Response {
    if action != "retry" && action != "discard" {
        return no_such_action(&shared.links, "A letter can be retried or discarded.");
    }
    let operator = match authorize(
        &shared,
        &headers,
        &shared.links.letter(&id, &action),
        &form.csrf,
    ) {
        Ok(session) => session.name,
        Err(refused) => return refused,
    };
    let letters = shared.app.dead_letters();
    let (done, failed) = if action == "retry" {
        // Asked of the workers, which run it as production runs it.
        let requested = match letters.request_retry(&id, &operator).await {
            Ok(request) => letters.await_request(&request, RETRY_WAIT).await,
            Err(error) => Err(error),
        };
        match requested.map(|request| request.outcome) {
            Ok(Some(RetryOutcome::Retried)) => ("retried", None),
            Ok(Some(RetryOutcome::FailedAgain { .. })) => ("failed-again", None),
            Ok(Some(RetryOutcome::Rejected { .. })) => ("rejected", None),
            Ok(Some(RetryOutcome::Failed { code, error })) => {
                ("retry-failed", Some(worker_failure(&id, &code, error)))
            }
            Ok(None) => ("retry-requested", None),
            Err(error) => ("retry-failed", Some(error)),
        }
    } else {
        match letters.discard(&id).await {
            Ok(()) => ("discarded", None),
            Err(error) => ("discard-failed", Some(error)),
        }
    };
    match failed {
        // The operator reads why on the answer itself, with the way back.
        Some(error) => {
            let why = crate::error::chain(&error);
            tracing::warn!(
                letter = %id,
                by = %operator,
                "{action} of a letter from the page failed: {why}"
            );
            let (status, title) = match &error {
                crate::Error::NotFound { .. } => (StatusCode::NOT_FOUND, "No such letter"),
                crate::Error::LetterSettled { .. } => (StatusCode::CONFLICT, "Already settled"),
                _ if action == "retry" => (StatusCode::OK, "The retry failed"),
                _ => (StatusCode::INTERNAL_SERVER_ERROR, "The discard failed"),
            };
            message(
                &shared.links,
                status,
                title,
                format!("{why}. The letter stays as it was."),
            )
        }
        None => {
            tracing::info!(letter = %id, by = %operator, "{done} from the page");
            Redirect::to(&shared.links.done(done)).into_response()
        }
    }
}

/// A requested retry's failure as the worker recorded it, as the error the page answers with:
/// a letter settled or gone meanwhile as such.
fn worker_failure(id: &str, code: &str, error: String) -> crate::Error {
    match code {
        "DEAD_LETTER_SETTLED" => crate::Error::LetterSettled { id: id.to_owned() },
        "NOT_FOUND" => crate::Error::NotFound {
            what: format!("dead letter `{id}`"),
        },
        _ => crate::Error::RetryFailed {
            id: id.to_owned(),
            message: error,
        },
    }
}

/// The answer to an action the page does not have, saying which it has.
fn no_such_action(links: &Links, which: &str) -> Response {
    message(links, StatusCode::NOT_FOUND, "No such action", which)
}

/// The session an action runs in, or the answer refusing it: the page has no token, the
/// request comes from another origin (a form on another site cannot post here), it carries no
/// session that holds (never signed in, expired, signed with another token), or `form_token` is
/// not the token of the form posting to `action` in that session.
#[allow(
    clippy::result_large_err,
    reason = "the refusal is the handler's answer, returned at once"
)]
fn authorize(
    shared: &Shared,
    headers: &HeaderMap,
    action: &str,
    form_token: &str,
) -> Result<session::Session, Response> {
    let refused =
        |title: &str, text: String| Err(message(&shared.links, StatusCode::FORBIDDEN, title, text));
    let Some(keys) = &shared.keys else {
        return refused(
            "This page only reads",
            "It was started without a token, so nothing can be done here.".to_owned(),
        );
    };
    if from_elsewhere(shared, headers) {
        return refused(
            "Refused",
            "The request did not come from this page.".to_owned(),
        );
    }
    let now = shared.app.clock().now();
    let Some(session) = session::cookie(headers).and_then(|value| keys.open(value, now)) else {
        return refused(
            "Sign in first",
            format!(
                "Acting needs a session: sign in at {} with the operator's token (a session lasts {}).",
                shared.links.signin(),
                session::LIFETIME
            ),
        );
    };
    if !keys.form_token_holds(&session, action, form_token) {
        return refused(
            "Refused",
            "The form is not one this session was given: reload the page and try again.".to_owned(),
        );
    }
    Ok(session)
}

/// Whether a request that acts comes from another site than the page's own (or the origins it
/// was given).
fn from_elsewhere(shared: &Shared, headers: &HeaderMap) -> bool {
    let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let cross_site = text(header::HeaderName::from_static("sec-fetch-site"))
        .is_some_and(|site| site != "same-origin" && site != "none");
    let allowed = |origin: &str| {
        shared
            .origins
            .iter()
            .any(|allowed| allowed.eq_ignore_ascii_case(origin))
    };
    let foreign_origin = match (text(header::ORIGIN), text(header::HOST)) {
        (Some(origin), _) if allowed(origin) => false,
        (Some(origin), Some(host)) => origin
            .split_once("://")
            .is_none_or(|(_, origin_host)| origin_host != host),
        (Some(_), None) => true,
        (None, _) => false,
    };
    cross_site || foreign_origin
}

/// Whether `a` and `b` are equal, in a time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}
