//! The live validator: every rule, checked against each append before it is written.
//!
//! Installed on a session log (`SessionLog::add_validator`), it rejects an append that would break
//! a rule; nothing is written and the appender gets the [`Rejection`]. A retry plugin whose
//! `llm/retry` is rejected abandons the retry (`Stop`: `docs/runtime-semantics.md`, "Schedule,
//! wait, start").
//!
//! # Why a batch of one is checked without a clone
//!
//! [`Validator::check`] must not change the validator. A batch of several events is checked on a
//! clone of the fold state (each event must be judged after the ones before it in the batch). A
//! batch of one — nearly every append — needs no fold at all, since the rules only read the state:
//! it is checked in place, so the common path costs no copy of the retry-id map.

use rein_event::event::Envelope;
use rein_event::validator::{Rejection, Validator};

use crate::checker::Checker;
use crate::violation::Violation;

/// [`Validator`] that enforces every rule of the session-log contract on each append.
#[derive(Debug, Clone, Default)]
pub struct LiveValidator {
    checker: Checker,
}

impl LiveValidator {
    /// A validator for a new, empty log (its first append must be `session/start`, seq 0).
    pub fn new() -> Self {
        Self::default()
    }

    /// The name it reports ([`Validator::name`]).
    pub const NAME: &'static str = "invariant";
}

impl Validator for LiveValidator {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn check(&self, batch: &[Envelope]) -> Result<(), Rejection> {
        match batch {
            [] => Ok(()),
            [event] => reject(self.checker.check(event)),
            _ => {
                let mut checker = self.checker.clone();
                batch.iter().try_for_each(|event| reject(checker.push(event)))
            }
        }
    }

    fn commit(&mut self, batch: &[Envelope]) {
        // Replaying history that already breaks a rule is not this append's fault: the rules
        // keep folding, and later appends are judged against what the log claims.
        for event in batch {
            self.checker.push(event);
        }
    }
}

/// The first violation as a rejection, mentioning how many more there were.
fn reject(violations: Vec<Violation>) -> Result<(), Rejection> {
    let more = violations.len().saturating_sub(1);
    let Some(first) = violations.into_iter().next() else { return Ok(()) };
    let mut rejection = Rejection::from(first);
    if more > 0 {
        rejection.message.push_str(&format!(" (and {more} more violation(s))"));
    }
    Err(rejection)
}
