//! Metric `sqlite_disk_appends_256_sessions`: durable appends per second when 256 sessions
//! append concurrently into one [`SqliteStore`] at [`Durability::Disk`], against the rate of the
//! naive way to be durable — one `write` + `fdatasync` per record — measured in the same run on
//! the same file system (one temporary directory). Budget: at least 50×.
//!
//! Each session is a tokio task that appends one event at a time and waits for the
//! acknowledgement before the next, as a session log does. The store's single writer
//! commits whatever is queued in one transaction with one sync (group commit), so the ratio
//! measures how well durability cost is shared across sessions.
//!
//! Each round measures the baseline and then the store, back to back, so both see the same
//! machine load; the reported round is the one with the median ratio. The temporary directory
//! is created under `$REIN_BENCH_DIR` when set (to measure a particular disk), else under the
//! system's temporary directory.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rein::runtime::event::{AssistantChunk, Envelope, Event};
use rein::runtime::store::sqlite::SqliteStore;
use rein::runtime::store::sync::CountingSyncer;
use rein::runtime::store::{Durability, SessionStore};

use crate::Options;
use crate::cpu::{process_seconds, thread_seconds};
use crate::report::{Budget, Metric};

/// The metric's name.
pub(crate) const NAME: &str = "sqlite_disk_appends_256_sessions";

const SESSIONS: usize = 256;

/// The name of the SQLite store's writer thread.
const WRITER_THREAD: &str = "rein-sql-writer";
const BUDGET: Budget = Budget::AtLeast(50.0);

/// How long to warm up and to measure, and how many rounds.
#[derive(Debug, Clone, Copy)]
struct Windows {
    warmup: Duration,
    measure: Duration,
    rounds: usize,
}

/// Measures the metric.
pub(crate) fn run(options: &Options) -> anyhow::Result<Metric> {
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
    let line = rein::runtime::store::line::encode_lines(&[event(0, 0)])?;
    let mut rounds = Vec::with_capacity(windows.rounds);
    for round in 0..windows.rounds {
        let baseline =
            raw_fdatasync_rate(&dir.path().join(format!("raw-{round}.jsonl")), &line, windows)?;
        let store = sqlite_disk_rate(&dir.path().join(format!("events-{round}.db")), windows)?;
        let value = store.rate;
        eprintln!(
            "{NAME} round {}: {value:.0} appends/s, baseline {baseline:.0}/s, ratio {:.1}, \
             {:.0} appends per sync, {:.1} µs of CPU per append ({:.1} µs in the writer thread)",
            round + 1,
            value / baseline,
            store.per_sync,
            store.cpu_us,
            store.writer_us,
        );
        rounds.push((value / baseline, value, baseline));
    }
    rounds.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (_, value, baseline) = rounds[rounds.len() / 2];
    Ok(Metric::new(NAME, value, baseline, BUDGET))
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

/// Records per second written one at a time with `write` + `fdatasync`.
fn raw_fdatasync_rate(path: &Path, line: &[u8], windows: Windows) -> anyhow::Result<f64> {
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    let write = |file: &mut std::fs::File| -> std::io::Result<()> {
        file.write_all(line)?;
        file.sync_data()
    };
    let warm = Instant::now();
    while warm.elapsed() < windows.warmup {
        write(&mut file)?;
    }
    let start = Instant::now();
    let mut records: u64 = 0;
    while start.elapsed() < windows.measure {
        write(&mut file)?;
        records += 1;
    }
    Ok(records as f64 / start.elapsed().as_secs_f64())
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
