//! Reading logs in tests — the kinds of their events, their turn ends, retries and requests —
//! and the rules every end-to-end log must keep: the invariant crate's checker
//! ([`assert_invariants`]), plus the structural shape the runtime writes ([`assert_valid`]).

use rein_runtime::event::{
    Envelope, Event, LlmRetry, LlmRetryStarted, RequestStart, TurnEndReason,
};

/// The `type` of each event.
pub fn kinds(events: &[Envelope]) -> Vec<&'static str> {
    events.iter().map(Envelope::kind).collect()
}

/// The reasons of every `turn/end`, in order.
pub fn turn_ends(events: &[Envelope]) -> Vec<TurnEndReason> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Event::TurnEnd(end) => Some(end.reason.clone()),
            _ => None,
        })
        .collect()
}

/// `(code, request id, message)` of every `request/error`'s failure, in order: what a provider
/// said, as the log keeps it (scrubbed).
pub fn failures(events: &[Envelope]) -> Vec<(String, Option<String>, String)> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Event::RequestError(r) => Some((
                r.failure.code().to_owned(),
                r.failure.request_id().map(str::to_owned),
                r.failure.message().to_owned(),
            )),
            _ => None,
        })
        .collect()
}

/// The text of every `assistant/message`, in order.
pub fn answers(events: &[Envelope]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Event::AssistantMessage(m) => Some(m.text.clone()),
            _ => None,
        })
        .collect()
}

/// The reasons of every `turn/end`, with their times.
pub fn turn_ends_at(events: &[Envelope]) -> Vec<(u64, TurnEndReason)> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Event::TurnEnd(end) => Some((e.time, end.reason.clone())),
            _ => None,
        })
        .collect()
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

/// A retry wait a log leaves pending: its chain, its deadline (`time + delayMs`) and the
/// attempt that failed before it.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingRetry {
    /// The chain's `retryId`.
    pub retry_id: String,
    /// When the wait ends, in ms since the epoch (the `llm/retry`'s time + its `delayMs`).
    pub deadline: f64,
    /// The attempt that failed before the wait.
    pub attempt: u32,
}

/// The `llm/retry` of the open turn that no `llm/retry-started` followed, if any (what a crash
/// left pending).
pub fn pending_retry(events: &[Envelope]) -> Option<PendingRetry> {
    let mut pending = None;
    let mut attempt = 0;
    for event in events {
        match &event.event {
            Event::TurnStart(_) | Event::TurnEnd(_) | Event::LlmRetryStarted(_) => pending = None,
            Event::RequestStart(r) => attempt = r.attempt,
            Event::LlmRetry(r) => {
                let deadline = event.time as f64 + r.delay_ms;
                pending = Some(PendingRetry { retry_id: r.retry_id.clone(), deadline, attempt });
            }
            _ => {}
        }
    }
    pending
}

/// The turn a log leaves open, if any.
pub fn open_turn(events: &[Envelope]) -> Option<u32> {
    let mut open = None;
    for event in events {
        match &event.event {
            Event::TurnStart(start) => open = Some(start.turn),
            Event::TurnEnd(_) => open = None,
            _ => {}
        }
    }
    open
}

/// The events from the first of type `kind` (inclusive).
pub fn from_kind<'a>(events: &'a [Envelope], kind: &str) -> &'a [Envelope] {
    let at = events.iter().position(|e| e.kind() == kind).unwrap_or(events.len());
    &events[at..]
}

/// The structural rules of a finished log: contiguous seqs from 0, `session/start` first, turns
/// and steps numbered in order and nested, one `turn/end` per `turn/start`, every
/// `request/start` and chunk inside an open step, nothing left open, `agent/idle` last.
///
/// Then every rule of the session-log contract, through the invariant crate's offline checker.
pub fn assert_valid(events: &[Envelope]) {
    assert!(!events.is_empty(), "an empty log");
    let violations = rein_invariant::check_finished_log(events);
    assert!(violations.is_empty(), "invariant violations: {violations:#?}");
    assert_eq!(events[0].kind(), "session/start", "the first event");
    let mut turn: Option<u32> = None;
    let mut last_turn = 0;
    let mut step: Option<u32> = None;
    let mut last_step = 0;
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.seq, i as u64, "seq {} at position {i}", e.seq);
        if i > 0 {
            assert!(e.time >= events[i - 1].time, "time goes back at seq {}", e.seq);
        }
        let at = format!("seq {} {}", e.seq, e.kind());
        match &e.event {
            Event::TurnStart(s) => {
                assert_eq!(turn, None, "{at}: a turn is already open");
                assert_eq!(s.turn, last_turn + 1, "{at}: turns are numbered in order");
                turn = Some(s.turn);
                last_turn = s.turn;
                last_step = 0;
            }
            Event::StepStart(s) => {
                assert_eq!(turn, Some(s.turn), "{at}: outside its turn");
                assert_eq!(step, None, "{at}: a step is already open");
                assert_eq!(s.step, last_step + 1, "{at}: steps are numbered in order");
                step = Some(s.step);
                last_step = s.step;
            }
            Event::StepEnd(s) => {
                assert_eq!((turn, step), (Some(s.turn), Some(s.step)), "{at}: closes no open step");
                step = None;
            }
            Event::TurnEnd(end) => {
                assert_eq!(turn, Some(end.turn), "{at}: closes no open turn");
                assert_eq!(step, None, "{at}: a step is still open");
                turn = None;
            }
            Event::RequestStart(r) => {
                assert_eq!(
                    (turn, step),
                    (Some(r.turn), Some(r.step)),
                    "{at}: outside an open step"
                );
            }
            Event::AssistantChunk(c) => {
                assert_eq!(
                    (turn, step),
                    (Some(c.turn), Some(c.step)),
                    "{at}: outside an open step"
                );
            }
            Event::RequestError(r) => {
                assert_eq!(
                    (turn, step),
                    (Some(r.turn), Some(r.step)),
                    "{at}: outside an open step"
                );
            }
            Event::AssistantMessage(m) => {
                assert_eq!(
                    (turn, step),
                    (Some(m.turn), Some(m.step)),
                    "{at}: outside an open step"
                );
            }
            Event::ToolCall(c) => {
                assert_eq!(
                    (turn, step),
                    (Some(c.turn), Some(c.step)),
                    "{at}: outside an open step"
                );
            }
            Event::ToolResult(r) => {
                assert_eq!(
                    (turn, step),
                    (Some(r.turn), Some(r.step)),
                    "{at}: outside an open step"
                );
            }
            Event::LlmRetry(r) => {
                assert_eq!(
                    (turn, step),
                    (Some(r.turn), Some(r.step)),
                    "{at}: outside an open step"
                );
            }
            Event::AgentIdle(_) => assert_eq!(turn, None, "{at}: a turn is open"),
            _ => {}
        }
    }
    assert_eq!(turn, None, "a turn is left open");
    assert_eq!(events.last().unwrap().kind(), "agent/idle", "a finished log ends idle");
}

/// A live invariant validator, to install on every session log of a test runtime.
pub fn live_invariant() -> Box<dyn rein_runtime::validator::Validator> {
    Box::new(rein_invariant::LiveValidator::new())
}

/// Checks every rule of the session-log contract over a finished log; on a violation, prints
/// the violations and the whole log.
pub fn assert_invariants(events: &[Envelope]) {
    let violations = rein_invariant::check_finished_log(events);
    assert!(
        violations.is_empty(),
        "the log breaks the invariants:\n{}\nlog:\n{}",
        violations.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"),
        events.iter().map(|e| serde_json::to_string(e).unwrap()).collect::<Vec<_>>().join("\n"),
    );
}
