//! The SQLite store's single writer: a dedicated OS thread that owns the write connection and
//! commits the appends of all sessions in groups.
//!
//! # Why one thread, and why group commit
//!
//! SQLite allows one writer at a time, and every commit that must be durable costs one sync of
//! the WAL — the expensive part. With one writer draining a queue, N appends that arrive while a
//! commit is in progress share the next transaction and its single sync: the cost of durability
//! is paid per batch, not per append, so throughput grows with concurrency instead of collapsing
//! under lock contention. The thread is a plain OS thread (not a tokio task, not the blocking
//! pool) because it blocks in SQLite and in `fdatasync` for its whole life; callers wait on a
//! `oneshot` without blocking a tokio worker.
//!
//! # Why the writer remembers each session's next `seq`
//!
//! Every request is checked to continue its session's log (a store never acknowledges what it
//! could not read back). Reading the last `seq` from the table costs a B-tree probe per request,
//! so the writer keeps the next `seq` of the sessions it wrote (updated only when a transaction
//! commits; forgotten for a session whose insert fails, and wholesale past 100 000 sessions). As
//! with the JSONL store, a database is owned by one store: appends from another process to the
//! same sessions are not expected (the primary key still refuses a duplicate).
//!
//! # Why a savepoint per request
//!
//! A batch mixes requests from unrelated sessions. Each request runs inside its own `SAVEPOINT`:
//! one that fails (a stale `seq`, say) is rolled back alone and only its caller gets the error;
//! the others still commit together.
//!
//! # Why `synchronous=NORMAL` plus our own sync of the `-wal` file
//!
//! In WAL mode, `synchronous=FULL` syncs the WAL at every commit and `NORMAL` only at
//! checkpoints. For [`Durability::Disk`] the writer uses `NORMAL` and, after each commit, calls
//! the store's [`Syncer`] on the `-wal` file before acknowledging the batch: the committed frames
//! are on the disk when the callers hear back, which is what `FULL` guarantees, but the sync goes
//! through the `Syncer`, where tests can count it. The directory is synced once when the writer
//! first opens the WAL, so the WAL's own name survives a power loss too. For [`Durability::Os`]
//! the commit alone is the acknowledgement (the frames are in the OS; a process crash keeps them).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;

use rusqlite::{Connection, params};
use tokio::sync::oneshot;

use crate::store::sync::Syncer;
use crate::store::{Durability, StoreError};

/// At most this many requests share one transaction (a bound on latency under a flood).
const MAX_BATCH: usize = 4096;

/// The writer remembers the next `seq` of at most this many sessions (then starts afresh).
const MAX_CACHED_SESSIONS: usize = 100_000;

/// One append: `lines` are `(seq, json)` in order, all for `session`.
pub(super) struct Request {
    pub(super) session: String,
    pub(super) first: u64,
    pub(super) lines: Vec<(i64, String)>,
    pub(super) reply: oneshot::Sender<Result<(), StoreError>>,
}

/// The handle of the writer thread: dropping it closes the queue and joins the thread (after
/// the requests already queued are written).
pub(super) struct Writer {
    queue: Option<Sender<Request>>,
    thread: Option<JoinHandle<()>>,
}

impl Writer {
    /// Starts the writer thread over `conn` (already in WAL mode, schema created).
    pub(super) fn spawn(
        conn: Connection,
        db: PathBuf,
        durability: Durability,
        syncer: Arc<dyn Syncer>,
    ) -> std::io::Result<Self> {
        let (queue, requests) = mpsc::channel();
        let mut state = State { conn, db, durability, syncer, wal: None, next_seq: HashMap::new() };
        if durability == Durability::Disk {
            state.open_wal().map_err(std::io::Error::other)?;
        }
        let thread = std::thread::Builder::new()
            .name("rein-sqlite-writer".into())
            .spawn(move || state.run(&requests))?;
        Ok(Self { queue: Some(queue), thread: Some(thread) })
    }

