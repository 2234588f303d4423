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
//! and a `pub(crate) const NAME`, declare the module below, and add it to [`METRICS`].
//!
//! # Why ratios
//!
//! Absolute numbers depend on the machine (and on whatever else runs on it). A ratio to a
//! baseline measured seconds earlier on the same machine and file system is what a budget can
//! be stated in, and what stays comparable between a laptop and a CI box.

use std::process::ExitCode;

#[path = "system/append.rs"]
mod append;
#[path = "system/report.rs"]
mod report;

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

/// A metric: its name and how to measure it.
type Measure = fn(&Options) -> anyhow::Result<Metric>;

/// Every metric, in the order they run.
const METRICS: &[(&str, Measure)] = &[(append::NAME, append::run)];

fn main() -> ExitCode {
    let options = Options::parse(std::env::args().skip(1));
    let mut all_ok = true;
    for (name, measure) in METRICS.iter().filter(|(name, _)| options.selects(name)) {
        match measure(&options) {
            Ok(metric) => {
                all_ok &= metric.ok;
                println!("{}", metric.to_json_line());
            }
            Err(error) => {
                all_ok = false;
                eprintln!("{name}: failed to measure: {error:#}");
            }
        }
    }
    if all_ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
