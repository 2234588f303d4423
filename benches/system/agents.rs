//! Metric `agents_10k_jsonl_os_vs_hand_rolled`: 10,000 agents of the `agents` workload
//! (`agents_workload`) on one runtime with a [`JsonlStore`] at [`Durability::Os`], against a
//! hand-rolled tokio loop writing the same lines to the same files. Budget: at least 0.5 ×
//! the hand-rolled throughput.
//!
//! - **Value**: agents per second of rein — from the first session opened to the last turn's
//!   outcome. The agents are started one after another as an application would start them
//!   (open the session, prompt, cancel one in ten at once), then every outcome is awaited.
//! - **Baseline** (the floor): agents per second of `hand_rolled_agents` — the same workload
//!   as tokio tasks writing the same events, in the same batches, to the same files.
//!
//! The shape's own floor is printed beside it, with no budget, as
//! `agents_10k_jsonl_os_bare_actors_vs_hand_rolled`: agents per second of `bare_agents` — the
//! same workload through rein's actor tree rebuilt from bare ractor actors (session, log, turn,
//! step, provider, one actor per plugin), on the same kind of store — against the hand-rolled
//! loop. It splits the metric's ratio in two: bare actors / hand-rolled is what the actor shape
//! costs, rein / bare actors what rein's own code costs on top of it.
//!
//! Before measuring, a few agents run through all three with their appends counted: a
//! completed agent's log must hold the same events (by type) in the same number of appends on
//! each side. After the rein side, the runtime must be left with no actor and no task; the logs
//! of rein and of the bare actors must pass the invariant checker.
//!
//! A round runs rein, the bare actors, then the hand-rolled loop, each in a fresh directory; the
//! bench runs [`ROUNDS`] rounds (one with `--quick`) and reports the round whose rein /
//! hand-rolled ratio is the median (both lines come from that round). For the record each
//! round also runs the loop writing through `tokio::fs` (a blocking-pool hop per write, what
//! tokio's file API does), and prints on stderr each side's time, when its last agent had
//! started, how long opening an agent and cancelling one took, and its CPU time and allocations
//! per agent.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rein::invariant::check_finished_log;
use rein::plugins::auto_retry::AutoRetry;
use rein::plugins::compaction::Compaction;
use rein::plugins::llm_retry::LlmRetry;
use rein::runtime::BoxFuture;
use rein::runtime::event::{CancelCause, Envelope, Event, TurnEndReason};
use rein::runtime::runtime::{Route, Runtime};
use rein::runtime::store::jsonl::JsonlStore;
use rein::runtime::store::{Durability, Loaded, SessionStore, StoreError};
use rein::runtime::tool::echo::EchoTool;

use crate::Options;
use crate::agents_workload::{
    AgentsProvider, BACKOFF_MS, CANCELLED, JITTER, PROMPT, auto_retry_settings, llm_retry_settings,
    session_id,
};
use crate::bare_agents;
use crate::cpu::process_seconds;
use crate::hand_rolled_agents::{self, Writes};
use crate::heap::allocations;
use crate::report::{Budget, Metric};

/// The prefix of the metric's name (what a filter matches).
pub(crate) const NAME: &str = "agents";

const BUDGET: Budget = Budget::AtLeast(0.5);

/// Agents of a measured run.
const AGENTS: usize = 10_000;
/// Rounds (rein, then the floor); one with `--quick`.
const ROUNDS: usize = 3;
/// Agents of the shape check (agent 1 completes).
const CHECKED: usize = 20;

/// What one side of a round measured.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Side {
    /// From the first agent's start to the last agent's end.
    pub(crate) elapsed: Duration,
    /// From the first agent's start to the last agent's start.
    pub(crate) started: Duration,
    /// Opening agents (rein: `Runtime::session`; the loop: its file and `session/start`), in all.
    pub(crate) opening: Duration,
    /// Cancelling the agents cancelled right after their prompt (rein: `Session::cancel`; the
    /// loop: its token), in all.
    pub(crate) cancelling: Duration,
    pub(crate) cpu_seconds: f64,
    pub(crate) allocations: usize,
}

impl Side {
    fn per_second(&self, agents: usize) -> f64 {
        agents as f64 / self.elapsed.as_secs_f64()
    }

    /// The figures on one line.
    fn describe(&self, agents: usize) -> String {
        let per_agent = |x: f64| x * 1e6 / agents as f64;
        format!(
            "{:.2} s ({:.0} agents/s), every agent started after {:.2} s, opening one took \
             {:.1} µs, cancelling one {:.1} µs; per agent {:.0} µs CPU and {} allocations",
            self.elapsed.as_secs_f64(),
            self.per_second(agents),
            self.started.as_secs_f64(),
            per_agent(self.opening.as_secs_f64()),
            self.cancelling.as_secs_f64() * 1e6 / agents.div_ceil(CANCELLED) as f64,
            per_agent(self.cpu_seconds),
            self.allocations / agents,
        )
    }
}

