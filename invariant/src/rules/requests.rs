//! Provider requests: an attempt's error and chunks belong to the current attempt.
//!
//! The current attempt is the open step's latest `request/start`. Retries are decided from its
//! `request/error` (the waterfall's input), so an error for another attempt, for another provider,
//! or twice for the same attempt would make the waterfall's input ambiguous.

use rein_event::event::{AssistantChunk, Envelope, Event, RequestError};

use crate::catalogue::Rule;
use crate::state::State;
use crate::violation::Violation;

/// Checks `event` against the request rules.
pub(super) fn check(state: &State, event: &Envelope, out: &mut Vec<Violation>) {
    match &event.event {
        Event::RequestError(e) => request_error(state, event, e, out),
        Event::AssistantChunk(c) => chunk(state, event, c, out),
        _ => {}
    }
}

fn request_error(state: &State, event: &Envelope, e: &RequestError, out: &mut Vec<Violation>) {
    let (turn, step, number) = (e.turn, e.step, e.attempt);
    let Some(open) = &state.open_step else {
        out.push(Violation::new(
            event,
            Rule::RequestErrorCurrentAttempt,
            format!("error of attempt {number} of turn {turn} step {step}, but no step is open"),
        ));
        return;
    };
    let current = open.attempt.as_ref().filter(|a| open.is(turn, step) && a.number == number);
    let Some(attempt) = current else {
        let now = match &open.attempt {
            Some(a) => format!("attempt {} of turn {} step {}", a.number, open.turn, open.step),
            None => {
                format!("none (turn {} step {} has no request/start yet)", open.turn, open.step)
            }
        };
        out.push(Violation::new(
            event,
            Rule::RequestErrorCurrentAttempt,
            format!(
                "error of attempt {number} of turn {turn} step {step}, but the current attempt is {now}"
            ),
        ));
        return;
    };
    if attempt.provider != e.provider {
        out.push(Violation::new(
            event,
            Rule::RequestErrorProvider,
            format!(
                "provider {:?} must be {:?}, the provider of attempt {number}'s request/start",
                e.provider, attempt.provider
            ),
        ));
    }
    if let Some(first) = attempt.error {
        out.push(Violation::new(
            event,
            Rule::RequestErrorOnce,
            format!("attempt {number} of turn {turn} step {step} already failed at seq {first}"),
        ));
    }
}

fn chunk(state: &State, event: &Envelope, c: &AssistantChunk, out: &mut Vec<Violation>) {
    // A chunk outside the open step is `event-in-open-step`'s to report.
    let Some(open) = state.open_step.as_ref().filter(|s| s.is(c.turn, c.step)) else { return };
    match &open.attempt {
        Some(a) if a.number == c.attempt => {}
        Some(a) => out.push(Violation::new(
            event,
            Rule::ChunkCurrentAttempt,
            format!("chunk of attempt {}, but the current attempt is {}", c.attempt, a.number),
        )),
        None => out.push(Violation::new(
            event,
            Rule::ChunkCurrentAttempt,
            format!(
                "chunk of attempt {}, but turn {} step {} has no request/start yet",
                c.attempt, c.turn, c.step
            ),
        )),
    }
}
