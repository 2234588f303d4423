//! One benchmark result, printed as one JSON object per line (see `docs/performance.md`,
//! "The system benchmark"): `{"metric":…,"value":…,"baseline":…,"ratio":…,"budget":…,"ok":…}`.
//!
//! A metric with no budget ([`Budget::Record`]) prints `"budget": "none"` and is `ok` whenever
//! its ratio is a number: a run that fails its own checks fails to measure instead.
//!
//! A metric whose budget is absolute (KiB per turn or session) has its unit as baseline
//! (`1.0`), so its ratio is the value in that unit and the budget reads the same way.

use serde::Serialize;

/// What the ratio `value / baseline` must satisfy.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Budget {
    /// `ratio >= x` (throughput: more is better).
    AtLeast(f64),
    /// `ratio <= x` (cost: less is better).
    AtMost(f64),
    /// No budget: the figure is printed for the record (`"budget": "none"`).
    Record,
}

impl Budget {
    /// Whether `ratio` is within the budget.
    pub(crate) fn holds(self, ratio: f64) -> bool {
        match self {
            Budget::AtLeast(min) => ratio >= min,
            Budget::AtMost(max) => ratio <= max,
            Budget::Record => true,
        }
    }

    fn text(self) -> String {
        match self {
            Budget::AtLeast(min) => format!(">= {min}"),
            Budget::AtMost(max) => format!("<= {max}"),
            Budget::Record => "none".to_owned(),
        }
    }
}

/// One measured metric.
#[derive(Debug, Serialize)]
pub(crate) struct Metric {
    /// Its name, `snake_case`.
    pub(crate) metric: String,
    /// What was measured.
    pub(crate) value: f64,
    /// The baseline measured in the same run.
    pub(crate) baseline: f64,
    /// `value / baseline`.
    pub(crate) ratio: f64,
    /// The budget the ratio must meet, as text (`">= 50"`).
    pub(crate) budget: String,
    /// Whether it does.
    pub(crate) ok: bool,
}

impl Metric {
    /// A metric whose `value / baseline` must meet `budget`. `ok` is decided on the exact
    /// ratio; the printed numbers are rounded for reading.
    pub(crate) fn new(metric: &str, value: f64, baseline: f64, budget: Budget) -> Self {
        let ratio = value / baseline;
        Self {
            metric: metric.to_owned(),
            value: round(value),
            baseline: round(baseline),
            ratio: round(ratio),
            budget: budget.text(),
            ok: ratio.is_finite() && budget.holds(ratio),
        }
    }

    /// A figure with no budget, printed for the record: `ok` unless the ratio is not a number.
    pub(crate) fn record(metric: &str, value: f64, baseline: f64) -> Self {
        Self::new(metric, value, baseline, Budget::Record)
    }

    /// The metric as one line of JSON.
    pub(crate) fn to_json_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!(r#"{{"error":"{e}"}}"#))
    }
}

/// Three significant decimals are plenty for a benchmark reading.
fn round(x: f64) -> f64 {
    if x.abs() >= 100.0 { x.round() } else { (x * 1000.0).round() / 1000.0 }
}
