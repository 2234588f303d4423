//! The simulated provider's outage (`--outage-ms`, `--outage-at-ms`), and what reaches the
//! provider while the route's breaker is open.
//!
//! `Down` is the adapter of the run's route when it has an outage or route health: the
//! simulated provider, except that every request of the outage's window fails at once with a
//! 503 (`SERVER`, the way a provider that is down answers), whatever the seed would have drawn.
//! The window is set when the agents start (`Down::start`), in the runtime clock's ms, so it
//! compares with the logs' times; the provider does not know the route's breaker, and the logs
//! show what the runtime did about the outage.
//!
//! It also counts the requests that reached it while the route's breaker was open — what a
//! breaker exists to prevent: an open breaker refuses attempts with `CIRCUIT_OPEN` before any
//! request. A request counts when it arrives after the millisecond the breaker opened and before
//! its `openUntilMs` (the half-open probes come after); the breaker's state is read from the
//! route's published changes (`Runtime::route_health_changes`), handed over once the runtime is
//! built (`Down::watch`).

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use tokio::sync::watch;

use crate::providers::Simulated;
use crate::runtime::BoxFuture;
use crate::runtime::clock::Clock;
use crate::runtime::failure::Failure;
use crate::runtime::provider::{Adapter, ChunkSink, Completion, Request};
use crate::runtime::route_health::{BreakerState, HealthSnapshot};

/// A window of the run in which the simulated provider fails every request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Outage {
    /// When it starts, in ms from the agents' start (`--outage-at-ms`).
    pub at_ms: u64,
    /// How long it lasts, in ms (`--outage-ms`).
    pub ms: u64,
}

impl Outage {
    /// Its window in clock ms, for a run whose agents started at `start_ms`.
    pub fn window(&self, start_ms: u64) -> Range<u64> {
        let from = start_ms.saturating_add(self.at_ms);
        from..from.saturating_add(self.ms)
    }
}

/// The message of a request the outage failed.
pub const MESSAGE: &str = "The service is unavailable (simulated outage)";

/// The failure of a request during the outage: a 503.
pub fn failure() -> Failure {
    Failure::new("SERVER", MESSAGE)
        .and_then(|f| f.with_status(503))
        .unwrap_or_else(|_| Failure::internal("SERVER", MESSAGE))
}

/// The run's adapter: the simulated provider, down during the outage. See the module docs.
pub(crate) struct Down {
    simulated: Simulated,
    outage: Option<Outage>,
    clock: Arc<dyn Clock>,
    /// The outage's window in clock ms, once the agents started.
    window: OnceLock<Range<u64>>,
    /// The route's breaker (its published changes) and its `openMs`, once the runtime is built.
    breaker: OnceLock<(watch::Receiver<HealthSnapshot>, u64)>,
    while_open: AtomicU64,
}

impl Down {
    /// `simulated`, down during `outage` (if any), on `clock`.
    pub(crate) fn new(simulated: Simulated, outage: Option<Outage>, clock: Arc<dyn Clock>) -> Self {
        Self {
            simulated,
            outage,
            clock,
            window: OnceLock::new(),
            breaker: OnceLock::new(),
            while_open: AtomicU64::new(0),
        }
    }

    /// The agents start now: the outage's window is set from the clock.
    pub(crate) fn start(&self) -> Option<Range<u64>> {
        let outage = self.outage?;
        Some(self.window.get_or_init(|| outage.window(self.clock.now_ms())).clone())
    }

    /// Watches the route's breaker (`changes`: its published changes; `open_ms`: how long it
    /// opens for), to count the requests that reach the provider while it is open.
    pub(crate) fn watch(&self, changes: watch::Receiver<HealthSnapshot>, open_ms: u64) {
        let _ = self.breaker.set((changes, open_ms));
    }

    /// The requests that reached the provider while the breaker was open.
    pub(crate) fn requests_while_open(&self) -> u64 {
        self.while_open.load(Ordering::Relaxed)
    }

