//! The engine of `rein stress`: many concurrent agents on the simulated provider, with random
//! turn cancellations, plugin disposals and registrations, run-time settings changes, plugin
//! crashes and provider faults — then every guarantee checked: every log against the
//! invariants, every turn ended, nothing left alive after shutdown. The `rein stress` command
//! is a thin shell over [`run`] (its flags, the store it opens, how it prints the [`Summary`]);
//! the system benchmark runs the same engine for its throughput and cancellation figures. The
//! decisions behind the run are in `docs/runtime-semantics.md` ("rein stress").
//!
//! - [`plan`]: the seeded decisions (what each turn does, the fault split, settings patches).
//! - [`limits`]: the bounds of the numbers, and the default hang deadline derived from the pace.
//! - [`summary`]: the logs' tally, latency percentiles, the verdict, the text and JSON output.
//! - `agent`: one agent's turns; the watch that finds hung turns.
//! - `chaos`: the task that disposes, registers and reconfigures plugins.
//! - `flaky`: the plugin that crashes on purpose (`crash` rate), and takes its time to decide
//!   (`decide_ms`).
//! - `pause`: the tool a turn's answer calls (`tool` rate), taking `tool_ms`.
//! - [`outage`]: the simulated provider's outage window, and the requests that reach it while
//!   the route's breaker is open.
//! - [`route`]: what the route went through, folded from the logs (requests, short-circuits,
//!   retry amplification, the time back to full service after an outage).
//! - `jitter`: the plugins' jitter samples (from the seed) and retry ids (never repeated).
//! - `progress`, [`acks`]: what goes to standard error and to the acknowledgement side channel.
//!
//! # Why real time
//!
//! A stress run is about what the runtime does under real concurrency: many sessions' actors
//! and tasks on the worker threads at once, real stores, real cancellation races. On a paused
//! clock every wait would complete in order on one thread. So the simulated provider runs on
//! the wall clock, with small latencies ([`StressConfig::latency_ms`],
//! [`StressConfig::backoff_ms`]) so a run of thousands of agents takes seconds.
//! The exception is a run about decisions over minutes — an outage, a breaker's `openMs` — in a
//! test: [`StressConfig::virtual_clock`] puts the runtime on tokio's clock, and on a paused tokio
//! runtime its virtual seconds pass as fast as the work allows.
//!
//! # Why a hung turn is judged after the run
//!
//! A turn may legitimately run for a while (faults, retries, waits), and while other agents
//! are busy, one slow turn is not a hang. The run is over when turns stop ending; a turn still
//! running [`StressConfig::hang_deadline_ms`] after the last one ended will never end on its
//! own. The run then stops (no agent starts another turn), lists those turns, and shuts the
//! runtime down — which must still end them and leave nothing alive.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use crate::providers::{Simulated, SimulatedConfig};
use crate::runtime::census::ActorKind;
use crate::runtime::clock::{Clock, VirtualClock, WallClock};
use crate::runtime::plugin::BuiltPlugin;
use crate::runtime::provider::Adapter;
use crate::runtime::route_health::{BreakerState, HealthHistory, HealthSettings};
use crate::runtime::runtime::{Route, Runtime, RuntimeBuilder};
use crate::runtime::session::Placement;
use crate::runtime::store::SessionStore;

pub mod acks;
mod agent;
mod chaos;
pub mod cluster;
mod flaky;
mod jitter;
pub mod limits;
pub mod outage;
mod pause;
pub mod plan;
mod progress;
pub mod route;
pub mod summary;

use agent::{AgentReport, Shared, Watch, session_id};
use chaos::{Chaos, MakePlugin, PluginSpec};
use outage::{Down, Outage};
use plan::Rates;
use route::{BreakerSummary, OutageWindow, RouteSummary, RouteTally};
use summary::{Cancellations, HungTurn, LISTED, Latencies, Leaks, Summary, Tally};

