//! Placing events in the global order once they have committed.
//!
//! An append inserts its events at placeholder positions (negative, in the order of their
//! inserts) and holds no lock that another appender needs, so appending transactions commit in
//! parallel and share the server's flushes. Once an append has committed, its writer calls
//! [`place`]: under the head row's lock, one placer at a time gives every committed event still
//! waiting the next positions after the head, in placeholder order, and commits without waiting
//! for the disk (a placement is durable once anything that read it is). A reader places what is
//! waiting before it reads, so events whose writer died between its commit and its placing are
//! placed by the next reader. Positions therefore appear without holes and only in order: no
//! position is ever filled in later, no event is skipped after a timeout, and a transaction held
//! open delays only its own events.
//!
//! A worker's wave that finds the head free and nothing waiting holds the head for its
//! transaction and inserts its events at their final positions instead (`wave.rs`): it needs
//! no placing, and a placer waits for its commit, as it waits for another placer. It does so
//! only while no other writer is seen at work ([`HeadTurns`]).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use bounda::store::StoreError;

use crate::names::Names;
use crate::rows;
use crate::sql::{Session, failed, query};

/// Places every committed event still waiting and answers the positions of `mine`. Subscribers
/// in `skip` standing just before `mine` move past them, if no one else's events are among them
/// (they take none of them, as a write set's `skip` says).
pub(crate) async fn place(
    client: &impl Session,
    names: &Names,
    mine: &[&str],
    skip: &[&str],
) -> Result<HashMap<String, u64>, StoreError> {
    let rows = query(
        client,
        &names.sql("SELECT event_id, event_position FROM {t}place($1::text[], $2::text[])"),
        &[&mine, &skip],
    )
    .await
    .map_err(failed("cannot place the events committed"))?;
    rows.iter()
        .map(|row| Ok((rows::get(row, 0)?, rows::unsigned(row, 1)?)))
        .collect()
}

/// As [`place`], unless another placer holds the head row now: then nothing is placed and no
/// position answered, rather than wait for it. A group commit's writer does not need its
/// positions, and a placer already at work places every event committed before its next look;
/// what commits just after that look is placed by the next reader (readers place before they
/// read, and the writer wakes them). So writers do not queue behind each other for the head.
pub(crate) async fn place_unless_busy(
    client: &impl Session,
    names: &Names,
    mine: &[&str],
    skip: &[&str],
) -> Result<HashMap<String, u64>, StoreError> {
    // The head row is locked for the statement's transaction, skipped when another holds it;
    // the placing refers to the lock's row, so it runs only when the lock was taken, in the
    // same transaction (where its own lock of the head is already held).
    let rows = query(
        client,
        &names.sql(
            "WITH free AS MATERIALIZED (
                 SELECT h.id FROM {t}head h WHERE h.id = 1 FOR UPDATE SKIP LOCKED)
             SELECT p.event_id, p.event_position
             FROM free, LATERAL {t}place(
                 CASE WHEN free.id = 1 THEN $1::text[] END, $2::text[]) AS p",
        ),
        &[&mine, &skip],
    )
    .await
    .map_err(failed("cannot place the events committed"))?;
    rows.iter()
        .map(|row| Ok((rows::get(row, 0)?, rows::unsigned(row, 1)?)))
        .collect()
}

/// Places what is waiting, then runs `read` (which reads placed events only): one round trip,
/// the two statements sent together.
pub(crate) async fn before<T>(
    client: &impl Session,
    names: &Names,
    read: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let (_, read) = futures_util::future::try_join(place(client, names, &[], &[]), read).await?;
    Ok(read)
}

/// Whether a wave may hold the head for its transaction (`wave.rs`). Holding it, a wave writes
/// its events once and needs no placing; but every placer, and every reader that meets an event
/// waiting, then waits for the wave's commit. Alone, a writer loses nothing by it; beside other
/// writers it makes them wait (4 workers on this machine fired 15% fewer deadlines with every
/// wave trying). So once another writer is seen at work (the head held, or a committed event
/// waiting to be placed), this store's waves go in at placeholders for [`HeadTurns::QUIET`],
/// as any append does, and try again after.
#[derive(Debug, Default)]
pub(crate) struct HeadTurns {
    /// When another writer was last seen at work.
    others_seen: Mutex<Option<Instant>>,
}

impl HeadTurns {
    /// How long after seeing another writer a wave leaves the head alone.
    pub(crate) const QUIET: Duration = Duration::from_secs(1);

    /// Whether no other writer was seen within [`QUIET`](Self::QUIET).
    pub(crate) fn may_hold(&self) -> bool {
        self.others_seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_none_or(|seen| seen.elapsed() >= Self::QUIET)
    }

    /// Another writer was seen at work now.
    pub(crate) fn others_seen(&self) {
        *self
            .others_seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
    }
}
