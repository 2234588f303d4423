//! `fallback` end to end: a runtime with scripted routes, the plugin first in the chain, paused
//! time, the live invariant validator on every log. Every test ends with the invariant check of
//! each session's finished log.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use rein::invariant::{LiveValidator, check_finished_log};
use rein::plugins::{FALLBACK_FIRST, fallback, llm_retry};
use rein::prelude::*;
use rein::runtime::event::{RequestStart, RouteSwitched, ToolCall};
use rein::runtime::plugin::BuiltPlugin;
use rein::runtime::runtime::BuildError;
use rein_cli::scenario::scripted::{Scripted, ScriptedProvider, ScriptedReply};
use serde_json::{Value, json};
use tokio::time::Instant;

fn fail(code: &str) -> Scripted {
    Scripted::fail(Failure::new(code, format!("{code} from the provider")).unwrap())
}

fn fail_after(code: &str, retry_after_ms: f64) -> Scripted {
    let failure = Failure::new(code, "busy").unwrap().with_retry_after_ms(retry_after_ms).unwrap();
    Scripted::fail(failure)
}

/// A route named `name` asking the model `<name>-model`, playing `script` (recorded).
fn route(name: &str, script: Vec<Scripted>) -> (Route, ScriptedProvider) {
    let provider = ScriptedProvider::new(script).recording();
    let route = Route::new(name, Arc::new(provider.clone())).model(format!("{name}-model"));
    (route, provider)
}

/// A plugin of `rein-plugins` built from its configuration.
fn plugin(name: &str, config: Value) -> BuiltPlugin {
    let (_, factory) = rein::plugins::ALL.iter().find(|(known, _)| *known == name).unwrap();
    factory(&config).unwrap()
}

/// A runtime on virtual time with `routes` (the first is the default), `plugins` in chain order,
/// the echo tool and the live invariant validator.
async fn runtime(routes: Vec<Route>, plugins: Vec<BuiltPlugin>, store: &MemoryStore) -> Runtime {
    let mut builder = Runtime::builder()
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .idle_grace(Duration::ZERO)
        .tool(Arc::new(EchoTool))
        .validator(|| Box::new(LiveValidator::new()));
    for route in routes {
        builder = builder.route(route);
    }
    for plugin in plugins {
        builder = builder.plugin(plugin);
    }
    builder.build().await.unwrap()
}

/// `fallback` (with `config`) then the default chain, `llm-retry` without jitter.
fn full_chain(config: Value) -> Vec<BuiltPlugin> {
    let configs = [config, json!({"jitterRatio": 0}), json!({}), json!({"jitterRatio": 0})];
    FALLBACK_FIRST.iter().zip(configs).map(|(name, config)| plugin(name, config)).collect()
}

/// Shuts down and returns each session's log after its invariant check as a finished log.
async fn finish(runtime: Runtime, store: &MemoryStore, sessions: &[&str]) -> Vec<Vec<Envelope>> {
    runtime.shutdown().await;
    assert_eq!((runtime.census().actors(), runtime.census().tasks()), (0, 0));
    sessions
        .iter()
        .map(|id| {
            let events = store.events(id);
            let violations = check_finished_log(&events);
            assert!(violations.is_empty(), "{id}: {violations:#?}");
            events
        })
        .collect()
}

/// `(attempt, provider, model)` of every `request/start`.
fn requests(events: &[Envelope]) -> Vec<(u32, String, String)> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Event::RequestStart(RequestStart { attempt, provider, model, .. }) => {
                Some((*attempt, provider.clone(), model.clone()))
            }
            _ => None,
        })
        .collect()
}

fn attempt(n: u32, route: &str) -> (u32, String, String) {
    (n, route.to_owned(), format!("{route}-model"))
}

fn switches(events: &[Envelope]) -> Vec<RouteSwitched> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Event::RouteSwitched(s) => Some(s.clone()),
            _ => None,
        })
        .collect()
}

