//! `rein stress`: the command-line shell over the stress engine (`rein_cli::stress`): its flags,
//! the store it opens, how it prints the summary and its exit status ([`STRESS_HELP`]). What a
//! run does and checks is the engine's; the decisions behind the output are in
//! `docs/runtime-semantics.md` ("rein stress").

use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use rein::runtime::route_health::HealthSettings;
use rein::runtime::store::jsonl::JsonlStore;
use rein::runtime::store::memory::MemoryStore;
use rein::runtime::store::postgres::PostgresStore;
use rein::runtime::store::sqlite::SqliteStore;
use rein::runtime::store::{Durability, SessionStore};
use rein_cli::stress::outage::Outage;
use rein_cli::stress::plan::Rates;
use rein_cli::stress::summary::Summary;
use rein_cli::stress::{StressConfig, acks, cluster, limits};

use super::output_file;

mod open_files;

/// What `rein stress --help` says after the options.
pub(crate) const STRESS_HELP: &str = "\
What runs:
  AGENTS sessions at once on one runtime, each running TURNS turns one after another on the
  simulated provider (its faults: 40 % rate limits with a Retry-After, 30 % server errors,
  20 % dropped connections, 10 % stalls ended by a watchdog, of --fault-rate). The chain is
  flaky (with --crash-rate > 0 or --decide-ms > 0: it takes --decide-ms over every failure it
  is offered, and panics on --crash-rate of them), llm-retry, and compaction and auto-retry
  when the build has them. Per turn, with its rate: the turn is cancelled at a random moment;
  a plugin is disposed and registered again a moment later; a plugin with run-time settings
  gets a patch (one in ten on a stale revision, which must be refused). With --tool-rate > 0,
  the pause tool (taking --tool-ms) is offered and that share of the turns' answers call it.
  With --think-ms, each agent waits before each of its turns (drawn within [MS/2, 3 MS/2]).
  All random choices come from --seed; the interleaving is the scheduler's.

Outage and route health:
  With --outage-ms, the simulated provider fails every request with a 503 (SERVER) for that
  long, from --outage-at-ms after the agents start (0 by default); give the run a pace
  (--think-ms) and turns enough to span it. The route (`simulated`) has route health (a retry
  budget and a circuit breaker shared by every session, see docs/runtime-semantics.md) as
  --route-health says: off, on (the defaults: maxTokens 10, tokenRatio 0.1, windowMs 10000,
  failureRatio 0.5, minAttempts 20, openMs 30000, probes 1), or a JSON object of some of those
  keys ('{\"openMs\": 5000}'); on by default with --outage-ms, off otherwise. The summary's
  `route` line counts attempts, the requests sent, those the breaker short-circuited
  (CIRCUIT_OPEN) and the retries the spent budget declined (retry/throttled), and the requests
  per failed turn (retry amplification); with route health, how often the breaker opened and
  closed and the requests that reached the provider while it was open (0: a short-circuited
  attempt sends none); with an outage, how long after it the route served every attempt again.

Checked at the end:
  every session log this run opened against every invariant (as a finished log; other logs in
  --dir are left alone and counted); every turn ended (a turn still running --hang-deadline-ms
  after the last turn ended is hung: the run stops there and shuts down); no actor and no task
  of the runtime alive after shutdown.

Limits:
  --agents and --turns [1, 1000000], --latency-ms [0, 600000], --backoff-ms [1, 100000],
  --stall-ms [0, 3600000], --tool-ms and --decide-ms [0, 600000], --think-ms [0, 3600000],
  --outage-ms [1, 86400000], --outage-at-ms [0, 86400000], --hang-deadline-ms
  [1, 604800000] (default with --nodes: ten leases more), --nodes [1, 32], --lease-ms
  [100, 600000], --partitions [1, 65536], the rates [0, 1]; a value outside
  (or not a number) is a usage error naming the flag, the value and the range.

