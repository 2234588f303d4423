//! The rules of the session-log contract (`docs/runtime-semantics.md`, "Invariants and `rein
//! check`"): one catalogue, six families.
//!
//! [`Rule`] (defined in the crate's `catalogue`, a leaf every other module may name) is the
//! single documented list of rule names. Every name is stable kebab-case and is
//! what `rein check` prints, what a live rejection carries, and what tests match on. The rule
//! *code* lives in the family files; each is a pure function of the fold `State` (everything
//! before the event) and the event itself:
//!
//! - `rules/sessions.rs`: `seq`, `session/start`, turns, steps, attempts — how events nest.
//! - `rules/requests.rs`: `request/error` and `assistant/chunk` against the current attempt.
//! - `rules/retries.rs`: `llm/retry` and `llm/retry-started`.
//! - `rules/routes.rs`: `route/switched` and the attempt it sends to another route.
//! - `rules/resumes.rs`: `turn/resumed`, where a reopened session continued a turn.
//! - `rules/throttles.rs`: `retry/throttled`, a retry a route's spent budget declined.
//!
//! Two rules are about the raw text of a log and are decided while parsing it
//! ([`crate::schema`]): [`Rule::CorruptLine`] and [`Rule::EventSchema`]. Two more are decided
//! there when an `llm/retry` line cannot hold its typed form at all
//! ([`Rule::RetryFailureValid`], [`Rule::RetryNumberValid`] for a negative or fractional number).
//!
//! # Why a state and pure functions, not one big fold
//!
//! The live validator must check an append without changing anything (a rejected append leaves
//! no trace), and the offline checker must keep going after a violation to report the rest. Both
//! fall out of splitting "what is wrong with this event, given what came before" (the rules:
//! `&State`, no mutation) from "what this event changes" (`State::fold`, no judgement).

use rein_event::event::Envelope;

pub use crate::catalogue::{Family, MAX_DELAY_MS, MAX_SAFE_INTEGER, Rule};
use crate::state::State;
use crate::violation::Violation;

mod requests;
mod resumes;
mod retries;
mod routes;
mod sessions;
mod throttles;

pub use resumes::PENDING;

/// Every violation `event` commits, given the state folded from everything before it.
pub(crate) fn check(state: &State, event: &Envelope) -> Vec<Violation> {
    let mut out = Vec::new();
    sessions::check(state, event, &mut out);
    requests::check(state, event, &mut out);
    retries::check(state, event, &mut out);
    routes::check(state, event, &mut out);
    resumes::check(state, event, &mut out);
    throttles::check(state, event, &mut out);
    out
}
