//! Changing a process state with live instances stored (issue 10): a field added later reads as
//! the state's `Default` has it; a state that no longer reads fails its instance alone, with a
//! letter naming the field, and the other instances and the operator's reads go on.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use crate::support;

use std::sync::Arc;

use bounda::StateProblem;
use bounda::prelude::*;
use bounda::store::Store;
use support::storefront::*;

/// The process as first deployed.
mod v1 {
    use super::*;

    #[process(on = Order, started_by = [OrderPlaced], completed_by = [OrderPaid])]
    #[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
    pub struct Trial {
        pub reminders: u32,
        #[deadline]
        pub next_reminder: Deadline,
    }

    #[process]
    impl Trial {
        async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> Result<TrialPatch> {
            Ok(TrialPatch::default().next_reminder(cx.after(hours(24))))
        }

        async fn at_next_reminder(cx: At<'_, Self>) -> Result<AtNextReminder> {
            Ok(AtNextReminder::new(cx.after(hours(24))).reminders(cx.state().reminders + 1))
        }
    }
}

/// The same process after a deploy that added a plain field, a list and a deadline.
mod v2 {
    use super::*;

    #[process(on = Order, started_by = [OrderPlaced], completed_by = [OrderPaid])]
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct Trial {
        pub reminders: u32,
        pub plan: String,
        pub sent_at: Vec<Instant>,
        #[deadline]
        pub next_reminder: Deadline,
        #[deadline]
        pub ends: Deadline,
    }

    impl Default for Trial {
        fn default() -> Trial {
            Trial {
                reminders: 0,
                plan: "basic".into(),
                sent_at: Vec::new(),
                next_reminder: Deadline::none(),
                ends: Deadline::none(),
            }
        }
    }

    #[process]
    impl Trial {
        async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> Result<TrialPatch> {
            Ok(TrialPatch::default().next_reminder(cx.after(hours(24))))
        }

        async fn at_next_reminder(cx: At<'_, Self>) -> Result<AtNextReminder> {
            let mut sent_at = cx.state().sent_at.clone();
            sent_at.push(cx.now());
            Ok(AtNextReminder::new(cx.after(hours(24)))
                .reminders(cx.state().reminders + 1)
                .sent_at(sent_at))
        }

        async fn at_ends(_cx: At<'_, Self>) -> Result<AtEnds> {
            Ok(AtEnds::new(Deadline::none()))
        }
    }
}

/// Two orders followed by the first deploy, each a day into its reminders.
async fn deployed_once() -> (Arc<dyn Store>, TestApp) {
    let store: Arc<dyn Store> = support::database::store().await;
    let first = TestApp::new(
        App::builder_shared(store.clone())
            .only_listed()
            .process::<v1::Trial>(),
    )
    .await
    .unwrap();
    first.dispatch(place("o-1")).await.unwrap();
    first.dispatch(place("o-2")).await.unwrap();
    first.advance(hours(25)).await.unwrap();
    (store, first)
}

#[tokio::test]
async fn a_field_added_later_reads_as_the_default_and_live_instances_go_on() {
    let (store, first) = deployed_once().await;
    let second = support::another_app(&store, first.clock(), |builder| {
        builder.process::<v2::Trial>()
    })
    .await;
    assert_eq!(second.app().unreadable_states().await.unwrap(), vec![]);
    // No letter: `advance` would fail if the instances could not read their stored state.
    second.advance(hours(24)).await.unwrap();
    let state = second
        .app()
        .process_instance::<v2::Trial>("o-1")
        .await
        .unwrap()
        .unwrap()
        .state;
    assert_eq!(
        (state.reminders, state.plan.as_str(), state.sent_at.len()),
        (2, "basic", 1),
        "the count carried over, the new fields read as the state's Default"
    );
    assert_eq!(state.ends, Deadline::none());
}

