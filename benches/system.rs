//! The system benchmark (DESIGN.md §6): each metric is measured against a baseline taken in the
//! same run, and printed as one JSON object per line (`metric`, `value`, `baseline`, `ratio`,
//! `budget`, `ok`).
//!
//! ```text
//! cargo bench --bench system -- --quick        # every metric, under a minute
//! cargo bench --bench system -- appends        # only metrics whose name contains "appends"
//! ```
//!
//! Flags it does not know (cargo passes `--bench`) are ignored; other words filter metrics by
//! name. The exit status is 1 when a metric misses its budget or fails to run.
//!
//! # Adding a metric
//!
//! Write `benches/system/<name>.rs` with a `pub(crate) fn run(&Options) -> anyhow::Result<Metric>`
//! (or `Vec<Metric>`, for metrics measured together) and a `pub(crate) const NAME`, declare the
//! module below, and add it to [`METRICS`].
//!
//! # The metrics
//!
//! - `append`: 256 sessions appending to SQLite at `Disk`: appends per `fdatasync`, and appends/s
//!   against bare rusqlite inserting the same rows into an append-ordered table (two lines).
//! - `turn_overhead`: a turn through the runtime minus a plain loop making the same appends,
//!   in ractor `call` round trips.
//! - `waterfall_hop`: one pass-through plugin in the waterfall, in ractor `call` round trips.
//! - `mass_cancel`: µs per turn to cancel 100k (20k with `--quick`) turns parked in a plugin.
//! - `heap_parked_turn`, `heap_idle_session`: KiB of heap per parked turn and per hibernated
//!   session, read from the counting global allocator (`heap`).
//!
//! Shared: `round_trip` (the ractor `call` baseline), `cancel_floor` (the least a cancellation
//! costs, no rein code), `cpu` (CPU time from `/proc`), `doubles` (adapters and plugins), `parked`
//! (turns parked in a plugin's wait), `heap` (the allocator).
//!
//! # Why ratios
//!
//! Absolute numbers depend on the machine (and on whatever else runs on it). A ratio to a
//! baseline measured seconds earlier on the same machine and file system is what a budget can
//! be stated in, and what stays comparable between a laptop and a CI box.

use std::process::ExitCode;

#[path = "system/append.rs"]
mod append;
#[path = "system/cancel_floor.rs"]
mod cancel_floor;
#[path = "system/cpu.rs"]
mod cpu;
#[path = "system/doubles.rs"]
mod doubles;
#[path = "system/heap.rs"]
mod heap;
#[path = "system/heap_idle_session.rs"]
mod heap_idle_session;
#[path = "system/heap_parked_turn.rs"]
mod heap_parked_turn;
#[path = "system/mass_cancel.rs"]
mod mass_cancel;
#[path = "system/parked.rs"]
mod parked;
#[path = "system/report.rs"]
mod report;
#[path = "system/round_trip.rs"]
mod round_trip;
#[path = "system/turn_overhead.rs"]
mod turn_overhead;
#[path = "system/waterfall_hop.rs"]
mod waterfall_hop;

use report::Metric;

/// How the bench was asked to run.
#[derive(Debug, Default)]
pub(crate) struct Options {
    /// `--quick`: short measurement windows, the whole bench under a minute.
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

/// A metric (or metrics measured together): its name and how to measure it.
type Measure = fn(&Options) -> anyhow::Result<Vec<Metric>>;

/// Every metric, in the order they run.
const METRICS: &[(&str, Measure)] = &[
    (append::NAME, append::run),
    (turn_overhead::NAME, |o| Ok(vec![turn_overhead::run(o)?])),
    (waterfall_hop::NAME, |o| Ok(vec![waterfall_hop::run(o)?])),
    (mass_cancel::NAME, |o| Ok(vec![mass_cancel::run(o)?])),
    (heap_parked_turn::NAME, |o| Ok(vec![heap_parked_turn::run(o)?])),
    (heap_idle_session::NAME, |o| Ok(vec![heap_idle_session::run(o)?])),
];

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
    let options = Options::parse(std::env::args().skip(1));
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
