//! `Runtime::resume_pending`: every session a crash left with an open turn is found from the
//! store's heads and opened (which resumes it); the others are left alone; a session that cannot
//! be read is reported, not fatal.

// Helpers outside `#[test]` functions unwrap too: a failing set-up is a failing test.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use rein_runtime::event::*;
use rein_runtime::failure::Failure;
use rein_runtime::pending::{NotResumed, PendingTurn};
use rein_runtime::store::memory::MemoryStore;
use rein_runtime::store::{SessionStore, jsonl::JsonlStore};
use rein_testkit::log::assert_valid;
use rein_testkit::runtime;
use rein_testkit::scripted::{Scripted, reply};

/// A log of `events`, `time` = 1000 + seq.
fn log(events: Vec<Event>) -> Vec<Envelope> {
    events
        .into_iter()
        .enumerate()
        .map(|(seq, event)| Envelope { seq: seq as u64, time: 1_000 + seq as u64, event })
        .collect()
}

fn opening(session: &str) -> Vec<Event> {
    vec![
        Event::SessionStart(SessionStart { session: session.into(), format: LOG_FORMAT }),
        Event::UserMessage(UserMessage { text: "hello".into() }),
        Event::TurnStart(TurnStart { turn: 1 }),
        Event::StepStart(StepRef { turn: 1, step: 1 }),
        Event::RequestStart(RequestStart {
            turn: 1,
            step: 1,
            attempt: 1,
            provider: "mock".into(),
            model: "m".into(),
        }),
    ]
}

/// Three sessions: one whose turn completed, one a crash cut mid-attempt, one a crash left in a
/// retry wait (its `llm/retry` at time 1006, waiting 500 ms).
async fn crashed_store(store: &dyn SessionStore) {
    let mut closed = opening("closed");
    closed.extend([
        Event::AssistantMessage(AssistantMessage {
            turn: 1,
            step: 1,
            text: "hi".into(),
            tool_calls: None,
            usage: None,
        }),
        Event::StepEnd(StepRef { turn: 1, step: 1 }),
        Event::TurnEnd(TurnEnd { turn: 1, reason: TurnEndReason::Completed }),
        Event::AgentIdle(AgentIdle {}),
    ]);
    store.append("closed", &log(closed)).await.unwrap();
    store.append("cut", &log(opening("cut"))).await.unwrap();
    let failure = Failure::new("TRANSPORT", "connection reset").unwrap();
    let mut waiting = opening("waiting");
    waiting.extend([
        Event::RequestError(RequestError {
            turn: 1,
            step: 1,
            attempt: 1,
            provider: "mock".into(),
            failure: failure.clone(),
        }),
        Event::LlmRetry(LlmRetry {
            retry_id: "0f8fad5b-d9cb-469f-a165-70867728950e".into(),
            turn: 1,
            step: 1,
            provider: "mock".into(),
            plugin: "llm-retry".into(),
            mode: "normal".into(),
            policy_key: "k".into(),
            retry: 1,
            max_retries: Some(3),
            delay_ms: 500.0,
            failure,
        }),
    ]);
    store.append("waiting", &log(waiting)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn every_session_with_an_open_turn_is_opened_and_the_others_are_left_alone() {
    let store = MemoryStore::new();
    crashed_store(&store).await;
    let closed_before = store.events("closed");
    let adapter = Scripted::always(reply(&["resumed"]));
    let runtime = runtime::builder(&store, adapter, "m").build().await.unwrap();
    let found = runtime.resume_pending().await.unwrap();
    let turn = |session: &str, wake_at| PendingTurn { session: session.into(), turn: 1, wake_at };
    assert_eq!(found.resumed, [turn("cut", None), turn("waiting", Some(1_506))]);
    assert_eq!(found.failed, []);
    until_no_turn_is_open_but(&store, "").await;
    runtime.shutdown().await;
    assert_eq!(store.events("closed"), closed_before, "a closed session is not touched");
    for session in ["cut", "waiting"] {
        let events = store.events(session);
        assert_valid(&events);
        assert_eq!(events.iter().filter(|e| e.kind() == "turn/start").count(), 1, "{session}");
        assert!(
            !events.iter().any(|e| e.kind() == "user/message" && e.seq > 1),
            "{session}: closed without a new prompt"
        );
    }
    // Nothing is left pending.
    let runtime = runtime::builder(&store, Scripted::always(reply(&["x"])), "m").build().await;
    let runtime = runtime.unwrap();
    assert_eq!(runtime.resume_pending().await.unwrap().resumed, []);
    runtime.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_cannot_be_read_is_reported_and_the_others_resume() {
    let dir = tempfile::tempdir().unwrap();
    let store =
        Arc::new(JsonlStore::open(dir.path(), rein_runtime::store::Durability::Os).unwrap());
    crashed_store(store.as_ref()).await;
    std::fs::write(dir.path().join("broken.jsonl"), "not json\n").unwrap();
    let runtime = rein_runtime::runtime::Runtime::builder()
        .store(store.clone())
        .route(
            rein_runtime::runtime::Route::new("mock", Scripted::always(reply(&["ok"]))).model("m"),
        )
        .build()
        .await
        .unwrap();
    let found = runtime.resume_pending().await.unwrap();
    let sessions: Vec<&str> = found.resumed.iter().map(|t| t.session.as_str()).collect();
    assert_eq!(sessions, ["cut", "waiting"]);
    match found.failed.as_slice() {
        [NotResumed { session, error }] => {
            assert_eq!(session, "broken");
            assert!(error.contains("broken.jsonl") && error.contains("does not parse"), "{error}");
        }
        other => panic!("{other:?}"),
    }
    until_no_turn_is_open_but(store.as_ref(), "broken").await;
    runtime.shutdown().await;
    for session in ["cut", "waiting"] {
        assert_valid(&store.load(session).await.unwrap().unwrap().events);
    }
}

/// Waits until no head of `store` but `except`'s shows an open turn.
async fn until_no_turn_is_open_but(store: &dyn SessionStore, except: &str) {
    for _ in 0..1_000 {
        let heads = store.heads().await.unwrap();
        let open = heads.iter().filter(|h| h.session != except).any(|h| {
            h.head.as_ref().is_err() || h.head.as_ref().is_ok_and(|h| h.open_turn.is_some())
        });
        if !open {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("a turn is still open: {:?}", store.heads().await.unwrap());
}

#[tokio::test(start_paused = true)]
async fn resume_pending_of_leaves_the_sessions_it_does_not_want_alone() {
    let store = MemoryStore::new();
    crashed_store(&store).await;
    let waiting_before = store.events("waiting");
    let adapter = Scripted::always(reply(&["resumed"]));
    let runtime = runtime::builder(&store, adapter, "m").build().await.unwrap();
    let found = runtime.resume_pending_of(|id| id == "cut").await.unwrap();
    let sessions: Vec<&str> = found.resumed.iter().map(|t| t.session.as_str()).collect();
    assert_eq!(sessions, ["cut"]);
    until_no_turn_is_open_but(&store, "waiting").await;
    runtime.shutdown().await;
    assert_eq!(store.events("waiting"), waiting_before, "not wanted: not opened");
    assert_valid(&store.events("cut"));
}
