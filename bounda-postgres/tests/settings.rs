//! The store's session settings (issue 39): `application_name` names each process's
//! connections in `pg_stat_activity`, and `lock_timeout` and `statement_timeout` bound the
//! store's statements, so one queued behind another session's lock fails saying why.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use bounda::millis;
use bounda::store::Store;
use bounda_postgres::{Options, PostgresStore, testing};

mod support;

/// The application names of the server's sessions.
async fn names(client: &tokio_postgres::Client) -> Vec<String> {
    client
        .query("SELECT application_name FROM pg_stat_activity", &[])
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

#[tokio::test]
async fn each_process_names_its_connections_and_an_operator_may_name_them_otherwise() {
    let (url, schema) = testing::schema("app_name").unwrap();
    let store = PostgresStore::connect(
        &url,
        Options {
            schema: schema.clone(),
            ..Options::default()
        },
    )
    .await
    .unwrap();
    store.head().await.unwrap();
    let client = support::session(&url).await;
    let pid = std::process::id().to_string();
    assert!(
        names(&client)
            .await
            .iter()
            .any(|name| name.starts_with("bounda ") && name.ends_with(&format!(" {pid}"))),
        "{:?}",
        names(&client).await
    );

    let named = PostgresStore::connect(
        &url,
        Options {
            schema: schema.clone(),
            application_name: Some("shop worker 2".into()),
            ..Options::default()
        },
    )
    .await
    .unwrap();
    named.head().await.unwrap();
    assert!(names(&client).await.contains(&"shop worker 2".to_owned()));
    // The address's own name wins over both.
    let addressed = PostgresStore::connect(
        &format!("{url} application_name=from_the_address"),
        Options {
            schema,
            application_name: Some("shop worker 3".into()),
            ..Options::default()
        },
    )
    .await
    .unwrap();
    addressed.head().await.unwrap();
    let all = names(&client).await;
    assert!(all.contains(&"from_the_address".to_owned()), "{all:?}");
    assert!(!all.contains(&"shop worker 3".to_owned()), "{all:?}");
}

/// A store with `options` whose `head` meets the events table locked by another session: the
/// error, its causes joined.
async fn head_behind_a_lock(test: &str, options: Options) -> String {
    let (url, schema) = testing::schema(test).unwrap();
    let store = PostgresStore::connect(
        &url,
        Options {
            schema: schema.clone(),
            ..options
        },
    )
    .await
    .unwrap();
    support::behind_a_lock(&url, &format!("\"{schema}\".events"), store.head())
        .await
        .unwrap_err()
}

#[tokio::test]
async fn a_statement_queued_behind_a_lock_fails_after_the_lock_timeout_saying_so() {
    let error = head_behind_a_lock(
        "lock_timeout",
        Options {
            lock_timeout: Some(millis(200)),
            ..Options::default()
        },
    )
    .await;
    assert!(error.contains("lock timeout"), "{error}");
}

#[tokio::test]
async fn a_statement_past_the_statement_timeout_is_cancelled_saying_so() {
    let error = head_behind_a_lock(
        "statement_timeout",
        Options {
            statement_timeout: Some(millis(200)),
            ..Options::default()
        },
    )
    .await;
    assert!(error.contains("statement timeout"), "{error}");
}
