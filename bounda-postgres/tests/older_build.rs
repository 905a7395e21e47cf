//! Tables an older bounda wrote, opened by this one: migrated, and read as that build meant
//! them. `fixtures/README.md` says which build wrote each and how.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use bounda_postgres::{Options, PostgresStore, SCHEMA_VERSION, testing};

/// The dump `dump` (`pg_dump` of a schema an older build wrote, its name written `{schema}`)
/// restored into a fresh schema, opened by this build; with the server's address and the schema.
async fn restored(dump: &str) -> (PostgresStore, tokio_postgres::Client, String) {
    let (url, schema) = testing::schema("older").unwrap_or_else(|how| panic!("{how}"));
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
        .batch_execute(&dump.replace("{schema}", &schema))
        .await
        .unwrap();
    let options = Options {
        schema: schema.clone(),
        ..Options::default()
    };
    let store = PostgresStore::connect(&url, options).await.unwrap();
    (store, client, schema)
}

// Issue 19: claims written before they kept their end lapse on the reader's lease; claims taken
// afterwards keep theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_of_schema_1_lapse_on_the_readers_lease_and_new_ones_on_their_own() {
    let (store, client, schema) = restored(include_str!("fixtures/claims-v1.sql")).await;
    assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);
    assert_eq!(SCHEMA_VERSION, 2, "migrated from 1");
    bounda::store::contract::claims_of_an_older_build_lapse_on_the_readers_lease(&store).await;
    let ends: Vec<String> = client
        .query(
            &format!(
                "SELECT to_char(lease_until AT TIME ZONE 'UTC', 'HH24:MI:SS.MS') FROM (
                     SELECT lease_until FROM {schema}.inbox UNION ALL
                     SELECT lease_until FROM {schema}.scheduled_commands UNION ALL
                     SELECT lease_until FROM {schema}.dead_letters) AS claims"
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(
        ends, ["00:01:04.002"; 3],
        "each claim taken last holds its end: taken at 34.002 s with 30 s"
    );
}
