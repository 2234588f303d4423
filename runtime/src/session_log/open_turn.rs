//! The open-turn projection: where a session's turn lifecycle stands, and the repair a reopen
//! appends when a crash left it open.
//!
//! [`OpenTurn`] knows the open turn and step (if any), the numbers of the last turn, step and
//! attempt started, and how the last turn ended. The agent runtime reads it to number the next
//! turn, step and attempt after a restart, and to decide whether a manual `retry()` applies (the
//! last turn failed).
//!
//! # Why repair is a function of this fold
//!
//! Reopening must close exactly what is open, no more: a `step/end` only for an open step, a
//! `turn/end {kind:"interrupted"}` only for an open turn, then `agent/idle` because after a crash
//! nothing runs and the in-memory queue is gone. [`OpenTurn::repair`] derives those events from
//! the fold, so "what a reopen appends" is a pure function with a table test, and folding the
//! repaired log gives a closed state by construction.

use crate::event::{AgentIdle, Envelope, Event, StepRef, TurnEnd, TurnEndReason};
use crate::projection::Projection;

/// Where the turn lifecycle of a session stands, folded from its log.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OpenTurn {
    /// The open turn: a `turn/start` without its `turn/end`.
    pub turn: Option<u32>,
    /// The open step of the open turn: a `step/start` without its `step/end`.
    pub step: Option<u32>,
    /// The number of the last turn started (0 before the first).
    pub last_turn: u32,
    /// The number of the last step started in the last turn (0 before its first step).
    pub last_step: u32,
    /// The number of the last attempt started in the last step (0 before its first attempt).
    pub last_attempt: u32,
    /// The `turn/end` of the last turn that ended.
    pub last_end: Option<TurnEnd>,
    /// A turn ended and neither `agent/idle` nor another `turn/start` followed yet.
    pub idle_due: bool,
}

impl OpenTurn {
    /// Whether a turn is open.
    pub fn is_open(&self) -> bool {
        self.turn.is_some()
    }

    /// The number the next turn takes.
    pub fn next_turn(&self) -> u32 {
        self.last_turn.saturating_add(1)
    }

    /// Whether no turn is open and the last turn that ended failed: it ended with an error, or a
    /// crash interrupted it. A turn the user aborted, that completed, or that hit its step limit
    /// did not fail.
    pub fn last_turn_failed(&self) -> bool {
        !self.is_open()
            && matches!(
                self.last_end.as_ref().map(|end| &end.reason),
                Some(TurnEndReason::Error { .. } | TurnEndReason::Interrupted)
            )
    }

    /// Folds one event.
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::TurnStart(start) => {
                self.turn = Some(start.turn);
                self.step = None;
                self.last_turn = start.turn;
                self.last_step = 0;
                self.last_attempt = 0;
                self.idle_due = false;
            }
            Event::StepStart(step) => {
                self.step = Some(step.step);
                self.last_step = step.step;
                self.last_attempt = 0;
            }
            Event::RequestStart(request) => self.last_attempt = request.attempt,
            Event::StepEnd(_) => self.step = None,
            Event::TurnEnd(end) => {
                self.turn = None;
                self.step = None;
                self.last_end = Some(end.clone());
                self.idle_due = true;
            }
            Event::AgentIdle(_) => self.idle_due = false,
            _ => {}
        }
    }

    /// The events that close turn `turn` with `reason`, in order: `step/end` for its open step,
    /// then `turn/end`. Nothing when `turn` is not the open turn (it already ended, or never
    /// started): a turn is closed exactly once, by whoever comes first.
    pub fn closing(&self, turn: u32, reason: TurnEndReason) -> Vec<Event> {
        if self.turn != Some(turn) {
            return Vec::new();
        }
        let mut events = Vec::with_capacity(2);
        if let Some(step) = self.step {
            events.push(Event::StepEnd(StepRef { turn, step }));
        }
        events.push(Event::TurnEnd(TurnEnd { turn, reason }));
        events
    }

    /// The events a reopen appends to close what a crash left open, in order: `step/end` for an
    /// open step, `turn/end {kind:"interrupted"}` for an open turn, then `agent/idle`. When no
    /// turn is open but the last `turn/end` was not followed by `agent/idle`, only `agent/idle`.
    /// Nothing for a closed log.
    pub fn repair(&self) -> Vec<Event> {
        let mut events = match self.turn {
            Some(turn) => self.closing(turn, TurnEndReason::Interrupted),
            None => Vec::new(),
        };
        if self.turn.is_some() || self.idle_due {
            events.push(Event::AgentIdle(AgentIdle {}));
        }
        events
    }
}

