//! One conformance suite for every store: memory, JSONL, SQLite and (with the `postgres`
//! feature, against a throwaway cluster from `rein-testkit`) PostgreSQL run the same cases.
//!
//! Each case builds every [`Backend`] afresh, runs the same body against each, and names the
//! store in every assertion. Cases that only apply to some stores (a torn tail exists only in a
//! file; a memory store cannot be reopened by another instance) say so in the body. Without
//! PostgreSQL installed, the PostgreSQL backend is left out after saying how to install it —
//! except with `CI=true`, where that is a failure (see `rein_testkit::postgres`).
//!
//! Durability acknowledgement order is two cases: an acknowledgement comes only once the events
//! are durable and readable (by a store already following the log, and by a fresh one), in each
//! session's append order; and an append that failed — its syncs failing ([`FailingSyncs`]), or
//! the PostgreSQL server stopped mid-batch ([`Fault`]) — is never acknowledged, and a fresh store
//! finds every acknowledged event and, of the failed append, nothing, or all of it where the
//! store cannot tell whether a commit in flight was kept ([`Backend::failed_append_may_survive`]).

#![cfg(feature = "sqlite")]
// Helpers outside `#[test]` functions build fixtures; a failure there is a broken test.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rein_runtime::clock::VirtualClock;
use rein_runtime::event::*;
use rein_runtime::session_log::SessionLog;
use rein_runtime::store::jsonl::JsonlStore;
use rein_runtime::store::memory::MemoryStore;
use rein_runtime::store::sqlite::SqliteStore;
use rein_runtime::store::sync::{Fdatasync, Syncer};
use rein_runtime::store::{Durability, SessionStore, SettingsRecord, StoreError, StoredSettings};
use rein_testkit::stamped::{append_concurrently, envelope, idle, message};

/// One kind of store, with what it needs to be opened again.
enum Backend {
    Memory(MemoryStore),
    Jsonl(tempfile::TempDir),
    Sqlite(tempfile::TempDir),
    /// The cluster (kept running while the backend lives) and the database's URL.
    #[cfg(feature = "postgres")]
    Postgres {
        cluster: Arc<rein_testkit::PgCluster>,
        url: String,
    },
}

impl Backend {
    fn name(&self) -> &'static str {
        match self {
            Self::Memory(_) => "memory",
            Self::Jsonl(_) => "jsonl",
            Self::Sqlite(_) => "sqlite",
            #[cfg(feature = "postgres")]
            Self::Postgres { .. } => "postgres",
        }
    }

    /// A store over this backend's logs: a new instance each time (for memory, the same logs).
    async fn open(&self, durability: Durability) -> Arc<dyn SessionStore> {
        match self {
            Self::Memory(store) => Arc::new(store.clone()),
            Self::Jsonl(dir) => Arc::new(JsonlStore::open(dir.path(), durability).unwrap()),
            Self::Sqlite(dir) => {
                Arc::new(SqliteStore::open(dir.path().join("events.db"), durability).unwrap())
            }
            #[cfg(feature = "postgres")]
            Self::Postgres { url, .. } => Arc::new(
                rein_runtime::store::postgres::PostgresStore::open(url, durability).await.unwrap(),
            ),
        }
    }

    /// Whether a second instance is another writer (refused a claim the first holds).
    fn second_instance_is_another_writer(&self) -> bool {
        !matches!(self, Self::Memory(_))
    }

    /// Replaces the stored line of `session`'s event `seq` with `text`, behind the store's back.
    async fn damage(&self, session: &str, seq: u64, text: &str) {
        match self {
            Self::Memory(_) => unreachable!("a memory store holds events, not lines"),
            Self::Jsonl(dir) => {
                let path = dir.path().join(format!("{session}.jsonl"));
                let content = std::fs::read_to_string(&path).unwrap();
                let mut lines: Vec<String> = content.lines().map(str::to_owned).collect();
                lines[usize::try_from(seq).unwrap()] = text.to_owned();
                std::fs::write(&path, lines.join("\n") + "\n").unwrap();
            }
            Self::Sqlite(dir) => {
                let conn = rusqlite::Connection::open(dir.path().join("events.db")).unwrap();
                let seq = i64::try_from(seq).unwrap();
                conn.execute(
                    "UPDATE events SET line = ?1 WHERE session = ?2 AND seq = ?3",
                    rusqlite::params![text, session, seq],
                )
                .unwrap();
            }
            #[cfg(feature = "postgres")]
            Self::Postgres { url, .. } => {
                let client = raw_postgres(url).await;
                let seq = i64::try_from(seq).unwrap();
                let n = client
                    .execute(
                        "UPDATE events SET line = $1 WHERE session = $2 AND seq = $3",
                        &[&text, &session, &seq],
                    )
                    .await
                    .unwrap();
                assert_eq!(n, 1);
            }
        }
    }
}

impl Backend {
    /// Replaces plugin `plugin`'s stored settings with `text` (not JSON), behind the store's
    /// back; `false` for a store that holds values, not text (memory).
    async fn damage_settings(&self, plugin: &str, text: &str) -> bool {
        match self {
            Self::Memory(_) => return false,
            Self::Jsonl(dir) => {
                std::fs::write(dir.path().join(format!("{plugin}.settings.json")), text).unwrap();
            }
            Self::Sqlite(dir) => {
                let conn = rusqlite::Connection::open(dir.path().join("events.db")).unwrap();
                let n = conn
                    .execute(
                        "UPDATE settings SET settings = ?1 WHERE plugin = ?2",
                        rusqlite::params![text, plugin],
                    )
                    .unwrap();
                assert_eq!(n, 1);
            }
            #[cfg(feature = "postgres")]
            Self::Postgres { url, .. } => {
                let client = raw_postgres(url).await;
                let n = client
                    .execute(
                        "UPDATE settings SET settings = $1 WHERE plugin = $2",
                        &[&text, &plugin],
                    )
                    .await
                    .unwrap();
                assert_eq!(n, 1);
            }
        }
        true
    }
}

