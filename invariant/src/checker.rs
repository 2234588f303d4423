//! The offline checker: folds a log event by event and collects every violation.
//!
//! [`Checker::push`] checks one event against the state folded from the events before it, then
//! folds it. It never stops at the first violation; see the `state` module for why a violating
//! event is still folded.
//!
//! # Why an open turn is not a violation by default
//!
//! A log whose last turn has no `turn/end` is what a running session or a crash leaves; reopening
//! the session closes it (`turn/end {kind: "interrupted"}`, SPEC §9). So [`check_log`] accepts it,
//! and [`Checker::finish`] / [`check_finished_log`] report it ([`Rule::TurnLeftOpen`]) for a log
//! that is known to be complete, such as the end of a scenario run.

use rein_runtime::event::Envelope;

use crate::rules::{self, Rule};
use crate::state::State;
use crate::violation::Violation;

/// Checks a log event by event.
#[derive(Debug, Clone, Default)]
pub struct Checker {
    state: State,
}

impl Checker {
    /// A checker that has seen nothing (the next event must be `session/start`, seq 0).
    pub fn new() -> Self {
        Self::default()
    }

    /// The violations `event` would commit after everything pushed so far. Changes nothing.
    pub fn check(&self, event: &Envelope) -> Vec<Violation> {
        rules::check(&self.state, event)
    }

    /// Checks `event`, then folds it; returns its violations.
    pub fn push(&mut self, event: &Envelope) -> Vec<Violation> {
        let violations = self.check(event);
        self.state.fold(event);
        violations
    }

    /// Records that a line of the log could not be read as an event (already reported as
    /// [`Rule::CorruptLine`] or [`Rule::EventSchema`]). With its `seq`, the next event must follow
    /// it; without, the next event may carry any `seq` not below the expected one, so one bad line
    /// is one violation, not two.
    pub fn skip_unreadable(&mut self, seq: Option<u64>) {
        self.state.skip(seq);
    }

    /// How many events were pushed.
    pub fn events(&self) -> u64 {
        self.state.events
    }

    /// The turn still open after the events pushed so far, if any.
    pub fn open_turn(&self) -> Option<u32> {
        self.state.open_turn.map(|t| t.turn)
    }

    /// The violations of a log that is complete: a turn still open ([`Rule::TurnLeftOpen`]).
    pub fn finish(&self) -> Vec<Violation> {
        let Some(open) = self.state.open_turn else { return Vec::new() };
        let last = self.state.last_seq.unwrap_or(open.seq);
        vec![Violation::at(
            open.seq,
            "turn/start",
            Rule::TurnLeftOpen,
            format!(
                "turn {} never ends: the log stops at seq {last} without its turn/end",
                open.turn
            ),
        )]
    }
}

/// Every violation in `events`, a log that may still be running (an open last turn is fine).
pub fn check_log<'a>(events: impl IntoIterator<Item = &'a Envelope>) -> Vec<Violation> {
    let mut checker = Checker::new();
    events.into_iter().flat_map(|e| checker.push(e)).collect()
}

/// Every violation in `events`, a complete log: also reports a turn left open.
pub fn check_finished_log<'a>(events: impl IntoIterator<Item = &'a Envelope>) -> Vec<Violation> {
    let mut checker = Checker::new();
    let mut violations: Vec<Violation> = events.into_iter().flat_map(|e| checker.push(e)).collect();
    violations.extend(checker.finish());
    violations
}
