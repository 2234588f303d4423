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
//! # Why the index lags behind: appends in commit order, folded into the index in batches
//!
//! Each batch commits its events to `events`, a rowid table: they land at its end, a few pages
//! for the whole batch. An index keyed by session, kept up to date at every commit, would dirty
//! one index page per session in the batch, and every dirty page costs a 4 KiB WAL frame: with
//! many sessions appending at once, that is a frame per append, whatever the batch size. So the
//! writer leaves the newest events unindexed and, once [`FOLD_ROWS`] of them have gathered (and
//! when the store closes), indexes them all in one transaction sorted by session: one page per
//! session per fold instead of per commit. Until then a reader finds them in the in-memory
//! [tail](super::tail), which the writer fills at each commit and empties at each fold. The fold
//! needs no sync of its own: it adds nothing that is not already durable in `events`, and the
//! next synced commit covers its frames (a fold lost to a power cut is simply done again).
//!
//! When the store opens, the events after the fold point (left by a crash) are read into the tail
//! and folded right away. A fold that fails (two rows for one `(session, seq)`, written behind
//! the store's back) is logged and retried after the next [`FOLD_ROWS`]; the events stay readable
//! from the tail, and loading that session reports the duplicate as corruption.
//!
//! # Why the writer remembers each session's next `seq`
//!
//! Every request is checked to continue its session's log (a store never acknowledges what it
//! could not read back). The writer keeps the next `seq` of the sessions it wrote (updated only
//! when a transaction commits; forgotten wholesale past 100 000 sessions); for the others it asks
//! the tail, then the index (one probe). A database is owned by one store: appends from another
//! process to the same sessions are not expected (the store sees them when it reopens, and a
//! duplicate `seq` is then reported by the load, naming session and `seq`).
//!
//! # Why a savepoint per request
//!
//! A batch mixes requests from unrelated sessions. A request of several events runs inside its
//! own `SAVEPOINT`: one that fails is rolled back alone and only its caller gets the error; the
//! others still commit together. A request of one event needs none: a failed statement undoes
//! itself.
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
use super::heads;
use super::tail::{self, SharedTail};
use crate::store::sync::Syncer;
use crate::store::{Durability, Head, Mark, StoreError};

/// At most this many requests share one transaction (a bound on latency under a flood).
const MAX_BATCH: usize = 4096;

/// The writer remembers the next `seq` of at most this many sessions (then starts afresh).
const MAX_CACHED_SESSIONS: usize = 100_000;

/// The writer indexes the tail once it holds this many events.
pub(super) const FOLD_ROWS: usize = 8192;

/// One append: `lines` are `(seq, json)` in order, all for `session`; `marks` are the
/// [`Mark`]s of its events, in order (usually none), for the session's head.
pub(super) struct Request {
    pub(super) session: String,
    pub(super) first: u64,
    pub(super) lines: Vec<(i64, String)>,
    pub(super) marks: Vec<Mark>,
    pub(super) reply: oneshot::Sender<Result<(), StoreError>>,
}

/// The handle of the writer thread (and, for `Disk`, the flusher thread): dropping it closes
/// the queue and joins both threads (after the requests already queued are answered and the
/// tail is indexed).
pub(super) struct Writer {
    queue: Option<Sender<Request>>,
    threads: Vec<JoinHandle<()>>,
}

