//! A wave's writes in one statement per kind (`bounda::store::protocol::wave`): each kind's rows
//! sent as arrays, unnested by the server, and every statement of the wave sent without
//! waiting for the one before ([`Pipeline`]): a wave is one round trip, and a handful of
//! statements whatever its size.

use bounda::store::protocol::InboxSettle;
use bounda::store::protocol::wave::{self, PlacedAppend, WaveStatements};
use bounda::store::{
    ClaimDue, Committed, InboxMark, InstanceChange, ScheduledEntry, ScheduledRelease, Snapshot,
    StoreError, WriteSet,
};
use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;

use crate::claims;
use crate::names::Names;
use crate::pipeline::{Expect, Owned, Pipeline, owned};
use crate::place::HeadTurns;
use crate::rows::bigint;
use crate::sql::Session;
use crate::statements::{SCHEDULE_CONFLICT, SNAPSHOT_CONFLICT};

/// How a wave's statements are planned, set first in its transaction: each of them joins a
/// page of keys to a table, which is right only as a loop of lookups in the table's index. A
/// statement's plan is kept once made, so one made while a table was small (a schema just
/// created) would otherwise hash or scan the table, and go on reading all of it once it is
/// large.
pub(crate) const PLANNING: &str = "SET LOCAL enable_hashjoin = off; \
     SET LOCAL enable_mergejoin = off; SET LOCAL enable_seqscan = off";

/// Writes `writes` as one wave on `client`, a transaction: `Some` answers, to be committed;
/// `None` when the wave is to be written another way, the transaction rolled back first.
///
/// A wave that appends while the head is free and no committed event waits to be placed (and
/// no other writer was seen lately: [`HeadTurns`]) takes the head row's lock for its
/// transaction and inserts its events at their final positions, moving the head in the same
/// statement: no placing follows its commit, and each event is written once. Otherwise its
/// events go in at placeholders and are placed once it has committed (`place.rs`).
// Boxed, as `statements::apply` is, so its future is proven `Send` where it is made.
pub(crate) fn write<'a, S: Session>(
    client: &'a S,
    names: &'a Names,
    writes: &'a [WriteSet],
    turns: &'a HeadTurns,
) -> BoxFuture<'a, Option<Vec<Committed>>> {
    Box::pin(async move {
        let appends = writes.iter().any(|writes| !writes.appends.is_empty());
        let head = match appends && turns.may_hold() {
            true => match free_head(client, names).await {
                Ok(Some(head)) => Some(head),
                Ok(None) => {
                    turns.others_seen();
                    None
                }
                Err(error) => {
                    tracing::debug!(error = %error.flattened(), "a wave cannot look at the head");
                    return None;
                }
            },
            false => None,
        };
        let mut on = On {
            client,
            names,
            pipeline: Pipeline::default(),
        };
        wave::apply_wave(&mut on, writes, head).await
    })
}

/// The head's position, its row locked until the transaction ends, when no one else holds it
/// and every committed event has its position; `None` when not, and nothing is locked.
///
/// Holding the head, the wave's positions follow every event placed; no one places until it
/// commits, so its positions become visible together, after every smaller one, as a placing's
/// do. Events committed and still waiting would be placed after the wave's: an event read by
/// a writer is placed before it is read, so this is only a guard, but it keeps the order of
/// commits wherever it is seen.
async fn free_head(client: &impl Session, names: &Names) -> Result<Option<u64>, StoreError> {
    let row = crate::sql::query_opt(
        client,
        &names.sql(
            "SELECT h.position FROM {t}head h
             WHERE h.id = 1 AND NOT EXISTS (SELECT 1 FROM {t}events e WHERE e.position < 0)
             FOR UPDATE SKIP LOCKED",
        ),
        &[],
    )
    .await
    .map_err(crate::sql::failed("cannot look at the head"))?;
    row.map(|row| crate::rows::unsigned(&row, 0)).transpose()
}

/// The wave's statements on one transaction, sent at once.
struct On<'a, C> {
    client: &'a C,
    names: &'a Names,
    pipeline: Pipeline<'a>,
}

