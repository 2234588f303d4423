//! Metric `waterfall_hop_vs_ractor_call`: the cost of passing a failure through one plugin that
//! answers `Next`, against a ractor call to a different actor each time. Budget: at most 1.5.
//!
//! - **Value**: the time of a turn whose first attempt fails and is retried, through a chain of
//!   [`HOPS`] pass-through plugins ([`PassThrough`]: `Next` at once) in front of one that retries
//!   ([`RetryAll`]), minus the same turn through the retrying plugin alone, divided by [`HOPS`].
//!   Both runtimes are real, driven through the public API (one warm session each).
//! - **Baseline**: one ractor `call` round trip to a different one of [`HOPS`] echo actors each
//!   time (round robin: a walk's every hop is a different actor), measured in the same round.
//!
//! Samples interleave finely so that all three see the same load on a shared machine; each is
//! reported as its median over the samples.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rein::runtime::event::TurnEndReason;
use rein::runtime::runtime::Runtime;
use rein::runtime::session::Session;

use crate::Options;
use crate::doubles::{FailFirst, PassThrough, RetryAll};
use crate::report::{Budget, Metric};
use crate::round_trip::RoundTrip;
use crate::turn_overhead::{median, micros};

/// The metric's name.
pub(crate) const NAME: &str = "waterfall_hop_vs_ractor_call";

const BUDGET: Budget = Budget::AtMost(1.5);

/// Plugins in the long chain.
const HOPS: u32 = 8;

/// Recovered turns of each runtime per sample.
const TURNS_PER_SAMPLE: u32 = 10;

/// Ractor calls per sample.
const CALLS_PER_SAMPLE: u32 = 200;

/// Measures the metric.
pub(crate) fn run(options: &Options) -> anyhow::Result<Metric> {
    let samples = if options.quick { 200 } else { 1_500 };
    let turns = TURNS_PER_SAMPLE;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        let empty = agents(0).await?;
        let long = agents(HOPS).await?;
        let (short_session, long_session) =
            (empty.session("hop").await?, long.session("hop").await?);
        let mut ring = Vec::new();
        for _ in 0..HOPS {
            ring.push(RoundTrip::start().await?);
        }
        recovered_turns(&short_session, turns).await?;
        recovered_turns(&long_session, turns).await?;
        let (mut nones, mut alls, mut rings) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..samples {
            rings.push(RoundTrip::calls_across(&ring, CALLS_PER_SAMPLE).await?);
            nones.push(recovered_turns(&short_session, turns).await?);
            alls.push(recovered_turns(&long_session, turns).await?);
        }
        let (none, all, across) = (median(nones), median(alls), median(rings));
        let hop = all.saturating_sub(none) / HOPS;
        eprintln!(
            "{NAME}: medians of {samples} samples: a recovered turn through {HOPS} pass-through \
             plugins {:.2} µs, through none {:.2} µs, hop {:.2} µs, ractor call to a different \
             one of {HOPS} actors each time {:.2} µs",
            micros(all),
            micros(none),
            micros(hop),
            micros(across),
        );
        for trip in ring {
            trip.stop().await;
        }
        empty.shutdown().await;
        long.shutdown().await;
        Ok(Metric::new(NAME, micros(hop), micros(across), BUDGET))
    })
}

/// A runtime whose route fails each step's first attempt, with `hops` pass-through plugins in
/// front of one that retries.
async fn agents(hops: u32) -> anyhow::Result<Runtime> {
    let mut builder = Runtime::builder().route("fail-first", FailFirst::new()?, "m", None);
    for i in 0..hops {
        builder = builder.plugin(Arc::new(PassThrough(format!("pass-{i}"))));
    }
    Ok(builder.plugin(Arc::new(RetryAll)).build().await?)
}

/// The mean time of one turn whose first attempt fails and is retried, over `n` turns in a row.
async fn recovered_turns(session: &Session, n: u32) -> anyhow::Result<Duration> {
    let start = Instant::now();
    for _ in 0..n {
        let outcome = session.prompt("hi").await?.outcome().await?;
        if outcome.reason != TurnEndReason::Completed {
            anyhow::bail!("a recovered turn ended {:?}", outcome.reason);
        }
    }
    Ok(start.elapsed() / n)
}
