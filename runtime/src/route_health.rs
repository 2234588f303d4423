//! Route health (`docs/runtime-semantics.md`, "Route health"): a retry budget and a circuit
//! breaker per provider route, shared by every session of the runtime, so that an outage does not
//! become a retry storm.
//!
//! # Layout
//!
//! The pure core (time is an input in ms, never read from a clock):
//! - [`settings`](HealthSettings): the settings, valid by construction, read strictly from a
//!   configuration value with errors naming the field path;
//! - `outcome`: [`Counted`], what an attempt's outcome says about its route;
//! - `budget`: [`RetryBudget`], gRPC's retry throttling token bucket;
//! - `window`: [`Window`], the attempts and failures of the last `windowMs`, in buckets;
//! - `breaker`: [`Breaker`], closed → open → half-open → closed;
//! - `snapshot`: [`HealthSnapshot`] and [`HealthReport`], what plugins and consoles read;
//! - `history`: [`HealthHistory`], the latest changes of state with their times, and the counts;
//! - here: [`RouteHealth`], the budget and the breaker of one route together, and
//!   [`circuit_open`], the failure of an attempt an open breaker refused.
//!
//! The shell: `cell` holds a route's [`RouteHealth`] for its provider actor, the attempts' tasks
//! and the runtime's accessors, reads the clock, and publishes each change of state.

mod breaker;
mod budget;
pub(crate) mod cell;
mod history;
mod outcome;
mod settings;
mod snapshot;
mod window;

pub use breaker::{Admission, Breaker, BreakerState, Ticket, trips};
pub use budget::RetryBudget;
pub use history::{HealthChange, HealthHistory, KEPT};
pub use outcome::{Counted, NEUTRAL_CODES, counted};
pub use settings::{
    DEFAULT_FAILURE_RATIO, DEFAULT_MAX_TOKENS, DEFAULT_MIN_ATTEMPTS, DEFAULT_OPEN_MS,
    DEFAULT_PROBES, DEFAULT_TOKEN_RATIO, DEFAULT_WINDOW_MS, HealthError, HealthSettings, KEYS,
    MAX_MS, MAX_TOKENS_LIMIT,
};
pub use snapshot::{HealthReport, HealthSnapshot};
pub use window::Window;

use crate::failure::{self, Failure};

/// One route's health: its settings, retry budget and circuit breaker.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteHealth {
    settings: HealthSettings,
    budget: RetryBudget,
    breaker: Breaker,
}

impl RouteHealth {
    /// A healthy route: a full budget, a closed breaker.
    pub fn new(settings: HealthSettings) -> Self {
        let budget = RetryBudget::new(&settings);
        let breaker = Breaker::new(&settings);
        Self { settings, budget, breaker }
    }

    /// Its settings.
    pub fn settings(&self) -> &HealthSettings {
        &self.settings
    }

    /// Takes new `settings` (a run-time change) keeping its state: see [`RetryBudget::resized`]
    /// and [`Breaker::resized`].
    pub fn reconfigure(&mut self, settings: HealthSettings) {
        self.budget = self.budget.resized(&settings);
        self.breaker = self.breaker.resized(&self.settings, &settings);
        self.settings = settings;
    }

    /// Whether an attempt at `now` goes through (see [`Breaker::admit`]).
    pub fn admit(&mut self, now: u64) -> Admission {
        self.breaker.admit(&self.settings, now)
    }

    /// Counts the outcome of an attempt admitted with `ticket`, ended at `now`: in the budget
    /// whatever the breaker's state (every attempt sent is one the route served or failed), and in
    /// the breaker as [`Breaker::record`] says.
    pub fn record(&mut self, ticket: Ticket, counted: Counted, now: u64) {
        self.budget.record(counted);
        self.breaker.record(&self.settings, ticket, counted, now);
    }

    /// Its health at `now`.
    pub fn snapshot(&self, now: u64) -> HealthSnapshot {
        let (state, open_until_ms) = self.breaker.state(now);
        HealthSnapshot {
            state,
            tokens: self.budget.tokens(),
            max_tokens: self.budget.max_tokens(),
            open_until_ms,
        }
    }
}

