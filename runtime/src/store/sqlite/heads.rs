//! The SQLite store's per-session heads: the `session_heads` table (layout 4), and reading
//! every session's [`Head`] back.
//!
//! ```sql
//! CREATE TABLE session_heads (session TEXT PRIMARY KEY, open_turn INTEGER, wake_at INTEGER)
//!     WITHOUT ROWID;
//! ```
//!
//! A row holds what the events' marks decided last for its session — the open turn and the
//! pending wake-up — and is written by the writer in the same transaction as the events that
//! changed it, so the table and the events always agree (a crash loses both or neither). The
//! next `seq`, the rest of a head, is not kept twice: the writer knows it, and a reader takes it
//! from the index (one probe per session) and the tail.
//!
//! # Why only the sessions whose marks changed, with one statement
//!
//! Most appends are chunks, which change nothing but the next `seq`; only `turn/start`,
//! `turn/end`, `llm/retry` and `llm/retry-started` ([`Mark`]) change a row. The writer folds each
//! request's marks into the heads it caches (in memory, no line decoded) and writes the rows of
//! the sessions whose marks changed with one `INSERT … SELECT … FROM json_each(?1) … ON CONFLICT
//! DO UPDATE`, the rows as one JSON array. A batch of chunks writes nothing more than before; a
//! batch holding marks pays one statement, whatever their number.
//!
//! `wake_at` past SQLite's INTEGER range is stored as its largest value.

use std::collections::HashMap;

use rusqlite::{Connection, OptionalExtension, params};

use super::tail::Tail;
use crate::event::Envelope;
use crate::store::{Head, Mark, SessionHead};

/// The table, as the layout creates it.
pub(super) const TABLE: &str = "CREATE TABLE session_heads (session TEXT PRIMARY KEY, \
     open_turn INTEGER, wake_at INTEGER) WITHOUT ROWID;";

/// The one statement of a batch with marks: every row of `?1`, a JSON array of
/// `[session, open_turn, wake_at]`.
const UPSERT: &str = "INSERT INTO session_heads (session, open_turn, wake_at)
     SELECT value->>0, value->>1, value->>2 FROM json_each(?1) WHERE true
     ON CONFLICT (session) DO UPDATE SET open_turn = excluded.open_turn,
         wake_at = excluded.wake_at";

/// The JSON array [`UPSERT`] takes for `heads`.
fn encode<'a>(heads: impl Iterator<Item = (&'a String, &'a Head)>) -> String {
    let rows: Vec<(&str, Option<u32>, Option<i64>)> = heads
        .map(|(session, head)| {
            let wake_at = head.wake_at.map(|at| i64::try_from(at).unwrap_or(i64::MAX));
            (session.as_str(), head.open_turn, wake_at)
        })
        .collect();
    serde_json::to_string(&rows).unwrap_or_else(|_| "[]".into())
}

/// Writes the rows of `heads` (the sessions whose marks a batch changed) with one statement,
/// inside the batch's transaction; nothing when there are none.
pub(super) fn write<'a>(
    conn: &Connection,
    heads: impl ExactSizeIterator<Item = (&'a String, &'a Head)>,
) -> rusqlite::Result<()> {
    if heads.len() == 0 {
        return Ok(());
    }
    conn.prepare_cached(UPSERT)?.execute(params![encode(heads)])?;
    Ok(())
}

/// The stored open turn and wake-up of `session` (the next `seq` is the caller's), default when
/// it has no row.
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

/// The sessions of `tail` and their next `seq`: what [`read_all`] takes of the tail.
pub(super) fn tail_ends(tail: &Tail) -> Vec<(String, u64)> {
    let next = |s| tail.next_seq(s).map_or(0, |n| u64::try_from(n).unwrap_or(0));
    tail.sessions().map(|s| (s.to_owned(), next(s))).collect()
}

