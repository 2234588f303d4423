//! Cancellation at every stage of a turn (`docs/runtime-semantics.md`, "Cancellation, hibernation,
//! shutdown"): during a provider stream, a tool, a plugin's wait and a downstream consultation, and
//! of prompts still queued. The turn ends `aborted` at once, and nothing after the cancel is
//! written except `step/end`, `turn/end`, `agent/idle`.

// Helpers outside `#[test]` functions unwrap too: a failing set-up is a failing test.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use rein_runtime::BoxFuture;
use rein_runtime::clock::VirtualClock;
use rein_runtime::event::ToolCall;
use rein_runtime::event::{CancelCause, Envelope, TurnEndReason};
use rein_runtime::history::UNANSWERED;
use rein_runtime::plugin::{Plugin, Verdict};
use rein_runtime::provider::{Adapter, Message, ToolSpec};
use rein_runtime::runtime::{Route, Runtime};
use rein_runtime::session::SessionError;
use rein_runtime::session::TurnHandle;
use rein_runtime::store::memory::MemoryStore;
use rein_runtime::tool::{Tool, ToolOutcome};
use rein_testkit::log;
use rein_testkit::log::{assert_valid, kinds};
use rein_testkit::plugins::{TestPlugin, Trace};
use rein_testkit::scripted::{Scripted, call, fail_streamed, reply, stall};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// A plugin that takes a second over every failure and does not listen to the turn's token: the
/// step that offered it the failure stops only once it answered (the walk settles first).
struct Stubborn;

impl Plugin for Stubborn {
    fn name(&self) -> &str {
        "stubborn"
    }
    fn recover(self: Arc<Self>, _: rein_runtime::plugin::Recovery) -> BoxFuture<'static, Verdict> {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Verdict::Next
        })
    }
}

/// A tool that waits an hour unless cancelled.
struct Slow;

impl Tool for Slow {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("slow", "waits")
    }
    fn call(&self, _: Value, cancel: CancellationToken) -> BoxFuture<'static, ToolOutcome> {
        Box::pin(async move {
            tokio::select! {
                () = cancel.cancelled() => ToolOutcome::Failure("cancelled".into()),
                () = tokio::time::sleep(Duration::from_secs(3600)) => ToolOutcome::Output("slept".into()),
            }
        })
    }
}

async fn runtime(
    store: &MemoryStore,
    adapter: Arc<dyn Adapter>,
    plugins: Vec<Arc<dyn Plugin>>,
) -> Runtime {
    let mut builder = Runtime::builder()
        .validator(log::live_invariant)
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .route(Route::new("mock", adapter).model("m"))
        .tool(Arc::new(Slow));
    for plugin in plugins {
        builder = builder.plugin(plugin);
    }
    builder.build().await.unwrap()
}

/// Reads the turn's events up to (and including) the first of type `kind`.
async fn until(turn: &mut TurnHandle, kind: &str) -> Envelope {
    loop {
        let event = turn.next_event().await.expect("the turn ended first");
        if event.kind() == kind {
            return event;
        }
    }
}

/// Cancels a turn once it wrote `stage`; checks it ends aborted at once with nothing but the
/// closing events after the cancel.
async fn cancel_at(stage: &str, adapter: Arc<dyn Adapter>, plugins: Vec<Arc<dyn Plugin>>) {
    let store = MemoryStore::new();
    let runtime = runtime(&store, adapter, plugins).await;
    let session = runtime.session("s").await.unwrap();
    let mut turn = session.prompt("hello").unwrap();
    let last = until(&mut turn, stage).await;
    tokio::time::sleep(Duration::from_millis(250)).await;

    let before = tokio::time::Instant::now();
    assert!(session.cancel(CancelCause::User).await.unwrap(), "{stage}: a turn was running");
    let outcome = turn.outcome().await.unwrap();
    assert_eq!(before.elapsed(), Duration::ZERO, "{stage}: aborted promptly");
    assert_eq!(outcome.reason, TurnEndReason::Aborted { cause: CancelCause::User }, "{stage}");

    runtime.shutdown().await;
    assert_eq!(runtime.census().tasks(), 0, "{stage}: every wait was released");
    let events = store.events("s");
    assert_valid(&events);
    let after: Vec<&str> = kinds(&events[last.seq as usize + 1..]);
    assert_eq!(
        after,
        ["step/end", "turn/end", "agent/idle"],
        "{stage}: nothing else after the cancel"
    );
}

