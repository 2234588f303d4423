//! [`Breaker`]: a route's circuit breaker, as a pure state machine over explicit times.
//!
//! - **Closed**: every attempt goes through and is counted in the [`Window`]. When the window
//!   holds at least `minAttempts` attempts, at least one failed, and failures reach
//!   `failureRatio` of them, the breaker **opens** until `now + openMs`.
//! - **Open**: attempts are refused at once ([`Admission::Refused`]: the caller fails them with
//!   `CIRCUIT_OPEN`, and sends no request). The first attempt at or after the deadline finds it
//!   **half-open**.
//! - **Half-open**: `probes` attempts go through ([`Ticket::Probe`]); others are refused. A
//!   probe's success closes the breaker (with an empty window); its failure opens it again for
//!   `openMs`; a neutral outcome (a cancelled probe) frees its place for another.
//!
//! Outcomes of attempts admitted while closed that end after the breaker opened are not counted:
//! they say what the route was, not what it is. Each opening has an epoch, and a probe counts
//! only in the half-open period of its own epoch.

use serde::{Deserialize, Serialize};

use super::outcome::Counted;
use super::settings::HealthSettings;
use super::window::Window;

/// The state a breaker shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BreakerState {
    /// Attempts go through.
    Closed,
    /// Attempts fail at once with `CIRCUIT_OPEN`.
    Open,
    /// Probes go through; their outcome closes or reopens it.
    HalfOpen,
}

impl BreakerState {
    /// `closed`, `open` or `half-open`.
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half-open",
        }
    }
}

/// What an admitted attempt carries back to [`Breaker::record`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ticket {
    /// An attempt of a closed breaker.
    Normal,
    /// A probe of the half-open period after opening number `epoch`.
    Probe {
        /// The opening it probes.
        epoch: u64,
    },
}

/// Whether an attempt may go through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Send it; record its outcome with this ticket.
    Admitted(Ticket),
    /// Fail it at once with `CIRCUIT_OPEN`: the breaker is open until `until` (ms), or half-open
    /// with every probe in flight (`until: None`).
    Refused {
        /// When it half-opens.
        until: Option<u64>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Closed,
    Open { until: u64 },
    HalfOpen { in_flight: u32 },
}

/// A route's circuit breaker. See the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Breaker {
    phase: Phase,
    window: Window,
    /// How many times it opened.
    epoch: u64,
}

impl Breaker {
    /// A closed breaker for `settings`.
    pub fn new(settings: &HealthSettings) -> Self {
        Self { phase: Phase::Closed, window: Window::new(settings.window_ms()), epoch: 0 }
    }

    /// The same breaker under new `settings` (a run-time change): its state stays — an open
    /// breaker stays open until the deadline it opened with, a half-open one keeps its probes in
    /// flight — and a new `windowMs` starts an empty window (attempts counted in buckets of the
    /// old width cannot be recounted).
    #[must_use]
    pub fn resized(&self, old: &HealthSettings, settings: &HealthSettings) -> Self {
        let mut breaker = self.clone();
        if old.window_ms() != settings.window_ms() {
            breaker.window = Window::new(settings.window_ms());
        }
        breaker
    }

    /// Whether an attempt at `now` goes through (an open breaker whose time is up half-opens).
    pub fn admit(&mut self, settings: &HealthSettings, now: u64) -> Admission {
        if let Phase::Open { until } = self.phase {
            if now < until {
                return Admission::Refused { until: Some(until) };
            }
            self.phase = Phase::HalfOpen { in_flight: 0 };
        }
        match &mut self.phase {
            Phase::Closed => Admission::Admitted(Ticket::Normal),
            Phase::HalfOpen { in_flight } if *in_flight < settings.probes() => {
                *in_flight += 1;
                Admission::Admitted(Ticket::Probe { epoch: self.epoch })
            }
            Phase::HalfOpen { .. } => Admission::Refused { until: None },
            Phase::Open { until } => Admission::Refused { until: Some(*until) },
        }
    }

