//! Webhooks for bounda: [`Webhook`], the [`Sink`] that posts each of a relay's messages to an
//! HTTP endpoint, signed as [Standard Webhooks](https://www.standardwebhooks.com/) says.
//!
//! Each message is one `POST` carrying its CloudEvent in binary mode (`ce-` headers, the data
//! as the body) or structured mode, as the relay says, plus the three Standard Webhooks
//! headers: `webhook-id` (the event's id, the same on every attempt, for the endpoint to drop
//! a repeat), `webhook-timestamp` (when this attempt was sent, in Unix seconds) and
//! `webhook-signature` (`v1,` and the HMAC-SHA256 of `id.timestamp.body` under the endpoint's
//! secret). The endpoint verifies it with any Standard Webhooks library, this crate's
//! [`verify`] included.
//!
//! A `2xx` answer is the acknowledgement. What the endpoint may answer differently later (a
//! `408`, a `429`, a `5xx`), a connection that fails, and an answer that does not come within
//! the time limit (10 seconds unless told) are [`SinkError::Unavailable`]: the relay posts
//! again after a back-off, the stream's later events waiting behind. A `409` is delivered: the
//! endpoint decided the message already, or answered it with a refusal of its own (another
//! bounda service's ingress answers a command's rejection so), and posting it again gets the
//! same answer. Any other answer (a redirect, a `4xx` such as `401` for a wrong secret or `413`
//! for a body too large) is [`SinkError::Refused`]: the event becomes a dead letter, retried by
//! an operator once the endpoint is mended.
//!
//! ```
//! use bounda::relay::Relay;
//! use bounda_webhooks::Webhook;
//!
//! # fn main() -> Result<(), bounda_webhooks::WebhookError> {
//! let sink = Webhook::new(
//!     "https://crm.example/hooks/shop",
//!     "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
//! )?;
//! let relay = Relay::new("crm", sink).source("https://shop.example");
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bounda::relay::{Message, Sink, SinkError};
use reqwest::StatusCode;

pub use standardwebhooks;

/// How long a post waits for the endpoint's answer unless told.
const TIME_LIMIT: Duration = Duration::from_secs(10);

/// Why a webhook cannot be made: said when the app is built, never at the first post.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The endpoint's address does not parse or is not `http` or `https`.
    #[error("webhook address `{url}`: {reason}")]
    Address {
        /// The address given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The secret is not base64 (with or without its `whsec_` prefix), or too short.
    #[error(
        "the webhook secret for `{url}` {reason}: give the endpoint's secret as `whsec_` and at \
         least 24 bytes in base64 (`openssl rand -base64 32`)"
    )]
    Secret {
        /// The endpoint it is for.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The HTTP client cannot be made (its TLS settings).
    #[error("cannot make the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
}

/// An HTTP endpoint as a relay's sink: each message one signed `POST`.
#[derive(Clone)]
pub struct Webhook {
    url: reqwest::Url,
    signer: Arc<standardwebhooks::Webhook>,
    client: reqwest::Client,
    time_limit: Duration,
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secret stays out of logs.
        f.debug_struct("Webhook")
            .field("url", &self.url.as_str())
            .field("time_limit", &self.time_limit)
            .finish_non_exhaustive()
    }
}

/// The shortest secret taken, in bytes: Standard Webhooks asks for 24 to 64.
const SHORTEST_SECRET: usize = 24;

