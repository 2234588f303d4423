//! A long session costs, per turn, what its first turns did: no turn re-reads or re-folds the
//! whole log, and no request copies the whole history. Cost is counted as heap allocations per
//! turn (this test binary installs a counting global allocator, so it holds a single test): a
//! session whose turns grew with its log would allocate per turn in proportion to its history —
//! thousands of allocations by turn 2,000 — where a linear one allocates the same few dozen as
//! on its first turns. Counted, not timed: the figure does not depend on how busy the machine is.
//! Both for a caller that only awaits each turn's outcome and for one that reads a turn's events
//! after it started, which reads them back from the log (a `TurnHandle` catching up).

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use rein_runtime::BoxFuture;
use rein_runtime::event::TurnEndReason;
use rein_runtime::failure::Failure;
use rein_runtime::provider::{Adapter, ChunkSink, Completion, Request};
use rein_runtime::runtime::{Route, Runtime};
use rein_runtime::store::jsonl::JsonlStore;
use rein_runtime::store::memory::MemoryStore;
use rein_runtime::store::{Durability, SessionStore};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

/// Turns per session.
const TURNS: usize = 2_000;
/// Turns in each window compared.
const WINDOW: usize = 100;

/// Answers every attempt at once with one chunk.
struct Instant;

impl Adapter for Instant {
    fn call(
        &self,
        _: Request,
        chunks: ChunkSink,
    ) -> BoxFuture<'static, Result<Completion, Failure>> {
        let _ = chunks.send("ok".into());
        Box::pin(async { Ok(Completion::default()) })
    }
}

/// How a turn's caller follows it.
#[derive(Debug, Clone, Copy)]
enum Reader {
    /// Awaits its outcome only.
    Outcome,
    /// Reads its events with `next_event` after it ended: two prompts at a time, the second
    /// read as it runs, the first read afterwards — caught up from the log.
    Late,
}

/// Allocations made by each of `TURNS` back-to-back turns of one session over `store`, followed
/// as `reader` says (per pair of turns for [`Reader::Late`]).
async fn allocations_per_turn(store: Arc<dyn SessionStore>, reader: Reader) -> Vec<usize> {
    let runtime = Runtime::builder()
        .store(store)
        .route(Route::new("mock", Arc::new(Instant)).model("m"))
        .build()
        .await
        .unwrap();
    let session = runtime.session(&format!("long-{reader:?}")).await.unwrap();
    let mut counts = Vec::with_capacity(TURNS);
    for _ in 0..TURNS {
        let before = GLOBAL.stats().allocations + GLOBAL.stats().reallocations;
        match reader {
            Reader::Outcome => {
                let outcome = session.prompt("again").unwrap().await.unwrap();
                assert_eq!(outcome.reason, TurnEndReason::Completed);
            }
            Reader::Late => {
                let mut first = session.prompt("again").unwrap();
                let mut second = session.prompt("and again").unwrap();
                let mut live = 0;
                while second.next_event().await.is_some() {
                    live += 1;
                }
                let mut late = 0;
                while first.next_event().await.is_some() {
                    late += 1;
                }
                assert_eq!((live, late), (8, 8), "user/message … turn/end, each");
                assert_eq!(first.await.unwrap().reason, TurnEndReason::Completed);
                assert_eq!(second.await.unwrap().reason, TurnEndReason::Completed);
            }
        }
        let after = GLOBAL.stats().allocations + GLOBAL.stats().reallocations;
        counts.push(after - before);
    }
    let events = session.events().await.unwrap();
    runtime.shutdown().await;
    assert!(rein_invariant::check_finished_log(&events).is_empty(), "the log is valid");
    counts
}

fn median(window: &[usize]) -> usize {
    let mut sorted = window.to_vec();
    sorted.sort_unstable();
    sorted[sorted.len() / 2]
}

#[test]
fn the_last_turns_of_a_long_session_cost_what_its_first_turns_did() {
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let stores: [(&str, Arc<dyn SessionStore>); 2] = [
        ("memory", Arc::new(MemoryStore::new())),
        ("jsonl", Arc::new(JsonlStore::open(dir.path(), Durability::Os).unwrap())),
    ];
    for (name, store) in stores {
        for reader in [Reader::Outcome, Reader::Late] {
            let counts = tokio.block_on(allocations_per_turn(Arc::clone(&store), reader));
            // The first window starts after a few turns (lazy initialisations of the first
            // turns).
            let first = median(&counts[10..10 + WINDOW]);
            let last = median(&counts[TURNS - WINDOW..]);
            assert!(
                last * 4 <= first * 5,
                "{name}, {reader:?}: turns 10..110 made {first} allocations each, the last \
                 {WINDOW} turns {last}"
            );
        }
    }
}
