//! `llm-retry` end to end (`docs/runtime-semantics.md`, "Retry policies and `llm-retry`
//! decisions"): a runtime with the plugin registered, a scripted adapter, paused time. Every test
//! ends with the invariant check of its session log.

// Helpers outside `#[test]` functions unwrap too: a failing set-up is a failing test.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use rein_plugins::llm_retry::{self, LlmRetry};
use rein_runtime::clock::VirtualClock;
use rein_runtime::event::{CancelCause, Envelope, Event, TurnEndReason};
use rein_runtime::plugin::{Plugin, Verdict};
use rein_runtime::random::{Constant, Jitter, Samples};
use rein_runtime::retry_policy::RetryPolicy;
use rein_runtime::runtime::{Route, Runtime, RuntimeBuilder};
use rein_runtime::session::{Prompt, Session};
use rein_runtime::store::memory::MemoryStore;
use rein_runtime::tool::echo::EchoTool;
use rein_scenario::reject::RejectAppends;
use rein_testkit::log::{assert_invariants, kinds, requests, retries, started, turn_ends_at};
use rein_testkit::recorder::{Behaviour, Recorder};
use rein_testkit::runtime::shut_down;
use rein_testkit::scripted::{Scripted, echo, fail, fail_after, reply};
use serde_json::{Value, json};
use tokio::time::Instant;

/// The policy key of the default policy without jitter (`{"jitterRatio": 0}`).
const FLAT_DEFAULT_KEY: &str =
    r#"["normal",2,["RATE_LIMIT","SERVER","TIMEOUT","TRANSPORT"],500,10000,0]"#;

const MS: fn(u64) -> Duration = Duration::from_millis;

/// A runtime with `llm-retry` configured by `config`, then `downstream` plugins, a virtual
/// clock, the echo tool and a constant jitter sample of 0.5.
fn builder(store: &MemoryStore, config: Value, downstream: Vec<Arc<dyn Plugin>>) -> RuntimeBuilder {
    let mut builder = Runtime::builder()
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .jitter(Arc::new(Constant::new(0.5).unwrap()))
        .tool(Arc::new(EchoTool))
        .plugin(llm_retry::factory(&config).unwrap());
    for plugin in downstream {
        builder = builder.plugin(plugin);
    }
    builder
}

/// Builds a [`builder`] runtime with `downstream` plugins, `adapter` on the `mock` route, and
/// opens session `s` on it.
async fn start(
    store: &MemoryStore,
    config: Value,
    downstream: Vec<Arc<dyn Plugin>>,
    adapter: &Arc<Scripted>,
) -> (Runtime, Session) {
    launch(builder(store, config, downstream).route(Route::new("mock", adapter.clone()).model("m")))
        .await
}

/// Builds the runtime and opens session `s` on it.
async fn launch(builder: RuntimeBuilder) -> (Runtime, Session) {
    let runtime = builder.build().await.unwrap();
    let session = runtime.session("s").await.unwrap();
    (runtime, session)
}

/// A declared route policy.
fn declared(policy: Value) -> Option<RetryPolicy> {
    Some(RetryPolicy::from_declared(&policy, "retryPolicy").unwrap())
}

/// Shuts the runtime down, checks nothing is left running, and returns the session's log after
/// checking its invariants.
async fn finish(runtime: Runtime, store: &MemoryStore, session: &str) -> Vec<Envelope> {
    shut_down(&runtime).await;
    let events = store.events(session);
    assert_invariants(&events);
    events
}

fn error_code(reason: &TurnEndReason) -> (&str, &str) {
    match reason {
        TurnEndReason::Error { failure } => (failure.code(), failure.message()),
        other => panic!("expected an error, got {other:?}"),
    }
}

fn is_uuid_v4(id: &str) -> bool {
    uuid::Uuid::parse_str(id).is_ok_and(|u| u.get_version_num() == 4)
}

