//! Metrics `long_session_turn_2000_vs_20_memory` and `long_session_turn_2000_vs_20_jsonl`: what
//! turn 2,000 of a session costs against its turn 20, in a [`MemoryStore`] and in a
//! [`JsonlStore`] (`Os` durability). Budget: at most 1.5 × — no step re-reads or re-folds the
//! whole log, no request copies the whole history.
//!
//! [`TURNS`] back-to-back turns (prompt, await the outcome) of one session of a real
//! [`Runtime`] with a provider of no latency ([`Instant`]), each timed; the session stays awake
//! throughout (the idle grace period).
//!
//! - **Value**: the median time of turns 1,950–2,000.
//! - **Baseline**: the median time of turns 10–60 of the same session (its first turns pay lazy
//!   initialisations).
//!
//! A window of 50 turns lasts a millisecond or a few, short enough that one burst of another
//! process's work on a shared machine can cover it whole. So the bench runs several such
//! sessions one after the other ([`SESSIONS`], more without `--quick`) and takes each median
//! over the same window of all of them.
//!
//! For the record it prints the median allocations per turn of both windows (a count the
//! machine's load does not move; `runtime/tests/long_session.rs` asserts it).

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant as Clock};

use rein::runtime::event::TurnEndReason;
use rein::runtime::runtime::{Route, Runtime};
use rein::runtime::store::jsonl::JsonlStore;
use rein::runtime::store::memory::MemoryStore;
use rein::runtime::store::{Durability, SessionStore};

use crate::Options;
use crate::doubles::Instant;
use crate::heap::allocations;
use crate::report::{Budget, Metric};
use crate::sample::{median, micros};

/// The prefix of the metrics' names (what a filter matches).
pub(crate) const NAME: &str = "long_session";

const BUDGET: Budget = Budget::AtMost(1.5);

/// Turns of a session.
const TURNS: usize = 2_000;
/// Sessions measured, one after the other (with `--quick`; five times as many without).
const SESSIONS: usize = 7;
/// The turns (1-based, inclusive) whose median is the value and the baseline.
const LATE: Range<usize> = 1_950..2_001;
const EARLY: Range<usize> = 10..61;

/// Measures the metrics.
pub(crate) fn run(options: &Options) -> anyhow::Result<Vec<Metric>> {
    let sessions = if options.quick { SESSIONS } else { 5 * SESSIONS };
    let dir = crate::temp_dir()?;
    let jsonl = JsonlStore::open(dir.path(), Durability::Os)?;
    crate::drive(async move {
        let stores: [(&str, Arc<dyn SessionStore>); 2] =
            [("memory", Arc::new(MemoryStore::new())), ("jsonl", Arc::new(jsonl))];
        let mut metrics = Vec::new();
        for (name, store) in stores {
            let name = format!("{NAME}_turn_2000_vs_20_{name}");
            let mut all = Vec::with_capacity(sessions);
            for session in 0..sessions {
                all.push(turns(Arc::clone(&store), &format!("long-{session}")).await?);
            }
            let window = |range: &Range<usize>| -> Vec<(Duration, usize)> {
                let (from, to) = (range.start - 1, range.end - 1);
                all.iter().flat_map(|turns| turns[from..to].iter().copied()).collect()
            };
            let times = |range| median(window(range).iter().map(|t| t.0).collect());
            let allocs = |range| {
                let mut counts: Vec<usize> = window(range).iter().map(|t| t.1).collect();
                counts.sort_unstable();
                counts[counts.len() / 2]
            };
            let (late, early) = (times(&LATE), times(&EARLY));
            eprintln!(
                "{name}: medians over {sessions} sessions: turns {}–{}: {:.1} µs and {} \
                 allocations; turns {}–{}: {:.1} µs and {} allocations",
                LATE.start,
                LATE.end - 1,
                micros(late),
                allocs(&LATE),
                EARLY.start,
                EARLY.end - 1,
                micros(early),
                allocs(&EARLY),
            );
            metrics.push(Metric::new(&name, micros(late), micros(early), BUDGET));
        }
        Ok(metrics)
    })
}

/// The time and allocations of each of [`TURNS`] turns of session `id` over `store`.
async fn turns(store: Arc<dyn SessionStore>, id: &str) -> anyhow::Result<Vec<(Duration, usize)>> {
    let runtime = Runtime::builder()
        .store(store)
        .route(Route::new("instant", Arc::new(Instant)).model("i-1"))
        .build()
        .await?;
    let session = runtime.session(id).await?;
    let mut turns = Vec::with_capacity(TURNS);
    for _ in 0..TURNS {
        let (start, before) = (Clock::now(), allocations());
        let outcome = session.prompt("again")?.outcome().await?;
        turns.push((start.elapsed(), allocations() - before));
        if outcome.reason != TurnEndReason::Completed {
            anyhow::bail!("a turn ended {:?}", outcome.reason);
        }
    }
    runtime.shutdown().await;
    Ok(turns)
}
