//! The agent loop end to end: prompts, steps, tools, retries through the waterfall, the step
//! limit, queued turns, hibernation and reopening. Every test ends by checking its log.

// Helpers outside `#[test]` functions unwrap too: a failing set-up is a failing test.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rein_runtime::BoxFuture;
use rein_runtime::clock::VirtualClock;
use rein_runtime::event::{CancelCause, Envelope, Event, PluginCrashed, TurnEndReason};
use rein_runtime::failure::Failure;
use rein_runtime::plugin::Verdict;
use rein_runtime::provider::{Adapter, Message, ToolSpec};
use rein_runtime::retry_policy::RetryPolicy;
use rein_runtime::runtime::{DEFAULT_IDLE_GRACE, Route, Runtime, RuntimeBuilder};
use rein_runtime::session::{AnswerDelta, Prompt};
use rein_runtime::store::memory::MemoryStore;
use rein_runtime::tool::{Tool, ToolOutcome};
use rein_testkit::log::{assert_valid, kinds};
use rein_testkit::plugins::{TestPlugin, Trace};
use rein_testkit::runtime::shut_down;
use rein_testkit::scripted::{Scripted, call, fail_streamed, reply, stall};
use rein_testkit::{log, runtime, scripted};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn builder(store: &MemoryStore, adapter: Arc<dyn Adapter>) -> RuntimeBuilder {
    runtime::builder(store, adapter, "mock-1")
}

async fn finish(runtime: Runtime, store: &MemoryStore, session: &str) -> Vec<Envelope> {
    shut_down(&runtime).await;
    let events = store.events(session);
    assert_valid(&events);
    events
}

/// A store that notes the event types of every batch it is asked to append.
#[derive(Default)]
struct Batches {
    inner: MemoryStore,
    batches: Mutex<Vec<Vec<&'static str>>>,
}

impl rein_runtime::store::SessionStore for Batches {
    fn durability(&self) -> rein_runtime::store::Durability {
        self.inner.durability()
    }

    fn append<'a>(
        &'a self,
        session: &'a str,
        events: &'a [Envelope],
    ) -> BoxFuture<'a, Result<(), rein_runtime::store::StoreError>> {
        self.batches.lock().unwrap().push(kinds(events));
        self.inner.append(session, events)
    }

    fn claim<'a>(
        &'a self,
        session: &'a str,
    ) -> BoxFuture<'a, Result<rein_runtime::store::Claim, rein_runtime::store::StoreError>> {
        self.inner.claim(session)
    }

    fn load<'a>(
        &'a self,
        session: &'a str,
    ) -> BoxFuture<'a, Result<Option<rein_runtime::store::Loaded>, rein_runtime::store::StoreError>>
    {
        self.inner.load(session)
    }

    fn sessions(&self) -> BoxFuture<'_, Result<Vec<String>, rein_runtime::store::StoreError>> {
        self.inner.sessions()
    }
}

/// Streams `a` and `b` at once, then `c` 10 ms later, and answers.
struct TwoBursts;

impl Adapter for TwoBursts {
    fn call(
        &self,
        _: rein_runtime::provider::Request,
        chunks: rein_runtime::provider::ChunkSink,
    ) -> BoxFuture<
        'static,
        Result<rein_runtime::provider::Completion, rein_runtime::failure::Failure>,
    > {
        Box::pin(async move {
            let _ = chunks.send("a".into());
            let _ = chunks.send("b".into());
            tokio::time::sleep(Duration::from_millis(10)).await;
            let _ = chunks.send("c".into());
            Ok(rein_runtime::provider::Completion::default())
        })
    }
}

#[tokio::test(start_paused = true)]
async fn chunks_that_arrive_together_are_written_as_one_batch_and_later_ones_as_they_come() {
    let store = Arc::new(Batches::default());
    let runtime = Runtime::builder()
        .store(store.clone())
        .route(Route::new("mock", Arc::new(TwoBursts)).model("mock-1"))
        .build()
        .await
        .unwrap();
    let session = runtime.session("s1").await.unwrap();
    let outcome = session.ask("hello").await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    runtime.shutdown().await;
    let chunk_batches: Vec<Vec<&str>> = store
        .batches
        .lock()
        .unwrap()
        .iter()
        .filter(|batch| batch.contains(&"assistant/chunk"))
        .cloned()
        .collect();
    assert_eq!(
        chunk_batches,
        [vec!["assistant/chunk", "assistant/chunk"], vec!["assistant/chunk"]],
        "a and b together, c on its own"
    );
    let events = store.inner.events("s1");
    assert_valid(&events);
    let texts: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::AssistantChunk(chunk) => Some(chunk.text.as_str()),
            Event::AssistantMessage(message) => Some(message.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["a", "b", "c", "abc"], "in order, and the message is all of them");
}

