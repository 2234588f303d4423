//! The OpenAI-compatible adapter through the full runtime with `llm-retry`, against a real HTTP
//! server on 127.0.0.1, on paused time. Every test ends with the invariant check of its log.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use rein_plugins::{auto_retry, llm_retry};
use rein_providers::{OpenAiCompatible, OpenAiConfig};
use rein_runtime::clock::VirtualClock;
use rein_runtime::event::{CancelCause, Envelope, Event, TurnEndReason};
use rein_runtime::runtime::{Route, Runtime};
use rein_runtime::session::Session;
use rein_runtime::store::memory::MemoryStore;
use rein_runtime::tool::echo::EchoTool;
use rein_testkit::log::{answers, assert_invariants, kinds, retries, turn_ends_at};
use rein_testkit::server::{
    Part, Reply, Server, answer, delta, done, error, free_addr, status_reply, usage,
};
use serde_json::json;
use tokio::time::Instant;

const KEY: &str = "sk-retry-test";

/// A runtime with `llm-retry` (no jitter), the echo tool and a `deepseek` route at `base_url`;
/// session `s` opened.
async fn start(store: &MemoryStore, base_url: &str) -> (Runtime, Session) {
    start_with(store, base_url, false).await
}

/// [`start`], with `auto-retry` (no jitter) after `llm-retry` when `auto_retry`.
async fn start_with(store: &MemoryStore, base_url: &str, auto_retry: bool) -> (Runtime, Session) {
    let config =
        OpenAiConfig::deepseek().with_base_url(base_url).unwrap().with_api_key(KEY).unwrap();
    let model = config.model().to_owned();
    let mut builder = Runtime::builder()
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .tool(Arc::new(EchoTool))
        .plugin(llm_retry::factory(&json!({"jitterRatio": 0})).unwrap());
    if auto_retry {
        builder = builder.plugin(auto_retry::factory(&json!({"jitterRatio": 0})).unwrap());
    }
    let runtime = builder
        .route(
            Route::new("deepseek", Arc::new(OpenAiCompatible::new(config).unwrap())).model(model),
        )
        .build()
        .await
        .unwrap();
    let session = runtime.session("s").await.unwrap();
    (runtime, session)
}

/// Shuts down, checks nothing is left running, and returns the log after its invariant check.
async fn finish(runtime: Runtime, store: &MemoryStore) -> Vec<Envelope> {
    runtime.shutdown().await;
    assert_eq!((runtime.census().actors(), runtime.census().tasks()), (0, 0));
    let events = store.events("s");
    assert_invariants(&events);
    events
}

fn chunks(events: &[Envelope]) -> Vec<(u32, String)> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Event::AssistantChunk(c) => Some((c.attempt, c.text.clone())),
            _ => None,
        })
        .collect()
}

