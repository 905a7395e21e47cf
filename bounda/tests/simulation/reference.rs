//! The reference model as the simulation compares it: told each input, clock move and catch-up,
//! and compared with the app (every account's events with their times, each instance's state,
//! status, parked events and deadlines reached, and the letters).

use bounda::store::{LetterFilter, LetterKind, LetterStatus, Store};
use bounda::testing::simulate::{Model as Compared, Sent};
use bounda::{App, Duration, Instant, ProcessStatus};

use super::domain::Watch;
use super::inputs::{FAILED_AGAIN, NO_LETTER, Outside};
use super::model::{self, Model};

/// The model, as the simulation drives it.
pub struct Reference {
    pub model: Model,
}

impl Reference {
    pub fn new(seed: u64, now: Instant) -> Reference {
        Reference {
            model: Model::new(seed, now.as_millis()),
        }
    }
}

fn show(ms: i64) -> String {
    Instant::from_millis(ms).map_or(ms.to_string(), |at| at.to_string())
}

impl Compared<Outside> for Reference {
    /// Keeps commands away from a deadline of their account about to come due (see the model).
    fn before(&mut self, input: &Outside, _: Instant) -> Option<Duration> {
        let at = self.model.deadline_near(&input.account(), 10_000)?;
        Some(bounda::millis((at - self.model.now + 1) as u64))
    }

    fn sent(&mut self, input: &Outside, sent: &Sent) -> Result<(), String> {
        let account = input.account();
        let now =
            Instant::from_millis(self.model.now).ok_or("the model's clock is out of range")?;
        if let Some(ask) = input.ask(now) {
            let accepted = *sent == Sent::Accepted;
            let expected = self.model.dispatch(&account, &ask);
            if accepted != expected {
                return Err(format!(
                    "{account} {ask:?}: runtime accepted {accepted}, model {expected}"
                ));
            }
            return Ok(());
        }
        let picked = self.model.pick(&account);
        let letter = *sent != Sent::Rejected(NO_LETTER.to_owned());
        let Some(index) = picked.filter(|_| letter) else {
            if picked.is_some() || letter {
                return Err(format!(
                    "{account}'s failed letter: model {picked:?}, runtime has one: {letter}"
                ));
            }
            return Ok(());
        };
        if matches!(input, Outside::DiscardLetter(_)) {
            self.model.discard(index);
            return Ok(());
        }
        let through = *sent != Sent::Rejected(FAILED_AGAIN.to_owned());
        let expected = self.model.retry(index);
        if through != expected {
            return Err(format!(
                "retry of {account}'s letter: runtime went through {through}, model {expected}"
            ));
        }
        Ok(())
    }

    fn advanced(&mut self, by: Duration) {
        self.model.advance(by.as_millis() as i64);
    }

    fn outage(&mut self, by: Duration) {
        self.model.outage(by.as_millis() as i64);
    }

    fn settled(&mut self, now: Instant) -> Result<(), String> {
        self.model.settle();
        let now = now.as_millis();
        if now != self.model.now {
            return Err(format!(
                "the clocks differ: runtime {}, model {}",
                show(now),
                show(self.model.now)
            ));
        }
        Ok(())
    }

    async fn compare(&mut self, app: &App) -> Result<(), String> {
        let agreed = agree(&self.model, app).await;
        with_history(app, &self.model, agreed).await
    }
}

/// A failed check, with the history that shows it.
async fn with_history(app: &App, model: &Model, checked: Result<(), String>) -> Result<(), String> {
    let Err(error) = checked else {
        return Ok(());
    };
    let history = history(app, model).await.unwrap_or_default();
    Err(format!("{error}\n{history}"))
}

/// Every account's events and lifecycle, one line each, with the model's view.
async fn history(app: &App, model: &Model) -> Result<String, String> {
    let store = app.store();
    let mut lines = Vec::new();
    for account in model.accounts.keys() {
        for (kind, stream) in [
            ("Account", account.clone()),
            ("process:Watch", account.clone()),
        ] {
            for e in store
                .read_stream(kind, &stream)
                .await
                .map_err(|e| e.to_string())?
            {
                let mut payload = e.payload.clone();
                if let Some(map) = payload.as_object_mut() {
                    map.remove("state");
                    map.remove("aggregateType");
                    map.remove("aggregateId");
                }
                lines.push(format!(
                    "  {} {kind}:{stream} v{} {} {} {payload}",
                    e.timestamp, e.version, e.id, e.event_type
                ));
            }
        }
        lines.push(format!("  model: {:?}", model.accounts[account].instance));
    }
    lines.push(format!("  model letters: {:?}", model.letters));
    Ok(lines.join("\n"))
}