    /// Whether the breaker is open at `now` by its latest published change (see the module
    /// docs: after the millisecond it opened, before its deadline).
    fn open_at(&self, now: u64) -> bool {
        let Some((changes, open_ms)) = self.breaker.get() else { return false };
        let latest = changes.borrow();
        match (latest.state, latest.open_until_ms) {
            (BreakerState::Open, Some(until)) => {
                until.saturating_sub(*open_ms) < now && now < until
            }
            _ => false,
        }
    }
}

impl Adapter for Down {
    fn call(
        &self,
        request: Request,
        chunks: ChunkSink,
    ) -> BoxFuture<'static, Result<Completion, Failure>> {
        let now = self.clock.now_ms();
        if self.open_at(now) {
            self.while_open.fetch_add(1, Ordering::Relaxed);
        }
        if self.window.get().is_some_and(|window| window.contains(&now)) {
            return Box::pin(std::future::ready(Err(failure())));
        }
        self.simulated.call(request, chunks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::SimulatedConfig;
    use crate::runtime::clock::VirtualClock;
    use crate::runtime::provider::Messages;
    use std::time::Duration;

    fn request() -> Request {
        Request {
            session: "agent-00000".into(),
            turn: 1,
            step: 1,
            attempt: 1,
            provider: "simulated".into(),
            model: "simulated-1".into(),
            messages: Messages::default(),
            tools: vec![],
            generation: Default::default(),
        }
    }

    fn snapshot(state: BreakerState, open_until_ms: Option<u64>) -> HealthSnapshot {
        HealthSnapshot { state, tokens: 0.0, max_tokens: 10.0, open_until_ms }
    }

    #[tokio::test(start_paused = true)]
    async fn every_request_of_the_window_fails_with_a_503_and_the_others_go_through() {
        let simulated = Simulated::new(SimulatedConfig {
            first_chunk_latency_ms: 0..=0,
            chunk_latency_ms: 0..=0,
            ..SimulatedConfig::faultless(1)
        })
        .unwrap();
        let clock = Arc::new(VirtualClock::start());
        let down = Down::new(simulated, Some(Outage { at_ms: 100, ms: 50 }), clock.clone());
        let ask = || down.call(request(), ChunkSink::channel().0);
        assert!(ask().await.is_ok(), "no window before the agents start");
        tokio::time::advance(Duration::from_millis(10)).await;
        assert_eq!(down.start(), Some(110..160), "from the agents' start");
        // (clock ms, fails)
        for (at, fails) in [(109, false), (110, true), (159, true), (160, false)] {
            tokio::time::advance(Duration::from_millis(at - clock.now_ms())).await;
            match ask().await {
                Err(failure) => {
                    assert!(fails, "{at}: {failure:?}");
                    assert_eq!((failure.code(), failure.status()), ("SERVER", Some(503)));
                    assert_eq!(failure.message(), MESSAGE);
                }
                Ok(_) => assert!(!fails, "{at}"),
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_counts_while_open_only_between_the_opening_and_its_deadline() {
        let simulated = Simulated::new(SimulatedConfig::faultless(1)).unwrap();
        let clock = Arc::new(VirtualClock::start());
        let down = Down::new(simulated, None, clock);
        assert_eq!(down.start(), None, "no outage, no window");
        let (tx, rx) = watch::channel(snapshot(BreakerState::Closed, None));
        down.watch(rx, 1_000);
        // Opened at 100 until 1,100.
        tx.send_replace(snapshot(BreakerState::Open, Some(1_100)));
        // (now, counted): the opening's own ms may hold attempts admitted just before it.
        let cases = [(99, false), (100, false), (101, true), (1_099, true), (1_100, false)];
        for (now, counted) in cases {
            assert_eq!(down.open_at(now), counted, "{now}");
        }
        tx.send_replace(snapshot(BreakerState::Closed, None));
        assert!(!down.open_at(500), "closed");
        assert_eq!(down.requests_while_open(), 0);
    }
}