    /// Queues a request; its reply arrives on the request's `oneshot`.
    pub(super) fn send(&self, request: Request) -> Result<(), StoreError> {
        let queue = self.queue.as_ref().ok_or(StoreError::Closed)?;
        queue.send(request).map_err(|_| StoreError::Closed)
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        drop(self.queue.take());
        if let Some(thread) = self.thread.take() {
            // A panicked writer already failed its callers (their replies were dropped).
            let _ = thread.join();
        }
    }
}

/// What the writer thread owns.
struct State {
    conn: Connection,
    db: PathBuf,
    durability: Durability,
    syncer: Arc<dyn Syncer>,
    /// The `-wal` file, opened at the first durable commit.
    wal: Option<File>,
    /// The next `seq` of sessions written by this writer (committed only).
    next_seq: HashMap<String, u64>,
}

impl State {
    fn run(mut self, requests: &Receiver<Request>) {
        while let Ok(first) = requests.recv() {
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH {
                match requests.try_recv() {
                    Ok(request) => batch.push(request),
                    Err(_) => break,
                }
            }
            let outcomes = self.commit(&batch);
            for (request, outcome) in batch.into_iter().zip(outcomes) {
                // A caller that stopped waiting does not mind.
                let _ = request.reply.send(outcome);
            }
        }
    }

    /// Writes a batch in one transaction, each request in its own savepoint; syncs when `Disk`.
    fn commit(&mut self, batch: &[Request]) -> Vec<Result<(), StoreError>> {
        if let Err(e) = self.conn.execute_batch("BEGIN IMMEDIATE") {
            return batch.iter().map(|_| Err(self.sqlite(&e))).collect();
        }
        let mut pending = HashMap::new();
        let written: Vec<Result<(), StoreError>> =
            batch.iter().map(|request| self.write_one(request, &mut pending)).collect();
        let committed = self.conn.execute_batch("COMMIT").map_err(|e| {
            if !self.conn.is_autocommit() {
                let _ = self.conn.execute_batch("ROLLBACK");
            }
            e.to_string()
        });
        if committed.is_ok() {
            if self.next_seq.len() + pending.len() > MAX_CACHED_SESSIONS {
                self.next_seq.clear();
            }
            self.next_seq.extend(pending);
        }
        let any_written = written.iter().any(Result::is_ok);
        let durable = match committed {
            Ok(()) if any_written && self.durability == Durability::Disk => self.sync_wal(),
            Ok(()) => Ok(()),
            Err(message) => Err(format!("commit failed: {message}")),
        };
        settle(written, durable, &self.db)
    }

    /// One request inside its own savepoint: checks that it continues its session's log, then
    /// inserts its lines. On error only this request is rolled back. `pending` holds the next
    /// `seq` of the sessions this (uncommitted) batch wrote.
    fn write_one(
        &mut self,
        request: &Request,
        pending: &mut HashMap<String, u64>,
    ) -> Result<(), StoreError> {
        self.conn
            .prepare_cached("SAVEPOINT append")
            .and_then(|mut s| s.execute([]))
            .map_err(|e| self.sqlite(&e))?;
        let outcome = match self.insert(request, pending) {
            Ok(outcome) => outcome,
            Err(e) => {
                // Perhaps the cached next seq is stale: ask the table next time.
                self.next_seq.remove(&request.session);
                Err(self.sqlite(&e))
            }
        };
        let close = if outcome.is_ok() {
            self.conn.prepare_cached("RELEASE append").and_then(|mut s| s.execute([]))
        } else {
            self.conn
                .prepare_cached("ROLLBACK TO append")
                .and_then(|mut s| s.execute([]))
                .and_then(|_| self.conn.prepare_cached("RELEASE append")?.execute([]))
        };
        close.map_err(|e| self.sqlite(&e))?;
        outcome
    }

    /// The checks and inserts of one request (inside its savepoint).
    fn insert(
        &self,
        request: &Request,
        pending: &mut HashMap<String, u64>,
    ) -> Result<Result<(), StoreError>, rusqlite::Error> {
        let cached = pending.get(&request.session).or_else(|| self.next_seq.get(&request.session));
        let next = match cached {
            Some(&next) => next,
            None => self.stored_next_seq(&request.session)?,
        };
        if next != request.first {
            return Ok(Err(StoreError::OutOfOrder {
                session: request.session.clone(),
                expected: next,
                found: request.first,
            }));
        }
        let mut insert = self
            .conn
            .prepare_cached("INSERT INTO events (session, seq, line) VALUES (?1, ?2, ?3)")?;
        for (seq, line) in &request.lines {
            insert.execute(params![request.session, seq, line])?;
        }
        pending.insert(request.session.clone(), request.first + request.lines.len() as u64);
        Ok(Ok(()))
    }

