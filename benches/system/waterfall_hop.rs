//! Metric `waterfall_hop_vs_ractor_call`: the cost of passing a failure through one plugin that
//! answers `Next`, against a ractor call to a different actor each time. Budget: at most 1.5 ×.
//!
//! Measured through the public API only, as the difference of two runtimes that differ in
//! nothing but [`HOPS`] hops:
//!
//! - **Value**: turns on runtime A, whose chain is [`HOPS`] pass-through plugins
//!   ([`PassThrough`]: `Next` at once) followed by [`RetryNow`] (`Retry` at once), minus the same
//!   turns on runtime B, whose chain is [`RetryNow`] alone, divided by [`HOPS`]. In both, the
//!   provider ([`FailsFirst`]) fails every step's first attempt and answers the second: a turn
//!   writes `request/error`, walks the chain, and retries — the same log in A and B. Each runtime
//!   has one warm session; turns run one at a time.
//! - **Baseline**: a ractor `call` to a different one of [`HOPS`] echo actors each time (round
//!   robin, [`RoundTrip::calls_across`]): the shape of a walk, whose every hop is a message to
//!   another actor and its reply.
//!
//! One sample is [`CALLS_PER_SAMPLE`] calls, then [`TURNS_PER_SAMPLE`] turns on A and on B;
//! samples interleave so that all three see the same load, and each is reported as its median
//! over the samples. Everything is driven from a task of the tokio runtime.
//!
//! For the record, both runtimes append through a [`Stamped`] store, so the bench also prints
//! the hop as read from inside the turn — the time from `request/error` reaching the store to
//! the retry's `request/start` reaching it (the walk, the verdict, the next request), A minus B,
//! over [`HOPS`] — along with allocations per hop and a call to one and the same actor.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rein::runtime::event::TurnEndReason;
use rein::runtime::plugin::Plugin;
use rein::runtime::runtime::{Route, Runtime};
use rein::runtime::session::Session;
use rein::runtime::store::memory::MemoryStore;

use crate::Options;
use crate::doubles::{FailsFirst, PassThrough, RetryNow};
use crate::heap::allocations;
use crate::report::{Budget, Metric};
use crate::round_trip::RoundTrip;
use crate::sample::{median, micros};
use crate::stamped::{Stamp, Stamped};

/// The metric's name.
pub(crate) const NAME: &str = "waterfall_hop_vs_ractor_call";

const BUDGET: Budget = Budget::AtMost(1.5);

/// Pass-through plugins in runtime A's chain.
const HOPS: u32 = 8;

/// Turns on each runtime per sample.
const TURNS_PER_SAMPLE: u32 = 4;

/// Ractor calls per sample.
const CALLS_PER_SAMPLE: u32 = 64;

/// Measures the metric.
pub(crate) fn run(options: &Options) -> anyhow::Result<Vec<Metric>> {
    let samples = if options.quick { 1_500 } else { 8_000 };
    crate::drive(measure(samples))
}