    /// Counts the outcome of an attempt admitted with `ticket`, ended at `now`.
    pub fn record(
        &mut self,
        settings: &HealthSettings,
        ticket: Ticket,
        counted: Counted,
        now: u64,
    ) {
        match (ticket, self.phase) {
            (Ticket::Normal, Phase::Closed) => {
                if counted == Counted::Neutral {
                    return;
                }
                self.window.record(now, counted == Counted::Failure);
                let (attempts, failures) = self.window.counts(now);
                if trips(settings, attempts, failures) {
                    self.open(settings, now);
                }
            }
            (Ticket::Probe { epoch }, Phase::HalfOpen { in_flight }) if epoch == self.epoch => {
                match counted {
                    Counted::Success => {
                        self.phase = Phase::Closed;
                        self.window.clear();
                    }
                    Counted::Failure => self.open(settings, now),
                    Counted::Neutral => {
                        self.phase = Phase::HalfOpen { in_flight: in_flight.saturating_sub(1) };
                    }
                }
            }
            // An attempt of an earlier period: it says what the route was, not what it is.
            _ => {}
        }
    }

    /// The state it shows at `now`, and until when it is open (an open breaker whose time is up
    /// shows half-open: the next attempt probes).
    pub fn state(&self, now: u64) -> (BreakerState, Option<u64>) {
        match self.phase {
            Phase::Closed => (BreakerState::Closed, None),
            Phase::Open { until } if now < until => (BreakerState::Open, Some(until)),
            Phase::Open { .. } | Phase::HalfOpen { .. } => (BreakerState::HalfOpen, None),
        }
    }

    fn open(&mut self, settings: &HealthSettings, now: u64) {
        self.epoch += 1;
        self.phase = Phase::Open { until: now.saturating_add(settings.open_ms()) };
        self.window.clear();
    }
}

