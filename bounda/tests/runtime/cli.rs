//! The operator's commands, as an app embeds them.

#![cfg(feature = "cli")]
#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use crate::support;

use std::process::ExitCode;

use bounda::cli::{DeadlineArgs, ExplainArgs, Letters, Operator, ago, execute, relative};
use bounda::prelude::*;
use support::storefront::*;

#[policy]
async fn confirm_on_order_placed(_cx: Reaction<'_, OrderPlaced>) -> Result<()> {
    anyhow::bail!("the mail server is down")
}

use support::operator as output;

/// An app whose one policy, the order's confirmation, fails: the mail server is down. It
/// expects the letters that files.
async fn mail_down() -> TestApp {
    TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .policy::<ConfirmOnOrderPlaced>(),
    )
    .await
    .unwrap()
    .expecting_letters()
}

#[tokio::test]
async fn the_operator_lists_shows_retries_and_discards_letters() {
    let app = mail_down().await;
    app.dispatch(PlaceOrder {
        order_id: "o-1".into(),
        total: 1,
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();
    let test_app = &app;
    let app = app.app();
    let list = support::list_letters;

    let (code, text) = output(app, list(false)).await;
    assert_eq!(code, ExitCode::SUCCESS);
    assert!(
        text.contains("confirm_on_order_placed")
            && text.contains("the mail server is down")
            && text.contains(" failed "),
        "each letter with its status: {text}"
    );
    let (_, json) = output(app, list(true)).await;
    let letter: serde_json::Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
    let id = letter["id"].as_str().unwrap().to_owned();
    assert_eq!(letter["attempts"], 3);
    assert_eq!(letter["parked"], 0, "a policy letter holds nothing back");

    let (_, shown) = output(app, Operator::DeadLetters(Letters::Show { id: id.clone() })).await;
    assert!(shown.contains("\"status\": \"failed\""), "{shown}");

    // spec 166: a failed retry exits 2. Asked of the workers, it is recorded with the letter.
    let retry = support::command(&format!("dead-letters retry {id} --by erin"));
    let (code, _) = support::beside_worker(test_app, output(app, retry)).await;
    assert_eq!(code, ExitCode::from(2));
    let (_, shown) = output(app, Operator::DeadLetters(Letters::Show { id: id.clone() })).await;
    let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
    let retries = shown["retries"].as_array().unwrap();
    assert_eq!(retries.len(), 1, "{shown}");
    assert_eq!(retries[0]["by"], "erin");
    assert_eq!(retries[0]["outcome"]["outcome"], "failed", "{shown}");
    assert!(
        retries[0]["outcome"]["error"]
            .as_str()
            .unwrap()
            .contains("the mail server is down"),
        "{shown}"
    );
    let (code, text) = output(
        app,
        Operator::DeadLetters(Letters::Discard { id: id.clone() }),
    )
    .await;
    assert_eq!(
        (code, text.trim()),
        (ExitCode::SUCCESS, format!("discarded {id}").as_str())
    );

    let (_, lag) = output(app, Operator::Lag).await;
    assert!(
        lag.contains("policies") && lag.contains("max lag 0"),
        "{lag}"
    );
    let (_, deadlines) = output(app, Operator::Deadlines(DeadlineArgs::default())).await;
    assert_eq!(deadlines.trim(), "0 pending, 0 waiting, 0 held");
}

// Issue 10: `list` shows each letter's status and says so when none match; an unknown letter id
// is the same mistake (exit 1) for show, discard and retry.
#[tokio::test]
async fn list_shows_status_and_an_unknown_letter_is_one_mistake_for_every_command() {
    let app = mail_down().await;
    let app = app.app();
    let list = support::list_letters(false);
    let (code, text) = output(app, list).await;
    assert_eq!(
        (code, text.trim()),
        (ExitCode::SUCCESS, "no dead letters match")
    );
    for command in [
        Operator::DeadLetters(Letters::Show { id: "nope".into() }),
        Operator::DeadLetters(Letters::Discard { id: "nope".into() }),
        support::command("dead-letters retry nope --by erin"),
    ] {
        let mut out = Vec::new();
        let error = execute(app, command, &mut out).await.unwrap_err();
        assert_eq!(error.code(), "NOT_FOUND", "{error}");
    }
    assert_eq!(
        bounda::cli::run(app, support::command("dead-letters retry nope --by erin")).await,
        ExitCode::FAILURE,
        "exit 1, as for show and discard"
    );
}

/// Fails naming the order it was given, whatever its id holds.
struct MailNamingTheOrder;

#[policy]
impl Policy for MailNamingTheOrder {
    const NAME: &'static str = "mail_naming_the_order";
    type Event = OrderPlaced;

    async fn handle(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
        anyhow::bail!("cannot mail about {}", cx.event().order_id)
    }
}

// Issue 43: stored text with a newline or a terminal escape cannot forge a row of the
// operator's tables: each letter is one line, its control characters escaped.
#[tokio::test]
async fn stored_text_cannot_forge_a_row_of_a_table() {
    let app = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .policy::<MailNamingTheOrder>(),
    )
    .await
    .unwrap()
    .expecting_letters();
    app.dispatch(place("o-1\nl-0  failed Policy forged\x1b[2J"))
        .await
        .unwrap();
    app.run_until_idle().await.unwrap();
    let list = support::list_letters(false);
    let (_, text) = output(app.app(), list).await;
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.contains("cannot mail about o-1\\nl-0  failed Policy forged\\u{1b}[2J"),
        "{text}"
    );
}

