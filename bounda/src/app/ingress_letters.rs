//! Messages from other services that could not be taken as commands (not a CloudEvent, not
//! JSON, a name the app does not take): each a dead letter keeping its raw headers and body, so
//! the consumer goes on past it, and an operator retries it once a deploy takes it.

use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::app::App;
use crate::app::failure::Failure;
use crate::app::letters::LetterRetry;
use crate::ids::derived_id;
use crate::ingress::{Arrival, Ingested};
use crate::relay::Wire;
use crate::store::{LetterKind, WriteSet};
use crate::{Error, hash};

/// An arrived message as its letter keeps it: every header, and the body in base64 (it may not
/// be text).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Kept {
    headers: Vec<(String, String)>,
    body_base64: String,
    /// The body as text, when it is, for an operator to read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    body: Option<String>,
}

impl Kept {
    fn of(raw: &Wire) -> Kept {
        Kept {
            headers: raw.headers.clone(),
            body_base64: base64::engine::general_purpose::STANDARD.encode(&raw.body),
            body: std::str::from_utf8(&raw.body).ok().map(str::to_owned),
        }
    }

    fn wire(&self) -> Result<Wire, String> {
        let body = base64::engine::general_purpose::STANDARD
            .decode(&self.body_base64)
            .map_err(|error| format!("its kept body does not decode: {error}"))?;
        Ok(Wire {
            headers: self.headers.clone(),
            body,
        })
    }
}

/// The command a raw message carries, as a CloudEvent.
pub(crate) fn arrival_of(raw: &Wire) -> Result<Arrival, String> {
    let header = |name: &str| {
        raw.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    };
    Arrival::of_cloud_event(header, &raw.body)
}

impl App {
    /// Files a dead letter for message `raw` that `source` (a consumer's name) could not take
    /// as a command, because of `why`: its headers and body kept as they came, so the consumer
    /// acknowledges it and goes on, and a retry takes it again once the app does. The same
    /// message filed twice is one letter. Returns the letter's id.
    pub async fn file_arrival_letter(
        &self,
        source: &str,
        raw: &Wire,
        why: &str,
    ) -> Result<String, Error> {
        let kept = Kept::of(raw);
        let fingerprint = format!(
            "{:016x}",
            hash::fnv1a(&serde_json::to_string(&kept).unwrap_or_default())
        );
        let id = derived_id(&["ingress", source, &fingerprint]);
        let failure = Failure::terminal("INGRESS_REFUSED", &anyhow::anyhow!("{why}"));
        let mut letter = failure.letter(
            id.clone(),
            LetterKind::Ingress,
            source,
            1,
            self.clock().now(),
        );
        letter.payload = serde_json::to_value(&kept).ok();
        if let Ok(arrival) = arrival_of(raw) {
            letter.event_type = Some(arrival.name);
        }
        let writes = WriteSet {
            dead_letters: vec![letter],
            ..WriteSet::default()
        };
        self.commit(&writes)
            .await
            .map_err(|error| crate::error::unwritten("a message's dead letter", error))?;
        tracing::error!(
            letter = %id,
            source = %source,
            "a message could not be taken as a command and is a dead letter: {why}"
        );
        Ok(id)
    }

    /// Retries an ingress letter, its claim held: its message taken again, decided under its
    /// key with the letter settled in the same commit.
    pub(crate) async fn retry_arrival_letter(
        &self,
        letter: &crate::store::DeadLetter,
        held: &LetterRetry,
    ) -> Result<Ingested, Error> {
        let failed = |message: String| Error::RetryFailed {
            id: letter.id.clone(),
            message,
        };
        let kept: Kept = letter
            .payload
            .clone()
            .and_then(|payload| serde_json::from_value(payload).ok())
            .ok_or_else(|| Error::LetterNotRetriable {
                id: letter.id.clone(),
                reason: "its message was not kept".to_owned(),
            })?;
        let raw = kept.wire().map_err(&failed)?;
        let arrival = arrival_of(&raw).map_err(&failed)?;
        self.ingest_settling(&arrival, Some(held))
            .await
            .map_err(|refusal| failed(refusal.to_string()))
    }
}
