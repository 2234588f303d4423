//! Metrics `heap_per_parked_turn_kib`, `heap_per_parked_turn_vs_bare_tree` and
//! `heap_per_idle_session_kib`: the heap a turn parked in a retry wait holds (budgets: at most
//! 40 KiB, and at most 1.5 × its bare actor tree), and the heap a hibernated session holds
//! (budget: at most 1 KiB).
//!
//! The construction is the runtime's own heap test's (the test kit's `heap`, used here as it
//! is, so the bench and the test measure the same thing):
//!
//! - **Parked turn**: N sessions of a runtime over a JSONL store (the history is on the disk,
//!   not on the heap), each with one turn whose attempt failed and whose plugin waits an hour for
//!   its retry, racing the turn's token and its own disposal. Value: the growth of the live heap
//!   (counted by the bench's global allocator, see `heap`) from before the first session was
//!   opened until the last turn parked, over N, the caller's `Session` and `TurnHandle` included.
//!   The floor (`bare_tree`): per turn, a bare ractor session actor with a log actor and a turn
//!   actor linked under it and a step actor linked under the turn, each having handled one
//!   message, and one task sleeping for the wait while racing a cancellation token.
//! - **Hibernated session**: N sessions of a runtime built with no idle grace period, each having
//!   run one turn and hibernated (no actor left). Value: the growth of the live heap over N, the
//!   caller's `Session` handles included.
//!
//! The absolute budgets have their unit as baseline (1 KiB), so the ratio is the value in KiB.
//!
//! Like the test, it runs on a current-thread tokio runtime: what is counted are the sizes of
//! what is alive once everything that can run has run, and on one thread "everything has run"
//! is what yielding a few hundred times means, where on a multi-threaded runtime a worker may
//! still hold a task half-polled (or a timer not yet registered) when the heap is read.

use crate::Options;
use crate::heap::allocator;
use crate::report::{Budget, Metric};
use rein_testkit::heap::{bare_actor, bare_tree, measure};

/// The prefix of the metrics' names (what a filter matches).
pub(crate) const NAME: &str = "heap_per";

const PARKED_TURN_KIB: Budget = Budget::AtMost(40.0);
const PARKED_TURN_VS_FLOOR: Budget = Budget::AtMost(1.5);
const IDLE_SESSION_KIB: Budget = Budget::AtMost(1.0);

/// Measures the metrics.
pub(crate) fn run(options: &Options) -> anyhow::Result<Vec<Metric>> {
    let n: usize = if options.quick { 2_000 } else { 10_000 };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(2)
        .build()?;
    runtime.block_on(async move {
        let alloc = allocator();
        let actor = bare_actor(alloc, n).await;
        let floor = bare_tree(alloc, n).await;
        let figures = measure(alloc, n).await;
        let (parked, idle) = (figures.parked_turn, figures.idle_session);
        eprintln!(
            "{NAME}: over {n} each: a parked turn holds {parked:.0} B, its bare tree {floor:.0} B \
             (rein's own: {:.0} B); a bare actor linked under a parent, having handled a message, \
             {actor:.0} B; a hibernated session {idle:.0} B",
            parked - floor,
        );
        Ok(vec![
            Metric::new("heap_per_parked_turn_kib", parked / 1024.0, 1.0, PARKED_TURN_KIB),
            Metric::new("heap_per_parked_turn_vs_bare_tree", parked, floor, PARKED_TURN_VS_FLOOR),
            Metric::new("heap_per_idle_session_kib", idle / 1024.0, 1.0, IDLE_SESSION_KIB),
        ])
    })
}