    /// The next `seq` of a session, read from the table.
    fn stored_next_seq(&self, session: &str) -> Result<u64, rusqlite::Error> {
        let mut last = self.conn.prepare_cached(
            "SELECT seq FROM events WHERE session = ?1 ORDER BY seq DESC LIMIT 1",
        )?;
        match last.query_row(params![session], |row| row.get::<_, i64>(0)) {
            Ok(seq) => Ok(u64::try_from(seq).unwrap_or(0) + 1),
            Err(rusqlite::Error::QueryReturnedNoRows) => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// Opens the `-wal` file (it exists once the connection is in WAL mode and has read the
    /// schema) and makes it and its directory entry durable. Done once, when the store opens, so
    /// that appends pay exactly one sync per batch.
    fn open_wal(&mut self) -> Result<(), String> {
        let wal_path = wal_path(&self.db);
        let wal = OpenOptions::new()
            .write(true)
            .open(&wal_path)
            .map_err(|e| format!("{}: {e}", wal_path.display()))?;
        if cfg!(unix) {
            let dir =
                self.db.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            let handle = File::open(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            self.syncer.sync(&handle).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        self.syncer.sync(&wal).map_err(|e| format!("{}: {e}", wal_path.display()))?;
        self.wal = Some(wal);
        Ok(())
    }

    /// Syncs the `-wal` file through the syncer.
    fn sync_wal(&mut self) -> Result<(), String> {
        if self.wal.is_none() {
            self.open_wal()?;
        }
        let Some(wal) = self.wal.as_ref() else { return Ok(()) };
        self.syncer.sync(wal).map_err(|e| format!("{}: {e}", wal_path(&self.db).display()))
    }

    fn sqlite(&self, e: &rusqlite::Error) -> StoreError {
        StoreError::Sqlite(format!("{}: {e}", self.db.display()))
    }
}

/// The reply of each request of a batch: its own outcome, unless the batch as a whole (commit
/// or sync) failed, which fails every request that had succeeded on its own.
fn settle(
    written: Vec<Result<(), StoreError>>,
    durable: Result<(), String>,
    db: &Path,
) -> Vec<Result<(), StoreError>> {
    match durable {
        Ok(()) => written,
        Err(message) => written
            .into_iter()
            .map(|outcome| {
                outcome.and_then(|()| {
                    Err(StoreError::Io {
                        path: db.display().to_string(),
                        source: std::io::Error::other(message.clone()),
                    })
                })
            })
            .collect(),
    }
}

/// The `-wal` file of a database.
pub(super) fn wal_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_commit_fails_only_the_requests_that_had_succeeded() {
        let db = Path::new("/d/events.db");
        let written = || {
            vec![
                Ok(()),
                Err(StoreError::OutOfOrder { session: "b".into(), expected: 1, found: 0 }),
                Ok(()),
            ]
        };
        let kept = settle(written(), Ok(()), db);
        assert!(matches!(kept[..], [Ok(()), Err(StoreError::OutOfOrder { .. }), Ok(())]));

        let failed = settle(written(), Err("disk full".into()), db);
        assert!(
            matches!(
                &failed[..],
                [
                    Err(StoreError::Io { .. }),
                    Err(StoreError::OutOfOrder { .. }),
                    Err(StoreError::Io { .. })
                ]
            ),
            "{failed:?}"
        );
        assert_eq!(failed[0].as_ref().unwrap_err().to_string(), "/d/events.db: disk full");
    }

    #[test]
    fn the_wal_sits_beside_the_database() {
        assert_eq!(wal_path(Path::new("/d/events.db")), Path::new("/d/events.db-wal"));
        assert_eq!(wal_path(Path::new("e.sqlite")), Path::new("e.sqlite-wal"));
    }
}
