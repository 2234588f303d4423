//! The system benchmark: rein's performance budgets, each measured against a floor built in the
//! same process, and printed as one JSON object per line (`metric`, `value`, `baseline`,
//! `ratio`, `budget`, `ok`). `docs/performance.md` ("The system benchmark") states the budgets,
//! what each floor is, and the latest figures.
//!
//! ```text
//! cargo bench --bench system -- --quick        # every metric, under two minutes
//! cargo bench --bench system -- turn_overhead  # only metrics whose name contains the word
//! ```
//!
//! Flags it does not know (cargo passes `--bench`) are ignored; other words filter metrics by
//! name. `--child KIND AGENTS TURNS` is how the bench runs a stress side in a process of its own
//! (see `child`). The exit status is 1 when a metric misses its budget or fails to run. Besides
//! its JSON line, each metric prints on stderr where its time (or memory) goes.
//!
//! # The metrics
//!
//! - `append`: 256 sessions appending to SQLite at `Disk`: appends per `fdatasync`, and appends/s
//!   against bare rusqlite inserting the same rows into an append-ordered table (two lines).
//! - `postgres_append`: the same 256 sessions appending to PostgreSQL at `Disk` (a throwaway
//!   cluster): appends per commit, and appends/s against bare tokio-postgres inserting the same
//!   rows in the same batches (two lines; skipped without PostgreSQL).
//! - `turn_overhead_vs_bare_tree` (`turn_overhead`): back-to-back turns on one warm session
//!   against the same turns through `bare_tree`.
//! - `waterfall_hop_vs_ractor_call` (`waterfall_hop`): one pass-through plugin, read as the
//!   difference of two runtimes, against a ractor call to a different actor each time.
//! - `mass_cancel_{N}k_parked_turns_vs_bare_tree` (`mass_cancel`): shutting down N turns parked
//!   in a retry wait, against the same cascade through their bare trees.
//! - `heap_per_parked_turn_kib`, `heap_per_parked_turn_vs_bare_tree`, `heap_per_idle_session_kib`
//!   (`heap_budgets`): live heap per parked turn, absolute and against its bare tree, and per
//!   hibernated session.
//! - `long_session_turn_2000_vs_20_{memory,jsonl}` (`long_session`): turn 2,000 of a session
//!   against its turn 20.
//! - `long_session_scenario_2000_vs_500_turns`, `long_session_next_event_2000_vs_500_turns_{memory,jsonl}`
//!   (`long_api`): long sessions through the public API — a 2,000-turn scenario run and a
//!   2,000-turn session driven with `prompt` + `next_event` — against the same 500-turn run.
//! - `stress_{1,10}k_agents_*` (`stress`): the `rein stress` engine against the same workload
//!   done by a hand-rolled tokio + backon loop (`hand_rolled_stress`): CPU per turn (budget 1.5
//!   ×), turns per second, cancellation latency p50 and p99 (at 10,000 agents: p99 within 50 ×
//!   the loop's and 10 ms, p50 within 1 ms), peak RSS per agent; each side in a process of its
//!   own (`child`).
//! - `realistic_10k_agents_*` (`realistic`): 10,000 agents of 3 turns on a model answering after
//!   200 ms in 200 streamed chunks, read as they stream, against a hand-rolled tokio loop: turns
//!   per second (budget ≥ 0.9 ×) and CPU per turn (for the record).
//! - `stress_1k_agents_postgres_vs_sqlite_turns_per_s` (`stress_postgres`): the same engine at
//!   1,000 agents × 3 turns on PostgreSQL at `Disk` against SQLite at `Disk`, in this process;
//!   no budget (skipped without PostgreSQL).
//! - `resume_after_kill_next_attempt_late_ms` (`resume_after_kill`): a `rein stress` process
//!   killed (SIGKILL) while most of its agents wait for a retry, then resumed by a fresh runtime:
//!   the latest resumed wait's next attempt, in ms past its original deadline (or past the
//!   reopening, when the deadline passed meanwhile); budget 50 ms.
//! - `retry_amplification_1k_agents_outage`, `retry_amplification_1k_agents_on_vs_off`,
//!   `recovery_after_outage_ms_vs_open_ms` (`retry_amplification`): 1,000 agents through a 10 s
//!   outage of their route (1 s with `--quick`): requests per failed turn with route health on
//!   (budget 1.2) and against it off, and the time back to serving every attempt against
//!   `openMs` (budget 1).
//! - `nodes_*` (`nodes`): `rein stress --nodes` on a throwaway cluster: turns per second on 3
//!   nodes against 1, cross-node cancellation latency p50 and p99 against local, and the
//!   takeover after a kill (lease expiry to the first resumed write) against the lease; no
//!   budget (skipped without PostgreSQL).
//! - `agents_10k_jsonl_os_vs_hand_rolled` (`agents`): 10,000 agents of the `agents` workload
//!   (`agents_workload`) on a JSONL store at `Os`, against a hand-rolled tokio loop writing the
//!   same lines to the same files (`hand_rolled_agents`); and, with no budget,
//!   `agents_10k_jsonl_os_bare_actors_vs_hand_rolled`: the same workload through rein's actor
//!   tree from bare ractor actors (`bare_agents`, the shape's floor) against the same loop.
//!
//! Shared: `bare_tree` (rein's actor tree from bare ractor actors: the floor of the turn
//! metrics), `bare_agents` (the same shape running the `agents` workload), `bare_log` (the bare
//! trees' log actor), `plain_loop` (a turn with no actor at all), `round_trip` (ractor calls),
//! `doubles` (adapters and plugins), `parked` (turns parked in a retry wait), `stamped` (a store that notes
//! when each batch arrives), `sample` (medians), `cpu` (CPU time from `/proc`), `heap` (the
//! counting allocator), and the test kit's `heap` (the runtime's own heap test construction).
//!
//! # Why floors
//!
//! Absolute numbers depend on the machine and on whatever else runs on it. A floor is the same
//! work done by bare tokio and ractor with no rein code, built in the same shape and measured
//! in the same process, interleaved with the metric: the ratio is what rein's own code costs on
//! top of the shape it has, and stays comparable between a laptop and a loaded CI box. Every
//! side is driven from a task of a multi-threaded tokio runtime (one worker per core), as an
//! application drives rein — not from `block_on` on the main thread, where every hand-off to a
//! worker and back would be a cross-thread wake-up that neither rein nor the floor pays in use.
//!
//! # Adding a metric
//!
//! Write `benches/system/<name>.rs` with a `pub(crate) fn run(&Options) ->
//! anyhow::Result<Vec<Metric>>` and a `pub(crate) const NAME` (what a filter matches), declare the
//! module below, and add it to [`METRICS`].

