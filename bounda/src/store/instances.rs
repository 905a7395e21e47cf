//! The instances index: one row per process instance, saying where it stands, so an operator
//! finds the instances of a process by status, by what is due, by correlation or by id among
//! millions without reading their streams.
//!
//! A row is written in the transaction of every write that appends to the instance's stream,
//! as an [`InstanceChange`] the runtime derives from the write set: the status its lifecycle
//! events leave, the moment of the deadline its scheduler entry is armed at, when it started and
//! last stepped. The stream's version fences the write, so a step's row is written with the
//! step or not at all. A store that was written before the index fills it from the log when it
//! migrates ([`InstanceRow::of_stream`]). Two writes reach a deadline entry without a step, and
//! leave the row's next deadline as it was: a deadline given up on because its instance could not
//! be read, and the deadline of a process the app no longer has.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::Instant;
use crate::store::{ScheduledEntry, StoreError};

/// The index of process instances: each instance's process, status, next deadline and times, kept as its write sets commit, so an operator finds one among millions without reading streams.
/// A capability: a store that keeps it says so in
/// [`Store::capabilities`](crate::store::Store::capabilities).
#[async_trait::async_trait]
pub trait InstanceIndex: Send + Sync {
    /// Up to `query.limit` instances matching `query`, in its order, after its cursor. A store
    /// should answer through indexes, so a page costs the same beside a million instances as
    /// beside fifty.
    async fn instances(&self, query: &InstanceQuery) -> Result<Vec<InstanceRow>, StoreError>;

    /// How many instances match `query` (its order, cursor and limit ignored).
    async fn count_instances(&self, query: &InstanceQuery) -> Result<u64, StoreError>;

    /// For each process with instances, by name: its instances counted by status, and its
    /// running ones with a deadline pending and overdue at `now`, with the oldest overdue
    /// moment. The operator page's overview and the metrics' deadline gauges read it.
    async fn instance_counts(&self, now: Instant) -> Result<Vec<InstanceCounts>, StoreError>;
}

/// A deadline a process instance's step ran, as its lifecycle event records it.
pub(crate) struct DeadlineRan<'a> {
    /// The process.
    pub(crate) process: &'a str,
    /// The deadline's field (`timeout` for the lifetime's end).
    pub(crate) field: &'a str,
    /// How late it ran: from the moment it was due to the event's.
    pub(crate) late: crate::Duration,
}

/// The deadline an event of stream type `aggregate_type` says ran, if it is a deadline's step:
/// `ProcessDeadlineReached` or `ProcessTimedOut`, each with the moment it was due (`at`).
pub(crate) fn deadline_ran<'a>(
    aggregate_type: &'a str,
    event_type: &str,
    payload: &'a serde_json::Value,
    timestamp: Instant,
) -> Option<DeadlineRan<'a>> {
    let process = aggregate_type.strip_prefix(STREAM_PREFIX)?;
    let field = match event_type {
        "ProcessDeadlineReached" => payload["field"].as_str().unwrap_or("unknown"),
        "ProcessTimedOut" => "timeout",
        _ => return None,
    };
    let due = payload["at"]
        .as_str()
        .and_then(|at| Instant::parse(at).ok())?;
    Some(DeadlineRan {
        process,
        field,
        late: timestamp.saturating_since(due),
    })
}

/// What runs a process instance's deadline: the type of its one scheduler entry.
pub(crate) const PROCESS_DEADLINE: &str = "bounda.ProcessDeadline";

/// The prefix of a process instance's stream type: `process:<name>`.
pub(crate) const STREAM_PREFIX: &str = "process:";

/// Where an instance stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstanceStatus {
    /// Running: it reacts to events, and its deadlines run when they come due.
    Running,
    /// A step failed for good: it waits for its letter's retry, events parked behind it.
    Failed,
    /// Its lifetime ran out.
    TimedOut,
    /// A completing event was handled.
    Completed,
}

impl InstanceStatus {
    /// Every status, running first.
    pub const ALL: [InstanceStatus; 4] = [
        InstanceStatus::Running,
        InstanceStatus::Failed,
        InstanceStatus::TimedOut,
        InstanceStatus::Completed,
    ];

