//! [`SqliteStore`]: the logs of many sessions in one SQLite database (WAL mode).
//!
//! One table, which other tools read, so its shape is fixed:
//!
//! ```sql
//! CREATE TABLE IF NOT EXISTS events (
//!     session TEXT NOT NULL, seq INTEGER NOT NULL, line TEXT NOT NULL,
//!     PRIMARY KEY (session, seq)) WITHOUT ROWID
//! ```
//!
//! `line` is exactly the JSONL line of the event (without its newline), so a session exported
//! from here is byte for byte what [`JsonlStore`](super::jsonl::JsonlStore) would have written.
//!
//! - `writer`: the single writer thread and its group commit (see there for durability).
//! - `flusher`: for `Disk`, the thread that syncs committed batches and answers their callers.
//!
//! Appends go to the writer over a channel and wait for its reply on a `oneshot`, so no tokio
//! worker ever blocks in SQLite. Reads use a second connection (`query_only`) behind a mutex, on
//! tokio's blocking pool; in WAL mode they never wait for the writer. A stored line that does not
//! parse, or a gap in a session's `seq`s, is [`StoreError::Corrupt`] with the path
//! `<db>#<session>` and line `seq + 1`; so is a line over the line limit, which the reader's
//! length limit ([`reader_length_limit`]) makes SQLite refuse before it allocates it.
//! Transactions are atomic, so there is never a torn line.
//!
//! Dropping the store closes the writer's queue and joins its thread and the flusher's (after
//! they answered what was already queued): no thread outlives the store.
//!
//! # Why a larger WAL and page cache than SQLite's defaults
//!
//! The table is clustered by `(session, seq)`: with many sessions appending at once, each append
//! lands on its own B-tree page, and every commit writes one WAL frame per page it dirtied. With
//! SQLite's default checkpoint every 1 000 pages, a writer serving 256 sessions checkpoints every
//! few commits, copying (and syncing) the same tail pages over and over. Checkpointing every
//! 10 000 pages (a WAL of about 40 MiB) lets a checkpoint copy each hot page once for many
//! commits, and a 16 MiB writer cache keeps those pages in memory; together they halved the
//! writer's cost per append in our measurements.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use rusqlite::{Connection, params};
use tokio::sync::oneshot;

use self::writer::{Request, Writer};
use super::sync::{Fdatasync, Syncer};
use super::{
    BoxFuture, Durability, Loaded, SessionStore, StoreError, check_continues, check_session_id,
    line,
};
use crate::event::Envelope;

mod flusher;
mod writer;

/// The schema, exactly (other tools read this table).
const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS events (session TEXT NOT NULL, seq INTEGER NOT NULL, line TEXT NOT NULL, PRIMARY KEY (session, seq)) WITHOUT ROWID";

/// The writer checkpoints the WAL into the database after this many pages (see the module docs).
const WAL_AUTOCHECKPOINT_PAGES: i64 = 10_000;

/// The writer's page cache, in KiB.
const WRITER_CACHE_KIB: i64 = 16 * 1024;

/// How long a connection waits for a lock held by another process before failing.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Session logs in one SQLite database. Share it as `Arc<SqliteStore>`; dropping the last one
/// stops (and joins) the writer and flusher threads.
pub struct SqliteStore {
    path: PathBuf,
    durability: Durability,
    writer: Writer,
    reader: Arc<Mutex<Connection>>,
}

impl SqliteStore {
    /// Opens (or creates) the database at `path` in WAL mode, with `fdatasync` for
    /// [`Durability::Disk`].
    pub fn open(path: impl Into<PathBuf>, durability: Durability) -> Result<Self, StoreError> {
        Self::open_with_syncer(path, durability, Arc::new(Fdatasync))
    }

