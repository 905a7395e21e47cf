//! Pausing and resuming from the page: an instance's page pauses it or its process, the
//! overview pauses a process or a policy and resumes each pause. The pause keeps the
//! signed-in operator's name.

use std::sync::Arc;

use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::{Shared, authorize, message, no_such_action};
use crate::store::PauseTarget;

/// What a pause or resume form sends.
#[derive(Deserialize)]
pub(super) struct PauseForm {
    #[serde(default)]
    csrf: String,
    /// `process`, `instance`, `policy` or `subscriber`.
    kind: String,
    name: String,
    #[serde(default)]
    instance: String,
    #[serde(default)]
    reason: String,
}

/// Pauses (`action` = `pause`) or resumes what the form names, once the request may act, then
/// reports on the overview.
pub(super) async fn act(
    State(shared): State<Arc<Shared>>,
    Path(action): Path<String>,
    headers: HeaderMap,
    Form(form): Form<PauseForm>,
) -> Response {
    if action != "pause" && action != "resume" {
        return no_such_action(&shared.links, "What is paused can be paused or resumed.");
    }
    let operator = match authorize(&shared, &headers, &shared.links.pause(&action), &form.csrf) {
        Ok(session) => session.name,
        Err(refused) => return refused,
    };
    let Some(target) = PauseTarget::from_parts(&form.kind, &form.name, &form.instance) else {
        return message(
            &shared.links,
            StatusCode::BAD_REQUEST,
            "Nothing to pause",
            format!(
                "`{}` is not what can be paused: a process, an instance, a policy or a subscriber.",
                form.kind
            ),
        );
    };
    let done = match action.as_str() {
        "pause" => {
            let reason = Some(form.reason.as_str()).filter(|r| !r.trim().is_empty());
            match shared.app.pause(target, &operator, reason).await {
                Ok(true) => "paused",
                Ok(false) => "paused-already",
                Err(error) => {
                    return message(
                        &shared.links,
                        StatusCode::BAD_REQUEST,
                        "Not paused",
                        error.to_string(),
                    );
                }
            }
        }
        "resume" => match shared.app.resume(&target).await {
            Ok(true) => {
                tracing::info!(by = %operator, "{target} resumed from the page");
                "resumed"
            }
            Ok(false) => "not-paused",
            Err(error) => {
                tracing::warn!(
                    "a resume from the page failed: {}",
                    crate::error::chain(&error)
                );
                "resume-failed"
            }
        },
        _ => {
            return no_such_action(&shared.links, "What is paused can be paused or resumed.");
        }
    };
    Redirect::to(&shared.links.done(done)).into_response()
}
