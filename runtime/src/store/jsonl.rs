//! [`JsonlStore`]: a directory with one `<session>.jsonl` file per session.
//!
//! Each line is one [`Envelope`] as JSON followed by `\n`. An append writes all of its
//! lines with a single `write`; with [`Durability::Disk`] the file is then synced through the
//! store's [`Syncer`] before the append is acknowledged. The first append of a session creates
//! its file (and, for `Disk`, syncs the directory so the new name survives a power loss).
//!
//! Loading parses every line (see `jsonl/parse.rs` for the rules): a last line without its newline is
//! torn and is cut, its bytes kept as one line of `<session>.jsonl.torn` beside the log, with a
//! `tracing` warning naming the file and line; any other defect is [`StoreError::Corrupt`] and
//! the file is left byte for byte as it was.
//!
//! - `parse`: the pure decision (events, torn, or corrupt) over a file's bytes.
//! - `log_file`: the blocking I/O on one session's file.
//! - `writer`: the thread that makes the appends at `Os`.
//! - `head`: a log's [`Head`](super::Head), read back from the end of its file (why it is not
//!   kept in a file of its own is there).
//! - [`read_log`]: the same reading for tools that only look at a log file (`rein show`,
//!   `rein report`): it never writes, so a torn last line is reported but not cut.
//!
//! # Where the I/O runs
//!
//! File I/O and `fdatasync` block, so they never run on tokio's workers.
//!
//! - At [`Durability::Disk`], an append (write + sync) runs on tokio's blocking pool. A single
//!   writer thread would serialize every session's sync behind every other's, and unlike
//!   SQLite's one WAL, separate files cannot share a sync: group commit is impossible here. On
//!   the pool each session's append runs in parallel with the others', so the disk sees
//!   concurrent flushes it can merge, and a slow session does not hold up the rest.
//! - At [`Durability::Os`], an append is one `write` to the page cache, cheaper than a hop to
//!   the blocking pool: appends go to the store's own writer thread (`writer`), which takes them
//!   in order while they keep coming, with no thread wake-up per append.
//! - Loads, reads from a `seq` and listings run on the blocking pool.
//!
//! Appends and loads of one session are serialized by that session's slot lock (the session log
//! already sends one at a time; the lock makes the store safe on its own).
//!
//! # Why a read from a `seq` walks back from the end
//!
//! [`SessionStore::load_from`] is how a reader catches up with a turn that already started: it
//! asks for the newest events of a long log. The session's open handle knows the file's length
//! and its next `seq`, and every line holds one event, so the first event asked for starts right
//! after the `next_seq - seq`th newline from the end. Walking back to it and parsing forward
//! reads only the lines returned, whatever the log's length, and needs no index kept beside the
//! file.
//!
//! # Why open files are cached, and bounded
//!
//! Opening a log costs an `open` plus reading its last line (for the next `seq`); a busy session
//! appends many times, so its handle is kept. The cache holds at most
//! [`JsonlStore::with_max_open_files`] handles (256 by default, well under the usual 1024
//! descriptor limit); when full, the least recently used idle one is closed.
//!
//! # One writer per session: `<session>.jsonl.lock`
//!
//! [`SessionStore::claim`] locks `<session>.jsonl.lock` beside the log (see `claim` and
//! `lock_file` in the parent module): while a session log is open, no other process (and no other
//! store in this one) can open it, and the operating system lets the lock go with the process.
//! Different sessions of one directory can be written by different processes (a `rein console`
//! and a `rein chat` on one store). Claiming a session forgets the store's cached handle on its
//! file, since another process may have appended while the store did not hold it; the session log
//! then loads the log before it appends. A load without the claim — a tool reading a log that
//! another process writes — cuts nothing: a torn last line may be that process's append in
//! flight, so it is only reported. A read from a `seq` of a session the store does not claim opens
//! the log's handle afresh (its last line tells the next `seq`): a cached handle knows only what
//! was there when it was opened, and that process may have appended since.
//!
//! # Hostile files
//!
//! Every file is opened through [`crate::file`]: a log (or its lock or `.torn` file) that is a
//! FIFO, a device or a directory is refused with an error naming it, never read forever; a log
//! over [`MAX_LOG_BYTES`] is refused before it is read, and an append that would take a log past
//! it fails.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use self::log_file::{AppendFailed, Cut, LogFile, WriteMode};
use self::writer::Writer;
use super::claim::{Claims, Held};
use super::lock_file::{LockFile, Probe};
use super::sync::{Fdatasync, Syncer};
use super::{
    Claim, Durability, Loaded, MAX_LOG_BYTES, SessionHead, SessionStore, SettingsRecord,
    StoreError, StoredSettings, TornTail, check_continues, check_session_id, line,
};
use crate::event::Envelope;
use crate::future::BoxFuture;

