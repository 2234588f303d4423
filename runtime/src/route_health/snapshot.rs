//! [`HealthSnapshot`]: one route's health at one moment, as plugins, a console or a test read it;
//! [`HealthReport`]: every route's, at the moment a failure was offered to the waterfall.
//!
//! Plain data (serializable, camelCase on the wire): a plugin decides from it as a pure
//! function, and a console shows it without asking the route.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::breaker::BreakerState;

/// One route's health at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthSnapshot {
    /// The breaker's state.
    pub state: BreakerState,
    /// The tokens in the retry budget.
    pub tokens: f64,
    /// The budget's capacity (`maxTokens`).
    pub max_tokens: f64,
    /// Until when (clock ms) the breaker is open; `None` unless open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_until_ms: Option<u64>,
}

impl HealthSnapshot {
    /// Whether retries on the route are throttled: the budget holds `maxTokens / 2` or less.
    pub fn retries_throttled(&self) -> bool {
        self.tokens * 2.0 <= self.max_tokens
    }

    /// Whether the breaker is open (attempts fail at once with `CIRCUIT_OPEN`).
    pub fn is_open(&self) -> bool {
        self.state == BreakerState::Open
    }
}

/// Every route's health (the routes that have health settings), by route name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct HealthReport {
    routes: BTreeMap<String, HealthSnapshot>,
}

impl HealthReport {
    /// No route has health.
    pub fn new() -> Self {
        Self::default()
    }

    /// The report with `route`'s snapshot.
    #[must_use]
    pub fn with(mut self, route: impl Into<String>, snapshot: HealthSnapshot) -> Self {
        self.routes.insert(route.into(), snapshot);
        self
    }

    /// `route`'s snapshot; `None` when it has no health settings (or no such route).
    pub fn route(&self, route: &str) -> Option<&HealthSnapshot> {
        self.routes.get(route)
    }

    /// Whether retries on `route` are throttled (never for a route without health).
    pub fn retries_throttled(&self, route: &str) -> bool {
        self.route(route).is_some_and(HealthSnapshot::retries_throttled)
    }

    /// The routes whose breaker is open, sorted.
    pub fn open_routes(&self) -> Vec<String> {
        self.routes.iter().filter(|(_, s)| s.is_open()).map(|(name, _)| name.clone()).collect()
    }

    /// Every route's snapshot, by name.
    pub fn routes(&self) -> &BTreeMap<String, HealthSnapshot> {
        &self.routes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(state: BreakerState, tokens: f64) -> HealthSnapshot {
        let open_until_ms = (state == BreakerState::Open).then_some(5000);
        HealthSnapshot { state, tokens, max_tokens: 10.0, open_until_ms }
    }

    #[test]
    fn throttled_at_half_and_open_routes_listed() {
        let cases = [(10.0, false), (5.1, false), (5.0, true), (0.0, true)];
        for (tokens, throttled) in cases {
            assert_eq!(
                snapshot(BreakerState::Closed, tokens).retries_throttled(),
                throttled,
                "{tokens}"
            );
        }
        let report = HealthReport::new()
            .with("a", snapshot(BreakerState::Open, 0.0))
            .with("b", snapshot(BreakerState::HalfOpen, 4.0))
            .with("c", snapshot(BreakerState::Closed, 10.0));
        assert_eq!(report.open_routes(), ["a"]);
        assert!(report.retries_throttled("b"));
        assert!(!report.retries_throttled("c"));
        assert!(!report.retries_throttled("none"), "a route without health is never throttled");
        assert_eq!(
            serde_json::to_value(report.route("a")).unwrap(),
            serde_json::json!({"state": "open", "tokens": 0.0, "maxTokens": 10.0, "openUntilMs": 5000})
        );
    }
}
