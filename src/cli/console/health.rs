//! What the Routes page shows of each route, as data: the breaker's state, the retry budget's
//! tokens, until when it is open, the settings in force, and its changes of state as a timeline.
//!
//! - [`RouteView`]: one route as the runtime has it now (`None` health: route health off).
//! - [`timeline`]: the route's recorded changes ([`HealthHistory`]), newest first, with the
//!   passage from open to half-open — which happens by time alone, at the opening's deadline,
//!   and is not a recorded change — put in where it happened.
//! - [`RouteView::to_json`]: the route in `GET /api/routes`.

use rein_runtime::plugin::PluginSettings;
use rein_runtime::route_health::{BreakerState, HealthChange, HealthHistory, HealthSnapshot};
use serde_json::{Value, json};

/// One route, as the page shows it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RouteView {
    /// Its name.
    pub(crate) name: String,
    /// Its health now; `None`: route health off.
    pub(crate) health: Option<RouteHealth>,
}

/// A route's health now.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RouteHealth {
    /// The breaker and the budget now.
    pub(crate) now: HealthSnapshot,
    /// The settings in force and their revision.
    pub(crate) settings: PluginSettings,
    /// Its recorded changes and counts.
    pub(crate) history: HealthHistory,
    /// The runtime clock now (ms).
    pub(crate) now_ms: u64,
}

/// One entry of a route's timeline.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    /// When.
    pub(crate) at_ms: u64,
    /// From what.
    pub(crate) from: BreakerState,
    /// To what.
    pub(crate) to: BreakerState,
    /// Until when it is open, for an opening.
    pub(crate) open_until_ms: Option<u64>,
    /// The budget's tokens right after (not known for the passage to half-open).
    pub(crate) tokens: Option<f64>,
}

impl Entry {
    fn of(change: &HealthChange) -> Self {
        Self {
            at_ms: change.at_ms,
            from: change.from,
            to: change.to,
            open_until_ms: change.open_until_ms,
            tokens: Some(change.tokens),
        }
    }

    fn half_open(at_ms: u64) -> Self {
        Self {
            at_ms,
            from: BreakerState::Open,
            to: BreakerState::HalfOpen,
            open_until_ms: None,
            tokens: None,
        }
    }
}

/// The changes of `history`, newest first, each opening followed (in time) by its passage to
/// half-open at its deadline when that came before the next change or before `now_ms`.
pub(crate) fn timeline(history: &HealthHistory, now_ms: u64) -> Vec<Entry> {
    let changes: Vec<&HealthChange> = history.changes().collect();
    let mut entries = Vec::with_capacity(changes.len() * 2);
    for (i, change) in changes.iter().enumerate() {
        entries.push(Entry::of(change));
        let next = changes.get(i + 1).map_or(now_ms, |next| next.at_ms);
        if let (BreakerState::Open, Some(until)) = (change.to, change.open_until_ms)
            && until <= next
        {
            entries.push(Entry::half_open(until));
        }
    }
    entries.reverse();
    entries
}

impl RouteView {
    /// The route in `GET /api/routes`: `{"name", "health": null}` with route health off, else
    /// its state, tokens, whether retries are throttled, until when it is open, the settings and
    /// their revision, how many times it opened and closed, and the timeline (`changes`).
    pub(crate) fn to_json(&self) -> Value {
        let Some(health) = &self.health else {
            return json!({"name": self.name, "health": null});
        };
        let now = &health.now;
        let changes: Vec<Value> = timeline(&health.history, health.now_ms)
            .iter()
            .map(|e| {
                let mut entry = json!({"atMs": e.at_ms, "from": e.from, "to": e.to});
                if let Some(until) = e.open_until_ms {
                    entry["openUntilMs"] = until.into();
                }
                if let Some(tokens) = e.tokens {
                    entry["tokens"] = tokens.into();
                }
                entry
            })
            .collect();
        json!({
            "name": self.name,
            "health": {
                "state": now.state,
                "tokens": now.tokens,
                "maxTokens": now.max_tokens,
                "throttled": now.retries_throttled(),
                "openUntilMs": now.open_until_ms,
                "revision": health.settings.revision,
                "settings": health.settings.settings,
                "opened": health.history.opened(),
                "closed": health.history.closed(),
                "changes": changes,
            },
        })
    }

    /// `closed`, `open`, `half-open`, or `off`.
    pub(crate) fn state(&self) -> &'static str {
        self.health.as_ref().map_or("off", |h| h.now.state.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use BreakerState::{Closed, HalfOpen, Open};

    fn snapshot(state: BreakerState, until: Option<u64>) -> HealthSnapshot {
        HealthSnapshot { state, tokens: 2.0, max_tokens: 10.0, open_until_ms: until }
    }

    fn history(changes: &[(u64, BreakerState, BreakerState, Option<u64>)]) -> HealthHistory {
        let mut history = HealthHistory::new();
        for (at, from, to, until) in changes {
            history.record(*at, *from, &snapshot(*to, *until));
        }
        history
    }

    fn seen(entries: &[Entry]) -> Vec<(u64, BreakerState, BreakerState)> {
        entries.iter().map(|e| (e.at_ms, e.from, e.to)).collect()
    }

    #[test]
    fn the_passage_to_half_open_is_put_in_at_the_deadline() {
        let opened = [(100, Closed, Open, Some(1_100))];
        let reopened = [
            (100, Closed, Open, Some(1_100)),
            (1_200, HalfOpen, Open, Some(2_200)),
            (2_300, HalfOpen, Closed, None),
        ];
        // (changes, now, timeline newest first)
        type Seen = Vec<(u64, BreakerState, BreakerState)>;
        let cases: Vec<(&[_], u64, Seen)> = vec![
            (&[], 5_000, vec![]),
            (&opened, 500, vec![(100, Closed, Open)]),
            (&opened, 1_100, vec![(1_100, Open, HalfOpen), (100, Closed, Open)]),
            (
                &reopened,
                9_000,
                vec![
                    (2_300, HalfOpen, Closed),
                    (2_200, Open, HalfOpen),
                    (1_200, HalfOpen, Open),
                    (1_100, Open, HalfOpen),
                    (100, Closed, Open),
                ],
            ),
        ];
        for (changes, now, want) in cases {
            assert_eq!(seen(&timeline(&history(changes), now)), want, "{changes:?} at {now}");
        }
    }

    #[test]
    fn a_route_is_json_with_its_state_settings_and_changes() {
        let off = RouteView { name: "b".into(), health: None };
        assert_eq!(off.to_json(), json!({"name": "b", "health": null}));
        assert_eq!(off.state(), "off");
        let settings =
            PluginSettings { revision: 2, settings: json!({"openMs": 1000}), read_only: false };
        let open = RouteView {
            name: "main".into(),
            health: Some(RouteHealth {
                now: snapshot(Open, Some(1_100)),
                settings,
                history: history(&[(100, Closed, Open, Some(1_100))]),
                now_ms: 500,
            }),
        };
        assert_eq!(open.state(), "open");
        assert_eq!(
            open.to_json(),
            json!({"name": "main", "health": {
                "state": "open", "tokens": 2.0, "maxTokens": 10.0, "throttled": true,
                "openUntilMs": 1100, "revision": 2, "settings": {"openMs": 1000},
                "opened": 1, "closed": 0,
                "changes": [{"atMs": 100, "from": "closed", "to": "open", "openUntilMs": 1100,
                             "tokens": 2.0}],
            }})
        );
    }
}