Output:
  stdout   a summary: turns by outcome (errors by code, aborts by cause), retries by plugin
           (the logs' llm/retry events), cancellations and their latency from the cancel call
           to the turn's durable turn/end (p50, p99, max), plugin disposals, registrations,
           removals and restarts (plugin/crashed), settings patches by result, invariant
           violations (the first 10 named), hung turns, actors and tasks alive after shutdown,
           the route, the breaker and the outage (above), peak RSS; the last line is `ok` or
           `FAILED: <why>`. With --json, one JSON object on one line instead (`ok`, `tally`,
           `cancellations`, `plugins`, `route` with `retryAmplification`, `hung`, `leaks`,
           `peakRssKib`, ...). With --acks -, the ack lines come first.
  stderr   progress: a bar on a terminal, else a line at each tenth of the turns; `error: ...`.
  --acks   one line `ack SESSION SEQ` per event the run saw acknowledged by its log (durable
           at the store's durability), as it happens; `-` is stdout.

Stores:
  memory (default), or jsonl / sqlite in --dir DIR (created owner-only if missing; without it,
  a new directory rein-stress-XXXXXX in the temporary directory, kept and named in the
  summary; sqlite writes DIR/stress.db), or postgres in the database --url URL (its password,
  from the URL or PGPASSWORD, is never printed). Sessions are agent-00000, agent-00001, ...; a
  store that already holds them is reopened and continued: every one of them a crash left with
  an open turn is resumed at start (the summary's `resumed`), before the agents begin.

Several nodes (--nodes N):
  The agents run through N `rein node` processes (this program, on free loopback ports) over
  the postgres store of --url, a database of the run's own: each node serves the same runtime
  (the simulated provider of this pace and faults, this chain), holds a share of the sessions'
  partitions on leases of --lease-ms, and serves any session (a request for a session another
  node serves is forwarded there). Three requests in four go to a node that does not serve
  their session; a cancel goes through the node of its turn. At each turn's end, from --seed:
  --node-kill-rate kills a node (kill -9) and starts it again 1 to 2 leases later;
  --node-pause-rate stops one (SIGSTOP) for 1.5 to 2.5 leases, then continues it;
  --pg-restart-rate runs --pg-restart (the database restarted). Faults run one at a time; those
  still waiting when the last turn ended are not run (counted). A turn whose node went away is
  followed to its end through another node. --dispose-rate does not apply (a node's plugins are
  not disposed through its API); settings changes go through a random node.
  Checked at the end, besides every log: no turn ran on two nodes (the run audits which node
  wrote each event: a trigger on the events table while it runs), every event a node
  acknowledged to the run is in its log, every resumed retry wait kept its retryId, retry
  number and deadline, every node shows the same settings, no turn is left open, every node
  drains and exits 0 on SIGTERM. --json adds `cluster`: faults, takeovers, fenced appends,
  resumed turns and their delay, the takeover time after a kill (lease expiry to the first
  resumed write), cancellation latency through a node not serving the session against the node
  serving it, turns per second.

Exit status:
  0  every guarantee held
  1  an invariant violation, a hung turn, an actor or task alive after shutdown, a session
     that would not open, a prompt that could not start, an --acks file that could not be
     written, or an internal fault
  2  a usage error (a number out of its range, --dir with the memory store, ...), a store that
     cannot be opened, or an --acks file that cannot be created";

/// The store a run writes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum StoreKind {
    /// In memory (nothing is kept).
    Memory,
    /// A JSONL file per session in --dir.
    Jsonl,
    /// One SQLite database, --dir/stress.db.
    Sqlite,
    /// One PostgreSQL database, --url URL.
    Postgres,
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
    #[arg(long, default_value_t = 100, value_name = "N", value_parser = whole(limits::AGENTS))]
    agents: u64,
    /// Turns per agent, one after another.
    #[arg(long, default_value_t = 3, value_name = "T", value_parser = whole(limits::TURNS))]
    turns: u64,
    /// Share of turns cancelled at a random moment (within 2 × latency + 4 × backoff of the
    /// prompt).
    #[arg(long, default_value_t = 0.1, value_name = "P", value_parser = rate)]
    cancel_rate: f64,
    /// Share of turns that dispose a random plugin (registered again within 5 × latency).
    #[arg(long, default_value_t = 0.002, value_name = "P", value_parser = rate)]
    dispose_rate: f64,
    /// Share of turns that change a random plugin's run-time settings.
    #[arg(long, default_value_t = 0.01, value_name = "P", value_parser = rate)]
    config_rate: f64,
    /// Share of provider attempts that fail.
    #[arg(long, default_value_t = 0.2, value_name = "P", value_parser = rate)]
    fault_rate: f64,
    /// Share of failures on which the `flaky` plugin panics (0 and no --decide-ms: no flaky
    /// plugin).
    #[arg(long, default_value_t = 0.0, value_name = "P", value_parser = rate)]
    crash_rate: f64,
    /// Share of turns whose answer calls the `pause` tool (0: no tool offered).
    #[arg(long, default_value_t = 0.0, value_name = "P", value_parser = rate)]
    tool_rate: f64,
    /// The seed of every random choice.
    #[arg(long, default_value_t = 0, value_name = "S", value_parser = whole(0..=u64::MAX))]
    seed: u64,
    /// Where the session logs go.
    #[arg(long, value_enum, default_value_t = StoreKind::Memory)]
    store: StoreKind,
    /// The directory of a jsonl or sqlite store.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// The database of the postgres store: postgres://USER[:PASSWORD]@HOST[:PORT]/DB (without a
    /// password, PGPASSWORD's; it is never printed).
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// The durability of a jsonl, sqlite or postgres store [default: os; disk with --nodes].
    #[arg(long, value_enum)]
    durability: Option<DurabilityArg>,
    /// The simulated provider's longest wait before its first word (each attempt draws within
    /// 0..=MS).
    #[arg(long, default_value_t = 10, value_name = "MS", value_parser = whole(limits::LATENCY_MS))]
    latency_ms: u64,
    /// The plugins' first backoff (llm-retry and auto-retry; their ceiling is 20 ×), and a
    /// quarter of the longest Retry-After the simulated 429s send.
    #[arg(long, default_value_t = 5, value_name = "MS", value_parser = whole(limits::BACKOFF_MS))]
    backoff_ms: u64,
    /// How long a simulated stall lasts before its watchdog fails it `TIMEOUT`.
    #[arg(long, default_value_t = 100, value_name = "MS", value_parser = whole(limits::STALL_MS))]
    stall_ms: u64,
    /// How long a call of the `pause` tool takes.
    #[arg(long, default_value_t = 0, value_name = "MS", value_parser = whole(limits::TOOL_MS))]
    tool_ms: u64,
    /// How long the `flaky` plugin takes to decide each failure (above 0: it is in the chain).
    #[arg(long, default_value_t = 0, value_name = "MS", value_parser = whole(limits::DECIDE_MS))]
    decide_ms: u64,
    /// How long each agent thinks before each of its turns, on average (drawn within [MS/2,
    /// 3 MS/2]): a pace of about AGENTS / MS turns per ms.
    #[arg(long, default_value_t = 0, value_name = "MS", value_parser = whole(limits::THINK_MS))]
    think_ms: u64,
    /// The simulated provider fails every request for MS (a 503), from --outage-at-ms.
    #[arg(long, value_name = "MS", value_parser = whole(limits::OUTAGE_MS))]
    outage_ms: Option<u64>,
    /// When the outage starts, in ms after the agents start [default: 0].
    #[arg(long, value_name = "MS", requires = "outage_ms", value_parser = whole(limits::OUTAGE_AT_MS))]
    outage_at_ms: Option<u64>,
    /// The route's health: off, on (the defaults), or a JSON object of its settings (maxTokens,
    /// tokenRatio, windowMs, failureRatio, minAttempts, openMs, probes) [default: on with
    /// --outage-ms, else off].
    #[arg(long, value_name = "off|on|JSON", value_parser = route_health)]
    route_health: Option<RouteHealthArg>,
    /// A turn still running this long after the last turn ended is hung [default: twice the
    /// longest a turn can take at this pace — 7 attempts of --latency-ms + --stall-ms +
    /// --decide-ms, 6 retry waits of 20 × --backoff-ms; twice that and --tool-ms with tools —
    /// and at least 30000].
    #[arg(long, value_name = "MS", value_parser = whole(limits::HANG_DEADLINE_MS))]
    hang_deadline_ms: Option<u64>,
    /// Write `ack SESSION SEQ` per acknowledged event to PATH (`-`: stdout).
    #[arg(long, value_name = "PATH")]
    acks: Option<PathBuf>,
    /// Print the summary as one JSON object on stdout.
    #[arg(long)]
    json: bool,
    /// Run the agents through N `rein node` processes over the postgres store of --url (a
    /// cluster: see "Several nodes" below).
    #[arg(long, value_name = "N", value_parser = whole(cluster::NODES))]
    nodes: Option<u64>,
    /// The nodes' lease (with --nodes) [default: 1000].
    #[arg(long, value_name = "MS", value_parser = whole(cluster::LEASE_MS))]
    lease_ms: Option<u64>,
    /// The cluster's number of partitions, for a database without a cluster yet (with --nodes)
    /// [default: rein node's, 256].
    #[arg(long, value_name = "N", value_parser = whole(1..=65_536))]
    partitions: Option<u64>,
    /// Share of turns whose end kills a node with kill -9 (started again 1 to 2 leases later;
    /// with --nodes).
    #[arg(long, default_value_t = 0.0, value_name = "P", value_parser = rate)]
    node_kill_rate: f64,
    /// Share of turns whose end stops a node with SIGSTOP for 1.5 to 2.5 leases, then SIGCONT
    /// (with --nodes).
    #[arg(long, default_value_t = 0.0, value_name = "P", value_parser = rate)]
    node_pause_rate: f64,
    /// Share of turns whose end restarts the database with --pg-restart (with --nodes).
    #[arg(long, default_value_t = 0.0, value_name = "P", value_parser = rate)]
    pg_restart_rate: f64,
    /// A shell command that restarts the database and returns once it accepts connections
    /// again, e.g. `pg_ctl restart -m immediate -w -D DATADIR` (with --pg-restart-rate).
    #[arg(long, value_name = "COMMAND")]
    pg_restart: Option<String>,
}

const FAILED: u8 = 1;
const USAGE: u8 = 2;

/// Runs `rein stress`.
pub(crate) fn run(args: &StressArgs) -> ExitCode {
    if let Err(error) = check_args(args) {
        eprintln!("error: {error}");
        return ExitCode::from(USAGE);
    }
    let cluster = match cluster_config(args) {
        Ok(cluster) => cluster,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(USAGE);
        }
    };
    let config = StressConfig {
        // In range (checked above).
        agents: usize::try_from(args.agents).unwrap_or(usize::MAX),
        turns: u32::try_from(args.turns).unwrap_or(u32::MAX),
        rates: Rates {
            cancel: args.cancel_rate,
            dispose: args.dispose_rate,
            config: args.config_rate,
            fault: args.fault_rate,
            crash: args.crash_rate,
            tool: args.tool_rate,
        },
        seed: args.seed,
        latency_ms: args.latency_ms,
        backoff_ms: args.backoff_ms,
        stall_ms: args.stall_ms,
        tool_ms: args.tool_ms,
        decide_ms: args.decide_ms,
        think_ms: args.think_ms,
        outage: args.outage_ms.map(|ms| Outage { at_ms: args.outage_at_ms.unwrap_or(0), ms }),
        // With an outage, on unless asked otherwise: the comparison is what the outage is for.
        route_health: match &args.route_health {
            Some(RouteHealthArg(health)) => health.clone(),
            None => args.outage_ms.map(|_| HealthSettings::default()),
        },
        virtual_clock: false,
        hang_deadline_ms: args.hang_deadline_ms.unwrap_or_else(|| {
            let pace = limits::Pace {
                latency_ms: args.latency_ms,
                backoff_ms: args.backoff_ms,
                stall_ms: args.stall_ms,
                tool_ms: (args.tool_rate > 0.0).then_some(args.tool_ms),
                decide_ms: args.decide_ms,
            };
            match &cluster {
                Some(cluster) => cluster.default_hang_deadline_ms(pace),
                None => limits::default_hang_deadline_ms(pace),
            }
        }),
        progress: true,
    };
    if let Err(error) = config.check() {
        eprintln!("error: {error}");
        return ExitCode::from(USAGE);
    }
    let tokio = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(tokio) => tokio,
        Err(error) => {
            eprintln!("error: cannot start tokio: {error}");
            return ExitCode::from(FAILED);
        }
    };
    if let Some(cluster) = cluster {
        return run_cluster(args, &config, &cluster, &tokio);
    }
    let (store, logs) = match open_store(args, config.agents, &tokio) {
        Ok(opened) => opened,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(USAGE);
        }
    };
    let acks_path = args.acks.as_deref().map(|path| path.display().to_string());
    let acks = match args.acks.as_deref().map(acks::Acks::open).transpose() {
        Ok(acks) => acks,
        Err(error) => {
            eprintln!("error: --acks {}: {error}", acks_path.unwrap_or_default());
            return ExitCode::from(USAGE);
        }
    };
    let summary =
        tokio.block_on(rein_cli::stress::run(&config, store, acks.as_ref().map(|a| a.sender())));
    // Nothing of the run is left to wait for (shutdown waited for every task it tracks).
    tokio.shutdown_timeout(Duration::from_secs(1));
    // An ack file that could not be written lacks lines it promised: the run fails.
    let acks_error = acks
        .and_then(|acks| acks.close().err())
        .map(|error| format!("{}: {error}", acks_path.unwrap_or_default()));
    if let Some(error) = &acks_error {
        eprintln!("error: --acks {error}");
    }
    let summary = match summary {
        Ok(summary) => {
            Summary { store: store_name(args.store).to_owned(), logs, acks_error, ..summary }
                .settle()
        }
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(FAILED);
        }
    };
    print_summary(&summary, args.json)
}