// Issue 10: `deadlines` shows how far off each one is, filters by process and instance, and
// speaks JSON.
#[tokio::test]
async fn deadlines_show_relative_times_filter_and_speak_json() {
    let app = support::order_payments().await;
    for id in ["o-1", "o-2"] {
        app.dispatch(PlaceOrder {
            order_id: id.into(),
            total: 1,
        })
        .await
        .unwrap();
    }
    app.advance(minutes(55)).await.unwrap();
    let deadlines = |args: DeadlineArgs| output(app.app(), Operator::Deadlines(args));

    let (code, all) = deadlines(DeadlineArgs::default()).await;
    assert_eq!(code, ExitCode::SUCCESS);
    let lines: Vec<&str> = all.lines().collect();
    assert_eq!(lines.len(), 7, "{all}");
    assert!(
        lines[0].contains("in 23h 5m") && lines[0].contains("OrderPayment:o-1  next_reminder"),
        "{all}"
    );
    assert!(
        lines[2].contains("in 71h 5m") || lines[2].contains("in 2d 23h"),
        "{all}"
    );
    assert_eq!(lines[6], "6 pending, 0 waiting, 0 held");

    let (_, one) = deadlines(DeadlineArgs {
        instance: Some("o-2".into()),
        ..DeadlineArgs::default()
    })
    .await;
    assert!(
        one.lines()
            .take(3)
            .all(|line| line.contains("OrderPayment:o-2")),
        "{one}"
    );
    assert!(one.ends_with("3 pending, 0 waiting, 0 held\n"), "{one}");

    let mut out = Vec::new();
    let unknown = execute(
        app.app(),
        Operator::Deadlines(DeadlineArgs {
            process: Some("Shipping".into()),
            ..DeadlineArgs::default()
        }),
        &mut out,
    )
    .await
    .unwrap_err();
    assert_eq!(unknown.code(), "NOT_FOUND");
    assert!(
        unknown.to_string().contains("its processes: OrderPayment"),
        "{unknown}"
    );

    let (_, json) = deadlines(DeadlineArgs {
        process: Some("OrderPayment".into()),
        instance: Some("o-1".into()),
        json: true,
    })
    .await;
    let rows: Vec<serde_json::Value> = json
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(rows.len(), 3, "{json}");
    assert_eq!(rows[0]["field"], "next_reminder");
    assert_eq!(rows[0]["instance"], "o-1");
    assert_eq!(rows[0]["at"], "2026-01-02T00:00:00.000Z");
    assert_eq!(rows[0]["waiting"], false);
}

#[test]
fn relative_times_read_as_people_say_them() {
    let now: Instant = "2026-01-01T12:00:00Z".parse().unwrap();
    let at = |text: &str| relative(text.parse().unwrap(), now);
    assert_eq!(at("2026-01-01T14:05:00Z"), "in 2h 5m");
    assert_eq!(at("2026-01-01T11:57:00Z"), "overdue 3m");
    assert_eq!(at("2026-01-01T12:00:00.400Z"), "now");
    assert_eq!(at("2026-01-03T13:00:10Z"), "in 2d 1h");
    assert_eq!(at("2026-01-01T14:00:07Z"), "in 2h");
    assert_eq!(at("2026-01-01T12:00:42Z"), "in 42s");
}