#[tokio::test(start_paused = true)]
async fn a_retried_rate_limit_is_durable_before_the_wait_and_the_next_request_comes_delay_ms_later()
{
    let origin = Instant::now();
    let store = MemoryStore::new();
    let adapter = Scripted::per_session(vec![fail("RATE_LIMIT", "busy"), reply(&["done"])]);
    let (runtime, session) = start(&store, json!({"jitterRatio": 0}), vec![], &adapter).await;
    let mut turn = session.prompt("hello").unwrap();
    let mut seen_retry_at = None;
    while let Some(event) = turn.next_event().await {
        match event.event {
            Event::LlmRetry(_) => {
                // Streamed from the log: it is durable, and the wait has not elapsed.
                seen_retry_at = Some(origin.elapsed());
                assert_eq!(adapter.count(), 1);
            }
            Event::LlmRetryStarted(_) => assert_eq!(origin.elapsed(), MS(500)),
            _ => {}
        }
    }
    assert_eq!(seen_retry_at, Some(Duration::ZERO), "llm/retry is written before the wait");
    assert_eq!(turn.outcome().await.unwrap().reason, TurnEndReason::Completed);
    assert_eq!(adapter.times(origin), [MS(0), MS(500)], "exactly delayMs later");

    let events = finish(runtime, &store, "s").await;
    assert_eq!(
        kinds(&events)[3..],
        [
            "step/start",
            "request/start",
            "request/error",
            "llm/retry",
            "llm/retry-started",
            "request/start",
            "assistant/chunk",
            "assistant/message",
            "step/end",
            "turn/end",
            "agent/idle",
        ]
    );
    let [(at, retry)] = retries(&events).try_into().unwrap();
    assert_eq!(at, 0);
    assert!(is_uuid_v4(&retry.retry_id), "{}", retry.retry_id);
    assert_eq!(
        (retry.turn, retry.step, retry.provider.as_str(), retry.plugin.as_str()),
        (1, 1, "mock", "llm-retry")
    );
    assert_eq!((retry.mode.as_str(), retry.policy_key.as_str()), ("normal", FLAT_DEFAULT_KEY));
    assert_eq!((retry.retry, retry.max_retries, retry.delay_ms), (1, Some(2), 500.0));
    assert_eq!((retry.failure.code(), retry.failure.message()), ("RATE_LIMIT", "busy"));
    let [(at, start)] = started(&events).try_into().unwrap();
    assert_eq!(
        (at, start.retry_id, start.retry, start.turn, start.step),
        (500, retry.retry_id, 1, 1, 1)
    );
    let attempts: Vec<(u64, u32)> =
        requests(&events).iter().map(|(t, r)| (*t, r.attempt)).collect();
    assert_eq!(attempts, [(0, 1), (500, 2)]);
}

#[tokio::test(start_paused = true)]
async fn budget_exhaustion_ends_the_turn_with_the_last_failure() {
    let origin = Instant::now();
    let store = MemoryStore::new();
    let adapter = Scripted::per_session(vec![
        fail("SERVER", "one"),
        fail("TIMEOUT", "two"),
        fail("SERVER", "three"),
        reply(&["never"]),
    ]);
    let downstream = Recorder::next("downstream");
    let (runtime, session) =
        start(&store, json!({"jitterRatio": 0}), vec![downstream.clone()], &adapter).await;
    let outcome = session.prompt("hello").unwrap().await.unwrap();
    assert_eq!(error_code(&outcome.reason), ("SERVER", "three"));
    assert_eq!(adapter.times(origin), [MS(0), MS(500), MS(1500)]);
    let offered: Vec<u32> = downstream.offers().iter().map(|o| o.attempt).collect();
    assert_eq!(offered, [3], "only the failure over budget is delegated");

    let events = finish(runtime, &store, "s").await;
    let retries = retries(&events);
    let summary: Vec<(u64, u64, f64, &str)> =
        retries.iter().map(|(t, r)| (*t, r.retry, r.delay_ms, r.failure.message())).collect();
    assert_eq!(summary, [(0, 1, 500.0, "one"), (500, 2, 1000.0, "two")]);
    assert_eq!(retries[0].1.retry_id, retries[1].1.retry_id, "one chain, one retryId");
    assert!(retries.iter().all(|(_, r)| r.max_retries == Some(2)));
    let ends = turn_ends_at(&events);
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0].0, 1500);
    assert_eq!(error_code(&ends[0].1), ("SERVER", "three"));
}

