//! The Anthropic adapter through the full runtime — `llm-retry` and `auto-retry`, the echo tool,
//! `fallback` to and from an OpenAI-compatible route — against real HTTP servers on 127.0.0.1
//! that speak the documented streams, on paused time. Every test ends with the invariant check
//! of its log.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use rein_plugins::{FALLBACK_FIRST, auto_retry, llm_retry};
use rein_providers::{Anthropic, AnthropicConfig, OpenAiCompatible, OpenAiConfig};
use rein_runtime::clock::VirtualClock;
use rein_runtime::event::{Envelope, Event, TurnEndReason, Usage};
use rein_runtime::plugin::BuiltPlugin;
use rein_runtime::provider::Generation;
use rein_runtime::runtime::{Route, Runtime, RuntimeBuilder};
use rein_runtime::session::Session;
use rein_runtime::store::memory::MemoryStore;
use rein_runtime::tool::echo::EchoTool;
use rein_testkit::log::{answers, assert_invariants, requests, retries, turn_ends_at};
use rein_testkit::messages::{answer, error, error_event, text_parts, tool_answer};
use rein_testkit::server;
use rein_testkit::server::{Part, Reply, Server, status_reply};
use serde_json::{Value, json};
use tokio::time::Instant;

const KEY: &str = "sk-ant-runtime-test";
const OPENAI_KEY: &str = "sk-openai-runtime-test";

/// An Anthropic route named `name` at `server`, asking `model`.
fn anthropic(name: &str, server: &Server, model: &str) -> Route {
    let config = AnthropicConfig::new()
        .with_base_url(&server.base_url())
        .unwrap()
        .with_api_key(KEY)
        .unwrap()
        .with_model(model);
    Route::new(name, Arc::new(Anthropic::new(config).unwrap())).model(model)
}

/// An OpenAI-compatible route named `name` at `server`, asking `model`.
fn openai(name: &str, server: &Server, model: &str) -> Route {
    let config = OpenAiConfig::openai()
        .with_base_url(&server.base_url())
        .unwrap()
        .with_api_key(OPENAI_KEY)
        .unwrap()
        .with_model(model);
    Route::new(name, Arc::new(OpenAiCompatible::new(config).unwrap())).model(model)
}

fn plugin(name: &str, config: Value) -> BuiltPlugin {
    let (_, factory) = rein_plugins::ALL.iter().find(|(known, _)| *known == name).unwrap();
    factory(&config).unwrap()
}

/// The runtime over `store` with the echo tool and `routes` (the first the default).
fn builder(store: &MemoryStore, routes: Vec<Route>) -> RuntimeBuilder {
    let mut builder = Runtime::builder()
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .tool(Arc::new(EchoTool));
    for route in routes {
        builder = builder.route(route);
    }
    builder
}

/// `llm-retry` then `auto-retry`, no jitter, over one Anthropic route at `server`; session `s`.
async fn start(store: &MemoryStore, route: Route) -> (Runtime, Session) {
    let runtime = builder(store, vec![route])
        .plugin(llm_retry::factory(&json!({"jitterRatio": 0})).unwrap())
        .plugin(auto_retry::factory(&json!({"jitterRatio": 0})).unwrap())
        .build()
        .await
        .unwrap();
    let session = runtime.session("s").await.unwrap();
    (runtime, session)
}

/// The runtime with `fallback` first (to `to`), then the default chain, no jitter; session `s`.
async fn start_with_fallback(
    store: &MemoryStore,
    routes: Vec<Route>,
    to: &str,
) -> (Runtime, Session) {
    let configs =
        [json!({"routes": [to]}), json!({"jitterRatio": 0}), json!({}), json!({"jitterRatio": 0})];
    let mut builder = builder(store, routes);
    for (name, config) in FALLBACK_FIRST.iter().zip(configs) {
        builder = builder.plugin(plugin(name, config));
    }
    let runtime = builder.build().await.unwrap();
    let session = runtime.session("s").await.unwrap();
    (runtime, session)
}

/// Shuts down, checks nothing is left running, and returns the log after its invariant check.
async fn finish(runtime: Runtime, store: &MemoryStore) -> Vec<Envelope> {
    runtime.shutdown().await;
    assert_eq!((runtime.census().actors(), runtime.census().tasks()), (0, 0));
    let events = store.events("s");
    assert_invariants(&events);
    let log = serde_json::to_string(&events).unwrap();
    assert!(!log.contains(KEY) && !log.contains(OPENAI_KEY), "no key in the log");
    events
}

