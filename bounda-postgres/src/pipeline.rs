//! Statements sent without waiting for the answer of the one before.
//!
//! A worker 1 ms from its server waits a round trip for each statement it waits for. A batch's
//! write sets are mostly writes whose answer is known in advance when all goes well: the events
//! inserted, the claim's row settled, the snapshot kept. In a pipeline each such statement is
//! sent at once (the connection keeps their order) and answers what it is foreseen to answer;
//! the answers are checked together when the pipeline drains, before anything is read and
//! before the commit. One that is not as foreseen (a stream moved, a claim lost, an error)
//! fails the whole pipeline: its transaction is rolled back and the write sets are written again
//! the exact way, where each statement's answer decides the next step, and each write set fails
//! alone. So the protocol's decisions stay where they are, written once, and the common case
//! costs one round trip for a whole batch instead of several for each write set.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bounda::store::StoreError;
use futures_util::future::BoxFuture;
use tokio_postgres::types::ToSql;

use deadpool_postgres::GenericClient;

use crate::sql::{Route, Session, changed, failed};

/// Parameters a statement owns, so that it can be sent now and answered later.
pub(crate) type Owned = Vec<Box<dyn ToSql + Sync + Send>>;

/// The parameters of a statement, each value owned by it.
macro_rules! owned {
    ($($value:expr),* $(,)?) => {
        vec![$(Box::new($value) as Box<dyn tokio_postgres::types::ToSql + Sync + Send>),*]
    };
}
pub(crate) use owned;

/// What a statement is foreseen to answer, in rows changed, when all goes as it usually does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expect {
    /// Exactly this many (every event of an append inserted).
    Rows(u64),
    /// At least one (a claim's row, still the claimant's, settled).
    Some,
    /// Whatever it changed: its answer decides nothing.
    Any,
}

impl Expect {
    /// The answer the protocol is given before the statement has answered.
    fn foreseen(self) -> u64 {
        match self {
            Expect::Rows(rows) => rows,
            Expect::Some => 1,
            Expect::Any => 0,
        }
    }

    /// Whether `rows` leads the protocol where the foreseen answer did.
    fn holds(self, rows: u64) -> bool {
        match self {
            Expect::Rows(foreseen) => rows == foreseen,
            Expect::Some => rows > 0,
            Expect::Any => true,
        }
    }
}

/// A statement sent, its answer still to come.
struct Sent<'a> {
    what: &'static str,
    expect: Expect,
    answer: BoxFuture<'a, Result<u64, tokio_postgres::Error>>,
}

/// The statements sent on one transaction whose answers are still to be checked, in order.
#[derive(Default)]
pub(crate) struct Pipeline<'a> {
    sent: Vec<Sent<'a>>,
}

impl<'a> Pipeline<'a> {
    /// Sends `sql` with `params` on `session` (a transaction) behind what was sent before, and
    /// answers what `expect` foresees. A statement this connection has not prepared yet (or,
    /// through a pooler, whose types this store has not learnt) waits for the answers before it:
    /// its preparing is a round trip of its own, answered after them.
    pub(crate) async fn send<S: Session>(
        &mut self,
        session: &'a S,
        what: &'static str,
        expect: Expect,
        sql: &str,
        params: Owned,
    ) -> Result<u64, StoreError> {
        let mut answer: BoxFuture<'a, _> = match session.route() {
            Route::Direct => {
                let client = session.client();
                let mut preparing = client.prepare_cached(sql);
                let statement = match poll_once(&mut preparing) {
                    Poll::Ready(prepared) => prepared,
                    Poll::Pending => {
                        self.drain().await?;
                        preparing.await
                    }
                }
                .map_err(failed(what))?;
                Box::pin(async move { client.execute_raw(&statement, params).await })
            }
            // Through a pooler, an unnamed statement with the types learnt for its text.
            Route::Pooled(pooled) => {
                let types = match pooled.known(sql) {
                    Some(types) => types,
                    None => {
                        self.drain().await?;
                        pooled.types(session, sql).await.map_err(failed(what))?
                    }
                };
                let sql = sql.to_owned();
                let client = session.postgres();
                Box::pin(async move {
                    let typed = params.into_iter().zip(types.iter().cloned());
                    changed(client.query_typed_raw(&sql, typed).await?).await
                })
            }
        };
        // The first poll writes the statement out; its answer is read when the pipeline drains.
        if let Poll::Ready(answered) = poll_once(&mut answer) {
            answer = Box::pin(std::future::ready(answered));
        }
        self.sent.push(Sent {
            what,
            expect,
            answer,
        });
        Ok(expect.foreseen())
    }

    /// Waits for every answer, in the order sent: the first error, or the first answer not as
    /// foreseen, fails the pipeline (what was sent after it is left unread and rolled back).
    pub(crate) async fn drain(&mut self) -> Result<(), StoreError> {
        for sent in self.sent.drain(..) {
            let rows = sent.answer.await.map_err(failed(sent.what))?;
            if !sent.expect.holds(rows) {
                return Err(StoreError::new(format!(
                    "{}: the statement changed {rows} row(s), not as foreseen ({:?})",
                    sent.what, sent.expect
                )));
            }
        }
        Ok(())
    }
}

/// Polls `future` once, without a task to wake: what it sends is sent.
fn poll_once<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    Pin::new(future).poll(&mut Context::from_waker(Waker::noop()))
}

#[cfg(test)]
mod tests {
    use super::Expect;

    #[test]
    fn an_answer_holds_when_it_leads_where_the_foreseen_one_did() {
        assert!(Expect::Rows(3).holds(3));
        assert!(
            !Expect::Rows(3).holds(2),
            "an append that left out a taken version"
        );
        assert!(Expect::Some.holds(1));
        assert!(!Expect::Some.holds(0), "a claim lost");
        assert!(Expect::Any.holds(0) && Expect::Any.holds(7));
    }
}