/// The failure of an attempt on `route` that the breaker refused (`until`: when it half-opens,
/// `None` when half-open with every probe in flight). No request was sent.
pub fn circuit_open(route: &str, until: Option<u64>) -> Failure {
    let message = match until {
        Some(until) => format!(
            "route {route:?} is open (circuit breaker) until {until} ms: no request was sent"
        ),
        None => format!(
            "route {route:?} is half-open (circuit breaker) and its probes are in flight: no \
             request was sent"
        ),
    };
    Failure::internal(failure::CIRCUIT_OPEN, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_counts_every_attempt_the_breaker_only_its_own_period() {
        let settings =
            HealthSettings::new().with_min_attempts(2).and_then(|s| s.with_open_ms(100)).unwrap();
        let mut health = RouteHealth::new(settings);
        let server = Failure::new("SERVER", "down").unwrap();
        let snap = |h: &RouteHealth, now| h.snapshot(now);
        assert_eq!(
            snap(&health, 0),
            HealthSnapshot {
                state: BreakerState::Closed,
                tokens: 10.0,
                max_tokens: 10.0,
                open_until_ms: None
            }
        );
        // Two attempts admitted while closed; the first failure alone does not trip (minAttempts 2).
        let (Admission::Admitted(a), Admission::Admitted(b)) = (health.admit(0), health.admit(0))
        else {
            panic!("a closed breaker admits");
        };
        health.record(a, counted::<()>(Err(&server)), 1);
        assert_eq!((snap(&health, 1).state, snap(&health, 1).tokens), (BreakerState::Closed, 9.0));
        health.record(b, counted::<()>(Err(&server)), 2);
        let open = snap(&health, 2);
        assert_eq!(
            (open.state, open.tokens, open.open_until_ms),
            (BreakerState::Open, 8.0, Some(102))
        );
        assert_eq!(health.admit(50), Admission::Refused { until: Some(102) });
        assert_eq!(snap(&health, 102).state, BreakerState::HalfOpen);
        let Admission::Admitted(probe) = health.admit(102) else { panic!("the probe goes") };
        health.record(probe, Counted::Success, 110);
        let closed = snap(&health, 110);
        assert_eq!((closed.state, closed.tokens), (BreakerState::Closed, 8.1));
        assert!(!closed.retries_throttled());

        let refused = circuit_open("main", Some(102));
        assert_eq!(refused.code(), "CIRCUIT_OPEN");
        assert_eq!(
            refused.message(),
            r#"route "main" is open (circuit breaker) until 102 ms: no request was sent"#
        );
        assert!(circuit_open("main", None).message().contains("half-open"));
    }

    #[test]
    fn a_reconfigured_route_keeps_its_state() {
        let settings = HealthSettings::new().with_min_attempts(1).unwrap();
        let mut health = RouteHealth::new(settings.clone());
        let server = Failure::new("SERVER", "down").unwrap();
        let Admission::Admitted(ticket) = health.admit(0) else { panic!("closed admits") };
        health.record(ticket, counted::<()>(Err(&server)), 5);
        assert_eq!(health.snapshot(5).open_until_ms, Some(30_005));
        // A shorter openMs does not cut the opening short; the tokens stay.
        health.reconfigure(settings.with_open_ms(10).unwrap().with_window_ms(500).unwrap());
        let now = health.snapshot(20);
        assert_eq!(
            (now.state, now.open_until_ms, now.tokens),
            (BreakerState::Open, Some(30_005), 9.0)
        );
        assert_eq!(health.settings().open_ms(), 10);
        // The next opening uses it.
        let Admission::Admitted(probe) = health.admit(30_005) else { panic!("half-open probes") };
        health.record(probe, counted::<()>(Err(&server)), 30_006);
        assert_eq!(health.snapshot(30_006).open_until_ms, Some(30_016));
    }
}
