//! Restart intensity: how many crashes a plugin may have before its supervisor gives up on it.
//!
//! The pure core of the plugin host's supervision: a plugin that crashes is
//! restarted, unless it has already been restarted `max_restarts` times within the last
//! `within` — then it leaves the chain. Time is a parameter (`now`, a duration since any fixed
//! origin), so the rule is table-tested without a clock.

use std::collections::VecDeque;
use std::time::Duration;

/// How many restarts a plugin is allowed in a sliding window (default: 3 in 5 s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartIntensity {
    /// Restarts allowed within the window.
    pub max_restarts: u32,
    /// The window.
    pub within: Duration,
}

impl Default for RestartIntensity {
    fn default() -> Self {
        Self { max_restarts: 3, within: Duration::from_secs(5) }
    }
}

/// What the supervisor does about one crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashDecision {
    /// Restart the plugin; `restarts` counts this restart among those in the window.
    Restart {
        /// Restarts within the window, this one included.
        restarts: u32,
    },
    /// The intensity is exceeded: the plugin leaves the chain.
    Remove {
        /// Restarts within the window (none was added).
        restarts: u32,
    },
}

/// The restarts of one plugin within the sliding window.
#[derive(Debug, Clone, Default)]
pub struct RestartWindow {
    intensity: RestartIntensity,
    restarts: VecDeque<Duration>,
}

impl RestartWindow {
    /// An empty window for `intensity`.
    pub fn new(intensity: RestartIntensity) -> Self {
        Self { intensity, restarts: VecDeque::new() }
    }

    /// Records a crash at `now` and decides.
    pub fn on_crash(&mut self, now: Duration) -> CrashDecision {
        while let Some(&oldest) = self.restarts.front() {
            if now.saturating_sub(oldest) >= self.intensity.within {
                self.restarts.pop_front();
            } else {
                break;
            }
        }
        let count = u32::try_from(self.restarts.len()).unwrap_or(u32::MAX);
        if count < self.intensity.max_restarts {
            self.restarts.push_back(now);
            CrashDecision::Restart { restarts: count + 1 }
        } else {
            CrashDecision::Remove { restarts: count }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CrashDecision::{Remove, Restart};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn restarts_are_allowed_up_to_the_intensity_within_the_window() {
        let cases: Vec<(&str, RestartIntensity, Vec<u64>, Vec<CrashDecision>)> = vec![
            (
                "default: the fourth crash within 5 s removes",
                RestartIntensity::default(),
                vec![0, 100, 200, 300],
                vec![
                    Restart { restarts: 1 },
                    Restart { restarts: 2 },
                    Restart { restarts: 3 },
                    Remove { restarts: 3 },
                ],
            ),
            (
                "crashes spread wider than the window keep restarting",
                RestartIntensity::default(),
                vec![0, 5000, 10_000, 15_000, 20_000],
                vec![Restart { restarts: 1 }; 5],
            ),
            (
                "the window slides: a restart 5 s old no longer counts",
                RestartIntensity::default(),
                vec![0, 1000, 2000, 5000, 5999],
                vec![
                    Restart { restarts: 1 },
                    Restart { restarts: 2 },
                    Restart { restarts: 3 },
                    Restart { restarts: 3 },
                    Remove { restarts: 3 },
                ],
            ),
            (
                "zero restarts allowed: the first crash removes",
                RestartIntensity { max_restarts: 0, within: Duration::from_secs(5) },
                vec![0],
                vec![Remove { restarts: 0 }],
            ),
            (
                "one restart per second",
                RestartIntensity { max_restarts: 1, within: Duration::from_secs(1) },
                vec![0, 1000, 1500],
                vec![Restart { restarts: 1 }, Restart { restarts: 1 }, Remove { restarts: 1 }],
            ),
        ];
        for (name, intensity, crashes, expected) in cases {
            let mut window = RestartWindow::new(intensity);
            let got: Vec<CrashDecision> =
                crashes.into_iter().map(|t| window.on_crash(ms(t))).collect();
            assert_eq!(got, expected, "{name}");
        }
    }
}