    /// Like [`SqliteStore::open`], syncing through `syncer` (tests count syncs with a
    /// [`CountingSyncer`](super::sync::CountingSyncer)). With `Disk`, opening syncs the WAL
    /// file and its directory once.
    pub fn open_with_syncer(
        path: impl Into<PathBuf>,
        durability: Durability,
        syncer: Arc<dyn Syncer>,
    ) -> Result<Self, StoreError> {
        let path = path.into();
        let sqlite = |e: rusqlite::Error| StoreError::Sqlite(format!("{}: {e}", path.display()));
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|source| StoreError::Io { path: dir.display().to_string(), source })?;
        }
        let conn = Connection::open(&path).map_err(sqlite)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(sqlite)?;
        let mode: String =
            conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0)).map_err(sqlite)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Sqlite(format!(
                "{}: cannot use WAL mode (journal_mode is {mode})",
                path.display()
            )));
        }
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(sqlite)?;
        conn.pragma_update(None, "wal_autocheckpoint", WAL_AUTOCHECKPOINT_PAGES).map_err(sqlite)?;
        conn.pragma_update(None, "cache_size", -WRITER_CACHE_KIB).map_err(sqlite)?;
        conn.execute_batch(SCHEMA).map_err(sqlite)?;

        let reader = Connection::open(&path).map_err(sqlite)?;
        reader.busy_timeout(BUSY_TIMEOUT).map_err(sqlite)?;
        reader.pragma_update(None, "query_only", true).map_err(sqlite)?;
        reader
            .set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_LENGTH, reader_length_limit())
            .map_err(sqlite)?;

        let writer = Writer::spawn(conn, path.clone(), durability, syncer)?;
        Ok(Self { path, durability, writer, reader: Arc::new(Mutex::new(reader)) })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .field("durability", &self.durability)
            .finish_non_exhaustive()
    }
}

/// The longest value a reader of the table lets SQLite hand it: a line of the line limit, with
/// room for the rest of its row (SQLite's own default is about 1 GB). A longer value fails with
/// `SQLITE_TOOBIG` instead of being read into memory.
pub fn reader_length_limit() -> i32 {
    i32::try_from(line::MAX_LINE_BYTES + 4096).unwrap_or(i32::MAX)
}

/// Whether `error` is SQLite refusing a value over the connection's length limit.
pub fn is_too_big(error: &rusqlite::Error) -> bool {
    error.sqlite_error_code() == Some(rusqlite::ErrorCode::TooBig)
}

/// Reads one session's rows and decodes them, checking `seq` runs 0, 1, 2, ….
fn load_rows(conn: &Connection, db: &Path, session: &str) -> Result<Option<Loaded>, StoreError> {
    let sqlite = |e: rusqlite::Error| StoreError::Sqlite(format!("{}: {e}", db.display()));
    let mut query = conn
        .prepare_cached("SELECT seq, line FROM events WHERE session = ?1 ORDER BY seq")
        .map_err(sqlite)?;
    let mut rows = query.query(params![session]).map_err(sqlite)?;
    let mut events = Vec::new();
    let corrupt = |line: u64, message: String| StoreError::Corrupt {
        path: format!("{}#{session}", db.display()),
        line,
        message,
    };
    loop {
        let expected = events.len() as u64;
        let row = match rows.next() {
            Ok(Some(row)) => row,
            Ok(None) => break,
            Err(e) if is_too_big(&e) => {
                let limit = line::MAX_LINE_BYTES;
                return Err(corrupt(
                    expected + 1,
                    format!("the line is over the limit of {limit} bytes"),
                ));
            }
            Err(e) => return Err(sqlite(e)),
        };
        let seq: i64 = row.get(0).map_err(sqlite)?;
        if u64::try_from(seq).ok() != Some(expected) {
            return Err(corrupt(
                expected + 1,
                format!("row seq {seq} where seq {expected} was expected (a gap in the log)"),
            ));
        }
        let text = row.get_ref(1).map_err(sqlite)?;
        let bytes = match text {
            rusqlite::types::ValueRef::Text(bytes) => bytes,
            other => {
                let kind = other.data_type();
                return Err(corrupt(expected + 1, format!("line is {kind}, not TEXT")));
            }
        };
        events.push(line::decode(bytes, expected).map_err(|m| corrupt(expected + 1, m))?);
    }
    Ok(if events.is_empty() { None } else { Some(Loaded { events, torn: None }) })
}