async fn measure(samples: u32) -> anyhow::Result<Vec<Metric>> {
    let long = Side::start(HOPS).await?;
    let short = Side::start(0).await?;
    let mut ring = Vec::new();
    for _ in 0..HOPS {
        ring.push(RoundTrip::start().await?);
    }
    for _ in 0..samples / 10 {
        long.turns(TURNS_PER_SAMPLE).await?;
        short.turns(TURNS_PER_SAMPLE).await?;
        RoundTrip::calls_across(&ring, CALLS_PER_SAMPLE).await?;
    }
    long.store.take();
    short.store.take();
    let (mut calls, mut longs, mut shorts) = (Vec::new(), Vec::new(), Vec::new());
    let (mut long_walks, mut short_walks) = (Vec::new(), Vec::new());
    for _ in 0..samples {
        calls.push(RoundTrip::calls_across(&ring, CALLS_PER_SAMPLE).await?);
        longs.push(long.turns(TURNS_PER_SAMPLE).await?);
        long_walks.extend(walks(&long.store.take())?);
        shorts.push(short.turns(TURNS_PER_SAMPLE).await?);
        short_walks.extend(walks(&short.store.take())?);
    }
    let (call, long_turn, short_turn) = (median(calls), median(longs), median(shorts));
    let hop = long_turn.saturating_sub(short_turn) / HOPS;
    let (long_walk, short_walk) = (median(long_walks), median(short_walks));
    let walk_hop = long_walk.saturating_sub(short_walk) / HOPS;

    // For the record: allocations per hop and per call, and a call to one and the same actor.
    let counted = 500;
    let before = allocations();
    long.turns(counted).await?;
    let middle = allocations();
    short.turns(counted).await?;
    let per_hop =
        ((middle - before) as f64 - (allocations() - middle) as f64) / f64::from(counted * HOPS);
    let Some(first) = ring.first() else { anyhow::bail!("no echo actor") };
    let before = allocations();
    first.calls(1_000).await?;
    let per_call = (allocations() - before) as f64 / 1_000.0;
    let mut same = Vec::new();
    for _ in 0..samples / 4 {
        same.push(first.calls(CALLS_PER_SAMPLE).await?);
    }
    let same = median(same);
    long.runtime.shutdown().await;
    short.runtime.shutdown().await;
    for trip in ring {
        trip.stop().await;
    }

    eprintln!(
        "{NAME}: medians of {samples} samples: a turn through {HOPS} pass-through plugins and \
         the retry {:.2} µs, through the retry alone {:.2} µs: hop {:.2} µs; ractor call to a \
         different one of {HOPS} actors each time {:.2} µs",
        micros(long_turn),
        micros(short_turn),
        micros(hop),
        micros(call),
    );
    eprintln!(
        "{NAME}: read inside the turn (request/error → the retry's request/start, median of {} \
         turns each): {:.2} µs with {HOPS} hops, {:.2} µs without: hop {:.2} µs ({:.2} calls)",
        samples * TURNS_PER_SAMPLE,
        micros(long_walk),
        micros(short_walk),
        micros(walk_hop),
        micros(walk_hop) / micros(call),
    );
    eprintln!(
        "{NAME}: {per_hop:.1} allocations per hop, {per_call:.1} per call; a call to one and the \
         same actor {:.2} µs (a hop is {:.2} of those)",
        micros(same),
        micros(hop) / micros(same),
    );
    Ok(vec![Metric::new(NAME, micros(hop), micros(call), BUDGET)])
}

/// A runtime whose chain is `hops` pass-through plugins and [`RetryNow`], with one warm session.
struct Side {
    runtime: Runtime,
    session: Session,
    store: Arc<Stamped<MemoryStore>>,
}

impl Side {
    async fn start(hops: u32) -> anyhow::Result<Self> {
        let store = Stamped::new(MemoryStore::new());
        let mut builder = Runtime::builder()
            .store(store.clone())
            .route(Route::new("flaky", FailsFirst::new()?).model("flaky-1"));
        for i in 0..hops {
            builder = builder.plugin(Arc::new(PassThrough(format!("pass-{i}"))) as Arc<dyn Plugin>);
        }
        let runtime = builder.plugin(Arc::new(RetryNow)).build().await?;
        let session = runtime.session("hops").await?;
        Ok(Self { runtime, session, store })
    }

    /// The mean time of `n` turns in a row.
    async fn turns(&self, n: u32) -> anyhow::Result<Duration> {
        let start = Instant::now();
        for _ in 0..n {
            let outcome = self.session.prompt("hi")?.outcome().await?;
            if outcome.reason != TurnEndReason::Completed {
                anyhow::bail!("a turn that retried ended {:?}", outcome.reason);
            }
        }
        Ok(start.elapsed() / n)
    }
}

/// For each turn in `stamps`, the time from its `request/error` reaching the store to the
/// retry's `request/start` reaching it.
fn walks(stamps: &[Stamp]) -> anyhow::Result<Vec<Duration>> {
    let mut walks = Vec::new();
    for (error, retry) in stamps.iter().zip(stamps.iter().skip(1)) {
        if error.kind == "request/error" {
            if retry.kind != "request/start" {
                anyhow::bail!("request/error was followed by {}, not request/start", retry.kind);
            }
            walks.push(retry.at - error.at);
        }
    }
    Ok(walks)
}