#[tokio::test(start_paused = true)]
async fn a_prompt_streams_one_step_and_completes() {
    let store = MemoryStore::new();
    let adapter = Scripted::new(vec![reply(&["do", "ne"])]);
    let runtime = builder(&store, adapter.clone()).build().await.unwrap();
    let session = runtime.session("s1").await.unwrap();

    let mut turn = session.prompt("hello").unwrap();
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
    let seen = adapter.requests();
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
    let (runtime, session) = runtime::start(builder(&store, adapter.clone())).await;
    let outcome = session.prompt("go").unwrap().await.unwrap();
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
    let second = &adapter.requests()[1];
    assert_eq!(second.step, 2);
    assert_eq!(
        second.messages.to_vec()[2..],
        [
            Message::Tool { id: "c1".into(), output: "ping".into(), is_error: false },
            Message::Tool { id: "c2".into(), output: "pong".into(), is_error: false },
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_retried_attempt_sends_the_same_request_and_only_its_own_chunks_become_the_message() {
    let store = MemoryStore::new();
    let adapter =
        Scripted::new(vec![fail_streamed("SERVER", &["par", "tial"]), reply(&["do", "ne"])]);
    let trace = Trace::default();
    let (runtime, session) =
        runtime::start(builder(&store, adapter.clone()).plugin(TestPlugin::answering(
            "retry",
            &trace,
            Verdict::Retry,
        )))
        .await;
    let outcome = session.prompt("hello").unwrap().await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);

    let seen = adapter.requests();
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
    let adapter = Scripted::new(vec![fail_streamed("RATE_LIMIT", &[])]);
    let trace = Trace::default();
    let (runtime, session) = runtime::start(
        builder(&store, adapter).plugin(TestPlugin::answering("next", &trace, Verdict::Next)),
    )
    .await;
    let outcome = session.prompt("hello").unwrap().await.unwrap();
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

/// A tool that fails (it cannot work at all), whatever its arguments.
struct Broken;

impl Tool for Broken {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("broken", "always fails")
    }
    fn call(&self, _: serde_json::Value, _: CancellationToken) -> BoxFuture<'static, ToolOutcome> {
        Box::pin(async { ToolOutcome::Failure("the disk is gone".into()) })
    }
}

#[tokio::test(start_paused = true)]
async fn a_tool_failure_is_recorded_and_ends_the_turn_without_the_waterfall() {
    let store = MemoryStore::new();
    let adapter = Scripted::new(vec![call(
        &[],
        &[("c1", "broken", json!({})), ("c2", "echo", json!({"text": "never"}))],
    )]);
    let trace = Trace::default();
    let (runtime, session) = runtime::start(
        builder(&store, adapter).tool(Arc::new(Broken)).plugin(TestPlugin::answering(
            "retry",
            &trace,
            Verdict::Retry,
        )),
    )
    .await;
    let outcome = session.prompt("go").unwrap().await.unwrap();
    match &outcome.reason {
        TurnEndReason::Error { failure } => {
            assert_eq!(failure.code(), "TOOL_ERROR");
            assert_eq!(failure.message(), "tool broken: the disk is gone");
        }
        other => panic!("{other:?}"),
    }
    assert!(trace.take().is_empty(), "a tool failure is not offered to the waterfall");
    let events = finish(runtime, &store, "s").await;
    let result = events.iter().find_map(|e| match &e.event {
        Event::ToolResult(r) => Some(r.clone()),
        _ => None,
    });
    let result = result.unwrap();
    assert!(result.is_error);
    assert_eq!((result.id.as_str(), result.output.as_str()), ("c1", "the disk is gone"));
    assert_eq!(events.iter().filter(|e| e.kind() == "tool/call").count(), 1, "c2 never ran");
}

#[tokio::test(start_paused = true)]
async fn a_tool_error_the_model_sees_lets_the_turn_go_on() {
    let store = MemoryStore::new();
    let adapter = Scripted::new(vec![
        call(&[], &[("c1", "echo", json!({"text": 1}))]),
        reply(&["sorry, fixed"]),
    ]);
    let (runtime, session) = runtime::start(builder(&store, adapter.clone())).await;
    let outcome = session.prompt("go").unwrap().await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    let second = &adapter.requests()[1];
    assert_eq!(
        second.messages.last(),
        Some(&Message::Tool {
            id: "c1".into(),
            output: "echo: arguments.text must be a string, got 1".into(),
            is_error: true,
        }),
        "the model saw the error in its next step"
    );
    finish(runtime, &store, "s").await;
}

#[tokio::test(start_paused = true)]
async fn the_answer_stream_resets_a_failed_attempts_text_and_settles_the_answer() {
    let store = MemoryStore::new();
    let adapter = Scripted::new(vec![
        fail_streamed("SERVER", &["par", "tial"]),
        reply(&["do", "ne"]),
        // Turn 2: a step that calls a tool, a failed attempt that streamed, the final answer.
        call(&["let me echo"], &[("c1", "echo", json!({"text": "hi"}))]),
        fail_streamed("SERVER", &["cut"]),
        reply(&["the echo said hi"]),
    ]);
    let trace = Trace::default();
    let (runtime, session) = runtime::start(
        builder(&store, adapter).plugin(TestPlugin::answering("retry", &trace, Verdict::Retry)),
    )
    .await;

    let mut answer = session.prompt("hello").unwrap().answer();
    let mut deltas = Vec::new();
    while let Some(delta) = answer.next_delta().await {
        deltas.push(delta);
    }
    let server = Failure::new("SERVER", "SERVER happened").unwrap();
    assert_eq!(
        deltas,
        [
            AnswerDelta::Text("par".into()),
            AnswerDelta::Text("tial".into()),
            AnswerDelta::Reset {
                attempt: 1,
                discarded: "partial".into(),
                failure: Some(server.clone())
            },
            AnswerDelta::Text("do".into()),
            AnswerDelta::Text("ne".into()),
            AnswerDelta::Settled("done".into()),
        ]
    );
    assert_eq!(answer.text(), "done");
    assert_eq!(answer.await.unwrap().reason, TurnEndReason::Completed);

    // Only what succeeded: the final step's answer, none of the failed attempt's text.
    let answered = session.prompt("echo hi").unwrap().answer().finish().await.unwrap();
    assert_eq!(answered.text, "the echo said hi");
    assert_eq!((answered.outcome.turn, answered.outcome.reason), (2, TurnEndReason::Completed));
    finish(runtime, &store, "s").await;
}

#[tokio::test(start_paused = true)]
async fn a_turn_cancelled_mid_stream_resets_what_its_attempt_streamed() {
    let store = MemoryStore::new();
    let (runtime, session) =
        runtime::start(builder(&store, Scripted::new(vec![stall(&["half an ans"])]))).await;
    let mut answer = session.prompt("hello").unwrap().answer();
    assert_eq!(answer.next_delta().await, Some(AnswerDelta::Text("half an ans".into())));
    assert!(session.cancel(CancelCause::User).await.unwrap());
    assert_eq!(
        answer.next_delta().await,
        Some(AnswerDelta::Reset { attempt: 1, discarded: "half an ans".into(), failure: None })
    );
    assert_eq!(answer.next_delta().await, None);
    assert_eq!(answer.text(), "", "nothing answered");
    let outcome = answer.outcome().await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Aborted { cause: CancelCause::User });
    finish(runtime, &store, "s").await;
}