mod head;
mod log_file;
mod parse;
mod settings;
mod writer;

/// The default bound on cached open files.
const DEFAULT_MAX_OPEN_FILES: usize = 256;

/// Session logs as `<dir>/<session>.jsonl` files. Clones share the same cache of open files
/// (and, at `Os`, the same writer thread, joined when the last clone is dropped).
///
/// ```
/// use std::sync::Arc;
/// use rein_runtime::prelude::*;
///
/// # tokio_test::block_on(async {
/// let dir = tempfile::tempdir()?;
/// let store = JsonlStore::open(dir.path(), Durability::Disk)?; // fsync before acknowledging
/// let runtime = Runtime::builder().store(Arc::new(store)).build().await?;
/// runtime.session("s1").await?;
/// runtime.shutdown().await;
/// let log = std::fs::read_to_string(dir.path().join("s1.jsonl"))?;
/// assert!(log.starts_with(r#"{"seq":0,"#) && log.contains(r#""type":"session/start""#), "{log}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct JsonlStore {
    inner: Arc<Inner>,
    writer: Option<Arc<Writer>>,
}

struct Inner {
    dir: PathBuf,
    durability: Durability,
    syncer: Arc<dyn Syncer>,
    cache: Mutex<Cache>,
    claims: Claims,
}

/// Open files by session, least recently used evicted first.
struct Cache {
    slots: HashMap<String, Entry>,
    clock: u64,
    max_open: usize,
}

struct Entry {
    slot: Arc<Mutex<Slot>>,
    used: u64,
}

/// A session's state; its lock serializes the session's appends and loads.
#[derive(Default)]
struct Slot {
    log: Option<LogFile>,
    /// A failed append could not be cut back: the length its file must be cut back to before
    /// anything else touches it.
    cut_back_to: Option<u64>,
}

/// A JSONL session claim: the lock file, then the in-process claim (dropped in that order, so a
/// claimant waiting in this process finds the lock free).
struct JsonlClaim {
    _lock: LockFile,
    _here: Held,
}

impl JsonlStore {
    /// A store over `dir` (created if missing) whose appends are acknowledged at `durability`.
    pub fn open(dir: impl Into<PathBuf>, durability: Durability) -> Result<Self, StoreError> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir).map_err(|e| StoreError::io(&dir, e))?;
        Self::build(dir, durability, Arc::new(Fdatasync), DEFAULT_MAX_OPEN_FILES)
    }

    /// Uses `syncer` for [`Durability::Disk`] instead of `fdatasync` (tests count syncs with a
    /// [`CountingSyncer`](super::sync::CountingSyncer)). Call before the first append.
    #[must_use]
    pub fn with_syncer(self, syncer: Arc<dyn Syncer>) -> Self {
        let max_open = self.cache().max_open;
        self.rebuild(syncer, max_open)
    }

    /// Keeps at most `max` log files open (at least 1). Call before the first append.
    #[must_use]
    pub fn with_max_open_files(self, max: usize) -> Self {
        let syncer = self.inner.syncer.clone();
        self.rebuild(syncer, max.max(1))
    }

    /// The same store with another syncer or bound, sharing this one's writer thread.
    fn rebuild(self, syncer: Arc<dyn Syncer>, max_open: usize) -> Self {
        let cache = Cache { slots: HashMap::new(), clock: 0, max_open };
        let (dir, durability) = (self.inner.dir.clone(), self.inner.durability);
        let claims = self.inner.claims.clone();
        let inner = Inner { dir, durability, syncer, cache: Mutex::new(cache), claims };
        Self { inner: Arc::new(inner), writer: self.writer }
    }

    fn build(
        dir: PathBuf,
        durability: Durability,
        syncer: Arc<dyn Syncer>,
        max_open: usize,
    ) -> Result<Self, StoreError> {
        let writer = match durability {
            Durability::Os => Some(Arc::new(Writer::start(&dir)?)),
            Durability::Disk => None,
        };
        let cache = Cache { slots: HashMap::new(), clock: 0, max_open };
        let claims = Claims::default();
        let inner = Arc::new(Inner { dir, durability, syncer, cache: Mutex::new(cache), claims });
        Ok(Self { inner, writer })
    }

    /// The directory holding the logs.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The file of `session`'s log (whether or not it exists yet).
    pub fn path(&self, session: &str) -> Result<PathBuf, StoreError> {
        check_session_id(session)?;
        Ok(self.inner.log_path(session))
    }

    /// The file that keeps the torn lines cut from `session`'s log, one per line.
    pub fn torn_path(&self, session: &str) -> Result<PathBuf, StoreError> {
        check_session_id(session)?;
        Ok(self.inner.torn_path(session))
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.inner.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl std::fmt::Debug for JsonlStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonlStore")
            .field("dir", &self.inner.dir)
            .field("durability", &self.inner.durability)
            .finish_non_exhaustive()
    }
}