/// The [`Projection`] that folds [`OpenTurn`]; registered on every session log under
/// [`OpenTurnProjection::KEY`].
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenTurnProjection;

impl OpenTurnProjection {
    /// The key it is registered under.
    pub const KEY: &'static str = "open-turn";
}

impl Projection for OpenTurnProjection {
    type State = OpenTurn;

    fn key(&self) -> &'static str {
        Self::KEY
    }

    fn fold(&self, state: &mut OpenTurn, event: &Envelope) {
        state.apply(&event.event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{CancelCause, LlmRetryStarted};
    use crate::failure::Failure;
    use crate::session_log::tests::{
        self, idle, request, request_error, session_start, step, step_end, turn, turn_end as end,
    };

    fn session() -> Event {
        session_start("s")
    }
    fn user() -> Event {
        tests::user("hi")
    }
    fn failure() -> Failure {
        Failure::new("SERVER", "down").unwrap()
    }
    fn fold(events: &[Event]) -> OpenTurn {
        let mut state = OpenTurn::default();
        for event in events {
            state.apply(event);
        }
        state
    }

    #[test]
    fn the_fold_tracks_open_turn_step_and_last_numbers() {
        // (log, turn, step, last turn, last step, last attempt, idle due)
        type Row = (Vec<Event>, Option<u32>, Option<u32>, u32, u32, u32, bool);
        let table: Vec<Row> = vec![
            (vec![], None, None, 0, 0, 0, false),
            (vec![session(), user()], None, None, 0, 0, 0, false),
            (vec![session(), user(), turn(1)], Some(1), None, 1, 0, 0, false),
            (vec![turn(1), step(1, 1)], Some(1), Some(1), 1, 1, 0, false),
            (vec![turn(1), step(1, 1), request(1, 1, 1)], Some(1), Some(1), 1, 1, 1, false),
            (
                vec![
                    turn(1),
                    step(1, 1),
                    request(1, 1, 1),
                    request_error(1, 1, 1),
                    Event::LlmRetryStarted(LlmRetryStarted {
                        retry_id: "a".into(),
                        turn: 1,
                        step: 1,
                        retry: 1,
                    }),
                    request(1, 1, 2),
                ],
                Some(1),
                Some(1),
                1,
                1,
                2,
                false,
            ),
            (
                vec![turn(1), step(1, 1), request(1, 1, 3), step_end(1, 1)],
                Some(1),
                None,
                1,
                1,
                3,
                false,
            ),
            (
                vec![turn(1), step(1, 1), request(1, 1, 3), step_end(1, 1), step(1, 2)],
                Some(1),
                Some(2),
                1,
                2,
                0,
                false,
            ),
            (
                vec![turn(1), step(1, 1), step_end(1, 1), end(1, TurnEndReason::Completed)],
                None,
                None,
                1,
                1,
                0,
                true,
            ),
            (
                vec![turn(1), step(1, 1), step_end(1, 1), end(1, TurnEndReason::Completed), idle()],
                None,
                None,
                1,
                1,
                0,
                false,
            ),
            (
                vec![turn(1), end(1, TurnEndReason::Completed), turn(2)],
                Some(2),
                None,
                2,
                0,
                0,
                false,
            ),
            // A turn/end closes a step its turn left open.
            (vec![turn(1), step(1, 1), end(1, TurnEndReason::MaxSteps)], None, None, 1, 1, 0, true),
        ];
        for (log, t, s, lt, ls, la, due) in table {
            let state = fold(&log);
            let kinds: Vec<&str> = log.iter().map(Event::kind).collect();
            assert_eq!(state.turn, t, "{kinds:?}");
            assert_eq!(state.step, s, "{kinds:?}");
            assert_eq!(state.last_turn, lt, "{kinds:?}");
            assert_eq!(state.last_step, ls, "{kinds:?}");
            assert_eq!(state.last_attempt, la, "{kinds:?}");
            assert_eq!(state.idle_due, due, "{kinds:?}");
            assert_eq!(state.next_turn(), lt + 1, "{kinds:?}");
        }
    }

    #[test]
    fn the_last_turn_failed_when_it_ended_in_error_or_was_interrupted() {
        let table = [
            (TurnEndReason::Error { failure: failure() }, true),
            (TurnEndReason::Interrupted, true),
            (TurnEndReason::Completed, false),
            (TurnEndReason::MaxSteps, false),
            (TurnEndReason::Aborted { cause: CancelCause::User }, false),
        ];
        for (reason, failed) in table {
            let state = fold(&[turn(1), end(1, reason.clone()), idle()]);
            assert_eq!(state.last_turn_failed(), failed, "{reason:?}");
            assert_eq!(state.last_end, Some(TurnEnd { turn: 1, reason: reason.clone() }));
            // While a new turn runs, the last one's failure is not retryable.
            let running = fold(&[turn(1), end(1, reason.clone()), turn(2)]);
            assert!(!running.last_turn_failed(), "{reason:?}");
        }
        assert!(!OpenTurn::default().last_turn_failed(), "no turn ever ran");
    }

    #[test]
    fn repair_closes_exactly_what_is_open() {
        let interrupted = |t| end(t, TurnEndReason::Interrupted);
        let table: Vec<(Vec<Event>, Vec<Event>)> = vec![
            (vec![], vec![]),
            (vec![session(), user()], vec![]),
            (vec![session(), user(), turn(1)], vec![interrupted(1), idle()]),
            (
                vec![session(), user(), turn(1), step(1, 1), request(1, 1, 1)],
                vec![step_end(1, 1), interrupted(1), idle()],
            ),
            (
                vec![turn(3), step(3, 1), step_end(3, 1), step(3, 2), step_end(3, 2)],
                vec![interrupted(3), idle()],
            ),
            (vec![turn(1), end(1, TurnEndReason::Completed)], vec![idle()]),
            (vec![turn(1), end(1, TurnEndReason::Completed), idle()], vec![]),
            (vec![turn(1), end(1, TurnEndReason::Completed), idle(), user()], vec![]),
        ];
        for (log, expected) in table {
            let state = fold(&log);
            let repair = state.repair();
            let kinds: Vec<&str> = log.iter().map(Event::kind).collect();
            assert_eq!(repair, expected, "{kinds:?}");
            // Folding the repair leaves nothing to repair.
            let mut repaired = state.clone();
            for event in &repair {
                repaired.apply(event);
            }
            assert!(!repaired.is_open(), "{kinds:?}");
            assert_eq!(repaired.repair(), vec![], "{kinds:?}");
        }
    }

    #[test]
    fn a_turn_is_closed_once_with_its_open_step() {
        let aborted = TurnEndReason::Aborted { cause: CancelCause::User };
        let table: Vec<(Vec<Event>, u32, Vec<Event>)> = vec![
            // The open turn, with and without an open step.
            (vec![turn(1)], 1, vec![end(1, aborted.clone())]),
            (vec![turn(1), step(1, 2)], 1, vec![step_end(1, 2), end(1, aborted.clone())]),
            (vec![turn(1), step(1, 1), step_end(1, 1)], 1, vec![end(1, aborted.clone())]),
            // Already closed, or not the open turn: nothing (closed exactly once).
            (vec![turn(1), end(1, TurnEndReason::Completed)], 1, vec![]),
            (vec![turn(2), step(2, 1)], 1, vec![]),
            (vec![], 1, vec![]),
        ];
        for (log, which, expected) in table {
            let kinds: Vec<&str> = log.iter().map(Event::kind).collect();
            assert_eq!(
                fold(&log).closing(which, aborted.clone()),
                expected,
                "{kinds:?} turn {which}"
            );
        }
    }

    #[test]
    fn the_projection_folds_envelopes_under_its_key() {
        let p = OpenTurnProjection;
        assert_eq!(p.key(), "open-turn");
        let mut state = OpenTurn::default();
        p.fold(&mut state, &Envelope { seq: 1, time: 0, event: turn(1) });
        assert_eq!(state.turn, Some(1));
    }
}
