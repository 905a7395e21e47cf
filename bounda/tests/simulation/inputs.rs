//! What the outside world does to the simulated app: commands to accounts `a0`–`a3`, and an
//! operator retrying or discarding an account's first failed letter (an input, not the
//! simulation's own letter steps, so the model knows which letter it was).

use bounda::store::{LetterFilter, LetterKind, LetterStatus};
use bounda::testing::simulate::{Input, Rng, Sent, SimRng, span};
use bounda::{App, Retried, millis};

use super::domain::{Ask, Request};

/// An outside input to account `a<n>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outside {
    Open(u8),
    Pay(u8, u64),
    /// Move the movable deadline this many milliseconds after now, or clear it.
    Move(u8, Option<u64>),
    Cancel(u8),
    Archive(u8),
    /// An operator retries the account's first failed letter.
    RetryLetter(u8),
    /// An operator discards it.
    DiscardLetter(u8),
}

/// Accounts a schedule uses.
pub const ACCOUNTS: u8 = 4;

pub fn account(n: u8) -> String {
    format!("a{n}")
}

/// What a letter input answers when the account has no failed letter.
pub const NO_LETTER: &str = "no letter";
/// What a retry answers when the letter's run failed again.
pub const FAILED_AGAIN: &str = "failed again";

impl Outside {
    /// The account the input is for.
    pub fn account(self) -> String {
        match self {
            Outside::Open(n)
            | Outside::Pay(n, _)
            | Outside::Move(n, _)
            | Outside::Cancel(n)
            | Outside::Archive(n)
            | Outside::RetryLetter(n)
            | Outside::DiscardLetter(n) => account(n),
        }
    }

    /// What the input asks of its account at `now`, unless it is an operator's.
    pub fn ask(self, now: bounda::Instant) -> Option<Ask> {
        Some(match self {
            Outside::Open(_) => Ask::Open,
            Outside::Pay(_, amount) => Ask::Pay(amount),
            Outside::Move(_, Some(after)) => Ask::Move(Some(now + millis(after))),
            Outside::Move(_, None) => Ask::Move(None),
            Outside::Cancel(_) => Ask::Cancel,
            Outside::Archive(_) => Ask::Archive,
            Outside::RetryLetter(_) | Outside::DiscardLetter(_) => return None,
        })
    }
}

impl Input for Outside {
    fn first(rng: &mut SimRng) -> Vec<Outside> {
        (0..ACCOUNTS)
            .filter(|_| rng.random_bool(0.8))
            .map(Outside::Open)
            .collect()
    }

    fn draw(rng: &mut SimRng) -> Outside {
        let n = rng.random_range(0..ACCOUNTS);
        match rng.random_range(0..50) {
            0..=14 => Outside::Pay(n, rng.random_range(1..100)),
            15..=24 => Outside::Move(n, Some(span(rng))),
            25..=27 => Outside::Move(n, None),
            28..=31 => Outside::Cancel(n),
            32..=33 => Outside::Archive(n),
            34..=37 => Outside::Open(n),
            38..=45 => Outside::RetryLetter(n),
            _ => Outside::DiscardLetter(n),
        }
    }

    async fn send(&self, app: &App) -> Result<Sent, String> {
        let account = self.account();
        if let Some(ask) = self.ask(app.clock().now()) {
            return Sent::of(
                app.dispatch(Request {
                    account_id: account,
                    ask,
                })
                .await,
            );
        }
        let Some(id) = pick(app, &account).await? else {
            return Ok(Sent::Rejected(NO_LETTER.to_owned()));
        };
        if matches!(self, Outside::DiscardLetter(_)) {
            app.dead_letters()
                .discard(&id)
                .await
                .map_err(|e| format!("discard failed: {e}"))?;
            return Ok(Sent::Accepted);
        }
        Ok(match app.dead_letters().retry(&id).await {
            Ok(Retried::Done | Retried::FailedAgain { .. }) => Sent::Accepted,
            _ => Sent::Rejected(FAILED_AGAIN.to_owned()),
        })
    }
}

/// The failed letter of `account` the model picks too: its process letter, else its policy
/// letters by payment.
async fn pick(app: &App, account: &str) -> Result<Option<String>, String> {
    let letters = app
        .dead_letters()
        .list(&LetterFilter {
            status: Some(LetterStatus::Failed),
            ..LetterFilter::default()
        })
        .await
        .map_err(|e| e.to_string())?;
    let store = app.store();
    let mut mine = Vec::new();
    for letter in letters {
        if letter.aggregate_id.as_deref() != Some(account) {
            continue;
        }
        let version = match (&letter.kind, &letter.event_id) {
            (LetterKind::Process, _) => 0,
            (_, Some(event)) => store
                .read_event(event)
                .await
                .map_err(|e| e.to_string())?
                .map_or(u64::MAX, |event| event.version),
            (_, None) => u64::MAX,
        };
        mine.push(((letter.kind != LetterKind::Process, version), letter.id));
    }
    mine.sort();
    Ok(mine.into_iter().next().map(|(_, id)| id))
}
