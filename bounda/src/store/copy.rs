//! A copy of a store into another, through the [`Store`] trait: production pulled into a local
//! file, where a deploy can be previewed on its own data without touching it; and a transfer,
//! the same records moved to a new database for good (a SQLite file onto a PostgreSQL server).
//!
//! Both read the source a page at a time and write each page into the target with
//! [`CopyStore::import`], which keeps every record as it was: events at their positions and versions
//! with their ids, timestamps and metadata; checkpoints (one that passed held events taken back
//! to the first of them, which the target passes again while they are held); the inbox; scheduler entries with their
//! attempts, errors and revisions; dead letters with their status; pauses; the keys arrived
//! commands were decided under, with their answers. The instances index is filled
//! afresh in the target from the events and entries copied. Not kept: claims (what
//! production's runners hold in flight is free in the target, as if those runners had stopped),
//! snapshots (they only shorten a fold), the record of retries operators requested (a request
//! still waiting is a scheduler entry, and is copied), a scheduler entry's first failure moment (a letter filed
//! later gives the first failure after the copy), metadata fields this build does not know, and
//! read models (their tables and checkpoints: on the target, each read model projects the log
//! afresh into a table of its own).
//! Memory stays bounded by a page, except for dead letters, which are read at once: they are
//! few, or there is a failure to mend first.
//!
//! A live source is read record kind by record kind, events last, so every inbox entry, entry
//! and letter copied refers to events the target holds. A step committed while the copy runs may
//! leave an instance's entry behind its state; the runtime re-derives such entries from the
//! states when it starts on the target. For a copy of one instant, copy a stopped app or a backup.
//!
//! A copy ends with a [`CopyMark`]: when it was taken, and of what. A preview runs only on a
//! marked store, from its moment, and a runner refuses one (its real ports would repeat
//! production's work). A transfer leaves no mark: its target is the app's database from then on.

use crate::store::{DeadLetter, InstanceQuery, LetterFilter, ScheduledEntry, Store, StoreError};
use crate::{Instant, RecordedEvent};

/// Copies of a store: its records read a page at a time as a copy's source (the inbox here; the rest through the core), written as they were as a copy's target, and the mark that says a store is a copy.
/// A capability: a store that keeps it says so in
/// [`Store::capabilities`](crate::store::Store::capabilities).
#[async_trait::async_trait]
pub trait CopyStore: Send + Sync {
    /// Up to `limit` inbox entries in `(handler, event_id)` order, after the pair `after` (from
    /// the first when `None`), without their claims: how a [`copy`] reads the inbox a page at a
    /// time.
    async fn inbox_page(
        &self,
        after: Option<(&str, &str)>,
        limit: usize,
    ) -> Result<Vec<InboxEntry>, StoreError>;

    /// Writes `records` as they were, in one transaction: events at their positions and
    /// versions, the other records unclaimed; what a [`copy`] or a [`transfer`] writes into its
    /// target.
    async fn import(&self, records: &Import) -> Result<(), StoreError>;

    /// The mark [`copy`] left, when this store is a copy; `None` for any other store.
    async fn copied(&self) -> Result<Option<CopyMark>, StoreError>;
}

/// How many records the copy reads and writes at a time.
const PAGE: usize = 1_000;

/// Where an inbox entry stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InboxStatus {
    /// Taken by a run that has not settled.
    Pending,
    /// Done: never run again.
    Succeeded,
    /// Failed; waits for its retry.
    Failed,
    /// Given up on; its letter holds it.
    DeadLettered,
}

impl InboxStatus {
    /// The status as stored: `pending`, `succeeded`, `failed` or `dead`.
    pub fn as_str(self) -> &'static str {
        match self {
            InboxStatus::Pending => "pending",
            InboxStatus::Succeeded => "succeeded",
            InboxStatus::Failed => "failed",
            InboxStatus::DeadLettered => "dead",
        }
    }

    /// The status stored as `text`, if it is one.
    pub fn parse(text: &str) -> Option<InboxStatus> {
        [
            InboxStatus::Pending,
            InboxStatus::Succeeded,
            InboxStatus::Failed,
            InboxStatus::DeadLettered,
        ]
        .into_iter()
        .find(|status| status.as_str() == text)
    }
}

/// An inbox entry as stored, without its claim: what a copy reads and writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxEntry {
    /// The reaction's name.
    pub handler: String,
    /// The event it reacts to.
    pub event_id: String,
    /// Where it stands.
    pub status: InboxStatus,
    /// Runs that failed.
    pub attempts: u32,
    /// The last failure, if any.
    pub last_error: Option<String>,
    /// When a failed entry's retry is due.
    pub retry_at: Option<Instant>,
    /// When its run first failed, kept for the letter it may end as.
    pub first_failed_at: Option<Instant>,
}

