//! `llm-retry` across a crash (`docs/runtime-semantics.md`, "Resume after a crash"): a process
//! killed during the plugin's retry wait leaves its log as it was at that moment; a new process
//! on that log resumes the turn — the rest of the wait, then the next attempt — and the plugin,
//! which counts from the log's retry chains, continues the same chain: same `retryId`, the next
//! retry number, the next backoff.

// Helpers outside `#[test]` functions unwrap too: a failing set-up is a failing test.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use rein_plugins::llm_retry;
use rein_runtime::clock::{Clock, VirtualClock};
use rein_runtime::event::{Event, TurnEndReason};
use rein_runtime::runtime::{Route, Runtime};
use rein_runtime::store::SessionStore;
use rein_runtime::store::memory::MemoryStore;
use rein_testkit::log::{assert_invariants, kinds, requests, retries, started, turn_ends};
use rein_testkit::runtime::shut_down;
use rein_testkit::scripted::{Scripted, fail, reply};
use serde_json::json;

/// The virtual clock, `offset` ms later (the new process's clock went on).
struct Later(VirtualClock, u64);

impl Clock for Later {
    fn now_ms(&self) -> u64 {
        self.1 + self.0.now_ms()
    }
}

/// A runtime over `store` with `llm-retry` (20 s initial delay, no jitter), `adapter` on `mock`
/// and a clock reading `now` as it starts.
async fn runtime(store: &MemoryStore, adapter: Arc<Scripted>, now: u64) -> Runtime {
    let config = json!({"initialDelayMs": 20000, "maxDelayMs": 100000, "jitterRatio": 0});
    Runtime::builder()
        .validator(rein_testkit::log::live_invariant)
        .store(Arc::new(store.clone()))
        .clock(Arc::new(Later(VirtualClock::start(), now)))
        .route(Route::new("mock", adapter).model("m"))
        .plugin(llm_retry::factory(&config).unwrap())
        .build()
        .await
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_process_killed_in_the_retry_wait_resumes_the_same_chain() {
    // The first process: attempt 1 fails, llm-retry schedules retry 1 (20 s) and waits.
    let first = MemoryStore::new();
    let dying = runtime(&first, Scripted::new(vec![fail("SERVER", "down")]), 0).await;
    let session = dying.session("s").await.unwrap();
    let _turn = session.prompt("hello").unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    // kill -9: what the store holds now is all that is left.
    let left = first.events("s");
    assert_eq!(kinds(&left).last(), Some(&"llm/retry"), "{:?}", kinds(&left));
    let (scheduled_at, scheduled) = retries(&left)[0].clone();
    shut_down(&dying).await;

    // The second process starts 8 s after the retry was scheduled: 12 s of the wait are left.
    let store = MemoryStore::new();
    store.append("s", &left).await.unwrap();
    let adapter = Scripted::new(vec![fail("SERVER", "still down"), reply(&["fine"])]);
    let restarted = runtime(&store, adapter, scheduled_at + 8000).await;
    let session = restarted.session("s").await.unwrap();
    for _ in 0..1000 {
        if store.events("s").last().is_some_and(|e| e.kind() == "agent/idle") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    drop(session);
    shut_down(&restarted).await;
    let events = store.events("s");
    assert_invariants(&events);
    assert_eq!(events[..left.len()], left[..]);
    assert!(
        matches!(&events[left.len()].event, Event::TurnResumed(r) if r.pending == "retry-wait")
    );
    assert_eq!(turn_ends(&events), [TurnEndReason::Completed]);

    // The retry started at its deadline, no earlier and no later.
    let starts = started(&events);
    assert_eq!(starts[0].0, scheduled_at + 20_000);
    assert_eq!(
        (starts[0].1.retry_id.as_str(), starts[0].1.retry),
        (scheduled.retry_id.as_str(), 1)
    );
    // The plugin continued the chain from the log: retry 2 of the same id, the next backoff.
    let retried = retries(&events);
    assert_eq!(retried.len(), 2);
    assert_eq!(retried[1].1.retry_id, scheduled.retry_id, "the same retryId");
    assert_eq!(retried[1].1.retry, 2, "the count continues");
    assert_eq!(retried[1].1.delay_ms, 40_000.0, "the next backoff");
    let attempts: Vec<u32> = requests(&events).iter().map(|(_, r)| r.attempt).collect();
    assert_eq!(attempts, [1, 2, 3], "the attempt numbering continues");
}