/// Whether `failures` of `attempts` in the window open a closed breaker.
pub fn trips(settings: &HealthSettings, attempts: u32, failures: u32) -> bool {
    attempts >= settings.min_attempts()
        && failures >= 1
        && f64::from(failures) >= settings.failure_ratio() * f64::from(attempts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use BreakerState::{Closed, HalfOpen, Open};
    use Counted::{Failure as F, Neutral as N, Success as S};

    fn settings(min_attempts: u32, ratio: f64, probes: u32) -> HealthSettings {
        HealthSettings::new()
            .with_min_attempts(min_attempts)
            .and_then(|s| s.with_failure_ratio(ratio))
            .and_then(|s| s.with_probes(probes))
            .and_then(|s| s.with_open_ms(1_000))
            .and_then(|s| s.with_window_ms(10_000))
            .unwrap()
    }

    #[test]
    fn the_trip_rule() {
        let cases = [
            // (minAttempts, ratio, attempts, failures, trips)
            (20, 0.5, 19, 19, false),
            (20, 0.5, 20, 9, false),
            (20, 0.5, 20, 10, true),
            (20, 0.5, 40, 20, true),
            (20, 0.5, 40, 19, false),
            (1, 1.0, 1, 1, true),
            (1, 1.0, 2, 1, false),
            (5, 0.0, 5, 0, false),
            (5, 0.0, 5, 1, true),
        ];
        for (min, ratio, attempts, failures, expected) in cases {
            let s = settings(min, ratio, 1);
            assert_eq!(
                trips(&s, attempts, failures),
                expected,
                "{min} {ratio} {attempts} {failures}"
            );
        }
    }

    /// One step of a breaker's life: at `time`, admit an attempt and record `outcome` for it
    /// (`None`: only admit), then check the admission and the state shown.
    type Step = (u64, Option<Counted>, bool, BreakerState);

    #[test]
    fn closed_open_half_open_and_back() {
        let s = settings(4, 0.5, 1);
        let steps: Vec<Step> = vec![
            (0, Some(S), true, Closed),
            (1, Some(F), true, Closed),
            (2, Some(S), true, Closed),
            // 4 attempts, 2 failed: 0.5 reached — opens until 3 + 1000.
            (3, Some(F), true, Open),
            (500, None, false, Open),
            (1002, None, false, Open),
            // Time is up: the next attempt is the probe; another is refused meanwhile.
            (1003, None, true, HalfOpen),
            (1004, None, false, HalfOpen),
        ];
        let mut breaker = Breaker::new(&s);
        run(&s, &mut breaker, &steps);
        // The probe (admitted at 1003) succeeds: closed, with a fresh window.
        breaker.record(&s, Ticket::Probe { epoch: 1 }, S, 1005);
        assert_eq!(breaker.state(1005), (Closed, None));
        let steps: Vec<Step> = vec![
            (1006, Some(F), true, Closed),
            (1007, Some(F), true, Closed),
            (1008, Some(F), true, Closed),
        ];
        run(&s, &mut breaker, &steps);
    }

    #[test]
    fn a_failed_probe_reopens_a_cancelled_one_frees_its_place() {
        let s = settings(1, 1.0, 2);
        let mut breaker = Breaker::new(&s);
        assert_eq!(breaker.admit(&s, 0), Admission::Admitted(Ticket::Normal));
        breaker.record(&s, Ticket::Normal, F, 0);
        assert_eq!(breaker.state(0), (Open, Some(1000)));
        assert_eq!(breaker.admit(&s, 999), Admission::Refused { until: Some(1000) });
        // Two probes (probes = 2), the third refused.
        let probe = Admission::Admitted(Ticket::Probe { epoch: 1 });
        assert_eq!(breaker.admit(&s, 1000), probe);
        assert_eq!(breaker.admit(&s, 1000), probe);
        assert_eq!(breaker.admit(&s, 1000), Admission::Refused { until: None });
        // A cancelled probe frees its place.
        breaker.record(&s, Ticket::Probe { epoch: 1 }, N, 1001);
        assert_eq!(breaker.state(1001), (HalfOpen, None));
        assert_eq!(breaker.admit(&s, 1001), probe);
        // An attempt of the closed period ending now is not counted.
        breaker.record(&s, Ticket::Normal, S, 1002);
        assert_eq!(breaker.state(1002), (HalfOpen, None));
        // A probe fails: open again for openMs from its end.
        breaker.record(&s, Ticket::Probe { epoch: 1 }, F, 1500);
        assert_eq!(breaker.state(1500), (Open, Some(2500)));
        // The other probes of that period, ending later, change nothing.
        breaker.record(&s, Ticket::Probe { epoch: 1 }, S, 1600);
        assert_eq!(breaker.state(1600), (Open, Some(2500)));
        assert_eq!(breaker.state(2500), (HalfOpen, None), "shown half-open once the time is up");
        assert_eq!(breaker.admit(&s, 2500), Admission::Admitted(Ticket::Probe { epoch: 2 }));
        // An old period's probe cannot close the new one.
        breaker.record(&s, Ticket::Probe { epoch: 1 }, S, 2501);
        assert_eq!(breaker.state(2501), (HalfOpen, None));
        breaker.record(&s, Ticket::Probe { epoch: 2 }, S, 2502);
        assert_eq!(breaker.state(2502), (Closed, None));
    }

    #[test]
    fn neutral_outcomes_are_not_attempts_and_old_failures_leave_the_window() {
        let s = settings(2, 1.0, 1);
        let steps: Vec<Step> = vec![
            (0, Some(F), true, Closed),
            (1, Some(N), true, Closed),
            (2, Some(N), true, Closed),
            // The first failure left the window (10 s): one attempt, below minAttempts.
            (20_000, Some(F), true, Closed),
            (20_001, Some(F), true, Open),
        ];
        let mut breaker = Breaker::new(&s);
        run(&s, &mut breaker, &steps);
        assert_eq!(BreakerState::HalfOpen.as_str(), "half-open");
        assert_eq!(serde_json::to_value(HalfOpen).unwrap(), "half-open");
    }

    fn run(s: &HealthSettings, breaker: &mut Breaker, steps: &[Step]) {
        for (time, outcome, admitted, state) in steps {
            let admission = breaker.admit(s, *time);
            assert_eq!(matches!(admission, Admission::Admitted(_)), *admitted, "at {time}");
            if let (Admission::Admitted(ticket), Some(outcome)) = (admission, outcome) {
                breaker.record(s, ticket, *outcome, *time);
            }
            assert_eq!(breaker.state(*time).0, *state, "at {time}");
        }
    }
}
