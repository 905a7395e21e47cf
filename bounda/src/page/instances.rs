//! The instances on the page: a filter (process, status, what is due, correlation, id prefix,
//! order), the instances it matches a page at a time, and how many.

use std::sync::Arc;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;

use super::{Links, Shared, encode, failed, html, message};
use crate::instant::{ago, until as relative};
use crate::store::{InstanceCursor, InstanceOrder, InstanceQuery, InstanceStatus};
use crate::{Duration, Instant, days, hours};
/// The due filters the page offers: by name, label, and the span from now (`None`: overdue).
const DUE: [(&str, &str, Option<Duration>); 4] = [
    ("overdue", "overdue", None),
    ("1h", "due within an hour", Some(hours(1))),
    ("24h", "due within a day", Some(hours(24))),
    ("7d", "due within a week", Some(days(7))),
];

/// How many instances a page lists unless the address says.
const PAGE: usize = 50;

/// The filter, as the form and the overview's links send it; empty fields filter nothing.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ListQuery {
    process: Option<String>,
    status: Option<String>,
    due: Option<String>,
    correlation: Option<String>,
    id: Option<String>,
    order: Option<String>,
    after: Option<String>,
    /// How many a page lists: 50 unless given, at most 1,000.
    limit: Option<usize>,
}

/// What the form sends, its empty fields left out.
fn given(text: &Option<String>) -> Option<String> {
    text.as_deref()
        .map(str::trim)
        .filter(|text| !text.is_empty())
        .map(str::to_owned)
}

impl ListQuery {
    /// The query at `now`, or which field does not read.
    fn query(&self, now: Instant) -> Result<InstanceQuery, String> {
        let status = given(&self.status)
            .map(|text| {
                InstanceStatus::parse(&text).ok_or_else(|| {
                    format!("`{text}` is no status: running, failed, timed_out or completed")
                })
            })
            .transpose()?;
        let due = given(&self.due)
            .map(|name| {
                DUE.iter()
                    .find(|(known, ..)| *known == name)
                    .map(|(_, _, span)| *span)
                    .ok_or_else(|| format!("`{name}` is no due filter: overdue, 1h, 24h or 7d"))
            })
            .transpose()?;
        let order = match given(&self.order).as_deref() {
            None | Some("newest") => InstanceOrder::Newest,
            Some("soonest") => InstanceOrder::Soonest,
            Some(other) => return Err(format!("`{other}` is no order: newest or soonest")),
        };
        let after = given(&self.after)
            .map(|text| text.parse::<InstanceCursor>())
            .transpose()?;
        Ok(InstanceQuery {
            process: given(&self.process),
            status,
            due_from: due.flatten().map(|_| now),
            due_until: due.map(|span| span.map_or(now, |span| now + span)),
            correlation_id: given(&self.correlation),
            id_prefix: given(&self.id),
            order,
            after,
            limit: match self.limit {
                None => PAGE,
                Some(limit @ 1..=1_000) => limit,
                Some(other) => return Err(format!("`{other}` is no limit: 1 to 1000")),
            },
        })
    }

    /// This filter's address, going on after `after`.
    fn href(&self, links: &Links, after: Option<&InstanceCursor>) -> String {
        let mut pairs: Vec<(&str, String)> = [
            ("process", &self.process),
            ("status", &self.status),
            ("due", &self.due),
            ("correlation", &self.correlation),
            ("id", &self.id),
            ("order", &self.order),
        ]
        .into_iter()
        .filter_map(|(name, value)| given(value).map(|value| (name, value)))
        .collect();
        if let Some(limit) = self.limit {
            pairs.push(("limit", limit.to_string()));
        }
        if let Some(after) = after {
            pairs.push(("after", after.to_string()));
        }
        let query: Vec<String> = pairs
            .into_iter()
            .map(|(name, value)| format!("{name}={}", encode(&value)))
            .collect();
        format!("{}?{}", links.instances(), query.join("&"))
    }
}

/// One instance, as the list shows it.
struct Line {
    process: String,
    id: String,
    href: String,
    status: InstanceStatus,
    started: String,
    started_ago: String,
    updated_ago: String,
    due: Option<(String, String, bool)>,
    correlation: String,
}

#[derive(Template)]
#[template(path = "page/instances.html")]
struct ListPage {
    links: Links,
    processes: Vec<String>,
    process: String,
    status: String,
    statuses: Vec<&'static str>,
    due: String,
    dues: Vec<(&'static str, &'static str)>,
    correlation: String,
    id: String,
    soonest: bool,
    matching: u64,
    lines: Vec<Line>,
    /// The next page's address, when there are more.
    next: Option<String>,
    /// Whether this page goes on from another.
    paged: bool,
    /// The first page's address.
    first: String,
    now: Instant,
}

