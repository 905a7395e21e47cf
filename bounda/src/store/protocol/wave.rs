//! A wave's write sets in a handful of statements: one per kind of write, not one per run.
//!
//! The protocol ([`apply`]) decides each write set's steps; here it decides them against a
//! gatherer, which answers each write what it answers when all goes as it usually does (the
//! claim's row settled, every event inserted) and keeps it with the others of its kind. The
//! store then writes each kind for the whole wave in one statement ([`WaveStatements`]), and the
//! rows each changed are checked against what was foreseen. A write set that needs an answer
//! the wave cannot foresee (a letter's status, a first failure, a retry), two write
//! sets touching the same row, or an answer not as foreseen (a stream moved, a claim lost, an
//! error) leaves the wave to the store's exact way: it rolls back what the wave wrote and
//! writes each write set alone, where each statement's answer decides the next step, and each
//! fails alone. So the decisions stay in the protocol, written once; the wave only changes how
//! many statements carry them.

use std::collections::HashMap;

use crate::Instant;
use crate::store::error::StoreError;
use crate::store::ingress::IngressRecord;
use crate::store::instances::InstanceChange;
use crate::store::protocol::{InboxSettle, Inserted, Statements, apply};
use crate::store::records::{Committed, DeadLetter, ScheduledEntry, Snapshot};
use crate::store::retry_requests::RetryRequest;
use crate::store::write_set::{
    Append, ClaimDue, InboxMark, LetterSettle, ScheduledRelease, WriteSet,
};