#[tokio::test]
async fn a_state_that_no_longer_reads_fails_its_instance_alone_and_names_the_field() {
    let (_store, first) = deployed_once().await;
    // A state written by some other code: `reminders` is text.
    support::write_state(
        &first,
        "Trial",
        "o-1",
        serde_json::json!({ "reminders": "two", "next_reminder": "2026-01-03T00:00:00.000Z" }),
    )
    .await;

    let unreadable = first.app().unreadable_states().await.unwrap();
    assert_eq!(
        unreadable
            .iter()
            .map(|state| (state.process.as_str(), state.instance.as_str()))
            .collect::<Vec<_>>(),
        [("Trial", "o-1")]
    );
    let StateProblem::Unreadable(error) = &unreadable[0].problem else {
        panic!("{unreadable:?}");
    };
    assert!(
        error.contains("cannot read its stored state (version 1) at `reminders`"),
        "{error}"
    );
    // The operator's reads go on, without the instance that cannot be read.
    let pending = first.app().pending_deadlines().await.unwrap();
    assert!(
        pending.iter().all(|deadline| deadline.instance == "o-2"),
        "{pending:?}"
    );
    assert!(!pending.is_empty());
    #[cfg(feature = "cli")]
    {
        let mut out = Vec::new();
        let deadlines = bounda::cli::Operator::Deadlines(bounda::cli::DeadlineArgs::default());
        bounda::cli::execute(first.app(), deadlines, &mut out)
            .await
            .unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(
            out.contains("left out Trial:o-1: its state cannot be read")
                && out.ends_with("1 instance(s) left out\n"),
            "{out}"
        );
    }

    let first = first.expecting_letters();
    first.advance(hours(24)).await.unwrap();
    let letters = support::letters(&first).await;
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert_eq!(letters[0].aggregate_id.as_deref(), Some("o-1"));
    assert!(
        letters[0].error_message.contains("at `reminders`"),
        "{}",
        letters[0].error_message
    );
    let other = first
        .app()
        .process_instance::<v1::Trial>("o-2")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(other.state.reminders, 2, "the other instance went on");
}

/// The process after a deploy that renamed `reminders` without an alias.
mod renamed {
    use super::*;

    #[process(on = Order, started_by = [OrderPlaced], completed_by = [OrderPaid])]
    #[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
    pub struct Trial {
        pub reminders_sent: u32,
        #[deadline]
        pub next_reminder: Deadline,
    }

    #[process]
    impl Trial {
        async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> Result<TrialPatch> {
            Ok(TrialPatch::default().next_reminder(cx.after(hours(24))))
        }

        async fn at_next_reminder(cx: At<'_, Self>) -> Result<AtNextReminder> {
            Ok(AtNextReminder::new(cx.after(hours(24)))
                .reminders_sent(cx.state().reminders_sent + 1))
        }
    }
}

#[tokio::test]
async fn the_check_names_fields_a_rename_would_drop_and_processes_the_app_lacks() {
    let (store, first) = deployed_once().await;
    // o-2 ends: an ended instance is never read again, so it is not reported.
    first
        .dispatch(MarkOrderPaid {
            order_id: "o-2".into(),
        })
        .await
        .unwrap();
    first.run_until_idle().await.unwrap();

    let second = support::another_app(&store, first.clock(), |builder| {
        builder.process::<renamed::Trial>()
    })
    .await;
    assert_eq!(
        second.app().unreadable_states().await.unwrap(),
        vec![bounda::UnreadableState {
            process: "Trial".into(),
            instance: "o-1".into(),
            problem: StateProblem::Dropped(vec!["reminders".into()]),
        }],
        "the rename without an alias would lose the count"
    );

    let other = support::another_app(&store, first.clock(), |builder| {
        builder.process::<OrderPayment>()
    })
    .await;
    let states = other.app().unreadable_states().await.unwrap();
    assert_eq!(
        states
            .iter()
            .map(|state| (state.instance.as_str(), &state.problem))
            .collect::<Vec<_>>(),
        [("o-1", &StateProblem::UnknownProcess)],
        "the app has no `Trial`"
    );

    let none = support::another_app(&store, first.clock(), |builder| builder).await;
    let error = none.app().unreadable_states().await.unwrap_err();
    assert!(error.to_string().contains("has no processes"), "{error}");
}
