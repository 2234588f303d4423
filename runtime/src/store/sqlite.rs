//! [`SqliteStore`]: the logs of many sessions in one SQLite database (WAL mode).
//!
//! Every event is a row of `events (session, seq, line)`, in commit order; `events_by_session`
//! indexes them by `(session, seq)` (the full layout, and how an older database is migrated or
//! refused, is in `layout`). `line` is exactly the JSONL line of the event (without its
//! newline), so a session exported from here is byte for byte what
//! [`JsonlStore`](super::jsonl::JsonlStore) would have written.
//!
//! - `layout`: the tables, their version, migration of the first layout.
//! - `writer`: the single writer thread, its group commit and its folds into the index (see
//!   there for durability and for why the index lags behind the table).
//! - `tail`: the newest events, not yet indexed, kept in memory for the readers.
//! - `flusher`: for `Disk`, the thread that syncs committed batches and answers their callers.
//! - `heads`: the per-session heads (`session_heads`), written with the batches that change
//!   them, one statement per batch.
//! - `settings`: plugin settings, one row per plugin, saved through a connection of their own.
//!
//! Appends go to the writer over a channel and wait for its reply on a `oneshot`, so no tokio
//! worker ever blocks in SQLite. Reads use a second connection (`query_only`) behind a mutex, on
//! tokio's blocking pool; in WAL mode they never wait for the writer. Reading a session is one
//! range scan of the index (joined to its rows) plus the session's events in the tail, both from
//! one snapshot; reading it from a `seq` on ([`SessionStore::load_from`]) is the same scan started
//! at that `seq` in the index. A stored line that does not parse, or a gap or a repeat in a session's `seq`s,
//! is [`StoreError::Corrupt`] with the path `<db>#<session>` and line `seq + 1`; so is a line over
//! the line limit, which the reader's length limit ([`reader_length_limit`]) makes SQLite refuse
//! before it allocates it. Nothing is ever rewritten. Transactions are atomic, so there is never a
//! torn line.
//!
//! Dropping the store closes the writer's queue and joins its thread and the flusher's (after
//! they answered what was already queued and indexed the tail): no thread outlives the store.
//!
//! # One store per database: `<db>.lock`
//!
//! The writer keeps what it knows of the database in memory — each session's next `seq`, the
//! unindexed tail and its fold point — so a second store writing the same database, even to
//! other sessions, would leave rows unindexed and folds that disagree. So the lock that keeps
//! one writer per session is taken on the whole database: opening a store locks `<db>.lock`
//! beside it (see `lock_file`) for the store's life, and a second opener — another process, or
//! another store in this one — is refused with [`StoreError::Locked`] naming the holder (pid,
//! since when). The operating system releases the lock when the process ends, however it ends.
//! Within the store, [`SessionStore::claim`] is the in-process part only (a session handed from
//! one log actor to the next). Readers (`rein check --sqlite`) open the database read-only and
//! take no lock. A database path that is not a regular file (a FIFO, a device) is refused before
//! SQLite opens it.
//!
//! # Why a larger WAL and page cache than SQLite's defaults
//!
//! A fold writes one index page per session it touches, and a checkpoint copies each page once
//! however many commits dirtied it. Checkpointing every 10 000 pages (a WAL of about 40 MiB)
//! rather than every 1 000 lets a checkpoint cover several folds, and a 16 MiB writer cache keeps
//! the index pages a fold touches in memory between folds.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use rusqlite::{Connection, params};
use tokio::sync::oneshot;

use self::tail::{SharedTail, TailLine};
use self::writer::{Request, Writer};
use super::claim::Claims;
use super::lock_file::{self, LockFile};
use super::sync::{Fdatasync, Syncer};
use super::{
    Claim, Durability, Loaded, Mark, SessionHead, SessionStore, SettingsRecord, StoreError,
    StoredSettings, check_continues, check_session_id, line,
};
use crate::event::Envelope;
use crate::future::BoxFuture;

mod flusher;
mod heads;
mod layout;
mod settings;
mod tail;
mod writer;

/// The writer checkpoints the WAL into the database after this many pages (see the module docs).
const WAL_AUTOCHECKPOINT_PAGES: i64 = 10_000;

/// The writer's page cache, in KiB.
const WRITER_CACHE_KIB: i64 = 16 * 1024;

