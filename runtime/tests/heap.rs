//! The heap budgets, as a regression test: a turn parked in a plugin's retry wait (session, log,
//! turn and step actors, the wait) holds at most 40 KiB and at most 1.5 × the same tree of bare
//! ractor actors with a sleeping task; an idle (hibernated) session at most 1 KiB.
//!
//! The bytes are counted by the global allocator this test binary installs (`stats_alloc`), so
//! this file holds a single test: nothing else allocates in the process while it measures.
//! `examples/heap.rs` prints the same figures (`cargo run --release -p rein-runtime --example
//! heap`); `docs/architecture.md` breaks them down.
//!
//! # Why one threshold for every build profile
//!
//! What is counted is the size of allocations: actor channels, task cells sized by their
//! futures, states, events. Future and type layouts are computed before optimization, so the
//! figures are the same in a debug and a release build (measured: 17,720 bytes per parked turn
//! and 48 per idle session in both), and the test asserts the budget itself in both.

#![allow(clippy::unwrap_used)]

use rein_testkit::heap;
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

/// Heap per turn parked in a retry wait.
const PARKED_TURN_BUDGET: f64 = 40.0 * 1024.0;
/// … and as a ratio to the bare actor tree of the same shape.
const PARKED_TURN_RATIO: f64 = 1.5;
/// Heap per idle session that has no running turn.
const IDLE_SESSION_BUDGET: f64 = 1024.0;
/// Sessions measured (enough that per-runtime tables growing once weigh < 1 % per session).
const SESSIONS: usize = 200;

#[test]
fn a_parked_turn_and_an_idle_session_stay_within_their_heap_budgets() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(2)
        .build()
        .unwrap();
    let bare = runtime.block_on(heap::bare_actor(GLOBAL, SESSIONS));
    let floor = runtime.block_on(heap::bare_tree(GLOBAL, SESSIONS));
    let figures = runtime.block_on(heap::measure(GLOBAL, SESSIONS));
    let (parked, idle) = (figures.parked_turn, figures.idle_session);

    // The measurement saw what it measures: a parked turn keeps at least its session's actor
    // awake, which costs at least a bare ractor actor.
    assert!(parked > bare, "parked turn {parked:.0} B, bare actor {bare:.0} B");
    assert!(idle > 0.0, "the Session handles themselves are counted");

    assert!(
        parked <= PARKED_TURN_BUDGET,
        "a parked turn holds {parked:.0} B of heap, over the {PARKED_TURN_BUDGET} B budget \
         (bare ractor actor: {bare:.0} B); see docs/architecture.md for what each part costs"
    );
    assert!(
        parked <= PARKED_TURN_RATIO * floor,
        "a parked turn holds {parked:.0} B of heap, over {PARKED_TURN_RATIO} × the {floor:.0} B \
         its bare actor tree and sleeping task hold"
    );
    assert!(
        idle <= IDLE_SESSION_BUDGET,
        "an idle session holds {idle:.0} B of heap, over the {IDLE_SESSION_BUDGET} B budget"
    );
}