impl Inner {
    fn log_path(&self, session: &str) -> PathBuf {
        self.dir.join(format!("{session}.jsonl"))
    }

    fn torn_path(&self, session: &str) -> PathBuf {
        self.dir.join(format!("{session}.jsonl.torn"))
    }

    fn lock_path(&self, session: &str) -> PathBuf {
        self.dir.join(format!("{session}.jsonl.lock"))
    }

    fn mode(&self) -> WriteMode<'_> {
        WriteMode { durability: self.durability, syncer: &*self.syncer }
    }

    /// The slot of `session`, created (and the cache trimmed) if needed.
    fn slot(&self, session: &str) -> Arc<Mutex<Slot>> {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        cache.clock += 1;
        let now = cache.clock;
        if let Some(entry) = cache.slots.get_mut(session) {
            entry.used = now;
            return entry.slot.clone();
        }
        if cache.slots.len() >= cache.max_open {
            cache.evict_idle();
        }
        let slot = Arc::new(Mutex::new(Slot::default()));
        cache.slots.insert(session.to_owned(), Entry { slot: slot.clone(), used: now });
        slot
    }

    /// Appends encoded lines (`count` events starting at `first`), on the writer thread or the
    /// blocking pool.
    fn append_blocking(
        &self,
        session: &str,
        first: u64,
        count: u64,
        bytes: &[u8],
    ) -> Result<(), StoreError> {
        let path = self.log_path(session);
        let slot = self.slot(session);
        let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
        slot.settle(&path)?;
        if slot.log.is_none() {
            let opened = LogFile::open(&path, &self.torn_path(session), self.mode())?;
            slot.log = match opened {
                Some(log) => Some(log),
                // A new session: its file is created only by an append that starts it.
                None if first == 0 => Some(LogFile::create(&path, self.mode())?),
                None => {
                    return Err(StoreError::OutOfOrder {
                        session: session.to_owned(),
                        expected: 0,
                        found: first,
                    });
                }
            };
        }
        let Some(log) = slot.log.as_mut() else { return Err(StoreError::Closed) };
        if log.next_seq() != first {
            return Err(StoreError::OutOfOrder {
                session: session.to_owned(),
                expected: log.next_seq(),
                found: first,
            });
        }
        match log.append(bytes, count, &path, self.mode()) {
            Ok(()) => Ok(()),
            Err(AppendFailed { error, cut_back_to }) => {
                slot.log = None;
                slot.cut_back_to = cut_back_to;
                Err(error)
            }
        }
    }

    /// Takes the lock file of a session claimed in this process (on the blocking pool).
    fn lock_blocking(&self, session: &str) -> Result<LockFile, StoreError> {
        let what = self.log_path(session).display().to_string();
        let lock = LockFile::acquire(&self.lock_path(session), &what)?;
        // Another process may have written the log while this store did not hold it.
        let slot = self.slot(session);
        slot.lock().unwrap_or_else(PoisonError::into_inner).log = None;
        Ok(lock)
    }

    /// Loads a log (cutting a torn tail unless another process holds the session), on the
    /// blocking pool.
    fn load_blocking(&self, session: &str) -> Result<Option<Loaded>, StoreError> {
        // Claimed here, the claimant's appends are serialized with this load by the slot lock;
        // otherwise the lock file says whether anyone else writes (and keeps them out meanwhile).
        let (_probe, cut) = if self.claims.is_claimed(session) {
            (None, Cut::Allowed)
        } else {
            match LockFile::probe(&self.lock_path(session))? {
                Probe::Free(lock) => (lock, Cut::Allowed),
                Probe::Held => (None, Cut::ReadOnly),
            }
        };
        let path = self.log_path(session);
        let slot = self.slot(session);
        let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
        if cut == Cut::Allowed {
            slot.settle(&path)?;
        }
        // Drop a cached handle first: if the load fails, the next append must re-read the file.
        slot.log = None;
        let loaded = log_file::load(&path, &self.torn_path(session), self.mode(), cut)?;
        Ok(loaded.map(|(loaded, log)| {
            slot.log = log;
            loaded
        }))
    }

    /// The events from `seq` on, read from the end of the file through the session's open
    /// handle (opened from the file's last line when not cached), on the blocking pool. A log
    /// the handle cannot be opened for (read-only, say) is loaded whole instead. A cached handle
    /// is trusted only while this store holds the session's claim: otherwise another process may
    /// have appended since, and the handle is opened afresh (one `open` and the last line).
    fn load_from_blocking(&self, session: &str, seq: u64) -> Result<Vec<Envelope>, StoreError> {
        let path = self.log_path(session);
        let slot = self.slot(session);
        let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
        if !self.claims.is_claimed(session) {
            slot.log = None;
        }
        if slot.log.is_none() {
            match LogFile::open(&path, &self.torn_path(session), self.mode()) {
                Ok(None) => return Ok(Vec::new()),
                Ok(log) => slot.log = log,
                Err(_) => {
                    drop(slot);
                    let loaded = self.load_blocking(session)?;
                    let events = loaded.map(|loaded| loaded.events).unwrap_or_default();
                    return Ok(events.into_iter().skip_while(|e| e.seq < seq).collect());
                }
            }
        }
        let Some(log) = slot.log.as_ref() else { return Ok(Vec::new()) };
        let read = log.read_from(seq, &path);
        if read.is_err() {
            // Not what the handle knew: the next append or load re-reads the file.
            slot.log = None;
        }
        read
    }

    /// Every session's head, each read from the end of its file (see `head`).
    fn heads_blocking(&self) -> Result<Vec<SessionHead>, StoreError> {
        let mut heads = Vec::new();
        for session in self.sessions_blocking()? {
            let path = self.dir.join(format!("{session}.jsonl"));
            match head::read_head(&path) {
                Ok(Some(head)) => heads.push(SessionHead { session, head: Ok(head) }),
                Ok(None) => {}
                Err(message) => heads.push(SessionHead { session, head: Err(message) }),
            }
        }
        Ok(heads)
    }

    fn sessions_blocking(&self) -> Result<Vec<String>, StoreError> {
        let entries = std::fs::read_dir(&self.dir).map_err(|e| StoreError::io(&self.dir, e))?;
        let mut ids = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| StoreError::io(&self.dir, e))?;
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".jsonl")) else { continue };
            if check_session_id(id).is_ok() && entry.path().is_file() {
                ids.push(id.to_owned());
            }
        }
        ids.sort();
        Ok(ids)
    }
}

