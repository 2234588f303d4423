//! What a scenario does next: the pure schedule behind the runner.
//!
//! The runner owns the session and the clock; the [`Agenda`] owns the plan — the turns still to
//! prompt, the actions still to run, and a `retry` waiting for the running turn to end — and
//! answers one question, "given the time and whether a turn runs, what now?" ([`Agenda::next`]).
//!
//! The rules:
//! 1. Actions that are due (`atMs` ≤ now) run first, in order — so an action at 0 (say a
//!    `configure`) applies before the first turn starts.
//! 2. A `retry` that comes due while a turn runs waits for that turn to end, then applies to it
//!    (a session retries only when nothing runs). It goes before the next planned turn.
//! 3. With no turn running, the next planned turn starts.
//! 4. Otherwise the runner waits — for the running turn, for the next action, or both.
//! 5. The scenario is over when no turn runs, no turn is planned, no retry waits and no action
//!    is left.

use std::collections::VecDeque;

use super::format::{Action, ActionKind, TurnPlan};

/// The runner's next move.
#[derive(Debug, Clone, PartialEq)]
pub enum Move {
    /// Run this action now.
    Act(Action),
    /// Retry the last turn (a `retry` action that was due, or waited for its turn to end).
    Retry(Action),
    /// Prompt this planned turn.
    Prompt(TurnPlan),
    /// Wait for the running turn to end (if any) and until `until_ms` (if any), whichever is
    /// first.
    Wait {
        /// The virtual time of the next action.
        until_ms: Option<u64>,
    },
    /// Nothing is left to do.
    Done,
}

/// The plan of a scenario run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Agenda {
    turns: VecDeque<TurnPlan>,
    actions: VecDeque<Action>,
    deferred_retry: Option<Action>,
}

impl Agenda {
    /// The plan: turns in order, actions sorted by time (as [`super::format::Scenario`] holds
    /// them).
    pub fn new(turns: Vec<TurnPlan>, actions: Vec<Action>) -> Self {
        Self { turns: turns.into(), actions: actions.into(), deferred_retry: None }
    }

    /// The next move at virtual time `now_ms`, with or without a turn running.
    pub fn next(&mut self, now_ms: u64, turn_running: bool) -> Move {
        while self.actions.front().is_some_and(|a| a.at_ms <= now_ms) {
            let Some(action) = self.actions.pop_front() else { break };
            if action.kind != ActionKind::Retry {
                return Move::Act(action);
            }
            if !turn_running {
                return Move::Retry(action);
            }
            // A second retry due while the same turn runs asks for the same thing; the first
            // one (earliest in the file) is the one that applies.
            if self.deferred_retry.is_none() {
                self.deferred_retry = Some(action);
            }
        }
        if !turn_running {
            if let Some(retry) = self.deferred_retry.take() {
                return Move::Retry(retry);
            }
            if let Some(turn) = self.turns.pop_front() {
                return Move::Prompt(turn);
            }
        }
        let until_ms = self.actions.front().map(|a| a.at_ms);
        if !turn_running && until_ms.is_none() {
            return Move::Done;
        }
        Move::Wait { until_ms }
    }

