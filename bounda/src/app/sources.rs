//! The sources of commands from other services an app consumes: run beside the workers while
//! the app runs, and asked what waits there for `lag`.

use std::sync::Arc;

use futures_util::FutureExt;
use tokio::sync::watch;

use crate::app::App;
use crate::ingress::{Source, SourceLag};

/// How long `lag` waits for a source to say what waits there.
const ASKED_FOR: std::time::Duration = std::time::Duration::from_secs(2);

impl App {
    /// The app's sources of commands.
    pub(crate) fn sources(&self) -> impl Iterator<Item = &Arc<dyn Source>> {
        self.inner.sources.iter()
    }

    /// Starts every source on a task of its own; they stop when the answer is dropped or told
    /// to, and are awaited by [`Running::stop`].
    pub(crate) fn start_sources(&self) -> Running {
        let (tell, stopped) = watch::channel(false);
        let tasks = self
            .sources()
            .map(|source| {
                let (source, app) = (Arc::clone(source), self.clone());
                let mut stopped = stopped.clone();
                tokio::spawn(async move {
                    let stop = async move {
                        // A dropped sender stops the source too.
                        let _ = stopped.wait_for(|stop| *stop).await;
                    }
                    .boxed();
                    source.run(&app, stop).await;
                })
            })
            .collect();
        Running { tell, tasks }
    }

    /// Waits for a permit of source `source`'s limit (`limits.ingress`), if it has one: what a
    /// source calls before it takes each message, so a catch-up after an outage reaches the
    /// app's handlers no faster than the limit says, the rest waiting at the broker. Counted in
    /// the store across every runner. An error when the store cannot count: the source leaves
    /// the message for later.
    pub async fn ingress_permit(&self, source: &str) -> Result<(), crate::Error> {
        let Some(limit) = self
            .config()
            .limits
            .get(crate::store::LimitKind::Ingress, source)
            .copied()
        else {
            return Ok(());
        };
        let key = crate::store::LimitKey {
            kind: crate::store::LimitKind::Ingress,
            name: source.to_owned(),
        };
        loop {
            let now = self.clock().now();
            let ends = limit.rate.window_end(now);
            let granted = self
                .limit_store()?
                .take_permits(&key, ends, limit.rate.per, limit.rate.count, 1)
                .await?;
            if granted > 0 {
                return Ok(());
            }
            tokio::time::sleep(ends.saturating_since(now).into()).await;
        }
    }

    /// What waits at each source, as `lag` shows it: asked of each for two seconds at most.
    pub async fn source_lags(&self) -> Vec<SourceLag> {
        let mut lags = Vec::new();
        for source in self.sources() {
            let behind = match tokio::time::timeout(ASKED_FOR, source.behind()).await {
                Ok(Ok(behind)) => Ok(behind),
                Ok(Err(error)) => Err(format!("{error:#}")),
                Err(_) => Err(format!("no answer within {ASKED_FOR:?}")),
            };
            lags.push(SourceLag {
                source: source.name(),
                behind,
            });
        }
        lags
    }
}

/// The sources running beside the workers.
pub(crate) struct Running {
    tell: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Running {
    /// Tells every source to stop, and waits until each has. A message one took and had not
    /// acknowledged yet is delivered again by its broker, and answered by its key.
    pub(crate) async fn stop(self) {
        let _ = self.tell.send(true);
        for task in self.tasks {
            if let Err(error) = task.await {
                tracing::error!("a source of commands ended with a panic: {error}");
            }
        }
    }
}