/// What marks a store as a copy: when it was taken, and of what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyMark {
    /// The moment the copy was taken: where a preview's simulated clock starts.
    pub copied_at: Instant,
    /// What it was copied from, as the operator named it (a path, a server without password).
    pub source: String,
    /// The source's last position when the copy ended its read of the events.
    pub head: u64,
}

/// Records to write into a store as they were, in one transaction: one page of a copy.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Import {
    /// Events, kept at their positions and versions.
    pub events: Vec<RecordedEvent>,
    /// Checkpoints, by subscriber.
    pub checkpoints: Vec<(String, u64)>,
    /// Inbox entries.
    pub inbox: Vec<InboxEntry>,
    /// Scheduler entries, unclaimed.
    pub scheduled: Vec<ScheduledEntry>,
    /// Dead letters, oldest first, unclaimed.
    pub dead_letters: Vec<DeadLetter>,
    /// The keys arrived commands were decided under, with their answers.
    pub ingress: Vec<crate::store::IngressRecord>,
    /// Fill the instances index from what the target holds once this is written: a copy's
    /// last write, after its events. The index is derived, not copied, so it agrees with the
    /// events copied even from a source that kept running, or that keeps no index.
    pub fill_instances: bool,
    /// The mark that ends a copy.
    pub mark: Option<CopyMark>,
}

/// What a copy or a transfer wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Copied {
    /// Events.
    pub events: u64,
    /// Checkpoints.
    pub checkpoints: u64,
    /// Inbox entries.
    pub inbox: u64,
    /// Scheduler entries.
    pub scheduled: u64,
    /// Dead letters.
    pub dead_letters: u64,
    /// Keys of arrived commands.
    pub ingress: u64,
    /// Instances indexed in the target, from the events copied.
    pub instances: u64,
    /// The mark written last.
    pub mark: Option<CopyMark>,
}

/// Copies everything `from` holds into the empty store `to`, marked as a copy of `source` taken
/// at `now`; a copy of a copy keeps the first copy's mark. Refuses a target that holds
/// anything, writing nothing.
pub async fn copy(
    from: &dyn Store,
    to: &dyn Store,
    source: &str,
    now: Instant,
) -> Result<Copied, StoreError> {
    let mut copied = records(from, to).await?;
    // A copy of a copy is the same moment of the same source: a preview runs on a scratch copy
    // of a kept one, so previews of several builds start from one state.
    let mark = match mark(from).await? {
        Some(mark) => mark,
        None => CopyMark {
            copied_at: now,
            source: source.to_owned(),
            head: from.head().await?,
        },
    };
    write(
        to,
        Import {
            mark: Some(mark.clone()),
            ..Import::default()
        },
    )
    .await?;
    copied.mark = Some(mark);
    Ok(copied)
}

/// Moves everything `from` holds into the empty store `to`, for good: the same records as
/// [`copy`], without a mark of its own, so the app runs on `to` from then on. Stop the app
/// first, so nothing is written to `from` meanwhile. A copy transferred stays a copy.
pub async fn transfer(from: &dyn Store, to: &dyn Store) -> Result<Copied, StoreError> {
    let mut copied = records(from, to).await?;
    if let Some(mark) = mark(from).await? {
        write(
            to,
            Import {
                mark: Some(mark.clone()),
                ..Import::default()
            },
        )
        .await?;
        copied.mark = Some(mark);
    }
    Ok(copied)
}

