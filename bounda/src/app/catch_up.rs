//! Reading your own writes: after a command, a wait (with a time limit) until the read models
//! its events touch have projected them, so the page that follows shows them.

use std::sync::Arc;

use crate::Error;
use crate::app::App;
use crate::app::Decided;
use crate::app::read_models::ReadModelRunner;

/// What a wait for read models found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CaughtUp {
    /// The read models that reached the position waited for.
    pub caught_up: Vec<String>,
    /// Those still behind when the wait ended: past its time limit, or held by a failing
    /// projection, which is not waited for.
    pub behind: Vec<String>,
}

impl CaughtUp {
    /// Whether every read model waited for is there.
    pub fn is_complete(&self) -> bool {
        self.behind.is_empty()
    }
}

impl App {
    /// Waits until the read models that project one of `through`'s events have reached its
    /// position, so a query that follows sees the command. The others are not waited for; a
    /// command that decided nothing waits for nothing.
    ///
    /// A read model behind is projected here, when no other process is projecting it; when
    /// one is, its checkpoint is read again every poll interval. The wait is bounded by
    /// `dispatcher.catchUp.timeout`: past it, it answers with the read models still
    /// [`behind`](CaughtUp::behind) and logs a warning naming them. A read model held by a
    /// failing projection is not waited for.
    pub async fn catch_up(&self, through: &Decided) -> Result<CaughtUp, Error> {
        let Some(position) = through.position else {
            return Ok(CaughtUp::default());
        };
        let touched: Vec<Arc<dyn ReadModelRunner>> = self
            .read_models()
            .filter(|model| {
                model.events().iter().any(|key| {
                    key.aggregate == through.aggregate_type
                        && through.event_types.contains(&key.event)
                })
            })
            .cloned()
            .collect();
        self.wait_for(touched, position).await
    }

    /// Waits until every read model has projected every event stored now, as
    /// [`catch_up`](App::catch_up) does for one command.
    pub async fn catch_up_all(&self) -> Result<CaughtUp, Error> {
        let head = self.store().head().await?;
        let all = self.read_models().cloned().collect();
        self.wait_for(all, head).await
    }

    async fn wait_for(
        &self,
        mut waiting: Vec<Arc<dyn ReadModelRunner>>,
        position: u64,
    ) -> Result<CaughtUp, Error> {
        let limit = self.config().dispatcher.catch_up.timeout;
        let poll = self.config().dispatcher.poll_interval;
        let until = std::time::Instant::now() + std::time::Duration::from(limit);
        let mut answer = CaughtUp::default();
        // A read model an operator paused is behind until resumed: not waited for.
        let paused = self.paused().await?;
        loop {
            let mut still = Vec::new();
            let mut moved = false;
            for model in waiting {
                if paused.subscriber(model.subscriber()).is_some() {
                    answer.behind.push(model.name().to_owned());
                    continue;
                }
                let at = self
                    .store()
                    .checkpoint(model.subscriber())
                    .await?
                    .unwrap_or(0);
                if at >= position {
                    answer.caught_up.push(model.name().to_owned());
                    continue;
                }
                if !self.may_run(model.subscriber(), self.clock().now()) {
                    answer.behind.push(model.name().to_owned());
                    continue;
                }
                let pass = self.read_model_pass(model.as_ref()).await;
                let failed = pass.is_err();
                moved |= self.subscriber_result(model.subscriber(), pass);
                match failed {
                    true => answer.behind.push(model.name().to_owned()),
                    false => still.push(model),
                }
            }
            if still.is_empty() {
                break;
            }
            let now = std::time::Instant::now();
            if now >= until {
                let names: Vec<String> = still.iter().map(|m| m.name().to_owned()).collect();
                tracing::warn!(
                    read_models = ?names,
                    position,
                    "read models did not catch up within {limit}: {}; what they show is from before this command",
                    names.join(", ")
                );
                answer.behind.extend(names);
                break;
            }
            if !moved {
                // Another process holds them: read their checkpoints again a poll later.
                tokio::time::sleep(std::time::Duration::from(poll).min(until - now)).await;
            }
            waiting = still;
        }
        Ok(answer)
    }
}