/// How long a connection waits for a lock held by another process before failing.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Session logs in one SQLite database. Share it as `Arc<SqliteStore>`; dropping the last one
/// stops (and joins) the writer and flusher threads.
///
/// ```
/// use std::sync::Arc;
/// use rein_runtime::prelude::*;
///
/// # tokio_test::block_on(async {
/// let dir = tempfile::tempdir()?;
/// let store = Arc::new(SqliteStore::open(dir.path().join("logs.db"), Durability::Disk)?);
/// let runtime = Runtime::builder().store(store.clone()).build().await?;
/// runtime.session("s1").await?;
/// runtime.session("s2").await?;
/// runtime.shutdown().await;
/// assert_eq!(store.sessions().await?, ["s1", "s2"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct SqliteStore {
    path: PathBuf,
    durability: Durability,
    writer: Writer,
    reader: Arc<Mutex<Connection>>,
    /// Plugin settings are saved through this connection (see `settings`).
    settings: Arc<Mutex<Connection>>,
    tail: SharedTail,
    claims: Claims,
    /// Dropped last: the database stays locked until the writer has been joined.
    _lock: LockFile,
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
        match crate::file::open_read(&path) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(StoreError::Io { path: path.display().to_string(), source }),
        }
        let lock = LockFile::acquire(&lock_file::beside(&path), &path.display().to_string())?;
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
        layout::prepare(&conn)
            .map_err(|e| StoreError::Sqlite(format!("{}: {e}", path.display())))?;

        let reader = Connection::open(&path).map_err(sqlite)?;
        reader.busy_timeout(BUSY_TIMEOUT).map_err(sqlite)?;
        reader.pragma_update(None, "query_only", true).map_err(sqlite)?;
        reader
            .set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_LENGTH, reader_length_limit())
            .map_err(sqlite)?;

        let settings = Arc::new(Mutex::new(settings::open(&path)?));
        let tail = SharedTail::default();
        let writer = Writer::spawn(conn, path.clone(), durability, syncer, tail.clone())?;
        let reader = Arc::new(Mutex::new(reader));
        let claims = Claims::default();
        Ok(Self { path, durability, writer, reader, settings, tail, claims, _lock: lock })
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

/// Starts a read transaction on `conn` and, under the tail's lock, fixes its snapshot and takes
/// what `copy` wants of the tail: the indexed rows read later in the transaction and the copy
/// meet at the same fold point. The transaction ends when the returned guard drops.
fn snapshot<'c, T>(
    conn: &'c Connection,
    tail: &SharedTail,
    copy: impl FnOnce(&tail::Tail) -> T,
) -> Result<(rusqlite::Transaction<'c>, T), rusqlite::Error> {
    let transaction = conn.unchecked_transaction()?;
    let tail = tail::lock(tail);
    let upto: i64 = transaction.query_row("SELECT upto FROM events_indexed", [], |r| r.get(0))?;
    if upto == tail.upto() {
        let copied = copy(&tail);
        return Ok((transaction, copied));
    }
    // The writer changes both under the lock this read holds, so this should not happen; if it
    // does, the snapshot is the truth: read its tail rather than fail the read.
    drop(tail);
    tracing::warn!(upto, "the SQLite store's tail was not at the fold point; reading it again");
    let fresh = tail::Tail::read(&transaction)?;
    let copied = copy(&fresh);
    Ok((transaction, copied))
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

/// Reads one session's events (its indexed rows, then its tail) and decodes them, checking that
/// `seq` runs 0, 1, 2, ….
fn load_rows(
    conn: &Connection,
    tail: &SharedTail,
    db: &Path,
    session: &str,
) -> Result<Option<Loaded>, StoreError> {
    let sqlite = |e: rusqlite::Error| StoreError::Sqlite(format!("{}: {e}", db.display()));
    let (_read, tail_lines) = snapshot(conn, tail, |tail| tail.lines(session)).map_err(sqlite)?;
    let mut decoder = Decoder { db, session, first: 0, events: Vec::new() };
    let mut query = conn
        .prepare_cached(
            "SELECT e.seq, e.line FROM events_by_session b JOIN events e ON e.rowid = b.row \
             WHERE b.session = ?1 ORDER BY b.seq",
        )
        .map_err(sqlite)?;
    let rows = query.query(params![session]).map_err(sqlite)?;
    decoder.rows(rows, &tail_lines)?;
    let events = decoder.events;
    Ok(if events.is_empty() { None } else { Some(Loaded { events, torn: None }) })
}

/// Reads one session's events from `from` on (its indexed rows with `seq >= from`, a range
/// of the index, then its tail events from there) and decodes them, checking that `seq` runs
/// `from, from + 1, …`.
fn load_rows_from(
    conn: &Connection,
    tail: &SharedTail,
    db: &Path,
    session: &str,
    from: u64,
) -> Result<Vec<Envelope>, StoreError> {
    let sqlite = |e: rusqlite::Error| StoreError::Sqlite(format!("{}: {e}", db.display()));
    let Ok(start) = i64::try_from(from) else { return Ok(Vec::new()) };
    let (_read, tail_lines) =
        snapshot(conn, tail, |tail| tail.lines_from(session, start)).map_err(sqlite)?;
    let mut decoder = Decoder { db, session, first: from, events: Vec::new() };
    let mut query = conn
        .prepare_cached(
            "SELECT e.seq, e.line FROM events_by_session b JOIN events e ON e.rowid = b.row \
             WHERE b.session = ?1 AND b.seq >= ?2 ORDER BY b.seq",
        )
        .map_err(sqlite)?;
    let rows = query.query(params![session, start]).map_err(sqlite)?;
    decoder.rows(rows, &tail_lines)?;
    Ok(decoder.events)
}

/// Decodes a session's rows in order from `seq` `first` on, checking their `seq`s.
struct Decoder<'a> {
    db: &'a Path,
    session: &'a str,
    first: u64,
    events: Vec<Envelope>,
}

