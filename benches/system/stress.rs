//! Metrics `stress_{N}k_agents_*`: the `rein stress` engine (`rein_cli::stress`) at N thousand
//! agents on a memory store, against the same workload done by a hand-rolled tokio + backon
//! loop (`hand_rolled_stress`) — the ratio a user weighing rein against writing the loop by
//! hand would want.
//!
//! The workload is `rein stress` with its defaults (10 % of turns cancelled at a random moment,
//! 20 % of attempts failing — rate limits, server errors, dropped connections, stalls — 0–10 ms
//! to the first word, every word a chunk, 5 ms backoffs) but no plugin chaos (no disposals,
//! settings changes or crashes: a hand-rolled loop has no plugins to dispose). Both sides draw
//! each turn's cancellation from the same seeded plan, and call the same simulated provider.
//!
//! The lines per N, each rein's value against the hand-rolled loop's:
//!
//! - `…_cpu_per_turn_vs_hand_rolled`: CPU time of the process per ended turn, µs, over the
//!   agents' run. Budget: at most [`CPU_BUDGET`] ×.
//! - `…_turns_per_s_vs_hand_rolled`: turns ended per second, from the first agent's start to
//!   the last turn's end (for the record).
//! - `…_cancel_p50_ms_vs_hand_rolled`, `…_cancel_p99_ms_vs_hand_rolled`: cancellation latency,
//!   from the cancel to the turn's end in the log (rein: durable in its store), of the
//!   cancellations that found their turn running. At 10,000 agents the p99's budget is at most
//!   [`CANCEL_P99_BUDGET`] × the loop's, and two absolute lines follow (their baseline is 1 ms):
//!   `…_cancel_p99_ms` at most [`CANCEL_P99_MS`] (one model chunk) and `…_cancel_p50_ms` at most
//!   [`CANCEL_P50_MS`]. At 1,000 agents they are for the record.
//! - `…_peak_rss_per_agent_kib_vs_hand_rolled`: peak resident set size above the process's size
//!   before the agents started, per agent (the logs of every turn included on both sides; for
//!   the record).
//!
//! Each side runs in a process of its own (`child`), so its peak RSS is its own. N is 1,000
//! ([`TURNS_1K`] turns per agent) and 10,000 ([`TURNS_10K`] turns per agent; one with
//! `--quick`).

use std::process::ExitCode;

use rein::runtime::store::memory::MemoryStore;
use rein_cli::stress::StressConfig;
use rein_cli::stress::plan::Rates;

use crate::Options;
use crate::child::{self, Kind, Run};
use crate::report::{Budget, Metric};
use crate::{bare_stress, hand_rolled_stress};

/// The prefix of the metrics' names (what a filter matches).
pub(crate) const NAME: &str = "stress";

/// CPU per turn: at most this × the hand-rolled loop's (DESIGN §6).
const CPU_BUDGET: Budget = Budget::AtMost(1.5);
/// Cancellation p99 at 10,000 agents: at most this × the hand-rolled loop's.
const CANCEL_P99_BUDGET: Budget = Budget::AtMost(50.0);
/// Cancellation p99 at 10,000 agents, ms: at most one model chunk.
const CANCEL_P99_MS: Budget = Budget::AtMost(10.0);
/// Cancellation p50 at 10,000 agents, ms.
const CANCEL_P50_MS: Budget = Budget::AtMost(1.0);

/// Turns per agent at 1,000 agents.
const TURNS_1K: u32 = 10;
/// Turns per agent at 10,000 agents (one with `--quick`).
const TURNS_10K: u32 = 3;

/// The workload at `agents` agents of `turns` turns each.
pub(crate) fn config(agents: usize, turns: u32) -> StressConfig {
    StressConfig {
        agents,
        turns,
        rates: Rates { cancel: 0.1, dispose: 0.0, config: 0.0, fault: 0.2, crash: 0.0, tool: 0.0 },
        seed: 0,
        latency_ms: 10,
        backoff_ms: 5,
        stall_ms: 100,
        tool_ms: 0,
        decide_ms: 0,
        hang_deadline_ms: 30_000,
        think_ms: 0,
        outage: None,
        route_health: None,
        virtual_clock: false,
        progress: false,
    }
}

/// The plugins of the stress run's chain (llm-retry, compaction, auto-retry with the workload's
/// settings), for metrics that run rein with the same chain.
pub(crate) fn chain() -> anyhow::Result<Vec<rein::runtime::plugin::BuiltPlugin>> {
    let mut plugins = Vec::new();
    for (name, settings) in config(1, 1).plugin_settings() {
        let (_, factory) = rein::plugins::ALL
            .iter()
            .find(|(known, _)| *known == name)
            .ok_or_else(|| anyhow::anyhow!("no plugin {name}"))?;
        plugins.push(factory(&settings)?);
    }
    Ok(plugins)
}

