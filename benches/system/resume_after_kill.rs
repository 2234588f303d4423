//! Metric `resume_after_kill_next_attempt_late_ms` (`resume_after_kill`): how punctually a turn
//! killed in the middle of a retry wait continues. A `rein stress` process (the real binary) runs
//! [`AGENTS`] agents on a JSONL store whose every attempt fails, so most of them are waiting for
//! a retry when it is killed with SIGKILL; then a fresh runtime in this process opens the store,
//! resumes every pending session (`Runtime::resume_pending`) on a route that answers at once,
//! and each resumed wait's next attempt is compared with when it should start: the wait's
//! original deadline (`llm/retry` time + `delayMs`), or the reopening itself when the deadline
//! passed while the process was down. The value is the latest of those next attempts, in ms
//! past its due time (the budget: within 50 ms, SPEC §11); the baseline is the unit (1 ms). No
//! attempt may start before its deadline: a run in which one did fails to measure.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use rein::providers::{Simulated, SimulatedConfig};
use rein::runtime::event::{Envelope, Event};
use rein::runtime::runtime::{Route, Runtime};
use rein::runtime::store::jsonl::JsonlStore;
use rein::runtime::store::{Durability, SessionStore};
use rein_testkit::log::{open_turn, pending_retry};

use crate::Options;
use crate::report::{Budget, Metric};

/// The metric's name (what the bench's filter matches).
pub(crate) const NAME: &str = "resume_after_kill_next_attempt_late_ms";

/// Agents of the killed run.
const AGENTS: usize = 200;
/// Its plugins' first backoff: waits of 0.3–6 s, so a kill lands inside most of them.
const BACKOFF_MS: &str = "300";
/// How long the child runs after its first acknowledged event before it is killed.
const RUN_BEFORE_KILL: Duration = Duration::from_millis(1500);
/// The budget: how late past its due time a resumed wait's next attempt may start.
const BUDGET_MS: f64 = 50.0;

/// Measures the metric.
pub(crate) fn run(_options: &Options) -> anyhow::Result<Vec<Metric>> {
    let dir = crate::temp_dir()?;
    kill_mid_waits(dir.path())?;
    let lateness = crate::drive(resume_and_time(dir.path().to_owned()))?;
    anyhow::ensure!(!lateness.is_empty(), "the kill left no retry wait pending");
    let mut sorted: Vec<f64> = lateness.iter().map(|(late, _)| *late).collect();
    sorted.sort_by(f64::total_cmp);
    let latest = sorted[sorted.len() - 1];
    let overdue: Vec<f64> = lateness.iter().filter(|(_, o)| *o).map(|(late, _)| *late).collect();
    let worst = |of: &[f64]| of.iter().copied().fold(0.0, f64::max);
    let later: Vec<f64> = lateness.iter().filter(|(_, o)| !*o).map(|(late, _)| *late).collect();
    eprintln!(
        "{NAME}: {} retry waits resumed after SIGKILL; next attempt past its due time: \
         p50 {:.1} ms, max {latest:.1} ms (budget {BUDGET_MS} ms); {} overdue at the reopen \
         (due then; max {:.1} ms), {} due later (max {:.1} ms)",
        sorted.len(),
        sorted[sorted.len() / 2],
        overdue.len(),
        worst(&overdue),
        later.len(),
        worst(&later),
    );
    Ok(vec![Metric::new(NAME, latest, 1.0, Budget::AtMost(BUDGET_MS))])
}

/// Runs `rein stress` on `dir` with every attempt failing and kills it (SIGKILL) a while after
/// its first acknowledged event.
fn kill_mid_waits(dir: &std::path::Path) -> anyhow::Result<()> {
    let agents = AGENTS.to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rein"))
        .args(["stress", "--agents", &agents, "--turns", "1000000", "--store", "jsonl"])
        .args(["--dir", dir.to_str().context("a UTF-8 temporary directory")?])
        .args(["--durability", "disk", "--acks", "-", "--fault-rate", "1", "--cancel-rate", "0"])
        .args(["--dispose-rate", "0", "--config-rate", "0", "--latency-ms", "1"])
        .args(["--backoff-ms", BACKOFF_MS, "--stall-ms", "20"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("rein stress")?;
    let stdout = child.stdout.take().context("the child's stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let first = lines.next().transpose()?;
    anyhow::ensure!(first.is_some_and(|l| l.starts_with("ack ")), "the child acknowledged nothing");
    // Keep its pipe drained while it runs.
    let drain = std::thread::spawn(move || lines.map_while(Result::ok).count());
    std::thread::sleep(RUN_BEFORE_KILL);
    child.kill()?; // SIGKILL
    child.wait()?;
    drain.join().map_err(|_| anyhow::anyhow!("the drain thread panicked"))?;
    Ok(())
}

/// Opens `dir` with a fresh runtime, resumes every pending session, and returns, for each that
/// was waiting for a retry, how late (ms) its next attempt started past its due time, and
/// whether that due time was the reopening (the deadline had passed).
async fn resume_and_time(dir: std::path::PathBuf) -> anyhow::Result<Vec<(f64, bool)>> {
    let store: Arc<dyn SessionStore> = Arc::new(JsonlStore::open(&dir, Durability::Os)?);
    let mut waiting = Vec::new();
    for session in store.sessions().await? {
        let Some(loaded) = store.load(&session).await? else { continue };
        if open_turn(&loaded.events).is_some()
            && let Some(pending) = pending_retry(&loaded.events)
        {
            waiting.push((session, loaded.events.len(), pending.deadline));
        }
    }
    let simulated = Simulated::new(SimulatedConfig {
        first_chunk_latency_ms: 0..=0,
        chunk_latency_ms: 0..=0,
        ..SimulatedConfig::faultless(1)
    })?;
    let reopened_ms = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as f64;
    let built = std::time::Instant::now();
    let runtime = Runtime::builder()
        .store(store)
        .route(Route::new("simulated", Arc::new(simulated.clone())).model(simulated.model()))
        .idle_grace(Duration::ZERO)
        .build()
        .await?;
    let resuming = std::time::Instant::now();
    let resumed = runtime.resume_pending().await?;
    eprintln!(
        "{NAME}: the runtime built in {:.1} ms; resume_pending opened {} sessions in {:.1} ms",
        resuming.duration_since(built).as_secs_f64() * 1e3,
        resumed.resumed.len(),
        resuming.elapsed().as_secs_f64() * 1e3,
    );
    let mut lateness = Vec::with_capacity(waiting.len());
    for (session, old, deadline) in waiting {
        let events = idle_again(&runtime, &session).await?;
        let next = events[old..].iter().find_map(|e| match &e.event {
            Event::RequestStart(_) => Some(e.time as f64),
            _ => None,
        });
        let next = next.with_context(|| format!("{session}: no attempt after the resume"))?;
        anyhow::ensure!(
            next >= deadline.floor(),
            "{session}: the next attempt started at {next}, before its deadline {deadline}"
        );
        lateness.push((next - deadline.max(reopened_ms), deadline < reopened_ms));
    }
    runtime.shutdown().await;
    Ok(lateness)
}

/// `session`'s log once its turn ended and it is idle, read back until then (up to a minute).
async fn idle_again(runtime: &Runtime, session: &str) -> anyhow::Result<Vec<Envelope>> {
    let handle = runtime.session(session).await?;
    for _ in 0..6_000 {
        let events = handle.events().await?;
        if events.last().is_some_and(|e| e.kind() == "agent/idle") && open_turn(&events).is_none() {
            return Ok(events);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    anyhow::bail!("{session} never finished its resumed turn")
}
