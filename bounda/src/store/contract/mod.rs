//! The contract every [`Store`] passes. A store crate runs it with
//! [`store_contract_tests!`](crate::store_contract_tests), one test per behaviour:
//!
//! ```text
//! bounda::store_contract_tests!(async || bounda_sqlite::SqliteStore::in_memory().unwrap());
//! ```
//!
//! `make` is an async closure or function: a store on a server connects before its test.
//!
//! The contract has a part for the core every store keeps (`core.rs`) and one for each
//! capability, in a file named after it. A store that keeps only some capabilities runs the
//! core's part and theirs:
//!
//! ```text
//! bounda::store_contract_tests!([core, pauses]: make);
//! ```
//!
//! Each function panics with a message naming the broken promise, like any test.

#![allow(
    clippy::unwrap_used,
    clippy::missing_panics_doc,
    missing_docs,
    reason = "test code: a failed expectation is a panic"
)]

use serde_json::json;

use crate::store::{
    Append, ClaimDue, CommitError, DeadLetter, InOrder, InboxClaim, InboxMark, InboxOutcome,
    InboxPair, LetterFilter, LetterHold, LetterKind, LetterSettle, LetterStatus, Metadata,
    NewEvent, ScheduledEntry, ScheduledOutcome, ScheduledRelease, Snapshot, Store, WriteSet,
};
use crate::{Instant, days, millis, seconds};

mod bookmarks;
mod copies;
mod core;
mod ingress;
mod instances;
mod limits;
mod pauses;
mod read_models;
mod retry_requests;
mod wake_ups;
pub use self::core::*;
pub use bookmarks::*;
pub use copies::*;
pub use ingress::*;
pub use instances::*;
pub use limits::*;
pub use pauses::*;
pub use read_models::*;
pub use retry_requests::*;
pub use wake_ups::*;

/// What a contract test runs on: a store, or a store with a guard that must outlive it (such
/// as the temporary directory of a file).
pub trait Fixture {
    /// The store under test.
    fn store(&self) -> &dyn Store;
}

impl<S: Store> Fixture for S {
    fn store(&self) -> &dyn Store {
        self
    }
}

impl<S: Store, G> Fixture for (S, G) {
    fn store(&self) -> &dyn Store {
        &self.0
    }
}