/// The cluster of `--nodes`, checked (`None` without it).
fn cluster_config(args: &StressArgs) -> Result<Option<cluster::ClusterConfig>, String> {
    let Some(nodes) = args.nodes else { return Ok(None) };
    let exe = std::env::current_exe()
        .map_err(|e| format!("--nodes: cannot find this program to start its nodes: {e}"))?;
    let config = cluster::ClusterConfig {
        // In range (checked by the parsers).
        nodes: usize::try_from(nodes).unwrap_or(usize::MAX),
        url: args.url.clone().unwrap_or_default(),
        exe,
        lease_ms: args.lease_ms.unwrap_or(DEFAULT_LEASE_MS),
        partitions: args.partitions.map(|p| u32::try_from(p).unwrap_or(u32::MAX)),
        node_kill_rate: args.node_kill_rate,
        node_pause_rate: args.node_pause_rate,
        pg_restart_rate: args.pg_restart_rate,
        pg_restart: args.pg_restart.clone(),
    };
    config.check()?;
    Ok(Some(config))
}

/// The flags of a run on several nodes.
fn check_cluster_args(args: &StressArgs) -> Result<(), String> {
    if args.store != StoreKind::Postgres || args.url.is_none() {
        return Err(
            "--nodes: needs --store postgres --url URL (the nodes share that database)".into()
        );
    }
    if args.durability == Some(DurabilityArg::Os) {
        return Err(
            "--durability os: the nodes commit with disk durability (as rein node does)".into()
        );
    }
    if args.pg_restart.is_some() && args.pg_restart_rate == 0.0 {
        return Err("--pg-restart: needs --pg-restart-rate above 0".into());
    }
    // Route health is each process's own and an outage starts with one process's agents: both
    // are measured by a run of one process.
    let single_only = [
        ("--think-ms", args.think_ms > 0),
        ("--outage-ms", args.outage_ms.is_some()),
        ("--outage-at-ms", args.outage_at_ms.is_some()),
        ("--route-health", args.route_health.is_some()),
    ];
    if let Some((flag, _)) = single_only.iter().find(|(_, given)| *given) {
        return Err(format!("{flag}: not with --nodes (a run of one process measures it)"));
    }
    Ok(())
}