impl Slot {
    /// Cuts back what a failed append left, if its cut failed then.
    fn settle(&mut self, path: &Path) -> Result<(), StoreError> {
        if let Some(len) = self.cut_back_to {
            log_file::cut_back(path, len)?;
            self.cut_back_to = None;
        }
        Ok(())
    }
}

impl Cache {
    /// Forgets the least recently used slot nobody is using (closing its file), if any.
    fn evict_idle(&mut self) {
        let idle = self
            .slots
            .iter()
            .filter(|(_, entry)| Arc::strong_count(&entry.slot) == 1)
            .min_by_key(|(_, entry)| entry.used)
            .map(|(session, _)| session.clone());
        if let Some(session) = idle {
            self.slots.remove(&session);
        }
    }
}

/// Reads the JSONL log at `path` with the rules of a load, changing nothing (no cut, no file
/// opened for writing, no claim: it reads a log another process is writing): for tools that show
/// a log. A torn last line is reported in [`Loaded::torn`] (`kept_in` is `None`: nothing was
/// moved) and its event is left out; any other defect is [`StoreError::Corrupt`] naming `path`
/// and the 1-based line; a file that cannot be read — missing, not a regular file (a FIFO, a
/// device), over [`MAX_LOG_BYTES`] — is [`StoreError::Io`] naming `path`. It reads at most the
/// length the file had when it was opened. Blocking.
pub fn read_log(path: &Path) -> Result<Loaded, StoreError> {
    use std::io::Read;
    let file = crate::file::open_read(path).map_err(|e| StoreError::io(path, e))?;
    let size = crate::file::within(&file, MAX_LOG_BYTES).map_err(|e| StoreError::io(path, e))?;
    let reader = std::io::BufReader::new(file.take(size));
    let parsed = parse::parse_log(reader, path, line::MAX_LINE_BYTES)?;
    let torn = parsed.torn.map(|torn| TornTail {
        line: torn.line,
        bytes: size - torn.start,
        kept_in: None,
    });
    Ok(Loaded { events: parsed.events, torn })
}