/// Every record of `from` written into the empty store `to`, unmarked.
async fn records(from: &dyn Store, to: &dyn Store) -> Result<Copied, StoreError> {
    refuse_unless_empty(from, to).await?;
    let mut copied = Copied::default();
    // Checkpoints first, events last: what each record refers to is copied after it. A read
    // model's checkpoint stays behind with its table: on the copy it projects the log afresh.
    let mut checkpoints = from.checkpoints().await?;
    checkpoints
        .retain(|(subscriber, _)| !subscriber.starts_with(crate::read_model::SUBSCRIBER_PREFIX));
    // A checkpoint that passed held events goes back to the first of them on the copy, which
    // passes them again while they are held: the bookmarks stay behind.
    for (subscriber, position) in &mut checkpoints {
        if let Some(cursor) = from.cursor(subscriber).await? {
            *position = (*position).min(cursor.handled_to());
        }
    }
    copied.checkpoints = checkpoints.len() as u64;
    write(
        to,
        Import {
            checkpoints,
            ..Import::default()
        },
    )
    .await?;
    // What operators paused stays paused where the records go.
    if let Some(pauses) = from.capabilities().pauses {
        let paused = pauses.pauses().await?;
        if !paused.is_empty() {
            let to = to.capabilities().pauses()?;
            for pause in paused {
                to.pause(&pause).await?;
            }
        }
    }
    let mut after: Option<(String, String)> = None;
    loop {
        let page = from
            .capabilities()
            .copies()?
            .inbox_page(after.as_ref().map(|(h, e)| (h.as_str(), e.as_str())), PAGE)
            .await?;
        let Some(last) = page.last() else { break };
        after = Some((last.handler.clone(), last.event_id.clone()));
        copied.inbox += page.len() as u64;
        write(
            to,
            Import {
                inbox: page,
                ..Import::default()
            },
        )
        .await?;
    }
    for (command_type, _) in from.scheduled_types().await? {
        let mut after: Option<String> = None;
        loop {
            let mut page = from
                .scheduled_page(&command_type, after.as_deref(), PAGE)
                .await?;
            let Some(last) = page.last() else { break };
            after = Some(last.dedupe_key.clone());
            for entry in &mut page {
                if let Some(unreadable) = &entry.unreadable {
                    return Err(uncopied(
                        &format!("scheduler entry `{}`", entry.dedupe_key),
                        unreadable,
                    ));
                }
                entry.claim_id = None;
                entry.claimed_at = None;
            }
            copied.scheduled += page.len() as u64;
            write(
                to,
                Import {
                    scheduled: page,
                    ..Import::default()
                },
            )
            .await?;
        }
    }
    let letters = from.dead_letters(&LetterFilter::default()).await?;
    copied.dead_letters = letters.len() as u64;
    for page in letters.chunks(PAGE) {
        write(
            to,
            Import {
                dead_letters: page.to_vec(),
                ..Import::default()
            },
        )
        .await?;
    }
    // The keys of arrived commands, so a message delivered again after a transfer is still
    // answered, not decided twice.
    if let Some(record) = from.capabilities().ingress {
        let mut after: Option<String> = None;
        loop {
            let page = record.ingress_page(after.as_deref(), PAGE).await?;
            let Some(last) = page.last() else { break };
            after = Some(last.key.clone());
            copied.ingress += page.len() as u64;
            write(
                to,
                Import {
                    ingress: page,
                    ..Import::default()
                },
            )
            .await?;
        }
    }
    let mut position = 0;
    loop {
        let page = from.read_all(position, PAGE).await?;
        let Some(last) = page.last() else { break };
        position = last.position;
        let unreadable = page
            .iter()
            .find_map(|event| Some((event, event.unreadable.as_ref()?)));
        if let Some((event, unreadable)) = unreadable {
            let row = format!("event `{}` at position {}", event.id, event.position);
            return Err(uncopied(&row, unreadable));
        }
        copied.events += page.len() as u64;
        write(
            to,
            Import {
                events: page,
                ..Import::default()
            },
        )
        .await?;
    }
    // The index, from the events and entries copied: it holds what they say.
    write(
        to,
        Import {
            fill_instances: true,
            ..Import::default()
        },
    )
    .await?;
    copied.instances = to
        .capabilities()
        .instances()?
        .count_instances(&InstanceQuery::default())
        .await?;
    Ok(copied)
}

async fn write(to: &dyn Store, import: Import) -> Result<(), StoreError> {
    to.capabilities().copies()?.import(&import).await
}

/// The mark a copy left on `store`, when it is one: never on a store that keeps no copies.
pub(crate) async fn mark(store: &dyn Store) -> Result<Option<CopyMark>, StoreError> {
    match store.capabilities().copies {
        Some(copies) => copies.copied().await,
        None => Ok(None),
    }
}

/// Refuses a target that holds any record, or a source or target that keeps no copies: a copy
/// never mixes with other data.
async fn refuse_unless_empty(from: &dyn Store, to: &dyn Store) -> Result<(), StoreError> {
    // A copy reads the source's pages and writes them into the target, whose instances index
    // it fills from what it copied: each must keep what that needs.
    from.capabilities().copies()?;
    let copies = to.capabilities().copies()?;
    to.capabilities().instances()?;
    // The keys of arrived commands go with their events: a source that kept some needs a
    // target that keeps them.
    if let Some(record) = from.capabilities().ingress
        && !record.ingress_page(None, 1).await?.is_empty()
    {
        to.capabilities().ingress()?;
    }
    let holds = to.head().await? > 0
        || !to.checkpoints().await?.is_empty()
        || !copies.inbox_page(None, 1).await?.is_empty()
        || !to.scheduled_types().await?.is_empty()
        || to.count_dead_letters(&LetterFilter::default()).await? > 0
        || match to.capabilities().ingress {
            Some(record) => !record.ingress_page(None, 1).await?.is_empty(),
            None => false,
        }
        || copies.copied().await?.is_some();
    match holds {
        true => Err(StoreError::new(
            "the copy's target is not empty: copy into a new file",
        )),
        false => Ok(()),
    }
}

/// The refusal to copy `row`, which does not read: a copy holds what the source holds, so it
/// stops rather than write something else in its place.
fn uncopied(row: &str, unreadable: &super::Unreadable) -> StoreError {
    StoreError::new(format!(
        "{row} cannot be copied: {unreadable}; mend or remove the row, then copy again"
    ))
}