/// A store's statements that write one kind of row for a whole wave, inside the transaction
/// (or savepoint) the wave is written in. No two of a call's rows share a key. Each answers the
/// rows it changed where [`apply_wave`] checks them; a store that sends statements without
/// waiting for their answers answers what was foreseen and checks it in
/// [`drain`](WaveStatements::drain).
#[allow(async_fn_in_trait)]
pub trait WaveStatements {
    /// Inserts the events of each append, at the positions given with it (`0`: the store
    /// places them itself once they have committed), only where the stream stands at the
    /// append's expected version: answers the events inserted.
    async fn insert_events(&mut self, appends: &[PlacedAppend<'_>]) -> Result<u64, StoreError>;

    /// Moves each subscriber's checkpoint from the first position to the second, only where it
    /// stands at the first.
    async fn skip_checkpoints(&mut self, moves: &[(&str, u64, u64)]) -> Result<(), StoreError>;

    /// Settles inbox claims that ran, as [`Statements::settle_inbox`] settles one: answers the
    /// rows changed.
    async fn settle_inbox(
        &mut self,
        settles: &[(&InboxMark, InboxSettle<'_>)],
    ) -> Result<u64, StoreError>;

    /// Gives inbox claims back unrun, as [`Statements::release_inbox`] gives one: answers the
    /// rows changed.
    async fn release_inbox(&mut self, marks: &[&InboxMark]) -> Result<u64, StoreError>;

    /// Rewrites claimed entries in place, as [`Statements::move_entry`] rewrites one: answers
    /// the rows changed.
    async fn move_entries(
        &mut self,
        moves: &[(&ScheduledRelease, &ScheduledEntry)],
    ) -> Result<u64, StoreError>;

    /// Removes claimed entries, as [`Statements::complete_scheduled`] removes one: answers the
    /// rows changed.
    async fn complete_scheduled(
        &mut self,
        releases: &[&ScheduledRelease],
    ) -> Result<u64, StoreError>;

    /// Gives claimed entries back as they stand, as [`Statements::give_back_scheduled`] gives
    /// one: answers the rows changed.
    async fn give_back_scheduled(
        &mut self,
        releases: &[&ScheduledRelease],
    ) -> Result<u64, StoreError>;

    /// Removes entries, claimed or not.
    async fn unschedule(&mut self, keys: &[&str]) -> Result<(), StoreError>;

    /// Adds or moves entries, as [`Statements::schedule`] does one.
    async fn schedule(&mut self, entries: &[&ScheduledEntry]) -> Result<(), StoreError>;

    /// Keeps snapshots, each unless a newer one is kept already.
    async fn keep_snapshots(&mut self, snapshots: &[&Snapshot]) -> Result<(), StoreError>;

    /// Writes what each change changes in the instances index, as
    /// [`Statements::index_instance`] writes one; none of them is empty
    /// ([`InstanceChange::changes_nothing`]). Answers the rows changed: one per change when
    /// each instance's row is kept, or is made from its stream's first event.
    async fn index_instances(&mut self, changes: &[&InstanceChange]) -> Result<u64, StoreError>;

    /// Claims the next due entries once everything before has been written, as
    /// [`Statements::claim_due`].
    async fn claim_due(&mut self, claim: &ClaimDue) -> Result<Vec<ScheduledEntry>, StoreError>;

    /// Waits for the answers of what was sent without waiting, and checks them: an error, or
    /// an answer not as foreseen, is an error here. A store that waits for each answer has
    /// nothing to do.
    async fn drain(&mut self) -> Result<(), StoreError>;
}

/// An append with the position of its first event: the rest follow it; `0` when the store
/// places them itself.
#[derive(Debug, Clone, Copy)]
pub struct PlacedAppend<'a> {
    /// The stream's events, and the version they follow.
    pub append: &'a Append,
    /// Where the first event goes in the global order, or `0`.
    pub first_position: u64,
}

/// Whether `writes` are worth writing as a wave: more than one of them writes a run's outcome
/// (a claim of the next batch aside). A wave costs a little before its first row (the
/// gathering, and a savepoint or a read of the last position on some stores), which a batch of
/// one would pay for nothing.
pub fn worth_a_wave(writes: &[WriteSet]) -> bool {
    writes
        .iter()
        .filter(|writes| writes.claim_due.is_none())
        .nth(1)
        .is_some()
}

/// Writes `writes` as a wave, inside a transaction or savepoint: `Some` answers when every
/// write set could be gathered and every statement answered as foreseen, for the caller to
/// commit; `None` when not, and the caller rolls back what was written and writes them the
/// exact way. `head` is the last position given, for a store that gives positions as it
/// inserts (the wave's events follow it); `None` for a store that places events once they
/// have committed.
pub async fn apply_wave<S: WaveStatements>(
    statements: &mut S,
    writes: &[WriteSet],
    head: Option<u64>,
) -> Option<Vec<Committed>> {
    let mut gather = Gather::new(writes, head);
    let mut committed = Vec::with_capacity(writes.len());
    for (index, write) in writes.iter().enumerate() {
        gather.current = index;
        match apply(&mut gather, write).await {
            Ok(answer) if gather.refused.is_none() => committed.push(answer),
            Ok(_) | Err(_) => {
                tracing::debug!(
                    reason = gather.refused.unwrap_or("a write set was refused"),
                    "a wave is written the exact way"
                );
                return None;
            }
        }
    }
    match gather.write(statements, &mut committed).await {
        Ok(()) => Some(committed),
        Err(error) => {
            tracing::debug!(error = %error.flattened(), "a wave did not go as foreseen: written the exact way");
            None
        }
    }
}

/// The row a write touches, for finding two write sets of a wave that touch the same one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Row<'w> {
    Stream(&'w str, &'w str),
    Inbox(&'w str, &'w str),
    Scheduled(&'w str),
    Snapshot(&'w str, &'w str),
    Instance(&'w str, &'w str),
}

/// The statements of a wave, gathered by kind as the protocol decides them. Each write it is
/// given is found in the wave's write sets (the protocol hands their own items), so what it
/// keeps borrows from them.
struct Gather<'w> {
    writes: &'w [WriteSet],
    /// The write set being gathered.
    current: usize,
    /// The next position to give, for a store that gives them as it inserts.
    next_position: Option<u64>,
    /// Which write set touched each row first.
    touched: HashMap<Row<'w>, usize>,
    /// Why the wave cannot be gathered, once it cannot.
    refused: Option<&'static str>,
    appends: Vec<PlacedAppend<'w>>,
    events: u64,
    skips: Vec<(&'w str, u64, u64)>,
    settles: Vec<&'w InboxMark>,
    releases: Vec<&'w InboxMark>,
    moves: Vec<(&'w ScheduledRelease, &'w ScheduledEntry)>,
    completes: Vec<&'w ScheduledRelease>,
    give_backs: Vec<&'w ScheduledRelease>,
    unschedules: Vec<&'w str>,
    schedules: Vec<&'w ScheduledEntry>,
    snapshots: Vec<&'w Snapshot>,
    instances: Vec<&'w InstanceChange>,
    claim: Option<(usize, &'w ClaimDue)>,
}

impl<'w> Gather<'w> {
    fn new(writes: &'w [WriteSet], head: Option<u64>) -> Gather<'w> {
        Gather {
            writes,
            current: 0,
            next_position: head.map(|head| head + 1),
            touched: HashMap::new(),
            refused: None,
            appends: Vec::new(),
            events: 0,
            skips: Vec::new(),
            settles: Vec::new(),
            releases: Vec::new(),
            moves: Vec::new(),
            completes: Vec::new(),
            give_backs: Vec::new(),
            unschedules: Vec::new(),
            schedules: Vec::new(),
            snapshots: Vec::new(),
            instances: Vec::new(),
            claim: None,
        }
    }

    fn set(&self) -> &'w WriteSet {
        &self.writes[self.current]
    }

    /// Refuses the wave: it is written the exact way.
    fn refuse(&mut self, why: &'static str) -> StoreError {
        self.refused.get_or_insert(why);
        StoreError::new(why)
    }

    /// Notes that the write set being gathered touches `row`, refusing the wave when another
    /// did, or when it comes after the wave's claim (which reads what was written before it).
    fn touch(&mut self, row: Row<'w>) -> Result<(), StoreError> {
        if self.claim.is_some() {
            return Err(self.refuse("a write after the wave's claim"));
        }
        match self.touched.insert(row, self.current) {
            Some(other) if other != self.current => {
                Err(self.refuse("two write sets of the wave touch the same row"))
            }
            _ => Ok(()),
        }
    }

    /// The item of the write set being gathered that `item` is: the protocol hands their own.
    fn own<T>(&mut self, items: &'w [T], item: &T) -> Result<&'w T, StoreError> {
        match items.iter().find(|own| std::ptr::eq(*own, item)) {
            Some(own) => Ok(own),
            None => Err(self.refuse("a write that is not the write set's own")),
        }
    }

    /// The text of the write set being gathered that `text` is.
    fn own_str(&mut self, items: &'w [String], text: &str) -> Result<&'w str, StoreError> {
        match items.iter().find(|own| std::ptr::eq(own.as_str(), text)) {
            Some(own) => Ok(own),
            None => Err(self.refuse("a write that is not the write set's own")),
        }
    }

    /// Writes what was gathered, a statement per kind, in the protocol's order, and fills in
    /// what the claim claimed.
    async fn write<S: WaveStatements>(
        self,
        s: &mut S,
        committed: &mut [Committed],
    ) -> Result<(), StoreError> {
        let as_foreseen =
            |what: &str, changed: u64, foreseen: usize| match changed == foreseen as u64 {
                true => Ok(()),
                false => Err(StoreError::new(format!(
                    "{what}: {changed} row(s) changed, not {foreseen} as foreseen"
                ))),
            };
        if !self.appends.is_empty() {
            let inserted = s.insert_events(&self.appends).await?;
            as_foreseen("the wave's events", inserted, self.events as usize)?;
        }
        let skips = chained(self.skips);
        if !skips.is_empty() {
            s.skip_checkpoints(&skips).await?;
        }
        if !self.settles.is_empty() {
            let settles: Vec<(&InboxMark, InboxSettle<'_>)> = self
                .settles
                .iter()
                .filter_map(|mark| Some((*mark, InboxSettle::of(&mark.outcome)?)))
                .collect();
            let changed = s.settle_inbox(&settles).await?;
            as_foreseen("the wave's inbox claims", changed, self.settles.len())?;
        }
        if !self.releases.is_empty() {
            let changed = s.release_inbox(&self.releases).await?;
            as_foreseen(
                "the wave's inbox claims given back",
                changed,
                self.releases.len(),
            )?;
        }
        if !self.moves.is_empty() {
            let changed = s.move_entries(&self.moves).await?;
            as_foreseen("the wave's moved entries", changed, self.moves.len())?;
        }
        if !self.completes.is_empty() {
            let changed = s.complete_scheduled(&self.completes).await?;
            as_foreseen(
                "the wave's completed entries",
                changed,
                self.completes.len(),
            )?;
        }
        if !self.give_backs.is_empty() {
            let changed = s.give_back_scheduled(&self.give_backs).await?;
            as_foreseen(
                "the wave's entries given back",
                changed,
                self.give_backs.len(),
            )?;
        }
        if !self.unschedules.is_empty() {
            s.unschedule(&self.unschedules).await?;
        }
        if !self.schedules.is_empty() {
            s.schedule(&self.schedules).await?;
        }
        if !self.snapshots.is_empty() {
            s.keep_snapshots(&self.snapshots).await?;
        }
        if !self.instances.is_empty() {
            let changed = s.index_instances(&self.instances).await?;
            as_foreseen("the wave's instance rows", changed, self.instances.len())?;
        }
        match self.claim {
            Some((index, claim)) => {
                let claimed = s.claim_due(claim).await?;
                s.drain().await?;
                if let Some(committed) = committed.get_mut(index) {
                    committed.claimed = claimed;
                }
            }
            None => s.drain().await?,
        }
        Ok(())
    }
}

/// The checkpoint moves, each chain of one subscriber's moves (one from where the last left
/// it) made one move: the wave's events follow each other, and a statement moves a row once.
fn chained<'w>(moves: Vec<(&'w str, u64, u64)>) -> Vec<(&'w str, u64, u64)> {
    let mut chained: Vec<(&'w str, u64, u64)> = Vec::new();
    for (subscriber, from, to) in moves {
        match chained
            .iter_mut()
            .find(|(other, _, last)| *other == subscriber && *last == from)
        {
            Some(chain) => chain.2 = to,
            None => chained.push((subscriber, from, to)),
        }
    }
    chained
}

impl Statements for Gather<'_> {
    async fn letter(&mut self, _: &str) -> Result<Option<(String, Option<String>)>, StoreError> {
        Err(self.refuse("a letter's status is read"))
    }

    async fn inbox_first_failure(
        &mut self,
        _: &str,
        _: &str,
    ) -> Result<Option<Instant>, StoreError> {
        Err(self.refuse("a first failure is read"))
    }

    async fn scheduled_first_failure(&mut self, _: &str) -> Result<Option<Instant>, StoreError> {
        Err(self.refuse("a first failure is read"))
    }

    async fn stream_version(&mut self, _: &str, _: &str) -> Result<u64, StoreError> {
        Err(self.refuse("a stream's version is read"))
    }

    async fn insert_events(
        &mut self,
        append: &Append,
        versions: std::ops::RangeInclusive<u64>,
    ) -> Result<Inserted, StoreError> {
        let append = self.own(&self.set().appends, append)?;
        self.touch(Row::Stream(&append.aggregate_type, &append.aggregate_id))?;
        let count = versions.count() as u64;
        self.events += count;
        let first_position = self.next_position.unwrap_or(0);
        self.appends.push(PlacedAppend {
            append,
            first_position,
        });
        Ok(match &mut self.next_position {
            Some(next) => {
                *next += count;
                Inserted::At((first_position..first_position + count).collect())
            }
            None => Inserted::Unplaced,
        })
    }

    async fn skip_checkpoint(
        &mut self,
        subscriber: &str,
        from: u64,
        to: u64,
    ) -> Result<(), StoreError> {
        let subscriber = self.own_str(&self.set().skip, subscriber)?;
        self.skips.push((subscriber, from, to));
        Ok(())
    }

    async fn settle_inbox(
        &mut self,
        mark: &InboxMark,
        _: &InboxSettle<'_>,
    ) -> Result<u64, StoreError> {
        let own = self.own_mark(mark)?;
        self.touch(Row::Inbox(&own.handler, &own.event_id))?;
        self.settles.push(own);
        Ok(1)
    }

    async fn release_inbox(&mut self, mark: &InboxMark) -> Result<u64, StoreError> {
        let own = self.own_mark(mark)?;
        self.touch(Row::Inbox(&own.handler, &own.event_id))?;
        self.releases.push(own);
        Ok(1)
    }

    async fn complete_scheduled(&mut self, release: &ScheduledRelease) -> Result<u64, StoreError> {
        let release = self.own_release(release)?;
        self.touch(Row::Scheduled(&release.dedupe_key))?;
        self.completes.push(release);
        Ok(1)
    }

    async fn retry_scheduled(
        &mut self,
        _: &ScheduledRelease,
        _: Instant,
        _: &str,
        _: Instant,
    ) -> Result<u64, StoreError> {
        Err(self.refuse("a scheduler claim is retried"))
    }

    async fn give_back_scheduled(&mut self, release: &ScheduledRelease) -> Result<u64, StoreError> {
        let release = self.own_release(release)?;
        self.touch(Row::Scheduled(&release.dedupe_key))?;
        self.give_backs.push(release);
        Ok(1)
    }

    async fn move_entry(
        &mut self,
        release: &ScheduledRelease,
        entry: &ScheduledEntry,
    ) -> Result<u64, StoreError> {
        let release = self.own_release(release)?;
        let entry = self.own(&self.set().schedule, entry)?;
        self.touch(Row::Scheduled(&release.dedupe_key))?;
        self.moves.push((release, entry));
        Ok(1)
    }

    async fn unschedule(&mut self, key: &str) -> Result<(), StoreError> {
        let key = self.own_str(&self.set().unschedule, key)?;
        self.touch(Row::Scheduled(key))?;
        self.unschedules.push(key);
        Ok(())
    }

    async fn schedule(&mut self, entry: &ScheduledEntry) -> Result<(), StoreError> {
        let entry = self.own(&self.set().schedule, entry)?;
        self.touch(Row::Scheduled(&entry.dedupe_key))?;
        if self
            .schedules
            .iter()
            .any(|other| other.dedupe_key == entry.dedupe_key)
        {
            return Err(self.refuse("one entry scheduled twice"));
        }
        self.schedules.push(entry);
        Ok(())
    }

    async fn file_letter(&mut self, _: &DeadLetter) -> Result<(), StoreError> {
        Err(self.refuse("a letter is filed"))
    }

    async fn keep_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), StoreError> {
        let snapshot = self.own(&self.set().snapshots, snapshot)?;
        self.touch(Row::Snapshot(
            &snapshot.aggregate_type,
            &snapshot.aggregate_id,
        ))?;
        if self.snapshots.iter().any(|other| {
            (&other.aggregate_type, &other.aggregate_id)
                == (&snapshot.aggregate_type, &snapshot.aggregate_id)
        }) {
            return Err(self.refuse("one aggregate snapshotted twice"));
        }
        self.snapshots.push(snapshot);
        Ok(())
    }

    async fn index_instance(&mut self, change: &InstanceChange) -> Result<(), StoreError> {
        let change = self.own(&self.set().instances, change)?;
        self.touch(Row::Instance(&change.process, &change.instance_id))?;
        if change.changes_nothing() {
            return Ok(());
        }
        if self.instances.iter().any(|other| {
            (&other.process, &other.instance_id) == (&change.process, &change.instance_id)
        }) {
            return Err(self.refuse("one instance's row changed twice"));
        }
        self.instances.push(change);
        Ok(())
    }

    async fn claim_due(&mut self, claim: &ClaimDue) -> Result<Vec<ScheduledEntry>, StoreError> {
        let Some(own) = self
            .set()
            .claim_due
            .as_ref()
            .filter(|own| std::ptr::eq(*own, claim))
        else {
            return Err(self.refuse("a write that is not the write set's own"));
        };
        if self.claim.is_some() {
            return Err(self.refuse("two claims in one wave"));
        }
        self.claim = Some((self.current, own));
        // Filled in once the wave is written and the claim has run.
        Ok(Vec::new())
    }

    async fn settle_letter(&mut self, _: &LetterSettle) -> Result<u64, StoreError> {
        Err(self.refuse("a letter is settled"))
    }

    async fn keep_retry_request(&mut self, _: &RetryRequest) -> Result<(), StoreError> {
        Err(self.refuse("a requested retry is kept"))
    }

    async fn keep_ingress(&mut self, _: &IngressRecord) -> Result<u64, StoreError> {
        Err(self.refuse("an arrived command's key is kept"))
    }
}

impl<'w> Gather<'w> {
    /// The inbox mark of the write set being gathered that `mark` is.
    fn own_mark(&mut self, mark: &InboxMark) -> Result<&'w InboxMark, StoreError> {
        match self
            .set()
            .inbox
            .as_ref()
            .filter(|own| std::ptr::eq(*own, mark))
        {
            Some(own) => Ok(own),
            None => Err(self.refuse("a write that is not the write set's own")),
        }
    }

    /// The scheduler release of the write set being gathered that `release` is.
    fn own_release(
        &mut self,
        release: &ScheduledRelease,
    ) -> Result<&'w ScheduledRelease, StoreError> {
        match self
            .set()
            .scheduled
            .as_ref()
            .filter(|own| std::ptr::eq(*own, release))
        {
            Some(own) => Ok(own),
            None => Err(self.refuse("a write that is not the write set's own")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{chained, worth_a_wave};
    use crate::store::write_set::{ClaimDue, WriteSet};

    #[test]
    fn a_wave_is_worth_it_from_two_runs_a_claim_aside() {
        let run = WriteSet::default;
        let claim = || WriteSet {
            claim_due: Some(ClaimDue {
                claim_id: "c".into(),
                now: "2026-01-01T00:00:00Z".parse().expect("a moment"),
                lease: crate::duration::seconds(60),
                limit: 100,
            }),
            ..WriteSet::default()
        };
        assert!(!worth_a_wave(&[]));
        assert!(!worth_a_wave(&[run(), claim()]), "a batch of one");
        assert!(worth_a_wave(&[run(), run(), claim()]));
        assert!(worth_a_wave(&[run(), run()]));
    }

    #[test]
    fn a_subscribers_chain_of_moves_is_one_move() {
        let moves = vec![("a", 4, 6), ("b", 4, 6), ("a", 6, 9), ("a", 20, 21)];
        assert_eq!(
            chained(moves),
            vec![("a", 4, 9), ("b", 4, 6), ("a", 20, 21)]
        );
    }
}
