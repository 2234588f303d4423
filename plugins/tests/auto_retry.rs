//! `auto-retry` end to end, in the default chain (`llm-retry`, `compaction`, `auto-retry`): the
//! settings API of the runtime (read, check, patch under the revision fence, `config/changed`),
//! concurrent patches, the switch that ends waiting chains, and the own count across restarts of
//! the plugin's actor. Every test ends with the invariant check of its session logs (the
//! checker's rules include that `auto-retry` never retries a hard-floor code).

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use rein_plugins::auto_retry::{self, AutoRetry};
use rein_plugins::compaction::Compaction;
use rein_plugins::llm_retry::LlmRetry;
use rein_runtime::clock::VirtualClock;
use rein_runtime::event::{Envelope, Event, TurnEndReason};
use rein_runtime::plugin::{ConfigError, Plugin, PluginSettings};
use rein_runtime::random::Constant;
use rein_runtime::runtime::{Route, Runtime, RuntimeBuilder};
use rein_runtime::session::Session;
use rein_runtime::store::memory::MemoryStore;
use rein_testkit::log::{assert_invariants, kinds, retries, started, turn_ends_at};
use rein_testkit::scripted::{Scripted, fail, reply};
use serde_json::{Value, json};
use tokio::time::Instant;

/// The default chain with no jitter anywhere, a virtual clock, and sessions that stay awake for
/// an hour after their turns (so `config/changed` reaches them).
fn builder(store: &MemoryStore, auto_retry: AutoRetry) -> RuntimeBuilder {
    Runtime::builder()
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .jitter(Arc::new(Constant::new(0.5).unwrap()))
        .idle_grace(Duration::from_secs(3600))
        .plugin(LlmRetry::from_config(&json!({"jitterRatio": 0})).unwrap())
        .plugin(Compaction::default())
        .plugin(Arc::new(auto_retry))
}

fn flat() -> AutoRetry {
    AutoRetry::from_config(&json!({"jitterRatio": 0})).unwrap().plugin
}

async fn start(
    store: &MemoryStore,
    auto_retry: AutoRetry,
    adapter: &Arc<Scripted>,
) -> (Runtime, Session) {
    let runtime = builder(store, auto_retry).route(Route::new("mock", adapter.clone()).model("m"));
    let runtime = runtime.build().await.unwrap();
    let session = runtime.session("s").await.unwrap();
    (runtime, session)
}

/// Shuts the runtime down, checks nothing is left running, and returns session `id`'s log after
/// checking its invariants.
async fn finish(runtime: Runtime, store: &MemoryStore, ids: &[&str]) -> Vec<Vec<Envelope>> {
    runtime.shutdown().await;
    assert_eq!((runtime.census().actors(), runtime.census().tasks()), (0, 0));
    ids.iter()
        .map(|id| {
            let events = store.events(id);
            assert_invariants(&events);
            events
        })
        .collect()
}

