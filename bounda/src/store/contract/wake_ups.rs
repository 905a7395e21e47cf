//! Wake-ups' contract: a listener hears a commit that may be work for another process.

use std::time::Duration;

use super::{append, appending, kept};
use crate::store::Store;

/// Long enough for a listening connection to be made on a loaded machine.
const HEARD_WITHIN: Duration = Duration::from_secs(10);

/// A listener, once it listens, hears each later commit of events: the first wake-up comes
/// once it listens (a commit heard, or its connection told as one), and every commit after
/// it is heard.
pub async fn a_listener_hears_a_commit(store: &dyn Store) {
    let listener = kept(store.capabilities().wake_ups())
        .listen()
        .await
        .unwrap();
    let mut version = 0;
    let mut commit = async || {
        store
            .commit(&appending(vec![append(
                "Order",
                "o-1",
                version,
                &[&format!("e-{version}")],
            )]))
            .await
            .unwrap();
        version += 1;
    };
    // Until it listens, a commit may go unheard: commit again until one is heard.
    let deadline = tokio::time::Instant::now() + HEARD_WITHIN;
    loop {
        commit().await;
        match tokio::time::timeout(Duration::from_millis(200), listener.next()).await {
            Ok(()) => break,
            Err(_) => assert!(
                tokio::time::Instant::now() < deadline,
                "the listener heard nothing within {HEARD_WITHIN:?} of commits"
            ),
        }
    }
    for _ in 0..3 {
        commit().await;
        tokio::time::timeout(HEARD_WITHIN, listener.next())
            .await
            .unwrap_or_else(|_| panic!("a commit went unheard by a listener for {HEARD_WITHIN:?}"));
    }
}
