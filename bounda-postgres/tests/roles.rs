//! Many services on one server (issue 39): two services, each with its own schema and a role
//! that may only read and write its tables, migrated by a role apart. The runner's role works
//! on its own tables with no `CREATE`; pointed at the other service's schema it is refused,
//! saying why.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use bounda::store::Store;
use bounda_postgres::{Options, PostgresStore, testing};

mod support;

/// The grants a runner needs on `schema`'s tables, given to a new login role: its name.
async fn runner_role(url: &str, schema: &str) -> String {
    let role = format!("{schema}_runner");
    support::session(url)
        .await
        .batch_execute(&format!(
            "CREATE ROLE \"{role}\" LOGIN;
             GRANT USAGE ON SCHEMA \"{schema}\" TO \"{role}\";
             GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA \"{schema}\" TO \"{role}\";
             GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA \"{schema}\" TO \"{role}\";"
        ))
        .await
        .unwrap();
    role
}

fn options(schema: &str) -> Options {
    Options {
        schema: schema.to_owned(),
        ..Options::default()
    }
}

/// `url` (the tests' `key=value` address) connecting as `role`.
fn as_role(url: &str, role: &str) -> String {
    format!("{url} user={role}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_whose_role_only_reads_and_writes_its_tables_works_and_no_other_schema() {
    if std::env::var("BOUNDA_POSTGRES_URL").is_ok() {
        eprintln!("skipped: a server of one's own may not let the tests create roles");
        return;
    }
    let (url, shop) = testing::schema("roles_shop").unwrap();
    let (_, crm) = testing::schema("roles_crm").unwrap();
    // The migrating role (the tests' superuser) creates both services' tables.
    PostgresStore::connect(&url, options(&shop)).await.unwrap();
    PostgresStore::connect(&url, options(&crm)).await.unwrap();
    let shop_runner = runner_role(&url, &shop).await;
    runner_role(&url, &crm).await;

    // The shop's runner works on the shop's tables: appends, schedules, claims and settles.
    let store = PostgresStore::connect(&as_role(&url, &shop_runner), options(&shop))
        .await
        .unwrap();
    assert_eq!(store.migrated_from(), None, "nothing to create");
    let stream = bounda::store::Append {
        aggregate_type: "Ball".into(),
        aggregate_id: "b-1".into(),
        expected_version: 0,
        events: vec![support::event(0, 0)],
    };
    support::append(&store, &[stream]).await.unwrap();
    assert_eq!(store.head().await.unwrap(), 1);
    let due = bounda::Instant::from_millis(0).unwrap();
    support::schedule(&store, &support::entry(1, due)).await;
    let claimed = store
        .claim_due("runner-1", due, bounda::seconds(30), 10)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert!(support::complete(&store, &claimed[0].dedupe_key, "runner-1").await);

    // Pointed at the other service's schema, it is refused, naming the tables and the fix.
    let refused = PostgresStore::connect(&as_role(&url, &shop_runner), options(&crm))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains(&format!(
            "the role connecting may not use the tables `\"{crm}\".*`"
        )),
        "{refused}"
    );
    assert!(
        refused.contains("point it at its own service's schema"),
        "{refused}"
    );
}
