//! Ten thousand agents at once on one runtime, on the simulated provider and its faults, with the
//! default chain recovering them.
//!
//! Run: `cargo run --release --example swarm -- [--agents N] [--seed S]`
//!
//! Every agent is a session of its own with one turn on the simulated provider
//! ([`Simulated`]: a seeded fault model — 15 % rate limits with a `Retry-After`, 10 % server
//! errors, 5 % dropped connections, 2 % stalls — with its latencies scaled down to a few
//! milliseconds). The chain is the default one (`llm-retry`, `compaction`, `auto-retry`, waits
//! scaled down to 10–100 ms) and the store keeps the logs in memory. Once every turn has ended,
//! the runtime is shut down and every log is read back and checked against every invariant.
//!
//! It prints the turns by how they ended, the failures met and the retries by plugin, the time
//! the turns took, the process's peak resident memory (`VmHWM` of `/proc/self/status`), the
//! invariant verdict and what was left alive after shutdown (the figures depend on the machine):
//!
//! ```text
//! swarm: 10000 agents, one turn each, on the simulated provider (seed 0)
//! chain: llm-retry → compaction → auto-retry
//! turns: 9992 completed, 8 failed in 12.76 s
//! failures met: RATE_LIMIT 2265, SERVER 1519, TRANSPORT 720, TIMEOUT 335
//! retries: llm-retry 4338, auto-retry 493
//! peak RSS: 579 MiB
//! logs: 10000 checked, 0 violations
//! after shutdown: 0 actors, 0 tasks
//! ```

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, ensure};
use clap::Parser;
use rein::invariant::check_finished_log;
use rein::prelude::*;
use serde_json::json;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// Many agents at once on the simulated provider.
#[derive(Debug, Parser)]
struct Args {
    /// How many agents (sessions) run at once, one turn each.
    #[arg(long, default_value_t = 10_000)]
    agents: usize,
    /// The simulated provider's seed: the same seed meets the same faults.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

/// What a run found (printed by `main`, checked by the test).
#[derive(Debug, Default)]
struct Report {
    /// Turns by how they ended (`completed`, `failed`, …).
    turns: BTreeMap<&'static str, usize>,
    /// The failures the attempts met, by code.
    failures: BTreeMap<String, usize>,
    /// The retries scheduled, by plugin.
    retries: BTreeMap<String, usize>,
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

/// Runs the swarm and returns what it found; the logs' timestamps come from `clock` (the tests
/// run on paused time with a virtual clock).
async fn run(args: &Args, clock: Arc<dyn Clock>, out: &mut impl Write) -> anyhow::Result<Report> {
    let simulated = Simulated::new(SimulatedConfig {
        seed: args.seed,
        retry_after_ms: 10..=50,
        first_chunk_latency_ms: 5..=20,
        chunk_latency_ms: 1..=3,
        idle_timeout: Some(Duration::from_millis(100)),
        ..SimulatedConfig::default()
    })?;
    let model = simulated.model().to_owned();
    let llm_retry = LlmRetry::from_config(&json!({"initialDelayMs": 10, "maxDelayMs": 100}))?;
    let auto_retry = AutoRetry::from_config(&json!({"initialDelayMs": 10, "maxDelayMs": 100}))?;
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
        "swarm: {} agents, one turn each, on the simulated provider (seed {})",
        args.agents, args.seed
    )?;
    writeln!(out, "chain: {}", runtime.plugins().join(" → "))?;

    // Every agent at once: a task each, which opens its session and asks.
    let started = Instant::now();
    let mut agents = JoinSet::new();
    for i in 0..args.agents {
        let runtime = runtime.clone();
        agents.spawn(async move {
            let session = runtime.session(&format!("agent-{i:05}")).await?;
            session.ask("Tell me something about the sea.").await
        });
    }
    let mut report = Report::default();
    while let Some(joined) = agents.join_next().await {
        let outcome = joined.context("an agent's task panicked")??;
        *report.turns.entry(ending(&outcome.reason)).or_default() += 1;
    }
    let took = started.elapsed();

    runtime.shutdown().await;
    report.left = (runtime.census().actors(), runtime.census().tasks());