/// Measures the metrics.
pub(crate) fn run(options: &Options) -> anyhow::Result<Vec<Metric>> {
    let sizes = [(1_000, TURNS_1K), (10_000, if options.quick { 1 } else { TURNS_10K })];
    let mut metrics = Vec::new();
    for (agents, turns) in sizes {
        let name = format!("{NAME}_{}k_agents", agents / 1000);
        let rein = child::spawn(Kind::Rein, agents, turns)?;
        let hand = child::spawn(Kind::HandRolled, agents, turns)?;
        let bare = child::spawn(Kind::StressBare, agents, turns)?;
        for (side, run) in [("rein", &rein), ("hand-rolled", &hand), ("bare actors", &bare)] {
            eprintln!(
                "{name}: {side}: {} turns in {:.2} s ({:.0} µs CPU per turn), {:?}, {} events; \
                 {} cancels p50 {:.2} ms p99 {:.2} ms; RSS {} KiB before, peak {} KiB",
                run.turns,
                run.elapsed_s,
                run.cpu_s * 1e6 / run.turns as f64,
                run.ends,
                run.events,
                run.cancels,
                run.cancel_p50_ms,
                run.cancel_p99_ms,
                run.rss_before_kib,
                run.peak_rss_kib,
            );
        }
        let budgeted = agents >= 10_000;
        let cancel_budget = |budget| if budgeted { budget } else { Budget::Record };
        metrics.extend([
            Metric::new(
                &format!("{name}_cpu_per_turn_vs_hand_rolled"),
                rein.cpu_per_turn_us(),
                hand.cpu_per_turn_us(),
                CPU_BUDGET,
            ),
            Metric::record(
                &format!("{name}_bare_actors_cpu_per_turn_vs_hand_rolled"),
                bare.cpu_per_turn_us(),
                hand.cpu_per_turn_us(),
            ),
            Metric::record(
                &format!("{name}_cpu_per_turn_vs_bare_actors"),
                rein.cpu_per_turn_us(),
                bare.cpu_per_turn_us(),
            ),
            Metric::record(
                &format!("{name}_turns_per_s_vs_hand_rolled"),
                rein.turns_per_s(),
                hand.turns_per_s(),
            ),
            Metric::record(
                &format!("{name}_cancel_p50_ms_vs_hand_rolled"),
                rein.cancel_p50_ms,
                hand.cancel_p50_ms,
            ),
            Metric::new(
                &format!("{name}_cancel_p99_ms_vs_hand_rolled"),
                rein.cancel_p99_ms,
                hand.cancel_p99_ms,
                cancel_budget(CANCEL_P99_BUDGET),
            ),
            Metric::record(
                &format!("{name}_bare_actors_cancel_p99_ms_vs_hand_rolled"),
                bare.cancel_p99_ms,
                hand.cancel_p99_ms,
            ),
        ]);
        if budgeted {
            metrics.extend([
                Metric::new(
                    &format!("{name}_cancel_p99_ms"),
                    rein.cancel_p99_ms,
                    1.0,
                    CANCEL_P99_MS,
                ),
                Metric::new(
                    &format!("{name}_cancel_p50_ms"),
                    rein.cancel_p50_ms,
                    1.0,
                    CANCEL_P50_MS,
                ),
            ]);
        }
        metrics.push(Metric::record(
            &format!("{name}_peak_rss_per_agent_kib_vs_hand_rolled"),
            rein.rss_per_agent_kib(agents),
            hand.rss_per_agent_kib(agents),
        ));
    }
    Ok(metrics)
}

/// The child side: runs `kind` and prints its [`Run`] as one JSON line.
pub(crate) fn child(kind: Kind, agents: usize, turns: u32) -> ExitCode {
    let config = config(agents, turns);
    let measured = crate::drive(async move {
        match kind {
            Kind::Rein => rein(&config).await,
            Kind::StressBare => bare_stress::stress(&config).await,
            _ => hand_rolled_stress::run(&config).await,
        }
    });
    child::print(measured)
}

/// `rein_cli::stress::run` on a memory store.
async fn rein(config: &StressConfig) -> anyhow::Result<Run> {
    let (rss_before_kib, _) = child::rss_kib();
    let summary = rein_cli::stress::run(config, std::sync::Arc::new(MemoryStore::new()), None)
        .await
        .map_err(|e| anyhow::anyhow!(e))?
        .settle();
    let latency = summary.cancellations.latency;
    Ok(Run {
        turns: summary.tally.turns_ended(),
        ends: summary.tally.turns.clone(),
        events: summary.tally.events,
        elapsed_s: summary.elapsed_ms as f64 / 1000.0,
        cpu_s: summary.cpu_ms.unwrap_or(0) as f64 / 1000.0,
        cancels: latency.samples,
        cancel_p50_ms: latency.p50_ms,
        cancel_p99_ms: latency.p99_ms,
        rss_before_kib,
        peak_rss_kib: summary.peak_rss_kib.unwrap_or(0),
        allocations: 0,
        failures: summary.failures(),
    })
}
