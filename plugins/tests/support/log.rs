//! Reading finished logs in tests, and the invariant check every end-to-end test ends with
//! (shared with `providers/tests`).

#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use rein_runtime::event::{
    Envelope, Event, LlmRetry, LlmRetryStarted, RequestStart, TurnEndReason,
};

/// The `type` of each event.
pub fn kinds(events: &[Envelope]) -> Vec<&'static str> {
    events.iter().map(Envelope::kind).collect()
}

/// Every `llm/retry` with its time.
pub fn retries(events: &[Envelope]) -> Vec<(u64, LlmRetry)> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Event::LlmRetry(r) => Some((e.time, r.clone())),
            _ => None,
        })
        .collect()
}

/// Every `llm/retry-started` with its time.
pub fn started(events: &[Envelope]) -> Vec<(u64, LlmRetryStarted)> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Event::LlmRetryStarted(r) => Some((e.time, r.clone())),
            _ => None,
        })
        .collect()
}

/// Every `request/start` with its time.
pub fn requests(events: &[Envelope]) -> Vec<(u64, RequestStart)> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Event::RequestStart(r) => Some((e.time, r.clone())),
            _ => None,
        })
        .collect()
}

/// The reasons of every `turn/end`, with their times.
pub fn turn_ends(events: &[Envelope]) -> Vec<(u64, TurnEndReason)> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Event::TurnEnd(end) => Some((e.time, end.reason.clone())),
            _ => None,
        })
        .collect()
}

/// Checks every rule of the session-log contract over a finished log.
pub fn assert_invariants(events: &[Envelope]) {
    let violations = rein_invariant::check_finished_log(events);
    assert!(
        violations.is_empty(),
        "the log breaks the invariants:\n{}\nlog:\n{}",
        violations.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"),
        events.iter().map(|e| serde_json::to_string(e).unwrap()).collect::<Vec<_>>().join("\n"),
    );
}
