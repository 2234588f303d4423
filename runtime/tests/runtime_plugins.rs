//! Plugins through the runtime's API: disposal mid-wait, run-time configuration, a thousand
//! sessions parked in one plugin's wait or recovered by plugins that answer at once, and a
//! plugin that crashes before its recovery first waits.

// Helpers outside `#[test]` functions unwrap too: a failing set-up is a failing test.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rein_runtime::BoxFuture;
use rein_runtime::clock::VirtualClock;
use rein_runtime::event::{ConfigChanged, Event, PluginCrashed, TurnEndReason};
use rein_runtime::plugin::{
    ConfigError, ConfigOutcome, Plugin, PluginSettings, Recovery, Settings, Staged, Verdict,
};
use rein_runtime::runtime::RegisterError;
use rein_runtime::runtime::{Route, Runtime};
use rein_runtime::session::SessionError;
use rein_runtime::store::memory::MemoryStore;
use rein_testkit::log;
use rein_testkit::log::{assert_valid, kinds, turn_ends};
use rein_testkit::plugins::{TestPlugin, Trace, first_retry};
use rein_testkit::scripted::{Scripted, fail_streamed, reply, stall};
use serde_json::{Value, json};

#[tokio::test(start_paused = true)]
async fn disposing_a_plugin_mid_wait_ends_the_turn_with_its_failure() {
    let store = MemoryStore::new();
    let t = Trace::default();
    let runtime = Runtime::builder()
        .validator(log::live_invariant)
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .route(Route::new("mock", Scripted::always(fail_streamed("SERVER", &[]))).model("m"))
        .plugin(TestPlugin::slow("waiting", &t, Duration::from_secs(3600), Verdict::Retry))
        .build()
        .await
        .unwrap();
    let session = runtime.session("s").await.unwrap();
    let turn = session.prompt("hi").unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    runtime.dispose_plugin("waiting").await.unwrap();
    match turn.outcome().await.unwrap().reason {
        TurnEndReason::Error { failure } => assert_eq!(failure.code(), "SERVER"),
        other => panic!("{other:?}"),
    }
    assert_eq!(runtime.plugins(), Vec::<String>::new());
    runtime.shutdown().await;
    assert_valid(&store.events("s"));
}

/// A plugin with one run-time setting, `enabled`, at a revision.
struct Switch {
    revision: AtomicU64,
    enabled: Mutex<bool>,
}

impl Plugin for Switch {
    fn name(&self) -> &str {
        "switch"
    }
    fn recover(self: Arc<Self>, _: Recovery) -> BoxFuture<'static, Verdict> {
        Box::pin(async { Verdict::Next })
    }
    fn settings(&self) -> Option<&dyn Settings> {
        Some(self)
    }
}