#[tokio::test(start_paused = true)]
async fn a_provider_delay_within_the_cap_is_used_verbatim_without_jitter() {
    // A fractional delay waits at least that long: the timer rounds up to whole milliseconds.
    for (after_ms, expected) in [(2000.0, MS(2000)), (10_000.0, MS(10_000)), (0.5, MS(1))] {
        let origin = Instant::now();
        let store = MemoryStore::new();
        let adapter = Scripted::per_session(vec![
            fail_after("RATE_LIMIT", "slow down", after_ms),
            reply(&["ok"]),
        ]);
        let jitter = Arc::new(Samples::new([0.0, 1.0], 3).unwrap());
        let with_jitter = builder(&store, json!({}), vec![]).jitter(jitter.clone());
        let (runtime, session) =
            launch(with_jitter.route(Route::new("mock", adapter.clone()).model("m"))).await;
        let outcome = session.prompt("hello").unwrap().await.unwrap();
        assert_eq!(outcome.reason, TurnEndReason::Completed);
        assert_eq!(adapter.times(origin), [Duration::ZERO, expected], "{after_ms}");
        assert_eq!(jitter.pending(), 2, "no jitter sample drawn for a provider delay");

        let events = finish(runtime, &store, "s").await;
        let [(_, retry)] = retries(&events).try_into().unwrap();
        assert_eq!(retry.delay_ms, after_ms, "verbatim");
        assert_eq!(retry.failure.provider_retry_after_ms(), Some(after_ms));
    }
}

#[tokio::test(start_paused = true)]
async fn an_over_cap_provider_delay_delegates_with_no_event_and_no_timer() {
    let origin = Instant::now();
    let store = MemoryStore::new();
    let adapter =
        Scripted::per_session(vec![fail_after("RATE_LIMIT", "come back later", 10_001.0)]);
    let downstream = Recorder::next("downstream");
    let jitter = Arc::new(Samples::new([0.5], 0).unwrap());
    let with_jitter = builder(&store, json!({}), vec![downstream.clone()]).jitter(jitter.clone());
    let (runtime, session) =
        launch(with_jitter.route(Route::new("mock", adapter.clone()).model("m"))).await;
    let outcome = session.prompt("hello").unwrap().await.unwrap();
    assert_eq!(error_code(&outcome.reason), ("RATE_LIMIT", "come back later"));
    assert_eq!(origin.elapsed(), Duration::ZERO, "no wait");
    assert_eq!(downstream.offers().len(), 1, "delegated to the rest of the chain");
    assert_eq!(jitter.pending(), 1, "no sample drawn");

    let events = finish(runtime, &store, "s").await;
    assert_eq!(origin.elapsed(), Duration::ZERO, "no timer was left for shutdown to wait for");
    assert!(retries(&events).is_empty(), "no llm/retry");
    assert_eq!(adapter.count(), 1);
}