/// Each retry scheduled: (plugin, code, delay).
fn retried(events: &[Envelope]) -> Vec<(String, String, f64)> {
    retries(events)
        .iter()
        .map(|(_, r)| (r.plugin.clone(), r.failure.code().to_owned(), r.delay_ms))
        .collect()
}

/// Each attempt's (provider, model).
fn routes(events: &[Envelope]) -> Vec<(String, String)> {
    requests(events).into_iter().map(|(_, r)| (r.provider, r.model)).collect()
}

#[tokio::test(start_paused = true)]
async fn a_text_turn_streams_commits_and_counts_its_usage() {
    let server = Server::start(vec![answer(&["Bonjour", " !"])]).await;
    let store = MemoryStore::new();
    let (runtime, session) =
        start(&store, anthropic("anthropic", &server, "claude-haiku-4-5")).await;
    let outcome = session.ask("hello").await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);

    let events = finish(runtime, &store).await;
    assert_eq!(answers(&events), ["Bonjour !"]);
    let usage = events.iter().find_map(|e| match &e.event {
        Event::AssistantMessage(m) => m.usage,
        _ => None,
    });
    assert_eq!(usage, Some(Usage { input_tokens: 25, output_tokens: 2 }));
    assert_eq!(routes(&events), [("anthropic".to_owned(), "claude-haiku-4-5".to_owned())]);
}

#[tokio::test(start_paused = true)]
async fn tool_use_across_steps_sends_the_result_back_in_a_user_message_under_the_routes_system_prompt()
 {
    let server = Server::start(vec![
        tool_answer("Let me echo that.", "toolu_01", "echo", &json!({"text": "ping"})),
        answer(&["The echo said ping."]),
    ])
    .await;
    let store = MemoryStore::new();
    let settings =
        Generation::new().with_system_prompt("You echo.").unwrap().with_max_tokens(512).unwrap();
    let route = anthropic("anthropic", &server, "claude-haiku-4-5").generation(settings);
    let (runtime, session) = start(&store, route).await;
    assert_eq!(session.ask("say ping").await.unwrap().reason, TurnEndReason::Completed);

    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    let (first, second) = (seen[0].json(), seen[1].json());
    assert_eq!(
        (first["system"].clone(), first["max_tokens"].clone()),
        (json!("You echo."), json!(512))
    );
    assert_eq!(second["system"], "You echo.", "every step carries the system prompt");
    assert_eq!(first["tools"][0]["name"], "echo");
    assert_eq!(
        second["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "say ping"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Let me echo that."},
                {"type": "tool_use", "id": "toolu_01", "name": "echo", "input": {"text": "ping"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01", "content": "ping"}]},
        ])
    );
    let events = finish(runtime, &store).await;
    assert_eq!(answers(&events), ["Let me echo that.", "The echo said ping."]);
    let log = serde_json::to_string(&events).unwrap();
    assert!(!log.contains("You echo."), "the system prompt is not in the log");
}

#[tokio::test(start_paused = true)]
async fn a_529_overloaded_is_retried_with_a_byte_identical_body() {
    let origin = Instant::now();
    let server = Server::start(vec![
        error(529, &[("request-id", "req_529")], "overloaded_error", "Overloaded"),
        answer(&["the ", "answer"]),
    ])
    .await;
    let store = MemoryStore::new();
    let (runtime, session) =
        start(&store, anthropic("anthropic", &server, "claude-haiku-4-5")).await;
    assert_eq!(session.ask("hello").await.unwrap().reason, TurnEndReason::Completed);
    assert_eq!(origin.elapsed(), Duration::from_millis(500), "llm-retry's first backoff");
    let seen = server.seen();
    assert_eq!(seen[1].body, seen[0].body, "the retried body is byte-identical");

    let events = finish(runtime, &store).await;
    assert_eq!(retried(&events), [("llm-retry".to_owned(), "SERVER".to_owned(), 500.0)]);
    let failure = &retries(&events)[0].1.failure;
    assert_eq!((failure.status(), failure.request_id()), (Some(529), Some("req_529")));
    assert_eq!(answers(&events), ["the answer"]);
}