fn switch(step: u32, from: &str, to: &str, code: &str, reason: &str) -> RouteSwitched {
    RouteSwitched {
        turn: 1,
        step,
        from: from.into(),
        to: to.into(),
        code: code.into(),
        reason: reason.into(),
    }
}

/// `(plugin, provider, retry, delayMs)` of every `llm/retry`.
fn retries(events: &[Envelope]) -> Vec<(String, String, u64, f64)> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Event::LlmRetry(r) => Some((r.plugin.clone(), r.provider.clone(), r.retry, r.delay_ms)),
            _ => None,
        })
        .collect()
}

fn code_of(reason: &TurnEndReason) -> &str {
    match reason {
        TurnEndReason::Error { failure } => failure.code(),
        TurnEndReason::Completed => "completed",
        _ => "other",
    }
}

#[tokio::test(start_paused = true)]
async fn an_eager_quota_switches_on_the_first_failure_without_any_llm_retry() {
    let store = MemoryStore::new();
    let (main, _) = route("main", vec![fail("QUOTA")]);
    let (backup, _) = route("backup", vec![Scripted::reply("from the backup")]);
    let runtime =
        runtime(vec![main, backup], full_chain(json!({"routes": ["backup"]})), &store).await;
    assert_eq!(runtime.plugins(), FALLBACK_FIRST);
    let session = runtime.session("s").await.unwrap();
    let begun = Instant::now();
    assert_eq!(session.ask("hello").await.unwrap().reason, TurnEndReason::Completed);
    assert_eq!(begun.elapsed(), Duration::ZERO, "no wait on a route out of quota");

    let [events] = finish(runtime, &store, &["s"]).await.try_into().unwrap();
    assert_eq!(requests(&events), [attempt(1, "main"), attempt(2, "backup")]);
    assert_eq!(switches(&events), [switch(1, "main", "backup", "QUOTA", "eager")]);
    assert_eq!(retries(&events), [], "no llm/retry: the rest of the chain was not asked");
    let kinds: Vec<&str> = events.iter().map(|e| e.kind()).skip(4).take(4).collect();
    assert_eq!(
        kinds,
        ["request/start", "request/error", "route/switched", "request/start"],
        "the switch is durable before the attempt on the new route"
    );
}

