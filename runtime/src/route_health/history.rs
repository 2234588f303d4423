//! [`HealthHistory`]: a route's latest changes of state, each with when it happened, and how many
//! times its breaker opened and closed since the runtime started — what a console lists and a
//! stress run counts, read at any time without having watched the changes as they came.
//!
//! A change is recorded where it happens (closed → open when failures trip the breaker,
//! half-open → open when a probe fails, half-open → closed when one succeeds). Open → half-open is
//! not a change of its own: it happens by the passing of time, at the opening's `openUntilMs`,
//! and the next change's `from` (half-open) says it happened. Bounded: the latest [`KEPT`]
//! changes, the counts over all of them.

use std::collections::VecDeque;

use serde::Serialize;

use super::breaker::BreakerState;
use super::snapshot::HealthSnapshot;

/// How many changes a history keeps (the oldest go first).
pub const KEPT: usize = 32;

/// One change of a route's breaker state.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthChange {
    /// When (the runtime clock's ms).
    pub at_ms: u64,
    /// The state before.
    pub from: BreakerState,
    /// The state after.
    pub to: BreakerState,
    /// Until when it is open, when it opened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_until_ms: Option<u64>,
    /// The retry budget's tokens right after.
    pub tokens: f64,
}

/// A route's latest changes and its counts. See the module docs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthHistory {
    changes: VecDeque<HealthChange>,
    opened: u64,
    closed: u64,
}

impl HealthHistory {
    /// No change yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a change at `at_ms` from `from` to what `after` shows (nothing when the state is
    /// the same).
    pub fn record(&mut self, at_ms: u64, from: BreakerState, after: &HealthSnapshot) {
        if after.state == from {
            return;
        }
        match after.state {
            BreakerState::Open => self.opened += 1,
            BreakerState::Closed => self.closed += 1,
            BreakerState::HalfOpen => {}
        }
        if self.changes.len() == KEPT {
            self.changes.pop_front();
        }
        self.changes.push_back(HealthChange {
            at_ms,
            from,
            to: after.state,
            open_until_ms: after.open_until_ms,
            tokens: after.tokens,
        });
    }

    /// The latest changes, oldest first.
    pub fn changes(&self) -> impl DoubleEndedIterator<Item = &HealthChange> + ExactSizeIterator {
        self.changes.iter()
    }

    /// How many times the breaker opened (again) since the runtime started.
    pub fn opened(&self) -> u64 {
        self.opened
    }

    /// How many times it closed.
    pub fn closed(&self) -> u64 {
        self.closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use BreakerState::{Closed, HalfOpen, Open};

    fn snapshot(state: BreakerState, until: Option<u64>) -> HealthSnapshot {
        HealthSnapshot { state, tokens: 4.0, max_tokens: 10.0, open_until_ms: until }
    }

    #[test]
    fn changes_are_kept_with_their_time_and_counted() {
        let mut history = HealthHistory::new();
        // (at, from, after) → recorded
        let cases = [
            (10, Closed, snapshot(Open, Some(1_010)), true),
            (20, Open, snapshot(Open, Some(1_010)), false),
            (1_500, HalfOpen, snapshot(Open, Some(2_500)), true),
            (2_600, HalfOpen, snapshot(Closed, None), true),
        ];
        for (at, from, after, recorded) in &cases {
            let before = history.changes().len();
            history.record(*at, *from, after);
            assert_eq!(history.changes().len() > before, *recorded, "{at}");
        }
        assert_eq!((history.opened(), history.closed()), (2, 1));
        let seen: Vec<(u64, BreakerState, BreakerState, Option<u64>)> =
            history.changes().map(|c| (c.at_ms, c.from, c.to, c.open_until_ms)).collect();
        assert_eq!(
            seen,
            [
                (10, Closed, Open, Some(1_010)),
                (1_500, HalfOpen, Open, Some(2_500)),
                (2_600, HalfOpen, Closed, None)
            ]
        );
        assert_eq!(
            serde_json::to_value(history.changes().next().unwrap()).unwrap(),
            serde_json::json!({"atMs": 10, "from": "closed", "to": "open", "openUntilMs": 1010, "tokens": 4.0})
        );
    }

    #[test]
    fn only_the_latest_changes_are_kept_and_the_counts_go_on() {
        let mut history = HealthHistory::new();
        for i in 0..100u64 {
            let (from, after) = match i % 2 {
                0 => (HalfOpen, snapshot(Open, Some(i + 1))),
                _ => (HalfOpen, snapshot(Closed, None)),
            };
            history.record(i, from, &after);
        }
        assert_eq!(history.changes().len(), KEPT);
        assert_eq!(history.changes().next().map(|c| c.at_ms), Some(100 - KEPT as u64));
        assert_eq!(history.changes().next_back().map(|c| c.at_ms), Some(99));
        assert_eq!((history.opened(), history.closed()), (50, 50));
    }
}