/// What a stress run does (the flags of `rein stress`, less the store). It travels as JSON to
/// the nodes of `rein stress --nodes` ([`node_runtime`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StressConfig {
    /// Concurrent agents (sessions `agent-00000`, `agent-00001`, ...).
    pub agents: usize,
    /// Turns per agent, one after another.
    pub turns: u32,
    /// The per-turn rates (cancellations, disposals, settings changes) and the fault and crash
    /// rates.
    pub rates: Rates,
    /// The seed of every random choice.
    pub seed: u64,
    /// The simulated provider's longest wait before its first word (each attempt draws within
    /// `0..=latency_ms`).
    pub latency_ms: u64,
    /// The plugins' first backoff (llm-retry and auto-retry; their ceiling is 20 ×), and a
    /// quarter of the longest Retry-After the simulated 429s send. At least 1.
    pub backoff_ms: u64,
    /// How long a simulated stall lasts before its watchdog fails it `TIMEOUT`.
    pub stall_ms: u64,
    /// How long a call of the `pause` tool takes (the tool is offered when `rates.tool` > 0).
    pub tool_ms: u64,
    /// How long the `flaky` plugin takes to decide each failure it is offered (it is in the
    /// chain when this or `rates.crash` is above 0).
    pub decide_ms: u64,
    /// A turn still running this long after the last turn ended is hung (the `rein stress`
    /// default is [`limits::default_hang_deadline_ms`] of the pace).
    pub hang_deadline_ms: u64,
    /// How long each agent thinks before each of its turns, on average ([`plan::think`]); 0:
    /// turns follow each other at once.
    pub think_ms: u64,
    /// A window in which the simulated provider fails every request (`None`: no outage).
    pub outage: Option<Outage>,
    /// The route's health settings (`None`: route health off).
    #[serde(with = "health_json")]
    pub route_health: Option<HealthSettings>,
    /// Event times from tokio's clock, in ms from the start of the run, instead of the wall
    /// clock: for a run on a paused tokio runtime (a test of minutes that takes seconds).
    pub virtual_clock: bool,
    /// Whether progress goes to standard error.
    pub progress: bool,
}

impl StressConfig {
    /// Checks the rates and the numbers; the error names the `rein stress` flag and its range.
    /// Every number must be within its bound ([`limits`]).
    pub fn check(&self) -> Result<(), String> {
        self.rates.check()?;
        let agents = u64::try_from(self.agents).unwrap_or(u64::MAX);
        limits::within("--agents", agents, &limits::AGENTS)?;
        limits::within("--turns", u64::from(self.turns), &limits::TURNS)?;
        limits::within("--latency-ms", self.latency_ms, &limits::LATENCY_MS)?;
        limits::within("--backoff-ms", self.backoff_ms, &limits::BACKOFF_MS)?;
        limits::within("--stall-ms", self.stall_ms, &limits::STALL_MS)?;
        limits::within("--tool-ms", self.tool_ms, &limits::TOOL_MS)?;
        limits::within("--decide-ms", self.decide_ms, &limits::DECIDE_MS)?;
        limits::within("--think-ms", self.think_ms, &limits::THINK_MS)?;
        if let Some(outage) = &self.outage {
            limits::within("--outage-ms", outage.ms, &limits::OUTAGE_MS)?;
            limits::within("--outage-at-ms", outage.at_ms, &limits::OUTAGE_AT_MS)?;
        }
        limits::within("--hang-deadline-ms", self.hang_deadline_ms, &limits::HANG_DEADLINE_MS)
    }

    /// The simulated provider of the run: the fault rate split over the fault kinds
    /// ([`plan::fault_model`]), 429s asking for up to 4 × the backoff, every word of an answer
    /// streamed at once after the first-word latency, stalls ended after `stall_ms`.
    pub fn simulated(&self) -> SimulatedConfig {
        let faults = plan::fault_model(self.rates.fault);
        SimulatedConfig {
            seed: self.seed,
            rate_limit_rate: faults.rate_limit,
            retry_after_ms: 1..=self.backoff_ms * 4,
            server_error_rate: faults.server_error,
            drop_rate: faults.drop,
            stall_rate: faults.stall,
            first_chunk_latency_ms: 0..=self.latency_ms,
            chunk_latency_ms: 0..=0,
            idle_timeout: Some(Duration::from_millis(self.stall_ms)),
            tool_call_rate: self.rates.tool,
            ..SimulatedConfig::default()
        }
    }

