//! Bookmarks (`bounda::store::bookmarks`): where a subscriber's checkpoint passed a held
//! handler's events, written and deleted with the checkpoint's moves in one transaction.
//!
//! Both writes lock the checkpoint's row first, so a pass leaving bookmarks and a return to
//! them wait for each other in one order, and the pass's compare-and-set sees the return.

use bounda::store::{Bookmark, Cursor, StoreError};

use crate::names::Names;
use crate::rows::{self, bigint};
use crate::sql::{Conn, Session, execute, failed, query, query_opt, transaction, unflushed};

/// Where `subscriber` stands, or `None` before its first pass: in one round trip.
pub(crate) async fn cursor(
    client: &impl Session,
    names: &Names,
    subscriber: &str,
) -> Result<Option<Cursor>, StoreError> {
    let rows = query(
        client,
        &names.sql(
            "SELECT c.position, b.handler, b.lane, b.position
             FROM {t}checkpoints c
             LEFT JOIN {t}bookmarks b ON b.subscriber = c.subscriber
             WHERE c.subscriber = $1
             ORDER BY b.handler, b.lane",
        ),
        &[&subscriber],
    )
    .await
    .map_err(failed("cannot read a checkpoint and its bookmarks"))?;
    let Some(first) = rows.first() else {
        return Ok(None);
    };
    let mut cursor = Cursor {
        checkpoint: rows::unsigned(first, 0)?,
        bookmarks: Vec::new(),
    };
    for row in &rows {
        if let Some(handler) = rows::get::<Option<String>>(row, 1)? {
            cursor.bookmarks.push(Bookmark::from_parts(
                handler,
                rows::get(row, 2)?,
                rows::unsigned(row, 3)?,
            ));
        }
    }
    Ok(Some(cursor))
}

/// A pass's move of `$1`'s checkpoint from `$2` to `$3`, by compare-and-set. It does not wait
/// for the disk ([`unflushed`]): the pass's deliveries are settled in the inbox already.
pub(crate) const PASS: &str = concat!(
    "UPDATE {t}checkpoints SET position = $3 WHERE subscriber = $1 AND position = $2 AND ",
    unflushed!()
);

/// Moves `subscriber`'s checkpoint from `from` to `to`, leaving `bookmarks`, in one
/// transaction; `false`, writing nothing, when it no longer stands at `from`.
pub(crate) async fn pass(
    client: &mut Conn,
    names: &Names,
    subscriber: &str,
    from: u64,
    to: u64,
    bookmarks: &[Bookmark],
) -> Result<bool, StoreError> {
    let tx = transaction(client).await?;
    let moved = execute(
        &tx,
        &names.sql(PASS),
        &[
            &subscriber,
            &bigint("a checkpoint position", from)?,
            &bigint("a checkpoint position", to)?,
        ],
    )
    .await
    .map_err(failed("cannot move a checkpoint"))?;
    if moved == 0 {
        return Ok(false);
    }
    let (mut handlers, mut lanes, mut positions) = (Vec::new(), Vec::new(), Vec::new());
    for bookmark in bookmarks {
        handlers.push(bookmark.handler.as_str());
        lanes.push(bookmark.lane_key());
        positions.push(bigint("a bookmark's position", bookmark.position)?);
    }
    execute(
        &tx,
        &names.sql(
            "INSERT INTO {t}bookmarks AS b (subscriber, handler, lane, position)
             SELECT $1, * FROM unnest($2::text[], $3::text[], $4::bigint[])
             ON CONFLICT (subscriber, handler, lane)
             DO UPDATE SET position = LEAST(b.position, EXCLUDED.position)",
        ),
        &[&subscriber, &handlers, &lanes, &positions],
    )
    .await
    .map_err(failed("cannot leave bookmarks"))?;
    tx.commit()
        .await
        .map_err(failed("cannot commit a checkpoint's move"))?;
    Ok(true)
}

/// Deletes `subscriber`'s bookmarks of `holders` and moves its checkpoint back to just before
/// the first of them, in one transaction.
pub(crate) async fn return_to(
    client: &mut Conn,
    names: &Names,
    subscriber: &str,
    holders: &[(&str, &str)],
) -> Result<(), StoreError> {
    let tx = transaction(client).await?;
    query_opt(
        &tx,
        &names.sql("SELECT position FROM {t}checkpoints WHERE subscriber = $1 FOR UPDATE"),
        &[&subscriber],
    )
    .await
    .map_err(failed("cannot lock a checkpoint"))?;
    let handlers: Vec<&str> = holders.iter().map(|(handler, _)| *handler).collect();
    let lanes: Vec<&str> = holders.iter().map(|(_, lane)| *lane).collect();
    let first = query_opt(
        &tx,
        &names.sql(
            "WITH gone AS (
                 DELETE FROM {t}bookmarks
                 WHERE subscriber = $1
                   AND (handler, lane) IN (SELECT * FROM unnest($2::text[], $3::text[]))
                 RETURNING position
             )
             SELECT min(position) FROM gone",
        ),
        &[&subscriber, &handlers, &lanes],
    )
    .await
    .map_err(failed("cannot delete bookmarks"))?;
    let first: Option<i64> = match &first {
        Some(row) => rows::get(row, 0)?,
        None => None,
    };
    if let Some(first) = first {
        execute(
            &tx,
            &names.sql(
                "UPDATE {t}checkpoints SET position = LEAST(position, $2) WHERE subscriber = $1",
            ),
            &[&subscriber, &(first - 1).max(0)],
        )
        .await
        .map_err(failed("cannot move a checkpoint back to a bookmark"))?;
    }
    tx.commit()
        .await
        .map_err(failed("cannot commit a return to bookmarks"))
}