/// A plain client of the database at `url`, its connection on a task.
#[cfg(feature = "postgres")]
async fn raw_postgres(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    client
}

/// Every backend, fresh.
#[cfg_attr(not(feature = "postgres"), allow(unused_mut))]
fn backends() -> Vec<Backend> {
    let mut all = vec![
        Backend::Memory(MemoryStore::new()),
        Backend::Jsonl(tempfile::tempdir().unwrap()),
        Backend::Sqlite(tempfile::tempdir().unwrap()),
    ];
    #[cfg(feature = "postgres")]
    if let Some(cluster) = rein_testkit::PgCluster::start() {
        let url = cluster.create_database("conformance");
        all.push(Backend::Postgres { cluster: Arc::new(cluster), url });
    }
    all
}

/// A log of `n` events in batches of 1, 2, 3, 1, …, some long, some with newlines.
fn batches(n: u64) -> Vec<Vec<Envelope>> {
    let event = |seq: u64| match seq % 5 {
        0 => idle(seq),
        1 => message(seq, &"long line ".repeat(8_000)),
        2 => message(seq, "two\nlines \u{1F600} \"quoted\" \\ \u{0}"),
        _ => message(seq, &format!("event {seq}")),
    };
    let (mut out, mut seq, mut size) = (Vec::new(), 0, 1);
    while seq < n {
        let end = (seq + size).min(n);
        out.push((seq..end).map(event).collect());
        seq = end;
        size = size % 3 + 1;
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_load_back_whole_and_from_any_seq_and_after_reopening() {
    const N: u64 = 30;
    for backend in backends() {
        let name = backend.name();
        let store = backend.open(Durability::Os).await;
        assert_eq!(store.load("s").await.unwrap(), None, "{name}");
        assert_eq!(store.load_from("s", 0).await.unwrap(), [], "{name}");
        for batch in batches(N) {
            store.append("s", &batch).await.unwrap();
            assert_eq!(store.load_from("s", batch[0].seq).await.unwrap(), batch, "{name}");
        }
        store.append("t", &[idle(0)]).await.unwrap();
        store.append("s", &[]).await.unwrap();
        let all: Vec<Envelope> = batches(N).into_iter().flatten().collect();
        let loaded = store.load("s").await.unwrap().unwrap();
        assert_eq!((loaded.events.as_slice(), loaded.torn), (all.as_slice(), None), "{name}");
        assert_eq!(store.sessions().await.unwrap(), ["s", "t"], "{name}");
        drop(store);

        let reopened = backend.open(Durability::Os).await;
        for seq in [0, 1, 7, N - 1, N, N + 5] {
            let want: Vec<Envelope> = all.iter().filter(|e| e.seq >= seq).cloned().collect();
            assert_eq!(reopened.load_from("s", seq).await.unwrap(), want, "{name} from {seq}");
        }
        assert_eq!(reopened.load("s").await.unwrap().unwrap().events, all, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_that_does_not_continue_the_log_or_names_no_valid_session_writes_nothing() {
    for backend in backends() {
        let name = backend.name();
        let store = backend.open(Durability::Os).await;
        store.append("s", &[idle(0), idle(1)]).await.unwrap();
        for (stale, expected, found) in
            [(vec![idle(1)], 2, 1), (vec![idle(3)], 2, 3), (vec![idle(2), idle(4)], 3, 4)]
        {
            let err = store.append("s", &stale).await.unwrap_err();
            assert!(
                matches!(&err, StoreError::OutOfOrder { session, expected: e, found: f }
                    if session == "s" && *e == expected && *f == found),
                "{name}: {err}"
            );
        }
        let err = store.append("new", &[idle(1)]).await.unwrap_err();
        assert!(matches!(err, StoreError::OutOfOrder { expected: 0, found: 1, .. }), "{name}");
        for bad in ["", "../escape", "a/b", ".hidden"] {
            let err = store.append(bad, &[idle(0)]).await.unwrap_err();
            assert!(matches!(err, StoreError::InvalidSessionId(_)), "{name} {bad:?}: {err}");
            assert!(store.load(bad).await.is_err(), "{name} {bad:?}");
        }
        // A bad append among concurrent good ones fails alone.
        let (ea, eb, ec) = ([idle(0), idle(1)], [idle(0)], [idle(0)]);
        let (a, b, c) =
            tokio::join!(store.append("a", &ea), store.append("s", &eb), store.append("c", &ec));
        a.unwrap();
        c.unwrap();
        assert!(matches!(b, Err(StoreError::OutOfOrder { expected: 2, .. })), "{name}: {b:?}");
        assert_eq!(store.load("s").await.unwrap().unwrap().events, [idle(0), idle(1)], "{name}");
        assert_eq!(store.sessions().await.unwrap(), ["a", "c", "s"], "{name}");
        // What was refused moved no head.
        let next: Vec<(String, u64)> = store
            .heads()
            .await
            .unwrap()
            .into_iter()
            .map(|h| (h.session, h.head.unwrap().next_seq))
            .collect();
        let want = [("a".to_owned(), 2), ("c".to_owned(), 1), ("s".to_owned(), 2)];
        assert_eq!(next, want, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_record_fails_the_load_naming_where_and_is_never_rewritten() {
    for backend in backends() {
        let name = backend.name();
        if matches!(backend, Backend::Memory(_)) {
            continue; // It holds events, not lines: nothing can be corrupt.
        }
        let store = backend.open(Durability::Os).await;
        store.append("s", &[idle(0), idle(1), idle(2)]).await.unwrap();
        store.append("t", &[idle(0)]).await.unwrap();
        drop(store);
        backend.damage("s", 1, r#"{"seq":1,"time":1,"type":"no/such","data":{}}"#).await;
        let store = backend.open(Durability::Os).await;
        for _ in 0..2 {
            let err = store.load("s").await.unwrap_err();
            assert!(matches!(&err, StoreError::Corrupt { line: 2, .. }), "{name}: {err}");
            assert!(err.to_string().contains("no/such"), "{name}: {err}");
            let err = store.load_from("s", 1).await.unwrap_err();
            assert!(matches!(&err, StoreError::Corrupt { line: 2, .. }), "{name}: {err}");
        }
        assert_eq!(store.load_from("s", 2).await.unwrap(), [idle(2)], "{name}: after it");
        assert_eq!(store.load("t").await.unwrap().unwrap().events, [idle(0)], "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_last_line_is_cut_on_reopen_where_a_store_can_tear() {
    // Only a file can hold part of a record: SQLite and PostgreSQL commit whole transactions.
    for backend in backends() {
        let name = backend.name();
        let store = backend.open(Durability::Os).await;
        store.append("s", &[idle(0), idle(1)]).await.unwrap();
        drop(store);
        if let Backend::Jsonl(dir) = &backend {
            let path = dir.path().join("s.jsonl");
            let mut bytes = std::fs::read(&path).unwrap();
            bytes.extend_from_slice(br#"{"seq":2,"ti"#);
            std::fs::write(&path, bytes).unwrap();
        }
        let store = backend.open(Durability::Os).await;
        let loaded = store.load("s").await.unwrap().unwrap();
        assert_eq!(loaded.events, [idle(0), idle(1)], "{name}");
        assert_eq!(loaded.torn.is_some(), matches!(backend, Backend::Jsonl(_)), "{name}");
        store.append("s", &[idle(2)]).await.unwrap();
        assert_eq!(store.load("s").await.unwrap().unwrap().events.len(), 3, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_sessions_appending_at_once_lose_nothing_and_keep_seq_contiguous() {
    const SESSIONS: usize = 64;
    const APPENDS: u64 = 6;
    for backend in backends() {
        let name = backend.name();
        let store = backend.open(Durability::Disk).await;
        let expected = append_concurrently(&store, SESSIONS, APPENDS).await;
        drop(store);
        let store = backend.open(Durability::Os).await;
        assert_eq!(store.sessions().await.unwrap().len(), SESSIONS, "{name}");
        let heads = store.heads().await.unwrap();
        let mut want: Vec<(String, u64)> = expected.clone();
        want.sort();
        let got: Vec<(String, u64)> =
            heads.into_iter().map(|h| (h.session, h.head.unwrap().next_seq)).collect();
        assert_eq!(got, want, "{name}: every head");
        for (session, count) in expected {
            let events = store.load(&session).await.unwrap().unwrap().events;
            let want: Vec<Envelope> =
                (0..count).map(|q| message(q, &format!("{session}/{q}"))).collect();
            assert_eq!(events, want, "{name} {session}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopening_a_log_a_crash_left_mid_turn_closes_the_turn_and_the_log_checks() {
    for backend in backends() {
        let name = backend.name();
        let store = backend.open(Durability::Disk).await;
        let start = Event::SessionStart(SessionStart { session: "s".into(), format: LOG_FORMAT });
        let crashed = [
            envelope(0, start),
            message(1, "hi"),
            envelope(2, Event::TurnStart(TurnStart { turn: 1 })),
        ];
        store.append("s", &crashed).await.unwrap();
        drop(store); // The crash: nothing closed the turn.

        let store = backend.open(Durability::Disk).await;
        let clock = Arc::new(VirtualClock::start());
        let (log, report) = SessionLog::open(store.clone(), clock, "s").await.unwrap();
        assert_eq!(report.interrupted_turn, Some(1), "{name}");
        log.close().await;
        let events = store.load("s").await.unwrap().unwrap().events;
        assert_eq!(events[..3], crashed, "{name}: what was there is kept");
        assert!(
            rein_invariant::check_finished_log(&events).is_empty(),
            "{name}: {:?}",
            rein_invariant::check_finished_log(&events)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claimed_session_is_refused_to_another_writer_until_let_go() {
    for backend in backends() {
        let name = backend.name();
        if matches!(backend, Backend::Sqlite(_)) {
            // A SQLite database belongs to one store at a time: the second open is refused.
            let first = backend.open(Durability::Os).await;
            let dir = match &backend {
                Backend::Sqlite(dir) => dir.path().join("events.db"),
                _ => unreachable!(),
            };
            let refused = SqliteStore::open(&dir, Durability::Os).unwrap_err();
            assert!(matches!(refused, StoreError::Locked { .. }), "{name}: {refused}");
            drop(first);
            continue;
        }
        let first = backend.open(Durability::Os).await;
        let second = backend.open(Durability::Os).await;
        let held = first.claim("s").await.unwrap();
        first.append("s", &[idle(0)]).await.unwrap();
        if backend.second_instance_is_another_writer() {
            let refused = second.claim("s").await.unwrap_err();
            assert!(matches!(refused, StoreError::Locked { .. }), "{name}: {refused}");
            assert!(refused.to_string().contains("is in use by"), "{name}: {refused}");
        }
        drop(second.claim("t").await.unwrap());
        drop(held);
        let taken = second.claim("s").await.unwrap();
        second.append("s", &[idle(1)]).await.unwrap();
        assert_eq!(first.load("s").await.unwrap().unwrap().events, [idle(0), idle(1)], "{name}");
        drop(taken);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledged_append_is_readable_by_a_new_store_at_once() {
    // The acknowledgement comes after the store holds the events: another instance (another
    // process, another node) reads them the moment `append` returned.
    for backend in backends() {
        let name = backend.name();
        let writer = backend.open(Durability::Disk).await;
        for seq in 0..5 {
            writer.append("s", &[idle(seq)]).await.unwrap();
            if matches!(backend, Backend::Sqlite(_)) {
                continue; // One store per database: SQLite is read by its own store.
            }
            let reader = backend.open(Durability::Os).await;
            let events = reader.load("s").await.unwrap().unwrap().events;
            assert_eq!(events.len() as u64, seq + 1, "{name}");
        }
        assert_eq!(writer.load("s").await.unwrap().unwrap().events.len(), 5, "{name}");
    }
}

/// A switch that makes a store's appends fail while it is on: its syncs fail (JSONL, SQLite), or
/// its database server is down (PostgreSQL).
enum Fault {
    Syncs(Arc<FailingSyncs>),
    #[cfg(feature = "postgres")]
    Server(Arc<rein_testkit::PgCluster>),
}

/// Syncs that fail while switched on (as a disk that fails would), and sync otherwise.
#[derive(Default)]
struct FailingSyncs {
    failing: AtomicBool,
}

impl Syncer for FailingSyncs {
    fn sync(&self, file: &std::fs::File) -> std::io::Result<()> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(std::io::Error::other("the disk failed (on purpose)"));
        }
        Fdatasync.sync(file)
    }
}

impl Fault {
    fn set(&self, on: bool) {
        match self {
            Fault::Syncs(syncs) => syncs.failing.store(on, Ordering::SeqCst),
            #[cfg(feature = "postgres")]
            Fault::Server(cluster) => tokio::task::block_in_place(|| match on {
                true => cluster.stop_immediate(),
                false => cluster.start_again(),
            }),
        }
    }
}

impl Backend {
    /// A store at `Disk` whose appends can be made to fail, and the switch; `None` for memory,
    /// where nothing can fail.
    async fn open_failing(&self) -> Option<(Arc<dyn SessionStore>, Fault)> {
        let syncs = Arc::new(FailingSyncs::default());
        Some(match self {
            Self::Memory(_) => return None,
            Self::Jsonl(dir) => {
                let store = JsonlStore::open(dir.path(), Durability::Disk).unwrap();
                (Arc::new(store.with_syncer(syncs.clone())), Fault::Syncs(syncs))
            }
            Self::Sqlite(dir) => {
                let path = dir.path().join("events.db");
                let store =
                    SqliteStore::open_with_syncer(path, Durability::Disk, syncs.clone()).unwrap();
                (Arc::new(store), Fault::Syncs(syncs))
            }
            #[cfg(feature = "postgres")]
            Self::Postgres { cluster, .. } => {
                (self.open(Durability::Disk).await, Fault::Server(Arc::clone(cluster)))
            }
        })
    }

    /// Whether an append that failed may still be found, whole, by a fresh store: the commit of
    /// a batch in flight when the connection broke (PostgreSQL), a commit whose WAL sync then
    /// failed (SQLite). Never anything after it, never a part of it. A JSONL append whose sync
    /// fails is cut back.
    fn failed_append_may_survive(&self) -> bool {
        !matches!(self, Self::Jsonl(_) | Self::Memory(_))
    }

    /// Whether a second instance may be open on the logs while the first writes (SQLite: one
    /// store per database file).
    fn second_instance_reads_along(&self) -> bool {
        !matches!(self, Self::Sqlite(_))
    }
}

/// Session `s`'s batch starting at `seq`: 1 to 3 messages.
fn batch_at(s: usize, seq: u64) -> Vec<Envelope> {
    let size = 1 + (seq + s as u64) % 3;
    (seq..seq + size).map(|seq| message(seq, &format!("s{s}/{seq}"))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledgement_comes_in_append_order_once_the_events_are_durable_and_readable() {
    // Durability acknowledgement order: an append resolves only once its events are held at
    // `Disk`, and a session's acknowledgements come in the order of its appends — the ack of
    // seq N means every seq up to N is in the log, readable at once by a store that was already
    // open (another process following the log) and by a fresh one.
    const SESSIONS: usize = 6;
    const EVENTS: u64 = 40;
    for backend in backends() {
        let name = backend.name();
        let writer = backend.open(Durability::Disk).await;
        let follower = match backend.second_instance_reads_along() {
            true => backend.open(Durability::Os).await,
            false => Arc::clone(&writer),
        };
        let backend = &backend;
        let acks = std::sync::Mutex::new(Vec::new());
        let sessions = (0..SESSIONS).map(|s| {
            let (writer, follower, acks) = (&writer, &follower, &acks);
            async move {
                let session = format!("s{s}");
                let _claim = writer.claim(&session).await.unwrap();
                let mut seq = 0;
                while seq < EVENTS {
                    let batch = batch_at(s, seq);
                    writer.append(&session, &batch).await.unwrap();
                    seq += batch.len() as u64;
                    acks.lock().unwrap().push((s, seq - 1));
                    // Read along, as a follower catching up does: from the acknowledged seq at
                    // every ack (its store read this log before), the whole log now and then.
                    let last = follower.load_from(&session, seq - 1).await.unwrap();
                    assert_eq!(last.first().map(|e| e.seq), Some(seq - 1), "{name}: {session}");
                    if seq % 5 == 0 {
                        let read = follower.load(&session).await.unwrap().unwrap().events;
                        assert!(read.len() as u64 >= seq, "{name}: {session}: acked {seq}");
                        let contiguous = read.iter().zip(0..).all(|(e, i)| e.seq == i);
                        assert!(contiguous, "{name}: {session}");
                    }
                    if backend.second_instance_reads_along() && seq % 4 == 0 {
                        let fresh = backend.open(Durability::Os).await;
                        let loaded = fresh.load(&session).await.unwrap().unwrap().events;
                        assert!(loaded.len() as u64 >= seq, "{name}: {session}: a fresh store");
                    }
                }
            }
        });
        futures::future::join_all(sessions).await;
        let acks = acks.into_inner().unwrap();
        for s in 0..SESSIONS {
            let own: Vec<u64> =
                acks.iter().filter(|(of, _)| *of == s).map(|(_, seq)| *seq).collect();
            assert!(
                own.windows(2).all(|w| w[0] < w[1]),
                "{name}: s{s}'s acks out of order: {own:?}"
            );
        }
        drop((writer, follower));
        let reopened = backend.open(Durability::Os).await;
        for s in 0..SESSIONS {
            let events = reopened.load(&format!("s{s}")).await.unwrap().unwrap().events;
            let want: Vec<Envelope> = {
                let mut all = Vec::new();
                while (all.len() as u64) < EVENTS {
                    all.extend(batch_at(s, all.len() as u64));
                }
                all
            };
            assert_eq!(events, want, "{name}: s{s} after reopening");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_that_failed_is_never_acknowledged_and_is_found_whole_or_not_at_all() {
    // The fault strikes mid-run (syncs fail; the PostgreSQL server stops at once) while every
    // session appends: each session's first refused append, and one more try while the fault
    // holds, fail. Then a fresh store finds every acknowledged event; of the refused append
    // nothing (or, where the store cannot tell whether a commit in flight was kept, all of it),
    // and never the retry or anything after; and appends go on from what the log holds.
    const SESSIONS: usize = 6;
    const STRIKE_AFTER: u64 = 24;
    for backend in backends() {
        let name = backend.name();
        let Some((store, fault)) = backend.open_failing().await else { continue };
        let (acked_total, struck) = (AtomicU64::new(0), AtomicBool::new(false));
        let sessions = (0..SESSIONS).map(|s| {
            let (store, fault, acked_total, struck) = (&store, &fault, &acked_total, &struck);
            async move {
                let session = format!("s{s}");
                let claim = store.claim(&session).await.unwrap();
                let mut seq = 0;
                loop {
                    assert!(seq < 10_000, "{name}: the fault never struck");
                    let batch = batch_at(s, seq);
                    match store.append(&session, &batch).await {
                        Ok(()) => seq += batch.len() as u64,
                        Err(e) => {
                            assert!(
                                matches!(e, StoreError::Io { .. } | StoreError::Sqlite(_))
                                    || e.to_string().contains("postgres"),
                                "{name}: {e}"
                            );
                            break;
                        }
                    }
                    let total = acked_total.fetch_add(1, Ordering::SeqCst) + 1;
                    if total == STRIKE_AFTER && !struck.swap(true, Ordering::SeqCst) {
                        fault.set(true);
                    }
                    tokio::task::yield_now().await;
                }
                // Refused while the fault holds, too.
                let retry = batch_at(s, seq);
                assert!(store.append(&session, &retry).await.is_err(), "{name}: {session}");
                drop(claim);
                (session, seq, retry.len() as u64)
            }
        });
        let refused = futures::future::join_all(sessions).await;
        fault.set(false);
        drop(store);

        let fresh = backend.open(Durability::Disk).await;
        for (session, acked, size) in refused {
            let events = fresh.load(&session).await.unwrap().unwrap().events;
            let held = events.len() as u64;
            assert!(events.iter().zip(0..).all(|(e, i)| e.seq == i), "{name}: {session}");
            assert!(held >= acked, "{name}: {session}: {acked} acknowledged, {held} found");
            let allowed: &[u64] = match backend.failed_append_may_survive() {
                true => &[acked, acked + size],
                false => &[acked],
            };
            assert!(
                allowed.contains(&held),
                "{name}: {session}: {acked} acknowledged, the refused append had {size} events, \
                 {held} found"
            );
            // The store knows what it holds: the log goes on from there, and only from there.
            let _claim = fresh.claim(&session).await.unwrap();
            let again = fresh.append(&session, &[idle(held + 1)]).await;
            assert!(matches!(again, Err(StoreError::OutOfOrder { .. })), "{name}: {again:?}");
            let mut next = Err(StoreError::Closed);
            for _ in 0..300 {
                next = fresh.append(&session, &[idle(held)]).await;
                if next.is_ok() {
                    break;
                }
                // A PostgreSQL writer may still be reconnecting after the restart.
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            next.unwrap_or_else(|e| panic!("{name}: {session}: appends do not go on: {e}"));
            let events = fresh.load(&session).await.unwrap().unwrap().events;
            assert_eq!(events.len() as u64, held + 1, "{name}: {session}");
        }
    }
}

#[cfg(feature = "postgres")]
mod postgres {
    //! What only PostgreSQL has: a server that can go away and come back, schema versions,
    //! passwords.

    use std::sync::Arc;

    use rein_runtime::store::postgres::PostgresStore;
    use rein_runtime::store::{Durability, SessionStore, StoreError};

    use super::{idle, raw_postgres};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_server_restarted_mid_run_loses_no_acknowledged_event() {
        const SESSIONS: usize = 16;
        const EVENTS: u64 = 60;
        let Some(cluster) = rein_testkit::PgCluster::start() else { return };
        let url = cluster.create_database("restart");
        let store = Arc::new(PostgresStore::open(&url, Durability::Disk).await.unwrap());
        let cluster = Arc::new(cluster);
        let mut tasks = tokio::task::JoinSet::new();
        for s in 0..SESSIONS {
            let store = store.clone();
            let cluster = cluster.clone();
            tasks.spawn(async move {
                let session = format!("s{s}");
                let (mut acknowledged, mut refused, mut seq) = (0u64, 0u64, 0u64);
                while seq < EVENTS {
                    match store.append(&session, &[idle(seq)]).await {
                        Ok(()) => {
                            acknowledged = seq + 1;
                            seq += 1;
                        }
                        // The refused append was committed after all: the log says so.
                        Err(StoreError::OutOfOrder { expected, .. }) if expected == seq + 1 => {
                            seq += 1;
                        }
                        Err(e) => {
                            assert!(matches!(e, StoreError::Postgres(_)), "{e}");
                            refused += 1;
                            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                        }
                    }
                    if s == 0 && seq == EVENTS / 3 && refused == 0 {
                        let cluster = cluster.clone();
                        tokio::task::spawn_blocking(move || cluster.restart_immediate())
                            .await
                            .unwrap();
                    }
                }
                (session, acknowledged, refused)
            });
        }
        let mut refusals = 0;
        while let Some(done) = tasks.join_next().await {
            let (session, acknowledged, refused) = done.unwrap();
            refusals += refused;
            let events = store.load(&session).await.unwrap().unwrap().events;
            assert!(events.len() as u64 >= acknowledged, "{session}: an acknowledged event lost");
            assert!(events.iter().enumerate().all(|(i, e)| e.seq == i as u64), "{session}");
            assert_eq!(events.len() as u64, EVENTS, "{session}: appends went on after it");
        }
        assert!(refusals > 0, "the restart was noticed: appends were refused meanwhile");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn claims_made_while_the_server_is_away_never_hold_off_its_reconnection() {
        // A session whose log failed is reopened at the next call, and a busy runtime calls
        // again at once: claims keep coming while the server is down. They are refused, and the
        // lock connection still comes back once the server does.
        let Some(cluster) = rein_testkit::PgCluster::start() else { return };
        let url = cluster.create_database("claims");
        let store = PostgresStore::open(&url, Durability::Disk).await.unwrap();
        drop(store.claim("s").await.unwrap());
        tokio::task::block_in_place(|| cluster.stop_immediate());
        let refused = store.claim("s").await.map(drop).unwrap_err();
        assert!(refused.to_string().contains("postgres://rein@127.0.0.1:"), "{refused}");
        tokio::task::block_in_place(|| cluster.start_again());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let claim = loop {
            match store.claim("s").await {
                Ok(claim) => break claim,
                Err(e) => assert!(std::time::Instant::now() < deadline, "still refused: {e}"),
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        };
        drop(claim);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_sessions_share_commits() {
        const SESSIONS: usize = 128;
        const EVENTS: u64 = 5;
        let Some(cluster) = rein_testkit::PgCluster::start() else { return };
        let url = cluster.create_database("group");
        let store = Arc::new(PostgresStore::open(&url, Durability::Disk).await.unwrap());
        let mut tasks = tokio::task::JoinSet::new();
        for s in 0..SESSIONS {
            let store = store.clone();
            tasks.spawn(async move {
                for seq in 0..EVENTS {
                    store.append(&format!("s{s}"), &[idle(seq)]).await.unwrap();
                }
            });
        }
        while let Some(done) = tasks.join_next().await {
            done.unwrap();
        }
        use std::sync::atomic::Ordering::Relaxed;
        let (commits, appends) =
            (store.counters().commits.load(Relaxed), store.counters().appends.load(Relaxed));
        assert_eq!(appends, SESSIONS as u64 * EVENTS);
        assert!(commits * 4 <= appends, "{appends} appends in {commits} commits: no group commit");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_database_that_is_down_at_open_or_refuses_the_password_is_a_clear_error_without_it() {
        let Some(cluster) = rein_testkit::PgCluster::start() else { return };
        let url = cluster.create_database("down");
        let wrong = url.replace(rein_testkit::postgres::PASSWORD, "wrong-password-xyz");
        let err = PostgresStore::open(&wrong, Durability::Os).await.unwrap_err();
        let text = format!("{err} {err:?}");
        assert!(text.contains("password authentication failed"), "{text}");
        assert!(!text.contains("wrong-password-xyz"), "{text}");
        let port = cluster.port();
        assert!(text.contains(&format!("postgres://rein@127.0.0.1:{port}/down")), "{text}");

        let store = PostgresStore::open(&url, Durability::Os).await.unwrap();
        let shown = format!("{store:?}");
        assert!(!shown.contains(rein_testkit::postgres::PASSWORD), "{shown}");
        drop(store);

        cluster.stop_immediate();
        let err = PostgresStore::open(&url, Durability::Os).await.unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("postgres: postgres://rein@127.0.0.1:{port}/down: ")),
            "{text}"
        );
        assert!(!text.contains(rein_testkit::postgres::PASSWORD), "{text}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_schema_is_migrated_at_open_and_a_newer_one_refused_naming_its_version() {
        let Some(cluster) = rein_testkit::PgCluster::start() else { return };
        let url = cluster.create_database("schema");
        let store = PostgresStore::open(&url, Durability::Os).await.unwrap();
        assert_eq!(store.schema_found(), None);
        store.append("s", &[idle(0)]).await.unwrap();
        drop(store);
        let store = PostgresStore::open(&url, Durability::Os).await.unwrap();
        assert_eq!(store.schema_found(), Some(PostgresStore::schema_version()));
        drop(store);

        let client = raw_postgres(&url).await;
        client.execute("UPDATE schema_version SET version = 99", &[]).await.unwrap();
        let err = PostgresStore::open(&url, Durability::Os).await.unwrap_err().to_string();
        assert!(err.contains("schema version 99, written by a newer rein"), "{err}");
        let rows = client.query("SELECT count(*) FROM events", &[]).await.unwrap();
        assert_eq!(rows[0].get::<_, i64>(0), 1, "nothing was changed");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_version_2_database_gains_heads_filled_from_its_rows() {
        use rein_runtime::event::{Event, TurnStart};
        use rein_runtime::store::{Head, SessionHead};
        let Some(cluster) = rein_testkit::PgCluster::start() else { return };
        let url = cluster.create_database("heads");
        let store = PostgresStore::open(&url, Durability::Os).await.unwrap();
        let turn = super::envelope(1, Event::TurnStart(TurnStart { turn: 1 }));
        let waiting = [idle(0), turn.clone(), super::retry_at(2, 1_000, 250.0)];
        store.append("waiting", &waiting).await.unwrap();
        store.append("idle", &[idle(0), idle(1)]).await.unwrap();
        drop(store);
        // As a rein of schema version 2 left it: no heads.
        let client = raw_postgres(&url).await;
        client
            .batch_execute(
                "DROP TABLE session_heads, cluster, partitions, nodes, commands; \
                 UPDATE schema_version SET version = 2",
            )
            .await
            .unwrap();
        let store = PostgresStore::open(&url, Durability::Os).await.unwrap();
        assert_eq!(store.schema_found(), Some(2));
        let head = |session: &str, next_seq, open_turn, wake_at| SessionHead {
            session: session.into(),
            head: Ok(Head { next_seq, open_turn, wake_at }),
        };
        let want = [head("idle", 2, None, None), head("waiting", 3, Some(1), Some(1_250))];
        assert_eq!(store.heads().await.unwrap(), want);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_password_may_come_from_pgpassword() {
        let Some(cluster) = rein_testkit::PgCluster::start() else { return };
        cluster.create_database("env");
        let url = cluster.url_without_password("env");
        let target = rein_runtime::store::postgres::Target::parse_with(
            &url,
            Some(rein_testkit::postgres::PASSWORD.to_owned()),
        )
        .unwrap();
        let store = PostgresStore::open_target(target, Durability::Os).await.unwrap();
        store.append("s", &[idle(0)]).await.unwrap();
        assert_eq!(store.shown(), url);
    }
}

fn settings(plugin: &str, revision: u64) -> SettingsRecord {
    let value = serde_json::json!({"extraRetries": revision, "retryableCodes": ["SERVER"]});
    SettingsRecord { plugin: plugin.into(), revision, settings: value }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_are_saved_under_a_compare_and_set_and_survive_reopening() {
    for backend in backends() {
        let name = backend.name();
        let store = backend.open(Durability::Os).await;
        assert_eq!(store.load_settings().await.unwrap(), [], "{name}");
        store.save_settings(&settings("llm-retry", 1), 0).await.unwrap();
        store.save_settings(&settings("auto-retry", 1), 0).await.unwrap();
        store.save_settings(&settings("auto-retry", 2), 1).await.unwrap();
        // Two savers from one revision: the second is refused and writes nothing.
        for (record, base, found) in [
            (settings("auto-retry", 2), 1, 2),
            (settings("auto-retry", 1), 0, 2),
            (settings("x", 2), 1, 0),
        ] {
            let saved = store.save_settings(&record, base).await;
            let err = saved.expect_err(&format!("{name}: {record:?} on {base}"));
            assert!(
                matches!(&err, StoreError::SettingsConflict { base: b, found: f, .. }
                    if *b == base && *f == found),
                "{name}: {err}"
            );
        }
        let err = store.save_settings(&settings("../up", 1), 0).await.unwrap_err();
        assert!(matches!(err, StoreError::InvalidPluginName(_)), "{name}: {err}");
        let want = [
            StoredSettings::Record(settings("auto-retry", 2)),
            StoredSettings::Record(settings("llm-retry", 1)),
        ];
        assert_eq!(store.load_settings().await.unwrap(), want, "{name}");
        drop(store);

        let reopened = backend.open(Durability::Disk).await;
        assert_eq!(reopened.load_settings().await.unwrap(), want, "{name} reopened");
        reopened.save_settings(&settings("auto-retry", 3), 2).await.unwrap();
        assert_eq!(
            reopened.load_settings().await.unwrap()[0],
            StoredSettings::Record(settings("auto-retry", 3)),
            "{name}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_settings_record_is_read_as_damaged_and_the_next_save_replaces_it() {
    for backend in backends() {
        let name = backend.name();
        let store = backend.open(Durability::Os).await;
        store.save_settings(&settings("auto-retry", 1), 0).await.unwrap();
        store.save_settings(&settings("auto-retry", 2), 1).await.unwrap();
        if !backend.damage_settings("auto-retry", "{\"extraRetries\": 4").await {
            continue;
        }
        let loaded = store.load_settings().await.unwrap();
        let [StoredSettings::Damaged { plugin, at, message, revision }] = loaded.as_slice() else {
            panic!("{name}: {loaded:?}")
        };
        assert_eq!(plugin, "auto-retry", "{name}");
        assert!(at.contains("auto-retry"), "{name}: where: {at}");
        assert!(!message.is_empty(), "{name}: why");
        // A file read whole has no revision left; a row keeps its revision column.
        let kept = if matches!(backend, Backend::Jsonl(_)) { 0 } else { 2 };
        assert_eq!(*revision, kept, "{name}");
        store.save_settings(&settings("auto-retry", kept + 1), kept).await.unwrap();
        assert_eq!(
            store.load_settings().await.unwrap(),
            [StoredSettings::Record(settings("auto-retry", kept + 1))],
            "{name}"
        );
    }
}

/// `llm/retry` of turn 1, step 1, at `time` with a wait of `delay_ms`.
fn retry_at(seq: u64, time: u64, delay_ms: f64) -> Envelope {
    let retry = LlmRetry {
        retry_id: "0f8fad5b-d9cb-469f-a165-70867728950e".into(),
        turn: 1,
        step: 1,
        provider: "p".into(),
        plugin: "llm-retry".into(),
        mode: "normal".into(),
        policy_key: "k".into(),
        retry: 1,
        max_retries: Some(3),
        delay_ms,
        failure: rein_runtime::failure::Failure::new("TRANSPORT", "reset").unwrap(),
    };
    Envelope { seq, time, event: Event::LlmRetry(retry) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heads_follow_every_append_and_survive_reopening_and_a_crash_cut_log() {
    use rein_runtime::store::{Head, SessionHead};
    let start = |seq, session: &str| {
        let start = SessionStart { session: session.into(), format: LOG_FORMAT };
        envelope(seq, Event::SessionStart(start))
    };
    let turn_start = |seq, turn| envelope(seq, Event::TurnStart(TurnStart { turn }));
    let turn_end = |seq, turn| {
        envelope(seq, Event::TurnEnd(TurnEnd { turn, reason: TurnEndReason::Completed }))
    };
    let step = |seq| envelope(seq, Event::StepStart(StepRef { turn: 1, step: 1 }));
    let started = |seq| {
        let started = LlmRetryStarted {
            retry_id: "0f8fad5b-d9cb-469f-a165-70867728950e".into(),
            turn: 1,
            step: 1,
            retry: 1,
        };
        envelope(seq, Event::LlmRetryStarted(started))
    };
    let head = |session: &str, next_seq, open_turn, wake_at| SessionHead {
        session: session.into(),
        head: Ok(Head { next_seq, open_turn, wake_at }),
    };
    for backend in backends() {
        let name = backend.name();
        let store = backend.open(Durability::Os).await;
        assert_eq!(store.heads().await.unwrap(), [], "{name}: no session, no head");
        // closed: a turn that ended; open: a turn with nothing pending; waiting: a turn whose
        // retry wait is pending (its wake-up at time + delayMs, rounded up).
        store.append("closed", &[start(0, "closed"), message(1, "hi")]).await.unwrap();
        store.append("closed", &[turn_start(2, 1)]).await.unwrap();
        store.append("open", &[start(0, "open"), turn_start(1, 1), step(2)]).await.unwrap();
        store.append("waiting", &[start(0, "waiting"), turn_start(1, 1)]).await.unwrap();
        store.append("waiting", &[step(2), retry_at(3, 1_000, 2_499.5)]).await.unwrap();
        let mut want = vec![
            head("closed", 3, Some(1), None),
            head("open", 3, Some(1), None),
            head("waiting", 4, Some(1), Some(3_500)),
        ];
        assert_eq!(store.heads().await.unwrap(), want, "{name}: after appends");
        // The closed turn ends; the open one's retry is scheduled and starts.
        store.append("closed", &[turn_end(3, 1), idle(4)]).await.unwrap();
        store.append("open", &[retry_at(3, 50, 10.0)]).await.unwrap();
        store.append("open", &[started(4), message(5, "on")]).await.unwrap();
        want[0] = head("closed", 5, None, None);
        want[1] = head("open", 6, Some(1), None);
        assert_eq!(store.heads().await.unwrap(), want, "{name}: after more appends");
        // The pending heads: the same, less the sessions with nothing open.
        assert_eq!(store.pending_heads().await.unwrap(), want[1..], "{name}: pending");
        drop(store);

        let store = backend.open(Durability::Os).await;
        assert_eq!(store.heads().await.unwrap(), want, "{name}: after reopening");
        drop(store);

        // A crash cut the last append of "waiting" (only a file can hold part of one).
        if let Backend::Jsonl(dir) = &backend {
            let path = dir.path().join("waiting.jsonl");
            let mut bytes = std::fs::read(&path).unwrap();
            bytes.extend_from_slice(br#"{"seq":4,"time":3500,"type":"llm/retry-st"#);
            std::fs::write(&path, bytes).unwrap();
        }
        let store = backend.open(Durability::Os).await;
        assert_eq!(store.heads().await.unwrap(), want, "{name}: a torn tail is not in the head");
        // Reopening the session cuts it and continues from the head's next seq.
        store.append("waiting", &[started(4)]).await.unwrap();
        want[2] = head("waiting", 5, Some(1), None);
        assert_eq!(store.heads().await.unwrap(), want, "{name}: after the cut");
    }
}
