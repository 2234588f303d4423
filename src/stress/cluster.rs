//! `rein stress --nodes N`: the stress workload through a cluster of `rein node` processes over
//! one PostgreSQL database, with node faults, and every guarantee of SPEC §12 checked across
//! the cluster at the end. The decisions are in `docs/runtime-semantics.md` ("rein stress
//! --nodes").
//!
//! The run starts N nodes (children of the same binary, `rein node --port 0`, each told the
//! workload so that it serves the stress run's runtime), waits until they share the partitions,
//! then drives the agents through the nodes' API (`driver`), while the turns' ends set off node
//! faults from the seed (`faults`): `kill -9` and a start again, `SIGSTOP` past the lease and
//! `SIGCONT`, a database restart. At the end it waits until nothing runs, checks the nodes show
//! the same settings, stops them (SIGTERM: they drain), reads every log back and checks: every
//! log valid and finished, no turn run on two nodes (`verify::writers`, over the run's audit of
//! who wrote each event), every acknowledged event present, resumed retry waits continuing
//! their chain, no hung turn.
//!
//! - `choice`: the seeded decisions (which node, which faults, how long), pure.
//! - `stderr`: what a node's standard error says of its partitions, pure.
//! - `verify`: the checks and figures over the logs, pure.
//! - the `cluster` part of the summary is `summary::cluster`.
//! - `http`: the client of the nodes' API; `sql`: the run's own statements (the audit, the
//!   owners, whether anything still runs).
//! - `nodes`: a node process; `members`: the run's view of its nodes.
//! - `driver`: one agent; `faults`: the fault controller; `settings`: settings changes through
//!   the nodes, and their convergence.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use crate::runtime::store::Durability;
use crate::runtime::store::postgres::PostgresStore;
use crate::runtime::store::postgres::partition::partition_of;
use crate::stress::acks::AckSender;
use crate::stress::agent::{Watch, is_agent_session, session_id};
use crate::stress::route::RouteTally;
use crate::stress::summary::{
    Cancellations, HungTurn, LISTED, Latencies, Leaks, PluginChaos, Summary, Tally,
};
use crate::stress::{StressConfig, limits, plan, progress};

mod choice;
mod driver;
mod faults;
mod http;
mod members;
mod nodes;
mod settings;
mod sql;
mod stderr;
mod verify;

use crate::stress::summary::cluster::{self as report, CancelKind, ClusterReport};
use choice::{Fault, FaultRates};
use members::Members;

/// `--nodes`.
pub const NODES: std::ops::RangeInclusive<u64> = 1..=32;
/// `--lease-ms`.
pub const LEASE_MS: std::ops::RangeInclusive<u64> = 100..=600_000;

/// How long the nodes get to share the partitions out before the agents start.
const SETTLE_WITHIN: Duration = Duration::from_secs(60);
/// How long a node gets to drain and exit on SIGTERM.
const STOP_WITHIN: Duration = Duration::from_secs(60);

/// The cluster of a run (the flags `rein stress --nodes` adds).
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterConfig {
    /// Nodes.
    pub nodes: usize,
    /// The database (`postgres://…`; its password, if it holds one, is never printed).
    pub url: String,
    /// The `rein` binary the nodes run (`rein node`).
    pub exe: PathBuf,
    /// The nodes' lease, ms.
    pub lease_ms: u64,
    /// The cluster's partitions, when the run asks for a number (a new cluster's first node
    /// writes it; a database that has another is refused by the nodes).
    pub partitions: Option<u32>,
    /// Share of turns whose end kills a node (`kill -9`), started again 1–2 leases later.
    pub node_kill_rate: f64,
    /// Share of turns whose end stops a node (`SIGSTOP`) for 1.5–2.5 leases.
    pub node_pause_rate: f64,
    /// Share of turns whose end restarts the database with [`ClusterConfig::pg_restart`].
    pub pg_restart_rate: f64,
    /// A shell command that restarts the database and returns once it accepts connections
    /// again (`pg_ctl restart -m immediate -w -D DIR`).
    pub pg_restart: Option<String>,
}

