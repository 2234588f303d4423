//! Plugin settings accepted at run time survive a restart: saved to the runtime's store before
//! they take effect, restored when a runtime starts on that store, revisions continuing — on a
//! JSONL directory and a SQLite database, and between two runtimes sharing one store. A save that
//! fails refuses the patch and changes nothing; a saved record this build cannot take is a
//! warning, never a failed start. Every test ends with the invariant check of its logs.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use rein_invariant::check_log;
use rein_plugins::auto_retry::AutoRetry;
use rein_plugins::compaction::Compaction;
use rein_plugins::llm_retry::LlmRetry;
use rein_runtime::event::Event;
use rein_runtime::plugin::ConfigError;
use rein_runtime::runtime::Runtime;
use rein_runtime::store::faulty::FaultyStore;
use rein_runtime::store::jsonl::JsonlStore;
use rein_runtime::store::memory::MemoryStore;
use rein_runtime::store::sqlite::SqliteStore;
use rein_runtime::store::{Durability, SessionStore};
use serde_json::json;

/// The default chain on `store`.
async fn start(store: Arc<dyn SessionStore>) -> Runtime {
    Runtime::builder()
        .store(store)
        .plugin(LlmRetry::from_config(&json!({})).unwrap())
        .plugin(Compaction::default())
        .plugin(AutoRetry::default())
        .build()
        .await
        .unwrap()
}

/// Every session log of `store` passes the invariant check.
async fn assert_logs_check(store: &dyn SessionStore) {
    for id in store.sessions().await.unwrap() {
        let events = store.load(&id).await.unwrap().unwrap().events;
        let violations = check_log(&events);
        assert!(violations.is_empty(), "{id}: {violations:?}");
    }
}

fn jsonl(dir: &Path) -> Arc<dyn SessionStore> {
    Arc::new(JsonlStore::open(dir, Durability::Disk).unwrap())
}