/// Measures the metric, and the shape's floor for the record.
pub(crate) fn run(options: &Options) -> anyhow::Result<Vec<Metric>> {
    let rounds = if options.quick { 1 } else { ROUNDS };
    let name = format!("{NAME}_{}k_jsonl_os_vs_hand_rolled", AGENTS / 1000);
    let shape_name = format!("{NAME}_{}k_jsonl_os_bare_actors_vs_hand_rolled", AGENTS / 1000);
    crate::drive(async move {
        same_shape().await?;
        let mut results = Vec::with_capacity(rounds);
        // Every side writes into a directory of its own, all kept until the metric ends: where
        // creating a file costs more after many were deleted (see `logs_dir`), one side's
        // clean-up must not be charged to the next.
        let mut dirs = Vec::new();
        let parent = logs_dir();
        eprintln!("{name}: logs in {}", parent.display());
        let fresh = |dirs: &mut Vec<tempfile::TempDir>| -> anyhow::Result<std::path::PathBuf> {
            let dir = tempfile::tempdir_in(&parent)?;
            let path = dir.path().to_owned();
            dirs.push(dir);
            Ok(path)
        };
        for round in 1..=rounds {
            let dir = fresh(&mut dirs)?;
            let (rein, logs) = rein(&dir, AGENTS, None).await?;
            let rein_lines = check_logs(&logs)?;
            drop(logs);
            let dir = fresh(&mut dirs)?;
            let (bare, logs) = bare(&dir, AGENTS, None).await?;
            let bare_lines = check_logs(&logs)?;
            drop(logs);
            let dir = fresh(&mut dirs)?;
            let floor = hand_rolled_agents::run(&dir, AGENTS, Writes::Std).await?;
            let floor_lines = hand_rolled_agents::lines(&dir)?;
            let dir = fresh(&mut dirs)?;
            let tokio_fs = hand_rolled_agents::run(&dir, AGENTS, Writes::TokioFs).await?;
            let (r, b, f) =
                (rein.per_second(AGENTS), bare.per_second(AGENTS), floor.per_second(AGENTS));
            eprintln!(
                "{name}: round {round}: rein / hand-rolled {:.2} (against the loop writing through tokio::fs: {:.2}); rein / bare actors {:.2} (rein's own code), bare actors / hand-rolled {:.2} (the actor shape); lines: rein {rein_lines}, bare actors {bare_lines}, hand-rolled {floor_lines}",
                r / f,
                r / tokio_fs.per_second(AGENTS),
                r / b,
                b / f,
            );
            for (side, measured) in [
                ("rein", &rein),
                ("bare actors", &bare),
                ("hand-rolled", &floor),
                ("hand-rolled, tokio::fs", &tokio_fs),
            ] {
                eprintln!("{name}: round {round}: {side}: {}", measured.describe(AGENTS));
            }
            results.push((r, b, f));
        }
        results.sort_by(|x, y| (x.0 / x.2).total_cmp(&(y.0 / y.2)));
        let Some(&(rein, bare, floor)) = results.get(results.len() / 2) else {
            anyhow::bail!("no round ran")
        };
        Ok(vec![Metric::new(&name, rein, floor, BUDGET), Metric::record(&shape_name, bare, floor)])
    })
}

/// Where the metric's logs go: `$REIN_BENCH_DIR` when set, else `/dev/shm` where it exists (a
/// tmpfs), else the system's temporary directory.
///
/// # Why not the disk by default
///
/// At `Os` durability an append is handed to the page cache, the same on any file system; what
/// differs is creating a file, which both sides do once per agent. On an ext4 without a journal
/// (the bench VM), the inode allocator skips every inode deleted in the last 30 seconds, reading
/// each one's deletion time: after a few thousand deletions nearby (another metric's clean-up,
/// another build on the machine) creating a file costs hundreds of µs instead of ten, and that
/// cost — not rein's, not the loop's — sets both sides' times and swings their ratio from run to
/// run. On a tmpfs creating a file costs the same every time.
fn logs_dir() -> std::path::PathBuf {
    match std::env::var_os("REIN_BENCH_DIR") {
        Some(dir) => dir.into(),
        None if std::path::Path::new("/dev/shm").is_dir() => "/dev/shm".into(),
        None => std::env::temp_dir(),
    }
}

