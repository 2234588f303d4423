//! Many agents cancelled at random moments: how long a cancel takes to end its turn, and a clean
//! log whatever the moment.
//!
//! Run: `cargo run --release --example cancel_storm -- [--agents N] [--seed S] [--max-delay-ms MS]`
//!
//! Every agent (default 2,000) is a session with one turn on the simulated provider (its faults
//! and latencies of tens of milliseconds, so a turn streams for a while and often waits out a
//! retry) under the default chain. Each is cancelled after a delay drawn from the seed (0 to
//! `--max-delay-ms`, default 800): before its first attempt, mid-stream, inside a plugin's
//! backoff, or after the turn already ended. The cancellation latency is the time from the
//! `cancel` call to the turn's end (its handle resolving); it is counted for the cancels that
//! found a turn running.
//!
//! A cancel that races the turn's own end leaves the turn's own ending (`completed` or
//! `failed`); every other cancelled turn must end `aborted` with the cancel's cause, and nothing
//! but the closing events may follow in its log. At the end, every log is read back from the
//! store and checked against every invariant, and the runtime is shut down with nothing alive.
//! It prints (the latencies depend on the machine and its load; the cancels that land while
//! thousands of sessions are still starting wait longest):
//!
//! ```text
//! cancel storm: 2000 agents, each cancelled 0–800 ms after its prompt (seed 0)
//! cancels: 1985 found a turn running, 15 came after it ended
//! turns: 1985 aborted (cause user), 15 completed
//! cancellation latency: p50 4.54 ms, p99 128.68 ms, max 251.45 ms
//! logs: 2000 checked, 0 violations
//! after shutdown: 0 actors, 0 tasks
//! ```

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, ensure};
use clap::Parser;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rein::invariant::check_finished_log;
use rein::prelude::*;
use rein::runtime::plural::count;
use serde_json::json;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// Many agents cancelled at random moments.
#[derive(Debug, Parser)]
struct Args {
    /// How many agents (sessions), one turn each.
    #[arg(long, default_value_t = 2_000)]
    agents: usize,
    /// The seed of the cancel moments and of the simulated provider's faults.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The latest moment of a cancel, in milliseconds after the prompt.
    #[arg(long, default_value_t = 800)]
    max_delay_ms: u64,
}

/// One agent's turn and its cancel.
struct Cancelled {
    /// Whether the cancel found a turn running.
    running: bool,
    /// How the turn ended.
    reason: TurnEndReason,
    /// From the cancel call to the turn's end.
    latency: Duration,
}

/// What a run found (printed by `main`, checked by the test).
#[derive(Debug, Default)]
struct Report {
    /// Cancels that found a turn running.
    running: usize,
    /// Turns by how they ended.
    turns: BTreeMap<String, usize>,
    /// Turns whose ending the cancel does not explain (a broken guarantee): neither their own end
    /// (completed, failed) nor, when the cancel found them running, `aborted {user}`.
    unexplained: usize,
    /// Cancellation latencies of the cancels that found a turn running, sorted.
    latencies: Vec<Duration>,
    /// The logs checked, and the invariant violations found in them.
    logs: usize,
    violations: usize,
    /// Actors and tasks left after shutdown.
    left: (usize, usize),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    run(&Args::parse(), Arc::new(WallClock), &mut anstream::stdout()).await.map(drop)
}