impl Decoder<'_> {
    /// The indexed `rows` (`seq`, `line`), then the tail's lines.
    fn rows(&mut self, mut rows: rusqlite::Rows<'_>, tail: &[TailLine]) -> Result<(), StoreError> {
        let sqlite = |e: rusqlite::Error| StoreError::Sqlite(format!("{}: {e}", self.db.display()));
        loop {
            let row = match rows.next() {
                Ok(Some(row)) => row,
                Ok(None) => break,
                Err(e) if is_too_big(&e) => {
                    let limit = line::MAX_LINE_BYTES;
                    return Err(
                        self.corrupt(format!("the line is over the limit of {limit} bytes"))
                    );
                }
                Err(e) => return Err(sqlite(e)),
            };
            let seq: i64 = row.get(0).map_err(sqlite)?;
            match row.get_ref(1).map_err(sqlite)? {
                rusqlite::types::ValueRef::Text(bytes) => self.push(seq, bytes)?,
                other => {
                    return Err(self.corrupt(format!("line is {}, not TEXT", other.data_type())));
                }
            }
        }
        for (seq, line) in tail {
            self.push(*seq, line)?;
        }
        Ok(())
    }

    /// The next row, stored with `seq` and holding `line`.
    fn push(&mut self, seq: i64, line: &[u8]) -> Result<(), StoreError> {
        let expected = self.first + self.events.len() as u64;
        if u64::try_from(seq).ok() != Some(expected) {
            let what =
                if u64::try_from(seq).is_ok_and(|s| s < expected) { "a repeat" } else { "a gap" };
            return Err(self.corrupt(format!(
                "row seq {seq} where seq {expected} was expected ({what} in the log)"
            )));
        }
        let event = line::decode(line, expected).map_err(|m| self.corrupt(m))?;
        self.events.push(event);
        Ok(())
    }

    /// Corruption at the next expected row.
    fn corrupt(&self, message: String) -> StoreError {
        StoreError::Corrupt {
            path: format!("{}#{}", self.db.display(), self.session),
            line: self.first + self.events.len() as u64 + 1,
            message,
        }
    }
}

