//! Signing in and out: the token typed once, with the operator's name, opens a session.

use std::sync::Arc;

use askama::Template;
use axum::extract::{Form, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::guard::{Attempt, LOCK_AFTER, LOCKOUT};
use super::{Links, Shared, authorize, from_elsewhere, html, message, same, session};

#[derive(Template)]
#[template(path = "page/signin.html")]
struct SignIn {
    links: Links,
    /// How long a session lasts.
    lifetime: crate::Duration,
}

/// The sign-in form; a page started without a token says it only reads.
pub(super) async fn page(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if shared.keys.is_none() {
        return read_only(&shared.links);
    }
    let links = shared.links(&headers);
    let page = SignIn {
        links: links.clone(),
        lifetime: session::LIFETIME,
    };
    html(&links, page)
}

/// What the sign-in form sends.
#[derive(Deserialize)]
pub(super) struct SignInForm {
    name: String,
    token: String,
}

/// Opens a session for the operator named in the form, once the token is the page's: a signed
/// cookie the browser sends back to this page only, until it expires or they sign out.
pub(super) async fn sign_in(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Form(form): Form<SignInForm>,
) -> Response {
    let (Some(keys), Some(expected)) = (&shared.keys, &shared.token) else {
        return read_only(&shared.links);
    };
    let refused = |text: &str| message(&shared.links, StatusCode::FORBIDDEN, "Refused", text);
    if from_elsewhere(&shared, &headers) {
        return refused("The request did not come from this page.");
    }
    let now = shared.app.clock().now();
    match shared
        .guard
        .attempt(now, || same(form.token.as_bytes(), expected.as_bytes()))
    {
        Attempt::Right => {}
        Attempt::Wrong { locked: false } => {
            tracing::warn!(
                "a sign-in to the operator page was refused: the token is not the operator's"
            );
            return refused("The token is not the operator's.");
        }
        Attempt::Wrong { locked: true } => {
            tracing::error!(
                "sign-in to the operator page is locked for {LOCKOUT} after {LOCK_AFTER} wrong tokens in a row: someone may be guessing it; restarting the page lifts it"
            );
            return refused("The token is not the operator's.");
        }
        Attempt::Wait { until, locked } => return too_soon(&shared.links, now, until, locked),
    }
    let name = form.name.trim();
    if name.is_empty() || name.chars().count() > 100 || name.chars().any(char::is_control) {
        return message(
            &shared.links,
            StatusCode::BAD_REQUEST,
            "Who are you?",
            "Sign in with your name (up to 100 characters): the pauses and retries you make keep it.",
        );
    }
    let session = keys.start(name, now);
    tracing::info!(operator = %name, "an operator signed in to the page");
    let seconds = session::LIFETIME.as_millis() / 1_000;
    let cookie = session::set_cookie(
        &keys.seal(&session),
        &shared.links.home(),
        seconds,
        https(&headers),
    );
    with_cookie(&shared.links.done("signed-in"), &cookie)
}

/// The answer to a sign-in the budget of wrong tokens does not compare yet: 429, with when to
/// try again.
fn too_soon(links: &Links, now: crate::Instant, until: crate::Instant, locked: bool) -> Response {
    let wait = until - now;
    let text = match locked {
        true => format!(
            "Sign-in is locked until {until} after {LOCK_AFTER} wrong tokens in a row. Wait, or restart the page to lift it."
        ),
        false => format!("Too many wrong tokens: try again in {wait}."),
    };
    let mut response = message(links, StatusCode::TOO_MANY_REQUESTS, "Not now", text);
    let seconds = wait.as_millis().div_ceil(1_000).max(1);
    if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

/// Ends the session: its cookie is cleared.
pub(super) async fn sign_out(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Form(form): Form<super::ActionForm>,
) -> Response {
    if let Err(refused) = authorize(&shared, &headers, &shared.links.signout(), &form.csrf) {
        return refused;
    }
    let cookie = session::set_cookie("", &shared.links.home(), 0, https(&headers));
    with_cookie(&shared.links.done("signed-out"), &cookie)
}

/// Whether the page was opened over HTTPS (directly, or through a proxy that says so), so its
/// cookie is marked `Secure`.
fn https(headers: &HeaderMap) -> bool {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    text("origin").is_some_and(|origin| origin.starts_with("https://"))
        || text("x-forwarded-proto").is_some_and(|proto| proto.eq_ignore_ascii_case("https"))
}

/// A redirect to `to` that sets `cookie`.
fn with_cookie(to: &str, cookie: &str) -> Response {
    let mut response = Redirect::to(to).into_response();
    if let Ok(value) = HeaderValue::from_str(cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// The answer of a page started without a token to signing in.
fn read_only(links: &Links) -> Response {
    message(
        links,
        StatusCode::FORBIDDEN,
        "This page only reads",
        "It was started without a token, so nobody signs in to act here.",
    )
}
