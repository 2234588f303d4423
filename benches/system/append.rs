//! Metrics `sqlite_disk_256_sessions_appends_per_fdatasync` and
//! `sqlite_disk_256_sessions_vs_bare_rusqlite`: 256 sessions append concurrently into one
//! [`SqliteStore`] at [`Durability::Disk`].
//!
//! - Appends per `fdatasync` (budget ≥ 50): acknowledged appends divided by the syncs the store
//!   asked its [`CountingSyncer`] for — how well group commit shares the durability cost.
//! - Throughput against a floor (budget ≥ 0.5): acknowledged appends/s, against bare rusqlite
//!   inserting the same rows (`session`, `seq`, the event's JSON line) into an append-ordered
//!   table (a rowid table, no index) in the same WAL mode, in transactions of the store's
//!   measured batch size (its appends per sync), each followed by one `fdatasync` of the WAL — one
//!   thread, no channels, no tasks: the least SQLite needs for the same durable rows.
//!
//! Each session is a tokio task that appends one event at a time and waits for the
//! acknowledgement before the next, as a session log does. Each round measures the store and then
//! the floor with the store's batch size, back to back, so both see the same machine load; the
//! reported round is the one with the median ratio. The temporary directory is created under
//! `$REIN_BENCH_DIR` when set (to measure a particular disk), else under the system's temporary
//! directory.

use std::fs::OpenOptions;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rein::runtime::event::{AssistantChunk, Envelope, Event};
use rein::runtime::store::sqlite::SqliteStore;
use rein::runtime::store::sync::{CountingSyncer, Syncer};
use rein::runtime::store::{Durability, SessionStore};

use crate::Options;
use crate::cpu::{process_seconds, thread_seconds};
use crate::report::{Budget, Metric};

/// The metrics' common prefix (what the bench's filter matches).
pub(crate) const NAME: &str = "sqlite_disk_256_sessions";
/// Appends per sync.
const PER_SYNC: &str = "sqlite_disk_256_sessions_appends_per_fdatasync";
/// Throughput against bare rusqlite.
const VS_FLOOR: &str = "sqlite_disk_256_sessions_vs_bare_rusqlite";

const SESSIONS: usize = 256;

/// The name of the SQLite store's writer thread.
const WRITER_THREAD: &str = "rein-sql-writer";
const PER_SYNC_BUDGET: Budget = Budget::AtLeast(50.0);
const VS_FLOOR_BUDGET: Budget = Budget::AtLeast(0.5);

/// How long to warm up and to measure, and how many rounds.
#[derive(Debug, Clone, Copy)]
struct Windows {
    warmup: Duration,
    measure: Duration,
    rounds: usize,
}

/// Measures both metrics.
pub(crate) fn run(options: &Options) -> anyhow::Result<Vec<Metric>> {
    let windows = if options.quick {
        Windows {
            warmup: Duration::from_millis(300),
            measure: Duration::from_millis(1500),
            rounds: 3,
        }
    } else {
        Windows { warmup: Duration::from_secs(1), measure: Duration::from_secs(5), rounds: 5 }
    };
    let dir = crate::temp_dir()?;
    let mut rounds = Vec::with_capacity(windows.rounds);
    for round in 0..windows.rounds {
        let store = sqlite_disk_rate(&dir.path().join(format!("events-{round}.db")), windows)?;
        let batch = store.per_sync.round().max(1.0) as usize;
        let floor =
            bare_rusqlite_rate(&dir.path().join(format!("bare-{round}.db")), batch, windows)?;
        eprintln!(
            "{NAME} round {}: {:.0} appends/s, {:.0} appends per sync, {:.1} µs of CPU per append \
             ({:.1} µs in the writer thread); bare rusqlite {:.0} rows/s in batches of {batch} \
             ({:.1} µs per row, {:.1} µs per sync): ratio {:.2}",
            round + 1,
            store.rate,
            store.per_sync,
            store.cpu_us,
            store.writer_us,
            floor.rate,
            floor.row_us,
            floor.sync_us,
            store.rate / floor.rate,
        );
        rounds.push((store.rate / floor.rate, store, floor.rate));
    }
    rounds.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (_, store, floor) = &rounds[rounds.len() / 2];
    Ok(vec![
        Metric::new(PER_SYNC, store.per_sync, 1.0, PER_SYNC_BUDGET),
        Metric::new(VS_FLOOR, store.rate, *floor, VS_FLOOR_BUDGET),
    ])
}

/// A typical small event: a stream chunk.
fn event(session: usize, seq: u64) -> Envelope {
    Envelope {
        seq,
        time: 1_700_000_000_000 + seq,
        event: Event::AssistantChunk(AssistantChunk {
            turn: 1,
            step: 1,
            attempt: 1,
            text: format!("session {session} says a few words, chunk {seq}"),
        }),
    }
}

/// What a run of the floor gave.
struct FloorRun {
    /// Rows per second, syncs included.
    rate: f64,
    /// µs per row spent inserting and committing.
    row_us: f64,
    /// µs per `fdatasync`.
    sync_us: f64,
}