    /// The settings of the chain's plugins, in order: llm-retry (2 transient retries, the
    /// backoff doubling from `backoff_ms` to 20 × it, 10 % jitter), compaction, auto-retry (2
    /// retries more, the same delays).
    pub fn plugin_settings(&self) -> [(&'static str, Value); 3] {
        let backoff = self.backoff_ms;
        [
            (
                "llm-retry",
                json!({"maxTransientRetries": 2, "initialDelayMs": backoff,
                       "maxDelayMs": backoff * 20, "jitterRatio": 0.1}),
            ),
            ("compaction", json!({})),
            (
                "auto-retry",
                json!({"extraRetries": 2, "initialDelayMs": backoff, "maxDelayMs": backoff * 20}),
            ),
        ]
    }
}

/// `StressConfig::route_health` as JSON: the settings' own configuration value
/// ([`HealthSettings::to_value`]), read back as strictly as `rein.toml` reads it.
mod health_json {
    use serde::{Deserialize, Deserializer, Serialize, Serializer, de::Error as _};
    use serde_json::Value;

    use crate::runtime::route_health::HealthSettings;

    pub(super) fn serialize<S: Serializer>(
        health: &Option<HealthSettings>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        health.as_ref().map(HealthSettings::to_value).serialize(serializer)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<HealthSettings>, D::Error> {
        match Option::<Value>::deserialize(deserializer)? {
            None => Ok(None),
            Some(value) => HealthSettings::from_value(&value, "routeHealth")
                .map(Some)
                .map_err(D::Error::custom),
        }
    }
}

/// The plugins of the chain, in order, each with how to make it again.
fn plugin_specs(
    config: &StressConfig,
    crashes: &Arc<AtomicU64>,
) -> Result<Vec<PluginSpec>, String> {
    let mut specs = Vec::new();
    if config.rates.crash > 0.0 || config.decide_ms > 0 {
        let (seed, rate, crashes) = (config.seed, config.rates.crash, Arc::clone(crashes));
        let decide = Duration::from_millis(config.decide_ms);
        let make: MakePlugin = Arc::new(move || {
            let flaky = flaky::Flaky::new(seed, rate, decide, Arc::clone(&crashes));
            Ok(BuiltPlugin::strict(Arc::new(flaky)))
        });
        specs.push(PluginSpec { name: flaky::NAME.to_owned(), make });
    }
    for (name, settings) in config.plugin_settings() {
        let Some((_, factory)) = crate::plugins::ALL.iter().find(|(known, _)| *known == name)
        else {
            continue; // not in this build
        };
        let factory = *factory;
        factory(&settings).map_err(|e| format!("{name}: {e}"))?;
        let make: MakePlugin = Arc::new(move || factory(&settings).map_err(|e| e.to_string()));
        specs.push(PluginSpec { name: name.to_owned(), make });
    }
    Ok(specs)
}

/// Reads back the log of every agent of a run of `agents` agents, in id order, and hands it to
/// `each`; returns how many other logs the store holds (not this run's to judge).
async fn each_log(
    store: &dyn SessionStore,
    agents: usize,
    mut each: impl FnMut(&str, &[crate::runtime::event::Envelope]),
) -> Result<u64, String> {
    let mut other_logs = 0;
    let mut sessions = store.sessions().await.map_err(|e| format!("cannot list the logs: {e}"))?;
    sessions.sort();
    for session in sessions {
        if !agent::is_agent_session(&session, agents) {
            other_logs += 1;
            continue;
        }
        let loaded = store.load(&session).await.map_err(|e| format!("{session}: {e}"))?;
        each(&session, &loaded.map(|l| l.events).unwrap_or_default());
    }
    Ok(other_logs)
}

/// Collects the reports of the agents that end within `within` into `reports`; those still
/// running then are aborted (they were hung).
async fn gather<R: 'static>(agents: &mut JoinSet<R>, within: Duration, reports: &mut Vec<R>) {
    let joined = tokio::time::timeout(within, async {
        while let Some(joined) = agents.join_next().await {
            if let Ok(report) = joined {
                reports.push(report);
            }
        }
    });
    if joined.await.is_err() {
        agents.abort_all();
    }
}

/// The runtime of a run, not yet built: the simulated route (behind [`Down`] when the run
/// watches its route), the run's clock and jitter, the `pause` tool when answers call it, and
/// the chain ([`plugin_specs`], kept so that plugins can be made again).
struct Unbuilt {
    builder: RuntimeBuilder,
    specs: Vec<PluginSpec>,
    down: Option<Arc<Down>>,
    clock: Arc<dyn Clock>,
}

/// A run's runtime, built, with what the run keeps of its making.
struct Built {
    runtime: Runtime,
    specs: Vec<PluginSpec>,
    down: Option<Arc<Down>>,
    clock: Arc<dyn Clock>,
}

impl Unbuilt {
    fn new(
        config: &StressConfig,
        store: Arc<dyn SessionStore>,
        crashes: &Arc<AtomicU64>,
    ) -> Result<Self, String> {
        let simulated = Simulated::new(config.simulated()).map_err(|e| e.to_string())?;
        let specs = plugin_specs(config, crashes)?;
        let clock: Arc<dyn Clock> = match config.virtual_clock {
            true => Arc::new(VirtualClock::start()),
            false => Arc::new(WallClock),
        };
        // The simulated provider as it is, unless the run watches its route: then behind `Down`.
        let down = (config.outage.is_some() || config.route_health.is_some())
            .then(|| Arc::new(Down::new(simulated.clone(), config.outage, Arc::clone(&clock))));
        let adapter: Arc<dyn Adapter> = match &down {
            Some(down) => Arc::clone(down) as Arc<dyn Adapter>,
            None => Arc::new(simulated.clone()),
        };
        let route =
            Route::new(ROUTE, adapter).model(simulated.model()).health(config.route_health.clone());
        let mut builder = Runtime::builder()
            .store(store)
            .clock(Arc::clone(&clock))
            .route(route)
            .jitter(Arc::new(jitter::StressJitter::new(config.seed)));
        if config.rates.tool > 0.0 {
            let pause = pause::Pause::new(Duration::from_millis(config.tool_ms));
            builder = builder.tool(Arc::new(pause));
        }
        for spec in &specs {
            builder = builder.plugin((spec.make)()?);
        }
        Ok(Self { builder, specs, down, clock })
    }