impl ClusterConfig {
    /// Checks the numbers and the flags that go together; the error names the flag.
    pub fn check(&self) -> Result<(), String> {
        limits::within("--nodes", self.nodes as u64, &NODES)?;
        limits::within("--lease-ms", self.lease_ms, &LEASE_MS)?;
        for (flag, rate) in [
            ("--node-kill-rate", self.node_kill_rate),
            ("--node-pause-rate", self.node_pause_rate),
            ("--pg-restart-rate", self.pg_restart_rate),
        ] {
            if !(0.0..=1.0).contains(&rate) {
                return Err(format!("{flag}: must be within [0, 1], got {rate}"));
            }
        }
        match (self.pg_restart_rate > 0.0, self.pg_restart.as_deref().map(str::trim)) {
            (true, None | Some("")) => {
                Err("--pg-restart-rate: needs --pg-restart COMMAND (how to restart the database)"
                    .into())
            }
            _ => Ok(()),
        }
    }

    /// The rates of the faults.
    fn faults(&self) -> FaultRates {
        FaultRates {
            kill: self.node_kill_rate,
            pause: self.node_pause_rate,
            restart_database: self.pg_restart_rate,
        }
    }

    /// The default hang deadline of a run of `pace` on this cluster: the one-process default,
    /// and ten leases more (a turn may wait out a kill, a pause and a takeover or two).
    pub fn default_hang_deadline_ms(&self, pace: limits::Pace) -> u64 {
        limits::default_hang_deadline_ms(pace).saturating_add(self.lease_ms.saturating_mul(10))
    }
}

/// Runs the workload `config` through a cluster `cluster` and reports it (the summary's
/// `cluster` set). `acks` receives `(session, seq)` for every event a node acknowledged to the
/// run. An `Err` is a run that could not start (the database, a node that would not start, a
/// cluster that would not share its partitions) or whose logs could not be read.
pub async fn run(
    config: &StressConfig,
    cluster: &ClusterConfig,
    acks: Option<AckSender>,
) -> Result<Summary, String> {
    config.check()?;
    cluster.check()?;
    // The tables (a store's open brings them up to date), then the audit on them.
    let shown = {
        let store = PostgresStore::open(&cluster.url, Durability::Disk)
            .await
            .map_err(|e| format!("--url: {e}"))?;
        store.shown().to_owned()
    };
    let client = sql::connect(&cluster.url).await?;
    sql::install_audit(&client)
        .await
        .map_err(|e| format!("{shown}: cannot audit the writes: {e}"))?;
    let workload = serde_json::to_string(config).map_err(|e| e.to_string())?;
    let spawns = (1..=cluster.nodes)
        .map(|n| nodes::Spawn {
            exe: cluster.exe.clone(),
            url: cluster.url.clone(),
            id: format!("n{n}"),
            lease_ms: cluster.lease_ms,
            partitions: cluster.partitions,
            workload: workload.clone(),
        })
        .collect();
    let members = Arc::new(Members::new(spawns));
    let started = start_nodes(&client, &members).await;
    let partitions = match started {
        Ok(partitions) => partitions,
        Err(error) => {
            let stopping = Arc::clone(&members);
            let _ = tokio::task::spawn_blocking(move || stopping.kill_all()).await;
            let _ = sql::remove_audit(&client).await;
            return Err(error);
        }
    };
    let outcome = drive(config, cluster, &members, partitions, acks).await;
    // Whatever happened, no node outlives the run.
    let stopping = Arc::clone(&members);
    let (node_failures, node_peak) =
        tokio::task::spawn_blocking(move || stopping.stop_all(STOP_WITHIN))
            .await
            .unwrap_or_else(|e| (vec![format!("stopping the nodes failed: {e}")], None));
    let driven = outcome?;
    drop(client);
    // A connection of its own: the first may have gone with a database restart.
    let client = sql::connect(&cluster.url).await?;
    let checked = check(config, &client, &cluster.url, partitions, &driven).await;
    let _ = sql::remove_audit(&client).await;
    let (tally, route, other_logs, checks) = checked?;
    Ok(summary(
        config,
        cluster,
        partitions,
        driven,
        (tally, route),
        other_logs,
        checks,
        node_failures,
        node_peak,
        &members,
    ))
}

