//! The onboarding binary, a service in a few lines on `bounda::cli::Service` (issue 24): its own
//! commands beside the service's (`work`, `copy`, `preview`) and the operator's, on one file,
//! with their exit codes and errors.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use std::path::Path;
use std::process::{Command, Output};

/// `onboarding args..` in `dir`, its store the file there.
fn onboarding(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_onboarding"))
        .current_dir(dir)
        .args(args)
        .env_remove("BOUNDA_DB")
        .env_remove("BOUNDA_CONFIG")
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_user_registers_works_through_and_activates_on_the_services_commands() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();

    // An operator's command never creates the database.
    let missing = onboarding(dir, &["lag"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).contains("no database at `onboarding.db`"),
        "{}",
        stderr(&missing)
    );
    assert!(!dir.join("onboarding.db").exists());

    let registered = onboarding(dir, &["register", "ann@example.com", "Ann"]);
    assert!(registered.status.success(), "{}", stderr(&registered));
    let id = stdout(&registered).trim().to_owned();
    assert_eq!(id.len(), 36, "a uuid: {id}");
    assert!(
        dir.join("onboarding.db").exists(),
        "the service's name with `.db`"
    );

    // `work` starts the user's process; the operator's commands see it.
    let work = onboarding(dir, &["work", "--seconds", "1"]);
    assert!(work.status.success(), "{}", stderr(&work));
    assert_eq!(stderr(&work), "", "normal operation logs nothing at warn");
    let running = onboarding(dir, &["instances", "--status", "running"]);
    assert!(
        stdout(&running).contains(&format!("UserOnboarding:{id}")),
        "{}",
        stdout(&running)
    );

    // A preview on a copy runs the welcome email on simulated time, through the recording double.
    let copy = onboarding(dir, &["copy", "copy.db"]);
    assert!(copy.status.success(), "{}", stderr(&copy));
    let preview = onboarding(dir, &["--db", "copy.db", "preview", "--days", "8"]);
    assert!(preview.status.success(), "{}", stderr(&preview));
    assert!(
        stdout(&preview).contains("1 calls of EmailSender.send"),
        "{}",
        stdout(&preview)
    );

    let activated = onboarding(dir, &["activate", &id]);
    assert!(activated.status.success(), "{}", stderr(&activated));
    let work = onboarding(dir, &["work", "--seconds", "1"]);
    assert!(work.status.success(), "{}", stderr(&work));
    let completed = onboarding(dir, &["instances", "--status", "completed", "--count"]);
    assert_eq!(stdout(&completed).trim(), "1", "{}", stdout(&completed));

    // A rejection and a bad argument fail with their reasons.
    let again = onboarding(dir, &["activate", &id]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        stderr(&again).contains("active already"),
        "{}",
        stderr(&again)
    );
    let bad = onboarding(dir, &["register", "not-an-address", "Bo"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(stderr(&bad).contains("email"), "{}", stderr(&bad));
}

#[test]
fn the_settings_file_is_read_and_a_mistake_in_it_refused() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let registered = onboarding(dir, &["register", "ann@example.com", "Ann"]);
    assert!(registered.status.success(), "{}", stderr(&registered));

    std::fs::write(
        dir.join("limits.json"),
        r#"{ "limits": { "processes": { "UserOnboarding": { "rate": "10/s" } } } }"#,
    )
    .unwrap();
    let limited = onboarding(dir, &["--config", "limits.json", "work", "--seconds", "1"]);
    assert!(limited.status.success(), "{}", stderr(&limited));

    std::fs::write(
        dir.join("typo.json"),
        r#"{ "limits": { "processes": { "UserOnbording": { "rate": "10/s" } } } }"#,
    )
    .unwrap();
    let refused = onboarding(dir, &["--config", "typo.json", "lag"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr(&refused).contains("process `UserOnbording`, which this app does not run"),
        "{}",
        stderr(&refused)
    );
    let unread = onboarding(dir, &["--config", "missing.json", "lag"]);
    assert_eq!(unread.status.code(), Some(1));
    assert!(
        stderr(&unread).contains("cannot read the settings `missing.json`"),
        "{}",
        stderr(&unread)
    );
    let usage = onboarding(dir, &["--batch-size", "0", "lag"]);
    assert_eq!(
        usage.status.code(),
        Some(2),
        "a command line clap cannot parse"
    );
}