/// The runtime and the model agree on every account, instance and letter.
async fn agree(reference: &Model, app: &App) -> Result<(), String> {
    let store = app.store();
    for (account, expected) in &reference.accounts {
        let events = store
            .read_stream("Account", account)
            .await
            .map_err(|e| e.to_string())?;
        // Types and times, sorted: events at one moment may be stored in either order.
        let mut types: Vec<(&str, i64)> = events
            .iter()
            .map(|e| (e.event_type.as_str(), e.timestamp.as_millis()))
            .collect();
        let mut model_types: Vec<(&str, i64)> = expected.events.clone();
        types.sort_unstable();
        model_types.sort_unstable();
        if types != model_types {
            return Err(format!(
                "{account}'s events (type, time): runtime {types:?}, model {model_types:?}"
            ));
        }
        let instance = app
            .process_instance::<Watch>(account)
            .await
            .map_err(|e| format!("{account}'s instance does not read: {e}"))?;
        match (&expected.instance, instance) {
            (None, None) => {}
            (Some(model), Some(runtime)) => {
                let status = match runtime.status {
                    ProcessStatus::Started => model::Status::Started,
                    ProcessStatus::Completed => model::Status::Completed,
                    ProcessStatus::Failed => model::Status::Failed,
                    ProcessStatus::TimedOut => model::Status::TimedOut,
                };
                let state = &runtime.state;
                let ours = (
                    status,
                    state.paid,
                    state.links,
                    state.hits,
                    state.chain.moment().map(Instant::as_millis),
                    state.movable.moment().map(Instant::as_millis),
                );
                let theirs = (
                    model.status,
                    model.paid,
                    model.links,
                    model.hits,
                    model.chain,
                    model.movable,
                );
                if ours != theirs {
                    return Err(format!(
                        "{account}'s instance (status, paid, links, hits, chain, movable): runtime {ours:?}, model {theirs:?}"
                    ));
                }
                if !model.given_up && runtime.parked != model.parked.len() {
                    return Err(format!(
                        "{account}'s parked events: runtime {}, model {}",
                        runtime.parked,
                        model.parked.len()
                    ));
                }
                let reached = reached(store, account).await?;
                if reached != model.reached {
                    return Err(format!(
                        "{account}'s deadlines reached: runtime {reached:?}, model {:?}",
                        model.reached
                    ));
                }
            }
            (model, runtime) => {
                return Err(format!(
                    "{account}'s instance: runtime {}, model {}",
                    runtime.is_some(),
                    model.is_some()
                ));
            }
        }
    }
    let letters = app
        .dead_letters()
        .list(&LetterFilter::default())
        .await
        .map_err(|e| e.to_string())?;
    let mut ours: Vec<(bool, String, &str)> = letters
        .iter()
        .map(|l| {
            let status = match l.status {
                LetterStatus::Failed => "failed",
                LetterStatus::Retried => "retried",
                LetterStatus::Discarded => "discarded",
            };
            (
                l.kind == LetterKind::Process,
                l.aggregate_id.clone().unwrap_or_default(),
                status,
            )
        })
        .collect();
    let mut theirs: Vec<(bool, String, &str)> = reference
        .letters
        .iter()
        .map(|l| {
            let status = if l.discarded {
                "discarded"
            } else if l.retried {
                "retried"
            } else {
                "failed"
            };
            (l.process, l.account.clone(), status)
        })
        .collect();
    ours.sort();
    theirs.sort();
    if ours != theirs {
        return Err(format!("letters: runtime {ours:?}, model {theirs:?}"));
    }
    Ok(())
}

/// `(moment, field)` of every deadline an instance reached, from its history.
async fn reached(store: &dyn Store, account: &str) -> Result<Vec<(i64, &'static str)>, String> {
    let stream = store
        .read_stream("process:Watch", account)
        .await
        .map_err(|e| e.to_string())?;
    let mut reached = Vec::new();
    for event in &stream {
        let field = match event.event_type.as_str() {
            "ProcessDeadlineReached" => match event.payload["field"].as_str() {
                Some("chain") => "chain",
                Some("movable") => "movable",
                other => return Err(format!("an unknown deadline reached: {other:?}")),
            },
            "ProcessTimedOut" => "timeout",
            _ => continue,
        };
        let at: Instant = serde_json::from_value(event.payload["at"].clone())
            .map_err(|e| format!("a reached moment does not read: {e}"))?;
        reached.push((at.as_millis(), field));
    }
    Ok(reached)
}
