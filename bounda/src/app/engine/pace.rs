//! Pacing: the runs a batch claimed of a process, a policy or a scheduled command with a limit
//! (`runtime.limits`) take that limit's permits in the store before they run; those beyond them
//! are given back unrun, to run in a later window.

use std::collections::BTreeMap;

use crate::app::engine::{Report, Run};
use crate::app::{App, POLICIES, PROCESSES, RELAYS};
use crate::config::Limit;
use crate::store::{LimitKey, LimitKind, LimitWindow};
use crate::{Error, Instant};

impl App {
    /// The windows of the limits of `kind` (`process` or `policy`) used up at `now` whose
    /// handlers' events a subscriber's pass holds until each window ends. Asks the store only
    /// when a limit of that kind is set.
    pub(crate) async fn used_up_limits(
        &self,
        kind: &str,
        now: Instant,
    ) -> Result<Vec<LimitWindow>, Error> {
        let Some(kind) = LimitKind::of_handler(kind) else {
            return Ok(Vec::new());
        };
        if !self.config().limits.has(kind) {
            return Ok(Vec::new());
        }
        let windows = self.limit_store()?.limit_windows(now).await?;
        Ok(self.holding_events(kind, &windows).cloned().collect())
    }

    /// Those of `windows` that hold the events of a handler of `kind`: used up, and not a
    /// delayed policy's (whose events only schedule the runs its limit paces).
    fn holding_events<'a>(
        &'a self,
        kind: LimitKind,
        windows: &'a [LimitWindow],
    ) -> impl Iterator<Item = &'a LimitWindow> {
        windows.iter().filter(move |window| {
            let delayed = || {
                self.policies()
                    .any(|policy| policy.name() == window.key.name && policy.delay().is_some())
            };
            window.key.kind == kind && window.used_up() && !(kind == LimitKind::Policy && delayed())
        })
    }

    /// When the first window ends of a used-up limit that holds work back: due scheduler
    /// entries, or events of its process or policy left to take. What it holds runs then.
    pub(crate) async fn limit_held_until(&self, now: Instant) -> Result<Option<Instant>, Error> {
        let limited = self.limited_at(now).await?;
        let mut until = limited
            .iter()
            .filter(|limited| limited.waiting > 0)
            .map(|limited| limited.window.ends)
            .min();
        let windows: Vec<LimitWindow> = limited.into_iter().map(|l| l.window).collect();
        let store = self.store();
        for (kind, subscriber) in [
            (LimitKind::Process, PROCESSES),
            (LimitKind::Policy, POLICIES),
            (LimitKind::Relay, RELAYS),
        ] {
            let mut holding = self.holding_events(kind, &windows).peekable();
            if holding.peek().is_none() {
                continue;
            }
            let behind = match store.cursor(subscriber).await? {
                Some(cursor) => cursor.handled_to() < store.head().await?,
                None => false,
            };
            if behind {
                until = until.into_iter().chain(holding.map(|w| w.ends)).min();
            }
        }
        Ok(until)
    }

    /// Holds back the runs of `runs` beyond their limits' permits in the window holding now,
    /// taken in the runs' order, so a key's earliest runs go first and each instance's keep
    /// their order. An operator's retry of a letter is not held. When the store cannot count
    /// permits, every limited run is held and the store's error reported.
    pub(crate) async fn pace(&self, runs: &mut [Run], report: &mut Report) {
        let limits = &self.config().limits;
        if limits.is_empty() {
            return;
        }
        let mut wanted: BTreeMap<LimitKey, (&Limit, Vec<usize>)> = BTreeMap::new();
        for (index, run) in runs.iter().enumerate() {
            let paced = run
                .work
                .paced_as()
                .filter(|_| run.claim.retries())
                .and_then(|(kind, name)| {
                    let kind = LimitKind::of_handler(kind)?;
                    limits
                        .get(kind, &name)
                        .map(|limit| (LimitKey { kind, name }, limit))
                });
            if let Some((key, limit)) = paced {
                wanted
                    .entry(key)
                    .or_insert((limit, Vec::new()))
                    .1
                    .push(index);
            }
        }
        let now = self.clock().now();
        for (key, (limit, indexes)) in wanted {
            let ends = limit.rate.window_end(now);
            let count = u32::try_from(indexes.len()).unwrap_or(u32::MAX);
            let taken = match self.limit_store() {
                Ok(limits) => {
                    limits
                        .take_permits(&key, ends, limit.rate.per, limit.rate.count, count)
                        .await
                }
                Err(refused) => Err(refused),
            };
            let granted = match taken {
                Ok(granted) => usize::try_from(granted).unwrap_or(usize::MAX),
                Err(error) => {
                    let unavailable = error.is_unavailable();
                    let error = crate::store::StoreError::with_source(
                        format!("cannot take the permits of the limit of {key}"),
                        error,
                    )
                    .unavailable_if(unavailable);
                    report.store_error.get_or_insert(error.into());
                    0
                }
            };
            for (taken, &index) in indexes.iter().enumerate() {
                match taken < granted {
                    true => runs[index].permit = Some((key.clone(), ends)),
                    false => runs[index].held_back = true,
                }
            }
        }
    }

    /// Gives back the permits of the runs that took one and did not run, a limit's window at a
    /// time. A store that fails it is logged: the window allows that many runs fewer.
    pub(crate) async fn return_permits(&self, returned: Vec<(LimitKey, Instant)>) {
        let mut counts: BTreeMap<(LimitKey, Instant), u32> = BTreeMap::new();
        for permit in returned {
            *counts.entry(permit).or_default() += 1;
        }
        for ((key, ends), count) in counts {
            let returned = match self.limit_store() {
                Ok(limits) => limits.return_permits(&key, ends, count).await,
                Err(refused) => Err(refused),
            };
            if let Err(error) = returned {
                tracing::warn!(
                    limit = %key,
                    count,
                    "cannot give back the permits of runs that did not run; this window allows \
                     that many fewer: {}",
                    crate::error::chain(&error)
                );
            }
        }
    }
}
