//! `turn/resumed`: a reopened session continuing a turn a crash left open.
//!
//! A resume continues the turn the crash left open, so the event sits inside that turn — after
//! the last event the crash left, which is where a reopen appends — and names the step the turn
//! is in: the open step, or, between steps, the last step the turn started (0 before its
//! first). Its `pending` is one of the tags the runtime writes. The timing of a resumed retry
//! needs no rule of its own: `retry-started-after-delay` compares the `llm/retry-started` with
//! its `llm/retry`, whichever process wrote them.

use rein_event::event::{Envelope, Event, TurnResumed};

use crate::catalogue::Rule;
use crate::state::State;
use crate::violation::Violation;

/// The tags `turn/resumed.pending` may carry.
pub const PENDING: [&str; 5] = ["retry-wait", "attempt", "waterfall", "tool", "loop"];

/// Checks `event` against the resume rules.
pub(super) fn check(state: &State, event: &Envelope, out: &mut Vec<Violation>) {
    if let Event::TurnResumed(r) = &event.event {
        resumed(state, event, r, out);
    }
}

fn resumed(state: &State, event: &Envelope, r: &TurnResumed, out: &mut Vec<Violation>) {
    if !PENDING.contains(&r.pending.as_str()) {
        out.push(Violation::new(
            event,
            Rule::TurnResumedPendingKnown,
            format!("pending {:?} must be one of {}", r.pending, PENDING.join(", ")),
        ));
    }
    match state.open_turn {
        Some(open) if open.turn == r.turn => {}
        Some(open) => {
            out.push(Violation::new(
                event,
                Rule::TurnResumedInOpenTurn,
                format!("resumes turn {}, but the open turn is {}", r.turn, open.turn),
            ));
            return;
        }
        None => {
            out.push(Violation::new(
                event,
                Rule::TurnResumedInOpenTurn,
                format!("resumes turn {}, but no turn is open", r.turn),
            ));
            return;
        }
    }
    let expected = state.open_step.as_ref().map_or(state.last_step, |open| open.step);
    if r.step != expected {
        let now = match &state.open_step {
            Some(open) => format!("the open step is {}", open.step),
            None => format!("no step is open and the last one started is {}", state.last_step),
        };
        out.push(Violation::new(
            event,
            Rule::TurnResumedNamesStep,
            format!("names step {}, but {now}", r.step),
        ));
    }
}