    /// The planned turns that will not run (after the run was cut short).
    pub fn unrun_turns(&self) -> usize {
        self.turns.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(prompt: &str) -> TurnPlan {
        TurnPlan { prompt: prompt.into(), provider: "mock".into() }
    }

    fn action(at_ms: u64, kind: ActionKind, index: usize) -> Action {
        Action { at_ms, kind, path: format!("actions[{index}]") }
    }

    fn dispose(at_ms: u64, index: usize) -> Action {
        action(at_ms, ActionKind::Dispose { plugin: "p".into() }, index)
    }

    /// Drives an agenda through `(now, running)` observations, collecting the moves.
    fn walk(agenda: &mut Agenda, steps: &[(u64, bool)]) -> Vec<Move> {
        steps.iter().map(|&(now, running)| agenda.next(now, running)).collect()
    }

    #[test]
    fn turns_run_one_after_another_then_the_run_is_done() {
        let mut agenda = Agenda::new(vec![turn("a"), turn("b")], vec![]);
        assert_eq!(
            walk(&mut agenda, &[(0, false), (0, true), (40, false), (40, true), (90, false)]),
            [
                Move::Prompt(turn("a")),
                Move::Wait { until_ms: None },
                Move::Prompt(turn("b")),
                Move::Wait { until_ms: None },
                Move::Done,
            ]
        );
    }

    #[test]
    fn due_actions_run_before_the_first_turn_and_in_order() {
        let configure = action(
            0,
            ActionKind::Configure {
                plugin: "p".into(),
                patch: serde_json::json!({}),
                revision: None,
            },
            0,
        );
        let mut agenda = Agenda::new(vec![turn("a")], vec![configure.clone(), dispose(0, 1)]);
        assert_eq!(
            walk(&mut agenda, &[(0, false), (0, false), (0, false)]),
            [Move::Act(configure), Move::Act(dispose(0, 1)), Move::Prompt(turn("a"))]
        );
    }

    #[test]
    fn the_runner_waits_for_the_next_action_while_a_turn_runs() {
        let cancel = action(700, ActionKind::Cancel, 0);
        let mut agenda = Agenda::new(vec![turn("a")], vec![cancel.clone()]);
        assert_eq!(
            walk(&mut agenda, &[(0, false), (0, true), (699, true), (700, true), (700, true)]),
            [
                Move::Prompt(turn("a")),
                Move::Wait { until_ms: Some(700) },
                Move::Wait { until_ms: Some(700) },
                Move::Act(cancel),
                Move::Wait { until_ms: None },
            ]
        );
    }

    #[test]
    fn actions_after_the_last_turn_still_run_before_the_end() {
        let mut agenda = Agenda::new(vec![turn("a")], vec![dispose(5000, 0)]);
        assert_eq!(
            walk(&mut agenda, &[(0, false), (10, false), (5000, false), (5000, false)]),
            [
                Move::Prompt(turn("a")),
                Move::Wait { until_ms: Some(5000) },
                Move::Act(dispose(5000, 0)),
                Move::Done,
            ]
        );
    }

    #[test]
    fn a_retry_due_while_a_turn_runs_waits_for_it_and_goes_before_the_next_planned_turn() {
        let retry = action(100, ActionKind::Retry, 0);
        let late = action(100, ActionKind::Retry, 1);
        let mut agenda = Agenda::new(vec![turn("a"), turn("b")], vec![retry.clone(), late]);
        assert_eq!(
            walk(&mut agenda, &[(0, false), (100, true), (300, false), (300, true), (400, false)]),
            [
                Move::Prompt(turn("a")),
                Move::Wait { until_ms: None },
                Move::Retry(retry),
                Move::Wait { until_ms: None },
                Move::Prompt(turn("b")),
            ],
            "the second retry due at the same time collapses into the first"
        );
    }

    #[test]
    fn a_retry_due_while_nothing_runs_applies_at_once() {
        let retry = action(1000, ActionKind::Retry, 0);
        let mut agenda = Agenda::new(vec![turn("a")], vec![retry.clone()]);
        assert_eq!(
            walk(
                &mut agenda,
                &[(0, false), (500, false), (1000, false), (1000, true), (1200, false)]
            ),
            [
                Move::Prompt(turn("a")),
                Move::Wait { until_ms: Some(1000) },
                Move::Retry(retry),
                Move::Wait { until_ms: None },
                Move::Done,
            ]
        );
    }

    #[test]
    fn unrun_turns_are_counted() {
        let mut agenda = Agenda::new(vec![turn("a"), turn("b"), turn("c")], vec![]);
        assert_eq!(agenda.next(0, false), Move::Prompt(turn("a")));
        assert_eq!(agenda.unrun_turns(), 2);
    }
}