fn failure_of(reason: &TurnEndReason) -> (&str, &str) {
    match reason {
        TurnEndReason::Error { failure } => (failure.code(), failure.message()),
        other => panic!("expected an error, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_refused_connection_is_retried_once_the_server_listens_during_the_backoff() {
    let origin = Instant::now();
    let addr = free_addr().await;
    let store = MemoryStore::new();
    let (runtime, session) = start(&store, &format!("http://{addr}")).await;
    let mut turn = session.prompt("hello").unwrap();
    let mut server = None;
    while let Some(event) = turn.next_event().await {
        if let Event::LlmRetry(retry) = &event.event {
            assert_eq!(retry.failure.code(), "TRANSPORT");
            // The backoff has begun: start listening now.
            server = Some(Server::start_at(addr, vec![answer(&["back ", "online"])]).await);
        }
    }
    assert_eq!(turn.outcome().await.unwrap().reason, TurnEndReason::Completed);
    assert_eq!(origin.elapsed(), Duration::from_millis(500), "one backoff of 500 ms");
    let server = server.expect("a retry was scheduled");
    assert_eq!(server.seen().len(), 1);

    let events = finish(runtime, &store).await;
    assert_eq!(answers(&events), ["back online"]);
    assert_eq!(retries(&events).len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_transient_failure_is_retried_with_a_byte_identical_body_and_its_chunks_never_commit() {
    let server = Server::start(vec![
        Reply::Sse(vec![delta("a failed "), delta("draft"), Part::Drop]),
        status_reply(503, &[("retry-after", "2")], r#"{"error":{"message":"Server busy"}}"#),
        answer(&["the ", "answer"]),
    ])
    .await;
    let store = MemoryStore::new();
    let (runtime, session) = start(&store, &server.base_url()).await;
    let outcome = session.prompt("hello").unwrap().await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);

    let seen = server.seen();
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[1].body, seen[0].body, "the retried body is byte-identical");
    assert_eq!(seen[2].body, seen[0].body);

    let events = finish(runtime, &store).await;
    assert_eq!(answers(&events), ["the answer"], "no failed attempt's text is committed");
    assert_eq!(
        chunks(&events),
        [(1, "a failed ".into()), (1, "draft".into()), (3, "the ".into()), (3, "answer".into())],
        "failed chunks stay in the log as diagnostics"
    );
    let summary: Vec<(String, f64)> =
        retries(&events).iter().map(|(_, r)| (r.failure.code().to_owned(), r.delay_ms)).collect();
    assert_eq!(
        summary,
        [("TRANSPORT".into(), 500.0), ("SERVER".into(), 2000.0)],
        "the backoff, then the server's Retry-After verbatim"
    );
}

#[tokio::test(start_paused = true)]
async fn a_stream_closed_without_done_is_not_retried_by_llm_retrys_defaults() {
    let server = Server::start(vec![
        Reply::Sse(vec![delta("cut short"), usage(1, 1)]),
        answer(&["never asked"]),
    ])
    .await;
    let store = MemoryStore::new();
    let (runtime, session) = start(&store, &server.base_url()).await;
    let outcome = session.prompt("hello").unwrap().await.unwrap();
    assert_eq!(failure_of(&outcome.reason).0, "STREAM_CLOSED");
    assert_eq!(server.seen().len(), 1);

    let events = finish(runtime, &store).await;
    assert!(retries(&events).is_empty());
    assert!(answers(&events).is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_stream_closed_without_done_is_retried_by_auto_retrys_defaults() {
    let origin = Instant::now();
    let server = Server::start(vec![
        Reply::Sse(vec![delta("cut short"), usage(1, 1)]),
        answer(&["the whole ", "answer"]),
    ])
    .await;
    let store = MemoryStore::new();
    let (runtime, session) = start_with(&store, &server.base_url(), true).await;
    let outcome = session.prompt("hello").unwrap().await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    assert_eq!(origin.elapsed(), Duration::from_millis(1000), "auto-retry's first delay");
    assert_eq!(server.seen().len(), 2);

    let events = finish(runtime, &store).await;
    let retried: Vec<(String, String, f64)> = retries(&events)
        .iter()
        .map(|(_, r)| (r.plugin.clone(), r.failure.code().to_owned(), r.delay_ms))
        .collect();
    assert_eq!(retried, [("auto-retry".to_owned(), "STREAM_CLOSED".to_owned(), 1000.0)]);
    assert_eq!(answers(&events), ["the whole answer"], "the half answer is never committed");
}

#[tokio::test(start_paused = true)]
async fn the_budget_ends_in_the_last_failure() {
    let server = Server::start(vec![
        error(500, "busy one"),
        status_reply(429, &[("retry-after-ms", "1500")], r#"{"error":{"message":"slow down"}}"#),
        error(502, "busy three"),
        answer(&["never asked"]),
    ])
    .await;
    let store = MemoryStore::new();
    let (runtime, session) = start(&store, &server.base_url()).await;
    let outcome = session.prompt("hello").unwrap().await.unwrap();
    assert_eq!(failure_of(&outcome.reason), ("SERVER", "busy three"));
    assert_eq!(server.remaining(), 1, "the budget of 2 retries is spent; no fourth request");

    let events = finish(runtime, &store).await;
    let delays: Vec<f64> = retries(&events).iter().map(|(_, r)| r.delay_ms).collect();
    assert_eq!(delays, [500.0, 1500.0]);
    let [(_, reason)] = turn_ends_at(&events).try_into().unwrap();
    let TurnEndReason::Error { failure } = reason else { panic!() };
    assert_eq!((failure.status(), failure.code()), (Some(502), "SERVER"));
}

#[tokio::test(start_paused = true)]
async fn a_stall_is_a_timeout_after_the_watchdog_and_is_retried() {
    let origin = Instant::now();
    let server =
        Server::start(vec![Reply::Sse(vec![delta("hmm"), Part::Stall]), answer(&["awake"])]).await;
    let store = MemoryStore::new();
    let (runtime, session) = start(&store, &server.base_url()).await;
    let outcome = session.prompt("hello").unwrap().await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    assert_eq!(origin.elapsed(), Duration::from_millis(300_000 + 500), "watchdog, then backoff");

    let events = finish(runtime, &store).await;
    assert_eq!(retries(&events)[0].1.failure.code(), "TIMEOUT");
    assert_eq!(answers(&events), ["awake"]);
}

#[tokio::test(start_paused = true)]
async fn cancelling_a_streaming_turn_aborts_it_and_closes_the_connection() {
    let server = Server::start(vec![Reply::Sse(vec![
        delta("streaming"),
        Part::KeepAliveForever(Duration::from_secs(1)),
    ])])
    .await;
    let store = MemoryStore::new();
    let (runtime, session) = start(&store, &server.base_url()).await;
    let mut turn = session.prompt("hello").unwrap();
    while let Some(event) = turn.next_event().await {
        if matches!(event.event, Event::AssistantChunk(_)) {
            assert!(session.cancel(CancelCause::User).await.unwrap());
        }
    }
    let outcome = turn.outcome().await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Aborted { cause: CancelCause::User });
    tokio::time::timeout(Duration::from_secs(10), server.bodies_dropped(1)).await.unwrap();

    let events = finish(runtime, &store).await;
    assert!(!kinds(&events).contains(&"request/error"), "a cancelled attempt is not offered");
    assert!(answers(&events).is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_tool_call_round_trip_sends_the_result_back_with_its_call_id() {
    let call = Part::Data(
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "call_1", "type": "function",
             "function": {"name": "echo", "arguments": "{\"text\": \"ping\"}"}}]}}]})
        .to_string(),
    );
    let server = Server::start(vec![
        Reply::Sse(vec![call, usage(8, 4), done()]),
        answer(&["echo said ping"]),
    ])
    .await;
    let store = MemoryStore::new();
    let (runtime, session) = start(&store, &server.base_url()).await;
    let outcome = session.prompt("say ping").unwrap().await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);

    let seen = server.seen();
    let first = seen[0].json();
    assert_eq!(first["tools"][0]["function"]["name"], "echo");
    assert_eq!(first["tools"][0]["function"]["parameters"]["required"], json!(["text"]));
    assert_eq!(
        seen[1].json()["messages"],
        json!([
            {"role": "user", "content": "say ping"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "echo", "arguments": "{\"text\":\"ping\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "ping"},
        ])
    );
    let events = finish(runtime, &store).await;
    assert_eq!(answers(&events), ["", "echo said ping"]);
}

#[tokio::test(start_paused = true)]
async fn quota_wording_on_a_429_is_not_retried_as_a_rate_limit() {
    let server = Server::start(vec![
        status_reply(
            429,
            &[("retry-after", "1")],
            r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota"}}"#,
        ),
        answer(&["never asked"]),
    ])
    .await;
    let store = MemoryStore::new();
    let (runtime, session) = start(&store, &server.base_url()).await;
    let outcome = session.prompt("hello").unwrap().await.unwrap();
    assert_eq!(failure_of(&outcome.reason), ("QUOTA", "You exceeded your current quota"));
    assert_eq!(server.seen().len(), 1);
    let events = finish(runtime, &store).await;
    assert!(retries(&events).is_empty());
}