/// The `tool/result` of every call, in order: (id, output, isError).
fn tool_results(events: &[Envelope]) -> Vec<(String, String, bool)> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolResult(r) => Some((r.id.clone(), r.output.clone(), r.is_error)),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_call_to_an_unknown_tool_is_answered_with_an_error_and_the_model_answers_next() {
    let store = MemoryStore::new();
    let adapter = Scripted::new(vec![
        call(&["let me grep"], &[("c1", "grep", json!({"pattern": "x"}))]),
        reply(&["I cannot grep; here is the answer"]),
    ]);
    let trace = Trace::default();
    let (runtime, session) =
        runtime::start(builder(&store, adapter.clone()).plugin(TestPlugin::answering(
            "retry",
            &trace,
            Verdict::Retry,
        )))
        .await;
    let outcome = session.prompt("find x").unwrap().await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed, "the turn goes on and completes");
    assert!(trace.take().is_empty(), "nothing was offered to the waterfall");
    let unknown = r#"no tool named "grep"; available: "echo""#;
    assert_eq!(
        adapter.requests()[1].messages.last(),
        Some(&Message::Tool { id: "c1".into(), output: unknown.into(), is_error: true }),
        "the model saw which tools it has in its next step"
    );
    let events = finish(runtime, &store, "s").await;
    assert_eq!(tool_results(&events), [("c1".to_owned(), unknown.to_owned(), true)]);
    assert_eq!(events.iter().filter(|e| e.kind() == "step/start").count(), 2);
}

