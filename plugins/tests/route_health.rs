//! Route health end to end (`docs/runtime-semantics.md`, "Route health"): many sessions sharing a
//! route open its breaker, later attempts fail at once with `CIRCUIT_OPEN` without reaching the
//! adapter, after `openMs` a probe goes through and its success closes the breaker; the retry
//! budget declines retries with `retry/throttled`; `fallback` switches on `CIRCUIT_OPEN` and skips
//! open routes. Also: a cancelled probe frees its place for another session's; an attempt admitted
//! before the breaker opened and answered after changes nothing in the breaker (it counts in the
//! budget); successes refill a spent budget a tenth of a token each, until a failure, its own token
//! taken, leaves more than half; each change is recorded with its time
//! (`Runtime::route_health_history`). Paused time throughout; every test ends with the
//! invariant check of every session log it wrote.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use rein_plugins::auto_retry::AutoRetry;
use rein_plugins::fallback::Fallback;
use rein_plugins::llm_retry::LlmRetry;
use rein_runtime::clock::VirtualClock;
use rein_runtime::event::{CancelCause, Envelope, Event, RetryThrottled, TurnEndReason};
use rein_runtime::provider::prelude::*;
use rein_runtime::random::Constant;
use rein_runtime::retry_policy::RetryPolicy;
use rein_runtime::route_health::{BreakerState, HealthSettings};
use rein_runtime::runtime::{Route, Runtime, RuntimeBuilder};
use rein_runtime::session::Prompt;
use rein_runtime::store::jsonl::JsonlStore;
use rein_runtime::store::memory::MemoryStore;
use rein_runtime::store::{Durability, SessionStore};
use rein_testkit::log::{assert_invariants, kinds};
use rein_testkit::runtime::shut_down;
use serde_json::json;

/// A provider that fails every request with `code` while it is down, and answers "ok" otherwise,
/// after `latency`; it counts the requests that reached it.
struct Outage {
    down: AtomicBool,
    code: &'static str,
    latency: Duration,
    calls: AtomicU32,
}

impl Outage {
    fn new(code: &'static str, latency: Duration) -> Arc<Self> {
        Arc::new(Self { down: AtomicBool::new(true), code, latency, calls: AtomicU32::new(0) })
    }

    fn recover(&self) {
        self.down.store(false, Ordering::SeqCst);
    }

    fn calls(&self) -> u32 {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Adapter for Outage {
    fn call(
        &self,
        _: Request,
        chunks: ChunkSink,
    ) -> BoxFuture<'static, Result<Completion, Failure>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let (down, code, latency) = (self.down.load(Ordering::SeqCst), self.code, self.latency);
        Box::pin(async move {
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            if down {
                return Err(Failure::new(code, "the provider is down").unwrap());
            }
            let _ = chunks.send("ok".into());
            Ok(Completion::default())
        })
    }
}

/// A provider whose requests of sessions named `slow…` take a second and the others none; each
/// fails with `SERVER` when it ends while the provider is down (read at the end, not at the
/// start), and answers "ok" otherwise.
struct Slow {
    down: Arc<AtomicBool>,
    calls: AtomicU32,
}

impl Slow {
    fn new() -> Arc<Self> {
        Arc::new(Self { down: Arc::new(AtomicBool::new(true)), calls: AtomicU32::new(0) })
    }

    fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }
}

impl Adapter for Slow {
    fn call(
        &self,
        request: Request,
        chunks: ChunkSink,
    ) -> BoxFuture<'static, Result<Completion, Failure>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let slow = request.session.starts_with("slow");
        let down = Arc::clone(&self.down);
        Box::pin(async move {
            if slow {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            if down.load(Ordering::SeqCst) {
                return Err(Failure::new("SERVER", "the provider is down").unwrap());
            }
            let _ = chunks.send("ok".into());
            Ok(Completion::default())
        })
    }
}

fn health(min_attempts: u32, failure_ratio: f64, open_ms: u64) -> HealthSettings {
    HealthSettings::new()
        .with_min_attempts(min_attempts)
        .and_then(|s| s.with_failure_ratio(failure_ratio))
        .and_then(|s| s.with_open_ms(open_ms))
        .unwrap()
}