fn config_changes(events: &[Envelope]) -> Vec<(u64, String, u64, Vec<String>)> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Event::ConfigChanged(c) => {
                Some((e.time, c.plugin.clone(), c.revision, c.changed.clone()))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn settings_are_read_checked_and_patched_under_a_revision_fence() {
    let store = MemoryStore::new();
    let adapter = Scripted::per_session(vec![reply(&["hi"])]);
    let (runtime, session) = start(&store, AutoRetry::default(), &adapter).await;
    session.prompt("hello").unwrap().await.unwrap();

    // Read: the values with the keys a patch uses, and the revision a patch names.
    let read = runtime.plugin_settings("auto-retry").unwrap();
    assert_eq!(
        read,
        PluginSettings {
            revision: 0,
            settings: json!({"enabled": true, "extraRetries": 3, "initialDelayMs": 1000,
                             "maxDelayMs": 60000, "jitterRatio": 0.2,
                             "retryableCodes": ["EMPTY_RESPONSE", "RATE_LIMIT", "SERVER",
                                                "TIMEOUT", "TRANSPORT", "PROVIDER_ERROR",
                                                "PI_AI_ERROR", "STREAM_CLOSED"]}),
            read_only: false,
        }
    );
    assert_eq!(
        serde_json::to_value(&read).unwrap()["readOnly"],
        json!(false),
        "serialized for a page in camelCase"
    );

    // Check: what a page calls to block a save and name the field. Nothing is applied.
    let check = |patch: Value, base: u64| runtime.check_plugin_settings("auto-retry", &patch, base);
    assert_eq!(
        check(json!({"extraRetries": 5, "enabled": true}), 0),
        Ok(vec!["extraRetries".into()])
    );
    assert_eq!(
        check(json!({"maxDelayMs": 600001}), 0),
        Err(ConfigError::Invalid {
            path: "maxDelayMs".into(),
            message: "must be an integer within 0..=600000, got 600001".into()
        })
    );
    assert_eq!(
        check(json!({"retryableCodes": []}), 0).unwrap_err().to_string(),
        "retryableCodes: must list at least one code"
    );
    assert_eq!(check(json!({}), 3), Err(ConfigError::StaleRevision { based_on: 3, current: 0 }));
    assert_eq!(runtime.plugin_settings("auto-retry").unwrap(), read, "checking applied nothing");

    // Patch: accepted under the fence, config/changed reaches the awake session.
    let outcome = runtime.configure_plugin("auto-retry", json!({"extraRetries": 5}), 0).await;
    assert_eq!(outcome.unwrap().revision, 1);
    let stale = runtime.configure_plugin("auto-retry", json!({"extraRetries": 6}), 0).await;
    assert_eq!(stale, Err(ConfigError::StaleRevision { based_on: 0, current: 1 }));
    let now = runtime.plugin_settings("auto-retry").unwrap();
    assert_eq!((now.revision, &now.settings["extraRetries"]), (1, &json!(5)));
    assert_eq!(runtime.plugin_revision("auto-retry"), Some(1));

    // compaction answers the same calls.
    let compaction = runtime.plugin_settings("compaction").unwrap();
    assert_eq!(compaction.settings, json!({"maxOverflowRetries": 1, "keepRecentMessages": 6}));
    let patched = runtime.configure_plugin("compaction", json!({"keepRecentMessages": 2}), 0).await;
    assert_eq!(patched.unwrap().changed, ["keepRecentMessages"]);

    // llm-retry's settings are readable and read-only: a patch is refused, not ignored.
    let official = runtime.plugin_settings("llm-retry").unwrap();
    assert_eq!(
        official,
        PluginSettings {
            revision: 0,
            settings: json!({"maxTransientRetries": 2, "initialDelayMs": 500, "maxDelayMs": 10000,
                             "jitterRatio": 0,
                             "retryableCodes": ["RATE_LIMIT", "SERVER", "TIMEOUT", "TRANSPORT"]}),
            read_only: true,
        }
    );
    let refused = runtime.configure_plugin("llm-retry", json!({"maxTransientRetries": 5}), 0).await;
    assert!(
        matches!(refused, Err(ConfigError::ReadOnly { ref plugin, .. }) if plugin == "llm-retry")
    );
    assert!(matches!(
        runtime.check_plugin_settings("llm-retry", &json!({}), 0),
        Err(ConfigError::ReadOnly { .. })
    ));
    assert_eq!(runtime.plugin_settings("nope"), Err(ConfigError::UnknownPlugin("nope".into())));

    let [events] = finish(runtime, &store, &["s"]).await.try_into().unwrap();
    let changes = config_changes(&events);
    let changes: Vec<(&str, u64, Vec<String>)> =
        changes.iter().map(|(_, p, r, c)| (p.as_str(), *r, c.clone())).collect();
    assert_eq!(
        changes,
        [
            ("auto-retry", 1, vec!["extraRetries".to_owned()]),
            ("compaction", 1, vec!["keepRecentMessages".to_owned()]),
        ],
        "one config/changed per accepted patch, none for a refused one"
    );
}

#[test]
fn of_two_concurrent_patches_from_one_revision_exactly_one_wins() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
    rt.unwrap().block_on(async {
        let store = MemoryStore::new();
        let runtime = builder(&store, AutoRetry::default()).build().await.unwrap();
        let session = runtime.session("s").await.unwrap();
        // Awake (its log open) for the whole run: a manual retry with nothing to retry wakes it.
        let _ = session.retry().await;
        const ROUNDS: u64 = 100;
        for round in 0..ROUNDS {
            let base = runtime.plugin_revision("auto-retry").unwrap();
            assert_eq!(base, round);
            let barrier = Arc::new(tokio::sync::Barrier::new(2));
            let writers: Vec<_> = [json!({"extraRetries": 1}), json!({"initialDelayMs": 7})]
                .into_iter()
                .map(|patch| {
                    let (runtime, barrier) = (runtime.clone(), Arc::clone(&barrier));
                    tokio::spawn(async move {
                        barrier.wait().await;
                        runtime.configure_plugin("auto-retry", patch, base).await
                    })
                })
                .collect();
            let mut results = Vec::new();
            for writer in writers {
                results.push(writer.await.unwrap());
            }
            let won = results.iter().filter(|r| r.is_ok()).count();
            assert_eq!(won, 1, "round {round}: {results:?}");
            for result in &results {
                if let Err(error) = result {
                    let stale = ConfigError::StaleRevision { based_on: base, current: base + 1 };
                    assert_eq!(error, &stale, "round {round}");
                }
            }
        }
        assert_eq!(runtime.plugin_revision("auto-retry"), Some(ROUNDS));
        let [events] = finish(runtime, &store, &["s"]).await.try_into().unwrap();
        let revisions: Vec<u64> = config_changes(&events).iter().map(|c| c.2).collect();
        assert_eq!(revisions, (1..=ROUNDS).collect::<Vec<_>>(), "one config/changed per winner");
    });
}

