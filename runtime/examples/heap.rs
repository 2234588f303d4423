//! Prints the heap the runtime holds per turn parked in a plugin's wait and per idle
//! (hibernated) session, counted by a global allocator (`stats_alloc`).
//!
//! `cargo run --release -p rein-runtime --example heap [N]` (N sessions, default 2000).

use rein_testkit::heap;
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

fn main() {
    let n = std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(2_000);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(2)
        .build()
        .expect("a tokio runtime");
    let bare = runtime.block_on(heap::bare_actor(GLOBAL, n));
    let figures = runtime.block_on(heap::measure(GLOBAL, n));
    println!(
        "{{\"sessions\": {n}, \"parkedTurnBytes\": {:.0}, \"idleSessionBytes\": {:.0}, \"bareActorBytes\": {bare:.0}}}",
        figures.parked_turn, figures.idle_session
    );
}
