//! The unindexed tail: the events committed after the fold point (`events_indexed.upto`), kept in
//! memory by session so that a read finds them without scanning the table.
//!
//! The writer is the only one who changes the tail. It adds each batch's events right after the
//! batch commits, and empties the tail when a fold commits, under the tail's lock. A reader takes
//! its SQLite snapshot under the same lock and copies the session's tail events there, so the
//! indexed rows it reads and the tail it copied always meet at the same fold point: an event is
//! in exactly one of them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// One tail event: its `seq` as stored and its line (the bytes of the `line` column).
pub(super) type TailLine = (i64, Vec<u8>);

/// The events after the fold point, by session.
#[derive(Debug, Default)]
pub(super) struct Tail {
    /// The fold point: events with a rowid up to this one are indexed.
    upto: i64,
    sessions: HashMap<String, Vec<TailLine>>,
    rows: usize,
}

/// The tail shared by the writer and the readers.
pub(super) type SharedTail = Arc<Mutex<Tail>>;

/// Locks the tail (a panic elsewhere leaves it consistent: every change is one call).
pub(super) fn lock(tail: &Mutex<Tail>) -> MutexGuard<'_, Tail> {
    tail.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Tail {
    /// Reads the tail from the database: the fold point and the events after it, as `conn`'s
    /// current snapshot has them (on open: what a crash left).
    pub(super) fn read(conn: &rusqlite::Connection) -> Result<Self, rusqlite::Error> {
        let upto: i64 = conn.query_row("SELECT upto FROM events_indexed", [], |r| r.get(0))?;
        let mut tail = Self::new(upto);
        let mut rows =
            conn.prepare("SELECT session, seq, line FROM events WHERE rowid > ?1 ORDER BY rowid")?;
        let mut rows = rows.query(rusqlite::params![upto])?;
        while let Some(row) = rows.next()? {
            // A value that is not text (written behind the store's back) is kept as an empty
            // line, which the load reports as corrupt at its session and seq.
            let session = String::from_utf8_lossy(row.get_ref(0)?.as_bytes().unwrap_or_default());
            let line = row.get_ref(2)?.as_bytes().unwrap_or_default();
            tail.push(&session, [(row.get(1)?, line.to_vec())]);
        }
        Ok(tail)
    }

    /// An empty tail at fold point `upto`.
    pub(super) fn new(upto: i64) -> Self {
        Self { upto, ..Self::default() }
    }

    /// The fold point.
    pub(super) fn upto(&self) -> i64 {
        self.upto
    }

    /// How many events the tail holds.
    pub(super) fn rows(&self) -> usize {
        self.rows
    }

    /// Adds committed events of `session`, in `seq` order.
    pub(super) fn push(&mut self, session: &str, lines: impl IntoIterator<Item = TailLine>) {
        let held = match self.sessions.get_mut(session) {
            Some(held) => held,
            None => self.sessions.entry(session.to_owned()).or_default(),
        };
        let before = held.len();
        held.extend(lines);
        self.rows += held.len() - before;
    }

    /// The `seq` after the session's last tail event, if the tail has any of it.
    pub(super) fn next_seq(&self, session: &str) -> Option<i64> {
        self.sessions.get(session)?.last().map(|(seq, _)| seq.saturating_add(1))
    }

    /// A copy of the session's tail events.
    pub(super) fn lines(&self, session: &str) -> Vec<TailLine> {
        self.sessions.get(session).cloned().unwrap_or_default()
    }

    /// A copy of the session's tail events from `seq` `from` on.
    pub(super) fn lines_from(&self, session: &str, from: i64) -> Vec<TailLine> {
        let Some(held) = self.sessions.get(session) else { return Vec::new() };
        let first = held.partition_point(|(seq, _)| *seq < from);
        held[first..].to_vec()
    }

    /// The sessions that have tail events.
    pub(super) fn sessions(&self) -> impl Iterator<Item = &str> {
        self.sessions.keys().map(String::as_str)
    }

    /// A fold up to `upto` committed: every tail event is indexed now.
    pub(super) fn folded(&mut self, upto: i64) {
        self.upto = upto;
        self.sessions.clear();
        self.rows = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(seq: i64) -> TailLine {
        (seq, format!("line {seq}").into_bytes())
    }

    #[test]
    fn the_tail_keeps_each_sessions_events_until_a_fold() {
        let mut tail = Tail::new(10);
        tail.push("a", [line(0), line(1)]);
        tail.push("b", [line(5)]);
        tail.push("a", [line(2)]);
        assert_eq!((tail.rows(), tail.upto()), (4, 10));
        assert_eq!(tail.next_seq("a"), Some(3));
        assert_eq!(tail.next_seq("b"), Some(6));
        assert_eq!(tail.next_seq("c"), None);
        assert_eq!(tail.lines("a"), [line(0), line(1), line(2)]);
        let mut sessions: Vec<&str> = tail.sessions().collect();
        sessions.sort_unstable();
        assert_eq!(sessions, ["a", "b"]);

        tail.folded(14);
        assert_eq!((tail.rows(), tail.upto()), (0, 14));
        assert_eq!(tail.next_seq("a"), None);
        assert!(tail.lines("a").is_empty());
    }
}