    for id in store.sessions().await? {
        let events = store.load(&id).await?.map(|log| log.events).unwrap_or_default();
        for event in &events {
            match &event.event {
                Event::RequestError(error) => {
                    *report.failures.entry(error.failure.code().to_owned()).or_default() += 1;
                }
                Event::LlmRetry(retry) => {
                    *report.retries.entry(retry.plugin.clone()).or_default() += 1
                }
                _ => {}
            }
        }
        let violations = check_finished_log(&events);
        for violation in violations.iter().take(3) {
            writeln!(out, "  {id}: {violation}")?;
        }
        report.logs += 1;
        report.violations += violations.len();
    }

    let turns: Vec<String> = report.turns.iter().map(|(k, n)| format!("{n} {k}")).collect();
    writeln!(out, "turns: {} in {:.2} s", turns.join(", "), took.as_secs_f64())?;
    writeln!(out, "failures met: {}", by_count(&report.failures))?;
    writeln!(out, "retries: {}", by_count(&report.retries))?;
    match peak_rss_kib() {
        Some(kib) => writeln!(out, "peak RSS: {} MiB", kib / 1024)?,
        None => writeln!(out, "peak RSS: unknown (no /proc/self/status)")?,
    }
    writeln!(out, "logs: {} checked, {} violations", report.logs, report.violations)?;
    let (actors, tasks) = report.left;
    writeln!(out, "after shutdown: {actors} actors, {tasks} tasks")?;
    ensure!(report.violations == 0 && report.left == (0, 0), "the run broke a guarantee");
    Ok(report)
}

/// How a turn ended, in a word.
fn ending(reason: &TurnEndReason) -> &'static str {
    match reason {
        TurnEndReason::Completed => "completed",
        TurnEndReason::Error { .. } => "failed",
        TurnEndReason::Aborted { .. } => "cancelled",
        TurnEndReason::MaxSteps => "at the step limit",
        TurnEndReason::Interrupted => "interrupted",
    }
}

/// `A 12, B 3`: the entries, most frequent first (`none` when empty).
fn by_count(counts: &BTreeMap<String, usize>) -> String {
    let mut entries: Vec<(&String, &usize)> = counts.iter().collect();
    entries.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let words: Vec<String> = entries.iter().map(|(k, n)| format!("{k} {n}")).collect();
    if words.is_empty() { "none".to_owned() } else { words.join(", ") }
}

/// The process's peak resident set size in KiB (`VmHWM: N kB` in `/proc/self/status`).
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line["VmHWM:".len()..].split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn every_agent_ends_its_turn_and_every_log_holds_the_invariants() {
        let mut out = Vec::new();
        let report =
            run(&Args { agents: 60, seed: 7 }, Arc::new(VirtualClock::start()), &mut out).await;
        let out = String::from_utf8(out).unwrap();
        let report = report.unwrap_or_else(|e| panic!("{e}\n{out}"));
        assert_eq!(report.turns.values().sum::<usize>(), 60, "{out}");
        assert_eq!(report.logs, 60, "{out}");
        assert_eq!(report.violations, 0, "{out}");
        assert_eq!(report.left, (0, 0), "{out}");
        // 60 agents meet faults (about 3 attempts in 10 fail) and the chain recovers them.
        assert!(report.failures.values().sum::<usize>() > 5, "{out}");
        assert!(report.retries.get("llm-retry").is_some_and(|&n| n > 5), "{out}");
        assert!(report.turns.get("completed").is_some_and(|&n| n >= 55), "{out}");
        assert!(out.starts_with(
            "swarm: 60 agents, one turn each, on the simulated provider (seed 7)\n\
             chain: llm-retry → compaction → auto-retry\nturns: "
        ));
        assert!(out.contains("\nlogs: 60 checked, 0 violations\n"), "{out}");
        assert!(out.contains("\npeak RSS: "), "{out}");
    }

    #[test]
    fn counts_are_listed_most_frequent_first() {
        let counts: BTreeMap<String, usize> =
            [("SERVER", 2), ("RATE_LIMIT", 5), ("AUTH", 2)].map(|(k, n)| (k.to_owned(), n)).into();
        assert_eq!(by_count(&counts), "RATE_LIMIT 5, AUTH 2, SERVER 2");
        assert_eq!(by_count(&BTreeMap::new()), "none");
    }
}