    /// Builds the runtime; an outage's window then follows the route's breaker.
    async fn build(self, config: &StressConfig) -> Result<Built, String> {
        let runtime = self.builder.build().await.map_err(|e| e.to_string())?;
        if let (Some(down), Some(changes), Some(health)) =
            (&self.down, runtime.route_health_changes(ROUTE), &config.route_health)
        {
            down.watch(changes, health.open_ms());
        }
        Ok(Built { runtime, specs: self.specs, down: self.down, clock: self.clock })
    }
}

/// The runtime a node of `rein stress --nodes` serves (`rein node` with the run's workload): the
/// one [`run`] builds from `config` — the simulated provider of its pace and faults, its chain,
/// its jitter, its tool — on the node's `store` and `placement`. Returns it with each plugin's
/// settings as built (what a console shows as their source).
pub async fn node_runtime(
    config: &StressConfig,
    store: Arc<dyn SessionStore>,
    placement: Placement,
) -> Result<(Runtime, BTreeMap<String, Value>), String> {
    config.check()?;
    let mut unbuilt = Unbuilt::new(config, store, &Arc::new(AtomicU64::new(0)))?;
    unbuilt.builder = unbuilt.builder.placement(placement);
    let runtime = unbuilt.build(config).await?.runtime;
    let built = config
        .plugin_settings()
        .into_iter()
        .filter(|(name, _)| runtime.plugins().iter().any(|n| n == name))
        .map(|(name, settings)| (name.to_owned(), settings))
        .collect();
    Ok((runtime, built))
}

/// Runs a stress run on `store` and reports it: agents, then shutdown, then every log read back
/// and checked. `acks` receives `(session, seq)` for every event the run saw acknowledged.
/// The summary's `ok` is not settled, and its `store` and `logs` are left for the caller to
/// name; an `Err` is a run that could not start or whose logs could not be read.
pub async fn run(
    config: &StressConfig,
    store: Arc<dyn SessionStore>,
    acks: Option<acks::AckSender>,
) -> Result<Summary, String> {
    config.check()?;
    let crashes = Arc::new(AtomicU64::new(0));
    let Built { runtime, specs, down, clock } =
        Unbuilt::new(config, Arc::clone(&store), &crashes)?.build(config).await?;
    // What an earlier run (killed) left open in this run's sessions is resumed before the
    // agents start; other logs in the store are not this run's (see the tally below).
    let agents = config.agents;
    let pending = runtime
        .resume_pending_of(|id| agent::is_agent_session(id, agents))
        .await
        .map_err(|e| format!("cannot resume: {e}"))?;
    // A session that could not be resumed is one whose log does not open: an agent's session
    // then fails its own open (an agent error); another is not this run's to judge.
    for failed in &pending.failed {
        tracing::warn!(session = %failed.session, error = %failed.error, "cannot resume");
    }

    let latency = Duration::from_millis(config.latency_ms);
    let backoff = Duration::from_millis(config.backoff_ms);
    let total_turns = config.agents as u64 * u64::from(config.turns);
    let shared = Arc::new(Shared {
        runtime: runtime.clone(),
        seed: config.seed,
        turns: config.turns,
        rates: config.rates,
        think_ms: config.think_ms,
        cancel_window: plan::cancel_window(latency, backoff),
        progress: if config.progress {
            progress::Progress::new(total_turns)
        } else {
            progress::Progress::hidden()
        },
        watch: Watch::new(config.agents),
    });
    let (requests, chaos_requests) = mpsc::unbounded_channel();
    let (stop, stopped) = watch::channel(false);
    let chaos = Chaos {
        runtime: runtime.clone(),
        specs,
        rng: plan::chaos_rng(config.seed),
        away: latency * 5,
        backoff_ms: config.backoff_ms,
    };
    let chaos = tokio::spawn(chaos.run(chaos_requests, stopped));

    let read_cpu_ms =
        || std::fs::read_to_string("/proc/self/stat").ok().and_then(|s| summary::cpu_ms(&s));
    let (started, cpu_before) = (Instant::now(), read_cpu_ms());
    let start_ms = clock.now_ms();
    let outage_window = down.as_ref().and_then(|down| down.start());
    let mut agents = JoinSet::new();
    for index in 0..config.agents {
        let task = agent::run(Arc::clone(&shared), index, requests.clone(), acks.clone());
        agents.spawn(task);
    }
    drop(requests);

    let deadline = Duration::from_millis(config.hang_deadline_ms);
    let mut reports = Vec::with_capacity(config.agents);
    let mut hung = Vec::new();
    loop {
        // Quiet with no turn running: every agent thinks (`--think-ms`), nothing is hung.
        let nap = deadline.checked_sub(shared.watch.quiet_for()).filter(|d| !d.is_zero());
        tokio::select! {
            joined = agents.join_next() => match joined {
                Some(Ok(report)) => reports.push(report),
                Some(Err(error)) => reports.push(AgentReport::failed(format!("an agent task failed: {error}"))),
                None => break,
            },
            () = tokio::time::sleep(nap.unwrap_or(deadline)) => {
                if shared.watch.quiet_for() >= deadline {
                    hung = shared.watch.running();
                    if !hung.is_empty() {
                        break;
                    }
                }
            }
        }
    }
    let elapsed = started.elapsed();
    let cpu_ms = read_cpu_ms().zip(cpu_before).map(|(after, before)| after.saturating_sub(before));
    let history = runtime.route_health_history(ROUTE);
    shared.watch.stop();
    let _ = stop.send(true);
    shared.progress.finish();

    // Disposals in flight finish (their plugins come back) before shutdown.
    let plugins = match tokio::time::timeout(deadline, chaos).await {
        Ok(Ok(report)) => report,
        _ => summary::PluginChaos::default(),
    };
    let shutdown_finished = tokio::time::timeout(deadline, runtime.shutdown()).await.is_ok();
    // Agents whose turns shutdown ended.
    gather(&mut agents, deadline, &mut reports).await;
    let census = runtime.census();
    let leaks = Leaks {
        actors: census.actors() as u64,
        tasks: census.tasks() as u64,
        tree: census
            .tree()
            .into_iter()
            .map(|(kind, n)| (actor_kind(kind).to_owned(), n as u64))
            .collect(),
        shutdown_finished,
    };
    // Read before the logs are loaded: the peak of the run, not of the check.
    let peak_rss_kib = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| summary::peak_rss_kib(&status));