/// The switch's settings, written by hand (the runtime's own tests use no `rein-plugins`).
impl Settings for Switch {
    fn shown(&self) -> PluginSettings {
        let enabled = *self.enabled.lock().unwrap();
        let revision = self.revision.load(Ordering::SeqCst);
        PluginSettings { revision, settings: json!({"enabled": enabled}), read_only: false }
    }
    fn stage(&self, patch: &Value, base_revision: u64) -> Result<Staged, ConfigError> {
        let current = self.revision.load(Ordering::SeqCst);
        if base_revision != current {
            return Err(ConfigError::StaleRevision { based_on: base_revision, current });
        }
        let Some(enabled) = patch.get("enabled").and_then(Value::as_bool) else {
            return Err(ConfigError::Invalid {
                path: "enabled".into(),
                message: "must be a bool".into(),
            });
        };
        let changed = vec!["enabled".to_owned()];
        Ok(Staged::new(base_revision, changed, json!({"enabled": enabled}), enabled))
    }
    fn commit(&self, staged: Staged) -> Result<ConfigOutcome, ConfigError> {
        let base = staged.base_revision();
        let (enabled, changed) = staged.into_value::<bool>().map_err(|_| ConfigError::Foreign)?;
        let mut current = self.enabled.lock().unwrap();
        self.revision
            .compare_exchange(base, base + 1, Ordering::SeqCst, Ordering::SeqCst)
            .map_err(|current| ConfigError::StaleRevision { based_on: base, current })?;
        *current = enabled;
        Ok(ConfigOutcome { revision: base + 1, changed })
    }
    fn restore(&self, settings: &Value, revision: u64) -> Result<(), ConfigError> {
        let staged = self.stage(settings, self.revision.load(Ordering::SeqCst))?;
        let (enabled, _) = staged.into_value::<bool>().map_err(|_| ConfigError::Foreign)?;
        *self.enabled.lock().unwrap() = enabled;
        self.revision.store(revision, Ordering::SeqCst);
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn an_accepted_configuration_is_recorded_in_every_awake_session() {
    let store = MemoryStore::new();
    let switch = Arc::new(Switch { revision: AtomicU64::new(0), enabled: Mutex::new(true) });
    let runtime = Runtime::builder()
        .validator(log::live_invariant)
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .route(Route::new("mock", Scripted::new(vec![stall(&[])])).model("m"))
        .plugin(switch.clone())
        .idle_grace(Duration::ZERO)
        .build()
        .await
        .unwrap();
    let awake = runtime.session("awake").await.unwrap();
    let _asleep = runtime.session("asleep").await.unwrap();
    let _turn = awake.prompt("hi").unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;

    assert_eq!(runtime.plugin_revision("switch"), Some(0));
    let stale = runtime.configure_plugin("switch", json!({"enabled": false}), 7).await;
    assert_eq!(stale, Err(ConfigError::StaleRevision { based_on: 7, current: 0 }));
    let invalid = runtime.configure_plugin("switch", json!({"enabled": 1}), 0).await;
    assert!(matches!(invalid, Err(ConfigError::Invalid { .. })));
    let unknown = runtime.configure_plugin("nope", json!({}), 0).await;
    assert_eq!(unknown, Err(ConfigError::UnknownPlugin("nope".into())));

    let outcome = runtime.configure_plugin("switch", json!({"enabled": false}), 0).await.unwrap();
    assert_eq!(outcome.revision, 1);
    assert!(!*switch.enabled.lock().unwrap());
    assert_eq!(runtime.plugin_revision("switch"), Some(1));
    // Restored as a durable record holds them: no fence, no `config/changed`.
    runtime.restore_plugin_settings("switch", &json!({"enabled": false}), 4).unwrap();
    assert_eq!(runtime.plugin_settings("switch").unwrap().revision, 4);
    assert!(!runtime.session("asleep").await.unwrap().is_awake(), "not woken for it");

    runtime.shutdown().await;
    let changed: Vec<ConfigChanged> = store
        .events("awake")
        .into_iter()
        .filter_map(|e| match e.event {
            Event::ConfigChanged(c) => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(
        changed,
        [ConfigChanged { plugin: "switch".into(), revision: 1, changed: vec!["enabled".into()] }]
    );
    assert!(!kinds(&store.events("asleep")).contains(&"config/changed"));
    assert_valid(&store.events("awake"));
}

/// A runtime (live invariant check, paused clock) whose route fails the first 1,000 attempts
/// and answers the next 1,000.
fn thousand_fail_once(store: &MemoryStore) -> rein_runtime::runtime::RuntimeBuilder {
    let adapter = Scripted::new(
        std::iter::repeat_n(fail_streamed("SERVER", &[]), 1000)
            .chain(std::iter::repeat_n(reply(&["ok"]), 1000))
            .collect(),
    );
    Runtime::builder()
        .validator(log::live_invariant)
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .route(Route::new("mock", adapter).model("m"))
}

#[tokio::test(start_paused = true)]
async fn a_thousand_sessions_wait_in_one_plugin_and_all_retry() {
    let store = MemoryStore::new();
    let t = Trace::default();
    let parking = TestPlugin::parking("parking", &t, Duration::from_secs(5), Verdict::Retry);
    let runtime = thousand_fail_once(&store).plugin(parking.clone()).build().await.unwrap();
    let incarnation = runtime.chain().incarnation("parking");
    let mut turns = Vec::new();
    for i in 0..1000 {
        let session = runtime.session(&format!("s{i}")).await.unwrap();
        turns.push(session.prompt("hi").unwrap());
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(parking.parked(), 1000, "every session parked in the one plugin's wait");
    assert_eq!(runtime.chain().incarnation("parking"), incarnation);
    for turn in turns {
        assert_eq!(turn.outcome().await.unwrap().reason, TurnEndReason::Completed);
    }
    runtime.shutdown().await;
    assert_eq!((runtime.census().actors(), runtime.census().tasks()), (0, 0));
    for i in 0..1000 {
        let events = store.events(&format!("s{i}"));
        assert_valid(&events);
        assert_eq!(turn_ends(&events), [TurnEndReason::Completed]);
    }
}

#[tokio::test(start_paused = true)]
async fn a_thousand_sessions_recover_through_plugins_that_answer_at_once() {
    // Each plugin answers without waiting (the plugin actor answers it in its handler): the
    // first delegates, the second retries. Every first attempt fails once, then every retry
    // succeeds — whatever the order the sessions' attempts reach the adapter in.
    let store = MemoryStore::new();
    let t = Trace::default();
    let pass = TestPlugin::answering("pass", &t, Verdict::Next);
    let retry = TestPlugin::answering("retry", &t, Verdict::Retry);
    let runtime = thousand_fail_once(&store)
        .plugin(pass.clone())
        .plugin(retry.clone())
        .build()
        .await
        .unwrap();
    let incarnations = (runtime.chain().incarnation("pass"), runtime.chain().incarnation("retry"));
    let start = tokio::time::Instant::now();
    let mut turns = Vec::new();
    for i in 0..1000 {
        let session = runtime.session(&format!("s{i}")).await.unwrap();
        turns.push(session.prompt("hi").unwrap());
    }
    for turn in turns {
        assert_eq!(turn.outcome().await.unwrap().reason, TurnEndReason::Completed);
    }
    assert_eq!(start.elapsed(), Duration::ZERO, "nobody waited: no virtual time passed");
    assert_eq!((pass.calls(), retry.calls()), (1000, 1000), "each failure walked the chain once");
    let trace = t.take();
    assert_eq!(trace.iter().filter(|p| *p == "pass").count(), 1000);
    assert_eq!(
        (runtime.chain().incarnation("pass"), runtime.chain().incarnation("retry")),
        incarnations,
        "no plugin crashed"
    );
    runtime.shutdown().await;
    assert_eq!((runtime.census().actors(), runtime.census().tasks()), (0, 0));
    let mut failures = 0;
    for i in 0..1000 {
        let events = store.events(&format!("s{i}"));
        assert_valid(&events);
        assert_eq!(turn_ends(&events), [TurnEndReason::Completed]);
        failures += kinds(&events).iter().filter(|k| **k == "request/error").count();
    }
    assert_eq!(failures, 1000);
}

#[tokio::test(start_paused = true)]
async fn a_plugin_that_crashes_before_its_first_wait_is_restarted_and_counts_as_next() {
    // A recovery can crash in `recover` itself (before it has a future) or in its first poll —
    // both now in the plugin actor's handler. Either way: `plugin/crashed` with the restart
    // count, a fresh incarnation, and the failure goes on to the next plugin (which retries).
    type Crash = fn(Recovery, usize) -> BoxFuture<'static, Verdict>;
    let in_recover: Crash = |_, n| panic!("crash #{n} in recover");
    let in_first_poll: Crash =
        |_, n| Box::pin(async move { panic!("crash #{n} in the first poll") });
    for (case, crash, error) in [
        ("in recover", in_recover, "crash #1 in recover"),
        ("in the first poll", in_first_poll, "crash #1 in the first poll"),
    ] {
        let store = MemoryStore::new();
        let t = Trace::default();
        let crashing = TestPlugin::new("crashy", &t, crash);
        let fallback = TestPlugin::answering("fallback", &t, Verdict::Retry);
        let runtime = Runtime::builder()
            .validator(log::live_invariant)
            .store(Arc::new(store.clone()))
            .clock(Arc::new(VirtualClock::start()))
            .route(
                Route::new(
                    "mock",
                    Scripted::new(vec![fail_streamed("SERVER", &[]), reply(&["ok"])]),
                )
                .model("m"),
            )
            .plugin(crashing.clone())
            .plugin(fallback.clone())
            .build()
            .await
            .unwrap();
        let before = runtime.chain().incarnation("crashy").unwrap();
        let session = runtime.session("s").await.unwrap();
        let turn = session.prompt("hi").unwrap();
        assert_eq!(turn.outcome().await.unwrap().reason, TurnEndReason::Completed, "{case}");
        assert_eq!(t.take(), ["crashy", "fallback"], "{case}: the crash counted as Next");
        let after = runtime.chain().incarnation("crashy");
        assert!(after.is_some_and(|id| id != before), "{case}: restarted, still in the chain");
        runtime.shutdown().await;
        assert_eq!((runtime.census().actors(), runtime.census().tasks()), (0, 0), "{case}");
        let events = store.events("s");
        let crashes: Vec<PluginCrashed> = events
            .iter()
            .filter_map(|e| match &e.event {
                Event::PluginCrashed(c) => Some(c.clone()),
                _ => None,
            })
            .collect();
        let expected = PluginCrashed { plugin: "crashy".into(), error: error.into(), restarts: 1 };
        assert_eq!(crashes, [expected], "{case}");
        assert_valid(&events);
    }
}

#[tokio::test(start_paused = true)]
async fn an_invalid_session_id_is_refused_with_the_store_error() {
    let runtime = Runtime::builder().build().await.unwrap();
    match runtime.session("../etc").await {
        Err(SessionError::Open { session, source }) => {
            assert_eq!(session, "../etc");
            assert!(source.to_string().contains("invalid session id"), "{source}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(runtime.awake_sessions(), 0);
    runtime.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_plugin_registered_at_run_time_joins_the_end_of_the_chain() {
    // The chain starts with a plugin that waits a second and delegates. A plugin registered
    // while a walk is inside that wait is not offered that walk's failure (the walk keeps the
    // chain it started with); it is offered the next turn's. Disposed, it can be registered
    // again under its name, with fresh state; a second plugin of the same name is refused.
    let store = MemoryStore::new();
    let t = Trace::default();
    let runtime = Runtime::builder()
        .validator(log::live_invariant)
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .route(
            Route::new(
                "mock",
                Scripted::new(vec![
                    fail_streamed("SERVER", &[]),
                    fail_streamed("SERVER", &[]),
                    reply(&["ok"]),
                    fail_streamed("SERVER", &[]),
                    reply(&["again"]),
                ]),
            )
            .model("m"),
        )
        .plugin(TestPlugin::slow("waiting", &t, Duration::from_secs(1), Verdict::Next))
        .build()
        .await
        .unwrap();
    let session = runtime.session("s").await.unwrap();
    let first = session.prompt("one").unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let retry = TestPlugin::answering("retry", &t, Verdict::Retry);
    runtime.register_plugin(retry.clone()).await.unwrap();
    assert_eq!(runtime.plugins(), ["waiting", "retry"]);
    let reason = first.outcome().await.unwrap().reason;
    assert!(matches!(reason, TurnEndReason::Error { .. }), "{reason:?}");
    assert_eq!(retry.calls(), 0, "registered during the walk: not offered its failure");

    let second = session.prompt("two").unwrap();
    assert_eq!(second.outcome().await.unwrap().reason, TurnEndReason::Completed);
    assert_eq!(t.take(), ["waiting", "waiting", "retry"]);

    let twin = TestPlugin::answering("retry", &t, Verdict::Stop);
    assert_eq!(
        runtime.register_plugin(twin).await,
        Err(RegisterError::DuplicateName("retry".into()))
    );
    runtime.dispose_plugin("retry").await.unwrap();
    assert_eq!(runtime.plugins(), ["waiting"]);
    let fresh = TestPlugin::answering("retry", &t, Verdict::Retry);
    runtime.register_plugin(fresh.clone()).await.unwrap();
    assert_eq!(runtime.plugins(), ["waiting", "retry"]);
    let third = session.prompt("three").unwrap();
    assert_eq!(third.outcome().await.unwrap().reason, TurnEndReason::Completed);
    assert_eq!((retry.calls(), fresh.calls()), (1, 1), "the disposed one is not offered");

    runtime.shutdown().await;
    assert_eq!((runtime.census().actors(), runtime.census().tasks()), (0, 0));
    let late = TestPlugin::answering("late", &t, Verdict::Retry);
    assert_eq!(runtime.register_plugin(late).await, Err(RegisterError::Stopped));
    assert_valid(&store.events("s"));
}

#[tokio::test(start_paused = true)]
async fn a_plugin_registered_at_run_time_is_restarted_when_it_crashes() {
    let store = MemoryStore::new();
    let t = Trace::default();
    let runtime = Runtime::builder()
        .validator(log::live_invariant)
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .route(
            Route::new("mock", Scripted::new(vec![fail_streamed("SERVER", &[]), reply(&["ok"])]))
                .model("m"),
        )
        .build()
        .await
        .unwrap();
    let crashing = TestPlugin::new("crashy", &t, |_, n| {
        Box::pin(async move {
            if n == 1 {
                panic!("crash #{n}");
            }
            Verdict::Next
        })
    });
    runtime.register_plugin(crashing).await.unwrap();
    runtime.register_plugin(TestPlugin::answering("fallback", &t, Verdict::Retry)).await.unwrap();
    let before = runtime.chain().incarnation("crashy").unwrap();
    let session = runtime.session("s").await.unwrap();
    let turn = session.prompt("hi").unwrap();
    assert_eq!(turn.outcome().await.unwrap().reason, TurnEndReason::Completed);
    assert_eq!(t.take(), ["crashy", "fallback"], "the crash counted as Next");
    let after = runtime.chain().incarnation("crashy");
    assert!(after.is_some_and(|id| id != before), "restarted, still in the chain");
    runtime.shutdown().await;
    assert_eq!((runtime.census().actors(), runtime.census().tasks()), (0, 0));
    let events = store.events("s");
    assert!(events.iter().any(|e| matches!(&e.event,
        Event::PluginCrashed(c) if c.plugin == "crashy" && c.restarts == 1)));
    assert_valid(&events);
}

/// Writes `llm/retry` and `llm/retry-started` for the failure it is offered, then waits an hour
/// (which its disposal ends) and answers `Retry`: a retry that started before the disposal.
fn starter(trace: &Trace) -> Arc<TestPlugin> {
    TestPlugin::new("starter", trace, |recovery, _| {
        Box::pin(async move {
            let p = &recovery.payload;
            let [scheduled, started] = first_retry(p, "starter");
            p.log.append(vec![scheduled]).await.unwrap();
            p.log.append(vec![started]).await.unwrap();
            let _ = recovery.wait(Duration::from_secs(3600)).await;
            Verdict::Retry
        })
    })
}

#[tokio::test(start_paused = true)]
async fn a_retry_that_started_before_its_plugin_was_disposed_stands_and_nobody_retries_it_again() {
    // `upstream` consults the rest of the chain and stops unless it retries: if the disposed
    // `starter`'s answer failed closed, the turn would end with the failure its log says is being
    // retried (and a plugin that takes over stops would retry it a second time).
    let store = MemoryStore::new();
    let t = Trace::default();
    let provider = Scripted::new(vec![fail_streamed("SERVER", &[]), reply(&["back"])]);
    let runtime = Runtime::builder()
        .validator(log::live_invariant)
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .route(Route::new("mock", provider.clone()).model("m"))
        .plugin(TestPlugin::downstream_first("upstream", &t, Verdict::Stop))
        .plugin(starter(&t))
        .build()
        .await
        .unwrap();
    let session = runtime.session("s").await.unwrap();
    let turn = session.prompt("hi").unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    runtime.dispose_plugin("starter").await.unwrap();
    assert_eq!(turn.outcome().await.unwrap().reason, TurnEndReason::Completed);
    assert_eq!(provider.requests().len(), 2, "one retry");
    runtime.shutdown().await;
    let events = store.events("s");
    assert_valid(&events);
    let retries = events.iter().filter(|e| e.kind() == "llm/retry").count();
    assert_eq!(retries, 1);
}
