//! A 1,000-agent stress run through a 10 s outage of its route (SPEC §13), on paused time: the
//! stress engine in this process (`rein_cli::stress::run`) with its runtime on tokio's clock, so
//! the run's 25 virtual seconds take a few seconds of CPU. With route health on, every turn ends,
//! every log keeps every invariant, the breaker opens during the outage and closes after it
//! within one `openMs`, no request reaches the provider while it is open, and the failed turns
//! cost at most 1.2 requests each; with it off, the same run sends every failed turn's whole
//! retry budget (1 + 2 + 2 requests).
//!
//! Why paused time: a real 10 s outage and its recovery would hold CI for half a minute per run,
//! and on a loaded machine the agents' pace would be the machine's. On tokio's paused clock the
//! virtual times are exact (the outage is 10,000 ms of the runtime clock), the agents' think
//! times and the breaker's `openMs` pass instantly when nothing else runs, and what is measured
//! is what the runtime decided, not how fast the machine was.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use rein::runtime::route_health::HealthSettings;
use rein::runtime::store::memory::MemoryStore;
use rein_cli::stress::outage::Outage;
use rein_cli::stress::plan::Rates;
use rein_cli::stress::summary::Summary;
use rein_cli::stress::{StressConfig, run};

const AGENTS: usize = 1_000;
const TURNS: u32 = 5;

/// 1,000 agents, 5 turns each, thinking 4 s on average before each (about 250 turns a second
/// when the route is healthy: the run spans 20 virtual seconds); the provider fails every request
/// from 5 s to 15 s; chaos (10 % of the turns cancelled, a settings change or a plugin disposal
/// every 500 turns: each change is a `config/changed` in every awake session), no other fault;
/// route health with `openMs` 5 s.
fn config(route_health: Option<HealthSettings>) -> StressConfig {
    StressConfig {
        agents: AGENTS,
        turns: TURNS,
        rates: Rates {
            cancel: 0.1,
            dispose: 0.002,
            config: 0.002,
            fault: 0.0,
            crash: 0.0,
            tool: 0.0,
        },
        seed: 7,
        latency_ms: 10,
        backoff_ms: 5,
        stall_ms: 100,
        tool_ms: 0,
        decide_ms: 0,
        hang_deadline_ms: 60_000,
        think_ms: 4_000,
        outage: Some(Outage { at_ms: 5_000, ms: 10_000 }),
        route_health,
        virtual_clock: true,
        progress: false,
    }
}

fn health() -> HealthSettings {
    HealthSettings::default().with_open_ms(5_000).unwrap()
}

async fn stress(config: &StressConfig) -> Summary {
    run(config, Arc::new(MemoryStore::new()), None).await.unwrap().settle()
}

/// What every run must show: every turn ended, every invariant kept, nothing left alive.
fn assert_clean(summary: &Summary, config: &StressConfig) {
    assert!(summary.ok, "{}", summary.text());
    let turns = config.agents as u64 * u64::from(config.turns);
    assert_eq!(summary.tally.turns_ended(), turns, "{}", summary.text());
    assert_eq!((summary.tally.violations, summary.hung), (0, 0), "{}", summary.text());
    assert_eq!((summary.leaks.actors, summary.leaks.tasks), (0, 0), "{}", summary.text());
}

#[tokio::test(start_paused = true)]
async fn a_ten_second_outage_opens_the_breaker_and_costs_each_failed_turn_one_request_at_most() {
    let config_on = config(Some(health()));
    let on = stress(&config_on).await;
    assert_clean(&on, &config_on);
    let route = &on.route;
    let text = on.text();
    assert!(route.failed_turns >= 500, "the outage failed turns: {text}");
    let amplification = route.retry_amplification.unwrap();
    assert!(amplification <= 1.2, "{amplification} requests per failed turn: {text}");
    let breaker = route.breaker.unwrap();
    assert!(breaker.opened >= 1 && breaker.closed >= 1, "opened and closed: {text}");
    let (opened, closed) = (breaker.first_opened_ms.unwrap(), breaker.last_closed_ms.unwrap());
    assert!((5_000..15_000).contains(&opened), "opened during the outage: {text}");
    assert!(closed > 15_000, "closed after it: {text}");
    assert!(route.short_circuited > 0, "attempts failed at once while open: {text}");
    assert_eq!(route.requests_while_open, Some(0), "no request while open: {text}");
    let recovery = route.recovery_ms.unwrap();
    assert!(recovery <= 5_000, "full service within one openMs ({recovery} ms): {text}");
    assert!(text.contains("breaker     opened "), "{text}");
    assert!(text.contains("outage      10.0 s from 5.0 s after the start"), "{text}");

    // Without route health: every failed turn spends its whole budget on the route. A tenth of
    // the agents (a figure per failed turn), and no settings chaos, which changes auto-retry's
    // budget (`extraRetries` 0 to 4, `enabled` off): the budget is the run's 1 + 2 + 2.
    let config_off = StressConfig {
        agents: AGENTS / 10,
        rates: Rates { config: 0.0, dispose: 0.0, ..config(None).rates },
        ..config(None)
    };
    let off = stress(&config_off).await;
    assert_clean(&off, &config_off);
    let without = off.route.retry_amplification.unwrap();
    assert_eq!(without, 5.0, "requests per failed turn without route health: {}", off.text());
    assert_eq!((off.route.short_circuited, off.route.throttled), (0, 0));
    assert_eq!((off.route.breaker, off.route.requests_while_open), (None, None));
    let per_agent = |s: &Summary, agents: usize| s.route.requests as f64 / agents as f64;
    assert!(
        per_agent(&off, AGENTS / 10) > 2.0 * per_agent(&on, AGENTS),
        "the storm: {} requests for {} agents off, {} for {} on",
        off.route.requests,
        AGENTS / 10,
        on.route.requests,
        AGENTS
    );
}
