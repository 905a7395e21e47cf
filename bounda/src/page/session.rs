//! Signing in: an operator types the page's token once, with their name, and the page keeps a
//! session in a cookie (signed, `HttpOnly`, `SameSite=Strict`, expiring), whose name every
//! action records. Each form carries a token of its own, made from the session and the form's
//! address, so a form cannot be posted from another session or to another action.
//!
//! The keys are derived from the page's token: every process serving the page with the same
//! token reads the same sessions, and changing the token ends them all.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::{Duration, Instant};

/// The session cookie's name.
pub(super) const COOKIE: &str = "bounda_session";

/// How long a session lasts.
pub(super) const LIFETIME: Duration = crate::hours(12);

type HmacSha256 = Hmac<Sha256>;

/// The keys that sign sessions and their forms.
#[derive(Clone)]
pub(super) struct Keys {
    key: [u8; 32],
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Keys(..)")
    }
}

/// A signed-in operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Session {
    /// Who: what pauses and retries record.
    pub(super) name: String,
    /// Until when.
    pub(super) expires: Instant,
    /// Random, so each sign-in's form tokens are its own.
    nonce: String,
}

impl Keys {
    /// The keys of the page whose token is `token`.
    pub(super) fn of(token: &str) -> Keys {
        Keys {
            key: sign(token.as_bytes(), b"bounda page sessions v1"),
        }
    }

    /// A new session for `name`, from `now`.
    pub(super) fn start(&self, name: &str, now: Instant) -> Session {
        let nonce: [u8; 16] = rand::random();
        Session {
            name: name.to_owned(),
            expires: now + LIFETIME,
            nonce: URL_SAFE_NO_PAD.encode(nonce),
        }
    }

    /// The cookie's value for `session`: its parts and their signature.
    pub(super) fn seal(&self, session: &Session) -> String {
        let body = format!(
            "{}.{}.{}",
            session.expires.as_millis(),
            URL_SAFE_NO_PAD.encode(session.name.as_bytes()),
            session.nonce
        );
        let signature = URL_SAFE_NO_PAD.encode(sign(&self.key, body.as_bytes()));
        format!("{body}.{signature}")
    }

    /// The session a cookie's value holds, if these keys signed it and it has not expired at
    /// `now`.
    pub(super) fn open(&self, value: &str, now: Instant) -> Option<Session> {
        let (body, signature) = value.rsplit_once('.')?;
        let signature = URL_SAFE_NO_PAD.decode(signature).ok()?;
        let mut mac = HmacSha256::new_from_slice(&self.key).ok()?;
        mac.update(body.as_bytes());
        mac.verify_slice(&signature).ok()?;
        let mut parts = body.splitn(3, '.');
        let expires = Instant::from_millis(parts.next()?.parse().ok()?)?;
        let name = String::from_utf8(URL_SAFE_NO_PAD.decode(parts.next()?).ok()?).ok()?;
        let nonce = parts.next()?.to_owned();
        (now < expires).then_some(Session {
            name,
            expires,
            nonce,
        })
    }

    /// The token of the form posting to `action` (its address) in `session`.
    pub(super) fn form_token(&self, session: &Session, action: &str) -> String {
        URL_SAFE_NO_PAD.encode(sign(&self.key, form_text(session, action).as_bytes()))
    }

    /// Whether `token` is the token of the form posting to `action` in `session`, compared in a
    /// time that does not depend on where it differs.
    pub(super) fn form_token_holds(&self, session: &Session, action: &str, token: &str) -> bool {
        let Ok(token) = URL_SAFE_NO_PAD.decode(token) else {
            return false;
        };
        let Ok(mut mac) = HmacSha256::new_from_slice(&self.key) else {
            return false;
        };
        mac.update(form_text(session, action).as_bytes());
        mac.verify_slice(&token).is_ok()
    }
}

/// What a form's token signs: the session's nonce and the form's address.
fn form_text(session: &Session, action: &str) -> String {
    format!("{}\n{action}", session.nonce)
}

/// HMAC-SHA256 of `data` under `key`.
fn sign(key: &[u8], data: &[u8]) -> [u8; 32] {
    // A key of any length is accepted.
    let mut mac = match HmacSha256::new_from_slice(key) {
        Ok(mac) => mac,
        Err(_) => return [0; 32],
    };
    mac.update(data);
    mac.finalize().into_bytes().into()
}

/// The session cookie of a request's `Cookie` headers, if there is one.
pub(super) fn cookie(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == COOKIE).then_some(value)
        })
}

/// The `Set-Cookie` of `value` under `path`, lasting `seconds` (0 ends it); `Secure` when the
/// page is served over HTTPS.
pub(super) fn set_cookie(value: &str, path: &str, seconds: u64, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{COOKIE}={value}; Path={path}; Max-Age={seconds}; HttpOnly; SameSite=Strict{secure}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Instant {
        Instant::parse(text).unwrap()
    }

    #[test]
    fn a_session_reads_back_until_it_expires_and_only_under_its_keys() {
        let keys = Keys::of("s3cret");
        let now = at("2026-12-03T10:00:00Z");
        let session = keys.start("alice; <b>", now);
        let sealed = keys.seal(&session);
        assert_eq!(keys.open(&sealed, now), Some(session.clone()));
        assert_eq!(keys.open(&sealed, now + LIFETIME), None, "expired");
        assert_eq!(Keys::of("other").open(&sealed, now), None, "another token");
        // A changed name, moment or nonce breaks the signature.
        let (body, signature) = sealed.rsplit_once('.').unwrap();
        let forged_name = body.replacen(
            &URL_SAFE_NO_PAD.encode("alice; <b>"),
            &URL_SAFE_NO_PAD.encode("mallory"),
            1,
        );
        assert_eq!(keys.open(&format!("{forged_name}.{signature}"), now), None);
        let later = (now + crate::days(30)).as_millis().to_string();
        let forged_expiry = body.replacen(&session.expires.as_millis().to_string(), &later, 1);
        assert_eq!(
            keys.open(&format!("{forged_expiry}.{signature}"), now),
            None
        );
        assert_eq!(keys.open("nonsense", now), None);
    }

    #[test]
    fn a_form_token_holds_for_its_session_and_action_only() {
        let keys = Keys::of("s3cret");
        let now = at("2026-12-03T10:00:00Z");
        let alice = keys.start("alice", now);
        let bob = keys.start("bob", now);
        let token = keys.form_token(&alice, "/pauses/pause");
        assert!(keys.form_token_holds(&alice, "/pauses/pause", &token));
        assert!(!keys.form_token_holds(&alice, "/pauses/resume", &token));
        assert!(!keys.form_token_holds(&bob, "/pauses/pause", &token));
        assert!(!keys.form_token_holds(&alice, "/pauses/pause", "not base64 !"));
    }
}