/// Runs `rein stress --nodes`: the summary's store is the database, without its password.
fn run_cluster(
    args: &StressArgs,
    config: &StressConfig,
    cluster: &cluster::ClusterConfig,
    tokio: &tokio::runtime::Runtime,
) -> ExitCode {
    let acks_path = args.acks.as_deref().map(|path| path.display().to_string());
    let acks = match args.acks.as_deref().map(acks::Acks::open).transpose() {
        Ok(acks) => acks,
        Err(error) => {
            eprintln!("error: --acks {}: {error}", acks_path.unwrap_or_default());
            return ExitCode::from(USAGE);
        }
    };
    let summary = tokio.block_on(cluster::run(config, cluster, acks.as_ref().map(|a| a.sender())));
    let acks_error = acks
        .and_then(|acks| acks.close().err())
        .map(|error| format!("{}: {error}", acks_path.unwrap_or_default()));
    if let Some(error) = &acks_error {
        eprintln!("error: --acks {error}");
    }
    let logs = Some(rein::runtime::store::postgres::redact(&cluster.url));
    let summary = match summary {
        Ok(summary) => {
            Summary { store: "postgres".to_owned(), logs, acks_error, ..summary }.settle()
        }
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(FAILED);
        }
    };
    print_summary(&summary, args.json)
}

