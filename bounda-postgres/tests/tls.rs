//! TLS to the server, configured from the address as libpq configures it (issue 39): a
//! throwaway server offering TLS with a certificate for `localhost`, signed by an authority the
//! test made; and the shared server, which offers none.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use bounda::store::Store;
use bounda_postgres::{Options, PostgresStore, testing};

/// The TLS server's port and authority, or `None` (skipped) on a server of one's own.
fn tls_server() -> Option<(u16, std::path::PathBuf)> {
    let server = testing::tls_server().unwrap_or_else(|how| panic!("{how}"));
    if server.is_none() {
        eprintln!("skipped: a server of one's own (BOUNDA_POSTGRES_URL) is not given TLS");
    }
    server
}

fn options(test: &str) -> Options {
    let (_, schema) = testing::schema(test).unwrap();
    Options {
        schema,
        ..Options::default()
    }
}

async fn connect(url: &str, test: &str) -> Result<PostgresStore, String> {
    PostgresStore::connect(url, options(test))
        .await
        .map_err(|error| error.to_string())
}

#[tokio::test]
async fn verify_full_connects_to_the_name_the_certificate_is_for_and_the_store_works() {
    let Some((port, ca)) = tls_server() else {
        return;
    };
    let url = format!(
        "postgres://bounda@localhost:{port}/postgres?sslmode=verify-full&sslrootcert={}",
        ca.display()
    );
    let store = connect(&url, "verify_full").await.unwrap();
    // `verify-full` negotiates TLS or fails: the store reads and writes over it.
    assert_eq!(store.head().await.unwrap(), 0);
}

#[tokio::test]
async fn verify_full_refuses_a_certificate_made_for_another_name() {
    let Some((port, ca)) = tls_server() else {
        return;
    };
    let url = format!(
        "host=127.0.0.1 port={port} user=bounda dbname=postgres sslmode=verify-full sslrootcert={}",
        ca.display()
    );
    let refused = connect(&url, "another_name").await.unwrap_err();
    assert!(
        refused.contains("the server's certificate is not for the host connected to"),
        "{refused}"
    );
    // verify-ca checks the authority, not the name: the same address connects.
    let url = url.replace("verify-full", "verify-ca");
    connect(&url, "verify_ca").await.unwrap();
}

#[tokio::test]
async fn verify_full_refuses_an_authority_it_was_not_told_to_trust() {
    let Some((port, _)) = tls_server() else {
        return;
    };
    // The system's roots do not hold the test's authority.
    let url = format!("postgres://bounda@localhost:{port}/postgres?sslmode=verify-full");
    let refused = connect(&url, "unknown_authority").await.unwrap_err();
    assert!(
        refused.contains("not signed by an authority this client trusts")
            || refused.contains("this system has no root certificates"),
        "{refused}"
    );
    // `require` encrypts without checking who answers, as libpq's does.
    let url = url.replace("verify-full", "require");
    connect(&url, "require").await.unwrap();
}

#[tokio::test]
async fn require_refuses_a_server_without_tls_and_disable_connects_to_it() {
    let Ok(address) = testing::address() else {
        eprintln!("skipped: the shared server has no TCP address");
        return;
    };
    let url = format!(
        "host=127.0.0.1 port={} user=bounda dbname=postgres sslmode=require",
        address.port()
    );
    let refused = connect(&url, "no_tls").await.unwrap_err();
    assert!(
        refused.contains("the server does not offer TLS, and `sslmode=require` asks for it"),
        "{refused}"
    );
    let url = url.replace("sslmode=require", "sslmode=disable");
    connect(&url, "disable").await.unwrap();
    // `prefer`, the default, falls back to none.
    let url = url.replace(" sslmode=disable", "");
    connect(&url, "prefer").await.unwrap();
}

#[tokio::test]
async fn a_mode_that_is_not_one_is_refused_naming_it() {
    let refused = connect(
        "postgres://bounda@localhost/postgres?sslmode=verify_full",
        "bad_mode",
    )
    .await
    .unwrap_err();
    assert!(refused.contains("`sslmode=verify_full`"), "{refused}");
    let refused = connect(
        "postgres://bounda@localhost/postgres?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
        "bad_root",
    )
    .await
    .unwrap_err();
    assert!(
        refused.contains("cannot read `sslrootcert=/nonexistent/ca.pem`"),
        "{refused}"
    );
}