/// Every session id, in order: one index probe per indexed session (a "loose index scan"),
/// and the sessions in the tail.
fn list_sessions(
    conn: &Connection,
    tail: &SharedTail,
    db: &Path,
) -> Result<Vec<String>, StoreError> {
    let sqlite = |e: rusqlite::Error| StoreError::Sqlite(format!("{}: {e}", db.display()));
    let (_read, in_tail) = snapshot(conn, tail, |tail| {
        tail.sessions().map(str::to_owned).collect::<std::collections::BTreeSet<String>>()
    })
    .map_err(sqlite)?;
    let mut query = conn
        .prepare_cached(
            "WITH RECURSIVE s(id) AS (
                 SELECT min(session) FROM events_by_session
                 UNION ALL
                 SELECT (SELECT min(session) FROM events_by_session WHERE session > s.id) FROM s
                 WHERE s.id IS NOT NULL)
             SELECT id FROM s WHERE id IS NOT NULL",
        )
        .map_err(sqlite)?;
    let ids = query.query_map([], |row| row.get::<_, String>(0)).map_err(sqlite)?;
    let mut all = ids.collect::<Result<std::collections::BTreeSet<_>, _>>().map_err(sqlite)?;
    all.extend(in_tail);
    Ok(all.into_iter().collect())
}