fn builder(store: &MemoryStore) -> RuntimeBuilder {
    Runtime::builder()
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .jitter(Arc::new(Constant::new(0.5).unwrap()))
}

/// The code a turn failed with, or `completed`.
fn ended(reason: &TurnEndReason) -> String {
    match reason {
        TurnEndReason::Completed => "completed".into(),
        TurnEndReason::Error { failure } => failure.code().into(),
        other => format!("{other:?}"),
    }
}

/// Asks one turn on `route` in a session of its own, `id`.
async fn ask(runtime: &Runtime, id: &str, route: &str) -> String {
    let session = runtime.session(id).await.unwrap();
    ended(&session.prompt(Prompt::new("hello").on(route)).unwrap().await.unwrap().reason)
}

/// Shuts the runtime down and checks the invariants of every session log of the store.
async fn finish(runtime: Runtime, store: &MemoryStore, ids: &[String]) -> Vec<Vec<Envelope>> {
    shut_down(&runtime).await;
    ids.iter()
        .map(|id| {
            let events = store.events(id);
            assert_invariants(&events);
            events
        })
        .collect()
}

fn throttles(events: &[Envelope]) -> Vec<RetryThrottled> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Event::RetryThrottled(t) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn many_sessions_open_the_breaker_attempts_short_circuit_and_a_probe_closes_it() {
    let store = MemoryStore::new();
    let main = Outage::new("SERVER", Duration::from_millis(100));
    let route = Route::new("main", main.clone()).model("m").health(health(10, 0.5, 5_000));
    let runtime = builder(&store).route(route).build().await.unwrap();
    let mut changes = runtime.route_health_changes("main").unwrap();
    let mut ids = Vec::new();
    let mut id = || {
        ids.push(format!("s{}", ids.len()));
        ids.last().unwrap().clone()
    };

    // Ten sessions fail at once (no plugin retries): the tenth failure opens the breaker.
    let turns: Vec<_> = (0..10).map(|_| id()).collect();
    let mut running = tokio::task::JoinSet::new();
    for s in &turns {
        let (runtime, s) = (runtime.clone(), s.clone());
        running.spawn(async move { ask(&runtime, &s, "main").await });
    }
    let outcomes = running.join_all().await;
    assert_eq!(outcomes, vec!["SERVER"; 10]);
    let opened = runtime.route_health("main").unwrap();
    assert_eq!((opened.state, opened.open_until_ms), (BreakerState::Open, Some(5_100)));
    assert_eq!(opened.tokens, 0.0, "ten failures took the ten tokens");
    assert!(changes.has_changed().unwrap());
    assert_eq!(changes.borrow_and_update().state, BreakerState::Open, "the change was published");

    // While open: every attempt fails at once, and none reaches the adapter.
    for _ in 0..5 {
        assert_eq!(ask(&runtime, &id(), "main").await, "CIRCUIT_OPEN");
    }
    assert_eq!(main.calls(), 10, "no request was sent while open");
    assert_eq!(runtime.route_health("main").unwrap().tokens, 0.0, "refused attempts count nothing");

    // After openMs the route recovered; the first attempt probes, a second meanwhile is refused.
    tokio::time::sleep(Duration::from_millis(5_000)).await;
    assert_eq!(runtime.route_health("main").unwrap().state, BreakerState::HalfOpen);
    main.recover();
    let (probe, meanwhile) = (id(), id());
    let probing = ask(&runtime, &probe, "main");
    let refused = async {
        tokio::task::yield_now().await;
        ask(&runtime, &meanwhile, "main").await
    };
    let (probed, refused) = tokio::join!(probing, refused);
    let mut both = [probed, refused];
    both.sort();
    assert_eq!(both, ["CIRCUIT_OPEN", "completed"], "one probe went, the other was refused");
    let closed = runtime.route_health("main").unwrap();
    assert_eq!((closed.state, closed.open_until_ms), (BreakerState::Closed, None));
    assert_eq!(changes.borrow_and_update().state, BreakerState::Closed);
    assert_eq!(main.calls(), 11, "the probe alone reached the provider");
    assert_eq!(ask(&runtime, &id(), "main").await, "completed", "closed: attempts go through");

    let logs = finish(runtime, &store, &ids).await;
    // A short-circuited turn: one attempt, its CIRCUIT_OPEN error, and the turn's end.
    assert_eq!(
        kinds(&logs[10])[1..],
        [
            "user/message",
            "turn/start",
            "step/start",
            "request/start",
            "request/error",
            "step/end",
            "turn/end",
            "agent/idle"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_probe_opens_the_breaker_again_for_open_ms() {
    let store = MemoryStore::new();
    let main = Outage::new("TIMEOUT", Duration::ZERO);
    let route = Route::new("main", main.clone()).model("m").health(health(2, 1.0, 1_000));
    let runtime = builder(&store).route(route).build().await.unwrap();
    let ids: Vec<String> = (0..6).map(|i| format!("s{i}")).collect();
    assert_eq!(ask(&runtime, &ids[0], "main").await, "TIMEOUT");
    assert_eq!(
        runtime.route_health("main").unwrap().state,
        BreakerState::Closed,
        "1 < minAttempts"
    );
    assert_eq!(ask(&runtime, &ids[1], "main").await, "TIMEOUT");
    assert_eq!(runtime.route_health("main").unwrap().open_until_ms, Some(1_000));
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    // The probe fails: open again, until a full openMs after it.
    assert_eq!(ask(&runtime, &ids[2], "main").await, "TIMEOUT");
    let reopened = runtime.route_health("main").unwrap();
    assert_eq!((reopened.state, reopened.open_until_ms), (BreakerState::Open, Some(2_000)));
    assert_eq!(ask(&runtime, &ids[3], "main").await, "CIRCUIT_OPEN");
    assert_eq!(main.calls(), 3);
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    main.recover();
    assert_eq!(ask(&runtime, &ids[4], "main").await, "completed");
    assert_eq!(ask(&runtime, &ids[5], "main").await, "completed");
    assert_eq!(runtime.route_health("main").unwrap().state, BreakerState::Closed);
    finish(runtime, &store, &ids).await;
}

#[tokio::test(start_paused = true)]
async fn a_spent_budget_declines_retries_with_retry_throttled() {
    let store = MemoryStore::new();
    let main = Outage::new("SERVER", Duration::ZERO);
    // The breaker out of the way (it would need 1,000 attempts): the budget alone.
    let route = Route::new("main", main.clone()).model("m").health(health(1_000, 0.5, 1_000));
    let runtime = builder(&store)
        .plugin(LlmRetry::from_config(&json!({"jitterRatio": 0})).unwrap())
        .plugin(AutoRetry::from_config(&json!({"jitterRatio": 0})).unwrap())
        .route(route)
        .build()
        .await
        .unwrap();
    let ids: Vec<String> = vec!["first".into(), "second".into()];
    // Attempts 1–5 fail (10 → 5 tokens): llm-retry's two retries, auto-retry's first two; its
    // third would be attempt 6, but the fifth failure left the budget at half.
    assert_eq!(ask(&runtime, &ids[0], "main").await, "SERVER");
    assert_eq!(main.calls(), 5, "without route health: 6");
    let spent = runtime.route_health("main").unwrap();
    assert_eq!((spent.tokens, spent.retries_throttled()), (5.0, true));
    // The next session's first attempt goes (a first attempt is never throttled); both plugins
    // decline to retry it.
    assert_eq!(ask(&runtime, &ids[1], "main").await, "SERVER");
    assert_eq!(main.calls(), 6);

    let logs = finish(runtime, &store, &ids).await;
    let throttled = |plugin: &str| RetryThrottled {
        turn: 1,
        step: 1,
        provider: "main".into(),
        plugin: plugin.into(),
        code: "SERVER".into(),
    };
    assert_eq!(throttles(&logs[0]), [throttled("auto-retry")]);
    assert_eq!(throttles(&logs[1]), [throttled("llm-retry"), throttled("auto-retry")]);
    let tail: Vec<&str> = kinds(&logs[1])[5..].to_vec();
    assert_eq!(
        tail,
        [
            "request/error",
            "retry/throttled",
            "retry/throttled",
            "step/end",
            "turn/end",
            "agent/idle"
        ],
        "throttled right after the failure, no llm/retry"
    );
    assert!(!kinds(&logs[1]).contains(&"llm/retry"));
}

#[tokio::test(start_paused = true)]
async fn fallback_switches_on_circuit_open_and_skips_open_routes() {
    let store = MemoryStore::new();
    // AUTH: counted against the route, retried by nobody (so each turn is one attempt).
    let main = Outage::new("AUTH", Duration::ZERO);
    let b1 = Outage::new("AUTH", Duration::ZERO);
    let b2 = Outage::new("AUTH", Duration::ZERO);
    b2.recover();
    let fallback = Fallback::from_config(&json!({"routes": ["b1", "b2"], "codes": ["QUOTA"]}));
    let runtime = builder(&store)
        .plugin(fallback.unwrap())
        .plugin(LlmRetry::from_config(&json!({"jitterRatio": 0})).unwrap())
        .plugin(AutoRetry::from_config(&json!({"jitterRatio": 0})).unwrap())
        .route(Route::new("main", main.clone()).model("m").health(health(2, 1.0, 60_000)))
        .route(Route::new("b1", b1.clone()).model("m1").health(health(2, 1.0, 60_000)))
        .route(Route::new("b2", b2.clone()).model("m2"))
        .build()
        .await
        .unwrap();
    let ids: Vec<String> = (0..6).map(|i| format!("s{i}")).collect();
    for (id, route) in ids[..4].iter().zip(["main", "main", "b1", "b1"]) {
        assert_eq!(ask(&runtime, id, route).await, "AUTH");
    }
    assert_eq!(runtime.route_health("main").unwrap().state, BreakerState::Open);
    assert_eq!(runtime.route_health("b1").unwrap().state, BreakerState::Open);
    assert_eq!(runtime.route_health("b2"), None, "b2 has no health settings");

    // main is open: the turn's first attempt fails CIRCUIT_OPEN, fallback switches at once,
    // skipping b1 (open too), and b2 answers. Nobody retried main.
    assert_eq!(ask(&runtime, &ids[4], "main").await, "completed");
    assert_eq!((main.calls(), b1.calls(), b2.calls()), (2, 2, 1));

    // From b1 (open): b1 is the step's own route, so b2.
    assert_eq!(ask(&runtime, &ids[5], "b1").await, "completed");
    assert_eq!((main.calls(), b1.calls(), b2.calls()), (2, 2, 2));
    let logs = finish(runtime, &store, &ids).await;
    let switched: Vec<(String, String, String, String)> = logs[4]
        .iter()
        .filter_map(|e| match &e.event {
            Event::RouteSwitched(s) => {
                Some((s.from.clone(), s.to.clone(), s.code.clone(), s.reason.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(switched, [("main".into(), "b2".into(), "CIRCUIT_OPEN".into(), "eager".into())]);
    for log in &logs {
        assert!(!kinds(log).contains(&"llm/retry"), "CIRCUIT_OPEN and AUTH are never retried");
    }
}

#[tokio::test(start_paused = true)]
async fn circuit_open_with_no_route_left_ends_the_turn_unretried() {
    let store = MemoryStore::new();
    let main = Outage::new("SERVER", Duration::ZERO);
    let always = json!({"mode": "always", "backoff": {"jitterRatio": 0}});
    let runtime = builder(&store)
        .plugin(LlmRetry::new(RetryPolicy::from_declared(&always, "policy").unwrap()))
        .plugin(AutoRetry::from_config(&json!({"jitterRatio": 0})).unwrap())
        .route(Route::new("main", main.clone()).model("m").health(health(1, 1.0, 60_000)))
        .build()
        .await
        .unwrap();
    let ids = vec!["s".to_owned()];
    // Always mode retries any code without a budget — but not CIRCUIT_OPEN: the first failure
    // opens the breaker (minAttempts 1), the retry is refused at once, and nobody retries that.
    assert_eq!(ask(&runtime, &ids[0], "main").await, "CIRCUIT_OPEN");
    assert_eq!(main.calls(), 1);
    let logs = finish(runtime, &store, &ids).await;
    let codes: Vec<&str> = logs[0]
        .iter()
        .filter_map(|e| match &e.event {
            Event::RequestError(r) => Some(r.failure.code()),
            _ => None,
        })
        .collect();
    assert_eq!(codes, ["SERVER", "CIRCUIT_OPEN"]);
}

/// A JSONL store in `dir`.
fn jsonl(dir: &std::path::Path) -> Arc<JsonlStore> {
    Arc::new(JsonlStore::open(dir, Durability::Disk).unwrap())
}

#[tokio::test(start_paused = true)]
async fn health_settings_change_at_run_time_behind_the_fence_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let main = Outage::new("SERVER", Duration::ZERO);
    let start = |store: Arc<JsonlStore>| {
        let route = Route::new("main", main.clone()).model("m").health(health(4, 0.5, 30_000));
        Runtime::builder()
            .store(store)
            .clock(Arc::new(VirtualClock::start()))
            .route(route)
            .route(Route::new("plain", main.clone()).model("m"))
            .build()
    };
    let runtime = start(jsonl(dir.path())).await.unwrap();
    assert_eq!(runtime.health_routes(), ["main"], "only routes built with health have it");
    let shown = runtime.route_health_settings("main").unwrap();
    assert_eq!((shown.revision, &shown.settings["openMs"]), (0, &json!(30_000)));
    let awake = runtime.session("awake").await.unwrap();
    assert_eq!(ask(&runtime, "awake", "main").await, "SERVER");

    // Refused, naming why; nothing changes.
    let refused = [
        (
            runtime.configure_route_health("main", json!({"failureRatio": 2}), 0).await,
            "failureRatio: must be within [0, 1], got 2",
        ),
        (
            runtime.configure_route_health("main", json!({"openMs": 5}), 3).await,
            "stale revision: the patch is based on revision 3, the settings are at 0",
        ),
        (
            runtime.configure_route_health("plain", json!({}), 0).await,
            "no route named plain has route health",
        ),
        (
            runtime.configure_route_health("nowhere", json!({}), 0).await,
            "no route named nowhere has route health",
        ),
    ];
    for (got, want) in refused {
        assert_eq!(got.unwrap_err().to_string(), want);
    }
    assert_eq!(runtime.route_health_settings("main").unwrap().revision, 0);

    // Accepted: saved, then in force — the next opening lasts the new openMs; the route keeps
    // the token it lost.
    let outcome = runtime
        .configure_route_health("main", json!({"openMs": 2_000, "probes": 1}), 0)
        .await
        .unwrap();
    assert_eq!((outcome.revision, outcome.changed), (1, vec!["openMs".to_owned()]));
    assert_eq!(runtime.route_health("main").unwrap().tokens, 9.0, "a change keeps the state");
    for i in 0..3 {
        assert_eq!(ask(&runtime, &format!("f{i}"), "main").await, "SERVER");
    }
    let opened = runtime.route_health("main").unwrap();
    assert_eq!((opened.state, opened.open_until_ms), (BreakerState::Open, Some(2_000)));
    let stale = runtime.configure_route_health("main", json!({"openMs": 9}), 0).await;
    assert!(matches!(
        stale,
        Err(rein_runtime::plugin::ConfigError::StaleRevision { current: 1, .. })
    ));
    drop(awake);
    shut_down(&runtime).await;
    let changed: Vec<_> = JsonlStore::open(dir.path(), Durability::Disk)
        .unwrap()
        .load("awake")
        .await
        .unwrap()
        .unwrap()
        .events
        .into_iter()
        .filter_map(|e| match e.event {
            Event::ConfigChanged(c) => Some((c.plugin, c.revision, c.changed)),
            _ => None,
        })
        .collect();
    assert_eq!(changed, [("routes.main.health".to_owned(), 1, vec!["openMs".to_owned()])]);

    // A runtime on the same directory starts the route at the saved revision and settings,
    // healthy again (state is not saved: a new process has not seen the outage).
    let store = jsonl(dir.path());
    let again = start(store.clone()).await.unwrap();
    let shown = again.route_health_settings("main").unwrap();
    assert_eq!((shown.revision, &shown.settings["openMs"]), (1, &json!(2_000)));
    assert_eq!(again.saved_revision_at_start("routes.main.health"), Some(1));
    assert_eq!(again.route_health("main").unwrap().state, BreakerState::Closed);
    let stale = again.configure_route_health("main", json!({"openMs": 9}), 0).await;
    assert!(stale.is_err(), "a page opened before the restart names an older revision");
    again.configure_route_health("main", json!({"minAttempts": 1}), 1).await.unwrap();
    assert_eq!(ask(&again, "g", "main").await, "SERVER");
    let opened = again.route_health("main").unwrap();
    assert_eq!(opened.state, BreakerState::Open, "minAttempts 1 in force");
    shut_down(&again).await;
    for id in store.sessions().await.unwrap() {
        assert_invariants(&store.load(&id).await.unwrap().unwrap().events);
    }
}

#[tokio::test(start_paused = true)]
async fn a_saved_health_record_this_build_refuses_is_a_warning_and_the_fence_continues() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("routes.main.health.settings.json"),
        r#"{"plugin":"routes.main.health","revision":4,"settings":{"openMs":0}}"#,
    )
    .unwrap();
    let main = Outage::new("SERVER", Duration::ZERO);
    let route = Route::new("main", main.clone()).health(health(20, 0.5, 7_000));
    let runtime = Runtime::builder().store(jsonl(dir.path())).route(route).build().await.unwrap();
    let warnings: Vec<String> = runtime.config_warnings().iter().map(ToString::to_string).collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("routes.main.health") && warnings[0].contains("openMs"),
        "{warnings:?}"
    );
    let shown = runtime.route_health_settings("main").unwrap();
    assert_eq!(
        (shown.revision, &shown.settings["openMs"]),
        (4, &json!(7_000)),
        "built settings at the store's revision"
    );
    runtime.configure_route_health("main", json!({"openMs": 8_000}), 4).await.unwrap();
    shut_down(&runtime).await;
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_probe_frees_its_place_for_another_sessions_probe() {
    let store = MemoryStore::new();
    let main = Slow::new();
    let route = Route::new("main", main.clone()).model("m").health(health(2, 0.5, 1_000));
    let runtime = builder(&store).route(route).build().await.unwrap();
    let ids: Vec<String> = ["a", "b", "slow-probe", "refused", "probe"].map(String::from).to_vec();
    assert_eq!(ask(&runtime, &ids[0], "main").await, "SERVER");
    assert_eq!(ask(&runtime, &ids[1], "main").await, "SERVER");
    assert_eq!(runtime.route_health("main").unwrap().open_until_ms, Some(1_000));
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    main.set_down(false);

    // A slow probe goes; meanwhile another session is refused: the one probe is in flight.
    let slow = runtime.session(&ids[2]).await.unwrap();
    let probing = slow.prompt("hello").unwrap();
    tokio::task::yield_now().await;
    let refused = runtime.session(&ids[3]).await.unwrap();
    let outcome = refused.prompt("hello").unwrap().await.unwrap();
    let TurnEndReason::Error { failure } = &outcome.reason else { panic!("{outcome:?}") };
    assert_eq!(failure.code(), "CIRCUIT_OPEN");
    assert!(failure.message().contains("half-open"), "{}", failure.message());

    // The probe's turn is cancelled: its attempt ends ABORTED, which says nothing of the route,
    // and its place goes to the next attempt, which probes and closes the breaker.
    assert!(slow.cancel(CancelCause::User).await.unwrap());
    assert!(matches!(probing.await.unwrap().reason, TurnEndReason::Aborted { .. }));
    assert_eq!(runtime.route_health("main").unwrap().state, BreakerState::HalfOpen);
    assert_eq!(ask(&runtime, &ids[4], "main").await, "completed");
    assert_eq!(runtime.route_health("main").unwrap().state, BreakerState::Closed);
    assert_eq!(main.calls.load(Ordering::SeqCst), 4, "a, b, the cancelled probe, the probe");

    // The history: opened at 0, closed by the second probe at 1,000 (virtual ms).
    let history = runtime.route_health_history("main").unwrap();
    let changes: Vec<(u64, BreakerState, BreakerState)> =
        history.changes().map(|c| (c.at_ms, c.from, c.to)).collect();
    assert_eq!(
        changes,
        [
            (0, BreakerState::Closed, BreakerState::Open),
            (1_000, BreakerState::HalfOpen, BreakerState::Closed)
        ]
    );
    assert_eq!((history.opened(), history.closed()), (1, 1));
    finish(runtime, &store, &ids).await;
}

#[tokio::test(start_paused = true)]
async fn an_attempt_sent_before_the_breaker_opened_and_answered_after_leaves_it_open() {
    let store = MemoryStore::new();
    let main = Slow::new();
    let route = Route::new("main", main.clone()).model("m").health(health(3, 0.5, 5_000));
    let runtime = builder(&store).route(route).build().await.unwrap();
    let ids: Vec<String> = ["slow", "a", "b", "c"].map(String::from).to_vec();

    // A slow attempt is sent while the breaker is closed; three fast failures then open it.
    let slow = runtime.session(&ids[0]).await.unwrap();
    let slow_turn = slow.prompt("hello").unwrap();
    tokio::task::yield_now().await;
    for id in &ids[1..] {
        assert_eq!(ask(&runtime, id, "main").await, "SERVER");
    }
    let opened = runtime.route_health("main").unwrap();
    assert_eq!((opened.state, opened.tokens), (BreakerState::Open, 7.0));

    // The provider is back when the slow attempt ends: its success is what the route was, not
    // what it is — the breaker stays open until its deadline; the budget takes its 0.1.
    main.set_down(false);
    assert!(matches!(slow_turn.await.unwrap().reason, TurnEndReason::Completed));
    let after = runtime.route_health("main").unwrap();
    assert_eq!((after.state, after.open_until_ms), (BreakerState::Open, Some(5_000)));
    assert!((after.tokens - 7.1).abs() < 1e-9, "{after:?}");
    assert_eq!(runtime.route_health_history("main").unwrap().changes().len(), 1, "opened only");
    finish(runtime, &store, &ids).await;
}

#[tokio::test(start_paused = true)]
async fn successes_refill_a_spent_budget_a_tenth_of_a_token_each() {
    let store = MemoryStore::new();
    let main = Slow::new();
    // The breaker out of the way: the budget alone.
    let route = Route::new("main", main.clone()).model("m").health(health(1_000, 0.5, 1_000));
    let llm_retry = LlmRetry::from_config(&json!({"jitterRatio": 0, "maxTransientRetries": 1}));
    let runtime = builder(&store).plugin(llm_retry.unwrap()).route(route).build().await.unwrap();
    let mut ids = Vec::new();
    let mut ask_next = async |runtime: &Runtime| {
        ids.push(format!("s{}", ids.len()));
        ask(runtime, ids.last().unwrap(), "main").await
    };
    // Two turns of two failed attempts, and a third turn: 10 → 5 tokens, its retry throttled.
    for _ in 0..3 {
        assert_eq!(ask_next(&runtime).await, "SERVER");
    }
    let tokens = |runtime: &Runtime| runtime.route_health("main").unwrap().tokens;
    assert_eq!(tokens(&runtime), 5.0);
    // Ten successes give back a token: 6. A failure takes its own token before it is decided,
    // so at 5 its retry is still throttled; one success more, and at 5.1 it is retried.
    main.set_down(false);
    for _ in 0..10 {
        assert_eq!(ask_next(&runtime).await, "completed");
    }
    assert!((tokens(&runtime) - 6.0).abs() < 1e-9, "{}", tokens(&runtime));
    main.set_down(true);
    assert_eq!(ask_next(&runtime).await, "SERVER");
    main.set_down(false);
    for _ in 0..11 {
        assert_eq!(ask_next(&runtime).await, "completed");
    }
    main.set_down(true);
    assert_eq!(ask_next(&runtime).await, "SERVER");
    let ids = ids.clone();
    let logs = finish(runtime, &store, &ids).await;
    let retried = |log: &[Envelope]| kinds(log).contains(&"llm/retry");
    let throttled = |log: &[Envelope]| !throttles(log).is_empty();
    let failed: Vec<(bool, bool)> = logs
        .iter()
        .filter(|log| kinds(log).contains(&"request/error"))
        .map(|log| (retried(log), throttled(log)))
        .collect();
    assert_eq!(
        failed,
        [(true, false), (true, false), (false, true), (false, true), (true, false)],
        "retried, retried, throttled at 5 tokens, throttled after 10 successes, retried after 11"
    );
}
