//! Metrics `retry_amplification_*` and `recovery_after_outage_*` (`retry_amplification`): what an
//! outage costs the route with route health and without (SPEC §13, DESIGN.md §6). The `rein
//! stress` engine in this process, on a memory store, real time: [`AGENTS`] agents, each
//! thinking about [`Scale::think_ms`] before each of its turns, the simulated provider failing
//! every request for [`Scale::outage_ms`] from [`Scale::outage_at_ms`] after the start, no other
//! fault and no chaos. The same run twice, route health on (the defaults but `openMs`
//! [`Scale::open_ms`] and `windowMs` [`Scale::window_ms`]) then off:
//!
//! - `retry_amplification_1k_agents_outage`: requests sent to the route per failed turn with
//!   route health on; budget ≤ 1.2 (the baseline is the unit).
//! - `retry_amplification_1k_agents_on_vs_off`: the same against the figure with it off (a failed
//!   turn's whole budget, 1 + 2 + 2), for the record.
//! - `recovery_after_outage_ms_vs_open_ms`: with route health on, from the end of the outage to
//!   the route serving every attempt again (the breaker closed, the first answer after its last
//!   refusal), against `openMs`; budget ≤ 1.
//!
//! A run that breaks its own checks (an invariant, a hung turn, a leak), a breaker that never
//! opened or closed, or a request that reached the provider while the breaker was open fails to
//! measure.
//!
//! The full run is the issue's: a 10 s outage, `openMs` 5 s, `windowMs` 10 s (the default), 1 s of
//! thinking. `--quick` divides every time by ten (a 1 s outage, `openMs` 500 ms, `windowMs` 1 s,
//! 100 ms of thinking), so both runs take a few seconds; at 1,000 agents thinking 100 ms the
//! engine is busy, and the pace is then the machine's.

use std::sync::Arc;

use rein::runtime::route_health::HealthSettings;
use rein::runtime::store::memory::MemoryStore;
use rein_cli::stress::StressConfig;
use rein_cli::stress::outage::Outage;
use rein_cli::stress::plan::Rates;
use rein_cli::stress::route::RouteSummary;

use crate::Options;
use crate::report::{Budget, Metric};

/// The prefix of the metrics' names (what a filter matches).
pub(crate) const NAME: &str = "retry_amplification";

/// Agents.
const AGENTS: usize = 1_000;
/// The budget: requests per failed turn with route health on.
const BUDGET: f64 = 1.2;

/// The times of a run.
#[derive(Debug, Clone, Copy)]
struct Scale {
    /// The mean think time before a turn.
    think_ms: u64,
    /// When the outage starts.
    outage_at_ms: u64,
    /// How long it lasts.
    outage_ms: u64,
    /// The breaker's `openMs`.
    open_ms: u64,
    /// The breaker's `windowMs`.
    window_ms: u64,
    /// Turns per agent: the run spans the outage, one `openMs` and some more.
    turns: u32,
}

const FULL: Scale = Scale {
    think_ms: 1_000,
    outage_at_ms: 3_000,
    outage_ms: 10_000,
    open_ms: 5_000,
    window_ms: 10_000,
    turns: 22,
};

const QUICK: Scale = Scale {
    think_ms: 100,
    outage_at_ms: 300,
    outage_ms: 1_000,
    open_ms: 500,
    window_ms: 1_000,
    turns: 22,
};

fn config(scale: Scale, route_health: Option<HealthSettings>) -> StressConfig {
    StressConfig {
        agents: AGENTS,
        turns: scale.turns,
        rates: Rates { cancel: 0.0, dispose: 0.0, config: 0.0, fault: 0.0, crash: 0.0, tool: 0.0 },
        seed: 0,
        latency_ms: 10,
        backoff_ms: 5,
        stall_ms: 100,
        tool_ms: 0,
        decide_ms: 0,
        hang_deadline_ms: 60_000,
        think_ms: scale.think_ms,
        outage: Some(Outage { at_ms: scale.outage_at_ms, ms: scale.outage_ms }),
        route_health,
        virtual_clock: false,
        progress: false,
    }
}

/// Measures the metrics.
pub(crate) fn run(options: &Options) -> anyhow::Result<Vec<Metric>> {
    let scale = if options.quick { QUICK } else { FULL };
    let health = HealthSettings::default()
        .with_open_ms(scale.open_ms)
        .and_then(|h| h.with_window_ms(scale.window_ms))
        .map_err(|e| anyhow::anyhow!(e))?;
    let on = measure(config(scale, Some(health)))?;
    let off = measure(config(scale, None))?;
    let breaker = on.breaker.unwrap_or_default();
    anyhow::ensure!(
        breaker.opened >= 1 && breaker.closed >= 1,
        "the breaker did not open and close"
    );
    anyhow::ensure!(
        on.requests_while_open == Some(0),
        "{:?} requests reached the provider while the breaker was open",
        on.requests_while_open
    );
    let amplification_on =
        on.retry_amplification.ok_or_else(|| anyhow::anyhow!("no failed turn"))?;
    let amplification_off =
        off.retry_amplification.ok_or_else(|| anyhow::anyhow!("no failed turn without health"))?;
    let recovery = on.recovery_ms.ok_or_else(|| anyhow::anyhow!("the route never recovered"))?;
    for (side, route) in [("on", &on), ("off", &off)] {
        eprintln!(
            "{NAME}: route health {side}: a {} ms outage at {} ms, {AGENTS} agents × {} turns \
             thinking {} ms: {} attempts, {} requests, {} short-circuited, {} retries throttled; \
             {} turns failed, {} requests for them ({:.3} per failed turn); breaker {:?}; \
             {:?} requests while open; served again {:?} ms after the outage",
            scale.outage_ms,
            scale.outage_at_ms,
            scale.turns,
            scale.think_ms,
            route.attempts,
            route.requests,
            route.short_circuited,
            route.throttled,
            route.failed_turns,
            route.requests_of_failed_turns,
            route.retry_amplification.unwrap_or(f64::NAN),
            route.breaker,
            route.requests_while_open,
            route.recovery_ms,
        );
    }
    Ok(vec![
        Metric::new(
            &format!("{NAME}_1k_agents_outage"),
            amplification_on,
            1.0,
            Budget::AtMost(BUDGET),
        ),
        Metric::record(&format!("{NAME}_1k_agents_on_vs_off"), amplification_on, amplification_off),
        Metric::new(
            "recovery_after_outage_ms_vs_open_ms",
            recovery as f64,
            scale.open_ms as f64,
            Budget::AtMost(1.0),
        ),
    ])
}

/// One run: its route's summary, once every guarantee held.
fn measure(config: StressConfig) -> anyhow::Result<RouteSummary> {
    let summary = crate::drive(async move {
        let store = Arc::new(MemoryStore::new());
        rein_cli::stress::run(&config, store, None).await.map_err(|e| anyhow::anyhow!(e))
    })?
    .settle();
    anyhow::ensure!(summary.ok, "the run failed its checks: {}", summary.failures().join("; "));
    Ok(summary.route)
}
