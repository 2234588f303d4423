//! The offline checker: folds a log event by event and collects every violation.
//!
//! [`Checker::push`] checks one event against the state folded from the events before it, then
//! folds it. It never stops at the first violation; see the `state` module for why a violating
//! event is still folded.
//!
//! # Why an open turn is not a violation by default
//!
//! A log whose last turn has no `turn/end` is what a running session or a crash leaves; reopening
//! the session closes it (`turn/end {kind: "interrupted"}`). So [`check_log`] accepts it, and
//! [`Checker::finish`] / [`check_finished_log`] report it ([`Rule::TurnLeftOpen`]) for a log that
//! is known to be complete, such as the end of a scenario run.

use rein_event::event::Envelope;

use crate::catalogue::Rule;
use crate::rules;
use crate::schema::{LineError, parse_line};
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

    /// Reads one line of a log (without its newline) and pushes its event. A line that is not an
    /// event is returned as the error, and the checker moves past it
    /// ([`Checker::skip_unreadable`]).
    pub fn push_line(&mut self, line: impl AsRef<[u8]>) -> Result<Vec<Violation>, LineError> {
        match parse_line(line) {
            Ok(event) => Ok(self.push(&event)),
            Err(error) => {
                self.skip_unreadable(error.seq());
                Err(error)
            }
        }
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

    /// The violations of a log that is complete: a turn still open ([`Rule::TurnLeftOpen`]), or
    /// no line at all ([`Rule::SessionStartFirst`]: a finished log has at least its
    /// `session/start`, reported as missing at seq 0).
    pub fn finish(&self) -> Vec<Violation> {
        let empty = self.state.events == 0 && self.state.last_seq.is_none() && !self.state.resync;
        if empty {
            return vec![Violation::at(
                0,
                "session/start",
                Rule::SessionStartFirst,
                "missing: the log is empty, and a finished log starts with session/start",
            )];
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    const START: &str =
        r#"{"seq":0,"time":0,"type":"session/start","data":{"session":"s","format":1}}"#;
    const TURN_1: &str = r#"{"seq":1,"time":0,"type":"turn/start","data":{"turn":1}}"#;
    const TURN_END_2: &str =
        r#"{"seq":2,"time":0,"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}"#;

    #[test]
    fn one_unreadable_line_is_one_problem() {
        // A corrupt line without a readable seq: the next seq is accepted as it comes.
        let mut checker = Checker::new();
        assert_eq!(checker.push_line(START), Ok(vec![]));
        let corrupt = checker.push_line("{\"seq\":1,");
        assert_eq!(corrupt.map_err(|e| e.rule()), Err(Rule::CorruptLine));
        assert_eq!(checker.push_line(TURN_1.replace("\"seq\":1", "\"seq\":2")), Ok(vec![]));
        // A schema error with a readable seq: the next event must follow that seq.
        let mut checker = Checker::new();
        checker.push_line(START).unwrap();
        let error = checker.push_line(TURN_1.replace(r#"{"turn":1}"#, r#"{"turn":"one"}"#));
        assert_eq!(error.map_err(|e| (e.rule(), e.seq())), Err((Rule::EventSchema, Some(1))));
        let violations = checker.push_line(TURN_END_2).unwrap();
        assert_eq!(violations.len(), 1, "only the turn/end without a turn: {violations:?}");
        assert_eq!(violations[0].rule, Rule::TurnEndMatchesTurn);
    }

    #[test]
    fn an_open_turn_is_fine_until_the_log_is_finished() {
        let mut checker = Checker::new();
        checker.push_line(START).unwrap();
        checker.push_line(TURN_1).unwrap();
        assert_eq!(checker.open_turn(), Some(1));
        assert_eq!(checker.events(), 2);
        let open = checker.finish();
        assert_eq!(open.len(), 1);
        assert_eq!(
            open[0].to_string(),
            "turn/start seq 1: turn 1 never ends: the log stops at seq 1 without its turn/end [turn-left-open]"
        );
        checker.push_line(TURN_END_2).unwrap();
        assert!(checker.finish().is_empty());
    }

    #[test]
    fn a_finished_log_cannot_be_empty() {
        let empty = Checker::new().finish();
        assert_eq!(
            empty.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["session/start seq 0: missing: the log is empty, and a finished log starts with \
              session/start [session-start-first]"]
        );
        assert_eq!(check_finished_log(&[]), empty);
        assert!(check_log(&[]).is_empty(), "a log still being written may be empty");
        // Lines that were read but unreadable are reported on their own; no second report.
        let mut checker = Checker::new();
        assert!(checker.push_line("garbage").is_err());
        assert!(checker.finish().is_empty());
    }
}
