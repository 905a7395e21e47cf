//! Bookmarks (`bounda::store::bookmarks`): where a subscriber's checkpoint passed a held
//! handler's events, written and deleted with the checkpoint's moves in one transaction.

use bounda::store::{Bookmark, Cursor, StoreError};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::sql;

/// Where `subscriber` stands, or `None` before its first pass: in one statement, so the
/// checkpoint and its bookmarks are read at one moment, whatever another process on the file
/// writes meanwhile.
pub(crate) fn cursor(conn: &Connection, subscriber: &str) -> Result<Option<Cursor>, StoreError> {
    type Row = (u64, Option<String>, Option<String>, Option<u64>);
    let rows: Vec<Row> = conn
        .prepare_cached(
            "SELECT c.position, b.handler, b.lane, b.position
             FROM bounda_checkpoints c
             LEFT JOIN bounda_bookmarks b ON b.subscriber = c.subscriber
             WHERE c.subscriber = ?1
             ORDER BY b.handler, b.lane",
        )
        .and_then(|mut s| {
            s.query_map([subscriber], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
            })?
            .collect()
        })
        .map_err(sql("cannot read a checkpoint and its bookmarks"))?;
    let Some((checkpoint, ..)) = rows.first() else {
        return Ok(None);
    };
    let mut cursor = Cursor {
        checkpoint: *checkpoint,
        bookmarks: Vec::new(),
    };
    for (_, handler, lane, position) in rows {
        if let (Some(handler), Some(lane), Some(position)) = (handler, lane, position) {
            cursor
                .bookmarks
                .push(Bookmark::from_parts(handler, lane, position));
        }
    }
    Ok(Some(cursor))
}

/// Moves `subscriber`'s checkpoint from `from` to `to`, leaving `bookmarks`, in one
/// transaction; `false`, writing nothing, when it no longer stands at `from`.
pub(crate) fn pass(
    conn: &mut Connection,
    subscriber: &str,
    from: u64,
    to: u64,
    bookmarks: &[Bookmark],
) -> Result<bool, StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql("cannot begin a checkpoint's move"))?;
    let moved = tx
        .prepare_cached(
            "UPDATE bounda_checkpoints SET position = ?3 WHERE subscriber = ?1 AND position = ?2",
        )
        .and_then(|mut s| s.execute(params![subscriber, from, to]))
        .map_err(sql("cannot move a checkpoint"))?;
    if moved == 0 {
        return Ok(false);
    }
    {
        let mut insert = tx
            .prepare_cached(
                "INSERT INTO bounda_bookmarks (subscriber, handler, lane, position)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (subscriber, handler, lane)
                 DO UPDATE SET position = min(position, excluded.position)",
            )
            .map_err(sql("cannot prepare a bookmark's write"))?;
        for bookmark in bookmarks {
            insert
                .execute(params![
                    subscriber,
                    bookmark.handler,
                    bookmark.lane_key(),
                    bookmark.position
                ])
                .map_err(sql("cannot leave a bookmark"))?;
        }
    }
    tx.commit()
        .map_err(sql("cannot commit a checkpoint's move"))?;
    Ok(true)
}

/// Deletes `subscriber`'s bookmarks of `holders` and moves its checkpoint back to just before
/// the first of them, in one transaction.
pub(crate) fn return_to(
    conn: &mut Connection,
    subscriber: &str,
    holders: &[(&str, &str)],
) -> Result<(), StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql("cannot begin a return to bookmarks"))?;
    let mut first: Option<u64> = None;
    {
        let mut delete = tx
            .prepare_cached(
                "DELETE FROM bounda_bookmarks WHERE subscriber = ?1 AND handler = ?2 AND lane = ?3
                 RETURNING position",
            )
            .map_err(sql("cannot prepare a bookmark's deletion"))?;
        for (handler, lane) in holders {
            let position: Option<u64> = delete
                .query_row(params![subscriber, handler, lane], |row| row.get(0))
                .optional()
                .map_err(sql("cannot delete a bookmark"))?;
            first = first.into_iter().chain(position).min();
        }
    }
    if let Some(first) = first {
        tx.prepare_cached(
            "UPDATE bounda_checkpoints SET position = min(position, ?2) WHERE subscriber = ?1",
        )
        .and_then(|mut s| s.execute(params![subscriber, first.saturating_sub(1)]))
        .map_err(sql("cannot move a checkpoint back to a bookmark"))?;
    }
    tx.commit()
        .map_err(sql("cannot commit a return to bookmarks"))
}
