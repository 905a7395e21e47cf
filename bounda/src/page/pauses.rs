//! Pausing and resuming from the page: an instance's page pauses it or its process, the
//! overview pauses a process or a policy and resumes each pause, each through a confirmation
//! that says what it holds or lets go. The pause keeps the signed-in operator's name.

use std::sync::Arc;

use askama::Template;
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::{Links, Shared, authorize, failed, html, message, no_such_action};
use crate::store::PauseTarget;
use crate::store::{InstanceQuery, InstanceStatus};

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
    let (pausing, target) = match parse(
        &shared.links,
        &action,
        &form.kind,
        &form.name,
        &form.instance,
    ) {
        Ok(parsed) => parsed,
        Err(refused) => return refused,
    };
    let operator = match authorize(&shared, &headers, &shared.links.pause(&action), &form.csrf) {
        Ok(session) => session.name,
        Err(refused) => return refused,
    };
    let done = match pausing {
        true => {
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
        false => match shared.app.resume(&target).await {
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
                return failed(&shared.links, &error);
            }
        },
    };
    Redirect::to(&shared.links.done(done)).into_response()
}

/// The action (`true` for a pause, `false` for a resume) and the target a form or a link names,
/// or the page that refuses them.
#[allow(
    clippy::result_large_err,
    reason = "the refusal is the handler's answer, returned at once"
)]
fn parse(
    links: &Links,
    action: &str,
    kind: &str,
    name: &str,
    instance: &str,
) -> Result<(bool, PauseTarget), Response> {
    let pausing = match action {
        "pause" => true,
        "resume" => false,
        _ => {
            return Err(no_such_action(
                links,
                "What is paused can be paused or resumed.",
            ));
        }
    };
    match PauseTarget::from_parts(kind, name, instance) {
        Some(target) => Ok((pausing, target)),
        None => Err(message(
            links,
            StatusCode::BAD_REQUEST,
            "Nothing to pause",
            format!(
                "`{kind}` is not what can be paused: a process, an instance, a policy or a subscriber."
            ),
        )),
    }
}

/// What a confirmation is asked for: the target, as the forms name it.
#[derive(Deserialize)]
pub(super) struct Target {
    kind: String,
    name: String,
    #[serde(default)]
    instance: String,
}

#[derive(Template)]
#[template(path = "page/pause.html")]
struct Confirm {
    links: Links,
    /// `pause` or `resume`.
    action: String,
    kind: String,
    name: String,
    instance: String,
    /// The target, as a person reads it.
    target: String,
    /// What the action holds back or lets go, line by line.
    effects: Vec<String>,
    writable: bool,
}

/// The confirmation of a pause or a resume: what the target is and what the action does to it
/// now (the instances and deadlines a pause holds, what a resume lets run), and the form that
/// does it.
pub(super) async fn confirm(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(action): Path<String>,
    Query(target): Query<Target>,
) -> Response {
    let links = shared.links(&headers);
    let (pausing, parsed) = match parse(
        &links,
        &action,
        &target.kind,
        &target.name,
        &target.instance,
    ) {
        Ok(parsed) => parsed,
        Err(refused) => return refused,
    };
    // Nothing is offered for what this app does not have; a pause of it is resumed all the same.
    if pausing && let Err(error) = shared.app.check_target(&parsed).await {
        return failed(&links, &error);
    }
    let effects = match effects(&shared, &parsed, pausing).await {
        Ok(effects) => effects,
        Err(error) => return failed(&links, &error),
    };
    html(
        &links,
        Confirm {
            writable: links.signed_in(),
            links: links.clone(),
            action,
            kind: target.kind,
            name: target.name,
            instance: target.instance,
            target: parsed.to_string(),
            effects,
        },
    )
}

/// What pausing (`pausing`) or resuming `target` does now, as lines a person reads.
async fn effects(
    shared: &Shared,
    target: &PauseTarget,
    pausing: bool,
) -> Result<Vec<String>, crate::Error> {
    let app = &shared.app;
    let now = app.clock().now();
    let (waits, runs) = match pausing {
        true => ("wait", "would wait"),
        false => ("run now, in order", "run now, late"),
    };
    Ok(match target {
        PauseTarget::Process { name } => {
            let running = InstanceQuery {
                process: Some(name.clone()),
                status: Some(InstanceStatus::Running),
                ..InstanceQuery::default()
            };
            let overdue = InstanceQuery {
                due_until: Some(now),
                ..running.clone()
            };
            let running = app.count_instances(&running).await?;
            let overdue = app.count_instances(&overdue).await?;
            vec![
                format!("{running} running instances: their events and deadlines {waits}."),
                format!("{overdue} of them have a deadline due already, which {runs}."),
            ]
        }
        PauseTarget::Instance { process, id } => {
            let pending = match app.explain_named(process, id).await? {
                Some(story) => story.pending.len(),
                None => 0,
            };
            vec![format!(
                "Its events and its {pending} pending deadlines {waits}; the process's other instances go on."
            )]
        }
        PauseTarget::Policy { .. } => vec![format!(
            "Its runs on events and its delayed runs {waits}; the other policies go on."
        )],
        PauseTarget::Ingress { .. } => vec![format!(
            "Its messages {waits} at the broker, taken in order once resumed."
        )],
        PauseTarget::Relay { .. } => vec![format!(
            "The events it publishes {waits}, each stream in order; the other relays go on."
        )],
        PauseTarget::Subscriber { name } => {
            let behind = app
                .subscriber_lags()
                .await?
                .subscribers
                .into_iter()
                .find(|lag| lag.subscriber == *name)
                .map_or(0, |lag| lag.lag);
            vec![format!(
                "Every handler of it: {behind} events behind now; they {waits}."
            )]
        }
    })
}