fn sqlite(dir: &Path) -> Arc<dyn SessionStore> {
    Arc::new(SqliteStore::open(dir.join("rein.db"), Durability::Disk).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepted_settings_survive_a_restart_at_their_revision_on_jsonl_and_sqlite() {
    type Open = fn(&Path) -> Arc<dyn SessionStore>;
    for (name, open) in [("jsonl", jsonl as Open), ("sqlite", sqlite as Open)] {
        let dir = tempfile::tempdir().unwrap();
        let runtime = start(open(dir.path())).await;
        runtime.session("s").await.unwrap();
        runtime.configure_plugin("auto-retry", json!({"extraRetries": 5}), 0).await.unwrap();
        runtime.configure_plugin("auto-retry", json!({"maxDelayMs": 9000}), 1).await.unwrap();
        runtime.configure_plugin("compaction", json!({"keepRecentMessages": 2}), 0).await.unwrap();
        assert_eq!(runtime.saved_revision_at_start("auto-retry"), None, "{name}");
        runtime.shutdown().await;
        drop(runtime);

        let store = open(dir.path());
        let again = start(store.clone()).await;
        let shown = again.plugin_settings("auto-retry").unwrap();
        assert_eq!(shown.revision, 2, "{name}: revisions continue");
        assert_eq!(
            (&shown.settings["extraRetries"], &shown.settings["maxDelayMs"]),
            (&json!(5), &json!(9000)),
            "{name}"
        );
        assert_eq!(again.plugin_settings("compaction").unwrap().settings["keepRecentMessages"], 2);
        assert_eq!(again.saved_revision_at_start("auto-retry"), Some(2), "{name}");
        assert_eq!(again.saved_revision_at_start("llm-retry"), None, "{name}: never patched");
        assert!(again.config_warnings().is_empty(), "{name}: {:?}", again.config_warnings());

        // A page opened before the restart names revision 1: refused after it.
        let stale = again.configure_plugin("auto-retry", json!({"extraRetries": 1}), 1).await;
        assert_eq!(stale, Err(ConfigError::StaleRevision { based_on: 1, current: 2 }), "{name}");
        let next = again.configure_plugin("auto-retry", json!({"extraRetries": 7}), 2).await;
        assert_eq!(next.unwrap().revision, 3, "{name}");
        again.session("s").await.unwrap();
        again.shutdown().await;
        assert_logs_check(store.as_ref()).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_whose_save_fails_is_refused_and_changes_nothing() {
    let store = Arc::new(FaultyStore::new(MemoryStore::new()));
    let runtime = start(store.clone()).await;
    let session = runtime.session("s").await.unwrap();
    let _ = session.retry().await; // awake: a config/changed would reach its log
    store.fail_settings(true);
    let refused = runtime.configure_plugin("auto-retry", json!({"extraRetries": 5}), 0).await;
    let Err(ConfigError::NotSaved { plugin, message }) = &refused else { panic!("{refused:?}") };
    assert_eq!(plugin, "auto-retry");
    assert!(message.contains("no space left on device"), "{message}");
    let shown = runtime.plugin_settings("auto-retry").unwrap();
    assert_eq!((shown.revision, &shown.settings["extraRetries"]), (0, &json!(3)), "unchanged");

    store.fail_settings(false);
    let accepted = runtime.configure_plugin("auto-retry", json!({"extraRetries": 5}), 0).await;
    assert_eq!(accepted.unwrap().revision, 1, "the same patch, once the store takes it");
    runtime.shutdown().await;
    let changes: Vec<u64> = store
        .inner()
        .events("s")
        .iter()
        .filter_map(|e| match &e.event {
            Event::ConfigChanged(c) => Some(c.revision),
            _ => None,
        })
        .collect();
    assert_eq!(changes, [1], "no config/changed for the refused patch");
    assert_logs_check(store.as_ref()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_runtimes_on_one_store_the_second_patch_from_one_revision_is_stale() {
    let store = MemoryStore::new();
    let first = start(Arc::new(store.clone())).await;
    let second = start(Arc::new(store.clone())).await;
    first.configure_plugin("auto-retry", json!({"extraRetries": 5}), 0).await.unwrap();
    // The second runtime still shows revision 0 in memory; the store says 1.
    let stale = second.configure_plugin("auto-retry", json!({"extraRetries": 6}), 0).await;
    assert_eq!(stale, Err(ConfigError::StaleRevision { based_on: 0, current: 1 }));
    assert_eq!(second.plugin_settings("auto-retry").unwrap().settings["extraRetries"], 3);
    first.shutdown().await;
    second.shutdown().await;
    let third = start(Arc::new(store.clone())).await;
    assert_eq!(third.plugin_settings("auto-retry").unwrap().settings["extraRetries"], 5);
    third.shutdown().await;
    assert_logs_check(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_record_that_cannot_be_taken_warns_and_the_fence_continues_from_it() {
    let dir = tempfile::tempdir().unwrap();
    // Damaged: not JSON. Refused: a value out of range (as a newer or hand-edited record might hold).
    std::fs::write(dir.path().join("compaction.settings.json"), "{\"plugin\":\"compaction\"")
        .unwrap();
    let refused = json!({"plugin": "auto-retry", "revision": 4,
                         "settings": {"extraRetries": -1}});
    std::fs::write(dir.path().join("auto-retry.settings.json"), refused.to_string()).unwrap();
    let store = jsonl(dir.path());
    let runtime = start(store.clone()).await;
    let warnings: Vec<String> = runtime.config_warnings().iter().map(ToString::to_string).collect();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0]
            .starts_with("plugin auto-retry: saved settings at revision 4 refused: extraRetries"),
        "{}",
        warnings[0]
    );
    assert!(
        warnings[1].starts_with("plugin compaction: saved settings unreadable (")
            && warnings[1].contains("compaction.settings.json")
            && warnings[1].ends_with("using the settings it was built with"),
        "{}",
        warnings[1]
    );
    let shown = runtime.plugin_settings("auto-retry").unwrap();
    assert_eq!((shown.revision, &shown.settings["extraRetries"]), (4, &json!(3)), "built values");
    assert_eq!(runtime.plugin_settings("compaction").unwrap().revision, 0);
    // The next patches continue the store's revisions and replace both records.
    runtime.configure_plugin("auto-retry", json!({"extraRetries": 2}), 4).await.unwrap();
    runtime.configure_plugin("compaction", json!({"keepRecentMessages": 3}), 0).await.unwrap();
    runtime.shutdown().await;
    drop(runtime);
    let again = start(jsonl(dir.path())).await;
    assert!(again.config_warnings().is_empty(), "{:?}", again.config_warnings());
    assert_eq!(again.plugin_settings("auto-retry").unwrap().revision, 5);
    assert_eq!(again.plugin_settings("compaction").unwrap().settings["keepRecentMessages"], 3);
    again.shutdown().await;
    assert_logs_check(store.as_ref()).await;
}