#[tokio::test(start_paused = true)]
async fn non_retryable_codes_delegate_without_a_timer() {
    for code in ["AUTH", "CONTEXT_WINDOW_EXCEEDED", "HTTP_418", "server"] {
        let origin = Instant::now();
        let store = MemoryStore::new();
        let adapter = Scripted::per_session(vec![fail(code, "no")]);
        let downstream = Recorder::next("downstream");
        let (runtime, session) = start(&store, json!({}), vec![downstream.clone()], &adapter).await;
        let outcome = session.prompt("hello").unwrap().await.unwrap();
        assert_eq!(error_code(&outcome.reason), (code, "no"));
        let offers = downstream.offers();
        assert_eq!(offers.len(), 1, "{code} is delegated");
        assert_eq!(offers[0].retry_policy, Some(RetryPolicy::default()), "with the policy");

        let events = finish(runtime, &store, "s").await;
        assert_eq!(origin.elapsed(), Duration::ZERO, "{code}: no timer");
        assert!(retries(&events).is_empty(), "{code}: no llm/retry");
    }
}

#[tokio::test(start_paused = true)]
async fn no_adapter_means_no_policy_and_delegates() {
    let store = MemoryStore::new();
    let adapter = Scripted::per_session(vec![reply(&["unused"])]);
    let downstream = Recorder::next("downstream");
    let (runtime, session) = start(&store, json!({}), vec![downstream.clone()], &adapter).await;
    let outcome = session.prompt(Prompt::new("hello").on("nowhere")).unwrap().await.unwrap();
    assert_eq!(error_code(&outcome.reason).0, "NO_ADAPTER");
    let offers = downstream.offers();
    assert_eq!(offers.len(), 1);
    assert_eq!((offers[0].code.as_str(), offers[0].retry_policy.as_ref()), ("NO_ADAPTER", None));

    let events = finish(runtime, &store, "s").await;
    assert!(retries(&events).is_empty());
    assert_eq!(adapter.count(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_configuration_is_the_default_route_policy_and_a_declared_policy_wins() {
    let origin = Instant::now();
    let store = MemoryStore::new();
    let script = |fails: usize| {
        let mut script: Vec<_> = (1..=fails).map(|n| fail("SERVER", &n.to_string())).collect();
        script.push(reply(&["done"]));
        script
    };
    let (plain, own) = (Scripted::per_session(script(2)), Scripted::per_session(script(3)));
    let config = json!({"maxTransientRetries": 1, "initialDelayMs": 100, "jitterRatio": 0});
    let plugin = LlmRetry::from_config(&config).unwrap().plugin;
    let built = llm_retry::factory(&config).unwrap();
    assert_eq!(built.default_route_policy.as_ref(), Some(plugin.policy()));
    let runtime = builder(&store, config, vec![])
        .route(Route::new("plain", plain.clone()).model("m"))
        .route(Route::new("own", own.clone()).model("m").retry_policy(declared(
            json!({"mode": "normal", "maxRetries": 3, "backoff": {"jitterRatio": 0}}),
        )))
        .build()
        .await
        .unwrap();

    let a = runtime.session("a").await.unwrap();
    let outcome = a.prompt(Prompt::new("hi").on("plain")).unwrap().await.unwrap();
    assert_eq!(error_code(&outcome.reason), ("SERVER", "2"), "the configured budget: 1 retry");
    assert_eq!(plain.times(origin), [MS(0), MS(100)], "the configured curve");

    let b = runtime.session("b").await.unwrap();
    let started_at = origin.elapsed();
    let outcome = b.prompt(Prompt::new("hi").on("own")).unwrap().await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed, "the declared budget: 3 retries");
    let times: Vec<Duration> = own.times(origin).iter().map(|t| *t - started_at).collect();
    assert_eq!(times, [MS(0), MS(500), MS(1500), MS(3500)], "the declared curve");

    runtime.shutdown().await;
    let (a, b) = (store.events("a"), store.events("b"));
    assert_invariants(&a);
    assert_invariants(&b);
    let key = |events: &[Envelope]| retries(events)[0].1.policy_key.clone();
    assert_eq!(
        key(&a),
        r#"["normal",1,["RATE_LIMIT","SERVER","TIMEOUT","TRANSPORT"],100,10000,0]"#
    );
    assert_eq!(
        key(&b),
        r#"["normal",3,["RATE_LIMIT","SERVER","TIMEOUT","TRANSPORT"],500,10000,0]"#
    );
    assert_eq!(retries(&b).last().unwrap().1.max_retries, Some(3));
}

#[tokio::test(start_paused = true)]
async fn a_new_step_restarts_the_budget_at_one_with_a_new_retry_id() {
    let store = MemoryStore::new();
    let adapter = Scripted::per_session(vec![
        fail("SERVER", "step 1"),
        echo("ping"),
        fail("SERVER", "step 2"),
        reply(&["done"]),
    ]);
    let (runtime, session) =
        start(&store, json!({"maxTransientRetries": 1, "jitterRatio": 0}), vec![], &adapter).await;
    let outcome = session.prompt("hello").unwrap().await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed, "a budget of 1 per step is enough");

    let events = finish(runtime, &store, "s").await;
    let retries = retries(&events);
    let shape: Vec<(u32, u32, u64, f64)> =
        retries.iter().map(|(_, r)| (r.turn, r.step, r.retry, r.delay_ms)).collect();
    assert_eq!(shape, [(1, 1, 1, 500.0), (1, 2, 1, 500.0)]);
    assert_ne!(retries[0].1.retry_id, retries[1].1.retry_id, "a new chain");
    assert!(retries.iter().all(|(_, r)| is_uuid_v4(&r.retry_id)));
}

#[tokio::test(start_paused = true)]
async fn a_new_turn_and_a_manual_retry_restart_the_budget_with_a_new_retry_id() {
    let store = MemoryStore::new();
    let adapter = Scripted::per_session(vec![
        // Turn 1: one retry, then the budget is spent.
        fail("SERVER", "a"),
        fail("SERVER", "b"),
        // Turn 2 (the manual retry of turn 1): a fresh budget.
        fail("SERVER", "c"),
        reply(&["done"]),
        // Turn 3: a fresh budget again.
        fail("SERVER", "d"),
        reply(&["done again"]),
    ]);
    let (runtime, session) =
        start(&store, json!({"maxTransientRetries": 1, "jitterRatio": 0}), vec![], &adapter).await;
    let first = session.prompt("hello").unwrap().await.unwrap();
    assert_eq!(error_code(&first.reason), ("SERVER", "b"));
    let second = session.retry().await.unwrap().await.unwrap();
    assert_eq!((second.turn, second.reason), (2, TurnEndReason::Completed));
    let third = session.prompt("again").unwrap().await.unwrap();
    assert_eq!((third.turn, third.reason), (3, TurnEndReason::Completed));

    let events = finish(runtime, &store, "s").await;
    let retries = retries(&events);
    let shape: Vec<(u32, u64)> = retries.iter().map(|(_, r)| (r.turn, r.retry)).collect();
    assert_eq!(shape, [(1, 1), (2, 1), (3, 1)]);
    let mut ids: Vec<&str> = retries.iter().map(|(_, r)| r.retry_id.as_str()).collect();
    ids.dedup();
    assert_eq!(ids.len(), 3, "each turn opens its own chain");
}

#[tokio::test(start_paused = true)]
async fn always_mode_retries_any_code_without_a_budget_and_falls_back_to_backoff_over_the_cap() {
    let origin = Instant::now();
    let store = MemoryStore::new();
    let adapter = Scripted::per_session(vec![
        fail("AUTH", "who are you"),
        fail("INVALID_REQUEST", "what"),
        fail_after("RATE_LIMIT", "much later", 60_000.0),
        fail_after("HTTP_418", "teapot", 7.0),
        reply(&["done"]),
    ]);
    let downstream = Recorder::next("downstream");
    let (runtime, session) = launch(
        builder(&store, json!({"maxTransientRetries": 0}), vec![downstream.clone()]).route(
            Route::new("mock", adapter.clone())
                .model("m")
                .retry_policy(declared(json!({"mode": "always", "backoff": {"jitterRatio": 0}}))),
        ),
    )
    .await;
    let outcome = session.prompt("hello").unwrap().await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    assert_eq!(adapter.times(origin), [MS(0), MS(500), MS(1500), MS(3500), MS(3507)]);
    assert_eq!(downstream.offers().len(), 4, "downstream was asked first, every time");

    let events = finish(runtime, &store, "s").await;
    let retries = retries(&events);
    let shape: Vec<(u64, f64, &str)> =
        retries.iter().map(|(_, r)| (r.retry, r.delay_ms, r.failure.code())).collect();
    assert_eq!(
        shape,
        [
            (1, 500.0, "AUTH"),
            (2, 1000.0, "INVALID_REQUEST"),
            (3, 2000.0, "RATE_LIMIT"),
            (4, 7.0, "HTTP_418")
        ],
        "any code; an over-cap provider delay falls back to the backoff; one within it is verbatim"
    );
    for (_, retry) in &retries {
        assert_eq!((retry.mode.as_str(), retry.max_retries), ("always", None));
        assert_eq!(retry.policy_key, r#"["always",500,10000,0]"#);
        assert_eq!(retry.retry_id, retries[0].1.retry_id);
        let json = serde_json::to_value(Event::LlmRetry(retry.clone())).unwrap();
        assert!(json["data"].get("maxRetries").is_none(), "no maxRetries in always mode: {json}");
    }
}

#[tokio::test(start_paused = true)]
async fn always_mode_accepts_a_downstream_retry_and_writes_nothing() {
    let origin = Instant::now();
    let store = MemoryStore::new();
    let adapter = Scripted::per_session(vec![fail("SERVER", "down"), reply(&["done"])]);
    let downstream = Recorder::new("downstream", Behaviour::Answer(Verdict::Retry));
    let (runtime, session) = launch(
        builder(&store, json!({}), vec![downstream.clone()]).route(
            Route::new("mock", adapter.clone())
                .model("m")
                .retry_policy(declared(json!({"mode": "always"}))),
        ),
    )
    .await;
    let outcome = session.prompt("hello").unwrap().await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    assert_eq!(adapter.times(origin), [MS(0), MS(0)], "downstream's retry, no own wait");
    assert_eq!(downstream.offers().len(), 1);

    let events = finish(runtime, &store, "s").await;
    assert!(retries(&events).is_empty(), "llm-retry wrote nothing");
    assert!(started(&events).is_empty());
}

#[tokio::test(start_paused = true)]
async fn always_mode_falls_back_to_its_own_retry_when_downstream_crashes() {
    let origin = Instant::now();
    let store = MemoryStore::new();
    let adapter = Scripted::per_session(vec![fail("SERVER", "down"), reply(&["done"])]);
    let downstream = Recorder::new("downstream", Behaviour::Crash);
    let (runtime, session) = launch(builder(&store, json!({}), vec![downstream.clone()]).route(
        Route::new("mock", adapter.clone()).model("m").retry_policy(declared(
            json!({"mode": "always", "backoff": {"initialDelayMs": 200, "jitterRatio": 0}}),
        )),
    ))
    .await;
    let outcome = session.prompt("hello").unwrap().await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    assert_eq!(adapter.times(origin), [MS(0), MS(200)]);

    let events = finish(runtime, &store, "s").await;
    assert_eq!(
        kinds(&events)[5..9],
        ["request/error", "plugin/crashed", "llm/retry", "llm/retry-started"],
        "the crash is recorded, then llm-retry retries on its own"
    );
    let [(_, retry)] = retries(&events).try_into().unwrap();
    assert_eq!((retry.mode.as_str(), retry.retry, retry.delay_ms), ("always", 1, 200.0));
}

/// A turn parked in a 10 s wait of `llm-retry`.
async fn parked(
    store: &MemoryStore,
    downstream: Vec<Arc<dyn Plugin>>,
    route: Option<RetryPolicy>,
) -> (Runtime, Arc<Scripted>, rein_runtime::session::TurnHandle) {
    let adapter = Scripted::per_session(vec![fail("SERVER", "down"), reply(&["too late"])]);
    let config = json!({"initialDelayMs": 10_000, "jitterRatio": 0});
    let (runtime, session) = launch(
        builder(store, config, downstream)
            .route(Route::new("mock", adapter.clone()).model("m").retry_policy(route)),
    )
    .await;
    let turn = session.prompt("hello").unwrap();
    tokio::time::sleep(MS(100)).await;
    (runtime, adapter, turn)
}

#[tokio::test(start_paused = true)]
async fn cancelling_during_the_wait_ends_the_turn_aborted_without_a_start_or_a_timer() {
    let origin = Instant::now();
    let store = MemoryStore::new();
    let (runtime, adapter, turn) = parked(&store, vec![], None).await;
    let session = runtime.session("s").await.unwrap();
    assert!(session.cancel(CancelCause::User).await.unwrap());
    let outcome = turn.await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Aborted { cause: CancelCause::User });
    assert_eq!(origin.elapsed(), MS(100), "promptly");

    let events = finish(runtime, &store, "s").await;
    assert_eq!(origin.elapsed(), MS(100), "no timer was left for shutdown to wait for");
    assert_eq!(adapter.count(), 1);
    assert_eq!(retries(&events).len(), 1);
    assert!(started(&events).is_empty(), "no llm/retry-started");
    assert_eq!(turn_ends_at(&events)[0].0, 100);
}

#[tokio::test(start_paused = true)]
async fn disposing_during_the_wait_ends_the_turn_with_its_failure_after_one_request() {
    let origin = Instant::now();
    let store = MemoryStore::new();
    let downstream = Recorder::new("downstream", Behaviour::Answer(Verdict::Retry));
    let (runtime, adapter, turn) = parked(&store, vec![downstream.clone()], None).await;
    runtime.dispose_plugin("llm-retry").await.unwrap();
    assert_eq!(origin.elapsed(), MS(100), "disposal aborted the wait at once");
    assert_eq!(runtime.plugins(), ["downstream"]);
    let outcome = turn.await.unwrap();
    assert_eq!(error_code(&outcome.reason), ("SERVER", "down"));
    assert!(downstream.offers().is_empty(), "fail closed: downstream was never consulted");

    let events = finish(runtime, &store, "s").await;
    assert_eq!(origin.elapsed(), MS(100), "no timer left");
    assert_eq!(adapter.count(), 1, "exactly one request");
    assert_eq!(retries(&events).len(), 1);
    assert!(started(&events).is_empty());
}

#[tokio::test(start_paused = true)]
async fn disposal_aborts_a_downstream_consultation_and_waits_for_it_to_settle() {
    let origin = Instant::now();
    let store = MemoryStore::new();
    let downstream = Recorder::new("downstream", Behaviour::Slow(MS(60_000), Verdict::Retry));
    let always = declared(json!({"mode": "always"}));
    let (runtime, adapter, turn) = parked(&store, vec![downstream.clone()], always).await;
    assert_eq!(downstream.offers().len(), 1, "llm-retry is consulting downstream");
    assert_eq!(downstream.settled(), 0);
    runtime.dispose_plugin("llm-retry").await.unwrap();
    assert_eq!(downstream.settled(), 1, "disposal returned only after the consultation settled");
    assert_eq!(origin.elapsed(), MS(100));
    let outcome = turn.await.unwrap();
    assert_eq!(error_code(&outcome.reason), ("SERVER", "down"));

    let events = finish(runtime, &store, "s").await;
    assert_eq!(adapter.count(), 1);
    assert!(retries(&events).is_empty(), "nothing scheduled");
}

#[tokio::test(start_paused = true)]
async fn a_rejected_append_abandons_the_retry() {
    let origin = Instant::now();
    let store = MemoryStore::new();
    let adapter = Scripted::per_session(vec![fail("SERVER", "down"), reply(&["never"])]);
    let downstream = Recorder::new("downstream", Behaviour::Answer(Verdict::Retry));
    let (runtime, session) = launch(
        builder(&store, json!({}), vec![downstream.clone()])
            .validator(|| Box::new(rein_invariant::LiveValidator::new()))
            .validator(|| Box::new(RejectAppends::new(["llm/retry"])))
            .route(Route::new("mock", adapter.clone()).model("m")),
    )
    .await;
    let outcome = session.prompt("hello").unwrap().await.unwrap();
    assert_eq!(error_code(&outcome.reason), ("SERVER", "down"), "Stop, not Next");
    assert!(downstream.offers().is_empty(), "the abandoned retry is not passed on");
    assert_eq!(origin.elapsed(), Duration::ZERO, "no wait");

    let events = finish(runtime, &store, "s").await;
    assert_eq!(adapter.count(), 1);
    assert!(retries(&events).is_empty(), "nothing was written");
}

#[tokio::test(start_paused = true)]
async fn a_live_invariant_accepts_every_retry_llm_retry_writes() {
    let origin = Instant::now();
    let store = MemoryStore::new();
    let adapter = Scripted::per_session(vec![
        fail("SERVER", "1"),
        fail_after("RATE_LIMIT", "2", 1.5),
        echo("tool"),
        fail("TRANSPORT", "3"),
        reply(&["done"]),
    ]);
    let jitter: Arc<dyn Jitter> = Arc::new(Samples::new([1.0, 0.0], 0).unwrap());
    let (runtime, session) = launch(
        builder(&store, json!({}), vec![])
            .jitter(jitter)
            .validator(|| Box::new(rein_invariant::LiveValidator::new()))
            .route(Route::new("mock", adapter.clone()).model("m")),
    )
    .await;
    let outcome = session.prompt("hello").unwrap().await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    let times: Vec<Duration> = adapter.times(origin);
    assert_eq!(
        times,
        [MS(0), MS(550), MS(552), MS(552), MS(1002)],
        "jitter r = 1 then r = 0: 550, then the provider's 1.5 (the timer rounds it up to 2), \
         then 450 in the next step"
    );
    let events = finish(runtime, &store, "s").await;
    let delays: Vec<f64> = retries(&events).iter().map(|(_, r)| r.delay_ms).collect();
    assert_eq!(delays, [550.0, 1.5, 450.0]);
}

#[tokio::test(start_paused = true)]
async fn many_sessions_wait_in_the_one_plugin_at_once() {
    const SESSIONS: usize = 200;
    let origin = Instant::now();
    let store = MemoryStore::new();
    let adapter = Scripted::per_session(vec![fail("SERVER", "down"), reply(&["done"])]);
    let runtime = builder(&store, json!({"jitterRatio": 0}), vec![])
        .route(Route::new("mock", adapter.clone()).model("m"))
        .build()
        .await
        .unwrap();
    let mut turns = Vec::with_capacity(SESSIONS);
    for i in 0..SESSIONS {
        let session = runtime.session(&format!("s{i}")).await.unwrap();
        turns.push(session.prompt("hello").unwrap());
    }
    for turn in turns {
        assert_eq!(turn.await.unwrap().reason, TurnEndReason::Completed);
    }
    let times = adapter.times(origin);
    assert_eq!(times.iter().filter(|t| **t == MS(0)).count(), SESSIONS);
    assert_eq!(
        times.iter().filter(|t| **t == MS(500)).count(),
        SESSIONS,
        "every parked session retried exactly 500 ms later: no wait held another"
    );
    runtime.shutdown().await;
    assert_eq!(runtime.census().tasks(), 0);
    for i in 0..SESSIONS {
        let events = store.events(&format!("s{i}"));
        assert_invariants(&events);
        assert_eq!(retries(&events).len(), 1);
    }
}
