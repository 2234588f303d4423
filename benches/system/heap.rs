//! The bench binary's global allocator: the system allocator, counted ([`stats_alloc`]), so the
//! heap metrics can read how many bytes are live and the others how many allocations a turn
//! makes.
//!
//! Counted is what Rust code asks for (`Layout::size`), not what the system allocator rounds it
//! up to, and not what C code (SQLite) takes from `malloc` itself. Thread stacks are not heap.
//!
//! # Why every metric runs under it
//!
//! A global allocator is chosen per binary, so the timing metrics run under the counting one too.
//! Each allocation and free costs two extra atomic adds, which rein and its floors pay alike; a
//! side that allocates more pays slightly more, so a ratio is, if anything, a little pessimistic
//! for rein.

use std::alloc::System;

use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The counting allocator itself (to hand to code that reads it).
pub(crate) fn allocator() -> &'static StatsAlloc<System> {
    GLOBAL
}

/// How many allocations the whole process has made so far.
pub(crate) fn allocations() -> usize {
    GLOBAL.stats().allocations
}

/// How many deallocations the whole process has made so far.
pub(crate) fn frees() -> usize {
    GLOBAL.stats().deallocations
}