#[tokio::test(start_paused = true)]
async fn switching_off_ends_every_waiting_chain_at_once_and_switching_on_resumes() {
    let store = MemoryStore::new();
    // Each session plays its own copy of the script.
    let adapter = Scripted::per_session(vec![
        fail("PROVIDER_ERROR", "bad gateway 1"),
        fail("PROVIDER_ERROR", "bad gateway 2"),
        fail("PROVIDER_ERROR", "bad gateway 3"),
        reply(&["done"]),
    ]);
    let (runtime, one) = start(&store, flat(), &adapter).await;
    let two = runtime.session("t").await.unwrap();
    let first = one.prompt("hello").unwrap();
    let second = two.prompt("hello").unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let switched_at = Instant::now();
    runtime.configure_plugin("auto-retry", json!({"enabled": false}), 0).await.unwrap();
    for turn in [first, second] {
        let outcome = turn.await.unwrap();
        assert!(matches!(outcome.reason, TurnEndReason::Error { .. }), "{outcome:?}");
    }
    assert_eq!(switched_at.elapsed(), Duration::ZERO, "both waits ended at once");

    // Switched off: a new failure is not taken over. Switched on again: it is.
    let off = one.retry().await.unwrap().await.unwrap();
    assert!(matches!(off.reason, TurnEndReason::Error { .. }));
    runtime.configure_plugin("auto-retry", json!({"enabled": true}), 1).await.unwrap();
    let on = one.retry().await.unwrap().await.unwrap();
    assert_eq!(on.reason, TurnEndReason::Completed);

    let [s, t] = finish(runtime, &store, &["s", "t"]).await.try_into().unwrap();
    for events in [&s, &t] {
        assert_eq!(turn_ends_at(events)[0].0, 300, "turn 1 ended at the switch");
        let changes: Vec<u64> = config_changes(events).iter().map(|c| c.2).collect();
        assert_eq!(changes, [1, 2], "both sessions are awake: both hear of both patches");
    }
    // Session s: turn 1 waited and was cut short, turn 2 (switched off) wrote no retry, turn 3
    // retried and started.
    let turns: Vec<u32> = retries(&s).iter().map(|(_, r)| r.turn).collect();
    assert_eq!(turns, [1, 3]);
    let starts: Vec<u32> = started(&s).iter().map(|(_, r)| r.turn).collect();
    assert_eq!(starts, [3]);
    assert_eq!(retries(&t).len(), 1);
    assert!(started(&t).is_empty(), "no llm/retry-started after the switch");
}

#[tokio::test(start_paused = true)]
async fn the_own_count_comes_from_the_log_across_restarts_of_the_actor() {
    let store = MemoryStore::new();
    let adapter = Scripted::per_session(vec![
        fail("PROVIDER_ERROR", "one"),
        fail("PROVIDER_ERROR", "two"),
        fail("PROVIDER_ERROR", "three"),
        fail("PROVIDER_ERROR", "four"),
    ]);
    let (runtime, session) = start(&store, flat(), &adapter).await;
    let mut turn = session.prompt("hello").unwrap();
    let mut incarnations = vec![runtime.chain().incarnation(auto_retry::NAME).unwrap()];
    while let Some(event) = turn.next_event().await {
        if let Event::LlmRetry(_) = event.event {
            // Mid-wait: the recovery goes on (it belongs to the plugin's place in the chain),
            // and the next failure reaches the new incarnation. Restarts in the window: 1, 2, 3.
            let restarts = runtime.crash_plugin(auto_retry::NAME).await.unwrap();
            assert_eq!(restarts as usize, incarnations.len());
            incarnations.push(runtime.chain().incarnation(auto_retry::NAME).unwrap());
        }
    }
    let outcome = turn.outcome().await.unwrap();
    let TurnEndReason::Error { failure } = outcome.reason else { panic!("{outcome:?}") };
    assert_eq!(failure.message(), "four", "the budget of 3 is spent");
    incarnations.dedup();
    assert_eq!(incarnations.len(), 4, "three restarts, each a new actor");

    let [events] = finish(runtime, &store, &["s"]).await.try_into().unwrap();
    let retried = retries(&events);
    let chain: Vec<(&str, u64, f64)> =
        retried.iter().map(|(_, r)| (r.plugin.as_str(), r.retry, r.delay_ms)).collect();
    assert_eq!(
        chain,
        [("auto-retry", 1, 1000.0), ("auto-retry", 2, 2000.0), ("auto-retry", 3, 4000.0)]
    );
    let ids: Vec<String> = retries(&events).into_iter().map(|(_, r)| r.retry_id).collect();
    assert!(ids.iter().all(|id| *id == ids[0]), "one chain, one retryId");
    assert_eq!(started(&events).len(), 3);
    assert!(!kinds(&events).contains(&"plugin/crashed"), "no recovery crashed");
}

#[test]
fn the_plugin_reports_its_settings_and_stages_patches_without_a_runtime() {
    let plugin = AutoRetry::default();
    let settings = plugin.settings().unwrap();
    assert_eq!(settings.shown().revision, 0);
    let staged = settings.stage(&json!({"enabled": false}), 0).unwrap();
    assert_eq!(staged.changed(), ["enabled".to_owned()]);
    assert_eq!(settings.revision(), 0, "staging applies nothing");
    assert!(plugin.current().enabled());
    assert_eq!(settings.commit(staged).unwrap().revision, 1);
    assert!(!plugin.current().enabled());
}
