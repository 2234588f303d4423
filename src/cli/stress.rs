//! `rein stress`: many concurrent agents on the simulated provider, with random turn
//! cancellations, plugin disposals and registrations, run-time settings changes, plugin crashes
//! and provider faults — then every guarantee checked: every log against the invariants, every
//! turn ended, nothing left alive after shutdown. Output and exit status: [`STRESS_HELP`]; the
//! decisions behind them are in `docs/runtime-semantics.md` ("rein stress").
//!
//! - `plan`: the seeded decisions (what each turn does, the fault split, settings patches).
//! - `summary`: the logs' tally, latency percentiles, the verdict, the text and JSON output.
//! - `agent`: one agent's turns; the watch that finds hung turns.
//! - `chaos`: the task that disposes, registers and reconfigures plugins.
//! - `flaky`: the plugin that crashes on purpose (`--crash-rate`).
//! - `jitter`: the plugins' jitter samples (from the seed) and retry ids (never repeated).
//! - `progress`, `acks`: what goes to standard error and to the acknowledgement side channel.
//!
//! # Why real time
//!
//! A stress run is about what the runtime does under real concurrency: many sessions' actors
//! and tasks on the worker threads at once, real stores, real cancellation races. On a paused
//! clock every wait would complete in order on one thread. So the simulated provider runs on
//! the wall clock, with small latencies (`--latency-ms`, `--backoff-ms`) so a run of thousands
//! of agents takes seconds.
//!
//! # Why a hung turn is judged after the run
//!
//! A turn may legitimately run for a while (faults, retries, waits), and while other agents
//! are busy, one slow turn is not a hang. The run is over when turns stop ending; a turn still
//! running `--hang-deadline-ms` after the last one ended will never end on its own. The run
//! then stops (no agent starts another turn), lists those turns, and shuts the runtime down —
//! which must still end them and leave nothing alive.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rein::providers::{Simulated, SimulatedConfig};
use rein::runtime::census::ActorKind;
use rein::runtime::plugin::BuiltPlugin;
use rein::runtime::runtime::{Route, Runtime};
use rein::runtime::store::jsonl::JsonlStore;
use rein::runtime::store::memory::MemoryStore;
use rein::runtime::store::sqlite::SqliteStore;
use rein::runtime::store::{Durability, SessionStore};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use super::output_file;

mod acks;
mod agent;
mod chaos;
mod flaky;
mod jitter;
mod plan;
mod progress;
mod summary;

use agent::{AgentReport, Shared, Watch, session_id};
use chaos::{Chaos, MakePlugin, PluginSpec};
use plan::Rates;
use summary::{Cancellations, HungTurn, LISTED, Latencies, Leaks, Summary, Tally};

/// What `rein stress --help` says after the options.
pub(crate) const STRESS_HELP: &str = "\
What runs:
  AGENTS sessions at once on one runtime, each running TURNS turns one after another on the
  simulated provider (its faults: 40 % rate limits with a Retry-After, 30 % server errors,
  20 % dropped connections, 10 % stalls ended by a watchdog, of --fault-rate). The chain is
  flaky (with --crash-rate > 0: panics on that share of the failures it is offered), llm-retry,
  and compaction and auto-retry when the build has them. Per turn, with its rate: the turn is
  cancelled at a random moment; a plugin is disposed and registered again a moment later; a
  plugin with run-time settings gets a patch (one in ten on a stale revision, which must be
  refused). All random choices come from --seed; the interleaving is the scheduler's.

Checked at the end:
  every session log against every invariant (as a finished log); every turn ended (a turn
  still running --hang-deadline-ms after the last turn ended is hung: the run stops there and
  shuts down); no actor and no task of the runtime alive after shutdown.

