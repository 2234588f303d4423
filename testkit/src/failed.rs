//! The failed-attempt fixture most plugin tests start from: a session log whose turn 1, step 1,
//! attempt 1 failed, as the events a step appends ([`failed_attempt`], [`failed_request`]) or as
//! an open [`SessionLog`] holding them ([`failed_log`]).
//!
//! (A log built event by event, with envelopes and a clock, is [`crate::History`]'s;
//! [`History::failed`](crate::History::failed) is the same prefix there.)

use std::sync::Arc;

use rein_runtime::clock::VirtualClock;
use rein_runtime::event::{Event, RequestError, RequestStart, StepRef, TurnStart};
use rein_runtime::failure::Failure;
use rein_runtime::session_log::SessionLog;
use rein_runtime::store::memory::MemoryStore;

/// `request/start` (model `m`) and `request/error` of attempt `attempt` of turn `turn`, step
/// `step` on `provider`, failed with `failure`.
pub fn failed_request(
    (turn, step): (u32, u32),
    attempt: u32,
    provider: &str,
    failure: &Failure,
) -> Vec<Event> {
    vec![
        Event::RequestStart(RequestStart {
            turn,
            step,
            attempt,
            provider: provider.to_owned(),
            model: "m".into(),
        }),
        Event::RequestError(RequestError {
            turn,
            step,
            attempt,
            provider: provider.to_owned(),
            failure: failure.clone(),
        }),
    ]
}

/// `turn/start` of turn 1, `step/start` of its step 1, and attempt 1 on `provider` failed with
/// `failure` ([`failed_request`]).
pub fn failed_attempt(provider: &str, failure: &Failure) -> Vec<Event> {
    let mut events = vec![
        Event::TurnStart(TurnStart { turn: 1 }),
        Event::StepStart(StepRef { turn: 1, step: 1 }),
    ];
    events.extend(failed_request((1, 1), 1, provider, failure));
    events
}

/// Session `s`'s log in a fresh [`MemoryStore`] on a virtual clock, holding `session/start` and
/// [`failed_attempt`] on `provider` with `failure`; the store is returned to read it back.
pub async fn failed_log(provider: &str, failure: &Failure) -> (MemoryStore, SessionLog) {
    let store = MemoryStore::new();
    let clock = Arc::new(VirtualClock::start());
    let (log, _) = SessionLog::open(Arc::new(store.clone()), clock, "s").await.unwrap();
    log.append(failed_attempt(provider, failure)).await.unwrap();
    (store, log)
}
