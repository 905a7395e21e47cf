//! Pausing and resuming: a process, one of its instances, a policy or a subscriber stopped for a
//! while by an operator, in the store, so every runner on it obeys.

use crate::app::App;
use crate::store::{Pause, PauseTarget, Paused};
use crate::{Error, app};

/// The most characters a pause's reason takes: a line an operator reads on the page, which a
/// link can lengthen.
pub(crate) const REASON_CHARS: usize = 500;

impl App {
    /// Pauses `target` on behalf of operator `by`, saying why if `reason` is given: from the
    /// next pass of every runner on this store, a paused subscriber makes no pass, a paused
    /// process's or policy's events wait in order while the subscriber's other handlers go on,
    /// a paused instance's too, and a paused process's or instance's deadlines and a paused policy's delayed runs are
    /// not run. Once resumed, what waited runs in order; a deadline that came due meanwhile runs
    /// then, late. Answers `false`, changing nothing, when it is paused already. A name this app
    /// does not have, an instance that never started or an empty `by` is refused.
    pub async fn pause(
        &self,
        target: PauseTarget,
        by: &str,
        reason: Option<&str>,
    ) -> Result<bool, Error> {
        let capabilities = self.store().capabilities();
        let pauses = capabilities.pauses()?;
        if by.trim().is_empty() {
            return Err(Error::Configuration {
                message: "a pause needs the operator's name (who paused it)".to_owned(),
            });
        }
        let reason = reason.map(str::trim).filter(|reason| !reason.is_empty());
        if let Some(long) = reason.filter(|reason| reason.chars().count() > REASON_CHARS) {
            return Err(Error::Configuration {
                message: format!(
                    "a pause's reason takes at most {REASON_CHARS} characters, and this one has \
                     {}: say it shortly, and link to the rest",
                    long.chars().count()
                ),
            });
        }
        self.check_target(&target).await?;
        let pause = Pause {
            target,
            since: self.clock().now(),
            by: by.trim().to_owned(),
            reason: reason.map(str::to_owned),
        };
        let paused = pauses.pause(&pause).await?;
        if paused {
            tracing::info!(by = %pause.by, "{} paused", pause.target);
        }
        Ok(paused)
    }

    /// Resumes `target`: what waited runs from the next pass, in order. Answers `false` when it
    /// was not paused; a target that is neither paused nor one this app has (a mistyped name)
    /// is refused. A pause of something the app no longer has is resumed all the same.
    pub async fn resume(&self, target: &PauseTarget) -> Result<bool, Error> {
        let resumed = self.store().capabilities().pauses()?.resume(target).await?;
        if resumed {
            tracing::info!("{target} resumed");
        } else {
            self.check_target(target).await?;
        }
        Ok(resumed)
    }

    /// Every pause on this store, by kind and name: none on a store that keeps no pauses, where
    /// nothing can be paused.
    pub async fn pauses(&self) -> Result<Vec<Pause>, Error> {
        match self.store().capabilities().pauses {
            Some(pauses) => Ok(pauses.pauses().await?),
            None => Ok(Vec::new()),
        }
    }

    /// The pauses, as the runtime's passes and reads ask them what they hold.
    pub(crate) async fn paused(&self) -> Result<Paused, Error> {
        Ok(Paused::new(self.pauses().await?))
    }

    /// Refuses a target this app cannot pause: a name it does not have, an instance that never
    /// started.
    pub(crate) async fn check_target(&self, target: &PauseTarget) -> Result<(), Error> {
        let missing = |kind: &str, name: &str, known: Vec<String>| Error::NotFound {
            what: format!(
                "{kind} `{name}` in this app (its {}: {})",
                match kind {
                    "process" => "processes",
                    "policy" => "policies",
                    "relay" => "relays",
                    "ingress" => "sources of commands",
                    _ => "subscribers",
                },
                match known.is_empty() {
                    true => "none".to_owned(),
                    false => known.join(", "),
                }
            ),
        };
        let processes = || self.processes().map(|p| p.name().to_owned()).collect();
        match target {
            PauseTarget::Process { name } => {
                if !self.processes().any(|p| p.name() == name) {
                    return Err(missing("process", name, processes()));
                }
            }
            PauseTarget::Instance { process, id } => {
                let Some(runner) = self.processes().find(|p| p.name() == process) else {
                    return Err(missing("process", process, processes()));
                };
                let started = match self.load_instance(&**runner, id).await {
                    Ok(instance) => instance.is_some(),
                    // A history that does not read is there: such an instance can be paused.
                    Err(error) => crate::app::StateProblem::of_load(error).is_ok(),
                };
                if !started {
                    return Err(Error::NotFound {
                        what: format!("instance `{id}` of process `{process}`"),
                    });
                }
            }
            PauseTarget::Policy { name } => {
                if !self.policies().any(|p| p.name() == name) {
                    let known = self.policies().map(|p| p.name().to_owned()).collect();
                    return Err(missing("policy", name, known));
                }
            }
            PauseTarget::Ingress { name } => {
                if !self.sources().any(|s| s.name() == *name) {
                    let known = self.sources().map(|s| s.name()).collect();
                    return Err(missing("ingress", name, known));
                }
            }
            PauseTarget::Relay { name } => {
                if !self.relays().any(|r| r.name() == name) {
                    let known = self.relays().map(|r| r.name().to_owned()).collect();
                    return Err(missing("relay", name, known));
                }
            }
            PauseTarget::Subscriber { name } => {
                let known = self.subscriber_names();
                if !known.iter().any(|known| known == name) {
                    return Err(missing("subscriber", name, known));
                }
            }
        }
        Ok(())
    }

    /// The subscribers this app runs: `policies`, `processes` and `relays` when it has any, and
    /// each read model's.
    fn subscriber_names(&self) -> Vec<String> {
        let mut names = Vec::new();
        if self.policies().next().is_some() {
            names.push(app::POLICIES.to_owned());
        }
        if self.processes().next().is_some() {
            names.push(app::PROCESSES.to_owned());
        }
        if self.relays().next().is_some() {
            names.push(app::RELAYS.to_owned());
        }
        names.extend(
            self.read_models()
                .map(|model| model.subscriber().to_owned()),
        );
        names
    }
}