impl Webhook {
    /// A sink posting to `url` (`https://host/path`), signing with `secret`, the endpoint's
    /// `whsec_`-prefixed base64 key. Refused here, not at the first post, when either is wrong.
    pub fn new(url: &str, secret: &str) -> Result<Webhook, WebhookError> {
        let address = |reason: String| WebhookError::Address {
            url: url.to_owned(),
            reason,
        };
        let parsed = reqwest::Url::parse(url).map_err(|error| address(error.to_string()))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(address(format!(
                "its scheme is `{}`; a webhook is posted over `http` or `https`",
                parsed.scheme()
            )));
        }
        let secret_error = |reason: &str| WebhookError::Secret {
            url: url.to_owned(),
            reason: reason.to_owned(),
        };
        let signer =
            standardwebhooks::Webhook::new(secret).map_err(|_| secret_error("is not base64"))?;
        let key = secret.strip_prefix("whsec_").unwrap_or(secret);
        if key.len() * 3 / 4 < SHORTEST_SECRET {
            return Err(secret_error("is too short"));
        }
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("bounda-webhooks/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(WebhookError::Client)?;
        Ok(Webhook {
            url: parsed,
            signer: Arc::new(signer),
            client,
            time_limit: TIME_LIMIT,
        })
    }

    /// Waits `limit` (10 s unless told) for the endpoint's answer before the post counts as
    /// unavailable, to be posted again.
    pub fn time_limit(mut self, limit: Duration) -> Webhook {
        self.time_limit = limit;
        self
    }

    /// The signed request of `message`, sent at `timestamp` (Unix seconds).
    fn request(&self, message: &Message, timestamp: i64) -> Result<reqwest::Request, SinkError> {
        let wire = message.wire().map_err(SinkError::Refused)?;
        let signature = self
            .signer
            .sign(message.id(), timestamp, &wire.body)
            .map_err(|error| SinkError::Refused(anyhow::anyhow!("cannot sign it: {error}")))?;
        let mut request = self
            .client
            .post(self.url.clone())
            .timeout(self.time_limit)
            .header(standardwebhooks::HEADER_WEBHOOK_ID, message.id())
            .header(standardwebhooks::HEADER_WEBHOOK_TIMESTAMP, timestamp)
            .header(standardwebhooks::HEADER_WEBHOOK_SIGNATURE, signature);
        for (name, value) in &wire.headers {
            request = request.header(name, value);
        }
        request.body(wire.body).build().map_err(|error| {
            SinkError::Refused(anyhow::anyhow!("cannot make the request: {error}"))
        })
    }
}

#[async_trait::async_trait]
impl Sink for Webhook {
    fn describe(&self) -> String {
        format!("webhook `{}`", self.url)
    }

    async fn publish(&self, message: &Message) -> Result<(), SinkError> {
        let timestamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        let timestamp = i64::try_from(timestamp).unwrap_or(i64::MAX);
        let request = self.request(message, timestamp)?;
        let response = self.client.execute(request).await.map_err(|error| {
            let cause = if error.is_timeout() {
                format!("no answer within {:?}", self.time_limit)
            } else {
                format!("{error:#}")
            };
            SinkError::Unavailable(anyhow::anyhow!("posting to `{}`: {cause}", self.url))
        })?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let body = response.text().await.unwrap_or_default();
        let answer = anyhow::anyhow!(
            "`{}` answered {status}{}",
            self.url,
            match body.trim() {
                "" => String::new(),
                body => format!(": {}", body.chars().take(200).collect::<String>()),
            }
        );
        Err(match status {
            // Decided already: the endpoint answered this message, with a refusal of its own
            // (another bounda service's ingress answers a command's rejection so); posting it
            // again gets the same answer.
            StatusCode::CONFLICT => return Ok(()),
            StatusCode::REQUEST_TIMEOUT | StatusCode::TOO_MANY_REQUESTS => {
                SinkError::Unavailable(answer)
            }
            status if status.is_server_error() => SinkError::Unavailable(answer),
            _ => SinkError::Refused(answer),
        })
    }
}

/// Whether a request an endpoint received was signed with `secret` within five minutes: its
/// `webhook-id`, `webhook-timestamp` and `webhook-signature` headers against its `body`, as
/// an endpoint (another bounda service's, a test's) checks what a [`Webhook`] posted.
pub fn verify(
    secret: &str,
    headers: &reqwest::header::HeaderMap,
    body: &[u8],
) -> Result<(), standardwebhooks::WebhookError> {
    standardwebhooks::Webhook::new(secret)?.verify(body, headers)
}