/// Runs `agents` agents of the workload through rein on a JSONL store in `dir`; returns the
/// measurement and the logs (read back after shutdown). With `appends`, the store counts its
/// appends by session.
async fn rein(
    dir: &std::path::Path,
    agents: usize,
    appends: Option<Arc<Appends>>,
) -> anyhow::Result<(Side, BTreeMap<String, Vec<Envelope>>)> {
    let store = store_in(dir, appends)?;
    let runtime = Runtime::builder()
        .store(Arc::clone(&store))
        .route(Route::new("sim", Arc::new(AgentsProvider::new()?)).model("sim-1"))
        .plugin(LlmRetry::from_config(&llm_retry_settings())?)
        .plugin(Compaction::default())
        .plugin(AutoRetry::from_config(&auto_retry_settings())?)
        .tool(Arc::new(EchoTool))
        .build()
        .await?;
    let warnings = runtime.config_warnings();
    anyhow::ensure!(warnings.is_empty(), "plugin settings: {warnings:?}");

    let (cpu, allocs, started) = (process_seconds(), allocations(), Instant::now());
    let mut turns = Vec::with_capacity(agents);
    let (mut opening, mut cancelling) = (Duration::ZERO, Duration::ZERO);
    for i in 0..agents {
        let open = Instant::now();
        let session = runtime.session(&session_id(i)).await?;
        opening += open.elapsed();
        let turn = session.prompt(PROMPT)?;
        if i % CANCELLED == 0 {
            let cancel = Instant::now();
            session.cancel(CancelCause::User).await?;
            cancelling += cancel.elapsed();
        }
        turns.push(turn);
    }
    let all_started = started.elapsed();
    for (i, turn) in turns.into_iter().enumerate() {
        let reason = turn.outcome().await?.reason;
        let expected = match i % CANCELLED {
            0 => matches!(reason, TurnEndReason::Aborted { .. }),
            _ => reason == TurnEndReason::Completed,
        };
        anyhow::ensure!(expected, "agent {i} ended {reason:?}");
    }
    let side = Side {
        elapsed: started.elapsed(),
        started: all_started,
        opening,
        cancelling,
        cpu_seconds: process_seconds() - cpu,
        allocations: allocations() - allocs,
    };

    runtime.shutdown().await;
    let census = runtime.census();
    anyhow::ensure!(
        census.actors() == 0 && census.tasks() == 0,
        "after shutdown: {} actors, {} tasks",
        census.actors(),
        census.tasks()
    );
    Ok((side, read_logs(store.as_ref(), agents).await?))
}

/// Runs `agents` agents of the workload through bare actors (`bare_agents`) on a JSONL store in
/// `dir`, as [`rein`] does.
async fn bare(
    dir: &std::path::Path,
    agents: usize,
    appends: Option<Arc<Appends>>,
) -> anyhow::Result<(Side, BTreeMap<String, Vec<Envelope>>)> {
    let store = store_in(dir, appends)?;
    let side = bare_agents::run(Arc::clone(&store), agents).await?;
    Ok((side, read_logs(store.as_ref(), agents).await?))
}

/// A JSONL store at `Os` in `dir`; with `appends`, counting its appends by session.
fn store_in(
    dir: &std::path::Path,
    appends: Option<Arc<Appends>>,
) -> anyhow::Result<Arc<dyn SessionStore>> {
    let jsonl = JsonlStore::open(dir, Durability::Os)?;
    Ok(match appends {
        Some(counts) => Arc::new(Counted { inner: jsonl, counts }),
        None => Arc::new(jsonl),
    })
}

/// Every log in `store`, by session; there must be one per agent.
async fn read_logs(
    store: &dyn SessionStore,
    agents: usize,
) -> anyhow::Result<BTreeMap<String, Vec<Envelope>>> {
    let mut logs = BTreeMap::new();
    for id in store.sessions().await? {
        let events = store.load(&id).await?.map(|l| l.events).unwrap_or_default();
        logs.insert(id, events);
    }
    anyhow::ensure!(logs.len() == agents, "{} logs for {agents} agents", logs.len());
    Ok(logs)
}

/// Checks every log against the invariants; returns how many lines they hold.
fn check_logs(logs: &BTreeMap<String, Vec<Envelope>>) -> anyhow::Result<usize> {
    for (id, events) in logs {
        if let Some(violation) = check_finished_log(events).first() {
            anyhow::bail!("{id}: {violation}");
        }
    }
    Ok(logs.values().map(Vec::len).sum())
}