    /// The status as stored and shown: `running`, `failed`, `timed_out` or `completed`.
    pub fn as_str(self) -> &'static str {
        match self {
            InstanceStatus::Running => "running",
            InstanceStatus::Failed => "failed",
            InstanceStatus::TimedOut => "timed_out",
            InstanceStatus::Completed => "completed",
        }
    }

    /// The status `text` names (as [`as_str`](InstanceStatus::as_str) writes it; `timed-out`
    /// too), if it names one.
    pub fn parse(text: &str) -> Option<InstanceStatus> {
        let text = text.replace('-', "_");
        InstanceStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == text)
    }

    /// The status an instance's lifecycle event of type `event_type` leaves it in, when it
    /// changes it. A start changes nothing: a start that failed and is retried stays failed
    /// until the instance resumes.
    pub(crate) fn after(event_type: &str) -> Option<InstanceStatus> {
        match event_type {
            "ProcessCompleted" => Some(InstanceStatus::Completed),
            "ProcessTimedOut" => Some(InstanceStatus::TimedOut),
            "ProcessFailed" => Some(InstanceStatus::Failed),
            "ProcessResumed" => Some(InstanceStatus::Running),
            _ => None,
        }
    }
}

impl InstanceStatus {
    /// The status lifecycle events of types `types`, in order, leave an instance in, when they
    /// change it.
    pub(crate) fn after_all<'a>(
        types: impl DoubleEndedIterator<Item = &'a str>,
    ) -> Option<InstanceStatus> {
        types.rev().find_map(InstanceStatus::after)
    }
}

impl fmt::Display for InstanceStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// What a write does to an instance's next deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextDue {
    /// Leaves it as it stands.
    Keep,
    /// Its deadline entry is armed at this moment.
    At(Instant),
    /// It has no deadline pending (none set, or it ended or failed).
    Clear,
}

/// What one write set changes in an instance's row; written in the write set's transaction,
/// after its appends.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceChange {
    /// The process.
    pub process: String,
    /// The instance.
    pub instance_id: String,
    /// When its events were written; `None` for a write that appends none (a deadline entry
    /// armed again from the state).
    pub at: Option<Instant>,
    /// The correlation of its first event, when this write starts the stream: the row is then
    /// new, started at `at`.
    pub started: Option<String>,
    /// The status its events leave, when they change it.
    pub status: Option<InstanceStatus>,
    /// Its next deadline.
    pub next_due: NextDue,
}

impl InstanceChange {
    /// Whether it leaves the row as it is: no step written, no status, the deadline kept.
    pub fn changes_nothing(&self) -> bool {
        self.at.is_none() && self.status.is_none() && self.next_due == NextDue::Keep
    }
}

/// Which columns of an instance's row a change sets, and whether it starts the instance: a
/// store writes a wave's changes of one shape in one statement, so an index on a column a
/// change leaves is not rewritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangeShape {
    /// It starts the instance: the row is new.
    pub starts: bool,
    /// It sets `updated_at`.
    pub at: bool,
    /// It sets `status`.
    pub status: bool,
    /// It sets `next_due` (to a moment, or to none).
    pub next_due: bool,
}

impl ChangeShape {
    /// The shape of `change`.
    pub fn of(change: &InstanceChange) -> ChangeShape {
        ChangeShape {
            starts: change.started.is_some(),
            at: change.at.is_some(),
            status: change.status.is_some(),
            next_due: change.next_due != NextDue::Keep,
        }
    }

    /// `changes` by shape, in the order each shape first comes, leaving out those that change
    /// nothing (they have no statement).
    pub fn group<'a>(
        changes: impl IntoIterator<Item = &'a InstanceChange>,
    ) -> Vec<(ChangeShape, Vec<&'a InstanceChange>)> {
        let mut shapes: Vec<(ChangeShape, Vec<&InstanceChange>)> = Vec::new();
        for change in changes
            .into_iter()
            .filter(|change| !change.changes_nothing())
        {
            let shape = ChangeShape::of(change);
            match shapes.iter_mut().find(|(other, _)| *other == shape) {
                Some((_, same)) => same.push(change),
                None => shapes.push((shape, vec![change])),
            }
        }
        shapes
    }

    /// Its `SET` list for a kept row named `i`, each new value as `value` names it from the
    /// column it goes to (`updated_at`, `status`, `next_due`). A deadline is kept only while the
    /// instance runs: a change that arms one without changing the status (a failed start
    /// retried) leaves a failed row without it.
    pub fn assignments(self, value: impl Fn(&str) -> String) -> String {
        let mut set = Vec::new();
        if self.at {
            set.push(format!("updated_at = {}", value("updated_at")));
        }
        if self.status {
            set.push(format!("status = {}", value("status")));
        }
        match (self.next_due, self.status) {
            (false, _) => {}
            (true, true) => set.push(format!("next_due = {}", value("next_due"))),
            (true, false) => set.push(format!(
                "next_due = CASE WHEN i.status = 'running' THEN {} END",
                value("next_due")
            )),
        }
        set.join(", ")
    }
}

