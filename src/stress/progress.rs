//! The progress of a stress run on standard error: a bar (indicatif) when standard error is a
//! terminal, otherwise a plain line at every tenth of the turns (a log file or a CI job gets at
//! most ten lines, not a redrawn bar).

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Counts ended turns and shows it.
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    total: u64,
    done: AtomicU64,
    started: Instant,
}

impl Progress {
    /// Progress over `total` turns.
    pub(crate) fn new(total: u64) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} turns ({per_sec}, eta {eta})",
            ) {
                bar.set_style(style);
            }
            bar
        });
        Self { bar, total, done: AtomicU64::new(0), started: Instant::now() }
    }

    /// Counts turns and shows nothing (a run driven by another program): with no bar and no
    /// total, no plain line is ever due.
    pub(crate) fn hidden() -> Self {
        Self { bar: None, total: 0, done: AtomicU64::new(0), started: Instant::now() }
    }

    /// One more turn ended.
    pub(crate) fn turn_ended(&self) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        match &self.bar {
            Some(bar) => bar.inc(1),
            None => {
                if let Some(line) =
                    plain_line(done, self.total, self.started.elapsed().as_secs_f64())
                {
                    eprintln!("{line}");
                }
            }
        }
    }

    /// Removes the bar (the summary follows).
    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// The plain line for the `done`-th turn, when it completes a tenth of `total`.
fn plain_line(done: u64, total: u64, seconds: f64) -> Option<String> {
    if total == 0 || done > total {
        return None;
    }
    let tenth = |n: u64| n * 10 / total;
    (tenth(done) > tenth(done - 1)).then(|| {
        format!("stress: {done}/{total} turns ended ({}%) in {seconds:.1} s", tenth(done) * 10)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_line_marks_each_tenth() {
        let lines: Vec<String> = (1..=1000).filter_map(|n| plain_line(n, 1000, 1.0)).collect();
        assert_eq!(lines.len(), 10);
        assert_eq!(lines[0], "stress: 100/1000 turns ended (10%) in 1.0 s");
        assert_eq!(lines[9], "stress: 1000/1000 turns ended (100%) in 1.0 s");
        // Fewer turns than tenths: a line for each tenth a turn completes.
        let few: Vec<String> = (1..=3).filter_map(|n| plain_line(n, 3, 0.5)).collect();
        assert_eq!(
            few,
            [
                "stress: 1/3 turns ended (30%) in 0.5 s",
                "stress: 2/3 turns ended (60%) in 0.5 s",
                "stress: 3/3 turns ended (100%) in 0.5 s",
            ]
        );
        assert_eq!(plain_line(1, 0, 0.0), None);
        assert_eq!(plain_line(5, 3, 0.0), None, "turns beyond the plan print nothing");
    }
}
