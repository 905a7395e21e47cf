//! The SQLite store of bounda: events, checkpoints, inbox, scheduler and dead letters in one file
//! (or in memory), through rusqlite with SQLite bundled.
//!
//! The store arrives with the runtime; this crate holds its place in the workspace until then.