#[tokio::test(start_paused = true)]
async fn with_no_tools_a_model_that_keeps_calling_one_stops_at_the_step_limit() {
    // No tool at all, as `rein chat` offers none.
    let store = MemoryStore::new();
    let adapter = Scripted::new(vec![
        call(&[], &[("c1", "read_file", json!({}))]),
        call(&[], &[("c2", "read_file", json!({}))]),
        reply(&["never asked"]),
    ]);
    let runtime = Runtime::builder()
        .validator(log::live_invariant)
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .route(Route::new("mock", adapter.clone()).model("mock-1"))
        .max_steps(2)
        .build()
        .await
        .unwrap();
    let session = runtime.session("s").await.unwrap();
    let outcome = session.prompt("read it").unwrap().await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::MaxSteps, "bounded by the step limit");
    assert_eq!(adapter.requests().len(), 2);
    assert!(adapter.requests()[0].tools.is_empty(), "no tool offered");
    let events = finish(runtime, &store, "s").await;
    let none = r#"no tool named "read_file"; available: none"#.to_owned();
    assert_eq!(
        tool_results(&events),
        [("c1".to_owned(), none.clone(), true), ("c2".to_owned(), none, true)]
    );
}

#[tokio::test(start_paused = true)]
async fn an_exhausted_script_is_not_offered_to_the_waterfall() {
    let store = MemoryStore::new();
    let trace = Trace::default();
    let (runtime, session) =
        runtime::start(builder(&store, Scripted::new(vec![])).plugin(TestPlugin::answering(
            "retry",
            &trace,
            Verdict::Retry,
        )))
        .await;
    let outcome = session.prompt("go").unwrap().await.unwrap();
    match &outcome.reason {
        TurnEndReason::Error { failure } => assert_eq!(failure.code(), "SCRIPT_EXHAUSTED"),
        other => panic!("{other:?}"),
    }
    assert!(trace.take().is_empty());
    let events = finish(runtime, &store, "s").await;
    assert!(kinds(&events).contains(&"request/error"));
}

/// A plugin that records the retry policy of every payload it is offered, then delegates.
fn policy_recorder(seen: Arc<Mutex<Vec<Option<RetryPolicy>>>>) -> Arc<TestPlugin> {
    TestPlugin::new("recorder", &Trace::default(), move |recovery, _| {
        seen.lock().unwrap().push(recovery.payload.retry_policy.clone());
        Box::pin(async { Verdict::Next })
    })
}