#[tokio::test(start_paused = true)]
async fn cancelling_during_a_provider_stream_aborts_the_attempt() {
    cancel_at("assistant/chunk", Scripted::new(vec![stall(&["par"])]), vec![]).await;
    cancel_at("request/start", Scripted::new(vec![stall(&[])]), vec![]).await;
}

#[tokio::test(start_paused = true)]
async fn cancelling_during_a_tool_call_aborts_the_tool() {
    let adapter = Scripted::new(vec![call(&[], &[("c1", "slow", json!({}))]), reply(&["never"])]);
    cancel_at("tool/call", adapter, vec![]).await;
}

#[tokio::test(start_paused = true)]
async fn the_turn_after_one_cancelled_during_a_tool_sends_the_call_answered() {
    // Every chat API refuses a tool call without its result: the next turn must not inherit one.
    let adapter = Scripted::new(vec![call(&[], &[("c1", "slow", json!({}))]), reply(&["fine"])]);
    let store = MemoryStore::new();
    let runtime = runtime(&store, adapter.clone(), vec![]).await;
    let session = runtime.session("s").await.unwrap();
    let mut turn = session.prompt("hello").unwrap();
    until(&mut turn, "tool/call").await;
    assert!(session.cancel(CancelCause::User).await.unwrap());
    turn.outcome().await.unwrap();

    let outcome = session.ask("and now?").await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    runtime.shutdown().await;

    let seen = adapter.requests();
    let messages: Vec<Message> = seen[1].messages.iter().cloned().collect();
    assert_eq!(
        messages[1..],
        [
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "slow".into(),
                    arguments: json!({})
                }],
            },
            Message::Tool { id: "c1".into(), output: UNANSWERED.into(), is_error: true },
            Message::User { text: "and now?".into() },
        ]
    );
    // Only the request says it: the log keeps the call unanswered, as it happened.
    let events = store.events("s");
    assert_valid(&events);
    assert!(!kinds(&events).contains(&"tool/result"));
}

#[tokio::test(start_paused = true)]
async fn cancelling_during_a_plugin_wait_aborts_the_wait() {
    let t = Trace::default();
    let adapter = Scripted::new(vec![fail_streamed("SERVER", &["x"]), reply(&["never"])]);
    let waiting = TestPlugin::slow("waiting", &t, Duration::from_secs(3600), Verdict::Retry);
    cancel_at("request/error", adapter, vec![waiting]).await;
}

#[tokio::test(start_paused = true)]
async fn cancelling_during_a_downstream_consultation_aborts_it() {
    let t = Trace::default();
    let adapter = Scripted::new(vec![fail_streamed("SERVER", &[]), reply(&["never"])]);
    let plugins: Vec<Arc<dyn Plugin>> = vec![
        TestPlugin::downstream_first("asking", &t, Verdict::Retry),
        TestPlugin::slow("waiting", &t, Duration::from_secs(3600), Verdict::Retry),
    ];
    cancel_at("request/error", adapter, plugins).await;
    assert_eq!(t.take(), ["asking", "waiting"]);
}

/// A cancel that reaches the session after the turn decided to end on its own (its step
/// completed) but before the session wrote its `turn/end` — the turn's actor slow to stop, as
/// another worker thread can make it at random — answers "not landed", and the turn ends
/// `completed`; a cancel before the decision lands. Either way the answer is what the log then
/// says.
#[tokio::test(start_paused = true)]
async fn a_cancel_after_the_turn_decided_its_end_does_not_land_and_the_end_stands() {
    let store = MemoryStore::new();
    let slow = rein_runtime::fault::Faults::none().slow_turn_end(1, Duration::from_secs(1));
    let runtime = Runtime::builder()
        .validator(log::live_invariant)
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .route(Route::new("mock", Scripted::new(vec![reply(&["done"]), stall(&[])])).model("m"))
        .faults(slow)
        .build()
        .await
        .unwrap();
    let session = runtime.session("s").await.unwrap();
    let mut turn = session.prompt("hello").unwrap();
    until(&mut turn, "assistant/message").await;
    tokio::time::sleep(Duration::from_millis(500)).await; // the turn decided; still stopping
    assert!(!session.cancel(CancelCause::User).await.unwrap(), "too late: the turn had ended");
    assert_eq!(turn.outcome().await.unwrap().reason, TurnEndReason::Completed);

    // Turn 2 is not slow, and its attempt never answers: a cancel lands.
    let mut turn = session.prompt("again").unwrap();
    until(&mut turn, "request/start").await;
    assert!(session.cancel(CancelCause::User).await.unwrap());
    let reason = turn.outcome().await.unwrap().reason;
    assert_eq!(reason, TurnEndReason::Aborted { cause: CancelCause::User });
    runtime.shutdown().await;
    assert_valid(&store.events("s"));
}