/// Generates one `#[test]` per contract item for the [`Fixture`] `make().await` returns, each on
/// a runtime of its own: `store_contract_tests!(make)` for the core and every capability, or the
/// parts a store keeps when it keeps only some: `store_contract_tests!([core, pauses]: make)`,
/// from `core`, `pauses`, `limits`, `instances`, `copies`, `read_models`, `ingress` and
/// `wake_ups` (one part alone: `store_contract_tests!(core: make)`).
#[macro_export]
macro_rules! store_contract_tests {
    (core: $make:expr) => {
        $crate::store_contract_tests!(@tests $make;
            appends_get_consecutive_positions_and_versions,
            an_append_at_a_stale_version_writes_nothing,
            streams_are_scoped_to_their_aggregate_type,
            read_all_pages_in_position_order,
            checkpoints_move_by_compare_and_set,
            an_inbox_claim_is_held_then_lapses_then_settles,
            a_failed_inbox_entry_waits_for_its_retry,
            inbox_failures_are_listed_first_retry_first,
            a_lost_inbox_claim_rolls_back_the_whole_write_set,
            scheduling_is_idempotent_on_its_key,
            due_entries_are_claimed_in_order_once,
            a_lost_scheduler_claim_writes_nothing,
            scheduler_releases_complete_retry_and_defer,
            next_due_at_counts_claimed_entries_after_their_lease,
            dead_letters_are_filed_once_and_settled_once,
            dead_letters_are_listed_and_counted_by_filter,
            group_commit_leaves_out_only_the_failing_write_set,
            a_batch_claim_skips_a_lane_after_its_held_pair,
            a_batch_claim_skips_a_handler_after_its_waiting_pair,
            a_batch_claim_takes_no_more_than_its_limit,
            a_released_inbox_claim_is_free_at_once_without_an_attempt,
            a_skipping_write_set_moves_only_a_checkpoint_at_the_head,
            a_snapshot_is_kept_unless_a_newer_one_is,
            a_stream_reads_after_a_version,
            a_page_of_streams_reads_each_after_its_snapshot_in_order,
            scheduler_entries_are_read_by_their_keys_at_once,
            a_write_set_claims_the_next_due_entries_in_its_transaction,
            completing_an_entry_and_scheduling_its_key_moves_it,
            a_letter_filed_with_its_claim_keeps_the_runs_first_failure,
            a_lease_longer_than_the_calendar_never_lapses,
            a_letter_is_claimed_by_one_retry_at_a_time,
            any_json_is_kept_as_written,
            a_large_group_commit_answers_each_write_set_in_order,
            a_group_commit_of_firings_fails_only_the_one_whose_claim_was_taken_over,
            a_wave_of_every_kind_lands_as_each_write_set_alone_would,
            the_hours_ahead_are_read_bounded_and_the_rest_counted,
            a_claim_lapses_on_the_lease_it_was_taken_with,
            next_due_at_counts_a_claim_to_the_end_of_its_own_lease,
            a_renewal_extends_a_claim_by_the_renewing_lease,
            a_renewed_letter_claim_outlasts_its_first_lease,
            a_write_set_fenced_on_a_letter_writes_only_while_its_retry_holds_it,
            stream_ids_are_listed_once_each_in_pages,
            scheduled_types_are_counted_and_paged,
            a_checkpoint_passes_held_events_and_returns_to_its_bookmarks,
            passes_and_returns_at_once_never_lose_a_held_event,
            a_retry_request_is_kept_then_finished_once,
        );
    };
    (read_models: $make:expr) => {
        $crate::store_contract_tests!(@tests $make;
            read_model_tables_are_made_and_brought_up_at_start,
            a_read_model_batch_writes_its_rows_with_its_checkpoint_or_nothing,
            a_read_model_hold_counts_its_attempts_at_one_event,
            a_rebuild_resumes_is_superseded_swaps_and_is_abandoned,
        );
    };
    (instances: $make:expr) => {
        $crate::store_contract_tests!(@tests $make;
            an_instance_row_is_written_with_its_steps,
            a_wave_of_steps_writes_each_row_as_alone,
            instances_are_listed_and_counted_as_the_model_says,
        );
    };
    (pauses: $make:expr) => {
        $crate::store_contract_tests!(@tests $make;
            paused_entries_are_left_by_the_claim_until_resumed,
        );
    };
    (limits: $make:expr) => {
        $crate::store_contract_tests!(@tests $make;
            permits_are_counted_per_window_up_to_the_cap,
            permits_taken_at_once_stay_within_the_cap,
            a_used_up_limits_entries_wait_for_its_window_to_end,
        );
    };
    (copies: $make:expr) => {
        $crate::store_contract_tests!(@tests $make;
            inbox_entries_are_read_a_page_at_a_time_with_where_they_stand,
        );
    };
    (ingress: $make:expr) => {
        $crate::store_contract_tests!(@tests $make;
            an_arrived_commands_key_is_kept_with_its_events_once,
        );
    };
    (wake_ups: $make:expr) => {
        $crate::store_contract_tests!(@tests $make;
            a_listener_hears_a_commit,
        );
    };
    (@tests $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::store::contract::block_on(async {
                    let fixture = ($make)().await;
                    $crate::store::contract::$name($crate::store::contract::Fixture::store(&fixture))
                        .await;
                });
            }
        )*
    };
    ([$($part:ident),* $(,)?]: $make:expr) => {
        $($crate::store_contract_tests!($part: $make);)*
    };
    ($make:expr) => {
        $crate::store_contract_tests!(
            [core, read_models, instances, pauses, limits, copies, ingress, wake_ups]: $make
        );
    };
}

