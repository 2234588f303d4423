//! `compaction` end to end, in the default chain: the attempt after a compaction is built from
//! the compacted history — by the step, from the log's history fold, also after the runtime is
//! restarted over the same store. Every test ends with the invariant check of its session log.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use rein_plugins::auto_retry::AutoRetry;
use rein_plugins::compaction::Compaction;
use rein_plugins::llm_retry::LlmRetry;
use rein_runtime::clock::VirtualClock;
use rein_runtime::event::{Event, TurnEndReason};
use rein_runtime::provider::Message;
use rein_runtime::random::Constant;
use rein_runtime::runtime::{Route, Runtime};
use rein_runtime::store::memory::MemoryStore;
use rein_runtime::tool::echo::EchoTool;
use rein_testkit::log::{assert_invariants, kinds, retries};
use rein_testkit::scripted::{Scripted, echo, fail, reply};
use serde_json::json;

async fn runtime(store: &MemoryStore, adapter: &Arc<Scripted>) -> Runtime {
    Runtime::builder()
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .jitter(Arc::new(Constant::new(0.5).unwrap()))
        .tool(Arc::new(EchoTool))
        .route(Route::new("mock", adapter.clone()).model("m"))
        .plugin(LlmRetry::default())
        .plugin(Compaction::from_config(&json!({"keepRecentMessages": 2})).unwrap())
        .plugin(AutoRetry::default())
        .build()
        .await
        .unwrap()
}

fn user(text: &str) -> Message {
    Message::User { text: text.into() }
}

fn assistant(text: &str) -> Message {
    Message::Assistant { text: text.into(), tool_calls: vec![] }
}

#[tokio::test(start_paused = true)]
async fn the_next_attempt_is_built_from_the_compacted_history_also_after_a_restart() {
    let store = MemoryStore::new();
    let adapter = Scripted::per_session(vec![
        echo("first"),
        reply(&["The tool said: first"]),
        reply(&["Second answer"]),
        fail("CONTEXT_WINDOW_EXCEEDED", "maximum context length exceeded"),
        reply(&["Third answer"]),
    ]);
    let rt = runtime(&store, &adapter).await;
    let session = rt.session("s").await.unwrap();
    for prompt in ["Please echo first", "Second question", "Third question"] {
        let outcome = session.prompt(prompt).unwrap().await.unwrap();
        assert_eq!(outcome.reason, TurnEndReason::Completed, "{prompt}");
    }
    let seen = adapter.seen();
    assert_eq!(seen.len(), 5);
    let (overflowed, retried) = (&seen[3].request, &seen[4].request);
    assert_eq!((overflowed.turn, overflowed.attempt, retried.attempt), (3, 1, 2));
    assert_eq!(overflowed.messages.len(), 7, "the whole history overflowed");
    assert_eq!(
        &retried.messages[..],
        [user("Second question"), assistant("Second answer"), user("Third question")],
        "turn 1, its tool call with its result, is gone from the retried request"
    );
    rt.shutdown().await;

    // A new runtime over the same store folds the compaction again: the next request carries
    // the compacted history, plus the new exchange.
    let adapter = Scripted::per_session(vec![reply(&["Fourth answer"])]);
    let rt = runtime(&store, &adapter).await;
    let session = rt.session("s").await.unwrap();
    session.prompt("Fourth question").unwrap().await.unwrap();
    assert_eq!(
        &adapter.seen()[0].request.messages[..],
        [
            user("Second question"),
            assistant("Second answer"),
            user("Third question"),
            assistant("Third answer"),
            user("Fourth question"),
        ]
    );
    rt.shutdown().await;

    let events = store.events("s");
    assert_invariants(&events);
    let compacted: Vec<(u32, u32, usize, u64)> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::ContextCompacted(c) => Some((c.turn, c.step, c.removed.len(), c.kept)),
            _ => None,
        })
        .collect();
    assert_eq!(compacted, [(3, 1, 5, 3)]);
    assert!(retries(&events).is_empty(), "compaction writes no llm/retry");
    assert_eq!(kinds(&events).iter().filter(|k| **k == "request/error").count(), 1);
}
