//! What must hold of any app after any schedule: the framework's own invariants, read from the
//! store. A simulation checks them whenever the app is at rest, and again at the end.

use std::collections::{HashMap, HashSet};

use crate::app::App;
use crate::store::instances::{StoredStep, deadline_key};
use crate::store::{InstanceQuery, InstanceRow};
use crate::{Instant, RecordedEvent};

/// Every event in the store, in position order.
pub(crate) async fn every_event(app: &App) -> Result<Vec<RecordedEvent>, String> {
    let mut events: Vec<RecordedEvent> = Vec::new();
    loop {
        let after = events.last().map_or(0, |e| e.position);
        let page = app
            .store()
            .read_all(after, 10_000)
            .await
            .map_err(|e| format!("the log does not read: {e}"))?;
        if page.is_empty() {
            return Ok(events);
        }
        events.extend(page);
    }
}

/// The invariants of the log and of every process instance's lifecycle:
/// - positions run 1, 2, 3… and each stream's versions 1, 2, 3…;
/// - each deadline (field, moment) of an instance is reached at most once, never before its
///   moment;
/// - an instance handles each event once;
/// - with `in_order`, no deadline of an instance runs before an event of it stored at or before
///   the deadline's moment (with commits failing on purpose a deadline held too long behind a
///   stuck event runs first, by design); an event the deadline's own step caused, through its
///   commands and whatever reacted to them, is not one it ran before;
/// - the instances index holds one row per instance, as its stream and deadline entry say;
/// - nothing lags once the app is at rest.
pub(crate) async fn framework(app: &App, in_order: bool) -> Result<(), String> {
    let events = every_event(app).await?;
    let mut versions: HashMap<(&str, &str), u64> = HashMap::new();
    let mut stored: HashMap<&str, &RecordedEvent> = HashMap::new();
    for (index, event) in events.iter().enumerate() {
        if event.position != index as u64 + 1 {
            return Err(format!(
                "positions have a gap: {} where {} belongs",
                event.position,
                index + 1
            ));
        }
        let version = versions
            .entry((&event.aggregate_type, &event.aggregate_id))
            .or_insert(0);
        *version += 1;
        if event.version != *version {
            return Err(format!(
                "{}:{} skips from version {} to {}",
                event.aggregate_type,
                event.aggregate_id,
                *version - 1,
                event.version
            ));
        }
        stored.insert(&event.id, event);
    }
    let mut lifecycles: HashMap<(&str, &str), Vec<&RecordedEvent>> = HashMap::new();
    for event in events
        .iter()
        .filter(|e| e.aggregate_type.starts_with("process:"))
    {
        lifecycles
            .entry((&event.aggregate_type, &event.aggregate_id))
            .or_default()
            .push(event);
    }
    for ((process, id), lifecycle) in &lifecycles {
        lifecycle_holds(process, id, lifecycle, &stored, in_order)?;
    }
    index_holds(app, &lifecycles).await?;
    let lag = app.lag().await.map_err(|e| format!("lag: {e}"))?;
    if lag.max_lag != 0 {
        return Err(format!(
            "lag {} at rest: {:?}",
            lag.max_lag, lag.subscribers
        ));
    }
    if lag.drifted_entries != 0 {
        return Err(format!(
            "{} instances' scheduler entries disagree with their state",
            lag.drifted_entries
        ));
    }
    Ok(())
}

/// The instances index agrees with the streams: a row for each instance, as
/// [`InstanceRow::of_stream`] reads its lifecycle and its deadline entry, and no other.
async fn index_holds(
    app: &App,
    lifecycles: &HashMap<(&str, &str), Vec<&RecordedEvent>>,
) -> Result<(), String> {
    let store = app.store();
    // A store without the index has nothing to agree.
    let Some(index) = store.capabilities().instances else {
        return Ok(());
    };
    let mut expected = Vec::new();
    for ((stream, id), lifecycle) in lifecycles {
        let process = stream.strip_prefix("process:").unwrap_or(stream);
        let entry = store
            .scheduled(&deadline_key(process, id))
            .await
            .map_err(|e| format!("the scheduler does not read: {e}"))?;
        let steps: Vec<StoredStep> = lifecycle
            .iter()
            .map(|event| StoredStep {
                event_type: event.event_type.clone(),
                timestamp: event.timestamp,
                correlation_id: event.metadata.correlation_id.clone(),
            })
            .collect();
        expected.extend(InstanceRow::of_stream(process, id, &steps, entry.as_ref()));
    }
    let mut indexed = Vec::new();
    let mut query = InstanceQuery {
        limit: 1_000,
        ..InstanceQuery::default()
    };
    loop {
        let page = index
            .instances(&query)
            .await
            .map_err(|e| format!("the instances index does not read: {e}"))?;
        let Some(last) = page.last() else { break };
        query.after = Some(last.cursor(query.order));
        indexed.extend(page);
    }
    let key = |row: &InstanceRow| (row.process.clone(), row.instance_id.clone());
    expected.sort_by_key(key);
    indexed.sort_by_key(key);
    if indexed != expected {
        let wrong: Vec<String> = expected
            .iter()
            .filter(|row| !indexed.contains(row))
            .map(|row| {
                let found = indexed.iter().find(|i| key(i) == key(row));
                format!(
                    "{}:{} is indexed as {found:?}, its stream says {row:?}",
                    row.process, row.instance_id
                )
            })
            .chain(
                indexed
                    .iter()
                    .filter(|row| !expected.iter().any(|e| key(e) == key(row)))
                    .map(|row| {
                        format!(
                            "{}:{} is indexed without a stream",
                            row.process, row.instance_id
                        )
                    }),
            )
            .collect();
        return Err(format!(
            "the instances index disagrees with the streams: {}",
            wrong.join("; ")
        ));
    }
    Ok(())
}

