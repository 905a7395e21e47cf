//! Wake-ups across machines: an append, or an entry scheduled, notifies every process listening
//! on the same tables once it has committed, so a runner on another machine runs at once instead
//! of at its next poll. Polling stays the fallback: a notification lost with a dropped connection
//! costs a poll interval, never work, and the listening connection is made again.
//!
//! The notification is sent after the commit, never inside the transaction that writes:
//! PostgreSQL holds one lock across the whole cluster from a notifying transaction's commit until
//! its flush, so notifying writers could never share a flush. Each process sends at most one at a
//! time ([`Notifier`]); commits that land while one is on its way are told by one more, and it is
//! committed without waiting for the disk, as losing it in a crash costs only a poll.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bounda::store::StoreError;
use futures_util::StreamExt;
use tokio_postgres::AsyncMessage;

use crate::PostgresStore;
use crate::sql::Conn;

/// How long the listener waits before connecting again, at first and at most: it doubles
/// while connecting keeps failing, or sessions keep ending within the longest wait.
const RECONNECT: (Duration, Duration) = (Duration::from_millis(500), Duration::from_secs(30));

/// Notifications of writes to one set of tables, on a connection of their own that is made
/// again whenever it drops.
#[derive(Debug)]
pub struct Wakeups {
    notified: Arc<tokio::sync::Notify>,
    listener: tokio::task::JoinHandle<()>,
}

impl Drop for Wakeups {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

impl Wakeups {
    /// Completes at the next notification after the last call (or at once, if one came since).
    /// Each new listening connection counts as one, since what was written while there was
    /// none was not heard.
    pub async fn next(&self) {
        self.notified.notified().await;
    }
}

impl bounda::store::Listener for Wakeups {
    fn next(&self) -> futures_util::future::BoxFuture<'_, ()> {
        Box::pin(Wakeups::next(self))
    }
}

/// Sends this process's notifications, one at a time: a commit that lands while one is being
/// sent is told by the next, so a burst of commits costs two notifications, not one each.
#[derive(Debug, Default)]
pub(crate) struct Notifier {
    /// Whether one is being sent, and whether another is owed once it is.
    state: Mutex<(bool, bool)>,
}

impl Notifier {
    /// Tells the listeners that something committed on `client`'s server: sent now, or owed by
    /// the sender already under way. A failure is logged; polling covers it.
    pub(crate) async fn notify(&self, client: &Conn, channel: &str) {
        if !self.take_turn() {
            return;
        }
        loop {
            let sent = client
                .batch_execute(&format!(
                    "BEGIN; SET LOCAL synchronous_commit = off; \
                     SELECT pg_notify('{channel}', ''); COMMIT"
                ))
                .await;
            if let Err(error) = sent {
                let error = StoreError::with_source("cannot notify", error).flattened();
                tracing::warn!(
                    error = %error,
                    "cannot wake the other processes: they find the work at their next poll"
                );
                let _ = client.batch_execute("ROLLBACK").await;
            }
            if !self.owed() {
                return;
            }
        }
    }

    /// Whether this caller sends: no one else is; otherwise the sender owes one more.
    fn take_turn(&self) -> bool {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match state.0 {
            true => {
                state.1 = true;
                false
            }
            false => {
                state.0 = true;
                true
            }
        }
    }

    /// Whether the sender owes another (and still holds its turn), or is done.
    fn owed(&self) -> bool {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let owed = std::mem::take(&mut state.1);
        state.0 = owed;
        owed
    }
}

impl PostgresStore {
    /// Listens for appends to these tables and entries scheduled in them, from any process on
    /// any machine. Returns at once; the connection is made (and made again) in the background,
    /// and a failure to make it is logged.
    ///
    /// Behind a pooler in transaction mode it needs the server's own address
    /// (`Options::listen_url`, or `listen_host` and `listen_port` in the address): a pooler
    /// drops a session's `LISTEN` at the end of its transaction.
    pub async fn wakeups(&self) -> Result<Wakeups, StoreError> {
        let Some((config, connector)) = &self.listening else {
            return Err(StoreError::new(
                "the store's address is a pooler in transaction mode, which keeps no session to \
                 listen in: name the server itself in `Options::listen_url`, or its host and port \
                 with `listen_host` and `listen_port` in the address",
            ));
        };
        let notified = Arc::new(tokio::sync::Notify::new());
        let listener = tokio::spawn(listen(
            config.clone(),
            connector.clone(),
            self.names.channel(),
            notified.clone(),
        ));
        Ok(Wakeups { notified, listener })
    }
}

/// Keeps a connection listening on `channel`, waking `notified` at each notification.
async fn listen(
    config: tokio_postgres::Config,
    connector: Option<tokio_postgres_rustls::MakeRustlsConnect>,
    channel: String,
    notified: Arc<tokio::sync::Notify>,
) {
    let mut delay = RECONNECT.0;
    loop {
        let began = tokio::time::Instant::now();
        let once = match connector.clone() {
            Some(connector) => listen_once(&config, connector, &channel, &notified).await,
            None => listen_once(&config, tokio_postgres::NoTls, &channel, &notified).await,
        };
        match once {
            // It listened a while: connect again at once.
            Ok(()) if began.elapsed() >= RECONNECT.1 => delay = RECONNECT.0,
            // Sessions that end soon after they begin (a server or proxy ending them) are made
            // again no faster than failed ones, or the loop would spin.
            Ok(()) => {
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(RECONNECT.1);
            }
            Err(error) => {
                tracing::warn!(
                    error = %error,
                    "cannot listen for other processes' writes: polling only, trying again in {delay:?}"
                );
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(RECONNECT.1);
            }
        }
    }
}

/// One listening connection, until it ends: `Ok` once it listened and then closed (logged),
/// `Err` if it could not listen at all.
async fn listen_once<T>(
    config: &tokio_postgres::Config,
    connector: T,
    channel: &str,
    notified: &tokio::sync::Notify,
) -> Result<(), String>
where
    T: tokio_postgres::tls::MakeTlsConnect<tokio_postgres::Socket>,
    T::Stream: Send + 'static,
{
    // The client lives to the end: dropping it would end the session.
    let (client, mut connection) = config.connect(connector).await.map_err(|e| e.to_string())?;
    // Notifications arrive on the connection, and so does the LISTEN's answer: it is read all
    // along.
    let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
    let subscribe = format!("LISTEN {channel}");
    let listening = client.batch_execute(&subscribe);
    tokio::pin!(listening);
    loop {
        tokio::select! {
            answered = &mut listening => {
                answered.map_err(|e| e.to_string())?;
                break;
            }
            message = messages.next() => match message {
                Some(Ok(AsyncMessage::Notification(_))) => notified.notify_one(),
                Some(Ok(_)) => {}
                Some(Err(error)) => return Err(error.to_string()),
                None => return Err("the connection closed before it listened".to_owned()),
            },
        }
    }
    // What was written before this connection listened was not heard: look once.
    notified.notify_one();
    let ended = loop {
        match messages.next().await {
            Some(Ok(AsyncMessage::Notification(_))) => notified.notify_one(),
            Some(Ok(_)) => {}
            Some(Err(error)) => break error.to_string(),
            None => break "closed".to_owned(),
        }
    };
    tracing::warn!(
        "the connection listening for other processes' writes ended ({ended}): polling only until it is made again"
    );
    Ok(())
}
