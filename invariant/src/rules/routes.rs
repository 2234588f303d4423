//! `route/switched`: a recovery that moves a step to another route (`fallback`), and the attempt
//! that follows it.
//!
//! A switch answers the failure of the step's current attempt: it sits inside the open step,
//! after that attempt's `request/error`, and names as `from` the route that attempt used. The
//! step reads the switch from its log, so the next `request/start` of the step must name the
//! switch's `to` — a log where they disagree would show a switch that did not happen, or an
//! attempt whose route nobody chose. One switch per failed attempt: two would leave the next
//! attempt's route to whichever came last.

use rein_event::event::{Envelope, Event, RequestStart, RouteSwitched};

use crate::catalogue::Rule;
use crate::state::State;
use crate::violation::Violation;

/// Checks `event` against the route rules.
pub(super) fn check(state: &State, event: &Envelope, out: &mut Vec<Violation>) {
    match &event.event {
        Event::RouteSwitched(s) => switched(state, event, s, out),
        Event::RequestStart(r) => next_request(state, event, r, out),
        _ => {}
    }
}

fn switched(state: &State, event: &Envelope, s: &RouteSwitched, out: &mut Vec<Violation>) {
    let empty: Vec<&str> =
        [("from", &s.from), ("to", &s.to), ("code", &s.code), ("reason", &s.reason)]
            .into_iter()
            .filter(|(_, value)| value.is_empty())
            .map(|(name, _)| name)
            .collect();
    if !empty.is_empty() {
        out.push(Violation::new(
            event,
            Rule::RouteSwitchedFieldsNonEmpty,
            format!("{} must be non-empty", empty.join(", ")),
        ));
    }
    if !s.to.is_empty() && s.to == s.from {
        out.push(Violation::new(
            event,
            Rule::RouteSwitchedToAnotherRoute,
            format!("switches from {:?} to the same route", s.from),
        ));
    }
    let Some(open) = state.open_step.as_ref().filter(|o| o.is(s.turn, s.step)) else {
        let now = state.open_step_now();
        out.push(Violation::new(
            event,
            Rule::RouteSwitchedInOpenStep,
            format!("switch of turn {} step {}, but {now}", s.turn, s.step),
        ));
        return;
    };
    let Some(attempt) = &open.attempt else {
        out.push(Violation::new(
            event,
            Rule::RouteSwitchedAfterRequestError,
            format!(
                "turn {} step {} has no attempt to switch from (no request/start)",
                s.turn, s.step
            ),
        ));
        return;
    };
    if attempt.error.is_none() {
        out.push(Violation::new(
            event,
            Rule::RouteSwitchedAfterRequestError,
            format!("attempt {} has no request/error to switch away from", attempt.number),
        ));
    }
    if attempt.provider != s.from {
        out.push(Violation::new(
            event,
            Rule::RouteSwitchedFromCurrentRoute,
            format!(
                "from {:?} must be {:?}, the provider of attempt {}'s request/start",
                s.from, attempt.provider, attempt.number
            ),
        ));
    }
    if let Some((seq, to)) = &attempt.switched {
        out.push(Violation::new(
            event,
            Rule::RouteSwitchedOncePerAttempt,
            format!(
                "attempt {} was already switched to {to:?} at seq {seq}; one switch per failed \
                 attempt",
                attempt.number
            ),
        ));
    }
}

fn next_request(state: &State, event: &Envelope, r: &RequestStart, out: &mut Vec<Violation>) {
    // A request outside the open step is `request-in-open-step`'s to report.
    let Some(open) = state.open_step.as_ref().filter(|o| o.is(r.turn, r.step)) else { return };
    let Some((seq, to)) = open.attempt.as_ref().and_then(|a| a.switched.as_ref()) else { return };
    if *to != r.provider {
        out.push(Violation::new(
            event,
            Rule::RequestFollowsRouteSwitch,
            format!(
                "attempt {} asks {:?}, but route/switched seq {seq} sent the step to {to:?}",
                r.attempt, r.provider
            ),
        ));
    }
}
