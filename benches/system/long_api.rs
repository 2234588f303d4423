//! Metrics `long_session_scenario_2000_vs_500_turns` and
//! `long_session_next_event_2000_vs_500_turns_{memory,jsonl}`: long sessions through the public
//! API, as a user drives them. Budget: a 2,000-turn run takes at most 4.5 × the 500-turn run
//! (linear is 4) — no turn pays for the history before it, whichever way its events are read.
//!
//! - **Scenario**: `rein scenario run`'s path (`rein_cli::scenario::runner`): one session of N
//!   turns, each answered by the scripted provider after 10 ms of virtual time; the runner
//!   follows each turn's events from a task of its own, which usually starts reading after the
//!   turn started and so catches up from the log.
//! - **`prompt` + `next_event`**: a real [`Runtime`] over a [`MemoryStore`] and a [`JsonlStore`]
//!   (`Os`), a provider of no latency ([`Instant`]); turns are prompted two at a time and each
//!   one's events read with `next_event` to its `turn/end`, then its outcome awaited: the second
//!   turn's as it runs, then the first's, which ended meanwhile — a reader that fell behind, and
//!   catches up from the log, on every other turn.
//!
//! - **Value**: the median time of the 2,000-turn run.
//! - **Baseline**: the median time of the 500-turn run, the runs interleaved.
//!
//! `long_session` (turn 2,000 against turn 20 of one session) measures the runtime's own
//! per-turn cost; it never read a turn's events, and so missed a catch-up that re-read the
//! whole log on every turn (2,000 turns took 18 × the time of 500).

use std::sync::Arc;
use std::time::{Duration, Instant as Clock};

use rein::runtime::event::TurnEndReason;
use rein::runtime::runtime::{Route, Runtime};
use rein::runtime::session::TurnHandle;
use rein::runtime::store::jsonl::JsonlStore;
use rein::runtime::store::memory::MemoryStore;
use rein::runtime::store::{Durability, SessionStore};
use rein_cli::scenario::Scenario;
use serde_json::json;

use crate::Options;
use crate::doubles::Instant;
use crate::report::{Budget, Metric};
use crate::sample::median;

/// The group's name (what a filter matches).
pub(crate) const NAME: &str = "long_api";

const BUDGET: Budget = Budget::AtMost(4.5);

/// The short and the long run, in turns.
const SHORT: usize = 500;
const LONG: usize = 2_000;
/// Runs of each length (with `--quick`; three times as many without).
const RUNS: usize = 3;

/// Measures the metrics.
pub(crate) fn run(options: &Options) -> anyhow::Result<Vec<Metric>> {
    let runs = if options.quick { RUNS } else { 3 * RUNS };
    let mut metrics = Vec::new();

    let (short, long) = (scenario(SHORT)?, scenario(LONG)?);
    let (mut shorts, mut longs) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        shorts.push(run_scenario(&short, SHORT)?);
        longs.push(run_scenario(&long, LONG)?);
    }
    metrics.push(metric("long_session_scenario_2000_vs_500_turns", shorts, longs));

    let dir = crate::temp_dir()?;
    let jsonl = JsonlStore::open(dir.path(), Durability::Os)?;
    let stores: [(&str, Arc<dyn SessionStore>); 2] =
        [("memory", Arc::new(MemoryStore::new())), ("jsonl", Arc::new(jsonl))];
    for (name, store) in stores {
        let (mut shorts, mut longs) = (Vec::new(), Vec::new());
        for run in 0..runs {
            let store = Arc::clone(&store);
            let (short, long) = crate::drive(async move {
                let short = session(Arc::clone(&store), &format!("short-{run}"), SHORT).await?;
                let long = session(store, &format!("long-{run}"), LONG).await?;
                Ok((short, long))
            })?;
            shorts.push(short);
            longs.push(long);
        }
        let metric_name = format!("long_session_next_event_2000_vs_500_turns_{name}");
        metrics.push(metric(&metric_name, shorts, longs));
    }
    Ok(metrics)
}

/// The metric of `longs` against `shorts`, with where the time went on stderr.
fn metric(name: &str, shorts: Vec<Duration>, longs: Vec<Duration>) -> Metric {
    let (short, long) = (median(shorts), median(longs));
    eprintln!(
        "{name}: medians: {SHORT} turns {:.1} ms ({:.1} µs a turn), {LONG} turns {:.1} ms ({:.1} µs \
         a turn)",
        short.as_secs_f64() * 1e3,
        short.as_secs_f64() * 1e6 / SHORT as f64,
        long.as_secs_f64() * 1e3,
        long.as_secs_f64() * 1e6 / LONG as f64,
    );
    Metric::new(name, long.as_secs_f64() * 1e3, short.as_secs_f64() * 1e3, BUDGET)
}

/// A scenario of `turns` turns, each answered after 10 ms of virtual time.
fn scenario(turns: usize) -> anyhow::Result<Scenario> {
    let script: Vec<_> = (0..turns)
        .map(|n| json!({"reply": {"text": format!("answer {n}"), "latencyMs": 10}}))
        .collect();
    let prompts: Vec<_> =
        (0..turns).map(|n| json!({"prompt": format!("prompt {n}"), "provider": "mock"})).collect();
    let text = json!({
        "seed": 1,
        "providers": [{"id": "mock", "script": script}],
        "turns": prompts,
    });
    Ok(Scenario::from_json(&text.to_string())?)
}

/// Runs `scenario` (of `turns` turns) as `rein scenario run` does, and times it.
fn run_scenario(scenario: &Scenario, turns: usize) -> anyhow::Result<Duration> {
    let start = Clock::now();
    let outcome = rein_cli::scenario::runner().run(scenario)?;
    let took = start.elapsed();
    let completed =
        outcome.report.turns.iter().filter(|t| t.reason == TurnEndReason::Completed).count();
    if completed != turns || !outcome.report.invariant.ok {
        anyhow::bail!(
            "the {turns}-turn scenario: {completed} turns completed, {:?}",
            outcome.report.invariant
        );
    }
    Ok(took)
}

/// `turns` turns of session `id` over `store`, each prompted and read with `next_event` to its
/// end: how long they took.
async fn session(store: Arc<dyn SessionStore>, id: &str, turns: usize) -> anyhow::Result<Duration> {
    let runtime = Runtime::builder()
        .store(store)
        .route(Route::new("instant", Arc::new(Instant)).model("i-1"))
        .build()
        .await?;
    let session = runtime.session(id).await?;
    let start = Clock::now();
    for _ in 0..turns / 2 {
        // Two prompts at a time: the second turn's events read as it runs, then the first
        // turn's, which ended meanwhile and are read back from the log.
        let first = session.prompt("again")?;
        let second = session.prompt("and again")?;
        read(second).await?;
        read(first).await?;
    }
    let took = start.elapsed();
    runtime.shutdown().await;
    Ok(took)
}

/// Reads `turn`'s events to its `turn/end`, then its outcome, which must be `completed`.
async fn read(mut turn: TurnHandle) -> anyhow::Result<()> {
    let mut last = None;
    while let Some(event) = turn.next_event().await {
        last = Some(event);
    }
    if last.is_none_or(|e| e.kind() != "turn/end") {
        anyhow::bail!("a turn's events did not end with its turn/end");
    }
    let outcome = turn.outcome().await?;
    if outcome.reason != TurnEndReason::Completed {
        anyhow::bail!("a turn ended {:?}", outcome.reason);
    }
    Ok(())
}
