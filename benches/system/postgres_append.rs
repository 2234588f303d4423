//! Metrics `postgres_disk_256_sessions_appends_per_commit` and
//! `postgres_disk_256_sessions_vs_bare_tokio_postgres`: 256 sessions append concurrently into one
//! [`PostgresStore`] at [`Durability::Disk`] (`synchronous_commit = on`), on a throwaway cluster
//! (`rein-testkit`; without PostgreSQL installed, the metrics are skipped with a note).
//!
//! - Appends per commit (budget ≥ 50): acknowledged appends divided by the transactions the
//!   store's writer committed — how well group commit shares the WAL flush.
//! - Throughput against a floor (budget ≥ 0.5): acknowledged appends/s, against bare
//!   tokio-postgres on one connection with `synchronous_commit = on` inserting the same rows
//!   (`session`, `seq`, the event's JSON line) into the same table (primary key `(session,
//!   seq)`) with the same one-statement `INSERT … SELECT FROM unnest(…)`, in transactions of the
//!   store's measured batch size, one after another — no channel, no task, no check.
//!
//! Each session is a tokio task that appends one event at a time and waits for the
//! acknowledgement before the next, as a session log does. Each round measures the store, then
//! the floor with the store's batch size, in databases of their own on the same cluster; the
//! reported round is the one with the median ratio.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rein::runtime::event::{AssistantChunk, Envelope, Event};
use rein::runtime::store::postgres::PostgresStore;
use rein::runtime::store::{Durability, SessionStore};

use crate::Options;
use crate::report::{Budget, Metric};

/// The metrics' common prefix (what the bench's filter matches).
pub(crate) const NAME: &str = "postgres_disk_256_sessions";
const PER_COMMIT: &str = "postgres_disk_256_sessions_appends_per_commit";
const VS_FLOOR: &str = "postgres_disk_256_sessions_vs_bare_tokio_postgres";

const SESSIONS: usize = 256;
const PER_COMMIT_BUDGET: Budget = Budget::AtLeast(50.0);
const VS_FLOOR_BUDGET: Budget = Budget::AtLeast(0.5);

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
    let Some(cluster) = rein_testkit::PgCluster::start() else {
        eprintln!("{NAME}: skipped (no PostgreSQL)");
        return Ok(Vec::new());
    };
    let mut rounds = Vec::with_capacity(windows.rounds);
    for round in 0..windows.rounds {
        let store_url = cluster.create_database(&format!("store{round}"));
        let floor_url = cluster.create_database(&format!("floor{round}"));
        let store = crate::drive(store_rate(store_url, windows))?;
        let batch = store.per_commit.round().max(1.0) as usize;
        let floor = crate::drive(floor_rate(floor_url, batch, windows))?;
        eprintln!(
            "{NAME} round {}: {:.0} appends/s, {:.0} appends per commit; bare tokio-postgres \
             {:.0} rows/s in batches of {batch} ({:.0} µs per commit): ratio {:.2}",
            round + 1,
            store.rate,
            store.per_commit,
            floor.rate,
            floor.commit_us,
            store.rate / floor.rate,
        );
        rounds.push((store.rate / floor.rate, store, floor.rate));
    }
    rounds.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (_, store, floor) = &rounds[rounds.len() / 2];
    Ok(vec![
        Metric::new(PER_COMMIT, store.per_commit, 1.0, PER_COMMIT_BUDGET),
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

struct StoreRun {
    rate: f64,
    per_commit: f64,
}

async fn store_rate(url: String, windows: Windows) -> anyhow::Result<StoreRun> {
    let store = Arc::new(PostgresStore::open(&url, Durability::Disk).await?);
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
    let commits = || store.counters().commits.load(Ordering::Relaxed);
    let (before, commits_before, start) =
        (appended.load(Ordering::Relaxed), commits(), Instant::now());
    tokio::time::sleep(windows.measure).await;
    let (after, commits_after, elapsed) =
        (appended.load(Ordering::Relaxed), commits(), start.elapsed());
    stop.store(true, Ordering::Relaxed);
    while let Some(done) = sessions.join_next().await {
        done??;
    }
    let appends = (after - before) as f64;
    Ok(StoreRun {
        rate: appends / elapsed.as_secs_f64(),
        per_commit: appends / (commits_after - commits_before).max(1) as f64,
    })
}

struct FloorRun {
    rate: f64,
    commit_us: f64,
}

/// Rows per second bare tokio-postgres commits, `batch` per transaction, round robin over the
/// sessions.
async fn floor_rate(url: String, batch: usize, windows: Windows) -> anyhow::Result<FloorRun> {
    let (mut client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    client
        .batch_execute(
            "SET synchronous_commit = on;
             CREATE TABLE events (session text NOT NULL, seq bigint NOT NULL, line text NOT NULL,
                                  PRIMARY KEY (session, seq))",
        )
        .await?;
    let insert = client
        .prepare(
            "INSERT INTO events (session, seq, line) \
             SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[])",
        )
        .await?;
    let ids: Vec<String> = (0..SESSIONS).map(|s| format!("bench-{s}")).collect();
    let mut seqs = vec![0u64; SESSIONS];
    let mut next = 0usize;
    let mut write_batch = async || -> anyhow::Result<()> {
        let (mut sessions, mut keys, mut lines) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..batch {
            let session = next % SESSIONS;
            next += 1;
            let seq = seqs[session];
            seqs[session] += 1;
            sessions.push(ids[session].as_str());
            keys.push(seq as i64);
            lines.push(serde_json::to_string(&event(session, seq))?);
        }
        let tx = client.transaction().await?;
        tx.execute(&insert, &[&sessions, &keys, &lines]).await?;
        tx.commit().await?;
        Ok(())
    };
    let warm = Instant::now();
    while warm.elapsed() < windows.warmup {
        write_batch().await?;
    }
    let start = Instant::now();
    let (mut rows, mut commits) = (0u64, 0u64);
    while start.elapsed() < windows.measure {
        write_batch().await?;
        rows += batch as u64;
        commits += 1;
    }
    let elapsed = start.elapsed();
    Ok(FloorRun {
        rate: rows as f64 / elapsed.as_secs_f64(),
        commit_us: elapsed.as_secs_f64() * 1e6 / commits.max(1) as f64,
    })
}