#[tokio::test(start_paused = true)]
async fn the_payload_carries_the_routes_effective_policy_or_none_without_an_adapter() {
    let always = RetryPolicy::from_declared(&json!({"mode": "always"}), "p").unwrap();
    let configured =
        RetryPolicy::from_declared(&json!({"mode": "normal", "maxRetries": 7}), "p").unwrap();
    let store = MemoryStore::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let failing: Arc<dyn Adapter> = Scripted::always(fail_streamed("SERVER", &[]));
    let (runtime, session) = runtime::start(
        Runtime::builder()
            .validator(log::live_invariant)
            .store(Arc::new(store.clone()))
            .clock(Arc::new(VirtualClock::start()))
            .route(
                Route::new("declared", Arc::clone(&failing))
                    .model("m")
                    .retry_policy(always.clone()),
            )
            .route(Route::new("undeclared", failing).model("m"))
            .default_route_policy(configured.clone())
            .plugin(policy_recorder(Arc::clone(&seen))),
    )
    .await;
    for route in ["declared", "undeclared", "nowhere"] {
        session.prompt(Prompt::new("go").on(route)).unwrap().await.unwrap();
    }
    assert_eq!(*seen.lock().unwrap(), [Some(always), Some(configured), None]);
    let events = finish(runtime, &store, "s").await;
    let no_adapter = events.iter().rev().find_map(|e| match &e.event {
        Event::RequestError(r) => Some(r.clone()),
        _ => None,
    });
    let no_adapter = no_adapter.unwrap();
    assert_eq!(
        (no_adapter.provider.as_str(), no_adapter.failure.code()),
        ("nowhere", "NO_ADAPTER")
    );

    // Without a configured default, the defaults apply.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let store = MemoryStore::new();
    let runtime = builder(&store, Scripted::always(fail_streamed("SERVER", &[])))
        .plugin(policy_recorder(Arc::clone(&seen)))
        .build()
        .await
        .unwrap();
    runtime.session("s").await.unwrap().prompt("go").unwrap().await.unwrap();
    assert_eq!(*seen.lock().unwrap(), [Some(RetryPolicy::default())]);
    finish(runtime, &store, "s").await;
}

#[tokio::test(start_paused = true)]
async fn a_crashing_plugin_leaves_a_plugin_crashed_event_and_the_chain_goes_on() {
    let store = MemoryStore::new();
    let trace = Trace::default();
    let (runtime, session) = runtime::start(
        builder(&store, Scripted::new(vec![fail_streamed("SERVER", &[]), reply(&["ok"])]))
            .plugin(TestPlugin::crashing("crashy", &trace))
            .plugin(TestPlugin::answering("retry", &trace, Verdict::Retry)),
    )
    .await;
    let outcome = session.prompt("go").unwrap().await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    let events = finish(runtime, &store, "s").await;
    let crashed = events.iter().find_map(|e| match &e.event {
        Event::PluginCrashed(c) => Some(c.clone()),
        _ => None,
    });
    assert_eq!(
        crashed,
        Some(PluginCrashed { plugin: "crashy".into(), error: "crash #1".into(), restarts: 1 })
    );
    let after_error = log::from_kind(&events, "request/error");
    assert_eq!(kinds(after_error)[..3], ["request/error", "plugin/crashed", "request/start"]);
}

#[tokio::test(start_paused = true)]
async fn a_turn_can_be_streamed_late_mid_turn_or_after_the_session_hibernated() {
    let store = MemoryStore::new();
    let adapter = Scripted::new(vec![
        scripted::after(100, reply(&["a", "b"])),
        scripted::after(100, reply(&["c"])),
    ]);
    let (runtime, session) = runtime::start(builder(&store, adapter)).await;

    // Mid-turn: what was committed is read back, the rest arrives live, nothing twice.
    let mut first = session.prompt("one").unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut streamed = Vec::new();
    while let Some(event) = first.next_event().await {
        streamed.push(event);
    }
    assert_eq!(first.turn(), Some(1));

    // After the turn ended and the session hibernated (its idle grace over): read from the store.
    let mut second = session.prompt("two").unwrap();
    tokio::time::sleep(DEFAULT_IDLE_GRACE + Duration::from_secs(1)).await;
    assert!(!session.is_awake());
    let mut late = Vec::new();
    while let Some(event) = second.next_event().await {
        late.push(event);
    }
    assert_eq!(second.outcome().await.unwrap().turn, 2);

    let events = finish(runtime, &store, "s").await;
    let turn_one = &events[1..=9];
    assert_eq!(streamed, turn_one);
    assert_eq!(kinds(&late).first(), Some(&"user/message"));
    assert_eq!(kinds(&late).last(), Some(&"turn/end"));
    assert_eq!(late, events[11..11 + late.len()], "turn 2 from its user message to its turn/end");
}