/// One instance's lifecycle: each deadline reached once and never early, each event handled
/// once, and (with `in_order`) none handled after a deadline later than the event.
fn lifecycle_holds(
    process: &str,
    id: &str,
    lifecycle: &[&RecordedEvent],
    stored: &HashMap<&str, &RecordedEvent>,
    in_order: bool,
) -> Result<(), String> {
    let name = format!("{process}:{id}");
    let mut reached: HashSet<(String, Instant)> = HashSet::new();
    let mut handled: HashSet<&str> = HashSet::new();
    // The latest deadline reached: its field, its moment, and its lifecycle event.
    let mut latest: Option<(String, Instant, &str)> = None;
    for event in lifecycle {
        match event.event_type.as_str() {
            "ProcessDeadlineReached" | "ProcessTimedOut" => {
                let field = event.payload["field"]
                    .as_str()
                    .unwrap_or("timeout")
                    .to_owned();
                let at: Instant = serde_json::from_value(event.payload["at"].clone())
                    .map_err(|e| format!("{name}: a reached moment does not read: {e}"))?;
                if !reached.insert((field.clone(), at)) {
                    return Err(format!("{name}: {field} at {at} reached twice"));
                }
                if event.timestamp < at {
                    return Err(format!(
                        "{name}: {field} due at {at} ran early, at {}",
                        event.timestamp
                    ));
                }
                if latest.as_ref().is_none_or(|(_, moment, _)| *moment < at) {
                    latest = Some((field, at, &event.id));
                }
            }
            kind @ ("ProcessStarted" | "ProcessHandled" | "ProcessCompleted") => {
                let Some(event_id) = event.payload["eventId"].as_str() else {
                    continue;
                };
                if kind == "ProcessHandled" && !handled.insert(event_id) {
                    return Err(format!("{name}: event {event_id} handled twice"));
                }
                let (Some((field, at, reached_by)), Some(handled_event)) =
                    (&latest, stored.get(event_id))
                else {
                    continue;
                };
                if in_order
                    && handled_event.timestamp <= *at
                    && !caused_by(handled_event, reached_by, stored)
                {
                    return Err(format!(
                        "{name}: {field} at {at} ran before event {} `{}:{}` at position {}, \
                         stored at {}",
                        handled_event.event_type,
                        handled_event.aggregate_type,
                        handled_event.aggregate_id,
                        handled_event.position,
                        handled_event.timestamp
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Whether `event` was caused by event `origin`: it, or what caused it, through each event's
/// causation, back to the start of its chain.
fn caused_by(event: &RecordedEvent, origin: &str, stored: &HashMap<&str, &RecordedEvent>) -> bool {
    let mut cause = event.metadata.causation_id.as_str();
    // A chain is as long as its depth; the bound guards against a cycle no store writes.
    for _ in 0..=stored.len() {
        if cause == origin {
            return true;
        }
        match stored.get(cause) {
            Some(parent) if parent.metadata.causation_id != cause => {
                cause = &parent.metadata.causation_id;
            }
            _ => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Metadata;

    fn event(
        id: &str,
        stream: (&str, &str),
        kind: &str,
        at: Instant,
        caused: &str,
    ) -> RecordedEvent {
        RecordedEvent {
            id: id.to_owned(),
            aggregate_type: stream.0.to_owned(),
            aggregate_id: stream.1.to_owned(),
            event_type: kind.to_owned(),
            version: 1,
            position: 7,
            timestamp: at,
            payload: serde_json::Value::Null,
            metadata: Metadata {
                causation_id: caused.to_owned(),
                ..Metadata::of_command("c-1")
            },
            unreadable: None,
        }
    }

    // Issue 44: an event the deadline's own step caused (its handler's command, stored at the
    // deadline's moment) is not one the deadline ran before; any other event stored by then is,
    // named by type, stream and position.
    #[test]
    fn what_a_deadline_caused_is_not_an_event_it_ran_before() {
        let due = Instant::parse("2026-01-20T00:00:00Z").unwrap();
        let stream = ("process:Loan", "l-1");
        let mut reached = event("r-1", stream, "ProcessDeadlineReached", due, "s-1");
        reached.payload = serde_json::json!({ "field": "next_notice", "at": due });
        let check = |caused: &str| {
            let lost = event("e-1", ("Loan", "l-1"), "LoanLost", due, caused);
            let mut completed = event("p-1", stream, "ProcessCompleted", due, "e-1");
            completed.payload = serde_json::json!({ "eventId": "e-1" });
            let stored: HashMap<&str, &RecordedEvent> =
                [("r-1", &reached), ("e-1", &lost), ("p-1", &completed)]
                    .into_iter()
                    .collect();
            lifecycle_holds("Loan", "l-1", &[&reached, &completed], &stored, true)
        };
        assert_eq!(check("r-1"), Ok(()), "caused by the deadline's own step");
        let error = check("elsewhere").unwrap_err();
        assert!(
            error.contains("ran before event LoanLost `Loan:l-1` at position 7"),
            "{error}"
        );
    }
}