/// Runs a contract test on a runtime of its own, with every driver the build has (a store on
/// a server needs the network's).
pub fn block_on(test: impl std::future::Future<Output = ()>) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime for the test")
        .block_on(test);
}

pub(super) fn t(text: &str) -> Instant {
    Instant::parse(text).unwrap()
}

/// A due entry of `command_type` keyed `key` for instance `id`, holding `payload`.
pub(super) fn due(
    key: &str,
    command_type: &str,
    id: &str,
    payload: serde_json::Value,
) -> ScheduledEntry {
    ScheduledEntry::new(key, command_type, id, payload, t("2026-01-01T00:00:00Z"))
}

/// The keys `claim_due` takes at `now`, sorted: held from then on, so a later probe at the same
/// moment takes only what it had left.
pub(super) async fn claimable(store: &dyn Store, now: Instant) -> Vec<String> {
    let claimed = store
        .claim_due("probe", now, seconds(30), 100)
        .await
        .unwrap();
    let mut keys: Vec<String> = claimed.iter().map(|e| e.dedupe_key.clone()).collect();
    keys.sort();
    keys
}

/// A capability of the store under contract: every store the contract runs on keeps each.
pub(super) fn kept<T: ?Sized>(capability: Result<&T, crate::store::StoreError>) -> &T {
    capability.unwrap_or_else(|refused| panic!("{refused}"))
}

fn event(id: &str, event_type: &str) -> NewEvent {
    NewEvent {
        id: id.to_owned(),
        event_type: event_type.to_owned(),
        payload: json!({ "n": id }),
        timestamp: t("2026-01-01T00:00:00Z"),
        metadata: Metadata::of_command("cmd-1"),
    }
}

pub(super) fn append(aggregate_type: &str, id: &str, expected: u64, events: &[&str]) -> Append {
    Append {
        aggregate_type: aggregate_type.to_owned(),
        aggregate_id: id.to_owned(),
        expected_version: expected,
        events: events.iter().map(|e| event(e, "Happened")).collect(),
    }
}

pub(super) fn appending(appends: Vec<Append>) -> WriteSet {
    WriteSet {
        appends,
        ..WriteSet::default()
    }
}

fn entry(key: &str, execute_at: &str) -> ScheduledEntry {
    ScheduledEntry {
        context: json!({ "correlation_id": "c-1" }),
        ..ScheduledEntry::new(
            key,
            "SendReminder",
            "o-1",
            json!({ "order_id": "o-1" }),
            t(execute_at),
        )
    }
}

fn letter(id: &str, kind: LetterKind, handler: &str) -> DeadLetter {
    DeadLetter {
        id: id.to_owned(),
        kind,
        handler: handler.to_owned(),
        event_id: Some("e-1".to_owned()),
        event_type: Some("OrderPlaced".to_owned()),
        aggregate_type: Some("Order".to_owned()),
        aggregate_id: Some("o-1".to_owned()),
        error_type: "terminal".to_owned(),
        error_message: "boom".to_owned(),
        error_stack: None,
        attempts: 1,
        first_failed_at: t("2026-01-01T00:00:00Z"),
        last_failed_at: t("2026-01-01T00:00:01Z"),
        status: LetterStatus::Failed,
        payload: None,
    }
}

/// Settles the claim `claim_id` on `(handler, event_id)` with `outcome`.
pub(super) async fn settle_inbox(
    store: &dyn Store,
    handler: &str,
    event_id: &str,
    claim_id: &str,
    outcome: InboxOutcome,
) {
    let writes = WriteSet {
        inbox: Some(InboxMark {
            handler: handler.into(),
            event_id: event_id.into(),
            claim_id: claim_id.into(),
            outcome,
        }),
        ..WriteSet::default()
    };
    store.commit(&writes).await.unwrap();
}