/// Runs [`CHECKED`] agents through rein, the bare actors and the hand-rolled loop with their
/// appends counted, and checks that a completed agent (1) wrote the same events in as many
/// appends on all three, and that rein and the bare actors waited the workload's backoff.
/// (What a cancelled agent wrote depends on where its cancel landed, which the scheduling
/// decides; every side's cancelled agents must have ended aborted, which every run checks.)
async fn same_shape() -> anyhow::Result<()> {
    let id = session_id(1);
    let rein_counts = Arc::new(Appends::default());
    let rein_dir = crate::temp_dir()?;
    let (_, rein_logs) = rein(rein_dir.path(), CHECKED, Some(Arc::clone(&rein_counts))).await?;
    check_logs(&rein_logs)?;
    let bare_counts = Arc::new(Appends::default());
    let bare_dir = crate::temp_dir()?;
    let (_, bare_logs) = bare(bare_dir.path(), CHECKED, Some(Arc::clone(&bare_counts))).await?;
    check_logs(&bare_logs)?;
    let floor_dir = crate::temp_dir()?;
    let floor_appends = hand_rolled_agents::appends(floor_dir.path(), CHECKED, Writes::Std).await?;
    let floor_log = hand_rolled_agents::read(floor_dir.path(), &id)?;
    let floor_n = floor_appends.get(&id).copied().unwrap_or(0);

    let kinds = |events: &[Envelope]| -> Vec<&'static str> {
        events.iter().map(|e| e.event.kind()).collect()
    };
    for (side, logs, counts) in
        [("rein", &rein_logs, &rein_counts), ("the bare actors", &bare_logs, &bare_counts)]
    {
        let log = logs.get(&id).map(Vec::as_slice).unwrap_or_default();
        anyhow::ensure!(
            kinds(log) == kinds(&floor_log),
            "{id}: {side} wrote {:?}, the hand-rolled loop {:?}",
            kinds(log),
            kinds(&floor_log)
        );
        // Every side waits the workload's backoff (a runtime that ignored llm-retry's settings
        // would wait its default 500 ms and measure the wrong work).
        let (low, high) = (BACKOFF_MS.0 as f64 * (1.0 - JITTER), BACKOFF_MS.1 as f64);
        for event in log {
            if let Event::LlmRetry(retry) = &event.event {
                anyhow::ensure!(
                    (low..=high).contains(&retry.delay_ms),
                    "{id}: {side} waited {} ms before a retry, outside the workload's {low}–{high} ms",
                    retry.delay_ms
                );
            }
        }
        let n = counts.of(&id);
        anyhow::ensure!(
            n == floor_n,
            "{id}: {side} appended {n} times, the hand-rolled loop {floor_n} times"
        );
    }
    Ok(())
}

/// Appends by session.
#[derive(Default)]
struct Appends(std::sync::Mutex<BTreeMap<String, AtomicUsize>>);

impl Appends {
    fn add(&self, session: &str) {
        let mut map = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        map.entry(session.to_owned()).or_default().fetch_add(1, Ordering::Relaxed);
    }

    fn of(&self, session: &str) -> usize {
        let map = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        map.get(session).map_or(0, |n| n.load(Ordering::Relaxed))
    }
}

/// A store that counts its appends by session, then hands them on.
struct Counted<S> {
    inner: S,
    counts: Arc<Appends>,
}

impl<S: SessionStore> SessionStore for Counted<S> {
    fn durability(&self) -> Durability {
        self.inner.durability()
    }

    fn append<'a>(
        &'a self,
        session: &'a str,
        events: &'a [Envelope],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.counts.add(session);
        self.inner.append(session, events)
    }

    fn claim<'a>(
        &'a self,
        session: &'a str,
    ) -> BoxFuture<'a, Result<rein_runtime::store::Claim, StoreError>> {
        self.inner.claim(session)
    }

    fn load<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Option<Loaded>, StoreError>> {
        self.inner.load(session)
    }

    fn load_from<'a>(
        &'a self,
        session: &'a str,
        seq: u64,
    ) -> BoxFuture<'a, Result<Vec<Envelope>, StoreError>> {
        self.inner.load_from(session, seq)
    }

    fn sessions(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        self.inner.sessions()
    }

    fn heads(&self) -> BoxFuture<'_, Result<Vec<rein::runtime::store::SessionHead>, StoreError>> {
        self.inner.heads()
    }

    fn save_settings<'a>(
        &'a self,
        record: &'a rein_runtime::store::SettingsRecord,
        base: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.save_settings(record, base)
    }

    fn load_settings(
        &self,
    ) -> BoxFuture<'_, Result<Vec<rein_runtime::store::StoredSettings>, StoreError>> {
        self.inner.load_settings()
    }
}
