//! `retry/throttled`: a plugin declined a retry because the route's retry budget is spent
//! (`docs/runtime-semantics.md`, "Route health").
//!
//! A throttle answers the failure of the step's current attempt, like a retry or a route switch
//! would: it sits inside the open step, after that attempt's `request/error`, and names as
//! `provider` the route that attempt used (the route whose budget is spent).

use rein_event::event::{Envelope, Event, RetryThrottled};

use crate::catalogue::Rule;
use crate::state::State;
use crate::violation::Violation;

/// Checks `event` against the throttle rules.
pub(super) fn check(state: &State, event: &Envelope, out: &mut Vec<Violation>) {
    if let Event::RetryThrottled(t) = &event.event {
        throttled(state, event, t, out);
    }
}

fn throttled(state: &State, event: &Envelope, t: &RetryThrottled, out: &mut Vec<Violation>) {
    let empty: Vec<&str> = [("provider", &t.provider), ("plugin", &t.plugin), ("code", &t.code)]
        .into_iter()
        .filter(|(_, value)| value.is_empty())
        .map(|(name, _)| name)
        .collect();
    if !empty.is_empty() {
        out.push(Violation::new(
            event,
            Rule::RetryThrottledFieldsNonEmpty,
            format!("{} must be non-empty", empty.join(", ")),
        ));
    }
    let Some(open) = state.open_step.as_ref().filter(|o| o.is(t.turn, t.step)) else {
        let now = state.open_step_now();
        out.push(Violation::new(
            event,
            Rule::RetryThrottledInOpenStep,
            format!("throttle in turn {} step {}, but {now}", t.turn, t.step),
        ));
        return;
    };
    let Some(attempt) = &open.attempt else {
        out.push(Violation::new(
            event,
            Rule::RetryThrottledAfterRequestError,
            format!("turn {} step {} has no attempt (no request/start)", t.turn, t.step),
        ));
        return;
    };
    if attempt.error.is_none() {
        out.push(Violation::new(
            event,
            Rule::RetryThrottledAfterRequestError,
            format!("attempt {} has no request/error to decline a retry of", attempt.number),
        ));
    }
    if !t.provider.is_empty() && attempt.provider != t.provider {
        out.push(Violation::new(
            event,
            Rule::RetryThrottledProvider,
            format!(
                "provider {:?} must be {:?}, the provider of attempt {}'s request/start",
                t.provider, attempt.provider, attempt.number
            ),
        ));
    }
}
