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
    onboarding_with(dir, args, &[])
}

/// `onboarding args..` in `dir` with `env` set.
fn onboarding_with(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_onboarding"))
        .current_dir(dir)
        .args(args)
        .env_remove("BOUNDA_DB")
        .env_remove("BOUNDA_CONFIG")
        .env_remove("RUST_LOG")
        .env_remove("WELCOME_WEBHOOK_URL")
        .env_remove("WELCOME_WEBHOOK_SECRET")
        .envs(env.iter().copied())
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

    // A zone the database does not hold is refused before anything is stored.
    let refused = onboarding(
        dir,
        &[
            "register",
            "ann@example.com",
            "Ann",
            "--zone",
            "Europe/Atlantis",
        ],
    );
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr(&refused).contains("`Europe/Atlantis` is not a time zone of the IANA database"),
        "{}",
        stderr(&refused)
    );
    let registered = onboarding(
        dir,
        &[
            "register",
            "ann@example.com",
            "Ann",
            "--zone",
            "Europe/Berlin",
        ],
    );
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

    // A preview on a copy runs the welcome email and the Monday digest on simulated time,
    // through the recording double; the digest reads in the user's zone.
    let copy = onboarding(dir, &["copy", "copy.db"]);
    assert!(copy.status.success(), "{}", stderr(&copy));
    let preview = onboarding(dir, &["--db", "copy.db", "preview", "--days", "8"]);
    assert!(preview.status.success(), "{}", stderr(&preview));
    assert!(
        stdout(&preview).contains("2 calls of EmailSender.send"),
        "{}",
        stdout(&preview)
    );
    assert!(
        stdout(&preview).contains(" 08:00 Europe/Berlin ("),
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

// Issue 43: an operator's command that only reads never changes the file it is pointed at: an
// empty file (a failed backup, a `touch`ed path) or another application's file is refused naming
// the path and what was found, and left as it was; only `work` and `migrate` create or upgrade
// a database, and a command that reads opens a read-only backup.
#[test]
fn a_command_that_reads_never_changes_the_file_it_is_pointed_at() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let listing = |dir: &Path| {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };

    std::fs::write(dir.join("touched.db"), b"").unwrap();
    let empty = onboarding(dir, &["--db", "touched.db", "lag"]);
    assert_eq!(empty.status.code(), Some(1));
    assert!(
        stderr(&empty).contains("`touched.db` is empty, not a bounda database"),
        "{}",
        stderr(&empty)
    );
    assert_eq!(std::fs::metadata(dir.join("touched.db")).unwrap().len(), 0);

    let other = rusqlite::Connection::open(dir.join("other.db")).unwrap();
    other
        .execute_batch("CREATE TABLE notes (body TEXT); PRAGMA user_version = 7;")
        .unwrap();
    drop(other);
    let before = std::fs::read(dir.join("other.db")).unwrap();
    for command in [
        &["lag"][..],
        &["check"],
        &["pause", "process", "UserOnboarding"],
    ] {
        let args: Vec<&str> = ["--db", "other.db"]
            .iter()
            .chain(command)
            .copied()
            .collect();
        let refused = onboarding(dir, &args);
        assert_eq!(refused.status.code(), Some(1), "{command:?}");
        assert!(
            stderr(&refused).contains("`other.db` is not a bounda database")
                && stderr(&refused).contains("notes")
                && stderr(&refused).contains("user_version: 7"),
            "{}",
            stderr(&refused)
        );
    }
    assert_eq!(std::fs::read(dir.join("other.db")).unwrap(), before);
    assert_eq!(listing(dir), ["other.db", "touched.db"], "no file made");

    // `migrate` creates and upgrades; a backup made read-only is inspected as it is.
    let migrated = onboarding(dir, &["migrate"]);
    assert!(migrated.status.success(), "{}", stderr(&migrated));
    assert!(stdout(&migrated).contains("`onboarding.db` is at this build's schema"));
    let registered = onboarding(dir, &["register", "ann@example.com", "Ann"]);
    assert!(registered.status.success(), "{}", stderr(&registered));
    let backup = dir.join("backup.db");
    rusqlite::Connection::open(dir.join("onboarding.db"))
        .unwrap()
        .execute("VACUUM INTO ?1", [backup.to_str().unwrap()])
        .unwrap();
    std::fs::set_permissions(&backup, std::os::unix::fs::PermissionsExt::from_mode(0o444)).unwrap();
    let before = std::fs::read(&backup).unwrap();
    let lag = onboarding(dir, &["--db", "backup.db", "lag"]);
    assert!(lag.status.success(), "{}", stderr(&lag));
    let check = onboarding(dir, &["--db", "backup.db", "check"]);
    assert!(check.status.success(), "{}", stderr(&check));
    assert_eq!(
        std::fs::read(&backup).unwrap(),
        before,
        "not a byte changed"
    );
    assert!(
        !dir.join("backup.db-wal").exists() && !dir.join("backup.db-shm").exists(),
        "nothing made beside it: a read-only mount holds it as it is"
    );
}