/// Every session id, one index probe per session (a "loose index scan" over the primary key).
fn list_sessions(conn: &Connection, db: &Path) -> Result<Vec<String>, StoreError> {
    let sqlite = |e: rusqlite::Error| StoreError::Sqlite(format!("{}: {e}", db.display()));
    let mut query = conn
        .prepare_cached(
            "WITH RECURSIVE s(id) AS (
                 SELECT min(session) FROM events
                 UNION ALL
                 SELECT (SELECT min(session) FROM events WHERE session > s.id) FROM s
                 WHERE s.id IS NOT NULL)
             SELECT id FROM s WHERE id IS NOT NULL",
        )
        .map_err(sqlite)?;
    let ids = query.query_map([], |row| row.get::<_, String>(0)).map_err(sqlite)?;
    ids.collect::<Result<Vec<_>, _>>().map_err(sqlite)
}

/// Runs a read on the blocking pool with the reader connection.
async fn read<T: Send + 'static>(
    reader: &Arc<Mutex<Connection>>,
    db: &Path,
    work: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    let reader = reader.clone();
    let ran = tokio::task::spawn_blocking(move || {
        let conn = reader.lock().unwrap_or_else(PoisonError::into_inner);
        work(&conn)
    })
    .await;
    ran.unwrap_or_else(|e| {
        Err(StoreError::Sqlite(format!("{}: read task failed: {e}", db.display())))
    })
}

impl SessionStore for SqliteStore {
    fn durability(&self) -> Durability {
        self.durability
    }