Output:
  stdout   a summary: turns by outcome (errors by code, aborts by cause), retries by plugin
           (the logs' llm/retry events), cancellations and their latency from the cancel call
           to the turn's durable turn/end (p50, p99, max), plugin disposals, registrations,
           removals and restarts (plugin/crashed), settings patches by result, invariant
           violations (the first 10 named), hung turns, actors and tasks alive after shutdown,
           peak RSS; the last line is `ok` or `FAILED: <why>`. With --json, one JSON object on
           one line instead (`ok`, `tally`, `cancellations`, `plugins`, `hung`, `leaks`,
           `peakRssKib`, ...). With --acks -, the ack lines come first.
  stderr   progress: a bar on a terminal, else a line at each tenth of the turns; `error: ...`.
  --acks   one line `ack SESSION SEQ` per event the run saw acknowledged by its log (durable
           at the store's durability), as it happens; `-` is stdout.

Stores:
  memory (default), or jsonl / sqlite in --dir DIR (created owner-only if missing; without it,
  a new directory rein-stress-XXXXXX in the temporary directory, kept and named in the
  summary; sqlite writes DIR/stress.db). Sessions are agent-00000, agent-00001, ...; a DIR that
  already holds them is reopened (a turn a crash left open is closed interrupted) and continued.

Exit status:
  0  every guarantee held
  1  an invariant violation, a hung turn, an actor or task alive after shutdown, a session
     that would not open, a prompt that could not start, or an internal fault
  2  a usage error (an invalid rate, --dir with the memory store, ...) or a store that cannot
     be opened";

/// The store a run writes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum StoreKind {
    /// In memory (nothing is kept).
    Memory,
    /// A JSONL file per session in --dir.
    Jsonl,
    /// One SQLite database, --dir/stress.db.
    Sqlite,
}

/// How durable an acknowledged append is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum DurabilityArg {
    /// Handed to the operating system (survives a crash of the process).
    Os,
    /// Synced to the disk before the acknowledgement (survives a power loss).
    Disk,
}

/// Arguments of `rein stress`.
#[derive(Debug, clap::Args)]
pub(crate) struct StressArgs {
    /// Concurrent agents (sessions).
    #[arg(long, default_value_t = 100, value_name = "N")]
    agents: usize,
    /// Turns per agent, one after another.
    #[arg(long, default_value_t = 3, value_name = "T")]
    turns: u32,
    /// Share of turns cancelled at a random moment (within 2 × latency + 4 × backoff of the
    /// prompt).
    #[arg(long, default_value_t = 0.1, value_name = "P")]
    cancel_rate: f64,
    /// Share of turns that dispose a random plugin (registered again within 5 × latency).
    #[arg(long, default_value_t = 0.002, value_name = "P")]
    dispose_rate: f64,
    /// Share of turns that change a random plugin's run-time settings.
    #[arg(long, default_value_t = 0.01, value_name = "P")]
    config_rate: f64,
    /// Share of provider attempts that fail.
    #[arg(long, default_value_t = 0.2, value_name = "P")]
    fault_rate: f64,
    /// Share of failures on which the `flaky` plugin panics (0: no flaky plugin).
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    crash_rate: f64,
    /// The seed of every random choice.
    #[arg(long, default_value_t = 0, value_name = "S")]
    seed: u64,
    /// Where the session logs go.
    #[arg(long, value_enum, default_value_t = StoreKind::Memory)]
    store: StoreKind,
    /// The directory of a jsonl or sqlite store.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// The durability of a jsonl or sqlite store.
    #[arg(long, value_enum, default_value_t = DurabilityArg::Os)]
    durability: DurabilityArg,
    /// The simulated provider's longest wait before its first word (each attempt draws within
    /// 0..=MS).
    #[arg(long, default_value_t = 10, value_name = "MS")]
    latency_ms: u64,
    /// The plugins' first backoff (llm-retry and auto-retry; their ceiling is 20 ×), and a
    /// quarter of the longest Retry-After the simulated 429s send.
    #[arg(long, default_value_t = 5, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    backoff_ms: u64,
    /// How long a simulated stall lasts before its watchdog fails it `TIMEOUT`.
    #[arg(long, default_value_t = 100, value_name = "MS")]
    stall_ms: u64,
    /// A turn still running this long after the last turn ended is hung.
    #[arg(long, default_value_t = 30_000, value_name = "MS")]
    hang_deadline_ms: u64,
    /// Write `ack SESSION SEQ` per acknowledged event to PATH (`-`: stdout).
    #[arg(long, value_name = "PATH")]
    acks: Option<PathBuf>,
    /// Print the summary as one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

const FAILED: u8 = 1;
const USAGE: u8 = 2;

/// Runs `rein stress`.
pub(crate) fn run(args: &StressArgs) -> ExitCode {
    let rates = Rates {
        cancel: args.cancel_rate,
        dispose: args.dispose_rate,
        config: args.config_rate,
        fault: args.fault_rate,
        crash: args.crash_rate,
    };
    if let Err(error) = rates.check().and_then(|()| check_args(args)) {
        eprintln!("error: {error}");
        return ExitCode::from(USAGE);
    }
    let (store, logs) = match open_store(args) {
        Ok(opened) => opened,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(USAGE);
        }
    };
    let acks = match args.acks.as_deref().map(acks::Acks::open).transpose() {
        Ok(acks) => acks,
        Err(error) => {
            eprintln!("error: --acks: {error}");
            return ExitCode::from(USAGE);
        }
    };
    let tokio = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(tokio) => tokio,
        Err(error) => {
            eprintln!("error: cannot start tokio: {error}");
            return ExitCode::from(FAILED);
        }
    };
    let summary = tokio.block_on(stress(args, rates, store, acks.as_ref()));
    // Nothing of the run is left to wait for (shutdown waited for every task it tracks).
    tokio.shutdown_timeout(Duration::from_secs(1));
    if let Some(acks) = acks {
        if let Err(error) = acks.close() {
            eprintln!("error: --acks: {error}");
        }
    }
    let summary = match summary {
        Ok(summary) => Summary { logs: logs.map(|p| p.display().to_string()), ..summary }.settle(),
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(FAILED);
        }
    };
    if args.json {
        match serde_json::to_string(&summary) {
            Ok(line) => println!("{line}"),
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::from(FAILED);
            }
        }
    } else {
        print!("{}", summary.text());
    }
    if summary.ok { ExitCode::SUCCESS } else { ExitCode::from(FAILED) }
}