/// Runs blocking store work on tokio's blocking pool.
async fn blocking<T: Send + 'static>(
    dir: &Path,
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(e) => {
            Err(StoreError::io(dir, std::io::Error::other(format!("store task failed: {e}"))))
        }
    }
}

impl SessionStore for JsonlStore {
    fn durability(&self) -> Durability {
        self.inner.durability
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
            let bytes = line::encode_lines(events)
                .map_err(|source| StoreError::Unwritable { session: session.to_owned(), source })?;
            let inner = self.inner.clone();
            let session = session.to_owned();
            let count = events.len() as u64;
            let append = move || inner.append_blocking(&session, first, count, &bytes);
            match &self.writer {
                Some(writer) => writer.run(append).await,
                None => blocking(&self.inner.dir, append).await,
            }
        })
    }

    fn claim<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Claim, StoreError>> {
        Box::pin(async move {
            check_session_id(session)?;
            let here = self.inner.claims.take(session).await;
            let inner = self.inner.clone();
            let id = session.to_owned();
            let lock = blocking(&self.inner.dir, move || inner.lock_blocking(&id)).await?;
            Ok(Claim::new(JsonlClaim { _lock: lock, _here: here }))
        })
    }

    fn load<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Option<Loaded>, StoreError>> {
        Box::pin(async move {
            check_session_id(session)?;
            let inner = self.inner.clone();
            let session = session.to_owned();
            blocking(&self.inner.dir, move || inner.load_blocking(&session)).await
        })
    }

    fn load_from<'a>(
        &'a self,
        session: &'a str,
        seq: u64,
    ) -> BoxFuture<'a, Result<Vec<Envelope>, StoreError>> {
        Box::pin(async move {
            check_session_id(session)?;
            let inner = self.inner.clone();
            let session = session.to_owned();
            blocking(&self.inner.dir, move || inner.load_from_blocking(&session, seq)).await
        })
    }

    fn sessions(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        Box::pin(async move {
            let inner = self.inner.clone();
            blocking(&self.inner.dir, move || inner.sessions_blocking()).await
        })
    }

    fn heads(&self) -> BoxFuture<'_, Result<Vec<SessionHead>, StoreError>> {
        Box::pin(async move {
            let inner = self.inner.clone();
            blocking(&self.inner.dir, move || inner.heads_blocking()).await
        })
    }

    fn save_settings<'a>(
        &'a self,
        record: &'a SettingsRecord,
        base: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let (dir, record) = (self.inner.dir.clone(), record.clone());
            blocking(&self.inner.dir, move || settings::save(&dir, &record, base)).await
        })
    }

    fn load_settings(&self) -> BoxFuture<'_, Result<Vec<StoredSettings>, StoreError>> {
        Box::pin(async move {
            let dir = self.inner.dir.clone();
            blocking(&self.inner.dir, move || settings::load(&dir)).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{AgentIdle, Event};
    use crate::store::sync::CountingSyncer;

    fn idle(seq: u64) -> Envelope {
        Envelope { seq, time: seq * 10, event: Event::AgentIdle(AgentIdle {}) }
    }

    #[test]
    fn read_log_reports_a_torn_tail_names_a_corrupt_line_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let line = |seq| serde_json::to_string(&idle(seq)).unwrap();
        let torn = format!("{}\n{}\n{{\"seq\":2", line(0), line(1));
        std::fs::write(&path, &torn).unwrap();
        let read = read_log(&path).unwrap();
        assert_eq!(read.events, [idle(0), idle(1)]);
        assert_eq!(read.torn, Some(TornTail { line: 3, bytes: 8, kept_in: None }));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), torn, "nothing was cut");

        std::fs::write(&path, format!("{}\nnot json\n", line(0))).unwrap();
        let err = read_log(&path).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{}:2: corrupt log line: ", path.display())), "{err}");

        let missing = dir.path().join("missing.jsonl");
        let err = read_log(&missing).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{}: ", missing.display())), "{err}");
    }

    #[test]
    fn dropping_the_store_finishes_the_queued_appends_and_joins_its_writer() {
        use std::task::{Context, Poll, Waker};
        let dir = tempfile::tempdir().unwrap();
        let store = JsonlStore::open(dir.path(), Durability::Os).unwrap();
        assert!(store.writer.is_some(), "an Os store has its writer thread");
        let inner = Arc::downgrade(&store.inner);
        let writer = Arc::downgrade(store.writer.as_ref().unwrap());
        // Queued, and its caller gone before the answer: the append is made all the same.
        let batch = [idle(0)];
        let mut append = store.append("s", &batch);
        let mut cx = Context::from_waker(Waker::noop());
        if let Poll::Ready(result) = append.as_mut().poll(&mut cx) {
            result.unwrap();
        }
        drop(append);
        drop(store);
        assert!(writer.upgrade().is_none() && inner.upgrade().is_none(), "nothing outlives it");
        let written = std::fs::read_to_string(dir.path().join("s.jsonl")).unwrap();
        assert_eq!(written, format!("{}\n", serde_json::to_string(&idle(0)).unwrap()));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_sessions_appends_at_os_land_in_order_each_acknowledged_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let store = JsonlStore::open(dir.path(), Durability::Os).unwrap().with_max_open_files(8);
        let mut tasks = Vec::new();
        for session in 0..32 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let id = format!("s{session}");
                for seq in 0..20 {
                    store.append(&id, &[idle(seq)]).await.unwrap();
                    // Acknowledged: it is in the file, whoever reads it.
                    let text = std::fs::read_to_string(store.path(&id).unwrap()).unwrap();
                    assert_eq!(text.lines().count() as u64, seq + 1, "{id}");
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        let fresh = JsonlStore::open(dir.path(), Durability::Os).unwrap();
        for session in 0..32 {
            let loaded = fresh.load(&format!("s{session}")).await.unwrap().unwrap();
            assert_eq!(loaded.events, (0..20).map(idle).collect::<Vec<_>>());
        }
    }

    #[tokio::test]
    async fn evicted_files_reopen_from_their_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let store = JsonlStore::open(dir.path(), Durability::Os).unwrap().with_max_open_files(2);
        for round in 0..3 {
            for session in ["a", "b", "c", "d"] {
                store.append(session, &[idle(round)]).await.unwrap();
            }
        }
        assert!(store.cache().slots.len() <= 2);
        // A stale seq is still refused after the handle was evicted and reopened.
        let err = store.append("a", &[idle(1)]).await.unwrap_err();
        assert!(matches!(err, StoreError::OutOfOrder { expected: 3, found: 1, .. }), "{err}");
        let fresh = JsonlStore::open(dir.path(), Durability::Os).unwrap();
        for session in ["a", "b", "c", "d"] {
            let loaded = fresh.load(session).await.unwrap().unwrap();
            assert_eq!(loaded.events, vec![idle(0), idle(1), idle(2)], "{session}");
        }
    }

    #[tokio::test]
    async fn a_reopened_log_finds_its_next_seq_behind_a_last_line_longer_than_a_read_chunk() {
        use crate::event::UserMessage;
        let dir = tempfile::tempdir().unwrap();
        let long = |seq| Envelope {
            seq,
            time: 0,
            event: Event::UserMessage(UserMessage { text: "é".repeat(10_000) }),
        };
        let store = JsonlStore::open(dir.path(), Durability::Os).unwrap();
        store.append("s", &[idle(0), long(1)]).await.unwrap();
        let store = JsonlStore::open(dir.path(), Durability::Os).unwrap();
        let err = store.append("s", &[idle(1)]).await.unwrap_err();
        assert!(matches!(err, StoreError::OutOfOrder { expected: 2, found: 1, .. }), "{err}");
        store.append("s", &[long(2), idle(3)]).await.unwrap();
        let loaded = JsonlStore::open(dir.path(), Durability::Os).unwrap().load("s").await;
        assert_eq!(loaded.unwrap().unwrap().events, [idle(0), long(1), long(2), idle(3)]);
    }

    #[tokio::test]
    async fn an_append_behind_a_corrupt_last_line_fails_naming_it_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let first = serde_json::to_string(&idle(0)).unwrap();
        std::fs::write(&path, format!("{first}\n{first}\nnot json\n")).unwrap();
        let before = std::fs::read(&path).unwrap();
        let store = JsonlStore::open(dir.path(), Durability::Os).unwrap();
        let err = store.append("s", &[idle(3)]).await.unwrap_err();
        assert!(err.to_string().starts_with(&format!("{}:3: ", path.display())), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    #[tokio::test]
    async fn an_append_to_a_torn_log_that_was_not_loaded_cuts_the_tail_first() {
        let dir = tempfile::tempdir().unwrap();
        let store = JsonlStore::open(dir.path(), Durability::Os).unwrap();
        store.append("s", &[idle(0), idle(1)]).await.unwrap();
        let path = store.path("s").unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(br#"{"seq":2,"ti"#);
        std::fs::write(&path, &bytes).unwrap();

        let reopened = JsonlStore::open(dir.path(), Durability::Os).unwrap();
        reopened.append("s", &[idle(2)]).await.unwrap();
        let loaded = reopened.load("s").await.unwrap().unwrap();
        assert_eq!(loaded.events, vec![idle(0), idle(1), idle(2)]);
        assert_eq!(loaded.torn, None, "the tail was cut by the append, before this load");
        let kept = std::fs::read(reopened.torn_path("s").unwrap()).unwrap();
        assert_eq!(kept, b"{\"seq\":2,\"ti\n");
    }

    #[tokio::test]
    async fn a_line_over_the_limit_is_corrupt_or_a_torn_tail_never_a_huge_allocation() {
        let dir = tempfile::tempdir().unwrap();
        let store = JsonlStore::open(dir.path(), Durability::Os).unwrap();
        let first = serde_json::to_string(&idle(0)).unwrap();
        let huge = vec![b'x'; line::MAX_LINE_BYTES + 1];
        let path = store.path("s").unwrap();
        let write = |tail: &[u8]| {
            let mut bytes = format!("{first}\n").into_bytes();
            bytes.extend_from_slice(&huge);
            bytes.extend_from_slice(tail);
            std::fs::write(&path, &bytes).unwrap();
            bytes.len() as u64
        };

        // A complete line over the limit: corrupt at its line, whether loaded or appended to.
        let len = write(b"\n");
        let err = store.load("s").await.unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("{}:2: corrupt log line: the line is", path.display())),
            "{err}"
        );
        let reopened = JsonlStore::open(dir.path(), Durability::Os).unwrap();
        let err = reopened.append("s", &[idle(2)]).await.unwrap_err().to_string();
        assert!(err.contains("over the limit of 67108864 bytes"), "{err}");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), len, "left as it was");

        // A torn tail over the limit is cut like any other, its bytes kept.
        write(b"");
        let loaded = JsonlStore::open(dir.path(), Durability::Os).unwrap().load("s").await;
        let loaded = loaded.unwrap().unwrap();
        assert_eq!(loaded.events, [idle(0)]);
        assert_eq!(loaded.torn.as_ref().map(|t| (t.line, t.bytes)), Some((2, huge.len() as u64)));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), first.len() as u64 + 1);
        let kept = std::fs::metadata(store.torn_path("s").unwrap()).unwrap().len();
        assert_eq!(kept, huge.len() as u64 + 1);
    }

    #[tokio::test]
    async fn an_event_over_the_line_limit_is_refused_and_nothing_is_written() {
        use crate::event::UserMessage;
        let dir = tempfile::tempdir().unwrap();
        let store = JsonlStore::open(dir.path(), Durability::Os).unwrap();
        store.append("s", &[idle(0)]).await.unwrap();
        let before = std::fs::read(store.path("s").unwrap()).unwrap();
        let huge = Envelope {
            seq: 2,
            time: 0,
            event: Event::UserMessage(UserMessage { text: "x".repeat(line::MAX_LINE_BYTES) }),
        };
        let err = store.append("s", &[idle(1), huge]).await.unwrap_err();
        assert!(
            matches!(
                &err,
                StoreError::Unwritable { source: line::EncodeError::TooLong { seq: 2, .. }, .. }
            ),
            "{err}"
        );
        assert_eq!(std::fs::read(store.path("s").unwrap()).unwrap(), before);
        store.append("s", &[idle(1)]).await.unwrap();
    }

    #[tokio::test]
    async fn the_first_append_of_a_new_session_must_start_at_zero_and_creates_nothing_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let store = JsonlStore::open(dir.path(), Durability::Os).unwrap();
        let err = store.append("s", &[idle(1)]).await.unwrap_err();
        assert!(matches!(err, StoreError::OutOfOrder { expected: 0, found: 1, .. }), "{err}");
        assert!(!store.path("s").unwrap().exists());
        assert_eq!(store.load("s").await.unwrap(), None);
        assert!(store.sessions().await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_failed_sync_leaves_no_trace_of_the_append() {
        struct FailSecond(std::sync::atomic::AtomicU64);
        impl Syncer for FailSecond {
            fn sync(&self, file: &std::fs::File) -> std::io::Result<()> {
                let n = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if n == 2 { Err(std::io::Error::other("EIO")) } else { file.sync_data() }
            }
        }
        let dir = tempfile::tempdir().unwrap();
        // Syncs: 0 = the directory (new file), 1 = first append, 2 = second append (fails).
        let store = JsonlStore::open(dir.path(), Durability::Disk)
            .unwrap()
            .with_syncer(Arc::new(FailSecond(0.into())));
        store.append("s", &[idle(0)]).await.unwrap();
        let before = std::fs::read(store.path("s").unwrap()).unwrap();
        let err = store.append("s", &[idle(1), idle(2)]).await.unwrap_err();
        assert!(err.to_string().contains("EIO"), "{err}");
        assert_eq!(std::fs::read(store.path("s").unwrap()).unwrap(), before);
        // The same append can be retried.
        store.append("s", &[idle(1), idle(2)]).await.unwrap();
        let loaded = store.load("s").await.unwrap().unwrap();
        assert_eq!(loaded.events, vec![idle(0), idle(1), idle(2)]);
    }

    #[tokio::test]
    async fn disk_syncs_the_directory_once_when_a_session_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let syncs = Arc::new(CountingSyncer::fdatasync());
        let store =
            JsonlStore::open(dir.path(), Durability::Disk).unwrap().with_syncer(syncs.clone());
        store.append("s", &[idle(0)]).await.unwrap();
        assert_eq!(syncs.count(), 2, "the new directory entry and the append");
        store.append("s", &[idle(1)]).await.unwrap();
        assert_eq!(syncs.count(), 3);
    }

    #[tokio::test]
    async fn sessions_lists_only_log_files_with_valid_ids() {
        let dir = tempfile::tempdir().unwrap();
        let store = JsonlStore::open(dir.path(), Durability::Os).unwrap();
        store.append("b", &[idle(0)]).await.unwrap();
        store.append("a.1", &[idle(0)]).await.unwrap();
        for other in ["notes.txt", "x.jsonl.torn", ".hidden.jsonl"] {
            std::fs::write(dir.path().join(other), "").unwrap();
        }
        std::fs::create_dir(dir.path().join("d.jsonl")).unwrap();
        assert_eq!(store.sessions().await.unwrap(), ["a.1", "b"]);
    }
}
