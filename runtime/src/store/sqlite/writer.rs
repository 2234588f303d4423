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
//! pool) because it blocks in SQLite for its whole life; callers wait on a `oneshot` without
//! blocking a tokio worker. For `Disk`, the sync itself runs on the [`flusher`](super::flusher)
//! thread, overlapping the next transaction.
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
//! checkpoints. For [`Durability::Disk`] the store uses `NORMAL` and, after each commit, the
//! flusher calls the store's [`Syncer`] on the `-wal` file before the batch's callers are
//! answered: the committed frames are on the disk when the callers hear back, which is what
//! `FULL` guarantees, but the sync goes through the `Syncer`, where tests can count it. When the
//! store opens, the WAL file and its directory are synced once, so the WAL's own name survives a
//! power loss too. For [`Durability::Os`] the commit alone is the acknowledgement (the frames are
//! in the OS; a process crash keeps them).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;

use rusqlite::{Connection, params};
use tokio::sync::oneshot;

use super::flusher::{Flusher, Waiting};
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

/// The handle of the writer thread (and, for `Disk`, the flusher thread): dropping it closes
/// the queue and joins both threads (after the requests already queued are answered).
pub(super) struct Writer {
    queue: Option<Sender<Request>>,
    threads: Vec<JoinHandle<()>>,
}

impl Writer {
    /// Starts the writer thread over `conn` (already in WAL mode, schema created) and, for
    /// `Disk`, the flusher thread, after syncing the WAL file and its directory once.
    pub(super) fn spawn(
        conn: Connection,
        db: PathBuf,
        durability: Durability,
        syncer: Arc<dyn Syncer>,
    ) -> Result<Self, StoreError> {
        let mut threads = Vec::new();
        let flusher = match durability {
            Durability::Os => None,
            Durability::Disk => {
                let flusher = open_wal(&db, syncer)?;
                let (commits, waiting) = mpsc::channel();
                threads.push(spawn_thread(&db, "rein-sql-flush", move || {
                    flusher.run(&waiting);
                })?);
                Some(commits)
            }
        };
        let (queue, requests) = mpsc::channel();
        let state = State { conn, db: db.clone(), flusher, next_seq: HashMap::new() };
        // The writer is joined first: when it ends, it hangs up on the flusher, which then ends.
        threads.insert(0, spawn_thread(&db, "rein-sql-writer", move || state.run(&requests))?);
        Ok(Self { queue: Some(queue), threads })
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
        for thread in self.threads.drain(..) {
            // A panicked thread already failed its callers (their replies were dropped).
            let _ = thread.join();
        }
    }
}

/// Starts a named thread.
fn spawn_thread(
    db: &Path,
    name: &str,
    run: impl FnOnce() + Send + 'static,
) -> Result<JoinHandle<()>, StoreError> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(run)
        .map_err(|source| StoreError::Io { path: db.display().to_string(), source })
}

/// Opens the `-wal` file (it exists once the connection is in WAL mode and has read the schema)
/// and makes it and its directory entry durable, once, so that appends pay one sync per batch.
fn open_wal(db: &Path, syncer: Arc<dyn Syncer>) -> Result<Flusher, StoreError> {
    let wal_path = wal_path(db);
    let io = |path: &Path, source| StoreError::Io { path: path.display().to_string(), source };
    let wal = OpenOptions::new().write(true).open(&wal_path).map_err(|e| io(&wal_path, e))?;
    if cfg!(unix) {
        let dir = db.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let handle = File::open(dir).map_err(|e| io(dir, e))?;
        syncer.sync(&handle).map_err(|e| io(dir, e))?;
    }
    syncer.sync(&wal).map_err(|e| io(&wal_path, e))?;
    Ok(Flusher { wal, wal_path, syncer })
}

/// What the writer thread owns.
struct State {
    conn: Connection,
    db: PathBuf,
    /// For `Disk`: where committed batches wait for their sync.
    flusher: Option<Sender<Waiting>>,
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
            let mut waiting = Waiting::new();
            for (request, outcome) in batch.into_iter().zip(outcomes) {
                match (&self.flusher, outcome) {
                    (Some(_), Ok(())) => waiting.push(request.reply),
                    // A caller that stopped waiting does not mind.
                    (_, outcome) => drop(request.reply.send(outcome)),
                }
            }
            if let Some(flusher) = self.flusher.as_ref().filter(|_| !waiting.is_empty()) {
                if let Err(mpsc::SendError(waiting)) = flusher.send(waiting) {
                    for reply in waiting {
                        let _ = reply.send(Err(StoreError::Closed));
                    }
                }
            }
        }
    }

    /// Writes a batch in one transaction, each request in its own savepoint. The outcome of each
    /// request, once committed (not yet synced).
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
        settle(written, committed.map_err(|message| format!("commit failed: {message}")), &self.db)
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

    fn sqlite(&self, e: &rusqlite::Error) -> StoreError {
        StoreError::Sqlite(format!("{}: {e}", self.db.display()))
    }
}

/// The reply of each request of a batch: its own outcome, unless the commit failed, which fails
/// every request that had succeeded on its own.
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

    /// A writer state over a fresh database, with no flusher (`Os`).
    fn state(db: &Path) -> State {
        let conn = Connection::open(db).unwrap();
        conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(())).unwrap();
        conn.execute_batch(super::super::SCHEMA).unwrap();
        State { conn, db: db.to_path_buf(), flusher: None, next_seq: HashMap::new() }
    }

    fn request(session: &str, seqs: &[i64]) -> Request {
        let lines = seqs.iter().map(|&seq| (seq, format!("line {session}/{seq}"))).collect();
        let first = seqs.first().map_or(0, |&s| u64::try_from(s).unwrap());
        Request { session: session.into(), first, lines, reply: oneshot::channel().0 }
    }

    fn rows(db: &Path) -> Vec<(String, i64)> {
        let conn = Connection::open(db).unwrap();
        let mut query =
            conn.prepare("SELECT session, seq FROM events ORDER BY session, seq").unwrap();
        query.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect()
    }

    #[test]
    fn in_one_transaction_a_failing_request_is_rolled_back_alone() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("events.db");
        let mut state = state(&db);
        assert!(state.commit(&[request("b", &[0])])[0].is_ok());
        // Behind the writer's back, b gets seq 2: b's next request passes the seq check (the
        // writer remembers 1) but its second row collides.
        Connection::open(&db)
            .unwrap()
            .execute("INSERT INTO events VALUES ('b', 2, 'x')", [])
            .unwrap();

        let outcomes = state.commit(&[
            request("a", &[0, 1]),
            request("b", &[1, 2]),
            request("c", &[0]),
            request("a", &[2]),
        ]);
        assert!(outcomes[0].is_ok() && outcomes[2].is_ok() && outcomes[3].is_ok(), "{outcomes:?}");
        assert!(
            matches!(&outcomes[1], Err(StoreError::Sqlite(m)) if m.contains("UNIQUE")),
            "{outcomes:?}"
        );
        let want = [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 2), ("c", 0)];
        let want: Vec<(String, i64)> = want.iter().map(|&(s, q)| (s.to_owned(), q)).collect();
        assert_eq!(rows(&db), want, "b/1 was undone with its request; the others committed");

        // The writer asks the table again for b, and b goes on from there.
        assert!(state.commit(&[request("b", &[3])])[0].is_ok());
    }

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