// Issue 43: `serve` refuses a page token short enough to guess, saying how to make one.
#[test]
fn serve_refuses_a_short_page_token_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let migrated = onboarding(dir.path(), &["migrate"]);
    assert!(migrated.status.success(), "{}", stderr(&migrated));
    let refused = Command::new(env!("CARGO_BIN_EXE_onboarding"))
        .current_dir(dir.path())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("PAGE_TOKEN", "ab")
        .env_remove("BOUNDA_DB")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr(&refused).contains("PAGE_TOKEN: the page's token has 2 characters")
            && stderr(&refused).contains("openssl rand -hex 24"),
        "{}",
        stderr(&refused)
    );
}

// Issue 44: `pause` in a shell without USER or LOGNAME asks for the missing argument.
#[test]
fn pause_without_a_name_asks_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let migrated = onboarding(dir.path(), &["migrate"]);
    assert!(migrated.status.success(), "{}", stderr(&migrated));
    let asked = Command::new(env!("CARGO_BIN_EXE_onboarding"))
        .current_dir(dir.path())
        .args(["pause", "process", "UserOnboarding"])
        .env_remove("USER")
        .env_remove("LOGNAME")
        .env_remove("BOUNDA_DB")
        .output()
        .unwrap();
    assert_eq!(asked.status.code(), Some(1), "{}", stderr(&asked));
    assert!(
        stderr(&asked).contains("missing argument `--by <name>`: who pauses it")
            && !stderr(&asked).contains("invalid configuration"),
        "{}",
        stderr(&asked)
    );
}

// Issue 45: the onboarding posts each welcome that went out to `WELCOME_WEBHOOK_URL` as a
// Standard Webhook signed with `WELCOME_WEBHOOK_SECRET`, its body the public `Welcome` contract;
// a secret without its address is refused before anything runs.
#[test]
fn the_welcome_is_posted_as_a_signed_webhook() {
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let received = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = std::sync::Arc::clone(&received);
    let endpoint = axum::Router::new().route(
        "/welcome",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| async move {
                let verified = bounda_webhooks::verify(SECRET, &headers, &body).is_ok();
                kept.lock().unwrap().push((headers, body, verified));
                if verified {
                    axum::http::StatusCode::NO_CONTENT
                } else {
                    axum::http::StatusCode::UNAUTHORIZED
                }
            },
        ),
    );
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("http://{}/welcome", listener.local_addr().unwrap());
    runtime.spawn(async move { axum::serve(listener, endpoint).await });

    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let alone = onboarding_with(dir, &["lag"], &[("WELCOME_WEBHOOK_SECRET", SECRET)]);
    assert_eq!(alone.status.code(), Some(2));
    assert_eq!(
        stderr(&alone),
        "error: `WELCOME_WEBHOOK_SECRET` is set without `WELCOME_WEBHOOK_URL`: set both, or \
         neither\n"
    );

    let registered = onboarding(dir, &["register", "ann@example.com", "Ann"]);
    assert!(registered.status.success(), "{}", stderr(&registered));
    let id = stdout(&registered).trim().to_owned();
    let env = [
        ("WELCOME_WEBHOOK_URL", url.as_str()),
        ("WELCOME_WEBHOOK_SECRET", SECRET),
        ("WELCOME_EMAIL_DELAY", "0s"),
    ];
    let work = onboarding_with(dir, &["work", "--seconds", "2"], &env);
    assert!(work.status.success(), "{}", stderr(&work));
    assert_eq!(stderr(&work), "", "normal operation logs nothing at warn");

    let received = received.lock().unwrap();
    assert_eq!(received.len(), 1, "one welcome, posted once");
    let (headers, body, verified) = &received[0];
    assert!(verified, "signed with the endpoint's secret");
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    assert_eq!(header("ce-type"), Some("com.example.onboarding.welcome.v1"));
    assert_eq!(header("ce-subject"), Some(id.as_str()));
    assert_eq!(header("ce-id"), header("webhook-id"));
    let welcome: serde_json::Value = serde_json::from_slice(body).unwrap();
    assert_eq!(
        welcome,
        serde_json::json!({ "user_id": id, "to": "ann@example.com" })
    );
}