// Issue 13: `explain` tells an instance's story for a person (one line a step, its changes
// indented, times relative) and as JSON; an instance that never started is an error naming it.
#[tokio::test]
async fn explain_tells_an_instances_story_for_a_person_and_as_json() {
    let app = support::order_payments().await;
    app.dispatch(PlaceOrder {
        order_id: "o-1".into(),
        total: 1,
    })
    .await
    .unwrap();
    app.advance(hours(25)).await.unwrap();
    let explain = |json| {
        Operator::Explain(ExplainArgs {
            process: "OrderPayment".into(),
            id: "o-1".into(),
            json,
        })
    };
    let (code, text) = output(app.app(), explain(false)).await;
    assert_eq!(code, ExitCode::SUCCESS);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("OrderPayment o-1: running, its lifetime ends in 28d 23h"),
        "{text}"
    );
    assert!(
        lines[1].contains("1d 1h ago") && lines[1].contains("started by OrderPlaced Order:o-1"),
        "{text}"
    );
    assert!(
        lines[2].contains("next_reminder set to 2026-01-02T00:00:00.000Z (in 1d)"),
        "{text}"
    );
    assert!(text.contains("deadline next_reminder reached (due 2026-01-02T00:00:00.000Z)"));
    assert!(
        text.contains("next_reminder moved from 2026-01-02T00:00:00.000Z (now) to 2026-01-03T00:00:00.000Z (in 1d)"),
        "{text}"
    );
    assert!(text.contains("      reminders: 0 → 1"), "{text}");
    assert!(text.contains("pending:\n  next_reminder"), "{text}");

    let (_, json) = output(app.app(), explain(true)).await;
    let story: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(story["status"], "Started");
    assert_eq!(story["steps"][0]["what"]["kind"], "started");
    assert_eq!(story["steps"][1]["what"]["kind"], "deadlineReached");
    assert_eq!(story["steps"][1]["deadlines"][0]["field"], "next_reminder");
    assert_eq!(story["pending"][0]["at"], "2026-01-03T00:00:00.000Z");

    let mut out = Vec::new();
    let missing = execute(
        app.app(),
        Operator::Explain(ExplainArgs {
            process: "OrderPayment".into(),
            id: "o-9".into(),
            json: false,
        }),
        &mut out,
    )
    .await
    .unwrap_err();
    assert_eq!(missing.code(), "NOT_FOUND");
    assert!(missing.to_string().contains("`o-9`"), "{missing}");
}

#[test]
fn past_moments_read_as_ago() {
    let now: Instant = "2026-01-01T12:00:00Z".parse().unwrap();
    assert_eq!(ago("2026-01-01T11:57:00Z".parse().unwrap(), now), "3m ago");
    assert_eq!(
        ago("2026-01-01T14:05:00Z".parse().unwrap(), now),
        "in 2h 5m"
    );
}

// issue 24: `dead-letters retry-all` and `discard-all` take the flags an operator types, count
// first with `--dry-run`, print each letter's outcome and the counts, and exit 2 when a retry
// did not go through.
#[tokio::test]
async fn the_operator_retries_and_discards_letters_in_bulk() {
    let parse = support::command;
    let app = mail_down().await;
    for order in ["o-1", "o-2", "o-3"] {
        app.dispatch(support::storefront::place(order))
            .await
            .unwrap();
    }
    app.run_until_idle().await.unwrap();
    let test_app = &app;
    let app = app.app();

    let (code, text) = output(app, parse("dead-letters retry-all --error mail --dry-run")).await;
    assert_eq!(
        (code, text.trim()),
        (ExitCode::SUCCESS, "3 open letters match")
    );
    let (_, text) = output(app, parse("dead-letters retry-all --error disk --dry-run")).await;
    assert_eq!(text.trim(), "0 open letters match");

    // The mail server is still down: every retry fails, and the command says so.
    let (code, text) = support::beside_worker(
        test_app,
        output(
            app,
            parse(
                "dead-letters retry-all --handler confirm_on_order_placed --batch 2 --pause 0s \
                 --by erin",
            ),
        ),
    )
    .await;
    assert_eq!(code, ExitCode::from(2), "{text}");
    assert_eq!(
        text.lines()
            .filter(|line| line.contains("  failed: "))
            .count(),
        3,
        "{text}"
    );
    assert_eq!(text.lines().last(), Some("3 failed"), "{text}");

    let (code, text) = output(
        app,
        parse("dead-letters discard-all --kind policy --limit 2 --pause 0s"),
    )
    .await;
    assert_eq!(code, ExitCode::SUCCESS);
    assert_eq!(text.lines().last(), Some("2 discarded"), "{text}");
    let (_, text) = output(app, parse("dead-letters discard-all --dry-run")).await;
    assert_eq!(text.trim(), "1 open letter matches");
    let (_, text) = output(
        app,
        parse("dead-letters discard-all --failed-from 2999-01-01T00:00:00Z"),
    )
    .await;
    assert_eq!(text.trim(), "no open letters match");
}

