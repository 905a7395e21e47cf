//! A wave's writes in one statement per kind (`bounda::store::protocol::wave`): multi-row
//! `INSERT`s, and `UPDATE … FROM (VALUES …)` for rows settled in place.
//!
//! A statement's text depends on its row count, and each text is prepared once and kept
//! ([`connection`](crate::connection) keeps every statement prepared): so rows go in chunks of
//! a power of two, at most [`CHUNK`], and a kind of write takes a few statements a wave
//! whatever its size (100 rows: 64, 32 and 4), from a few texts prepared once.

use bounda::store::instances::ChangeShape;
use bounda::store::protocol::InboxSettle;
use bounda::store::protocol::wave::{self, PlacedAppend, WaveStatements};
use bounda::store::{
    ClaimDue, Committed, InboxMark, InstanceChange, NextDue, ScheduledEntry, ScheduledRelease,
    Snapshot, StoreError, WriteSet,
};
use rusqlite::types::Value;
use rusqlite::{Connection, params, params_from_iter};

use crate::statements::{SCHEDULE_CONFLICT, SNAPSHOT_CONFLICT};
use crate::{claims, sql};

/// The most rows one statement writes.
const CHUNK: usize = 64;

/// Writes `writes` as one wave on `conn`, inside a savepoint of the transaction it is in:
/// `Some` answers, to be committed; `None` when the wave is written the exact way (the
/// savepoint rolled back). The caller holds the only writer: the positions given follow the
/// last one given.
pub(crate) fn write(
    tx: &mut rusqlite::Transaction<'_>,
    writes: &[WriteSet],
) -> Result<Option<Vec<Committed>>, StoreError> {
    let savepoint = tx
        .savepoint()
        .map_err(sql("cannot open the wave's savepoint"))?;
    // Only a wave that appends gives positions.
    let head = match writes.iter().any(|writes| !writes.appends.is_empty()) {
        true => given(&savepoint)?,
        false => 0,
    };
    let written =
        bounda::store::protocol::at_once(wave::apply_wave(&mut On(&savepoint), writes, Some(head)))
            .flatten();
    match written {
        Some(committed) => {
            savepoint
                .commit()
                .map_err(sql("cannot release the wave's savepoint"))?;
            Ok(Some(committed))
        }
        // Dropped, the savepoint rolls back.
        None => Ok(None),
    }
}

/// The last position given: the greatest of the log's, or of one given and rolled back or
/// removed since (`AUTOINCREMENT` never gives one twice, and neither does a wave).
fn given(conn: &Connection) -> Result<u64, StoreError> {
    conn.prepare_cached(
        "SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'bounda_events'), 0),
                    COALESCE((SELECT MAX(position) FROM bounda_events), 0))",
    )
    .and_then(|mut s| s.query_row([], |row| row.get(0)))
    .map_err(sql("cannot read the last position given"))
}

/// `rows` tuples of `columns` anonymous parameters: `(?, ?), (?, ?)`.
fn tuples(rows: usize, columns: usize) -> String {
    let tuple = format!("({})", vec!["?"; columns].join(", "));
    vec![tuple; rows].join(", ")
}

/// `items` in chunks of a power of two, largest first, none over [`CHUNK`].
fn chunks<T>(mut items: &[T]) -> impl Iterator<Item = &[T]> {
    std::iter::from_fn(move || {
        if items.is_empty() {
            return None;
        }
        let size = 1usize << items.len().min(CHUNK).ilog2();
        let (chunk, rest) = items.split_at(size);
        items = rest;
        Some(chunk)
    })
}

/// The wave's statements on one connection.
struct On<'a>(&'a Connection);

impl On<'_> {
    /// Runs, for each chunk of `items`, the statement `template` makes for its row count, with
    /// the values `values` gives each row: answers the rows changed in all.
    fn each_chunk<T>(
        &self,
        what: &'static str,
        items: &[T],
        template: impl Fn(usize) -> String,
        values: impl Fn(&T, &mut Vec<Value>) -> Result<(), StoreError>,
    ) -> Result<u64, StoreError> {
        let mut changed = 0;
        for chunk in chunks(items) {
            let mut bound = Vec::new();
            for item in chunk {
                values(item, &mut bound)?;
            }
            changed += self
                .0
                .prepare_cached(&template(chunk.len()))
                .and_then(|mut s| s.execute(params_from_iter(bound)))
                .map_err(sql(what))? as u64;
        }
        Ok(changed)
    }
}