fn check_args(args: &StressArgs) -> Result<(), String> {
    if args.agents == 0 {
        return Err("--agents: must be at least 1".into());
    }
    if args.store == StoreKind::Memory {
        if args.dir.is_some() {
            return Err("--dir: only for the jsonl and sqlite stores".into());
        }
        if args.durability != DurabilityArg::Os {
            return Err("--durability: only for the jsonl and sqlite stores".into());
        }
    }
    Ok(())
}

/// The store, and where its logs are (durable stores).
fn open_store(args: &StressArgs) -> Result<(Arc<dyn SessionStore>, Option<PathBuf>), String> {
    let durability = match args.durability {
        DurabilityArg::Os => Durability::Os,
        DurabilityArg::Disk => Durability::Disk,
    };
    if args.store == StoreKind::Memory {
        return Ok((Arc::new(MemoryStore::new()), None));
    }
    let dir = match &args.dir {
        Some(dir) => output_file::private_dir(dir).map(|()| dir.clone()),
        None => output_file::fresh_dir(&std::env::temp_dir(), "rein-stress-"),
    }
    .map_err(|e| format!("cannot use the log directory: {e}"))?;
    Ok(match args.store {
        StoreKind::Jsonl => {
            let store = JsonlStore::open(&dir, durability).map_err(|e| e.to_string())?;
            (Arc::new(store), Some(dir))
        }
        _ => {
            let db = dir.join("stress.db");
            let store = SqliteStore::open(&db, durability).map_err(|e| e.to_string())?;
            (Arc::new(store), Some(db))
        }
    })
}

/// The plugins of the chain, in order, each with how to make it again.
fn plugin_specs(args: &StressArgs, crashes: &Arc<AtomicU64>) -> Result<Vec<PluginSpec>, String> {
    let backoff = args.backoff_ms;
    let configs: [(&str, Value); 3] = [
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
    ];
    let mut specs = Vec::new();
    if args.crash_rate > 0.0 {
        let (seed, rate, crashes) = (args.seed, args.crash_rate, Arc::clone(crashes));
        let make: MakePlugin = Arc::new(move || {
            let flaky = flaky::Flaky::new(seed, rate, Arc::clone(&crashes));
            Ok(BuiltPlugin::strict(Arc::new(flaky)))
        });
        specs.push(PluginSpec { name: flaky::NAME.to_owned(), make });
    }
    for (name, config) in configs {
        let Some((_, factory)) = rein::plugins::ALL.iter().find(|(known, _)| *known == name) else {
            continue; // not in this build
        };
        let factory = *factory;
        factory(&config).map_err(|e| format!("{name}: {e}"))?;
        let make: MakePlugin = Arc::new(move || factory(&config).map_err(|e| e.to_string()));
        specs.push(PluginSpec { name: name.to_owned(), make });
    }
    Ok(specs)
}