/// The list: the filter, how many it matches, and a page of them.
pub(super) async fn page(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Query(list): Query<ListQuery>,
) -> Response {
    let app = &shared.app;
    let links = shared.links(&headers);
    let now = app.clock().now();
    let query = match list.query(now) {
        Ok(query) => query,
        Err(problem) => {
            return message(
                &links,
                StatusCode::BAD_REQUEST,
                "That filter does not read",
                problem,
            );
        }
    };
    let (page, matching, counts) = match tokio::try_join!(
        app.instances(&query),
        app.count_instances(&query),
        app.instance_counts()
    ) {
        Ok(read) => read,
        Err(error) => return failed(&links, &error),
    };
    // The app's processes, and those only the store still has instances of.
    let mut processes: Vec<String> = app
        .processes()
        .map(|p| p.name().to_owned())
        .chain(counts.into_iter().map(|counts| counts.process))
        .collect();
    processes.sort();
    processes.dedup();
    let lines = page
        .rows
        .into_iter()
        .map(|row| Line {
            href: links.instance(&row.process, &row.instance_id),
            status: row.status,
            started: row.started_at.to_string(),
            started_ago: ago(row.started_at, now),
            updated_ago: ago(row.updated_at, now),
            due: row
                .next_due
                .map(|at| (at.to_string(), relative(at, now), at <= now)),
            correlation: row.correlation_id,
            process: row.process,
            id: row.instance_id,
        })
        .collect();
    html(
        &links,
        ListPage {
            processes,
            process: query.process.clone().unwrap_or_default(),
            status: query.status.map(|s| s.as_str()).unwrap_or("").to_owned(),
            statuses: InstanceStatus::ALL.iter().map(|s| s.as_str()).collect(),
            due: given(&list.due).unwrap_or_default(),
            dues: DUE.iter().map(|(name, label, _)| (*name, *label)).collect(),
            correlation: query.correlation_id.clone().unwrap_or_default(),
            id: query.id_prefix.clone().unwrap_or_default(),
            soonest: query.order == InstanceOrder::Soonest,
            matching,
            lines,
            next: page.next.map(|next| list.href(&links, Some(&next))),
            paged: query.after.is_some(),
            first: list.href(&links, None),
            now,
            links: links.clone(),
        },
    )
}

/// A process on the overview: its instances counted by status and what is overdue, each count
/// a link to the list of those instances.
pub(super) struct ProcessLine {
    pub(super) name: String,
    /// Whether this app runs it (a deploy may have removed a process whose instances remain).
    pub(super) runs: bool,
    /// Each status's count and the list of those instances.
    pub(super) statuses: Vec<(u64, String)>,
    pub(super) pending: u64,
    pub(super) overdue: u64,
    /// The list of the overdue instances, the most overdue first.
    pub(super) overdue_href: String,
    /// How long ago the oldest overdue deadline came due.
    pub(super) oldest_overdue: Option<String>,
    /// Who paused it, and when, while it is paused.
    pub(super) paused: Option<String>,
}

/// The overview's processes: the app's, and those only the store still has instances of.
pub(super) async fn process_lines(
    links: &Links,
    app: &crate::App,
    pauses: &crate::store::Paused,
) -> Result<Vec<ProcessLine>, crate::Error> {
    let now = app.clock().now();
    let mut counts: std::collections::BTreeMap<String, crate::store::InstanceCounts> = app
        .instance_counts()
        .await?
        .into_iter()
        .map(|counts| (counts.process.clone(), counts))
        .collect();
    for process in app.processes() {
        counts.entry(process.name().to_owned()).or_default();
    }
    Ok(counts
        .into_iter()
        .map(|(name, counts)| {
            let list = |status: Option<&str>, due: Option<&str>, order: Option<&str>| {
                let query = ListQuery {
                    process: Some(name.clone()),
                    status: status.map(str::to_owned),
                    due: due.map(str::to_owned),
                    order: order.map(str::to_owned),
                    ..ListQuery::default()
                };
                query.href(links, None)
            };
            let statuses = InstanceStatus::ALL
                .iter()
                .map(|status| {
                    let count = match status {
                        InstanceStatus::Running => counts.running,
                        InstanceStatus::Failed => counts.failed,
                        InstanceStatus::TimedOut => counts.timed_out,
                        InstanceStatus::Completed => counts.completed,
                    };
                    (count, list(Some(status.as_str()), None, None))
                })
                .collect();
            ProcessLine {
                runs: app.processes().any(|p| p.name() == name),
                statuses,
                pending: counts.pending,
                overdue: counts.overdue,
                overdue_href: list(None, Some("overdue"), Some("soonest")),
                oldest_overdue: counts.oldest_overdue.map(|at| ago(at, now)),
                paused: pauses
                    .handler(&name)
                    .map(|pause| format!("paused by {} {}", pause.by, ago(pause.since, now))),
                name,
            }
        })
        .collect())
}
