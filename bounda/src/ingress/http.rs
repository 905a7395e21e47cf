//! Commands over HTTP: a route a service mounts, answering each command with what it decided.
//!
//! - `POST /commands/{name}`: the command as a JSON body, its key in `Idempotency-Key`.
//! - `POST /commands`: a CloudEvent, in binary mode (`ce-` headers, the command as the body) or
//!   structured (`application/cloudevents+json`): its `type` names the command, its `source`
//!   and `id` are the key. What another bounda service's webhook relay posts.
//!
//! Answers: `200` with the events decided; `409` with the command's rejection; `400` naming
//! the field that does not parse (or the key or envelope missing); `404` for a name the app does
//! not take; `422` for a key that named another request; `401` for a signature that does not
//! verify; `503` when the command could not be decided now. A key that comes again is given its
//! first answer, with `Idempotent-Replayed: true`.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;

use crate::App;
use crate::ingress::{Answer, Arrival, Ingested, Refusal};

/// The longest idempotency key taken.
const LONGEST_KEY: usize = 255;

/// Who may send commands to the route.
pub enum Guard {
    /// Requests signed as Standard Webhooks says, with this secret: what a
    /// `bounda-webhooks` relay of another service posts.
    Signed(standardwebhooks::Webhook),
    /// Anyone who reaches it: for a route behind the service's own authentication layer.
    Open,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Guard::Signed(_) => "Guard::Signed(..)",
            Guard::Open => "Guard::Open",
        })
    }
}

impl Guard {
    /// Takes requests signed with `secret` (`whsec_` and base64); refused at once when the
    /// secret does not decode or is shorter than 24 bytes.
    pub fn signed(secret: &str) -> Result<Guard, crate::Error> {
        let refused = |why: &str| crate::Error::Configuration {
            message: format!(
                "the ingress secret {why}: give it as `whsec_` and at least 24 bytes in base64 \
                 (`openssl rand -base64 32`)"
            ),
        };
        let key = secret.strip_prefix("whsec_").unwrap_or(secret);
        let webhook =
            standardwebhooks::Webhook::new(secret).map_err(|_| refused("is not base64"))?;
        if key.len() * 3 / 4 < 24 {
            return Err(refused("is too short"));
        }
        Ok(Guard::Signed(webhook))
    }
}

struct Route {
    app: App,
    guard: Guard,
}

/// The ingress routes of `app` (`POST /commands` and `POST /commands/{name}`), taking the
/// commands its [`Ingress`](crate::ingress::Ingress) lists from whoever `guard` lets in. Nest
/// it in the service's own router, or serve it alone.
pub fn router(app: App, guard: Guard) -> axum::Router {
    let route = std::sync::Arc::new(Route { app, guard });
    axum::Router::new()
        .route("/commands", post(cloud_event))
        .route("/commands/{name}", post(named))
        .with_state(route)
}

type Shared = State<std::sync::Arc<Route>>;

/// `POST /commands/{name}`: the command as JSON, its key in `Idempotency-Key`.
async fn named(
    State(route): Shared,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(refused) = route.verify(&headers, &body) {
        return refused;
    }
    let key = match headers.get("idempotency-key").map(HeaderValue::to_str) {
        Some(Ok(key)) if !key.is_empty() && key.len() <= LONGEST_KEY => key,
        _ => {
            return problem(
                StatusCode::BAD_REQUEST,
                format!(
                    "send the command's `Idempotency-Key` header (1 to {LONGEST_KEY} visible \
                     characters, the same on each try of one command)"
                ),
                None,
            );
        }
    };
    let arrival = Arrival {
        name,
        key: format!("http:{key}"),
        payload: body.to_vec(),
        correlation_id: correlation(&headers),
    };
    route.answer(&arrival).await
}

/// `POST /commands`: a CloudEvent whose `type` names the command.
async fn cloud_event(State(route): Shared, headers: HeaderMap, body: Bytes) -> Response {
    if let Err(refused) = route.verify(&headers, &body) {
        return refused;
    }
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    match Arrival::of_cloud_event(header, &body) {
        Ok(mut arrival) => {
            arrival.correlation_id = correlation(&headers);
            route.answer(&arrival).await
        }
        Err(message) => problem(
            StatusCode::BAD_REQUEST,
            format!(
                "{message}; or send the command to `/commands/{{name}}` with an \
                 `Idempotency-Key`"
            ),
            None,
        ),
    }
}

impl Route {
    /// Whether the guard lets the request in.
    #[allow(
        clippy::result_large_err,
        reason = "the refusal is the response itself"
    )]
    fn verify(&self, headers: &HeaderMap, body: &[u8]) -> Result<(), Response> {
        match &self.guard {
            Guard::Open => Ok(()),
            Guard::Signed(webhook) => webhook.verify(body, headers).map_err(|error| {
                problem(
                    StatusCode::UNAUTHORIZED,
                    format!("the request's Standard Webhooks signature does not verify: {error}"),
                    None,
                )
            }),
        }
    }

    async fn answer(&self, arrival: &Arrival) -> Response {
        match self.app.ingest(arrival).await {
            Ok(ingested) => answered(&ingested),
            Err(refusal) => refused(arrival, &refusal),
        }
    }
}

/// The answer of a decided or rejected command.
fn answered(ingested: &Ingested) -> Response {
    let status = match ingested.answer {
        Answer::Decided { .. } => StatusCode::OK,
        Answer::Rejected { .. } => StatusCode::CONFLICT,
    };
    let mut response = (status, axum::Json(&ingested.answer)).into_response();
    if ingested.replayed {
        response
            .headers_mut()
            .insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    response
}

/// The answer of a command not decided.
fn refused(arrival: &Arrival, refusal: &Refusal) -> Response {
    let status = match refusal {
        Refusal::Unknown { .. } => StatusCode::NOT_FOUND,
        Refusal::Unparsed { .. } => StatusCode::BAD_REQUEST,
        Refusal::KeyReused { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        Refusal::Failed(_) => StatusCode::SERVICE_UNAVAILABLE,
    };
    let field = match refusal {
        Refusal::Unparsed { field, .. } if !field.is_empty() => Some(field.as_str()),
        _ => None,
    };
    if let Refusal::Failed(error) = refusal {
        tracing::error!(
            command = %arrival.name,
            key = %arrival.key,
            "an arrived command could not be decided: {}",
            crate::error::chain(error)
        );
    }
    let mut response = problem(status, refusal.to_string(), field);
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

/// A JSON error body: `{"error": .., "field": ..}`.
fn problem(status: StatusCode, error: String, field: Option<&str>) -> Response {
    let body = match field {
        Some(field) => serde_json::json!({ "error": error, "field": field }),
        None => serde_json::json!({ "error": error }),
    };
    (status, axum::Json(body)).into_response()
}

/// The correlation the sender gave in `X-Correlation-Id`, if any.
fn correlation(headers: &HeaderMap) -> Option<String> {
    headers
        .get("x-correlation-id")
        .and_then(|value| value.to_str().ok())
        .filter(|value| !value.is_empty())
        .map(str::to_owned)
}
