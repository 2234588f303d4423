//! What route health reports through `tracing`: each failed attempt's span carries the route's
//! breaker state after the failure (`route.health`). A test binary of its own: tracing caches
//! each callsite's interest process-wide, so a capturing subscriber installed on one test thread
//! must not race tests on other threads that have none.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use rein_runtime::clock::VirtualClock;
use rein_runtime::event::TurnEndReason;
use rein_runtime::route_health::HealthSettings;
use rein_runtime::runtime::{Route, Runtime};
use rein_runtime::session::Prompt;
use rein_runtime::store::memory::MemoryStore;
use rein_testkit::log::assert_invariants;
use rein_testkit::scripted::{Scripted, fail};
use rein_testkit::spans;

#[tokio::test(start_paused = true)]
async fn a_failed_attempt_s_span_carries_its_route_s_breaker_state() {
    let (spans, _guard) = spans::Spans::capture("attempt");
    let store = MemoryStore::new();
    let health = HealthSettings::new().with_min_attempts(1).and_then(|s| s.with_failure_ratio(1.0));
    let main = Scripted::new(vec![fail("SERVER", "down")]);
    let plain = Scripted::new(vec![fail("SERVER", "down")]);
    let runtime = Runtime::builder()
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .route(Route::new("main", main.clone()).model("m").health(health.unwrap()))
        .route(Route::new("plain", plain.clone()).model("m"))
        .build()
        .await
        .unwrap();
    let mut ended = Vec::new();
    for (id, route) in [("s1", "main"), ("s2", "main"), ("s3", "plain")] {
        let session = runtime.session(id).await.unwrap();
        let outcome = session.prompt(Prompt::new("hello").on(route)).unwrap().await.unwrap();
        match outcome.reason {
            TurnEndReason::Error { failure } => ended.push(failure.code().to_owned()),
            other => panic!("{other:?}"),
        }
    }
    runtime.shutdown().await;
    for id in ["s1", "s2", "s3"] {
        assert_invariants(&store.events(id));
    }
    assert_eq!(ended, ["SERVER", "CIRCUIT_OPEN", "SERVER"]);
    let spans = spans.fields();
    let field = |i: usize, name: &str| spans[i].get(name).map(String::as_str);
    assert_eq!(spans.len(), 3, "{spans:?}");
    assert_eq!(
        (field(0, "error.type"), field(0, "route.health")),
        (Some("SERVER"), Some("open")),
        "the failure opened it (minAttempts 1)"
    );
    assert_eq!(
        (field(1, "error.type"), field(1, "route.health")),
        (Some("CIRCUIT_OPEN"), Some("open"))
    );
    assert_eq!(
        (field(2, "error.type"), field(2, "route.health")),
        (Some("SERVER"), None),
        "a route without health has no state"
    );
}