/// One instance, as the index lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstanceRow {
    /// The process.
    pub process: String,
    /// The instance: the id of the aggregate instance it follows.
    pub instance_id: String,
    /// Where it stands.
    pub status: InstanceStatus,
    /// The correlation of its first step: the request that started it.
    pub correlation_id: String,
    /// When it started.
    pub started_at: Instant,
    /// When it last stepped.
    pub updated_at: Instant,
    /// When its next deadline is due, while it runs and one is pending; before now, it is
    /// overdue.
    pub next_due: Option<Instant>,
}

impl InstanceRow {
    /// The row of instance `instance_id` of `process` as its stream's `events` (oldest first,
    /// every one) and its deadline entry (the entry keyed [`deadline_key`], if any) leave it;
    /// `None` for a stream without events. How a store written before the index fills it.
    pub fn of_stream(
        process: &str,
        instance_id: &str,
        events: &[StoredStep],
        entry: Option<&ScheduledEntry>,
    ) -> Option<InstanceRow> {
        let (first, last) = (events.first()?, events.last()?);
        let status = InstanceStatus::after_all(events.iter().map(|e| e.event_type.as_str()))
            .unwrap_or(InstanceStatus::Running);
        let next_due = entry
            .and_then(DeadlinePayload::moment)
            .filter(|_| status == InstanceStatus::Running);
        Some(InstanceRow {
            process: process.to_owned(),
            instance_id: instance_id.to_owned(),
            status,
            correlation_id: first.correlation_id.clone(),
            started_at: first.timestamp,
            updated_at: last.timestamp,
            next_due,
        })
    }

    /// Where the listing in `order` goes on after this row.
    pub fn cursor(&self, order: InstanceOrder) -> InstanceCursor {
        InstanceCursor {
            at: match order {
                InstanceOrder::Newest => self.started_at,
                InstanceOrder::Soonest => self.next_due.unwrap_or(self.started_at),
            },
            process: self.process.clone(),
            instance_id: self.instance_id.clone(),
        }
    }
}

/// What [`InstanceRow::of_stream`] reads of a lifecycle event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredStep {
    /// The event's type.
    pub event_type: String,
    /// When it was written.
    pub timestamp: Instant,
    /// Its metadata's correlation.
    pub correlation_id: String,
}

/// The order instances are listed in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum InstanceOrder {
    /// The latest started first.
    #[default]
    Newest,
    /// The soonest due first; lists only the instances with a deadline pending.
    Soonest,
}

/// Where a listing goes on: after the row it was taken from, in the listing's order.
/// Written `<moment>/<process>/<instance>` for a command line or a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceCursor {
    /// The row's moment in the order: its start, or its next deadline.
    pub at: Instant,
    /// The row's process.
    pub process: String,
    /// The row's instance.
    pub instance_id: String,
}

impl fmt::Display for InstanceCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.at, self.process, self.instance_id)
    }
}

impl std::str::FromStr for InstanceCursor {
    type Err = String;

    fn from_str(text: &str) -> Result<InstanceCursor, String> {
        let unreadable = || format!("`{text}` is not a listing's cursor (<moment>/<process>/<id>)");
        let mut parts = text.splitn(3, '/');
        let (Some(at), Some(process), Some(instance_id)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(unreadable());
        };
        Ok(InstanceCursor {
            at: Instant::parse(at).map_err(|_| unreadable())?,
            process: process.to_owned(),
            instance_id: instance_id.to_owned(),
        })
    }
}

