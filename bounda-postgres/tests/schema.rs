//! The schema on a real server (issue 12): migrated once however many processes connect at
//! once, under a schema and table prefix of one's choice, and refused when a newer bounda wrote
//! it.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use bounda_postgres::{Options, PostgresStore, SCHEMA_VERSION, testing};

mod support;

/// A fresh schema on the test server; without PostgreSQL, a failure saying how to get it.
fn fresh(test: &str) -> (String, String) {
    testing::schema(test).unwrap_or_else(|how| panic!("{how}"))
}

async fn tables(url: &str, schema: &str) -> Vec<String> {
    support::session(url)
        .await
        .query(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1",
            &[&schema],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

fn options(schema: &str, prefix: &str) -> Options {
    Options {
        schema: schema.to_owned(),
        table_prefix: prefix.to_owned(),
        ..Options::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_connecting_at_once_migrate_the_tables_once() {
    let (url, schema) = fresh("at_once");
    let connects = (0..8).map(|_| {
        let (url, options) = (url.clone(), options(&schema, ""));
        tokio::spawn(async move { PostgresStore::connect(&url, options).await })
    });
    // Issue 39: exactly one migrates; the others wait for it, then run on its tables.
    let mut migrated = Vec::new();
    for connect in connects {
        let store = connect.await.unwrap().unwrap();
        assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);
        migrated.extend(store.migrated_from());
    }
    assert_eq!(migrated, [0], "one process migrated, from nothing");
    let tables = tables(&url, &schema).await;
    assert_eq!(
        tables,
        [
            "bookmarks",
            "checkpoints",
            "copy",
            "dead_letters",
            "events",
            "head",
            "inbox",
            "ingress",
            "instances",
            "limits",
            "pauses",
            "pending_deadlines",
            "read_models",
            "retry_requests",
            "scheduled_commands",
            "schema",
            "snapshots"
        ]
    );
    let versions: i64 = support::session(&url)
        .await
        .query_one(&format!("SELECT count(*) FROM {schema}.schema"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(versions, 1, "one version row");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_apps_share_a_schema_under_their_own_prefixes() {
    let (url, schema) = fresh("prefixes");
    PostgresStore::connect(&url, options(&schema, "shop_"))
        .await
        .unwrap();
    PostgresStore::connect(&url, options(&schema, "crm_"))
        .await
        .unwrap();
    let tables = tables(&url, &schema).await;
    assert!(tables.contains(&"shop_events".to_owned()), "{tables:?}");
    assert!(tables.contains(&"crm_events".to_owned()), "{tables:?}");
    assert_eq!(tables.len(), 34, "{tables:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_of_a_newer_bounda_are_refused_and_left_alone() {
    let (url, schema) = fresh("newer");
    PostgresStore::connect(&url, options(&schema, ""))
        .await
        .unwrap();
    let newer = SCHEMA_VERSION + 1;
    support::session(&url)
        .await
        .execute(
            &format!("UPDATE {schema}.schema SET version = $1"),
            &[&newer],
        )
        .await
        .unwrap();
    let error = PostgresStore::connect(&url, options(&schema, ""))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(&format!(
            "schema version {newer}, written by a newer bounda; this build knows versions up to {SCHEMA_VERSION}"
        )),
        "{error}"
    );
    let version: i32 = support::session(&url)
        .await
        .query_one(&format!("SELECT version FROM {schema}.schema"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(version, newer, "nothing changed");
}

// A version no bounda writes (a damaged table) is refused, not read as "nothing migrated yet".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_version_no_bounda_wrote_is_refused() {
    let (url, schema) = fresh("damaged");
    PostgresStore::connect(&url, options(&schema, ""))
        .await
        .unwrap();
    support::session(&url)
        .await
        .execute(&format!("UPDATE {schema}.schema SET version = -1"), &[])
        .await
        .unwrap();
    let error = PostgresStore::connect(&url, options(&schema, ""))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("version -1, which no bounda wrote"),
        "{error}"
    );
}

#[tokio::test]
async fn a_schema_or_prefix_that_is_not_a_plain_identifier_is_refused_naming_it() {
    let error = PostgresStore::connect("host=/nowhere", options("shop; drop table x", ""))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("the schema `shop; drop table x` is not a plain lowercase identifier"),
        "{error}"
    );
}

// An operator's command opens existing tables only: a mistyped schema is an error, and creates
// nothing.
#[tokio::test]
async fn connecting_to_existing_tables_refuses_where_there_are_none_and_creates_nothing() {
    let (url, schema) = fresh("existing");
    let error = PostgresStore::connect_existing(&url, options(&schema, ""))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("no bounda tables"), "{error}");
    assert!(error.contains(&schema), "names where it looked: {error}");
    assert_eq!(tables(&url, &schema).await, Vec::<String>::new());
    PostgresStore::connect(&url, options(&schema, ""))
        .await
        .unwrap();
    let store = PostgresStore::connect_existing(&url, options(&schema, ""))
        .await
        .unwrap();
    assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);
}