/// Runs the storm and returns what it found; the logs' timestamps come from `clock` (the tests
/// run on paused time with a virtual clock).
async fn run(args: &Args, clock: Arc<dyn Clock>, out: &mut impl Write) -> anyhow::Result<Report> {
    let simulated = Simulated::new(SimulatedConfig {
        seed: args.seed,
        retry_after_ms: 20..=100,
        first_chunk_latency_ms: 10..=60,
        chunk_latency_ms: 2..=10,
        idle_timeout: Some(Duration::from_millis(200)),
        ..SimulatedConfig::default()
    })?;
    let model = simulated.model().to_owned();
    let llm_retry = LlmRetry::from_config(&json!({"initialDelayMs": 20, "maxDelayMs": 200}))?;
    let auto_retry = AutoRetry::from_config(&json!({"initialDelayMs": 20, "maxDelayMs": 200}))?;
    let store = Arc::new(MemoryStore::new());
    let runtime = Runtime::builder()
        .clock(clock)
        .store(store.clone())
        .route(Route::new("simulated", Arc::new(simulated)).model(model))
        .plugin(llm_retry) // its policy: the routes' default
        .plugin(Compaction::default())
        .plugin(auto_retry) // the chain's order is the order of registration
        .build()
        .await?;
    let warnings = runtime.config_warnings();
    ensure!(warnings.is_empty(), "the plugins' configuration: {warnings:?}");
    writeln!(
        out,
        "cancel storm: {} agents, each cancelled 0–{} ms after its prompt (seed {})",
        args.agents, args.max_delay_ms, args.seed
    )?;

    // The cancel moments, drawn up front so a seed always draws the same ones.
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let delays: Vec<u64> =
        (0..args.agents).map(|_| rng.random_range(0..=args.max_delay_ms)).collect();
    let mut agents = JoinSet::new();
    for (i, delay) in delays.into_iter().enumerate() {
        let runtime = runtime.clone();
        agents.spawn(async move {
            let session = runtime.session(&format!("agent-{i:05}")).await?;
            let turn = session.prompt("Write me a long story about the sea.")?;
            tokio::time::sleep(Duration::from_millis(delay)).await;
            let cancelled = Instant::now();
            let running = session.cancel(CancelCause::User).await?;
            let outcome = turn.await?;
            Ok::<_, SessionError>(Cancelled {
                running,
                reason: outcome.reason,
                latency: cancelled.elapsed(),
            })
        });
    }
    let mut report = Report::default();
    while let Some(joined) = agents.join_next().await {
        let agent = joined.context("an agent's task panicked")??;
        *report.turns.entry(ending(&agent.reason)).or_default() += 1;
        // A cancel that found the turn running ends it `aborted`, unless the turn's own end won
        // the race; one that found nothing running changed nothing.
        let own_end =
            matches!(agent.reason, TurnEndReason::Completed | TurnEndReason::Error { .. });
        let cancelled = agent.reason == TurnEndReason::Aborted { cause: CancelCause::User };
        if agent.running {
            report.running += 1;
            report.latencies.push(agent.latency);
        }
        if !(own_end || agent.running && cancelled) {
            report.unexplained += 1;
        }
    }
    report.latencies.sort();

    runtime.shutdown().await;
    report.left = (runtime.census().actors(), runtime.census().tasks());
    for id in store.sessions().await? {
        let events = store.load(&id).await?.map(|log| log.events).unwrap_or_default();
        let violations = check_finished_log(&events);
        for violation in violations.iter().take(3) {
            writeln!(out, "  {id}: {violation}")?;
        }
        report.logs += 1;
        report.violations += violations.len();
    }

    writeln!(
        out,
        "cancels: {} found a turn running, {} came after it ended",
        report.running,
        args.agents - report.running
    )?;
    let turns: Vec<String> = report.turns.iter().map(|(k, n)| format!("{n} {k}")).collect();
    writeln!(out, "turns: {}", turns.join(", "))?;
    if report.unexplained > 0 {
        writeln!(
            out,
            "  {} ended in a way the cancel does not explain",
            count(report.unexplained, "turn", "turns")
        )?;
    }
    if let (Some(p50), Some(p99), Some(max)) = (
        percentile(&report.latencies, 50),
        percentile(&report.latencies, 99),
        report.latencies.last(),
    ) {
        writeln!(
            out,
            "cancellation latency: p50 {}, p99 {}, max {}",
            millis(p50),
            millis(p99),
            millis(*max)
        )?;
    }
    writeln!(out, "logs: {} checked, {} violations", report.logs, report.violations)?;
    let (actors, tasks) = report.left;
    writeln!(out, "after shutdown: {actors} actors, {tasks} tasks")?;
    ensure!(
        report.violations == 0 && report.unexplained == 0 && report.left == (0, 0),
        "the run broke a guarantee"
    );
    Ok(report)
}

/// How a turn ended, in a few words.
fn ending(reason: &TurnEndReason) -> String {
    match reason {
        TurnEndReason::Completed => "completed".into(),
        TurnEndReason::Error { failure } => format!("failed ({})", failure.code()),
        TurnEndReason::Aborted { cause: CancelCause::User } => "aborted (cause user)".into(),
        TurnEndReason::Aborted { cause } => format!("aborted ({cause:?})"),
        TurnEndReason::MaxSteps => "at the step limit".into(),
        TurnEndReason::Interrupted => "interrupted".into(),
    }
}

/// The `p`-th percentile of `sorted` (nearest rank), `None` when it is empty.
fn percentile(sorted: &[Duration], p: usize) -> Option<Duration> {
    let rank = (sorted.len() * p).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

/// `1.25 ms`.
fn millis(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn every_cancelled_turn_ends_aborted_and_every_log_is_clean() {
        let mut out = Vec::new();
        let args = Args { agents: 80, seed: 3, max_delay_ms: 800 };
        let report = run(&args, Arc::new(VirtualClock::start()), &mut out).await;
        let out = String::from_utf8(out).unwrap();
        let report = report.unwrap_or_else(|e| panic!("{e}\n{out}"));
        assert_eq!(report.turns.values().sum::<usize>(), 80, "{out}");
        assert_eq!(report.unexplained, 0, "{out}");
        assert_eq!((report.logs, report.violations), (80, 0), "{out}");
        assert_eq!(report.left, (0, 0), "{out}");
        // The moments spread over the turns' lifetimes: most cancels land while a turn runs,
        // and some after it ended.
        let aborted = report.turns.get("aborted (cause user)").copied().unwrap_or(0);
        for ending in report.turns.keys() {
            let expected = ["aborted (cause user)", "completed"].contains(&ending.as_str())
                || ending.starts_with("failed (");
            assert!(expected, "{ending}: {out}");
        }
        assert!((40..80).contains(&aborted), "{out}");
        assert_eq!(report.latencies.len(), report.running, "{out}");
        assert!(out.contains("\ncancellation latency: p50 "), "{out}");
        assert!(
            out.ends_with("logs: 80 checked, 0 violations\nafter shutdown: 0 actors, 0 tasks\n")
        );
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let ms = |n: u64| Duration::from_millis(n);
        let sorted: Vec<Duration> = (1..=100).map(ms).collect();
        assert_eq!(percentile(&sorted, 50), Some(ms(50)));
        assert_eq!(percentile(&sorted, 99), Some(ms(99)));
        assert_eq!(percentile(&sorted, 100), Some(ms(100)));
        assert_eq!(percentile(&[ms(7)], 50), Some(ms(7)));
        assert_eq!(percentile(&[ms(1), ms(2), ms(3)], 99), Some(ms(3)));
        assert_eq!(percentile(&[], 50), None);
    }
}
