//! Reading samples: medians of durations, and durations in µs.

use std::time::Duration;

/// A duration in µs.
pub(crate) fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The median of some durations (zero when there are none).
pub(crate) fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}