/// Which instances to list or count, and how. Every filter given must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceQuery {
    /// Only this process's.
    pub process: Option<String>,
    /// Only instances in this status.
    pub status: Option<InstanceStatus>,
    /// Only instances whose next deadline is due at or after this moment.
    pub due_from: Option<Instant>,
    /// Only instances whose next deadline is due at or before this moment: up to now, the
    /// overdue ones.
    pub due_until: Option<Instant>,
    /// Only instances started under this correlation.
    pub correlation_id: Option<String>,
    /// Only instances whose id starts with this text.
    pub id_prefix: Option<String>,
    /// The order; a listing soonest first holds only instances with a deadline pending.
    pub order: InstanceOrder,
    /// Where to go on from: the cursor of the last row of the page before.
    pub after: Option<InstanceCursor>,
    /// At most this many (the listing's page).
    pub limit: usize,
}

impl InstanceQuery {
    /// Whether the query asks about deadlines: only instances with one pending match.
    pub fn asks_due(&self) -> bool {
        self.order == InstanceOrder::Soonest || self.due_from.is_some() || self.due_until.is_some()
    }

    /// Whether `row` matches the filters (not the cursor): what a store's query must answer,
    /// written once for the contract tests and a store without an index.
    pub fn matches(&self, row: &InstanceRow) -> bool {
        let due = |check: fn(Instant, Instant) -> bool, bound: Option<Instant>| {
            bound.is_none_or(|bound| row.next_due.is_some_and(|due| check(due, bound)))
        };
        self.process.as_ref().is_none_or(|p| *p == row.process)
            && self.status.is_none_or(|status| status == row.status)
            && due(|due, from| due >= from, self.due_from)
            && due(|due, until| due <= until, self.due_until)
            && (!self.asks_due() || row.next_due.is_some())
            && self
                .correlation_id
                .as_ref()
                .is_none_or(|c| *c == row.correlation_id)
            && self
                .id_prefix
                .as_ref()
                .is_none_or(|prefix| row.instance_id.starts_with(prefix.as_str()))
    }
}

/// A value an instances query binds, as a store converts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bound {
    /// Text.
    Text(String),
    /// A moment.
    Moment(Instant),
}

/// What a store runs for an [`InstanceQuery`]: its `WHERE` clause (empty when it filters
/// nothing) and `ORDER BY`, their placeholders numbered from 1 in the values' order. Written once
/// for every store: each gives its placeholders and binds the values its own way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceSql {
    /// `WHERE …`, or nothing.
    pub clause: String,
    /// `ORDER BY …`, the order's tie-breaks included.
    pub order: &'static str,
    /// The values, in the placeholders' order.
    pub values: Vec<Bound>,
}