/// Every session's head, in session order, from a read transaction on `conn` at whose snapshot
/// the tail's sessions and their next `seq`s (`tail`, see [`tail_ends`]) were taken: the indexed
/// sessions by one probe each (a loose index scan, and the last `seq` at the end of each
/// session's range), joined to their rows; then the sessions of the tail.
pub(super) fn read_all(
    conn: &Connection,
    tail: &[(String, u64)],
) -> rusqlite::Result<Vec<SessionHead>> {
    let mut query = conn.prepare_cached(
        "WITH RECURSIVE s(id) AS (
             SELECT min(session) FROM events_by_session
             UNION ALL
             SELECT (SELECT min(session) FROM events_by_session WHERE session > s.id) FROM s
             WHERE s.id IS NOT NULL)
         SELECT s.id, (SELECT max(seq) FROM events_by_session b WHERE b.session = s.id),
             h.open_turn, h.wake_at
         FROM s LEFT JOIN session_heads h ON h.session = s.id WHERE s.id IS NOT NULL",
    )?;
    let rows = query.query_map([], |row| {
        let last: i64 = row.get(1)?;
        let wake_at: Option<i64> = row.get(3)?;
        let head = Head {
            next_seq: u64::try_from(last).unwrap_or(0).saturating_add(1),
            open_turn: row.get(2)?,
            wake_at: wake_at.map(|at| u64::try_from(at).unwrap_or(0)),
        };
        Ok((row.get::<_, String>(0)?, head))
    })?;
    let mut heads: std::collections::BTreeMap<String, Head> = rows.collect::<Result<_, _>>()?;
    for (session, next) in tail {
        match heads.get_mut(session) {
            Some(head) => head.next_seq = head.next_seq.max(*next),
            None => {
                let head = Head { next_seq: *next, ..stored(conn, session)? };
                heads.insert(session.clone(), head);
            }
        }
    }
    Ok(heads.into_iter().map(|(session, head)| SessionHead { session, head: Ok(head) }).collect())
}

/// Fills the table from the rows of `events` (a migration from a layout without heads, inside
/// its transaction): the fold of each session's marks — only the lines that can hold one
/// (`"type":"turn/…` or `"type":"llm/retry…`, which no string value can contain unescaped) are
/// read and decoded. A line that does not decode is left out (its session's load reports it).
pub(super) fn fill(conn: &Connection) -> rusqlite::Result<()> {
    let mut heads: HashMap<String, Head> = HashMap::new();
    {
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
            if let Some(mark) = mark {
                heads.entry(session).or_default().mark(mark);
            }
        }
    }
    write(conn, heads.iter())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_written_in_one_statement_and_heads_read_back_with_the_index_and_the_tail() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(&format!(
            "{TABLE} CREATE TABLE events_by_session (session TEXT NOT NULL, seq INTEGER NOT NULL, \
             row INTEGER NOT NULL, PRIMARY KEY (session, seq)) WITHOUT ROWID;
             INSERT INTO events_by_session VALUES ('a', 0, 1), ('a', 1, 2), ('b', 0, 3), ('c', 0, 4);"
        ))
        .unwrap();
        let head = |next_seq, open_turn, wake_at| Head { next_seq, open_turn, wake_at };
        let mut rows = HashMap::from([
            ("a".to_owned(), head(0, Some(1), Some(1_700_000_000_500))),
            ("b".to_owned(), head(0, Some(2), None)),
        ]);
        write(&conn, rows.iter()).unwrap();
        rows.insert("a".into(), head(0, Some(1), None));
        rows.insert("d".into(), head(0, Some(9), Some(u64::MAX)));
        rows.remove("b");
        write(&conn, rows.iter()).unwrap();
        write(&conn, HashMap::new().iter()).unwrap();
        // `b` has two more events in the tail, `d` only tail events.
        let mut tail = Tail::new(4);
        tail.push("b", [(1, b"x".to_vec()), (2, b"y".to_vec())]);
        tail.push("d", [(0, b"z".to_vec())]);
        let got = read_all(&conn, &tail_ends(&tail)).unwrap();
        let want = [
            ("a", head(2, Some(1), None)),
            ("b", head(3, Some(2), None)),
            ("c", head(1, None, None)),
            ("d", head(1, Some(9), Some(i64::MAX as u64))),
        ];
        let want: Vec<SessionHead> = want
            .into_iter()
            .map(|(session, head)| SessionHead { session: session.into(), head: Ok(head) })
            .collect();
        assert_eq!(got, want);
        assert_eq!(stored(&conn, "none").unwrap(), Head::default());
    }
}