/// The operator's commands and the service's flags as a command line reads them.
#[derive(clap::Parser)]
struct CommandLine {
    #[command(flatten)]
    service: bounda::cli::ServiceArgs,
    #[command(subcommand)]
    operator: Operator,
}

/// What clap says of `args`, refused.
fn refused(args: &[&str]) -> String {
    use clap::Parser;
    match CommandLine::try_parse_from(std::iter::once(&"app").chain(args)) {
        Ok(_) => panic!("{args:?} was taken"),
        Err(error) => error.to_string(),
    }
}

// Issue 43: a value out of range is refused naming the flag the operator typed and the value,
// not clamped in silence nor blamed on a setting they did not write.
#[test]
fn values_out_of_range_are_refused_naming_the_flag() {
    let limit = refused(&["instances", "--limit", "0"]);
    assert!(
        limit.contains("'--limit <LIMIT>'") && limit.contains("1..=1000"),
        "{limit}"
    );
    assert!(refused(&["instances", "--limit", "1001"]).contains("--limit"));
    let zero = refused(&["--handler-timeout", "0s", "lag"]);
    assert!(
        zero.contains("'--handler-timeout <HANDLER_TIMEOUT>'")
            && zero.contains("more than 0 and at most 1d, not 0ms")
            && !zero.contains("commands.timeout"),
        "{zero}"
    );
    let huge = refused(&["--handler-timeout", "1e309s", "lag"]);
    assert!(
        huge.contains("the number is malformed") && !huge.contains("unit"),
        "{huge}"
    );
}

// Issue 43: `rearm` of an instance that does not exist is an error, not "0 entries".
#[tokio::test]
async fn rearming_an_instance_that_does_not_exist_is_refused() {
    let app = support::order_payments().await;
    let mut out = Vec::new();
    let rearm = Operator::Rearm(bounda::cli::RearmArgs {
        process: Some("OrderPayment".into()),
        id: Some("nope".into()),
        dry_run: false,
    });
    let error = execute(app.app(), rearm, &mut out).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "instance `nope` of process `OrderPayment` does not exist"
    );
}

// Issue 44: a retry asked while no worker runs waits as a request: the command says so (exit 3),
// asking again waits for that same request, `check` finds nothing wrong with it, and the next
// worker's pass runs it and records what it did, which `show` tells.
#[tokio::test]
async fn a_requested_retry_waits_for_the_next_worker() {
    let test_app = mail_down().await;
    test_app
        .dispatch(support::storefront::place("o-1"))
        .await
        .unwrap();
    test_app.run_until_idle().await.unwrap();
    let app = test_app.app();
    let id = support::letters(&test_app).await[0].id.clone();

    let retry = || support::command(&format!("dead-letters retry {id} --wait 0s --by erin"));
    for _ in 0..2 {
        let (code, text) = output(app, retry()).await;
        assert_eq!(code, ExitCode::from(3), "{text}");
        assert!(
            text.contains("no worker ran it within 0ms: it stays requested"),
            "{text}"
        );
    }
    let requests = app.dead_letters().requests(&id).await.unwrap();
    assert_eq!(requests.len(), 1, "asked twice, one request: {requests:?}");
    assert_eq!(requests[0].outcome, None);
    let (code, text) = output(app, support::command("check")).await;
    assert_eq!(
        code,
        ExitCode::SUCCESS,
        "a waiting request is no problem: {text}"
    );

    test_app.run_until_idle().await.unwrap();
    let requests = app.dead_letters().requests(&id).await.unwrap();
    match &requests[0].outcome {
        Some(bounda::store::RetryOutcome::Failed { code, error }) => {
            assert_eq!(code, "RETRY_FAILED");
            assert!(error.contains("the mail server is down"), "{error}");
        }
        other => panic!("the worker ran it and it failed again: {other:?}"),
    }
    assert!(requests[0].finished_at.is_some());
}