impl<'a, C: Session> On<'a, C> {
    /// Sends `template` (`{t}` naming the tables) with `params`, foreseen to change `expect`.
    async fn send(
        &mut self,
        what: &'static str,
        expect: Expect,
        template: &str,
        params: Owned,
    ) -> Result<u64, StoreError> {
        let sql = self.names.sql(template);
        self.pipeline
            .send(self.client, what, expect, &sql, params)
            .await
    }
}

/// Each of `items`' `value`, as one array parameter.
fn column<T, V>(items: &[T], value: impl Fn(&T) -> V) -> Vec<V> {
    items.iter().map(value).collect()
}

fn moment(at: bounda::Instant) -> DateTime<Utc> {
    at.to_chrono()
}

impl<C: Session> WaveStatements for On<'_, C> {
    /// Each checking its stream's version as it inserts (see `Statements::insert_events`): a
    /// stream that moved leaves its events out, and the count is not as foreseen. At the
    /// positions given with them when the wave holds the head (which the same statement moves
    /// to the last of them), at placeholders when not.
    async fn insert_events(&mut self, appends: &[PlacedAppend<'_>]) -> Result<u64, StoreError> {
        let events: Vec<_> = appends
            .iter()
            .flat_map(|placed| {
                let append = placed.append;
                (append.expected_version + 1..)
                    .zip(placed.first_position..)
                    .zip(&append.events)
                    .map(move |((version, position), event)| (append, version, position, event))
            })
            .collect();
        let mut versions = Vec::with_capacity(events.len());
        let mut expected = Vec::with_capacity(events.len());
        let mut positions = Vec::with_capacity(events.len());
        let mut metadata = Vec::with_capacity(events.len());
        for (append, version, position, event) in &events {
            versions.push(bigint("a version", *version)?);
            expected.push(bigint("a version", append.expected_version)?);
            positions.push(bigint("a position", *position)?);
            metadata.push(
                serde_json::to_value(&event.metadata)
                    .map_err(|e| StoreError::with_source("cannot write metadata", e))?,
            );
        }
        // Positions are given to all of a wave's appends, or to none.
        let placed = appends.iter().all(|placed| placed.first_position > 0);
        // With positions: the head moved to the last, and the positions a tenth column.
        let (head, position, placed_at, position_param, position_column) = match placed {
            true => (
                "WITH head AS (
                     UPDATE {t}head SET position = (SELECT max(p) FROM unnest($10::bigint[]) AS p)
                     WHERE id = 1)",
                "position, ",
                "e.position, ",
                ", $10::bigint[]",
                ", position",
            ),
            false => ("", "", "", "", ""),
        };
        let count = events.len() as u64;
        let mut params = owned![
            column(&events, |(_, _, _, event)| event.id.clone()),
            column(&events, |(append, _, _, _)| append.aggregate_type.clone()),
            column(&events, |(append, _, _, _)| append.aggregate_id.clone()),
            versions,
            column(&events, |(_, _, _, event)| event.event_type.clone()),
            column(&events, |(_, _, _, event)| event.payload.clone()),
            column(&events, |(_, _, _, event)| moment(event.timestamp)),
            metadata,
            expected,
        ];
        if placed {
            params.extend(owned![positions]);
        }
        self.send(
            "cannot append the wave's events",
            Expect::Rows(count),
            &format!(
                "{head}
                 INSERT INTO {{t}}events ({position}id, aggregate_type, aggregate_id, version,
                     type, payload, timestamp, metadata)
                 SELECT {placed_at}e.id, e.aggregate_type, e.aggregate_id, e.version, e.type,
                     e.payload, e.timestamp, e.metadata
                 FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[],
                          $6::json[], $7::timestamptz[], $8::json[], $9::bigint[]{position_param})
                     AS e (id, aggregate_type, aggregate_id, version, type, payload, timestamp,
                           metadata, expected{position_column})
                 WHERE (SELECT coalesce(max(s.version), 0) FROM {{t}}events s
                        WHERE s.aggregate_type = e.aggregate_type
                            AND s.aggregate_id = e.aggregate_id) = e.expected
                 ON CONFLICT (aggregate_type, aggregate_id, version) DO NOTHING"
            ),
            params,
        )
        .await
    }

    async fn skip_checkpoints(&mut self, moves: &[(&str, u64, u64)]) -> Result<(), StoreError> {
        for (subscriber, from, to) in moves {
            self.send(
                "cannot move a checkpoint",
                Expect::Any,
                "UPDATE {t}checkpoints SET position = $3 WHERE subscriber = $1 AND position = $2",
                owned![
                    (*subscriber).to_owned(),
                    bigint("a position", *from)?,
                    bigint("a position", *to)?,
                ],
            )
            .await?;
        }
        Ok(())
    }

    async fn settle_inbox(
        &mut self,
        settles: &[(&InboxMark, InboxSettle<'_>)],
    ) -> Result<u64, StoreError> {
        self.send(
            "cannot settle the wave's inbox claims",
            Expect::Rows(settles.len() as u64),
            "UPDATE {t}inbox AS i
             SET status = v.status, retry_at = v.retry_at,
                 last_error = coalesce(v.error, i.last_error),
                 first_failed_at = coalesce(i.first_failed_at, v.failed_at),
                 claimed_at = NULL, lease_until = NULL,
                 attempts = i.attempts + (CASE WHEN v.status <> 'succeeded' THEN 1 ELSE 0 END)
             FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[],
                      $6::text[], $7::timestamptz[])
                 AS v (handler, event_id, claim_id, status, retry_at, error, failed_at)
             WHERE i.handler = v.handler AND i.event_id = v.event_id
                 AND i.claim_id = v.claim_id AND i.status = 'pending'",
            owned![
                column(settles, |(mark, _)| mark.handler.clone()),
                column(settles, |(mark, _)| mark.event_id.clone()),
                column(settles, |(mark, _)| mark.claim_id.clone()),
                column(settles, |(_, settle)| settle.status.as_str()),
                column(settles, |(_, settle)| settle.retry_at.map(moment)),
                column(settles, |(_, settle)| settle.error.map(str::to_owned)),
                column(settles, |(_, settle)| settle.failed_at.map(moment)),
            ],
        )
        .await
    }

    async fn release_inbox(&mut self, marks: &[&InboxMark]) -> Result<u64, StoreError> {
        self.send(
            "cannot give the wave's inbox claims back",
            Expect::Rows(marks.len() as u64),
            "UPDATE {t}inbox AS i SET claimed_at = NULL, lease_until = NULL, claim_id = NULL
             FROM unnest($1::text[], $2::text[], $3::text[]) AS v (handler, event_id, claim_id)
             WHERE i.handler = v.handler AND i.event_id = v.event_id
                 AND i.claim_id = v.claim_id AND i.status = 'pending'",
            owned![
                column(marks, |mark| mark.handler.clone()),
                column(marks, |mark| mark.event_id.clone()),
                column(marks, |mark| mark.claim_id.clone()),
            ],
        )
        .await
    }

    async fn move_entries(
        &mut self,
        moves: &[(&ScheduledRelease, &ScheduledEntry)],
    ) -> Result<u64, StoreError> {
        self.send(
            "cannot move the wave's scheduler entries",
            Expect::Rows(moves.len() as u64),
            "UPDATE {t}scheduled_commands AS s
             SET command_type = v.command_type, aggregate_id = v.aggregate_id,
                 payload = v.payload, execute_at = v.execute_at, context = v.context,
                 attempts = 0, last_error = NULL, first_failed_at = NULL, claimed_at = NULL,
                 lease_until = NULL, claim_id = NULL, rescheduled = FALSE,
                 revision = s.revision + 1
             FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::json[],
                      $6::timestamptz[], $7::json[])
                 AS v (dedupe_key, claim_id, command_type, aggregate_id, payload, execute_at,
                       context)
             WHERE s.dedupe_key = v.dedupe_key AND s.claim_id = v.claim_id",
            owned![
                column(moves, |(release, _)| release.dedupe_key.clone()),
                column(moves, |(release, _)| release.claim_id.clone()),
                column(moves, |(_, entry)| entry.command_type.clone()),
                column(moves, |(_, entry)| entry.aggregate_id.clone()),
                column(moves, |(_, entry)| entry.payload.clone()),
                column(moves, |(_, entry)| moment(entry.execute_at)),
                column(moves, |(_, entry)| entry.context.clone()),
            ],
        )
        .await
    }

    async fn complete_scheduled(
        &mut self,
        releases: &[&ScheduledRelease],
    ) -> Result<u64, StoreError> {
        self.send(
            "cannot release the wave's scheduler claims",
            Expect::Rows(releases.len() as u64),
            "DELETE FROM {t}scheduled_commands s
             USING unnest($1::text[], $2::text[]) AS v (dedupe_key, claim_id)
             WHERE s.dedupe_key = v.dedupe_key AND s.claim_id = v.claim_id
                 AND NOT s.rescheduled",
            owned![
                column(releases, |release| release.dedupe_key.clone()),
                column(releases, |release| release.claim_id.clone()),
            ],
        )
        .await
    }

    async fn give_back_scheduled(
        &mut self,
        releases: &[&ScheduledRelease],
    ) -> Result<u64, StoreError> {
        self.send(
            "cannot give the wave's scheduler claims back",
            Expect::Rows(releases.len() as u64),
            "UPDATE {t}scheduled_commands AS s
             SET claimed_at = NULL, lease_until = NULL, claim_id = NULL, rescheduled = FALSE
             FROM unnest($1::text[], $2::text[]) AS v (dedupe_key, claim_id)
             WHERE s.dedupe_key = v.dedupe_key AND s.claim_id = v.claim_id",
            owned![
                column(releases, |release| release.dedupe_key.clone()),
                column(releases, |release| release.claim_id.clone()),
            ],
        )
        .await
    }

    async fn unschedule(&mut self, keys: &[&str]) -> Result<(), StoreError> {
        self.send(
            "cannot unschedule",
            Expect::Any,
            "DELETE FROM {t}scheduled_commands WHERE dedupe_key = ANY($1::text[])",
            owned![column(keys, |key| (*key).to_owned())],
        )
        .await?;
        Ok(())
    }

    async fn schedule(&mut self, entries: &[&ScheduledEntry]) -> Result<(), StoreError> {
        self.send(
            "cannot schedule",
            Expect::Any,
            &format!(
                "INSERT INTO {{t}}scheduled_commands AS s
                     (dedupe_key, command_type, aggregate_id, payload, execute_at, context)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::json[],
                     $5::timestamptz[], $6::json[])
                 {SCHEDULE_CONFLICT}"
            ),
            owned![
                column(entries, |entry| entry.dedupe_key.clone()),
                column(entries, |entry| entry.command_type.clone()),
                column(entries, |entry| entry.aggregate_id.clone()),
                column(entries, |entry| entry.payload.clone()),
                column(entries, |entry| moment(entry.execute_at)),
                column(entries, |entry| entry.context.clone()),
            ],
        )
        .await?;
        Ok(())
    }

    async fn keep_snapshots(&mut self, snapshots: &[&Snapshot]) -> Result<(), StoreError> {
        let mut versions = Vec::with_capacity(snapshots.len());
        for snapshot in snapshots {
            versions.push(bigint("a snapshot version", snapshot.version)?);
        }
        self.send(
            "cannot keep a snapshot",
            Expect::Any,
            &format!(
                "INSERT INTO {{t}}snapshots AS s (aggregate_type, aggregate_id, version, state)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::json[])
                 {SNAPSHOT_CONFLICT}"
            ),
            owned![
                column(snapshots, |snapshot| snapshot.aggregate_type.clone()),
                column(snapshots, |snapshot| snapshot.aggregate_id.clone()),
                versions,
                column(snapshots, |snapshot| snapshot.state.clone()),
            ],
        )
        .await?;
        Ok(())
    }

    async fn index_instances(&mut self, changes: &[&InstanceChange]) -> Result<u64, StoreError> {
        let mut foreseen = 0;
        for (statement, params, rows) in crate::instances::index(changes) {
            foreseen += self
                .send(
                    "cannot write the instances index",
                    Expect::Rows(rows),
                    &statement,
                    params,
                )
                .await?;
        }
        Ok(foreseen)
    }

    async fn claim_due(&mut self, claim: &ClaimDue) -> Result<Vec<ScheduledEntry>, StoreError> {
        self.pipeline.drain().await?;
        claims::claim(
            self.client,
            self.names,
            &claim.claim_id,
            claim.now,
            claim.lease,
            claim.limit,
        )
        .await
    }

    async fn drain(&mut self) -> Result<(), StoreError> {
        self.pipeline.drain().await
    }
}