    // Only the logs this run opened are judged; others in the store are left alone.
    let mut tally = Tally::default();
    let mut route_tally = RouteTally::new(outage_window.as_ref().map(|window| window.end));
    let other_logs = each_log(&*store, config.agents, |session, events| {
        tally.add_log(session, events);
        route_tally.add_log(events);
    })
    .await?;

    let mut latencies = Latencies::default();
    let mut cancellations = Cancellations::default();
    let mut errors = summary::Errors::default();
    for report in &reports {
        for latency in &report.latencies {
            latencies.record(*latency);
        }
        cancellations.requested += report.requested;
        cancellations.landed += report.landed;
        errors.merge(&report.errors);
    }
    cancellations.latency = latencies.summary();
    let plugins =
        summary::PluginChaos { crashes_injected: crashes.load(Ordering::Relaxed), ..plugins };
    let hung_turns = hung
        .iter()
        .take(LISTED)
        .map(|(agent, turn)| HungTurn { session: session_id(*agent), turn: *turn })
        .collect();
    Ok(Summary {
        ok: false,
        agents: config.agents as u64,
        turns_per_agent: u64::from(config.turns),
        seed: config.seed,
        store: String::new(),
        logs: None,
        elapsed_ms: elapsed.as_millis() as u64,
        cpu_ms,
        hang_deadline_ms: config.hang_deadline_ms,
        tally,
        other_logs,
        resumed: pending.resumed.len() as u64,
        agent_errors: errors.count,
        agent_error_examples: errors.examples,
        hung: hung.len() as u64,
        hung_turns,
        cancellations,
        plugins,
        route: route_summary(config, &route_tally, history.as_ref(), down.as_deref(), start_ms),
        leaks,
        peak_rss_kib,
        acks_error: None,
        cluster: None,
    })
}