/// Prints `summary` (as JSON with `json`): the exit status of the run.
fn print_summary(summary: &Summary, json: bool) -> ExitCode {
    if json {
        match serde_json::to_string(summary) {
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

/// The nodes' lease when `--lease-ms` is not given: short, so that a run's faults are taken
/// over within seconds.
const DEFAULT_LEASE_MS: u64 = 1000;

/// A parser of a whole number within `range` (the flag's [`limits`]): anything else — a sign, a
/// fraction, a number beyond the range or beyond `u64` — is a usage error naming the flag (clap
/// adds it), the value and the range.
fn whole(
    range: RangeInclusive<u64>,
) -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync + 'static {
    move |text| {
        let number = text.parse::<u64>().ok().filter(|n| range.contains(n));
        number.ok_or_else(|| {
            format!("must be a whole number within [{}, {}]", range.start(), range.end())
        })
    }
}

/// `--route-health`: the route's health settings, `None` for off.
#[derive(Debug, Clone)]
pub(crate) struct RouteHealthArg(Option<HealthSettings>);

/// A parser of `--route-health`: `off`, `on` (the defaults), or a JSON object of some of the
/// settings, read strictly (an unknown key or a bad value names the key).
fn route_health(text: &str) -> Result<RouteHealthArg, String> {
    match text.trim() {
        "off" => Ok(RouteHealthArg(None)),
        "on" => Ok(RouteHealthArg(Some(HealthSettings::default()))),
        json if json.starts_with('{') => {
            let value: serde_json::Value =
                serde_json::from_str(json).map_err(|e| format!("not a JSON object: {e}"))?;
            let settings = HealthSettings::from_value(&value, "").map_err(|e| e.to_string())?;
            Ok(RouteHealthArg(Some(settings)))
        }
        _ => Err("must be off, on, or a JSON object of route-health settings".to_owned()),
    }
}

/// A parser of a rate: a number within [0, 1].
fn rate(text: &str) -> Result<f64, String> {
    let rate = text.parse::<f64>().ok().filter(|r| (0.0..=1.0).contains(r));
    rate.ok_or_else(|| "must be a number within [0, 1]".to_owned())
}

/// The flags that need a store.
fn check_args(args: &StressArgs) -> Result<(), String> {
    if args.nodes.is_some() {
        return check_cluster_args(args);
    }
    let cluster_only = [
        ("--lease-ms", args.lease_ms.is_some()),
        ("--partitions", args.partitions.is_some()),
        ("--node-kill-rate", args.node_kill_rate > 0.0),
        ("--node-pause-rate", args.node_pause_rate > 0.0),
        ("--pg-restart-rate", args.pg_restart_rate > 0.0),
        ("--pg-restart", args.pg_restart.is_some()),
    ];
    if let Some((flag, _)) = cluster_only.iter().find(|(_, given)| *given) {
        return Err(format!("{flag}: only with --nodes"));
    }
    if args.store == StoreKind::Memory && args.durability.is_some_and(|d| d != DurabilityArg::Os) {
        return Err("--durability: only for the jsonl, sqlite and postgres stores".into());
    }
    if args.dir.is_some() && !matches!(args.store, StoreKind::Jsonl | StoreKind::Sqlite) {
        return Err("--dir: only for the jsonl and sqlite stores".into());
    }
    match (args.store, &args.url) {
        (StoreKind::Postgres, None) => Err("--store postgres needs --url URL".into()),
        (StoreKind::Postgres, Some(_)) | (_, None) => Ok(()),
        (_, Some(_)) => Err("--url: only for the postgres store".into()),
    }
}

/// The store, and where its logs are (durable stores: a path, or a URL without its password).
/// The postgres store is opened on `tokio`, where its writer runs.
fn open_store(
    args: &StressArgs,
    agents: usize,
    tokio: &tokio::runtime::Runtime,
) -> Result<(Arc<dyn SessionStore>, Option<String>), String> {
    let durability = match args.durability.unwrap_or(DurabilityArg::Os) {
        DurabilityArg::Os => Durability::Os,
        DurabilityArg::Disk => Durability::Disk,
    };
    match args.store {
        StoreKind::Memory => return Ok((Arc::new(MemoryStore::new()), None)),
        StoreKind::Postgres => {
            let url = args.url.as_deref().unwrap_or_default();
            let store = tokio
                .block_on(PostgresStore::open(url, durability))
                .map_err(|e| format!("--url: {e}"))?;
            let shown = store.shown().to_owned();
            return Ok((Arc::new(store), Some(shown)));
        }
        StoreKind::Jsonl | StoreKind::Sqlite => {}
    }
    let dir = match &args.dir {
        Some(dir) => output_file::private_dir(dir).map(|()| dir.clone()),
        None => output_file::fresh_dir(&std::env::temp_dir(), "rein-stress-"),
    }
    .map_err(|e| format!("cannot use the log directory: {e}"))?;
    Ok(match args.store {
        StoreKind::Jsonl => {
            let store = JsonlStore::open(&dir, durability)
                .map_err(|e| e.to_string())?
                .with_max_open_files(open_files::for_agents(agents));
            (Arc::new(store), Some(dir.display().to_string()))
        }
        _ => {
            let db = dir.join("stress.db");
            let store = SqliteStore::open(&db, durability).map_err(|e| e.to_string())?;
            (Arc::new(store), Some(db.display().to_string()))
        }
    })
}

fn store_name(store: StoreKind) -> &'static str {
    match store {
        StoreKind::Memory => "memory",
        StoreKind::Jsonl => "jsonl",
        StoreKind::Sqlite => "sqlite",
        StoreKind::Postgres => "postgres",
    }
}
