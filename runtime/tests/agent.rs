//! The agent loop end to end: prompts, steps, tools, retries through the waterfall, the step
//! limit, queued turns, hibernation and reopening. Every test ends by checking its log.

// Helpers outside `#[test]` functions unwrap too: a failing set-up is a failing test.
#![allow(clippy::unwrap_used)]

#[path = "support/adapters.rs"]
mod adapters;
#[path = "support/log.rs"]
mod log;
#[path = "support/plugins.rs"]
mod plugins;

use std::sync::Arc;

use adapters::{Scripted, call, fail, reply};
use log::{assert_valid, kinds};
use plugins::{TestPlugin, Trace};
use rein_runtime::clock::VirtualClock;
use rein_runtime::event::{Envelope, Event, TurnEndReason};
use rein_runtime::plugin::Verdict;
use rein_runtime::provider::{Adapter, Message};
use rein_runtime::runtime::{Runtime, RuntimeBuilder};
use rein_runtime::store::memory::MemoryStore;
use rein_runtime::tool::echo::EchoTool;
use serde_json::json;

fn builder(store: &MemoryStore, adapter: Arc<dyn Adapter>) -> RuntimeBuilder {
    Runtime::builder()
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .route("mock", adapter, "mock-1", None)
        .tool(Arc::new(EchoTool))
}

async fn finish(runtime: Runtime, store: &MemoryStore, session: &str) -> Vec<Envelope> {
    runtime.shutdown().await;
    assert_eq!(runtime.census().actors(), 0, "no actor outlives shutdown");
    assert_eq!(runtime.census().tasks(), 0, "no task outlives shutdown");
    let events = store.events(session);
    assert_valid(&events);
    events
}

#[tokio::test(start_paused = true)]
async fn a_prompt_streams_one_step_and_completes() {
    let store = MemoryStore::new();
    let adapter = Scripted::new(vec![reply(&["do", "ne"])]);
    let runtime = builder(&store, adapter.clone()).build().await.unwrap();
    let session = runtime.session("s1").await.unwrap();

    let mut turn = session.prompt("hello").await.unwrap();
    let mut streamed = Vec::new();
    while let Some(event) = turn.next_event().await {
        streamed.push(event);
    }
    let outcome = turn.outcome().await.unwrap();
    assert_eq!((outcome.turn, outcome.reason), (1, TurnEndReason::Completed));

    let events = finish(runtime, &store, "s1").await;
    assert_eq!(
        kinds(&events),
        [
            "session/start",
            "user/message",
            "turn/start",
            "step/start",
            "request/start",
            "assistant/chunk",
            "assistant/chunk",
            "assistant/message",
            "step/end",
            "turn/end",
            "agent/idle",
        ]
    );
    assert_eq!(streamed, events[1..10], "the handle streamed the turn's events, in order");
    match &events[7].event {
        Event::AssistantMessage(m) => assert_eq!(m.text, "done"),
        other => panic!("{other:?}"),
    }
    let seen = adapter.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].messages, [Message::User { text: "hello".into() }]);
    assert_eq!((seen[0].model.as_str(), seen[0].provider.as_str()), ("mock-1", "mock"));
    assert_eq!(seen[0].tools.len(), 1, "the echo tool is offered");
}

#[tokio::test(start_paused = true)]
async fn tool_calls_run_and_the_next_step_sees_their_results() {
    let store = MemoryStore::new();
    let adapter = Scripted::new(vec![
        call(
            &["let me"],
            &[("c1", "echo", json!({"text": "ping"})), ("c2", "echo", json!("pong"))],
        ),
        reply(&["done"]),
    ]);
    let runtime = builder(&store, adapter.clone()).build().await.unwrap();
    let session = runtime.session("s").await.unwrap();
    let outcome = session.prompt("go").await.unwrap().await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);

    let events = finish(runtime, &store, "s").await;
    assert_eq!(
        kinds(&events)[3..],
        [
            "step/start",
            "request/start",
            "assistant/chunk",
            "assistant/message",
            "tool/call",
            "tool/result",
            "tool/call",
            "tool/result",
            "step/end",
            "step/start",
            "request/start",
            "assistant/chunk",
            "assistant/message",
            "step/end",
            "turn/end",
            "agent/idle",
        ]
    );
    let second = &adapter.seen()[1];
    assert_eq!(second.step, 2);
    assert_eq!(
        second.messages[2..],
        [
            Message::Tool { id: "c1".into(), output: "ping".into(), is_error: false },
            Message::Tool { id: "c2".into(), output: "pong".into(), is_error: false },
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_retried_attempt_sends_the_same_request_and_only_its_own_chunks_become_the_message() {
    let store = MemoryStore::new();
    let adapter = Scripted::new(vec![fail("SERVER", &["par", "tial"]), reply(&["do", "ne"])]);
    let trace = Trace::default();
    let runtime = builder(&store, adapter.clone())
        .plugin(TestPlugin::answering("retry", &trace, Verdict::Retry))
        .build()
        .await
        .unwrap();
    let session = runtime.session("s").await.unwrap();
    let outcome = session.prompt("hello").await.unwrap().await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);

    let seen = adapter.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].attempt, 2);
    let mut retried = seen[1].clone();
    retried.attempt = 1;
    assert_eq!(retried, seen[0], "the retried request equals the failed one");

    let events = finish(runtime, &store, "s").await;
    assert_eq!(
        kinds(&events)[3..],
        [
            "step/start",
            "request/start",
            "assistant/chunk",
            "assistant/chunk",
            "request/error",
            "request/start",
            "assistant/chunk",
            "assistant/chunk",
            "assistant/message",
            "step/end",
            "turn/end",
            "agent/idle",
        ]
    );
    let message = events.iter().find_map(|e| match &e.event {
        Event::AssistantMessage(m) => Some(m.text.clone()),
        _ => None,
    });
    assert_eq!(message.as_deref(), Some("done"), "the failed attempt's chunks are not in it");
    assert_eq!(trace.take(), ["retry"]);
}

#[tokio::test(start_paused = true)]
async fn a_failure_nobody_recovers_ends_the_turn_with_it() {
    let store = MemoryStore::new();
    let adapter = Scripted::new(vec![fail("RATE_LIMIT", &[])]);
    let trace = Trace::default();
    let runtime = builder(&store, adapter)
        .plugin(TestPlugin::answering("next", &trace, Verdict::Next))
        .build()
        .await
        .unwrap();
    let session = runtime.session("s").await.unwrap();
    let outcome = session.prompt("hello").await.unwrap().await.unwrap();
    match &outcome.reason {
        TurnEndReason::Error { failure } => assert_eq!(failure.code(), "RATE_LIMIT"),
        other => panic!("{other:?}"),
    }
    let events = finish(runtime, &store, "s").await;
    assert_eq!(
        kinds(&events)[3..],
        ["step/start", "request/start", "request/error", "step/end", "turn/end", "agent/idle"]
    );
}