/// The name of the run's route.
pub const ROUTE: &str = "simulated";

/// What the run reports of its route: the logs' tally, the outage, the breaker's history (its
/// times from the agents' start, `start_ms`), the requests the provider saw while it was open.
fn route_summary(
    config: &StressConfig,
    tally: &RouteTally,
    history: Option<&HealthHistory>,
    down: Option<&Down>,
    start_ms: u64,
) -> RouteSummary {
    let since_start = |ms: u64| ms.saturating_sub(start_ms);
    let breaker = history.map(|history| BreakerSummary {
        opened: history.opened(),
        closed: history.closed(),
        first_opened_ms: history
            .changes()
            .find(|c| c.to == BreakerState::Open)
            .map(|c| since_start(c.at_ms)),
        last_closed_ms: history
            .changes()
            .rev()
            .find(|c| c.to == BreakerState::Closed)
            .map(|c| since_start(c.at_ms)),
    });
    RouteSummary {
        name: ROUTE.to_owned(),
        health: config
            .route_health
            .as_ref()
            .map_or_else(|| Value::String("off".into()), HealthSettings::to_value),
        outage: config.outage.map(|o| OutageWindow { at_ms: o.at_ms, ms: o.ms }),
        attempts: tally.attempts,
        requests: tally.requests(),
        short_circuited: tally.short_circuited,
        throttled: tally.throttled,
        failed_turns: tally.failed_turns,
        requests_of_failed_turns: tally.requests_of_failed_turns,
        retry_amplification: tally.retry_amplification(),
        requests_while_open: config.route_health.as_ref().and(down).map(Down::requests_while_open),
        breaker,
        recovery_ms: tally.recovery_ms(),
    }
}

fn actor_kind(kind: ActorKind) -> &'static str {
    match kind {
        ActorKind::Root => "root",
        ActorKind::PluginHost => "plugin-host",
        ActorKind::Plugin => "plugin",
        ActorKind::Provider => "provider",
        ActorKind::Session => "session",
        ActorKind::SessionLog => "session-log",
        ActorKind::Turn => "turn",
        ActorKind::Step => "step",
        _ => "other",
    }
}
