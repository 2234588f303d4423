//! The bench binary's global allocator: the system allocator, counted ([`stats_alloc`]), so the
//! heap metrics can read how many bytes are live.
//!
//! Counted is what Rust code asks for (`Layout::size`), not what the system allocator rounds it
//! up to, and not what C code (SQLite) takes from `malloc` itself. Thread stacks are not heap.
//!
//! # Why every metric runs under it
//!
//! A global allocator is chosen per binary, so the timing metrics run under the counting one too.
//! Each allocation and free costs two extra atomic adds; baselines and values pay it alike. In a
//! paired comparison (the same bench built without it, runs alternated) a ractor `call` round
//! trip was unchanged within noise and a turn through the runtime, which allocates more, was
//! about 5 % slower: the counting makes the turn-overhead ratio slightly pessimistic, not
//! optimistic.

use std::alloc::System;

use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Bytes allocated and not yet freed, by the whole process.
pub(crate) fn live_bytes() -> i64 {
    let stats = GLOBAL.stats();
    let allocated = i64::try_from(stats.bytes_allocated).unwrap_or(i64::MAX);
    let freed = i64::try_from(stats.bytes_deallocated).unwrap_or(i64::MAX);
    allocated - freed
}

/// How many allocations the whole process has made so far.
pub(crate) fn allocations() -> usize {
    GLOBAL.stats().allocations
}