#[tokio::test(start_paused = true)]
async fn a_landed_cancel_answers_once_the_turn_is_closed_and_the_next_turn_need_not_wait() {
    let adapter = Scripted::new(vec![fail_streamed("SERVER", &[]), reply(&["again"])]);
    let store = MemoryStore::new();
    let runtime = runtime(&store, adapter, vec![Arc::new(Stubborn)]).await;
    let session = runtime.session("s").await.unwrap();
    let mut turn = session.prompt("hello").unwrap();
    until(&mut turn, "request/error").await; // the plugin takes its second over it

    let cancelled = tokio::time::Instant::now();
    assert!(session.cancel(CancelCause::User).await.unwrap());
    // Answered once the closing batch is durable, while the plugin still decides: no waiting.
    assert_eq!(cancelled.elapsed(), Duration::ZERO);
    let aborted = TurnEndReason::Aborted { cause: CancelCause::User };
    let events = store.events("s");
    assert_eq!(kinds(&events[events.len() - 3..]), ["step/end", "turn/end", "agent/idle"]);
    let end = events.iter().rev().find_map(|e| match &e.event {
        rein_runtime::event::Event::TurnEnd(end) => Some(end.reason.clone()),
        _ => None,
    });
    assert_eq!(end, Some(aborted.clone()), "in the log when the cancel answers");
    assert_eq!(turn.outcome().await.unwrap().reason, aborted, "resolved with the answer");

    // The next prompt runs at once, while turn 1's step still waits for the plugin's second;
    // nothing of turn 1 is written after its turn/end, and shutdown waits for its actors.
    let next = session.prompt("next").unwrap();
    assert_eq!(next.outcome().await.unwrap().reason, TurnEndReason::Completed);
    assert_eq!(cancelled.elapsed(), Duration::ZERO, "turn 2 did not wait for turn 1's actors");
    runtime.shutdown().await;
    assert!(cancelled.elapsed() >= Duration::from_secs(1), "shutdown waited for them");
    assert_eq!((runtime.census().actors(), runtime.census().tasks()), (0, 0));
    let events = store.events("s");
    assert_valid(&events);
    let turn_one: Vec<&str> =
        kinds(&events).into_iter().take_while(|kind| *kind != "agent/idle").collect();
    assert_eq!(turn_one.last(), Some(&"turn/end"), "turn 1 ends with its closing batch");
    let turn_of = |e: &Envelope| serde_json::to_value(&e.event).unwrap()["data"]["turn"].as_u64();
    let late = events.iter().skip(turn_one.len()).filter(|e| turn_of(e) == Some(1)).count();
    assert_eq!(late, 0, "nothing of turn 1 after its turn/end");
}

#[tokio::test(start_paused = true)]
async fn a_cancel_drops_the_prompts_queued_behind_the_running_turn() {
    let store = MemoryStore::new();
    let runtime = runtime(&store, Scripted::new(vec![stall(&[])]), vec![]).await;
    let session = runtime.session("s").await.unwrap();
    let mut first = session.prompt("one").unwrap();
    let queued = session.prompt("two").unwrap();
    until(&mut first, "request/start").await;
    assert!(session.cancel(CancelCause::User).await.unwrap());
    assert_eq!(
        first.outcome().await.unwrap().reason,
        TurnEndReason::Aborted { cause: CancelCause::User }
    );
    match queued.outcome().await {
        Err(SessionError::Dropped { cause }) => assert_eq!(cause, CancelCause::User),
        other => panic!("{other:?}"),
    }
    assert!(!session.cancel(CancelCause::User).await.unwrap(), "nothing runs any more");
    runtime.shutdown().await;
    let events = store.events("s");
    assert_valid(&events);
    assert_eq!(
        events.iter().filter(|e| e.kind() == "user/message").count(),
        1,
        "two never started"
    );
}

#[tokio::test(start_paused = true)]
async fn closing_a_session_aborts_its_turn_as_parent_and_hibernates_it() {
    let store = MemoryStore::new();
    let runtime = runtime(&store, Scripted::new(vec![stall(&[])]), vec![]).await;
    let session = runtime.session("s").await.unwrap();
    let mut turn = session.prompt("one").unwrap();
    until(&mut turn, "request/start").await;
    session.close().await.unwrap();
    assert_eq!(
        turn.outcome().await.unwrap().reason,
        TurnEndReason::Aborted { cause: CancelCause::Parent }
    );
    assert!(!session.is_awake());
    runtime.shutdown().await;
    assert_valid(&store.events("s"));
}