async fn stress(
    args: &StressArgs,
    rates: Rates,
    store: Arc<dyn SessionStore>,
    acks: Option<&acks::Acks>,
) -> Result<Summary, String> {
    let faults = plan::fault_model(args.fault_rate);
    let simulated = Simulated::new(SimulatedConfig {
        seed: args.seed,
        rate_limit_rate: faults.rate_limit,
        retry_after_ms: 1..=args.backoff_ms * 4,
        server_error_rate: faults.server_error,
        drop_rate: faults.drop,
        stall_rate: faults.stall,
        first_chunk_latency_ms: 0..=args.latency_ms,
        chunk_latency_ms: 0..=0,
        idle_timeout: Some(Duration::from_millis(args.stall_ms)),
        ..SimulatedConfig::default()
    })
    .map_err(|e| e.to_string())?;
    let crashes = Arc::new(AtomicU64::new(0));
    let specs = plugin_specs(args, &crashes)?;
    let mut builder = Runtime::builder()
        .store(Arc::clone(&store))
        .route(Route::new("simulated", Arc::new(simulated.clone())).model(simulated.model()))
        .jitter(Arc::new(jitter::StressJitter::new(args.seed)));
    for spec in &specs {
        builder = builder.built((spec.make)()?);
    }
    let runtime = builder.build().await.map_err(|e| e.to_string())?;

    let latency = Duration::from_millis(args.latency_ms);
    let backoff = Duration::from_millis(args.backoff_ms);
    let shared = Arc::new(Shared {
        runtime: runtime.clone(),
        seed: args.seed,
        turns: args.turns,
        rates,
        cancel_window: (latency * 2 + backoff * 4).max(Duration::from_millis(1)),
        progress: progress::Progress::new(args.agents as u64 * u64::from(args.turns)),
        watch: Watch::new(args.agents),
    });
    let (requests, chaos_requests) = mpsc::unbounded_channel();
    let (stop, stopped) = watch::channel(false);
    let chaos = Chaos {
        runtime: runtime.clone(),
        specs,
        rng: plan::chaos_rng(args.seed),
        away: latency * 5,
        backoff_ms: args.backoff_ms,
    };
    let chaos = tokio::spawn(chaos.run(chaos_requests, stopped));

    let started = Instant::now();
    let mut agents = JoinSet::new();
    for index in 0..args.agents {
        let task =
            agent::run(Arc::clone(&shared), index, requests.clone(), acks.map(|a| a.sender()));
        agents.spawn(task);
    }
    drop(requests);

    let deadline = Duration::from_millis(args.hang_deadline_ms);
    let mut reports = Vec::with_capacity(args.agents);
    let mut hung = Vec::new();
    loop {
        let quiet = shared.watch.quiet_for();
        tokio::select! {
            joined = agents.join_next() => match joined {
                Some(Ok(report)) => reports.push(report),
                Some(Err(error)) => reports.push(AgentReport::failed(format!("an agent task failed: {error}"))),
                None => break,
            },
            () = tokio::time::sleep(deadline.saturating_sub(quiet)) => {
                if shared.watch.quiet_for() >= deadline {
                    hung = shared.watch.running();
                    break;
                }
            }
        }
    }
    let elapsed = started.elapsed();
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
    if tokio::time::timeout(deadline, async {
        while let Some(joined) = agents.join_next().await {
            if let Ok(report) = joined {
                reports.push(report);
            }
        }
    })
    .await
    .is_err()
    {
        agents.abort_all();
    }
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

    let mut tally = Tally::default();
    let mut sessions = store.sessions().await.map_err(|e| format!("cannot list the logs: {e}"))?;
    sessions.sort();
    for session in sessions {
        let loaded = store.load(&session).await.map_err(|e| format!("{session}: {e}"))?;
        tally.add_log(&session, &loaded.map(|l| l.events).unwrap_or_default());
    }

    let mut latencies = Latencies::default();
    let mut cancellations = Cancellations::default();
    let (mut agent_errors, mut agent_error_examples) = (0, Vec::new());
    for report in &reports {
        for latency in &report.latencies {
            latencies.record(*latency);
        }
        cancellations.requested += report.requested;
        cancellations.landed += report.landed;
        agent_errors += report.errors;
        for example in &report.error_examples {
            if agent_error_examples.len() < LISTED {
                agent_error_examples.push(example.clone());
            }
        }
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
        agents: args.agents as u64,
        turns_per_agent: u64::from(args.turns),
        seed: args.seed,
        store: store_name(args.store).to_owned(),
        logs: None,
        elapsed_ms: elapsed.as_millis() as u64,
        tally,
        agent_errors,
        agent_error_examples,
        hung: hung.len() as u64,
        hung_turns,
        cancellations,
        plugins,
        leaks,
        peak_rss_kib: std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| summary::peak_rss_kib(&status)),
    })
}

fn store_name(store: StoreKind) -> &'static str {
    match store {
        StoreKind::Memory => "memory",
        StoreKind::Jsonl => "jsonl",
        StoreKind::Sqlite => "sqlite",
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
