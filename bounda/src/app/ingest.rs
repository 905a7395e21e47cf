//! Commands from other services, decided once per idempotency key: the key and the answer are
//! stored with the command's events, and a key that comes again is given the first answer.

use crate::Error;
use crate::app::App;
use crate::app::letters::LetterRetry;
use crate::ids::derived_id;
use crate::ingress::{Answer, Arrival, Ingested, Refusal};
use crate::store::{
    CommitError, IngressRecord, LetterHold, LetterSettle, LetterStatus, Metadata, WriteSet,
};

impl App {
    /// Decides `arrival`, a command another service sent, once for its key: a key decided under
    /// before is given its first answer (`replayed`), nothing decided again; a new one is
    /// decided as [`dispatch`](Self::dispatch) decides, and its answer (the events, or the
    /// rejection) stored with the events in one transaction. Refused, storing nothing, when
    /// the app does not take its name, its payload does not parse, or its key names another
    /// request.
    pub async fn ingest(&self, arrival: &Arrival) -> Result<Ingested, Refusal> {
        self.ingest_settling(arrival, None).await
    }

    /// [`ingest`](Self::ingest), settling the letter `held` retries as `retried` in the same
    /// commit as the decision, or alone when the key was decided under before.
    pub(crate) async fn ingest_settling(
        &self,
        arrival: &Arrival,
        held: Option<&LetterRetry>,
    ) -> Result<Ingested, Refusal> {
        let settling = || match held {
            Some(held) => WriteSet {
                settle_letter: Some(LetterSettle {
                    id: held.id.clone(),
                    status: LetterStatus::Retried,
                }),
                require_letter: Some(LetterHold {
                    id: held.id.clone(),
                    claim_id: held.claim_id.clone(),
                }),
                ..WriteSet::default()
            },
            None => WriteSet::default(),
        };
        let replay = async |kept: IngressRecord, fingerprint: &str| -> Result<Ingested, Refusal> {
            let answer = replayed(kept, fingerprint)?;
            let writes = settling();
            if !writes.is_empty() {
                self.commit(&writes)
                    .await
                    .map_err(|error| crate::error::unwritten("a retried letter", error))?;
            }
            Ok(answer)
        };
        let fingerprint = derived_id(&[
            "ingress",
            &arrival.name,
            &String::from_utf8_lossy(&arrival.payload),
        ]);
        if let Some(kept) = self.ingress_answer(&arrival.key).await? {
            return replay(kept, &fingerprint).await;
        }
        let Some(runner) = self
            .accepted(&arrival.name)
            .and_then(|command| self.command_runner(command))
        else {
            return Err(Refusal::Unknown {
                name: arrival.name.clone(),
                accepted: self.accepted_names().join(", "),
            });
        };
        let payload: serde_json::Value =
            serde_json::from_slice(&arrival.payload).map_err(|error| Refusal::Unparsed {
                field: String::new(),
                message: format!("it is not JSON: {error}"),
            })?;
        runner
            .parse(&payload)
            .map_err(|(field, message)| Refusal::Unparsed { field, message })?;
        // The command's id is its key's: a repeat that raced past the read above decides under
        // the same id, and its commit is refused on the key.
        let command_id = derived_id(&["ingress", &arrival.key]);
        let mut metadata = Metadata::of_command(&command_id);
        if let Some(correlation) = &arrival.correlation_id {
            metadata.correlation_id = correlation.clone();
        }
        let retries = self
            .config()
            .for_aggregate(runner.aggregate())
            .concurrency_retries;
        let mut run = 0;
        loop {
            // What the sender's payload says wrong (a blank id) is theirs to mend, not a failure
            // to deliver again.
            let decided = match runner.decide(self, &payload, &metadata).await {
                Ok(decided) => decided,
                Err(error @ (Error::EmptyAggregateId { .. } | Error::InvalidCommand { .. })) => {
                    return Err(Refusal::Unparsed {
                        field: String::new(),
                        message: error.to_string(),
                    });
                }
                Err(error) => return Err(Refusal::Failed(error)),
            };
            let (answer, appends) = match decided {
                Ok(decision) => (
                    Answer::Decided {
                        aggregate_type: decision.decided.aggregate_type.to_owned(),
                        aggregate_id: decision.decided.aggregate_id.clone(),
                        version: decision.decided.version,
                        event_ids: decision.decided.event_ids.clone(),
                        event_types: decision
                            .decided
                            .event_types
                            .iter()
                            .map(|ty| (*ty).to_owned())
                            .collect(),
                    },
                    decision.append.into_iter().collect(),
                ),
                Err(rejection) => (
                    Answer::Rejected {
                        command: rejection.command_type.to_owned(),
                        code: rejection.rejected.to_owned(),
                        message: rejection.message,
                    },
                    Vec::new(),
                ),
            };
            let record = IngressRecord {
                key: arrival.key.clone(),
                fingerprint: fingerprint.clone(),
                answer: serde_json::to_value(&answer).map_err(|error| {
                    Error::from(crate::store::StoreError::new(format!(
                        "cannot write an arrived command's answer: {error}"
                    )))
                })?,
                decided_at: self.clock().now(),
            };
            let writes = WriteSet {
                appends,
                ingress: Some(record),
                ..settling()
            };
            match self.commit(&writes).await {
                Ok(_) => {
                    return Ok(Ingested {
                        answer,
                        replayed: false,
                    });
                }
                // Another delivery of it committed first: its answer is this one's.
                Err(CommitError::KeyTaken { key }) => {
                    let kept = self.ingress_answer(&key).await?;
                    let Some(kept) = kept else {
                        return Err(Refusal::Failed(crate::error::unwritten(
                            "an arrived command",
                            CommitError::KeyTaken { key },
                        )));
                    };
                    return replay(kept, &fingerprint).await;
                }
                Err(CommitError::StreamMoved { .. }) if run < retries => {
                    // A delivery racing this one may have decided it meanwhile.
                    let kept = self.ingress_answer(&arrival.key).await?;
                    if let Some(kept) = kept {
                        return replay(kept, &fingerprint).await;
                    }
                    run += 1;
                }
                Err(error) => {
                    return Err(Refusal::Failed(crate::error::unwritten(
                        "an arrived command",
                        error,
                    )));
                }
            }
        }
    }

    /// The `NAME` of the command the app takes under `name`.
    fn accepted(&self, name: &str) -> Option<&'static str> {
        self.inner.accepted.get(name).copied()
    }

    /// Every name the app takes commands under, sorted.
    pub(crate) fn accepted_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.inner.accepted.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }

    /// The command decided under `key`, with its answer: an app with sources of commands runs
    /// only on a store that keeps their record (its building refuses another).
    async fn ingress_answer(&self, key: &str) -> Result<Option<IngressRecord>, Error> {
        let record = self.store().capabilities().ingress()?;
        Ok(record.ingress_answer(key).await?)
    }
}

/// The kept answer of a key that came again, unless it was kept for another request.
fn replayed(kept: IngressRecord, fingerprint: &str) -> Result<Ingested, Refusal> {
    if kept.fingerprint != fingerprint {
        return Err(Refusal::KeyReused { key: kept.key });
    }
    let answer: Answer = serde_json::from_value(kept.answer).map_err(|error| {
        Error::from(crate::store::StoreError::new(format!(
            "the answer kept for idempotency key `{}` does not read: {error}",
            kept.key
        )))
    })?;
    Ok(Ingested {
        answer,
        replayed: true,
    })
}