    fn append<'a>(
        &'a self,
        session: &'a str,
        events: &'a [Envelope],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            check_session_id(session)?;
            let Some(first) = events.first().map(|e| e.seq) else { return Ok(()) };
            check_continues(session, first, events)?;
            let mut lines = Vec::with_capacity(events.len());
            for event in events {
                let seq = i64::try_from(event.seq).map_err(|_| {
                    StoreError::Sqlite(format!("seq {} does not fit SQLite's INTEGER", event.seq))
                })?;
                let json = line::encode(event).map_err(|source| StoreError::Unwritable {
                    session: session.to_owned(),
                    source,
                })?;
                lines.push((seq, json));
            }
            let (reply, done) = oneshot::channel();
            self.writer.send(Request { session: session.to_owned(), first, lines, reply })?;
            done.await.unwrap_or(Err(StoreError::Closed))
        })
    }

    fn load<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Option<Loaded>, StoreError>> {
        Box::pin(async move {
            check_session_id(session)?;
            let db = self.path.clone();
            let session = session.to_owned();
            read(&self.reader, &self.path, move |conn| load_rows(conn, &db, &session)).await
        })
    }

    fn sessions(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        Box::pin(async move {
            let db = self.path.clone();
            read(&self.reader, &self.path, move |conn| list_sessions(conn, &db)).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{AgentIdle, Event};

    fn idle(seq: u64) -> Envelope {
        Envelope { seq, time: seq, event: Event::AgentIdle(AgentIdle {}) }
    }

    fn raw(path: &Path) -> Connection {
        Connection::open(path).unwrap()
    }

    #[tokio::test]
    async fn the_table_has_the_documented_schema_and_holds_jsonl_lines() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("events.db");
        let store = SqliteStore::open(&db, Durability::Os).unwrap();
        store.append("s", &[idle(0), idle(1)]).await.unwrap();
        let conn = raw(&db);
        let sql: String = conn
            .query_row("SELECT sql FROM sqlite_master WHERE name = 'events'", [], |r| r.get(0))
            .unwrap();
        assert_eq!(format!("CREATE TABLE IF NOT EXISTS {}", &sql["CREATE TABLE ".len()..]), SCHEMA);
        let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
        assert_eq!(mode, "wal");
        let line: String = conn
            .query_row("SELECT line FROM events WHERE session = 's' AND seq = 1", [], |r| r.get(0))
            .unwrap();
        assert_eq!(line, r#"{"seq":1,"time":1,"type":"agent/idle","data":{}}"#);
    }

    #[tokio::test]
    async fn a_bad_stored_line_or_a_gap_is_corrupt_at_db_hash_session_and_seq_plus_one() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("events.db");
        let store = SqliteStore::open(&db, Durability::Os).unwrap();
        store.append("s", &[idle(0), idle(1), idle(2)]).await.unwrap();
        store.append("t", &[idle(0), idle(1), idle(2)]).await.unwrap();
        let conn = raw(&db);
        conn.execute("UPDATE events SET line = 'nope' WHERE session = 's' AND seq = 1", [])
            .unwrap();
        conn.execute("DELETE FROM events WHERE session = 't' AND seq = 1", []).unwrap();

        let err = store.load("s").await.unwrap_err();
        let want = format!("{}#s", db.display());
        assert!(
            matches!(&err, StoreError::Corrupt { path, line: 2, .. } if *path == want),
            "{err}"
        );
        let err = store.load("t").await.unwrap_err();
        assert!(
            matches!(&err, StoreError::Corrupt { line: 2, message, .. } if message.contains("gap")),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_stored_line_over_the_limit_is_corrupt_and_never_read_into_memory() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("events.db");
        let store = SqliteStore::open(&db, Durability::Os).unwrap();
        store.append("s", &[idle(0)]).await.unwrap();
        let huge = "x".repeat(line::MAX_LINE_BYTES + 8192);
        raw(&db).execute("INSERT INTO events VALUES ('s', 1, ?1)", [huge]).unwrap();
        let err = store.load("s").await.unwrap_err();
        let want = format!("{}#s", db.display());
        assert!(
            matches!(&err, StoreError::Corrupt { path, line: 2, message }
                if *path == want && message.contains("over the limit")),
            "{err}"
        );
    }

    #[tokio::test]
    async fn sessions_are_listed_once_each_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("events.db"), Durability::Os).unwrap();
        assert!(store.sessions().await.unwrap().is_empty());
        for session in ["c", "a", "b.1"] {
            store.append(session, &[idle(0), idle(1)]).await.unwrap();
        }
        assert_eq!(store.sessions().await.unwrap(), ["a", "b.1", "c"]);
        assert_eq!(store.load("zzz").await.unwrap(), None);
    }

    #[tokio::test]
    async fn an_append_that_does_not_continue_the_log_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("events.db"), Durability::Os).unwrap();
        let err = store.append("s", &[idle(1)]).await.unwrap_err();
        assert!(matches!(err, StoreError::OutOfOrder { expected: 0, found: 1, .. }), "{err}");
        store.append("s", &[idle(0)]).await.unwrap();
        let err = store.append("s", &[idle(0), idle(1)]).await.unwrap_err();
        assert!(matches!(err, StoreError::OutOfOrder { expected: 1, found: 0, .. }), "{err}");
        assert_eq!(store.load("s").await.unwrap().unwrap().events, vec![idle(0)]);
    }

    #[tokio::test]
    async fn a_row_written_behind_the_writers_back_is_refused_then_the_table_is_asked_again() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("events.db");
        let store = SqliteStore::open(&db, Durability::Os).unwrap();
        store.append("s", &[idle(0)]).await.unwrap();
        let line = line::encode(&idle(1)).unwrap();
        raw(&db).execute("INSERT INTO events VALUES ('s', 1, ?1)", [line]).unwrap();

        let err = store.append("s", &[idle(1)]).await.unwrap_err();
        assert!(matches!(&err, StoreError::Sqlite(m) if m.contains("UNIQUE")), "{err}");
        store.append("s", &[idle(2)]).await.unwrap();
        let events = store.load("s").await.unwrap().unwrap().events;
        assert_eq!(events, [idle(0), idle(1), idle(2)]);
    }

    #[test]
    fn dropping_the_store_joins_its_writer_thread() {
        // The writer thread owns a clone of the syncer until it ends: if `drop` returned before
        // the thread was joined, the clone could still be alive.
        let dir = tempfile::tempdir().unwrap();
        let syncer = Arc::new(crate::store::sync::CountingSyncer::fdatasync());
        let store = SqliteStore::open_with_syncer(
            dir.path().join("events.db"),
            Durability::Disk,
            syncer.clone(),
        )
        .unwrap();
        assert_eq!(Arc::strong_count(&syncer), 2);
        drop(store);
        assert_eq!(Arc::strong_count(&syncer), 1);
    }
}
