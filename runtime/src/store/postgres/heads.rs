//! The PostgreSQL store's per-session heads: `session_heads (session, open_turn, wake_at)`,
//! primary key `session` (schema version 3).
//!
//! A row holds what the events' marks decided last for its session — its open turn and pending
//! wake-up — written by the writer in the transaction of the events that changed it, so the
//! table and the events always agree. Only the sessions whose marks a batch changed get a row
//! written (most appends are chunks, which change nothing but the next `seq`), with one `INSERT …
//! SELECT FROM unnest(…) ON CONFLICT DO UPDATE` pipelined with the batch's insert (the heads
//! folded in memory from the requests' marks: no line decoded): a batch of chunks costs what it
//! did, one with marks one more statement. The next `seq` is not kept twice: a reader takes it
//! from the end of each session's range of the primary key (one probe per session). The
//! migration to version 3 fills the table from the rows ([`fill`]). `wake_at` past bigint's range
//! is stored as its largest value.

use std::collections::HashMap;

use tokio_postgres::GenericClient;

use crate::event::Envelope;
use crate::store::{Head, Mark, SessionHead};

/// The migration that adds the table (filled afterwards by [`fill`]).
pub(super) const TABLE: &str = "CREATE TABLE session_heads (
         session text PRIMARY KEY,
         open_turn bigint,
         wake_at bigint
     )";

/// The schema version whose migration adds the table.
pub(super) const VERSION: usize = 3;

/// The one statement of a batch with marks: every row, from three arrays.
const UPSERT: &str = "INSERT INTO session_heads (session, open_turn, wake_at)
     SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[])
     ON CONFLICT (session) DO UPDATE SET open_turn = excluded.open_turn,
         wake_at = excluded.wake_at";

fn to_sql(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn from_sql(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// Writes the rows of `heads` with one statement, on `client` (the batch's transaction);
/// nothing when there are none.
pub(super) async fn write(
    client: &impl GenericClient,
    heads: &HashMap<String, Head>,
) -> Result<(), tokio_postgres::Error> {
    if heads.is_empty() {
        return Ok(());
    }
    let mut sessions = Vec::with_capacity(heads.len());
    let mut turns = Vec::with_capacity(heads.len());
    let mut wakes = Vec::with_capacity(heads.len());
    for (session, head) in heads {
        sessions.push(session.as_str());
        turns.push(head.open_turn.map(i64::from));
        wakes.push(head.wake_at.map(to_sql));
    }
    client.execute(UPSERT, &[&sessions, &turns, &wakes]).await?;
    Ok(())
}

/// The stored heads of `sessions` (those that have a row; the next `seq` is the caller's).
pub(super) async fn stored(
    client: &impl GenericClient,
    sessions: &[&str],
) -> Result<HashMap<String, Head>, tokio_postgres::Error> {
    let rows = client
        .query(
            "SELECT session, open_turn, wake_at FROM session_heads WHERE session = ANY($1)",
            &[&sessions],
        )
        .await?;
    let mut heads = HashMap::with_capacity(rows.len());
    for row in rows {
        let turn: Option<i64> = row.try_get(1)?;
        let wake_at: Option<i64> = row.try_get(2)?;
        let head = Head {
            next_seq: 0,
            open_turn: turn.and_then(|t| u32::try_from(t).ok()),
            wake_at: wake_at.map(from_sql),
        };
        heads.insert(row.try_get(0)?, head);
    }
    Ok(heads)
}

/// Every session's head, in session-id order (Rust's, whatever the database's collation): the
/// sessions by one index probe each (a loose index scan), each one's next `seq` from the end of
/// its range, joined to its row.
pub(super) async fn read_all(
    client: &impl GenericClient,
) -> Result<Vec<SessionHead>, tokio_postgres::Error> {
    let rows = client
        .query(
            "WITH RECURSIVE s(id) AS (
                 SELECT min(session) FROM events
                 UNION ALL
                 SELECT (SELECT min(session) FROM events WHERE session > s.id) FROM s
                 WHERE s.id IS NOT NULL)
             SELECT s.id, (SELECT max(seq) + 1 FROM events e WHERE e.session = s.id),
                 h.open_turn, h.wake_at
             FROM s LEFT JOIN session_heads h ON h.session = s.id WHERE s.id IS NOT NULL",
            &[],
        )
        .await?;
    let mut heads = Vec::with_capacity(rows.len());
    for row in rows {
        let turn: Option<i64> = row.try_get(2)?;
        let wake_at: Option<i64> = row.try_get(3)?;
        let head = Head {
            next_seq: from_sql(row.try_get(1)?),
            open_turn: turn.and_then(|t| u32::try_from(t).ok()),
            wake_at: wake_at.map(from_sql),
        };
        heads.push(SessionHead { session: row.try_get(0)?, head: Ok(head) });
    }
    heads.sort_by(|a, b| a.session.cmp(&b.session));
    Ok(heads)
}

/// The heads of the sessions with an open turn, in session-id order: one probe of the heads
/// table, and each one's next `seq` from the end of its range.
pub(super) async fn read_open(
    client: &impl GenericClient,
) -> Result<Vec<SessionHead>, tokio_postgres::Error> {
    let rows = client
        .query(
            "SELECT h.session, (SELECT max(seq) + 1 FROM events e WHERE e.session = h.session),
                 h.open_turn, h.wake_at
             FROM session_heads h WHERE h.open_turn IS NOT NULL",
            &[],
        )
        .await?;
    let mut heads = Vec::with_capacity(rows.len());
    for row in rows {
        let turn: Option<i64> = row.try_get(2)?;
        let wake_at: Option<i64> = row.try_get(3)?;
        let next: Option<i64> = row.try_get(1)?;
        let head = Head {
            next_seq: next.map_or(0, from_sql),
            open_turn: turn.and_then(|t| u32::try_from(t).ok()),
            wake_at: wake_at.map(from_sql),
        };
        heads.push(SessionHead { session: row.try_get(0)?, head: Ok(head) });
    }
    heads.sort_by(|a, b| a.session.cmp(&b.session));
    Ok(heads)
}

/// Fills the table from the rows of `events` (the migration to [`VERSION`], in its transaction):
/// each session's next `seq`, and the fold of its marks — only the lines that can hold one
/// (`"type":"turn/…` or `"type":"llm/retry…`, which no string value can contain unescaped) are
/// read and decoded. A line that does not decode is left out (its session's load reports it).
pub(super) async fn fill(client: &impl GenericClient) -> Result<(), tokio_postgres::Error> {
    let mut heads: HashMap<String, Head> = HashMap::new();
    for row in
        client.query("SELECT session, max(seq) + 1 FROM events GROUP BY session", &[]).await?
    {
        let head = Head { next_seq: from_sql(row.try_get(1)?), ..Head::default() };
        heads.insert(row.try_get(0)?, head);
    }
    let marks = client
        .query(
            "SELECT session, line FROM events \
             WHERE line LIKE '%\"type\":\"turn/%' OR line LIKE '%\"type\":\"llm/retry%' \
             ORDER BY session, seq",
            &[],
        )
        .await?;
    for row in marks {
        let session: &str = row.try_get(0)?;
        let line: &str = row.try_get(1)?;
        let mark = serde_json::from_str::<Envelope>(line).ok().as_ref().and_then(Mark::of);
        if let Some(mark) = mark {
            heads.entry(session.to_owned()).or_default().mark(mark);
        }
    }
    write(client, &heads).await
}
