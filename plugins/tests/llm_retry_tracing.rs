//! What `llm-retry` reports through `tracing`. A test binary of its own: tracing caches each
//! callsite's interest process-wide, so a capturing subscriber installed on one test thread must
//! not race tests on other threads that have none.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use rein_plugins::llm_retry;
use rein_runtime::clock::VirtualClock;
use rein_runtime::event::TurnEndReason;
use rein_runtime::runtime::{Route, Runtime};
use rein_runtime::store::memory::MemoryStore;
use rein_testkit::log::assert_invariants;
use rein_testkit::scripted::{Scripted, fail};
use rein_testkit::spans;
use serde_json::json;

#[tokio::test(start_paused = true)]
async fn each_recovery_is_traced_with_its_error_type_and_delay() {
    // The plugin actor opens one `recovery` span per recovery, for every plugin.
    let (spans, _guard) = spans::Spans::capture("recovery");
    let store = MemoryStore::new();
    let adapter = Scripted::per_session(vec![fail("RATE_LIMIT", "busy"), fail("AUTH", "no")]);
    let runtime = Runtime::builder()
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .plugin(llm_retry::factory(&json!({"jitterRatio": 0})).unwrap())
        .route(Route::new("mock", adapter.clone()).model("m"))
        .build()
        .await
        .unwrap();
    let session = runtime.session("s").await.unwrap();
    let outcome = session.prompt("hello").unwrap().await.unwrap();
    assert!(
        matches!(&outcome.reason, TurnEndReason::Error { failure } if failure.code() == "AUTH")
    );
    runtime.shutdown().await;
    assert_invariants(&store.events("s"));

    let spans = spans.fields();
    let field = |i: usize, name: &str| spans[i].get(name).map(String::as_str);
    assert_eq!(spans.len(), 2, "{spans:?}");
    assert_eq!(
        (field(0, "error.type"), field(0, "retry.delay_ms"), field(0, "retry.number")),
        (Some("RATE_LIMIT"), Some("500"), Some("1"))
    );
    assert_eq!(
        (field(0, "session.id"), field(0, "gen_ai.provider.name"), field(0, "attempt")),
        (Some("s"), Some("mock"), Some("1"))
    );
    assert_eq!((field(0, "plugin"), field(1, "plugin")), (Some("llm-retry"), Some("llm-retry")));
    assert_eq!(
        (field(1, "error.type"), field(1, "retry.delay_ms"), field(1, "attempt")),
        (Some("AUTH"), None, Some("2")),
        "a delegated failure has no delay"
    );
}