#[tokio::test(start_paused = true)]
async fn a_429_waits_the_servers_retry_after() {
    let origin = Instant::now();
    let server = Server::start(vec![
        error(
            429,
            &[("retry-after", "3")],
            "rate_limit_error",
            "Number of request tokens has exceeded your per-minute rate limit",
        ),
        answer(&["after the wait"]),
    ])
    .await;
    let store = MemoryStore::new();
    let (runtime, session) =
        start(&store, anthropic("anthropic", &server, "claude-haiku-4-5")).await;
    assert_eq!(session.ask("hello").await.unwrap().reason, TurnEndReason::Completed);
    assert_eq!(origin.elapsed(), Duration::from_secs(3), "the server's delay, not the backoff");

    let events = finish(runtime, &store).await;
    assert_eq!(retried(&events), [("llm-retry".to_owned(), "RATE_LIMIT".to_owned(), 3000.0)]);
    assert_eq!(retries(&events)[0].1.failure.provider_retry_after_ms(), Some(3000.0));
    assert_eq!(answers(&events), ["after the wait"]);
}

#[tokio::test(start_paused = true)]
async fn an_in_stream_error_event_is_retried_and_its_chunks_never_commit() {
    let mut failing = text_parts(&["a failed ", "draft"]);
    failing.truncate(5);
    failing.push(error_event("overloaded_error", "Overloaded"));
    let server = Server::start(vec![Reply::Sse(failing), answer(&["the real answer"])]).await;
    let store = MemoryStore::new();
    let (runtime, session) =
        start(&store, anthropic("anthropic", &server, "claude-haiku-4-5")).await;
    assert_eq!(session.ask("hello").await.unwrap().reason, TurnEndReason::Completed);

    let events = finish(runtime, &store).await;
    assert_eq!(retried(&events), [("llm-retry".to_owned(), "SERVER".to_owned(), 500.0)]);
    assert_eq!(answers(&events), ["the real answer"], "the failed draft is not the answer");
    let chunks: Vec<(u32, String)> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::AssistantChunk(c) => Some((c.attempt, c.text.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        chunks,
        [(1, "a failed ".into()), (1, "draft".into()), (2, "the real answer".into())],
        "failed chunks stay in the log as diagnostics"
    );
}

#[tokio::test(start_paused = true)]
async fn a_stream_cut_before_message_stop_is_retried_by_auto_retry() {
    let origin = Instant::now();
    let server =
        Server::start(vec![Reply::Sse(text_parts(&["cut ", "short"])), answer(&["whole"])]).await;
    let store = MemoryStore::new();
    let (runtime, session) =
        start(&store, anthropic("anthropic", &server, "claude-haiku-4-5")).await;
    assert_eq!(session.ask("hello").await.unwrap().reason, TurnEndReason::Completed);
    assert_eq!(origin.elapsed(), Duration::from_millis(1000), "auto-retry's first delay");

    let events = finish(runtime, &store).await;
    assert_eq!(retried(&events), [("auto-retry".to_owned(), "STREAM_CLOSED".to_owned(), 1000.0)]);
    assert_eq!(answers(&events), ["whole"]);
}

#[tokio::test(start_paused = true)]
async fn a_cut_connection_then_an_auth_failure_ends_the_turn_with_auth() {
    let mut cut = text_parts(&["par"]);
    cut.truncate(4);
    cut.push(Part::Drop);
    let server = Server::start(vec![
        Reply::Sse(cut),
        error(401, &[], "authentication_error", "invalid x-api-key"),
        answer(&["never asked"]),
    ])
    .await;
    let store = MemoryStore::new();
    let (runtime, session) =
        start(&store, anthropic("anthropic", &server, "claude-haiku-4-5")).await;
    let outcome = session.ask("hello").await.unwrap();
    let TurnEndReason::Error { failure } = &outcome.reason else { panic!("{outcome:?}") };
    assert_eq!((failure.code(), failure.status()), ("AUTH", Some(401)));
    assert_eq!(server.remaining(), 1, "AUTH is never retried");
    let events = finish(runtime, &store).await;
    assert_eq!(retried(&events), [("llm-retry".to_owned(), "TRANSPORT".to_owned(), 500.0)]);
}

#[tokio::test(start_paused = true)]
async fn an_openai_primary_out_of_quota_hands_a_tool_using_session_to_anthropic() {
    // Turn 1 on the OpenAI-compatible primary calls a tool (an OpenAI call id); turn 2's primary
    // is out of quota and the fallback carries on, the history in Anthropic's shape.
    let call = Part::Data(
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_9.x",
            "type": "function", "function": {"name": "echo", "arguments": "{\"text\": \"hi\"}"}}]}}]})
        .to_string(),
    );
    let quota = r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota"}}"#;
    let primary = Server::start(vec![
        Reply::Sse(vec![call, Part::Raw("data: [DONE]\n\n".into())]),
        server::answer(&["echoed hi"]),
        status_reply(429, &[], quota),
    ])
    .await;
    let fallback = Server::start(vec![answer(&["from ", "Claude"])]).await;
    let store = MemoryStore::new();
    let served = vec![
        openai("openai", &primary, "gpt-4o-mini"),
        anthropic("anthropic:claude-haiku-4-5", &fallback, "claude-haiku-4-5"),
    ];
    let (runtime, session) =
        start_with_fallback(&store, served, "anthropic:claude-haiku-4-5").await;
    assert_eq!(session.ask("echo hi").await.unwrap().reason, TurnEndReason::Completed);
    let begun = Instant::now();
    assert_eq!(session.ask("and now?").await.unwrap().reason, TurnEndReason::Completed);
    assert_eq!(begun.elapsed(), Duration::ZERO, "a quota switches at once");

    let [asked] = fallback.seen().try_into().unwrap();
    assert_eq!(asked.headers["x-api-key"], KEY);
    assert_eq!(
        asked.json()["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "echo hi"}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "call_9_x", "name": "echo", "input": {"text": "hi"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_9_x", "content": "hi"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "echoed hi"}]},
            {"role": "user", "content": [{"type": "text", "text": "and now?"}]},
        ])
    );
    let events = finish(runtime, &store).await;
    assert_eq!(
        routes(&events),
        [
            ("openai".to_owned(), "gpt-4o-mini".to_owned()),
            ("openai".to_owned(), "gpt-4o-mini".to_owned()),
            ("openai".to_owned(), "gpt-4o-mini".to_owned()),
            ("anthropic:claude-haiku-4-5".to_owned(), "claude-haiku-4-5".to_owned()),
        ]
    );
    assert_eq!(answers(&events), ["", "echoed hi", "from Claude"]);
    assert_eq!(turn_ends_at(&events).len(), 2);
}

