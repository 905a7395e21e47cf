//! Letters in bulk on the page: a filter, the count of open letters it matches (the
//! confirmation), and the retry or discard of them all, run in the background in paced batches:
//! retries asked of the workers as
//! [`DeadLetters::request_retry_all`](crate::app::DeadLetters::request_retry_all) asks them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use askama::Template;
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::{Links, Shared, authorize, failed, html, message, no_such_action};
use crate::store::LetterFilter;
use crate::{BulkReport, Instant, Pace};

/// The filter a bulk action takes: a handler, text the error contains, and when the letters
/// last failed (`from` inclusive, `until` exclusive, as `2026-12-01T00:00:00Z`).
#[derive(Debug, Default, Deserialize)]
pub(super) struct BulkQuery {
    handler: Option<String>,
    error: Option<String>,
    from: Option<String>,
    until: Option<String>,
}

impl BulkQuery {
    /// The letter filter, or which moment does not read.
    fn filter(&self) -> Result<LetterFilter, String> {
        let given = |text: &Option<String>| {
            text.as_deref()
                .map(str::trim)
                .filter(|text| !text.is_empty())
                .map(str::to_owned)
        };
        let moment = |text: &Option<String>| -> Result<Option<Instant>, String> {
            given(text)
                .map(|text| {
                    text.parse::<Instant>().map_err(|error| {
                        format!("`{text}` is not a moment such as 2026-12-01T00:00:00Z: {error}")
                    })
                })
                .transpose()
        };
        Ok(LetterFilter {
            handler: given(&self.handler),
            error_contains: given(&self.error),
            failed_from: moment(&self.from)?,
            failed_until: moment(&self.until)?,
            ..LetterFilter::default()
        })
    }
}

/// A filter that does not read, as a page.
fn unreadable(links: &Links, problem: String) -> Response {
    message(
        links,
        StatusCode::BAD_REQUEST,
        "That filter does not read",
        problem,
    )
}

#[derive(Template)]
#[template(path = "page/bulk.html")]
struct BulkPage {
    links: Links,
    handler: String,
    error: String,
    from: String,
    until: String,
    handlers: Vec<String>,
    matching: u64,
    /// The moment the count was taken: the action takes the letters that failed before it.
    drawn: Instant,
    writable: bool,
}

/// The bulk page: the filter, and how many open letters it matches, with the actions.
pub(super) async fn page(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Query(query): Query<BulkQuery>,
) -> Response {
    let links = shared.links(&headers);
    let filter = match query.filter() {
        Ok(filter) => filter,
        Err(problem) => return unreadable(&links, problem),
    };
    let letters = shared.app.dead_letters();
    let matching = match letters.count_open(&filter).await {
        Ok(matching) => matching,
        Err(error) => return failed(&links, &error),
    };
    let mut handlers: Vec<String> = shared
        .app
        .processes()
        .map(|p| p.name().to_owned())
        .chain(shared.app.policies().map(|p| p.name().to_owned()))
        .collect();
    handlers.sort();
    handlers.dedup();
    html(
        &links,
        BulkPage {
            writable: links.signed_in(),
            links: links.clone(),
            handler: filter.handler.unwrap_or_default(),
            error: filter.error_contains.unwrap_or_default(),
            from: filter
                .failed_from
                .map(|at| at.to_string())
                .unwrap_or_default(),
            until: filter
                .failed_until
                .map(|at| at.to_string())
                .unwrap_or_default(),
            handlers,
            matching,
            drawn: shared.app.clock().now() + crate::millis(1),
        },
    )
}

/// What a bulk action's form sends: the filter, the letters the operator confirmed (at most
/// that many, failed before the count was taken), and its form token.
#[derive(Deserialize)]
pub(super) struct BulkForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    handler: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    from: Option<String>,
    #[serde(default)]
    until: Option<String>,
    #[serde(default)]
    counted_at: Option<Instant>,
    #[serde(default)]
    limit: Option<usize>,
}

/// Marks a bulk action running, and clears the mark when dropped, however the task ends.
struct Running(Arc<AtomicBool>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// How long a bulk retry waits for the workers to run a batch before it stops, leaving the
/// rest as they are.
const BATCH_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Starts retrying or discarding every open letter the form's filter matches, in the
/// background (a thousand letters outlast a request), and goes back to the overview. Its end is
/// logged with its counts; each letter's outcome is its status.
pub(super) async fn act(
    State(shared): State<Arc<Shared>>,
    Path(action): Path<String>,
    headers: HeaderMap,
    Form(form): Form<BulkForm>,
) -> Response {
    if action != "retry" && action != "discard" {
        return no_such_action(
            &shared.links,
            "Letters can be retried or discarded in bulk.",
        );
    }
    let action_path = shared.links.bulk_action(&action);
    let operator = match authorize(&shared, &headers, &action_path, &form.csrf) {
        Ok(session) => session.name,
        Err(refused) => return refused,
    };
    let filter = BulkQuery {
        handler: form.handler,
        error: form.error,
        from: form.from,
        until: form.until,
    }
    .filter();
    let filter = match filter {
        Ok(filter) => LetterFilter {
            // The letters counted: failed before the count, at most that many.
            failed_until: match (filter.failed_until, form.counted_at) {
                (Some(until), Some(counted)) => Some(until.min(counted)),
                (until, counted) => until.or(counted),
            },
            limit: form.limit,
            ..filter
        },
        Err(problem) => return unreadable(&shared.links, problem),
    };
    // One at a time: two runs over the same letters would retry one twice.
    if shared
        .bulk
        .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        return Redirect::to(&shared.links.done("bulk-busy")).into_response();
    }
    let running = Running(shared.bulk.clone());
    let by = operator.clone();
    let app = shared.app.clone();
    let retry = action == "retry";
    tokio::spawn(async move {
        let _running = running;
        let letters = app.dead_letters();
        let done: Result<BulkReport, crate::Error> = match retry {
            // Asked of the workers, a batch at a time, each batch waited for.
            true => {
                letters
                    .request_retry_all(&filter, Pace::default(), &by, BATCH_WAIT, |_, _| {})
                    .await
            }
            false => {
                letters
                    .discard_all(&filter, Pace::default(), |_, _| {})
                    .await
            }
        };
        match done {
            Ok(report) if report.counts().contains_key("waiting") => tracing::warn!(
                counts = ?report.counts(),
                untaken = report.untaken,
                by = %operator,
                "bulk retry of letters started from the page stopped: no worker ran a batch \
                 within {}s; its retries stay requested, and the letters after it were left as \
                 they are",
                BATCH_WAIT.as_secs()
            ),
            Ok(report) => tracing::info!(
                counts = ?report.counts(),
                by = %operator,
                "bulk {} of letters started from the page done",
                if retry { "retry" } else { "discard" }
            ),
            Err(error) => tracing::error!(
                code = error.code(),
                by = %operator,
                "bulk {} of letters started from the page failed: {}",
                if retry { "retry" } else { "discard" },
                crate::error::chain(&error)
            ),
        }
    });
    let done = if retry {
        "bulk-retry-started"
    } else {
        "bulk-discard-started"
    };
    Redirect::to(&shared.links.done(done)).into_response()
}