impl InstanceQuery {
    /// The SQL of this query on a table with the index's columns: its filters, its order, and
    /// with `paged` its cursor. `placeholder(n)` writes the n-th placeholder (`?1`, `$1`).
    /// `steer`: a question about deadlines keeps its process and status filters off their
    /// indexes (`+process`), so that a planner without statistics (SQLite's) reads the due index
    /// in its order rather than all of a process's rows and a sort.
    pub fn sql(
        &self,
        paged: bool,
        placeholder: impl Fn(usize) -> String,
        steer: bool,
    ) -> InstanceSql {
        let mut conditions = Vec::new();
        let mut values = Vec::new();
        // `{}` in `condition` is the value's placeholder.
        let mut add = |condition: &str, value: Bound| {
            values.push(value);
            conditions.push(condition.replace("{}", &placeholder(values.len())));
        };
        let unindexed = if steer && self.asks_due() { "+" } else { "" };
        if let Some(process) = &self.process {
            add(
                &format!("{unindexed}process = {{}}"),
                Bound::Text(process.clone()),
            );
        }
        if let Some(status) = self.status {
            let status = Bound::Text(status.as_str().to_owned());
            add(&format!("{unindexed}status = {{}}"), status);
        }
        if let Some(correlation) = &self.correlation_id {
            add("correlation_id = {}", Bound::Text(correlation.clone()));
        }
        if let Some(prefix) = &self.id_prefix {
            // A range, not LIKE: the prefix is taken literally, and the id index reads it (ids
            // order by code point on every store).
            add("instance_id >= {}", Bound::Text(prefix.clone()));
            add(
                "instance_id < {}",
                Bound::Text(format!("{prefix}\u{10ffff}")),
            );
        }
        if let Some(from) = self.due_from {
            add("next_due >= {}", Bound::Moment(from));
        }
        if let Some(until) = self.due_until {
            add("next_due <= {}", Bound::Moment(until));
        }
        if self.asks_due() {
            conditions.push("next_due IS NOT NULL".to_owned());
        }
        let (key, order) = match self.order {
            InstanceOrder::Newest => (
                "started_at",
                "ORDER BY started_at DESC, process DESC, instance_id DESC",
            ),
            InstanceOrder::Soonest => ("next_due", "ORDER BY next_due, process, instance_id"),
        };
        if let (Some(after), true) = (&self.after, paged) {
            let (bound, beyond) = match self.order {
                InstanceOrder::Newest => ("<=", "<"),
                InstanceOrder::Soonest => (">=", ">"),
            };
            let at = values.len() + 1;
            values.push(Bound::Moment(after.at));
            values.push(Bound::Text(after.process.clone()));
            values.push(Bound::Text(after.instance_id.clone()));
            conditions.push(format!(
                "{key} {bound} {} AND ({key}, process, instance_id) {beyond} ({}, {}, {})",
                placeholder(at),
                placeholder(at),
                placeholder(at + 1),
                placeholder(at + 2)
            ));
        }
        let clause = match conditions.is_empty() {
            true => String::new(),
            false => format!("WHERE {}", conditions.join(" AND ")),
        };
        InstanceSql {
            clause,
            order,
            values,
        }
    }
}

/// How the instances of one process stand: the counts by status, and what is due.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct InstanceCounts {
    /// The process.
    pub process: String,
    /// Running instances.
    pub running: u64,
    /// Failed instances, waiting for their letters' retry.
    pub failed: u64,
    /// Instances whose lifetime ran out.
    pub timed_out: u64,
    /// Completed instances.
    pub completed: u64,
    /// Running instances with a deadline pending.
    pub pending: u64,
    /// Running instances whose next deadline is due at or before the moment asked about.
    pub overdue: u64,
    /// The earliest of those deadlines.
    pub oldest_overdue: Option<Instant>,
}

impl InstanceCounts {
    /// Counts `status` among these.
    pub fn add(&mut self, status: InstanceStatus, count: u64) {
        match status {
            InstanceStatus::Running => self.running += count,
            InstanceStatus::Failed => self.failed += count,
            InstanceStatus::TimedOut => self.timed_out += count,
            InstanceStatus::Completed => self.completed += count,
        }
    }

    /// How many instances there are in all.
    pub fn total(&self) -> u64 {
        self.running + self.failed + self.timed_out + self.completed
    }
}

/// What an instance's deadline entry holds: whose it is, and the moment it is armed at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct DeadlinePayload {
    pub(crate) process: String,
    pub(crate) instance: String,
    /// The moment, in epoch milliseconds.
    pub(crate) at: i64,
}

impl DeadlinePayload {
    /// The payload of a deadline entry, if it reads as one.
    pub(crate) fn of(entry: &ScheduledEntry) -> Option<DeadlinePayload> {
        DeadlinePayload::read(entry).ok()
    }

    /// The payload of a deadline entry, or why it does not read as one.
    pub(crate) fn read(entry: &ScheduledEntry) -> Result<DeadlinePayload, serde_json::Error> {
        serde_json::from_value(entry.payload.clone())
    }

    /// The moment a deadline entry is armed at, if it is one.
    pub(crate) fn moment(entry: &ScheduledEntry) -> Option<Instant> {
        (entry.command_type == PROCESS_DEADLINE)
            .then(|| DeadlinePayload::of(entry))
            .flatten()
            .and_then(|payload| Instant::from_millis(payload.at))
    }

    /// As stored.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        serde_json::json!({ "process": self.process, "instance": self.instance, "at": self.at })
    }
}

/// The key of instance `instance` of `process`'s one scheduler entry.
pub fn deadline_key(process: &str, instance: &str) -> String {
    crate::ids::derived_id(&["process-deadline", process, instance])
}

pub(crate) use deadline_key as entry_key;
