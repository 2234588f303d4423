//! The SQLite store's per-session heads: the `session_heads` table (layout 4).
//!
//! ```sql
//! CREATE TABLE session_heads (session TEXT PRIMARY KEY, next_seq INTEGER NOT NULL,
//!     open_turn INTEGER, wake_at INTEGER) WITHOUT ROWID;
//! ```
//!
//! One row per session, its [`Head`]: written by the writer in the same transaction as the
//! batch's events, so the table and the events always agree (a crash loses both or neither).
//!
//! # Why one statement per batch
//!
//! The writer folds each request's marks into the heads of the sessions the batch touches (in
//! memory, no line decoded), then writes them all with one `INSERT … SELECT … FROM json_each(?1)
//! … ON CONFLICT DO UPDATE`, the heads as one JSON array: a batch pays one statement, whatever
//! the number of appends in it. The table holds one small row per session, so a batch dirties
//! a handful of its pages (all of them for a store of a few hundred live sessions), not one
//! per append.
//!
//! `wake_at` past SQLite's INTEGER range is stored as its largest value.

use std::collections::HashMap;

use rusqlite::{Connection, OptionalExtension, params};

use crate::event::Envelope;
use crate::store::{Head, Mark, SessionHead};

/// The table, as the layout creates it.
pub(super) const TABLE: &str = "CREATE TABLE session_heads (session TEXT PRIMARY KEY, \
     next_seq INTEGER NOT NULL, open_turn INTEGER, wake_at INTEGER) WITHOUT ROWID;";

/// The one statement of a batch: every head of `?1`, a JSON array of
/// `[session, next_seq, open_turn, wake_at]`.
const UPSERT: &str = "INSERT INTO session_heads (session, next_seq, open_turn, wake_at)
     SELECT value->>0, value->>1, value->>2, value->>3 FROM json_each(?1) WHERE true
     ON CONFLICT (session) DO UPDATE SET next_seq = excluded.next_seq,
         open_turn = excluded.open_turn, wake_at = excluded.wake_at";

/// The JSON array [`UPSERT`] takes for `heads`.
fn encode(heads: &HashMap<String, Head>) -> String {
    let rows: Vec<(&str, i64, Option<u32>, Option<i64>)> = heads
        .iter()
        .map(|(session, head)| {
            let wake_at = head.wake_at.map(|at| i64::try_from(at).unwrap_or(i64::MAX));
            (session.as_str(), to_sql(head.next_seq), head.open_turn, wake_at)
        })
        .collect();
    serde_json::to_string(&rows).unwrap_or_else(|_| "[]".into())
}

fn to_sql(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Writes `heads` (the sessions a batch wrote) with one statement, inside the batch's
/// transaction.
pub(super) fn write(conn: &Connection, heads: &HashMap<String, Head>) -> rusqlite::Result<()> {
    if heads.is_empty() {
        return Ok(());
    }
    conn.prepare_cached(UPSERT)?.execute(params![encode(heads)])?;
    Ok(())
}

/// The stored head of `session` (its open turn and wake-up; the next `seq` is the caller's),
/// default when it has none.
pub(super) fn stored(conn: &Connection, session: &str) -> rusqlite::Result<Head> {
    let mut query =
        conn.prepare_cached("SELECT open_turn, wake_at FROM session_heads WHERE session = ?1")?;
    let row = query
        .query_row(params![session], |row| {
            Ok((row.get::<_, Option<u32>>(0)?, row.get::<_, Option<i64>>(1)?))
        })
        .optional()?;
    let (open_turn, wake_at) = row.unwrap_or_default();
    let wake_at = wake_at.map(|at| u64::try_from(at).unwrap_or(0));
    Ok(Head { next_seq: 0, open_turn, wake_at })
}

/// Every head, in session order.
pub(super) fn read_all(conn: &Connection) -> rusqlite::Result<Vec<SessionHead>> {
    let mut query = conn.prepare_cached(
        "SELECT session, next_seq, open_turn, wake_at FROM session_heads ORDER BY session",
    )?;
    let rows = query.query_map([], |row| {
        let next_seq: i64 = row.get(1)?;
        let wake_at: Option<i64> = row.get(3)?;
        let head = Head {
            next_seq: u64::try_from(next_seq).unwrap_or(0),
            open_turn: row.get(2)?,
            wake_at: wake_at.map(|at| u64::try_from(at).unwrap_or(0)),
        };
        Ok(SessionHead { session: row.get(0)?, head: Ok(head) })
    })?;
    rows.collect()
}

/// Fills the table from the rows of `events` (a migration from a layout without heads, inside
/// its transaction): each session's next `seq`, and the fold of its marks — only the lines that
/// can hold one (`"type":"turn/…` or `"type":"llm/retry…`, which no string value can contain
/// unescaped) are decoded. A line that does not decode is left out (its session's load reports
/// it).
pub(super) fn fill(conn: &Connection) -> rusqlite::Result<()> {
    let mut heads: HashMap<String, Head> = HashMap::new();
    {
        let mut ends = conn.prepare("SELECT session, max(seq) FROM events GROUP BY session")?;
        let mut rows = ends.query([])?;
        while let Some(row) = rows.next()? {
            let last: i64 = row.get(1)?;
            let head = Head { next_seq: u64::try_from(last).unwrap_or(0) + 1, ..Head::default() };
            heads.insert(row.get(0)?, head);
        }
        let mut marks = conn.prepare(
            "SELECT session, line FROM events \
             WHERE line LIKE '%\"type\":\"turn/%' OR line LIKE '%\"type\":\"llm/retry%' \
             ORDER BY session, seq",
        )?;
        let mut rows = marks.query([])?;
        while let Some(row) = rows.next()? {
            let session: String = row.get(0)?;
            let line: String = row.get(1)?;
            let mark = serde_json::from_str::<Envelope>(&line).ok().as_ref().and_then(Mark::of);
            if let (Some(mark), Some(head)) = (mark, heads.get_mut(&session)) {
                head.mark(mark);
            }
        }
    }
    write(conn, &heads)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_are_written_in_one_statement_and_read_back() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(TABLE).unwrap();
        let head = |next_seq, open_turn, wake_at| Head { next_seq, open_turn, wake_at };
        let mut heads = HashMap::from([
            ("a".to_owned(), head(3, Some(1), Some(1_700_000_000_500))),
            ("b".to_owned(), head(7, None, None)),
        ]);
        write(&conn, &heads).unwrap();
        heads.insert("a".into(), head(4, Some(1), None));
        heads.insert("c".into(), head(1, Some(9), Some(u64::MAX)));
        write(&conn, &heads).unwrap();
        let all = read_all(&conn).unwrap();
        let want = [
            SessionHead { session: "a".into(), head: Ok(head(4, Some(1), None)) },
            SessionHead { session: "b".into(), head: Ok(head(7, None, None)) },
            SessionHead { session: "c".into(), head: Ok(head(1, Some(9), Some(i64::MAX as u64))) },
        ];
        assert_eq!(all, want);
        assert_eq!(stored(&conn, "c").unwrap(), head(0, Some(9), Some(i64::MAX as u64)));
        assert_eq!(stored(&conn, "none").unwrap(), Head::default());
    }
}
