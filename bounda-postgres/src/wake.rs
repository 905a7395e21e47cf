//! Wake-ups across machines: an append, or an entry scheduled earlier than any pending, notifies
//! at its commit every process listening on the same tables, so a runner on another machine
//! runs at once instead of at its next poll.
//! Polling stays the fallback: a notification lost with a dropped connection costs a poll
//! interval, never an event.

use std::sync::Arc;

use bounda::store::StoreError;
use futures_util::StreamExt;
use tokio_postgres::AsyncMessage;

use crate::PostgresStore;

/// Notifications of appends to one set of tables, on a connection of their own.
#[derive(Debug)]
pub struct Wakeups {
    notified: Arc<tokio::sync::Notify>,
    listener: tokio::task::JoinHandle<()>,
    /// The listening session: dropping it ends the listening.
    _client: tokio_postgres::Client,
}

impl Drop for Wakeups {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

impl Wakeups {
    /// Completes at the next append's commit after the last call (or at once, if one came
    /// since). If the listening connection drops, it never completes again: race it against a
    /// poll timer, as a runner does.
    pub async fn next(&self) {
        self.notified.notified().await;
    }
}

impl bounda::store::Listener for Wakeups {
    fn next(&self) -> futures_util::future::BoxFuture<'_, ()> {
        Box::pin(Wakeups::next(self))
    }
}

impl PostgresStore {
    /// Listens for appends to these tables, and entries scheduled earlier than any pending, from
    /// any process on any machine.
    pub async fn wakeups(&self) -> Result<Wakeups, StoreError> {
        let (client, mut connection) = self
            .config
            .connect(tokio_postgres::NoTls)
            .await
            .map_err(|e| StoreError::with_source("cannot connect to listen for appends", e))?;
        let notified = Arc::new(tokio::sync::Notify::new());
        // The connection is read by a task of its own: notifications arrive on it.
        let listener = {
            let notified = notified.clone();
            tokio::spawn(async move {
                let mut messages =
                    futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
                loop {
                    match messages.next().await {
                        Some(Ok(AsyncMessage::Notification(_))) => notified.notify_one(),
                        Some(Ok(_)) => {}
                        Some(Err(error)) => {
                            tracing::warn!(
                                error = %error,
                                "the connection listening for other processes' writes failed: polling only"
                            );
                            return;
                        }
                        None => {
                            tracing::warn!(
                                "the connection listening for other processes' writes closed: polling only"
                            );
                            return;
                        }
                    }
                }
            })
        };
        client
            .batch_execute(&format!("LISTEN {}", self.names.channel()))
            .await
            .map_err(|e| StoreError::with_source("cannot listen for appends", e))?;
        Ok(Wakeups {
            notified,
            listener,
            _client: client,
        })
    }
}