#[tokio::test(start_paused = true)]
async fn a_rate_limit_is_retried_by_llm_retry_first_and_switches_only_when_its_budget_is_spent() {
    let store = MemoryStore::new();
    let limited = || fail("RATE_LIMIT");
    let (main, _) = route("main", vec![limited(), limited(), limited()]);
    // The new route's chains start fresh: its SERVER failure gets llm-retry's retry 1.
    let (backup, _) = route("backup", vec![fail("SERVER"), Scripted::reply("done")]);
    let chain = vec![
        plugin(fallback::NAME, json!({"routes": ["backup"]})),
        plugin(llm_retry::NAME, json!({"jitterRatio": 0})),
    ];
    let runtime = runtime(vec![main, backup], chain, &store).await;
    let session = runtime.session("s").await.unwrap();
    let begun = Instant::now();
    assert_eq!(session.ask("hello").await.unwrap().reason, TurnEndReason::Completed);
    assert_eq!(begun.elapsed(), Duration::from_millis(500 + 1000 + 500));

    let [events] = finish(runtime, &store, &["s"]).await.try_into().unwrap();
    let main_retry = |n, ms| ("llm-retry".to_owned(), "main".to_owned(), n, ms);
    let backup_retry = |n, ms| ("llm-retry".to_owned(), "backup".to_owned(), n, ms);
    assert_eq!(
        retries(&events),
        [main_retry(1, 500.0), main_retry(2, 1000.0), backup_retry(1, 500.0)],
        "main's budget first; backup's chain starts at retry 1"
    );
    assert_eq!(switches(&events), [switch(1, "main", "backup", "RATE_LIMIT", "exhausted")]);
    assert_eq!(
        requests(&events),
        [
            attempt(1, "main"),
            attempt(2, "main"),
            attempt(3, "main"),
            attempt(4, "backup"),
            attempt(5, "backup")
        ]
    );
    let ids: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::LlmRetry(r) => Some(r.retry_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(ids[0], ids[1]);
    assert_ne!(ids[1], ids[2], "another chain, another retryId");
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_longer_than_max_wait_ms_switches_at_once() {
    let store = MemoryStore::new();
    // The route's own policy would wait out the provider's 45 s.
    let patient = RetryPolicy::from_declared(
        &json!({"mode": "normal", "backoff": {"maxDelayMs": 60000}}),
        "p",
    )
    .unwrap();
    let (main, _) = route("main", vec![fail_after("RATE_LIMIT", 45_000.0)]);
    let main = main.retry_policy(patient);
    let (backup, _) = route("backup", vec![Scripted::reply("done")]);
    let runtime =
        runtime(vec![main, backup], full_chain(json!({"routes": ["backup"]})), &store).await;
    let session = runtime.session("s").await.unwrap();
    let begun = Instant::now();
    assert_eq!(session.ask("hello").await.unwrap().reason, TurnEndReason::Completed);
    assert_eq!(begun.elapsed(), Duration::ZERO, "45 s is over maxWaitMs (30 s): no wait");

    let [events] = finish(runtime, &store, &["s"]).await.try_into().unwrap();
    assert_eq!(switches(&events), [switch(1, "main", "backup", "RATE_LIMIT", "delay")]);
    assert_eq!(retries(&events), []);
}

#[tokio::test(start_paused = true)]
async fn two_fallbacks_are_used_in_order_and_never_twice_in_one_step() {
    let store = MemoryStore::new();
    let (main, _) = route("main", vec![fail("QUOTA"), Scripted::reply("never")]);
    let (b1, _) = route("b1", vec![fail("QUOTA")]);
    let (b2, _) = route("b2", vec![fail("QUOTA")]);
    // `main` is listed too: it was asked in this step, so it is skipped.
    let config = json!({"routes": ["b1", "main", "b2"]});
    let runtime = runtime(vec![main, b1, b2], full_chain(config), &store).await;
    let session = runtime.session("s").await.unwrap();
    let outcome = session.ask("hello").await.unwrap();
    assert_eq!(code_of(&outcome.reason), "QUOTA", "every route failed: the last failure");

    let [events] = finish(runtime, &store, &["s"]).await.try_into().unwrap();
    assert_eq!(requests(&events), [attempt(1, "main"), attempt(2, "b1"), attempt(3, "b2")]);
    assert_eq!(
        switches(&events),
        [switch(1, "main", "b1", "QUOTA", "eager"), switch(1, "b1", "b2", "QUOTA", "eager")]
    );
}

#[tokio::test(start_paused = true)]
async fn a_cooling_route_is_skipped_by_another_sessions_turn_and_used_again_after_the_cooldown() {
    let store = MemoryStore::new();
    let (main, _) = route("main", vec![fail("QUOTA"), fail("QUOTA"), fail("QUOTA")]);
    // b1 is rate limited once (it cools down for 60 s), then answers.
    let (b1, _) = route("b1", vec![fail("RATE_LIMIT"), Scripted::reply("b1 is back")]);
    let (b2, _) = route("b2", vec![Scripted::reply("b2 first"), Scripted::reply("b2 again")]);
    let chain = vec![plugin(fallback::NAME, json!({"routes": ["b1", "b2"], "cooldownMs": 60000}))];
    let runtime = runtime(vec![main, b1, b2], chain, &store).await;

    // Session a: main → b1 (rate limited: cooling) → b2.
    let a = runtime.session("a").await.unwrap();
    assert_eq!(a.ask("one").await.unwrap().reason, TurnEndReason::Completed);
    // Session b, 10 s later: b1 is still cooling, so main → b2 at once.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let b = runtime.session("b").await.unwrap();
    assert_eq!(b.ask("two").await.unwrap().reason, TurnEndReason::Completed);
    // Session c, after the cooldown: b1 is chosen again.
    tokio::time::sleep(Duration::from_secs(50)).await;
    let c = runtime.session("c").await.unwrap();
    assert_eq!(c.ask("three").await.unwrap().reason, TurnEndReason::Completed);

    let [a, b, c] = finish(runtime, &store, &["a", "b", "c"]).await.try_into().unwrap();
    assert_eq!(requests(&a), [attempt(1, "main"), attempt(2, "b1"), attempt(3, "b2")]);
    assert_eq!(
        switches(&a),
        [
            switch(1, "main", "b1", "QUOTA", "eager"),
            switch(1, "b1", "b2", "RATE_LIMIT", "exhausted")
        ]
    );
    assert_eq!(requests(&b), [attempt(1, "main"), attempt(2, "b2")], "b1 skipped while cooling");
    assert_eq!(requests(&c), [attempt(1, "main"), attempt(2, "b1")], "b1 used again");
}

#[tokio::test(start_paused = true)]
async fn a_code_outside_codes_and_every_hard_floor_code_never_switch() {
    let store = MemoryStore::new();
    let mut codes = vec!["INVALID_REQUEST", "UNKNOWN", "HTTP_418"];
    // Not NO_ADAPTER (no adapter returns it: a route nobody serves, below) nor CIRCUIT_OPEN (its
    // route's breaker is open: fallback switches on it at once, see tests of route health).
    codes.extend(
        rein::runtime::failure::HARD_FLOOR
            .iter()
            .filter(|code| !["NO_ADAPTER", "CIRCUIT_OPEN"].contains(*code)),
    );
    let (main, _) = route("main", codes.iter().map(|code| fail(code)).collect());
    let (backup, backup_provider) = route("backup", vec![]);
    // The default chain without compaction (which would shrink and retry an overflow).
    let chain = vec![
        plugin(fallback::NAME, json!({"routes": ["backup"]})),
        plugin(llm_retry::NAME, json!({"jitterRatio": 0})),
        plugin("auto-retry", json!({"jitterRatio": 0})),
    ];
    let runtime = runtime(vec![main, backup], chain, &store).await;
    let session = runtime.session("s").await.unwrap();
    let mut ended = Vec::new();
    for _ in &codes {
        ended.push(code_of(&session.ask("hello").await.unwrap().reason).to_owned());
    }
    // NO_ADAPTER: a turn on a route nobody serves.
    let nowhere = session.prompt(Prompt::new("hello").on("nowhere")).unwrap().await.unwrap();
    ended.push(code_of(&nowhere.reason).to_owned());
    codes.push("NO_ADAPTER");
    assert_eq!(ended, codes, "each turn ends with its own failure");

    let [events] = finish(runtime, &store, &["s"]).await.try_into().unwrap();
    assert_eq!(switches(&events), [], "no switch");
    assert!(backup_provider.requests().is_empty(), "the backup was never asked");
}

#[tokio::test(start_paused = true)]
async fn cancelling_during_the_fallback_attempt_ends_the_turn_aborted() {
    let store = MemoryStore::new();
    let (main, _) = route("main", vec![fail("QUOTA")]);
    let (backup, _) = route("backup", vec![Scripted::stall()]);
    let runtime =
        runtime(vec![main, backup], full_chain(json!({"routes": ["backup"]})), &store).await;
    let session = runtime.session("s").await.unwrap();
    let mut turn = session.prompt("hello").unwrap();
    while let Some(event) = turn.next_event().await {
        if matches!(&event.event, Event::RequestStart(r) if r.provider == "backup") {
            break;
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(session.cancel(CancelCause::User).await.unwrap());
    let outcome = turn.await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Aborted { cause: CancelCause::User });

    let [events] = finish(runtime, &store, &["s"]).await.try_into().unwrap();
    assert_eq!(requests(&events), [attempt(1, "main"), attempt(2, "backup")]);
    let tail: Vec<&str> = events.iter().rev().take(3).map(|e| e.kind()).collect();
    assert_eq!(
        tail,
        ["agent/idle", "turn/end", "step/end"],
        "nothing after the cancel but the close"
    );
}

#[tokio::test(start_paused = true)]
async fn the_request_sent_to_the_fallback_carries_the_same_messages_as_the_failed_one() {
    let store = MemoryStore::new();
    let failing = Scripted::Fail(
        rein_cli::scenario::scripted::ScriptedFail::new(
            Failure::new("QUOTA", "no credit").unwrap(),
        )
        .with_chunks(["a draft ", "cut short"]),
    );
    let (main, main_provider) = route("main", vec![Scripted::reply("first answer"), failing]);
    let (backup, backup_provider) = route("backup", vec![Scripted::reply("second answer")]);
    let runtime =
        runtime(vec![main, backup], full_chain(json!({"routes": ["backup"]})), &store).await;
    let session = runtime.session("s").await.unwrap();
    session.ask("first question").await.unwrap();
    assert_eq!(session.ask("second question").await.unwrap().reason, TurnEndReason::Completed);

    let failed = main_provider.requests().pop().unwrap();
    let [sent] = backup_provider.requests().try_into().unwrap();
    assert_eq!(*sent.messages, *failed.messages, "the same history, message for message");
    assert_eq!(sent.messages.len(), 3, "question, answer, question: the draft is not in it");
    assert_eq!((sent.provider.as_str(), sent.model.as_str()), ("backup", "backup-model"));
    assert_eq!((failed.provider.as_str(), failed.model.as_str()), ("main", "main-model"));
    assert_eq!((sent.turn, sent.step, sent.attempt), (2, 1, 2));
    finish(runtime, &store, &["s"]).await;
}

#[tokio::test(start_paused = true)]
async fn the_turn_stays_on_the_fallback_for_its_later_steps_and_a_retry_reruns_where_it_failed() {
    let store = MemoryStore::new();
    let call = ToolCall { id: "c1".into(), name: "echo".into(), arguments: json!({"text": "hi"}) };
    let (main, main_provider) =
        route("main", vec![fail("QUOTA"), Scripted::reply("turn 2 on main"), fail("QUOTA")]);
    let (backup, _) = route(
        "backup",
        vec![
            Scripted::Reply(ScriptedReply::text("calling").with_tool_calls(vec![call])),
            Scripted::reply("step 2, still on the backup"),
            fail("SERVER"),
            Scripted::reply("the retry, on the backup"),
        ],
    );
    let chain = vec![plugin(fallback::NAME, json!({"routes": ["backup"]}))];
    let runtime = runtime(vec![main, backup], chain, &store).await;
    let session = runtime.session("s").await.unwrap();
    // Turn 1: switched in step 1; step 2 starts on the backup.
    assert_eq!(session.ask("use a tool").await.unwrap().reason, TurnEndReason::Completed);
    // Turn 2 starts on its own route again.
    assert_eq!(session.ask("again").await.unwrap().reason, TurnEndReason::Completed);
    // Turn 3: main → backup, which fails too (no route left): the turn fails on the backup, and
    // a manual retry reruns it there.
    let failed = session.ask("once more").await.unwrap();
    assert_eq!(code_of(&failed.reason), "SERVER");
    let retried = session.retry().await.unwrap().await.unwrap();
    assert_eq!(retried.reason, TurnEndReason::Completed);

    let [events] = finish(runtime, &store, &["s"]).await.try_into().unwrap();
    let by_turn = |turn: u32| -> Vec<(u32, u32, String)> {
        events
            .iter()
            .filter_map(|e| match &e.event {
                Event::RequestStart(r) if r.turn == turn => {
                    Some((r.step, r.attempt, r.provider.clone()))
                }
                _ => None,
            })
            .collect()
    };
    let at = |step, attempt, route: &str| (step, attempt, route.to_owned());
    assert_eq!(by_turn(1), [at(1, 1, "main"), at(1, 2, "backup"), at(2, 1, "backup")]);
    assert_eq!(by_turn(2), [at(1, 1, "main")]);
    assert_eq!(by_turn(3), [at(1, 1, "main"), at(1, 2, "backup")]);
    assert_eq!(by_turn(4), [at(1, 1, "backup")], "the retry runs on the route the turn failed on");
    assert_eq!(main_provider.requests().len(), 3);
}

#[tokio::test(start_paused = true)]
async fn llm_retry_in_always_mode_passes_a_downstream_switch_on() {
    let store = MemoryStore::new();
    let always = RetryPolicy::from_declared(&json!({"mode": "always"}), "p").unwrap();
    let (main, _) = route("main", vec![fail("SERVER")]);
    let main = main.retry_policy(always);
    let (backup, _) = route("backup", vec![Scripted::reply("done")]);
    // fallback after llm-retry: llm-retry's always mode asks it first.
    let chain = vec![
        plugin(llm_retry::NAME, json!({"jitterRatio": 0})),
        plugin(fallback::NAME, json!({"routes": ["backup"]})),
    ];
    let runtime = runtime(vec![main, backup], chain, &store).await;
    let session = runtime.session("s").await.unwrap();
    assert_eq!(session.ask("hello").await.unwrap().reason, TurnEndReason::Completed);

    let [events] = finish(runtime, &store, &["s"]).await.try_into().unwrap();
    assert_eq!(switches(&events), [switch(1, "main", "backup", "SERVER", "exhausted")]);
    assert_eq!(retries(&events), [], "llm-retry accepted the downstream retry, writing nothing");
    assert_eq!(requests(&events), [attempt(1, "main"), attempt(2, "backup")]);
}

#[tokio::test(start_paused = true)]
async fn a_fallback_route_the_runtime_does_not_serve_is_refused_by_name() {
    let store = MemoryStore::new();
    let (main, _) = route("main", vec![]);
    let built = Runtime::builder()
        .store(Arc::new(store.clone()))
        .route(main)
        .plugin(plugin(fallback::NAME, json!({"routes": ["bakup"]})))
        .build()
        .await;
    let Err(error) = built else { panic!("a fallback to an unknown route must be refused") };
    assert!(matches!(error, BuildError::PluginRoutes { .. }), "{error}");
    assert_eq!(
        error.to_string(),
        "plugin fallback: routes[0]: no provider route named \"bakup\" is served (served: main)"
    );

    // Registered later, and patched at run time: the same refusal.
    let (main, _) = route("main", vec![]);
    let (backup, _) = route("backup", vec![]);
    let runtime = runtime(vec![main, backup], vec![], &store).await;
    let bad = fallback::factory(&json!({"routes": ["elsewhere"]})).unwrap().plugin;
    let refused = runtime.register_plugin(bad).await.unwrap_err();
    assert!(refused.to_string().contains("routes[0]: no provider route named \"elsewhere\""));
    let good = fallback::factory(&json!({"routes": ["backup"]})).unwrap().plugin;
    runtime.register_plugin(good).await.unwrap();
    let patch = json!({"routes": ["backup", "elsewhere"]});
    let refused = runtime.configure_plugin("fallback", patch, 0).await.unwrap_err();
    assert_eq!(
        refused.to_string(),
        "routes[1]: no provider route named \"elsewhere\" is served (served: backup, main)"
    );
    let settings = runtime.plugin_settings("fallback").unwrap();
    assert_eq!((settings.revision, &settings.settings["routes"]), (0, &json!(["backup"])));
    runtime.shutdown().await;
}