use std::process::ExitCode;

mod agents;
mod agents_workload;
mod append;
mod bare_agents;
mod bare_log;
mod bare_stress;
mod bare_tree;
mod child;
mod cpu;
mod doubles;
mod hand_rolled_agents;
mod hand_rolled_stress;
mod heap;
mod heap_budgets;
mod long_api;
mod long_session;
mod mass_cancel;
mod nodes;
mod parked;
mod plain_loop;
mod postgres_append;
mod realistic;
mod report;
mod resume_after_kill;
mod retry_amplification;
mod round_trip;
mod sample;
mod stamped;
mod stress;
mod stress_postgres;
mod turn_overhead;
mod waterfall_hop;

use report::Metric;

/// How the bench was asked to run.
#[derive(Debug, Default)]
pub(crate) struct Options {
    /// `--quick`: fewer samples and turns, the whole bench under two minutes.
    pub(crate) quick: bool,
    /// Words on the command line: run only metrics whose name contains one of them.
    pub(crate) filters: Vec<String>,
}

impl Options {
    fn parse(args: impl IntoIterator<Item = String>) -> Self {
        let mut options = Options::default();
        for arg in args {
            match arg.as_str() {
                "--quick" => options.quick = true,
                flag if flag.starts_with('-') => {} // --bench and anything else cargo adds
                word => options.filters.push(word.to_owned()),
            }
        }
        options
    }

    fn selects(&self, name: &str) -> bool {
        self.filters.is_empty() || self.filters.iter().any(|f| name.contains(f.as_str()))
    }
}

/// A group of metrics: how to measure them.
type Measure = fn(&Options) -> anyhow::Result<Vec<Metric>>;

/// Every group of metrics, by the name a filter matches, in the order they run.
const METRICS: &[(&str, Measure)] = &[
    (append::NAME, append::run),
    (postgres_append::NAME, postgres_append::run),
    (turn_overhead::NAME, turn_overhead::run),
    (waterfall_hop::NAME, waterfall_hop::run),
    (mass_cancel::NAME, mass_cancel::run),
    (heap_budgets::NAME, heap_budgets::run),
    (long_session::NAME, long_session::run),
    (long_api::NAME, long_api::run),
    (stress::NAME, stress::run),
    (realistic::NAME, realistic::run),
    (stress_postgres::NAME, stress_postgres::run),
    (resume_after_kill::NAME, resume_after_kill::run),
    (retry_amplification::NAME, retry_amplification::run),
    (nodes::NAME, nodes::run),
    (agents::NAME, agents::run),
];

/// Runs `measure` to its end as a task of a fresh multi-threaded tokio runtime (one worker per
/// core): the metric and its floor are driven from inside the runtime, as an application drives
/// rein.
pub(crate) fn drive<T: Send + 'static>(
    measure: impl Future<Output = anyhow::Result<T>> + Send + 'static,
) -> anyhow::Result<T> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async { tokio::spawn(measure).await? })
}

/// A temporary directory for a metric's files: under `$REIN_BENCH_DIR` when set (to measure a
/// particular disk), else under the system's temporary directory.
pub(crate) fn temp_dir() -> anyhow::Result<tempfile::TempDir> {
    use anyhow::Context as _;
    match std::env::var_os("REIN_BENCH_DIR") {
        Some(parent) => tempfile::tempdir_in(parent),
        None => tempfile::tempdir(),
    }
    .context("temporary directory")
}

fn main() -> ExitCode {
    // Every awake JSONL session holds a descriptor for the lock on its log, beside the store's
    // cache of open files: 10,000 agents at once need more than the usual soft limit of 1,024.
    if let Err(error) = rlimit::increase_nofile_limit(u64::MAX) {
        eprintln!("could not raise the open-file limit: {error}");
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some((kind, agents, turns)) = child::parse(&args) {
        return child::run(kind, agents, turns);
    }
    let options = Options::parse(args);
    let mut all_ok = true;
    for (name, measure) in METRICS.iter().filter(|(name, _)| options.selects(name)) {
        match measure(&options) {
            Ok(metrics) => {
                for metric in metrics {
                    all_ok &= metric.ok;
                    println!("{}", metric.to_json_line());
                }
            }
            Err(error) => {
                all_ok = false;
                eprintln!("{name}: failed to measure: {error:#}");
            }
        }
    }
    if all_ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