fn text(text: impl Into<String>) -> Value {
    Value::Text(text.into())
}

fn number(n: u64) -> Value {
    Value::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

fn moment(at: Option<bounda::Instant>) -> Value {
    at.map_or(Value::Null, |at| text(at.to_string()))
}

impl WaveStatements for On<'_> {
    /// SQLite has one writer at a time: the versions read first are still the streams' when
    /// the events are inserted.
    async fn insert_events(&mut self, appends: &[PlacedAppend<'_>]) -> Result<u64, StoreError> {
        if self.streams_moved(appends)? {
            return Ok(0);
        }
        let events: Vec<_> = appends
            .iter()
            .flat_map(|placed| {
                let append = placed.append;
                append.events.iter().enumerate().map(move |(n, event)| {
                    (
                        append,
                        event,
                        placed.first_position + n as u64,
                        append.expected_version + 1 + n as u64,
                    )
                })
            })
            .collect();
        self.each_chunk(
            "cannot append the wave's events",
            &events,
            |rows| {
                format!(
                    "INSERT INTO bounda_events (position, id, aggregate_type, aggregate_id,
                         version, type, payload, timestamp, metadata)
                     VALUES {}",
                    tuples(rows, 9)
                )
            },
            |(append, event, position, version), values| {
                let metadata = serde_json::to_string(&event.metadata)
                    .map_err(|e| StoreError::with_source("cannot write metadata", e))?;
                values.extend([
                    number(*position),
                    text(&event.id),
                    text(&append.aggregate_type),
                    text(&append.aggregate_id),
                    number(*version),
                    text(&event.event_type),
                    text(event.payload.to_string()),
                    text(event.timestamp.to_string()),
                    text(metadata),
                ]);
                Ok(())
            },
        )
    }

    async fn skip_checkpoints(&mut self, moves: &[(&str, u64, u64)]) -> Result<(), StoreError> {
        // A subscriber's moves were made one: a statement per subscriber, not per run.
        for (subscriber, from, to) in moves {
            self.0
                .prepare_cached(
                    "UPDATE bounda_checkpoints SET position = ?3
                     WHERE subscriber = ?1 AND position = ?2",
                )
                .and_then(|mut s| s.execute(params![subscriber, from, to]))
                .map_err(sql("cannot move a checkpoint"))?;
        }
        Ok(())
    }

    async fn settle_inbox(
        &mut self,
        settles: &[(&InboxMark, InboxSettle<'_>)],
    ) -> Result<u64, StoreError> {
        self.each_chunk(
            "cannot settle the wave's inbox claims",
            settles,
            |rows| {
                format!(
                    "UPDATE bounda_inbox AS i
                     SET status = v.column4, retry_at = v.column5,
                         last_error = COALESCE(v.column6, i.last_error),
                         first_failed_at = COALESCE(i.first_failed_at, v.column7),
                         claimed_at = NULL, lease_until = NULL,
                         attempts = i.attempts + (v.column4 <> 'succeeded')
                     FROM (VALUES {}) AS v
                     WHERE i.handler = v.column1 AND i.event_id = v.column2
                         AND i.claim_id = v.column3 AND i.status = 'pending'",
                    tuples(rows, 7)
                )
            },
            |(mark, settle), values| {
                values.extend([
                    text(&mark.handler),
                    text(&mark.event_id),
                    text(&mark.claim_id),
                    text(settle.status.as_str()),
                    moment(settle.retry_at),
                    settle.error.map_or(Value::Null, text),
                    moment(settle.failed_at),
                ]);
                Ok(())
            },
        )
    }

    async fn release_inbox(&mut self, marks: &[&InboxMark]) -> Result<u64, StoreError> {
        self.each_chunk(
            "cannot give the wave's inbox claims back",
            marks,
            |rows| {
                format!(
                    "UPDATE bounda_inbox SET claimed_at = NULL, lease_until = NULL, claim_id = NULL
                     WHERE status = 'pending' AND (handler, event_id, claim_id) IN (VALUES {})",
                    tuples(rows, 3)
                )
            },
            |mark, values| {
                values.extend([
                    text(&mark.handler),
                    text(&mark.event_id),
                    text(&mark.claim_id),
                ]);
                Ok(())
            },
        )
    }

    async fn move_entries(
        &mut self,
        moves: &[(&ScheduledRelease, &ScheduledEntry)],
    ) -> Result<u64, StoreError> {
        self.each_chunk(
            "cannot move the wave's scheduler entries",
            moves,
            |rows| {
                format!(
                    "UPDATE bounda_scheduled_commands AS s
                     SET command_type = v.column3, aggregate_id = v.column4,
                         payload = v.column5, execute_at = v.column6, context = v.column7,
                         attempts = 0, last_error = NULL, first_failed_at = NULL,
                         claimed_at = NULL, lease_until = NULL, claim_id = NULL,
                         rescheduled = 0, revision = s.revision + 1
                     FROM (VALUES {}) AS v
                     WHERE s.dedupe_key = v.column1 AND s.claim_id = v.column2",
                    tuples(rows, 7)
                )
            },
            |(release, entry), values| {
                values.extend([
                    text(&release.dedupe_key),
                    text(&release.claim_id),
                    text(&entry.command_type),
                    text(&entry.aggregate_id),
                    text(entry.payload.to_string()),
                    text(entry.execute_at.to_string()),
                    text(entry.context.to_string()),
                ]);
                Ok(())
            },
        )
    }

    async fn complete_scheduled(
        &mut self,
        releases: &[&ScheduledRelease],
    ) -> Result<u64, StoreError> {
        self.each_chunk(
            "cannot release the wave's scheduler claims",
            releases,
            |rows| {
                format!(
                    "DELETE FROM bounda_scheduled_commands
                     WHERE rescheduled = 0 AND (dedupe_key, claim_id) IN (VALUES {})",
                    tuples(rows, 2)
                )
            },
            |release, values| {
                values.extend([text(&release.dedupe_key), text(&release.claim_id)]);
                Ok(())
            },
        )
    }

    async fn give_back_scheduled(
        &mut self,
        releases: &[&ScheduledRelease],
    ) -> Result<u64, StoreError> {
        self.each_chunk(
            "cannot give the wave's scheduler claims back",
            releases,
            |rows| {
                format!(
                    "UPDATE bounda_scheduled_commands
                     SET claimed_at = NULL, lease_until = NULL, claim_id = NULL, rescheduled = 0
                     WHERE (dedupe_key, claim_id) IN (VALUES {})",
                    tuples(rows, 2)
                )
            },
            |release, values| {
                values.extend([text(&release.dedupe_key), text(&release.claim_id)]);
                Ok(())
            },
        )
    }

    async fn unschedule(&mut self, keys: &[&str]) -> Result<(), StoreError> {
        self.each_chunk(
            "cannot unschedule",
            keys,
            |rows| {
                format!(
                    "DELETE FROM bounda_scheduled_commands WHERE dedupe_key IN ({})",
                    vec!["?"; rows].join(", ")
                )
            },
            |key, values| {
                values.push(text(*key));
                Ok(())
            },
        )?;
        Ok(())
    }

    async fn schedule(&mut self, entries: &[&ScheduledEntry]) -> Result<(), StoreError> {
        self.each_chunk(
            "cannot schedule",
            entries,
            |rows| {
                format!(
                    "INSERT INTO bounda_scheduled_commands
                         (dedupe_key, command_type, aggregate_id, payload, execute_at, context,
                          attempts, revision)
                     VALUES {} {SCHEDULE_CONFLICT}",
                    vec!["(?, ?, ?, ?, ?, ?, 0, 0)"; rows].join(", ")
                )
            },
            |entry, values| {
                values.extend([
                    text(&entry.dedupe_key),
                    text(&entry.command_type),
                    text(&entry.aggregate_id),
                    text(entry.payload.to_string()),
                    text(entry.execute_at.to_string()),
                    text(entry.context.to_string()),
                ]);
                Ok(())
            },
        )?;
        Ok(())
    }

    async fn keep_snapshots(&mut self, snapshots: &[&Snapshot]) -> Result<(), StoreError> {
        self.each_chunk(
            "cannot keep a snapshot",
            snapshots,
            |rows| {
                format!(
                    "INSERT INTO bounda_snapshots (aggregate_type, aggregate_id, version, state)
                     VALUES {} {SNAPSHOT_CONFLICT}",
                    tuples(rows, 4)
                )
            },
            |snapshot, values| {
                values.extend([
                    text(&snapshot.aggregate_type),
                    text(&snapshot.aggregate_id),
                    number(snapshot.version),
                    text(snapshot.state.to_string()),
                ]);
                Ok(())
            },
        )?;
        Ok(())
    }

    /// A step of a running instance updates its row in place, one statement per shape of
    /// change (which columns it sets) and chunk; a row that is not kept yet is made as the
    /// exact way makes it, from its stream's first event.
    async fn index_instances(&mut self, changes: &[&InstanceChange]) -> Result<u64, StoreError> {
        let mut changed = 0;
        let (started, steps): (Vec<&InstanceChange>, Vec<&InstanceChange>) =
            changes.iter().partition(|change| change.started.is_some());
        for change in started {
            changed += crate::instances::index(self.0, change)?;
        }
        for (shape, changes) in ChangeShape::group(steps) {
            changed += self.each_chunk(
                "cannot write the instances index",
                &changes,
                |rows| {
                    format!(
                        "UPDATE bounda_instances AS i SET {} FROM (VALUES {}) AS v
                         WHERE i.process = v.column1 AND i.instance_id = v.column2",
                        shape.assignments(|column| {
                            // The values' columns 3 to 5, as pushed below.
                            match column {
                                "updated_at" => "v.column3",
                                "status" => "v.column4",
                                _ => "v.column5",
                            }
                            .to_owned()
                        }),
                        tuples(rows, 5)
                    )
                },
                |change, values| {
                    values.extend([
                        text(&change.process),
                        text(&change.instance_id),
                        moment(change.at),
                        change
                            .status
                            .map_or(Value::Null, |status| text(status.as_str())),
                        match change.next_due {
                            NextDue::At(at) => text(at.to_string()),
                            NextDue::Keep | NextDue::Clear => Value::Null,
                        },
                    ]);
                    Ok(())
                },
            )?;
        }
        Ok(changed)
    }

    async fn claim_due(&mut self, claim: &ClaimDue) -> Result<Vec<ScheduledEntry>, StoreError> {
        claims::claim(self.0, &claim.claim_id, claim.now, claim.lease, claim.limit)
    }

    async fn drain(&mut self) -> Result<(), StoreError> {
        Ok(())
    }
}

impl On<'_> {
    /// Whether a stream of `appends` no longer stands at the version its decision saw.
    fn streams_moved(&self, appends: &[PlacedAppend<'_>]) -> Result<bool, StoreError> {
        for chunk in chunks(appends) {
            let mut values = Vec::with_capacity(chunk.len() * 3);
            for placed in chunk {
                values.push(text(&placed.append.aggregate_type));
                values.push(text(&placed.append.aggregate_id));
                values.push(number(placed.append.expected_version));
            }
            let moved: u64 = self
                .0
                .prepare_cached(&format!(
                    "SELECT COUNT(*) FROM (VALUES {}) AS v
                     WHERE (SELECT COALESCE(MAX(version), 0) FROM bounda_events
                            WHERE aggregate_type = v.column1 AND aggregate_id = v.column2)
                           <> v.column3",
                    tuples(chunk.len(), 3)
                ))
                .and_then(|mut s| s.query_row(params_from_iter(values), |row| row.get(0)))
                .map_err(sql("cannot read the streams' versions"))?;
            if moved > 0 {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::{chunks, tuples};

    #[test]
    fn rows_go_in_chunks_of_a_power_of_two() {
        let items: Vec<u32> = (0..100).collect();
        let sizes: Vec<usize> = chunks(&items).map(<[u32]>::len).collect();
        assert_eq!(sizes, [64, 32, 4]);
        let sizes: Vec<usize> = chunks(&items[..7]).map(<[u32]>::len).collect();
        assert_eq!(sizes, [4, 2, 1]);
        assert_eq!(chunks::<u32>(&[]).count(), 0);
        assert_eq!(tuples(2, 3), "(?, ?, ?), (?, ?, ?)");
    }
}