/// Rows per second that bare rusqlite makes durable: the rows the store's sessions would append
/// (round robin over the sessions), `batch` per transaction, one `fdatasync` of the WAL after
/// each commit, with the store's WAL settings.
fn bare_rusqlite_rate(path: &Path, batch: usize, windows: Windows) -> anyhow::Result<FloorRun> {
    let conn = rusqlite::Connection::open(path)?;
    conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))?;
    conn.execute_batch(
        "PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = 10000; PRAGMA cache_size = -16384;
         CREATE TABLE events (session TEXT NOT NULL, seq INTEGER NOT NULL, line TEXT NOT NULL)",
    )?;
    let mut wal_path = path.as_os_str().to_owned();
    wal_path.push("-wal");
    let wal = OpenOptions::new().write(true).open(&wal_path)?;
    let syncs = CountingSyncer::fdatasync();
    let ids: Vec<String> = (0..SESSIONS).map(|s| format!("bench-{s}")).collect();
    let mut seqs = vec![0u64; SESSIONS];
    let mut next = 0usize;
    // Writes one batch; returns how long its sync took.
    let mut write_batch = || -> anyhow::Result<Duration> {
        let transaction = conn.unchecked_transaction()?;
        {
            let mut insert = transaction
                .prepare_cached("INSERT INTO events (session, seq, line) VALUES (?1, ?2, ?3)")?;
            for _ in 0..batch {
                let session = next % SESSIONS;
                next += 1;
                let seq = seqs[session];
                seqs[session] += 1;
                let line = serde_json::to_string(&event(session, seq))?;
                insert.execute(rusqlite::params![ids[session], seq as i64, line])?;
            }
        }
        transaction.commit()?;
        let synced = Instant::now();
        syncs.sync(&wal)?;
        Ok(synced.elapsed())
    };
    let warm = Instant::now();
    while warm.elapsed() < windows.warmup {
        write_batch()?;
    }
    let (start, synced_before) = (Instant::now(), syncs.count());
    let mut sync_time = Duration::ZERO;
    let mut rows: u64 = 0;
    while start.elapsed() < windows.measure {
        sync_time += write_batch()?;
        rows += batch as u64;
    }
    let elapsed = start.elapsed();
    let synced = (syncs.count() - synced_before).max(1) as f64;
    Ok(FloorRun {
        rate: rows as f64 / elapsed.as_secs_f64(),
        row_us: (elapsed - sync_time).as_secs_f64() * 1e6 / rows as f64,
        sync_us: sync_time.as_secs_f64() * 1e6 / synced,
    })
}

/// What a run of the store gave.
struct StoreRun {
    /// Acknowledged appends per second.
    rate: f64,
    /// Appends per sync (group commit at work).
    per_sync: f64,
    /// The process's CPU time per append, µs.
    cpu_us: f64,
    /// The writer thread's share of it, µs.
    writer_us: f64,
}

/// Acknowledged appends per second with `SESSIONS` sessions appending concurrently, and for the
/// record how many appends shared each sync and the CPU time each append cost.
fn sqlite_disk_rate(path: &Path, windows: Windows) -> anyhow::Result<StoreRun> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        let syncs = Arc::new(CountingSyncer::fdatasync());
        let store = Arc::new(SqliteStore::open_with_syncer(path, Durability::Disk, syncs.clone())?);
        let appended = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let mut sessions = tokio::task::JoinSet::new();
        for session in 0..SESSIONS {
            let (store, appended, stop) = (store.clone(), appended.clone(), stop.clone());
            sessions.spawn(async move {
                let id = format!("bench-{session}");
                let mut seq = 0;
                while !stop.load(Ordering::Relaxed) {
                    store.append(&id, &[event(session, seq)]).await?;
                    seq += 1;
                    appended.fetch_add(1, Ordering::Relaxed);
                }
                anyhow::Ok(())
            });
        }
        tokio::time::sleep(windows.warmup).await;
        let (before, synced_before, start) =
            (appended.load(Ordering::Relaxed), syncs.count(), Instant::now());
        let (cpu_before, writer_before) = (process_seconds(), thread_seconds(WRITER_THREAD));
        tokio::time::sleep(windows.measure).await;
        let (after, synced_after, elapsed) =
            (appended.load(Ordering::Relaxed), syncs.count(), start.elapsed());
        let (cpu, writer) =
            (process_seconds() - cpu_before, thread_seconds(WRITER_THREAD) - writer_before);
        stop.store(true, Ordering::Relaxed);
        while let Some(done) = sessions.join_next().await {
            done??;
        }
        let appends = (after - before) as f64;
        Ok(StoreRun {
            rate: appends / elapsed.as_secs_f64(),
            per_sync: appends / (synced_after - synced_before).max(1) as f64,
            cpu_us: cpu * 1e6 / appends,
            writer_us: writer * 1e6 / appends,
        })
    })
}