/// Runs work on the blocking pool with one of the store's connections (the reader's, or the
/// settings').
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
            let marks = events.iter().filter_map(Mark::of).collect();
            let (reply, done) = oneshot::channel();
            let session = session.to_owned();
            self.writer.send(Request { session, first, lines, marks, reply })?;
            done.await.unwrap_or(Err(StoreError::Closed))
        })
    }

    fn claim<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Claim, StoreError>> {
        Box::pin(async move {
            check_session_id(session)?;
            // Other processes are kept out by the database's lock, held since `open`.
            Ok(Claim::new(self.claims.take(session).await))
        })
    }

    fn load<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Option<Loaded>, StoreError>> {
        Box::pin(async move {
            check_session_id(session)?;
            let (db, tail) = (self.path.clone(), self.tail.clone());
            let session = session.to_owned();
            read(&self.reader, &self.path, move |conn| load_rows(conn, &tail, &db, &session)).await
        })
    }

    fn load_from<'a>(
        &'a self,
        session: &'a str,
        seq: u64,
    ) -> BoxFuture<'a, Result<Vec<Envelope>, StoreError>> {
        Box::pin(async move {
            check_session_id(session)?;
            let (db, tail) = (self.path.clone(), self.tail.clone());
            let session = session.to_owned();
            read(&self.reader, &self.path, move |conn| {
                load_rows_from(conn, &tail, &db, &session, seq)
            })
            .await
        })
    }

    fn sessions(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        Box::pin(async move {
            let (db, tail) = (self.path.clone(), self.tail.clone());
            read(&self.reader, &self.path, move |conn| list_sessions(conn, &tail, &db)).await
        })
    }

    fn heads(&self) -> BoxFuture<'_, Result<Vec<SessionHead>, StoreError>> {
        Box::pin(async move {
            let (db, tail) = (self.path.clone(), self.tail.clone());
            read(&self.reader, &self.path, move |conn| {
                let sqlite =
                    |e: rusqlite::Error| StoreError::Sqlite(format!("{}: {e}", db.display()));
                let (_read, ends) = snapshot(conn, &tail, heads::tail_ends).map_err(sqlite)?;
                heads::read_all(conn, &ends).map_err(sqlite)
            })
            .await
        })
    }

    fn save_settings<'a>(
        &'a self,
        record: &'a SettingsRecord,
        base: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let (db, record) = (self.path.clone(), record.clone());
            read(&self.settings, &self.path, move |conn| settings::save(conn, &db, &record, base))
                .await
        })
    }

    fn load_settings(&self) -> BoxFuture<'_, Result<Vec<StoredSettings>, StoreError>> {
        Box::pin(async move {
            let db = self.path.clone();
            read(&self.reader, &self.path, move |conn| settings::load(conn, &db)).await
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
    async fn a_read_whose_snapshot_is_past_the_tail_reads_the_snapshot_tail() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("events.db");
        let store = SqliteStore::open(&db, Durability::Os).unwrap();
        store.append("s", &[idle(0), idle(1)]).await.unwrap();
        // The rows are folded behind the store's back: its tail still holds them, at the old
        // fold point, while the database says they are indexed.
        let conn = raw(&db);
        conn.execute_batch(
            "INSERT INTO events_by_session (session, seq, row) \
               SELECT session, seq, rowid FROM events; \
             UPDATE events_indexed SET upto = (SELECT max(rowid) FROM events);",
        )
        .unwrap();
        let loaded = store.load("s").await.unwrap().unwrap();
        assert_eq!(loaded.events, [idle(0), idle(1)], "each event once, none lost");
        assert_eq!(store.sessions().await.unwrap(), ["s"]);
    }

    #[tokio::test]
    async fn the_tables_have_the_documented_layout_and_hold_jsonl_lines() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("events.db");
        let store = SqliteStore::open(&db, Durability::Os).unwrap();
        store.append("s", &[idle(0), idle(1)]).await.unwrap();
        let conn = raw(&db);
        let mut query = conn
            .prepare("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name")
            .unwrap();
        let sql: Vec<String> =
            query.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
        assert_eq!(
            sql,
            [
                "CREATE TABLE events (session TEXT NOT NULL, seq INTEGER NOT NULL, line TEXT NOT NULL)",
                "CREATE TABLE events_by_session (session TEXT NOT NULL, seq INTEGER NOT NULL, row INTEGER NOT NULL, PRIMARY KEY (session, seq)) WITHOUT ROWID",
                "CREATE TABLE events_indexed (upto INTEGER NOT NULL)",
                "CREATE TABLE session_heads (session TEXT PRIMARY KEY, open_turn INTEGER, wake_at INTEGER) WITHOUT ROWID",
                "CREATE TABLE settings (plugin TEXT PRIMARY KEY, revision INTEGER NOT NULL, settings TEXT NOT NULL)",
            ]
        );
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(version, 4);
        let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
        assert_eq!(mode, "wal");
        // Before any fold, `events` already holds every event.
        let line: String = conn
            .query_row("SELECT line FROM events WHERE session = 's' AND seq = 1", [], |r| r.get(0))
            .unwrap();
        assert_eq!(line, r#"{"seq":1,"time":1,"type":"agent/idle","data":{}}"#);
        drop(store);
        let indexed: i64 =
            conn.query_row("SELECT count(*) FROM events_by_session", [], |r| r.get(0)).unwrap();
        assert_eq!(indexed, 2, "closing the store indexes its tail");
    }

    #[tokio::test]
    async fn a_bad_stored_line_or_a_gap_is_corrupt_at_db_hash_session_and_seq_plus_one() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("events.db");
        let store = SqliteStore::open(&db, Durability::Os).unwrap();
        store.append("s", &[idle(0), idle(1), idle(2)]).await.unwrap();
        store.append("t", &[idle(0), idle(1), idle(2)]).await.unwrap();
        store.append("u", &[idle(0), idle(1)]).await.unwrap();
        drop(store);
        let conn = raw(&db);
        conn.execute("UPDATE events SET line = 'nope' WHERE session = 's' AND seq = 1", [])
            .unwrap();
        conn.execute("DELETE FROM events WHERE session = 't' AND seq = 1", []).unwrap();
        conn.execute("UPDATE events SET line = x'00ff' WHERE session = 'u' AND seq = 0", [])
            .unwrap();
        let before = rows_of(&conn);

        let store = SqliteStore::open(&db, Durability::Os).unwrap();
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
        let err = store.load("u").await.unwrap_err();
        assert!(
            matches!(&err, StoreError::Corrupt { line: 1, message, .. } if message.contains("Blob")),
            "{err}"
        );
        drop(store);
        assert_eq!(rows_of(&conn), before, "nothing was rewritten");
    }

    /// Every row of `events`, in rowid order.
    fn rows_of(conn: &Connection) -> Vec<(String, i64, String)> {
        let mut query =
            conn.prepare("SELECT session, seq, hex(line) FROM events ORDER BY rowid").unwrap();
        query
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    #[tokio::test]
    async fn a_stored_line_over_the_limit_is_corrupt_and_never_read_into_memory() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("events.db");
        let store = SqliteStore::open(&db, Durability::Os).unwrap();
        store.append("s", &[idle(0)]).await.unwrap();
        drop(store);
        let huge = "x".repeat(line::MAX_LINE_BYTES + 8192);
        raw(&db).execute("INSERT INTO events VALUES ('s', 1, ?1)", [huge]).unwrap();
        let store = SqliteStore::open(&db, Durability::Os).unwrap();
        let err = store.load("s").await.unwrap_err();
        let want = format!("{}#s", db.display());
        assert!(
            matches!(&err, StoreError::Corrupt { path, line: 2, message }
                if *path == want && message.contains("over the limit")),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_row_written_behind_the_stores_back_is_reported_at_its_session_and_seq() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("events.db");
        let store = SqliteStore::open(&db, Durability::Os).unwrap();
        store.append("s", &[idle(0)]).await.unwrap();
        let line = line::encode(&idle(1)).unwrap();
        raw(&db).execute("INSERT INTO events VALUES ('s', 1, ?1)", [line]).unwrap();
        // The store does not read behind its own back: it takes s/1 as well.
        store.append("s", &[idle(1)]).await.unwrap();
        store.append("t", &[idle(0)]).await.unwrap();
        drop(store);

        // Reopened, it finds two rows for s/1: s does not load, t does, nothing is rewritten.
        let before = rows_of(&raw(&db));
        assert_eq!(before.len(), 4);
        let store = SqliteStore::open(&db, Durability::Os).unwrap();
        let err = store.load("s").await.unwrap_err();
        assert!(
            matches!(&err, StoreError::Corrupt { line: 3, message, .. } if message.contains("repeat")),
            "{err}"
        );
        assert_eq!(store.load("t").await.unwrap().unwrap().events, [idle(0)]);
        assert_eq!(store.sessions().await.unwrap(), ["s", "t"]);
        store.append("t", &[idle(1)]).await.unwrap();
        drop(store);
        let after = rows_of(&raw(&db));
        assert_eq!(after[..4], before[..], "the rows that were there are kept as they were");
    }

    #[tokio::test]
    async fn a_first_layout_database_opens_migrated() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("events.db");
        let conn = raw(&db);
        conn.execute_batch(
            "CREATE TABLE events (session TEXT NOT NULL, seq INTEGER NOT NULL, line TEXT NOT NULL, \
             PRIMARY KEY (session, seq)) WITHOUT ROWID",
        )
        .unwrap();
        for seq in 0..3 {
            let line = line::encode(&idle(seq)).unwrap();
            conn.execute("INSERT INTO events VALUES ('old', ?1, ?2)", params![seq as i64, line])
                .unwrap();
        }
        drop(conn);
        let store = SqliteStore::open(&db, Durability::Os).unwrap();
        assert_eq!(store.load("old").await.unwrap().unwrap().events, [idle(0), idle(1), idle(2)]);
        store.append("old", &[idle(3)]).await.unwrap();
        assert_eq!(store.load("old").await.unwrap().unwrap().events.len(), 4);

        raw(&db).execute_batch("PRAGMA user_version = 9").unwrap();
        drop(store);
        let err = SqliteStore::open(&db, Durability::Os).unwrap_err();
        assert!(err.to_string().contains("layout version 9"), "{err}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_during_folds_see_every_event_once() {
        // More events than one fold takes, appended while another task keeps reading: every
        // read is a contiguous prefix, and the last one is everything.
        const PER_APPEND: u64 = 500;
        const APPENDS: u64 = (writer::FOLD_ROWS as u64 * 2) / PER_APPEND + 3;
        let dir = tempfile::tempdir().unwrap();
        let store =
            Arc::new(SqliteStore::open(dir.path().join("events.db"), Durability::Os).unwrap());
        let reader = {
            let store = store.clone();
            tokio::spawn(async move {
                let mut seen = 0;
                while seen < PER_APPEND * APPENDS {
                    let events =
                        store.load("s").await.unwrap().map(|l| l.events).unwrap_or_default();
                    assert!(events.len() as u64 >= seen, "a read went backwards");
                    seen = events.len() as u64;
                    assert!(events.iter().enumerate().all(|(i, e)| e.seq == i as u64));
                    tokio::task::yield_now().await;
                }
            })
        };
        for append in 0..APPENDS {
            let batch: Vec<Envelope> =
                (append * PER_APPEND..(append + 1) * PER_APPEND).map(idle).collect();
            store.append("s", &batch).await.unwrap();
        }
        reader.await.unwrap();
        let events = store.load("s").await.unwrap().unwrap().events;
        assert_eq!(events.len() as u64, PER_APPEND * APPENDS);
        assert_eq!(store.sessions().await.unwrap(), ["s"]);
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
