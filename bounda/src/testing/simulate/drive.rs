//! One schedule, step by step: the runners work, the model follows, and the invariants are
//! checked whenever the app is at rest.

use super::runners::Runners;
use super::{Input, Invariant, Model, Report, Simulation, Step, checks};
use crate::app::App;
use crate::clock::Clock;
use crate::store::{InstanceQuery, InstanceStatus, LetterFilter, LetterStatus, PauseTarget};
use crate::{Duration, millis};

/// A schedule in progress.
pub(crate) struct Run<'s, I: Input, M: Model<I>> {
    simulation: &'s Simulation<I, M>,
    runners: Runners,
    model: M,
    /// Whether work may be pending that no runner has run (after an outage).
    dirty: bool,
    /// What an operator paused, with how many more steps the pause lasts.
    paused: Vec<(PauseTarget, u8)>,
    report: Report,
}

impl<'s, I: Input, M: Model<I>> Run<'s, I, M> {
    pub(crate) fn new(simulation: &'s Simulation<I, M>, runners: Runners, model: M) -> Self {
        Run {
            simulation,
            runners,
            model,
            dirty: false,
            paused: Vec::new(),
            report: Report {
                schedules: 1,
                ..Report::default()
            },
        }
    }

    fn app(&self) -> App {
        self.runners.app().clone()
    }

    /// Every runner's work done, and the model told.
    async fn catch_up(&mut self) -> Result<(), String> {
        self.runners.catch_up().await?;
        self.dirty = false;
        self.model.settled(self.runners.clock.now())
    }

    /// Moves the clock `by` with a runner running, and tells the model.
    async fn advance(&mut self, by: Duration) -> Result<(), String> {
        self.runners.advance(by).await?;
        self.model.advanced(by);
        self.model.settled(self.runners.clock.now())
    }

    pub(crate) async fn step(&mut self, step: &Step<I>) -> Result<(), String> {
        self.report.steps += 1;
        self.resume_when_over(false).await?;
        match step {
            Step::Send(input) => {
                self.catch_up().await?;
                if let Some(by) = self.model.before(input, self.runners.clock.now()) {
                    self.advance(by).await?;
                }
                let sent = input.send(&self.app()).await?;
                self.model.sent(input, &sent)?;
                self.catch_up().await
            }
            Step::Advance(by) => {
                self.catch_up().await?;
                self.advance(millis(*by)).await
            }
            Step::Outage(by) => {
                self.runners.clock.advance(millis(*by));
                self.model.outage(millis(*by));
                self.dirty = true;
                Ok(())
            }
            Step::Turn(n) => {
                self.runners.turn(usize::from(*n));
                self.catch_up().await
            }
            Step::Retry(n) | Step::Discard(n) => {
                self.catch_up().await?;
                self.settle_letter(usize::from(*n), matches!(step, Step::Discard(_)))
                    .await?;
                self.catch_up().await
            }
            Step::Restart(count) => {
                self.report.restarts += 1;
                self.runners
                    .start(usize::from(*count), &*self.simulation.build)
                    .await
            }
            Step::Pause(n, steps) => {
                self.catch_up().await?;
                self.pause(usize::from(*n), *steps).await
            }
        }
    }

    /// An operator pauses the `n`th process, policy or running instance (of the first few) for
    /// `steps` steps; one already paused stays paused for as long as its pause says.
    async fn pause(&mut self, n: usize, steps: u8) -> Result<(), String> {
        let app = self.app();
        let processes = app.processes().map(|p| PauseTarget::Process {
            name: p.name().to_owned(),
        });
        let policies = app.policies().map(|p| PauseTarget::Policy {
            name: p.name().to_owned(),
        });
        let running = InstanceQuery {
            status: Some(InstanceStatus::Running),
            limit: 2,
            ..InstanceQuery::default()
        };
        let instances = app
            .instances(&running)
            .await
            .map_err(|e| format!("the instances do not read: {e}"))?
            .rows
            .into_iter()
            .map(|row| PauseTarget::Instance {
                process: row.process,
                id: row.instance_id,
            });
        let targets: Vec<PauseTarget> = processes.chain(policies).chain(instances).collect();
        let Some(target) = targets.get(n % targets.len().max(1)).cloned() else {
            return Ok(());
        };
        if self.paused.iter().any(|(paused, _)| *paused == target) {
            return Ok(());
        }
        self.report.pauses += 1;
        app.pause(target.clone(), "simulation", None)
            .await
            .map_err(|e| format!("pausing {target} failed: {e}"))?;
        self.paused.push((target, steps));
        Ok(())
    }