/// Starts the nodes one after another, then waits until they share the partitions out: every
/// partition served, every node serving some. The cluster's number of partitions.
async fn start_nodes(
    client: &tokio_postgres::Client,
    members: &Arc<Members>,
) -> Result<u32, String> {
    for node in 0..members.len() {
        let starting = Arc::clone(members);
        tokio::task::spawn_blocking(move || starting.start(node))
            .await
            .map_err(|e| e.to_string())??;
    }
    let deadline = tokio::time::Instant::now() + SETTLE_WITHIN;
    loop {
        let partitions = sql::partitions(client).await?.unwrap_or(0);
        if partitions > 0 {
            members.set_owners(partitions, &sql::owners(client).await?);
            let (shares, unowned) = members.shares();
            // Every node serves some (the keepers aim at the even split rounded up, so the last
            // to join may serve fewer than the others).
            let each = partitions < members.len() as u32 || shares.iter().all(|&n| n > 0);
            if unowned == 0 && each {
                return Ok(partitions);
            }
        }
        members.check_exits();
        if tokio::time::Instant::now() >= deadline {
            let (shares, unowned) = members.shares();
            return Err(format!(
                "the nodes did not share the partitions out within {} s: they serve {shares:?}, \
                 {unowned} unserved",
                SETTLE_WITHIN.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What driving the agents gave.
struct Driven {
    reports: Vec<driver::AgentReport>,
    hung: Vec<(usize, u32)>,
    elapsed: Duration,
    faults: faults::Done,
    plugins: PluginChaos,
    open_at_end: Vec<String>,
    settings: Result<(), String>,
}

/// Drives the agents through the nodes with the faults, then waits until nothing runs.
async fn drive(
    config: &StressConfig,
    cluster: &ClusterConfig,
    members: &Arc<Members>,
    partitions: u32,
    acks: Option<AckSender>,
) -> Result<Driven, String> {
    let (stop, stopped) = watch::channel(false);
    let poller = tokio::spawn(members::poll_owners(
        cluster.url.clone(),
        partitions,
        Arc::clone(members),
        stopped.clone(),
    ));
    let lease = Duration::from_millis(cluster.lease_ms);
    let (fault_requests, faults_asked) = mpsc::unbounded_channel();
    let mut controller_rng = choice::fault_rng(config.seed);
    controller_rng.set_stream(u64::MAX - 1);
    let controller = faults::Controller {
        members: Arc::clone(members),
        url: cluster.url.clone(),
        lease,
        rng: controller_rng,
        restart_database: cluster.pg_restart.clone(),
    };
    let controller = tokio::spawn(controller.run(faults_asked, stopped.clone()));
    let http = http::Http::new();
    let (chaos_requests, chaos_asked) = mpsc::unbounded_channel();
    let chaos = tokio::spawn(settings::chaos(
        http.clone(),
        Arc::clone(members),
        plan::chaos_rng(config.seed),
        config.backoff_ms,
        chaos_asked,
    ));
    let total_turns = config.agents as u64 * u64::from(config.turns);
    let shared = Arc::new(driver::Shared {
        http: http.clone(),
        members: Arc::clone(members),
        seed: config.seed,
        turns: config.turns,
        rates: config.rates,
        cancel_window: plan::cancel_window(
            Duration::from_millis(config.latency_ms),
            Duration::from_millis(config.backoff_ms),
        ),
        lease,
        progress: if config.progress {
            progress::Progress::new(total_turns)
        } else {
            progress::Progress::hidden()
        },
        watch: Watch::new(config.agents),
        faults: faults::Draws::new(config.seed, cluster.faults(), fault_requests),
        acks,
    });

    let started = Instant::now();
    let mut agents = JoinSet::new();
    for index in 0..config.agents {
        agents.spawn(driver::run(Arc::clone(&shared), index, chaos_requests.clone()));
    }
    drop(chaos_requests);
    let deadline = Duration::from_millis(config.hang_deadline_ms);
    let mut reports = Vec::with_capacity(config.agents);
    let mut hung = Vec::new();
    loop {
        let quiet = shared.watch.quiet_for();
        tokio::select! {
            joined = agents.join_next() => match joined {
                Some(Ok(report)) => reports.push(report),
                Some(Err(error)) => reports.push(driver::AgentReport::failed(format!("an agent task failed: {error}"))),
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
    shared.progress.finish();
    let _ = stop.send(true);
    let faults = controller.await.unwrap_or_default();
    // The agents still running stop at their next step (they were hung).
    super::gather(&mut agents, Duration::from_secs(10), &mut reports).await;
    drop(shared);
    let plugins = chaos.await.unwrap_or_default();
    let _ = poller.await;
    let open_at_end = quiet_down(&cluster.url, config.agents, deadline).await;
    let settings = settings::converged(&http, members).await;
    Ok(Driven { reports, hung, elapsed, faults, plugins, open_at_end, settings })
}

/// Waits (up to `deadline`) until no session of the run has an open turn and no forwarded
/// request waits: the sessions with a turn still open then.
async fn quiet_down(url: &str, agents: usize, deadline: Duration) -> Vec<String> {
    let until = tokio::time::Instant::now() + deadline;
    let mut open = Vec::new();
    loop {
        if let Ok(client) = sql::connect(url).await {
            loop {
                match sql::busy(&client, |s| is_agent_session(s, agents)).await {
                    Ok((now_open, 0)) if now_open.is_empty() => return Vec::new(),
                    Ok((now_open, _)) => open = now_open,
                    Err(_) => break,
                }
                if tokio::time::Instant::now() >= until {
                    open.sort();
                    return open;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        if tokio::time::Instant::now() >= until {
            open.sort();
            return open;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What the logs say.
#[derive(Default)]
struct Checks {
    writers: report::Check,
    acks: report::Check,
    resumed: report::Resumed,
}

/// Reads every log of the run back and checks it.
async fn check(
    config: &StressConfig,
    client: &tokio_postgres::Client,
    url: &str,
    partitions: u32,
    driven: &Driven,
) -> Result<(Tally, RouteTally, u64, Checks), String> {
    let store = PostgresStore::open(url, Durability::Disk).await.map_err(|e| e.to_string())?;
    let written = sql::writers(client).await.map_err(|e| format!("the audit: {e}"))?;
    let acked: BTreeMap<&str, &driver::AgentReport> =
        driven.reports.iter().map(|r| (r.session.as_str(), r)).collect();
    let mut tally = Tally::default();
    let mut route = RouteTally::new(None);
    let mut checks = Checks::default();
    let mut resumed: Vec<(u32, u64, u64)> = Vec::new();
    let (mut delays, mut late) = (Latencies::default(), Latencies::default());
    let empty = BTreeMap::new();
    let other_logs = super::each_log(&store, config.agents, |session, events| {
        tally.add_log(session, events);
        route.add_log(events);
        let by = written.get(session).unwrap_or(&empty);
        checks.writers.checked += by.len() as u64;
        checks.writers.add(verify::writers(session, events, by));
        for resume in verify::resumes(session, events) {
            checks.resumed.turns += 1;
            delays.record(Duration::from_millis(resume.silent_ms));
            resumed.push((partition_of(session, partitions), resume.began, resume.at));
            match resume.wait {
                Some(verify::Wait::Continued { late_ms }) => {
                    checks.resumed.retry_waits_continued += 1;
                    late.record(Duration::from_secs_f64(late_ms / 1000.0));
                }
                Some(verify::Wait::Ended) => checks.resumed.retry_waits_ended += 1,
                Some(verify::Wait::Broken(why)) => {
                    checks.resumed.retry_waits_broken += 1;
                    if checks.resumed.broken_examples.len() < LISTED {
                        checks.resumed.broken_examples.push(why);
                    }
                }
                None => {}
            }
        }
        if let Some(report) = acked.get(session) {
            checks.acks.checked += report.acked.len() as u64;
            checks.acks.add(verify::missing_acks(session, events, &report.acked));
            checks.acks.add(report.conflicts.clone());
        }
    })
    .await?;
    checks.resumed.delay = delays.summary();
    checks.resumed.retry_wait_late = late.summary();
    let (mut after_kill, mut kill_to, mut after_pause) =
        (Latencies::default(), Latencies::default(), Latencies::default());
    for fault in &driven.faults.node_faults {
        let Some(first) = verify::first_resumed(&resumed, &fault.partitions, fault.at_ms) else {
            continue;
        };
        let since_expiry =
            Duration::from_millis(first.saturating_sub(fault.expiry_ms.unwrap_or(first)));
        match fault.fault {
            Fault::Kill => {
                after_kill.record(since_expiry);
                kill_to.record(Duration::from_millis(first.saturating_sub(fault.at_ms)));
            }
            _ => after_pause.record(since_expiry),
        }
    }
    checks.resumed.takeover_after_kill = after_kill.summary();
    checks.resumed.kill_to_resumed = kill_to.summary();
    checks.resumed.takeover_after_pause = after_pause.summary();
    Ok((tally, route, other_logs, checks))
}

#[allow(clippy::too_many_arguments)]
fn summary(
    config: &StressConfig,
    cluster: &ClusterConfig,
    partitions: u32,
    driven: Driven,
    (tally, route): (Tally, RouteTally),
    other_logs: u64,
    checks: Checks,
    mut node_failures: Vec<String>,
    node_peak_rss_kib: Option<u64>,
    members: &Members,
) -> Summary {
    node_failures.extend(driven.faults.failures.iter().cloned());
    let heard = members.heard();
    let sum = |f: fn(&nodes::Heard) -> u64| heard.iter().map(f).sum::<u64>();
    let ownership = report::Ownership {
        taken: sum(|h| h.took),
        taken_over: sum(|h| h.taken_over),
        lost_taken_over: sum(|h| h.lost_taken_over),
        lost_lease_ran_out: sum(|h| h.lost_lease_ran_out),
        fenced_writes_refused: sum(|h| h.fenced),
        given_back: sum(|h| h.gave_back),
        resumed_by_nodes: sum(|h| h.resumed),
        unreachable_rounds: sum(|h| h.unreachable),
    };
    let mut requests = report::Requests::default();
    let (mut local, mut cross) = (Latencies::default(), Latencies::default());
    let mut errors = crate::stress::summary::Errors::default();
    let mut all = Latencies::default();
    let mut cancellations = Cancellations::default();
    for r in &driven.reports {
        requests.forwarded_prompts += r.forwarded;
        requests.local_prompts += r.local;
        requests.refused_and_sent_again += r.refused_again;
        requests.found_after_a_cut += r.found;
        requests.lost_and_sent_again += r.lost_again;
        requests.followed_elsewhere += r.followed;
        for (kind, latencies, cancels) in [
            (&mut requests.local_cancels, &mut local, &r.local_cancels),
            (&mut requests.cross_node_cancels, &mut cross, &r.cross_cancels),
        ] {
            kind.requested += cancels.requested;
            kind.landed += cancels.landed;
            for latency in &cancels.latencies {
                latencies.record(*latency);
                all.record(*latency);
            }
        }
        cancellations.requested += r.local_cancels.requested + r.cross_cancels.requested;
        cancellations.landed += r.local_cancels.landed + r.cross_cancels.landed;
        errors.merge(&r.errors);
    }
    requests.local_cancels = CancelKind { latency: local.summary(), ..requests.local_cancels };
    requests.cross_node_cancels =
        CancelKind { latency: cross.summary(), ..requests.cross_node_cancels };
    cancellations.latency = all.summary();
    let f = &driven.faults;
    let kills = f.node_faults.iter().filter(|n| n.fault == Fault::Kill).count() as u64;
    let seconds = driven.elapsed.as_secs_f64().max(1e-3);
    let report = ClusterReport {
        nodes: cluster.nodes as u64,
        lease_ms: cluster.lease_ms,
        partitions,
        turns_per_second: tally.turns_ended() as f64 / seconds,
        faults: report::Faults {
            node_kills: kills,
            node_pauses: f.node_faults.len() as u64 - kills,
            database_restarts: f.database_restarts,
            not_run: f.not_run,
        },
        ownership,
        resumed: checks.resumed,
        requests,
        writers: checks.writers,
        acks: checks.acks,
        settings_converged: driven.settings.is_ok(),
        settings_difference: driven.settings.clone().err(),
        open_at_end: driven.open_at_end.clone(),
        node_failures,
        node_peak_rss_kib,
    };
    let hung_turns = driven
        .hung
        .iter()
        .take(LISTED)
        .map(|(agent, turn)| HungTurn { session: session_id(*agent), turn: *turn })
        .collect();
    Summary {
        ok: false,
        agents: config.agents as u64,
        turns_per_agent: u64::from(config.turns),
        seed: config.seed,
        store: String::new(),
        logs: None,
        elapsed_ms: driven.elapsed.as_millis() as u64,
        cpu_ms: None,
        hang_deadline_ms: config.hang_deadline_ms,
        tally,
        other_logs,
        resumed: 0,
        agent_errors: errors.count,
        agent_error_examples: errors.examples,
        hung: driven.hung.len() as u64,
        hung_turns,
        cancellations,
        plugins: driven.plugins,
        leaks: Leaks { shutdown_finished: true, ..Leaks::default() },
        peak_rss_kib: None,
        acks_error: None,
        route: super::route_summary(config, &route, None, None, 0),
        cluster: Some(report),
    }
}