impl Writer {
    /// Starts the writer thread over `conn` (in WAL mode, in the current layout) and, for
    /// `Disk`, the flusher thread, after syncing the WAL file and its directory once. Before it
    /// returns, the events after the fold point are read into `tail` and folded.
    pub(super) fn spawn(
        conn: Connection,
        db: PathBuf,
        durability: Durability,
        syncer: Arc<dyn Syncer>,
        tail: SharedTail,
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
        let mut state = State {
            conn,
            db: db.clone(),
            flusher,
            heads: HashMap::new(),
            tail,
            fold_at: FOLD_ROWS,
        };
        state.read_tail().map_err(|e| state.sqlite(&e))?;
        state.fold();
        let (queue, requests) = mpsc::channel();
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
    /// The heads (next `seq`, open turn, wake-up) of sessions written by this writer
    /// (committed only).
    heads: HashMap<String, Head>,
    /// The unindexed events, shared with the readers.
    tail: SharedTail,
    /// Fold when the tail holds this many events.
    fold_at: usize,
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
            let outcomes = self.commit(&mut batch);
            let mut waiting = Waiting::new();
            for (request, outcome) in batch.into_iter().zip(outcomes) {
                match (&self.flusher, outcome) {
                    (Some(_), Ok(())) => waiting.push(request.reply),
                    // A caller that stopped waiting does not mind.
                    (_, outcome) => drop(request.reply.send(outcome)),
                }
            }
            if let Some(flusher) = self.flusher.as_ref().filter(|_| !waiting.is_empty())
                && let Err(mpsc::SendError(waiting)) = flusher.send(waiting)
            {
                for reply in waiting {
                    let _ = reply.send(Err(StoreError::Closed));
                }
            }
            if tail::lock(&self.tail).rows() >= self.fold_at {
                self.fold();
            }
        }
        // Closing: index what is left, so that a closed database has no tail.
        self.fold();
    }

    /// Writes a batch in one transaction, each request on its own (see the module docs). The
    /// outcome of each request, once committed (not yet synced). The lines of the requests that
    /// committed are moved into the tail.
    fn commit(&mut self, batch: &mut [Request]) -> Vec<Result<(), StoreError>> {
        if let Err(e) = self.conn.execute_batch("BEGIN IMMEDIATE") {
            return batch.iter().map(|_| Err(self.sqlite(&e))).collect();
        }
        let mut pending = HashMap::new();
        let written: Vec<Result<(), StoreError>> =
            batch.iter().map(|request| self.write_one(request, &mut pending)).collect();
        // The heads the batch's marks changed: one statement, in the same transaction (see
        // `heads`). Not when an error rolled the batch back: they would commit on their own (the
        // COMMIT then fails, as it must).
        let heads = match self.conn.is_autocommit() {
            true => Ok(()),
            false => {
                let marked: std::collections::HashSet<&str> = batch
                    .iter()
                    .zip(&written)
                    .filter(|(request, outcome)| outcome.is_ok() && !request.marks.is_empty())
                    .map(|(request, _)| request.session.as_str())
                    .collect();
                let rows: Vec<(&String, &Head)> = pending
                    .iter()
                    .filter(|(session, _)| marked.contains(session.as_str()))
                    .collect();
                heads::write(&self.conn, rows.into_iter())
            }
        };
        let committed = heads.and_then(|()| self.conn.execute_batch("COMMIT"));
        let committed = committed.map_err(|e| {
            if !self.conn.is_autocommit() {
                let _ = self.conn.execute_batch("ROLLBACK");
            }
            e.to_string()
        });
        if committed.is_ok() {
            if self.heads.len() + pending.len() > MAX_CACHED_SESSIONS {
                self.heads.clear();
            }
            self.heads.extend(pending);
            let mut tail = tail::lock(&self.tail);
            for (request, _) in batch.iter_mut().zip(&written).filter(|(_, w)| w.is_ok()) {
                let lines = std::mem::take(&mut request.lines);
                tail.push(
                    &request.session,
                    lines.into_iter().map(|(seq, line)| (seq, line.into_bytes())),
                );
            }
        }
        settle(written, committed.map_err(|message| format!("commit failed: {message}")), &self.db)
    }

    /// One request: checks that it continues its session's log, then inserts its lines; on
    /// error nothing of it is left. `pending` holds the heads of the sessions this
    /// (uncommitted) batch wrote.
    fn write_one(
        &mut self,
        request: &Request,
        pending: &mut HashMap<String, Head>,
    ) -> Result<(), StoreError> {
        if self.conn.is_autocommit() {
            // An earlier error made SQLite roll the whole transaction back: writing now would
            // commit this request on its own, outside the batch.
            return Err(StoreError::Sqlite(format!(
                "{}: the batch's transaction was rolled back",
                self.db.display()
            )));
        }
        let guarded = request.lines.len() > 1;
        if guarded {
            self.statement("SAVEPOINT append")?;
        }
        let outcome = self.insert(request, pending).unwrap_or_else(|e| Err(self.sqlite(&e)));
        if guarded {
            if outcome.is_err() {
                self.statement("ROLLBACK TO append")?;
            }
            self.statement("RELEASE append")?;
        }
        outcome
    }

    /// Runs one cached statement.
    fn statement(&self, sql: &str) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(sql)
            .and_then(|mut s| s.execute([]))
            .map_err(|e| self.sqlite(&e))?;
        Ok(())
    }

    /// The checks and inserts of one request.
    fn insert(
        &self,
        request: &Request,
        pending: &mut HashMap<String, Head>,
    ) -> Result<Result<(), StoreError>, rusqlite::Error> {
        let cached = pending.get(&request.session).or_else(|| self.heads.get(&request.session));
        let mut head = match cached {
            Some(&head) => head,
            None => Head {
                next_seq: self.stored_next_seq(&request.session)?,
                ..heads::stored(&self.conn, &request.session)?
            },
        };
        let next = head.next_seq;
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
        head.append(request.first, request.lines.len() as u64, &request.marks);
        pending.insert(request.session.clone(), head);
        Ok(Ok(()))
    }

    /// The next `seq` of a session: after its last tail event, else after its last indexed one.
    fn stored_next_seq(&self, session: &str) -> Result<u64, rusqlite::Error> {
        if let Some(next) = tail::lock(&self.tail).next_seq(session) {
            return Ok(u64::try_from(next).unwrap_or(0));
        }
        let mut last = self
            .conn
            .prepare_cached("SELECT max(seq) FROM events_by_session WHERE session = ?1")?;
        let last: Option<i64> = last.query_row(params![session], |row| row.get(0))?;
        Ok(last.map_or(0, |seq| u64::try_from(seq).unwrap_or(0).saturating_add(1)))
    }

    /// Reads the events after the fold point into the tail (on open: what a crash left).
    fn read_tail(&self) -> Result<(), rusqlite::Error> {
        let tail = tail::Tail::read(&self.conn)?;
        *tail::lock(&self.tail) = tail;
        Ok(())
    }

    /// Indexes every tail event in one transaction. A failure is logged (with the first
    /// duplicate, if that is the cause) and the fold is tried again after [`FOLD_ROWS`] more.
    fn fold(&mut self) {
        let (upto, rows) = {
            let tail = tail::lock(&self.tail);
            (tail.upto(), tail.rows())
        };
        if rows == 0 {
            return;
        }
        match self.fold_from(upto) {
            Ok(()) => self.fold_at = FOLD_ROWS,
            Err(e) => {
                if !self.conn.is_autocommit() {
                    let _ = self.conn.execute_batch("ROLLBACK");
                }
                let duplicate = self.first_duplicate(upto).unwrap_or(None);
                let (session, seq) = duplicate.unwrap_or_default();
                tracing::error!(
                    db = %self.db.display(), %e, session, seq,
                    "could not index the newest events (they stay readable); trying again later"
                );
                self.fold_at = rows + FOLD_ROWS;
            }
        }
    }

    fn fold_from(&mut self, upto: i64) -> Result<(), rusqlite::Error> {
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        self.conn.execute(
            "INSERT INTO events_by_session (session, seq, row) \
             SELECT session, seq, rowid FROM events WHERE rowid > ?1 ORDER BY session, seq",
            params![upto],
        )?;
        let last: i64 =
            self.conn.query_row("SELECT coalesce(max(rowid), 0) FROM events", [], |r| r.get(0))?;
        self.conn.execute("UPDATE events_indexed SET upto = ?1", params![last])?;
        // Readers take their snapshot under the tail's lock: they see the fold and an empty
        // tail, or neither.
        let mut tail = tail::lock(&self.tail);
        self.conn.execute_batch("COMMIT")?;
        tail.folded(last);
        Ok(())
    }

    /// A `(session, seq)` that the tail holds twice, or that the index already has.
    fn first_duplicate(&self, upto: i64) -> Result<Option<(String, i64)>, rusqlite::Error> {
        let mut query = self.conn.prepare(
            "SELECT session, seq FROM events WHERE rowid > ?1 GROUP BY session, seq HAVING count(*) > 1
             UNION ALL
             SELECT t.session, t.seq FROM events t JOIN events_by_session b
                 ON b.session = t.session AND b.seq = t.seq WHERE t.rowid > ?1
             LIMIT 1",
        )?;
        let mut rows = query.query(params![upto])?;
        rows.next()?.map(|row| Ok((row.get(0)?, row.get(1)?))).transpose()
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
        super::super::layout::prepare(&conn).unwrap();
        State {
            conn,
            db: db.to_path_buf(),
            flusher: None,
            heads: HashMap::new(),
            tail: SharedTail::default(),
            fold_at: FOLD_ROWS,
        }
    }

    fn request(session: &str, seqs: &[i64]) -> Request {
        let lines = seqs.iter().map(|&seq| (seq, format!("line {session}/{seq}"))).collect();
        let first = seqs.first().map_or(0, |&s| u64::try_from(s).unwrap());
        Request {
            session: session.into(),
            first,
            lines,
            marks: Vec::new(),
            reply: oneshot::channel().0,
        }
    }

    /// `(session, seq)` of every row of `events`, sorted.
    fn rows(db: &Path) -> Vec<(String, i64)> {
        let conn = Connection::open(db).unwrap();
        let mut query =
            conn.prepare("SELECT session, seq FROM events ORDER BY session, seq").unwrap();
        query.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect()
    }

    fn pairs(want: &[(&str, i64)]) -> Vec<(String, i64)> {
        want.iter().map(|&(s, q)| (s.to_owned(), q)).collect()
    }

    #[test]
    fn in_one_transaction_a_failing_request_is_rolled_back_alone() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("events.db");
        let mut state = state(&db);
        // SQLite refuses two particular rows: the second row of a two-row request, and the only
        // row of a one-row request.
        state
            .conn
            .execute_batch(
                "CREATE TEMP TRIGGER refuse BEFORE INSERT ON events \
                 WHEN NEW.line IN ('line b/1', 'line d/0') BEGIN SELECT RAISE(ABORT, 'refused'); END",
            )
            .unwrap();
        let outcomes = state.commit(&mut [
            request("a", &[0, 1]),
            request("b", &[0, 1]),
            request("c", &[0]),
            request("d", &[0]),
            request("a", &[2]),
        ]);
        assert!(outcomes[0].is_ok() && outcomes[2].is_ok() && outcomes[4].is_ok(), "{outcomes:?}");
        for failed in [&outcomes[1], &outcomes[3]] {
            assert!(
                matches!(failed, Err(StoreError::Sqlite(m)) if m.contains("refused")),
                "{failed:?}"
            );
        }
        let want = pairs(&[("a", 0), ("a", 1), ("a", 2), ("c", 0)]);
        assert_eq!(rows(&db), want, "b/0 was undone with its request; the others committed");
        let tail = tail::lock(&state.tail);
        assert_eq!((tail.rows(), tail.next_seq("a"), tail.next_seq("b")), (4, Some(3), None));
        drop(tail);

        // b and d start again from 0.
        state.conn.execute_batch("DROP TRIGGER refuse").unwrap();
        let outcomes = state.commit(&mut [request("b", &[0, 1]), request("d", &[0])]);
        assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    }

    #[test]
    fn a_fold_indexes_the_tail_sorted_by_session_and_empties_it() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("events.db");
        let mut state = state(&db);
        let outcomes =
            state.commit(&mut [request("b", &[0]), request("a", &[0, 1]), request("b", &[1])]);
        assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
        state.fold();
        let tail = tail::lock(&state.tail);
        assert_eq!((tail.rows(), tail.upto()), (0, 4));
        drop(tail);
        let conn = Connection::open(&db).unwrap();
        let mut query = conn.prepare("SELECT session, seq, row FROM events_by_session").unwrap();
        let index: Vec<(String, i64, i64)> = query
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let want = [("a", 0, 2), ("a", 1, 3), ("b", 0, 1), ("b", 1, 4)];
        let want: Vec<(String, i64, i64)> =
            want.iter().map(|&(s, q, r)| (s.to_owned(), q, r)).collect();
        assert_eq!(index, want, "rowids are commit order; the index is by session");
        let upto: i64 =
            conn.query_row("SELECT upto FROM events_indexed", [], |r| r.get(0)).unwrap();
        assert_eq!(upto, 4);

        // The next seq of a session the writer forgot comes from the index.
        state.heads.clear();
        assert!(state.commit(&mut [request("a", &[2])])[0].is_ok());
        assert!(matches!(
            &state.commit(&mut [request("b", &[1])])[0],
            Err(StoreError::OutOfOrder { expected: 2, found: 1, .. })
        ));
    }

    #[test]
    fn a_fold_that_meets_a_duplicate_keeps_the_tail_and_tries_again_later() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("events.db");
        let mut state = state(&db);
        assert!(state.commit(&mut [request("a", &[0, 1])])[0].is_ok());
        // Behind the writer's back, a second a/1.
        Connection::open(&db)
            .unwrap()
            .execute("INSERT INTO events (session, seq, line) VALUES ('a', 1, 'x')", [])
            .unwrap();
        assert_eq!(state.first_duplicate(0).unwrap(), Some(("a".to_owned(), 1)));
        state.fold();
        let tail = tail::lock(&state.tail);
        assert_eq!((tail.rows(), tail.upto()), (2, 0), "nothing was indexed");
        drop(tail);
        assert_eq!(state.fold_at, 2 + FOLD_ROWS);
        let indexed: i64 = Connection::open(&db)
            .unwrap()
            .query_row("SELECT count(*) FROM events_by_session", [], |r| r.get(0))
            .unwrap();
        assert_eq!(indexed, 0);
        assert!(state.commit(&mut [request("b", &[0])])[0].is_ok(), "appends go on");
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