    /// Counts a step off each pause, and resumes those that are over, or all of them at the
    /// `end`, letting the runners catch up then.
    async fn resume_when_over(&mut self, end: bool) -> Result<(), String> {
        let mut resumed = false;
        let mut still = Vec::new();
        for (target, steps) in std::mem::take(&mut self.paused) {
            let left = steps.saturating_sub(1);
            if left > 0 && !end {
                still.push((target, left));
                continue;
            }
            self.app()
                .resume(&target)
                .await
                .map_err(|e| format!("resuming {target} failed: {e}"))?;
            resumed = true;
        }
        self.paused = still;
        match resumed {
            true => self.catch_up().await,
            false => Ok(()),
        }
    }

    /// An operator retries or discards the `n`th open letter, oldest first. A retry that fails
    /// again is an answer, not a finding; a discard that fails is one (without store faults).
    async fn settle_letter(&mut self, n: usize, discard: bool) -> Result<(), String> {
        let app = self.app();
        let filter = LetterFilter {
            status: Some(LetterStatus::Failed),
            ..LetterFilter::default()
        };
        let mut letters = app
            .dead_letters()
            .list(&filter)
            .await
            .map_err(|e| format!("the letters do not read: {e}"))?;
        if letters.is_empty() {
            return Ok(());
        }
        letters.sort_by(|a, b| (a.first_failed_at, &a.id).cmp(&(b.first_failed_at, &b.id)));
        let id = letters[n % letters.len()].id.clone();
        if discard {
            let discarded = app.dead_letters().discard(&id).await;
            if let Err(error) = discarded
                && !self.runners.faulty()
            {
                return Err(format!("discarding letter {id} failed: {error}"));
            }
        } else {
            let _ = app.dead_letters().retry(&id).await;
        }
        Ok(())
    }

    /// The invariants, the user's and the model's comparison, unless work is pending.
    pub(crate) async fn check(&mut self) -> Result<(), String> {
        if self.dirty || !self.paused.is_empty() {
            self.report.skipped += 1;
            return Ok(());
        }
        self.report.checks += 1;
        let app = self.app();
        checks::framework(&app, self.simulation.store_faults == 0).await?;
        self.runners.broker.holds(&app).await?;
        if let Some(clash) = self.runners.effects.clash() {
            return Err(clash);
        }
        Invariant::hold(&self.simulation.invariants, &app).await?;
        self.model.compare(&app).await
    }

    /// The end: the store's faults stop, what they left is retried, the clock moves past the
    /// settling span, and then everything is checked, the end's invariants too: nothing may be
    /// missing. Port calls keep their fates: each call's are finite, so a retried call goes
    /// through, and one that fails for good is a letter.
    pub(crate) async fn finish(mut self) -> Result<Report, String> {
        self.runners.stop_faults();
        self.resume_when_over(true).await?;
        self.catch_up().await?;
        if self.simulation.settle > Duration::ZERO {
            self.advance(self.simulation.settle).await?;
        }
        self.check().await?;
        let app = self.app();
        Invariant::hold(&self.simulation.at_end, &app).await?;
        let lag = app.lag().await.map_err(|e| format!("lag: {e}"))?;
        if lag.waiting_deadlines != 0 {
            return Err(format!(
                "{} due deadlines still wait behind unhandled events",
                lag.waiting_deadlines
            ));
        }
        self.report.letters = app
            .dead_letters()
            .list(&LetterFilter::default())
            .await
            .map_err(|e| format!("the letters do not read: {e}"))?
            .len();
        self.runners.database.check().await?;
        self.runners.collect_faults();
        self.report.store_faults = self.runners.injected;
        self.report.port_faults = self.runners.port_faults.played();
        self.report.effects = self.runners.effects.len();
        self.report.repeats = self.runners.effects.repeats();
        self.report.broker = self.runners.broker.played();
        Ok(self.report)
    }
}