#[tokio::test(start_paused = true)]
async fn an_anthropic_primary_out_of_credit_hands_the_turn_to_an_openai_compatible_fallback() {
    let primary = Server::start(vec![
        tool_answer("", "toolu_01", "echo", &json!({"text": "x"})),
        error(400, &[], "invalid_request_error", "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."),
    ])
    .await;
    let fallback = Server::start(vec![server::answer(&["done by ", "the fallback"])]).await;
    let store = MemoryStore::new();
    let served = vec![
        anthropic("anthropic", &primary, "claude-haiku-4-5"),
        openai("openai:gpt-4o-mini", &fallback, "gpt-4o-mini"),
    ];
    let (runtime, session) = start_with_fallback(&store, served, "openai:gpt-4o-mini").await;
    // Step 1 (a tool call) on Anthropic; step 2's attempt is out of credit and moves.
    assert_eq!(session.ask("echo x").await.unwrap().reason, TurnEndReason::Completed);

    let [asked] = fallback.seen().try_into().unwrap();
    assert_eq!(asked.headers["authorization"], format!("Bearer {OPENAI_KEY}"));
    assert_eq!(
        asked.json()["messages"],
        json!([
            {"role": "user", "content": "echo x"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "toolu_01", "type": "function",
                "function": {"name": "echo", "arguments": "{\"text\":\"x\"}"}}]},
            {"role": "tool", "tool_call_id": "toolu_01", "content": "x"},
        ])
    );
    let events = finish(runtime, &store).await;
    let switched: Vec<(String, String, String)> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::RouteSwitched(s) => Some((s.from.clone(), s.to.clone(), s.code.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(switched, [("anthropic".into(), "openai:gpt-4o-mini".into(), "QUOTA".into())]);
    assert_eq!(answers(&events), ["", "done by the fallback"]);
    assert!(retries(&events).is_empty(), "a quota is not retried on the same route");
}
