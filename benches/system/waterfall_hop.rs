//! Metric `waterfall_hop_vs_ractor_call`: the cost of passing a failure through one plugin that
//! answers `Next`, in ractor `call` round trips. Budget: at most 1.5.
//!
//! - **Value**: the time of one failure's walk through a chain of [`HOPS`] pass-through plugins
//!   ([`PassThrough`]: `Next` at once), minus the walk through an empty chain, divided by
//!   [`HOPS`]. Both walks are the runtime's own [`waterfall::run`] over a real [`PluginHost`] (one
//!   actor per plugin, each recovery polled by its actor, as in a running runtime), offered the
//!   same payload; the empty chain's walk is everything that is not a hop (building the walk, the
//!   end of the chain answering `Stop`).
//! - **Baseline**: one ractor `call` round trip ([`RoundTrip`]), measured in the same round.
//!
//! Walks run one at a time. One sample is [`CALLS_PER_SAMPLE`] ractor calls, then
//! [`WALKS_PER_SAMPLE`] walks of each chain; samples interleave finely so that all three see the
//! same load on a shared machine, and each is reported as its median over the samples.
//!
//! For the record (not the metric): the same number of calls spread round robin over [`HOPS`]
//! echo actors, the baseline's cost when, as in a walk, each message goes to a different actor.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rein::runtime::census::Census;
use rein::runtime::clock::WallClock;
use rein::runtime::failure::Failure;
use rein::runtime::plugin::{Plugin, RequestErrorPayload};
use rein::runtime::plugin_host::{PluginHost, RestartIntensity};
use rein::runtime::random::SeededJitter;
use rein::runtime::session_log::SessionLog;
use rein::runtime::store::memory::MemoryStore;
use rein::runtime::waterfall::{self, Outcome};
use tokio_util::sync::CancellationToken;

use crate::Options;
use crate::doubles::PassThrough;
use crate::heap::allocations;
use crate::report::{Budget, Metric};
use crate::round_trip::RoundTrip;
use crate::turn_overhead::{median, micros};

/// The metric's name.
pub(crate) const NAME: &str = "waterfall_hop_vs_ractor_call";

const BUDGET: Budget = Budget::AtMost(1.5);

/// Plugins in the long chain.
const HOPS: u32 = 8;

/// Walks of each chain per sample.
const WALKS_PER_SAMPLE: u32 = 20;

/// Ractor calls per sample.
const CALLS_PER_SAMPLE: u32 = 200;

/// Measures the metric.
pub(crate) fn run(options: &Options) -> anyhow::Result<Metric> {
    let samples = if options.quick { 400 } else { 3_000 };
    let walks = WALKS_PER_SAMPLE;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        let census = Census::new();
        let empty = host(0, &census).await?;
        let long = host(HOPS, &census).await?;
        let (log, _) =
            SessionLog::open(Arc::new(MemoryStore::new()), Arc::new(WallClock), "waterfall")
                .await?;
        let payload = RequestErrorPayload {
            session: Arc::from("waterfall"),
            turn: 1,
            step: 1,
            attempt: 1,
            provider: "mock".into(),
            failure: Failure::new("SERVER", "the provider is down")?,
            retry_policy: None,
            cancel: CancellationToken::new(),
            log: log.clone(),
        };
        let trip = RoundTrip::start().await?;
        let mut ring = Vec::new();
        for _ in 0..HOPS {
            ring.push(RoundTrip::start().await?);
        }
        walk(&empty, &payload, walks).await?;
        walk(&long, &payload, walks).await?;
        let (mut rtts, mut nones, mut alls, mut rings) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..samples {
            rtts.push(trip.calls(CALLS_PER_SAMPLE).await?);
            nones.push(walk(&empty, &payload, walks).await?);
            alls.push(walk(&long, &payload, walks).await?);
            rings.push(RoundTrip::calls_across(&ring, CALLS_PER_SAMPLE).await?);
        }
        let (rtt, none, all) = (median(rtts), median(nones), median(alls));
        let across = median(rings);
        let hop = all.saturating_sub(none) / HOPS;
        eprintln!(
            "{NAME}: medians of {samples} samples: walk of {HOPS} hops {:.2} µs, of 0 hops \
             {:.2} µs, hop {:.2} µs, ractor call {:.2} µs",
            micros(all),
            micros(none),
            micros(hop),
            micros(rtt),
        );
        // For the record: allocations per ractor call and per hop.
        let counted = 1_000;
        let before = allocations();
        trip.calls(counted).await?;
        let per_call = (allocations() - before) as f64 / f64::from(counted);
        let before = allocations();
        walk(&empty, &payload, counted).await?;
        let (middle, _) = (allocations(), walk(&long, &payload, counted).await?);
        let per_hop = ((allocations() - middle) as f64 - (middle - before) as f64)
            / f64::from(counted * HOPS);
        eprintln!("{NAME}: {per_call:.1} allocations per ractor call, {per_hop:.1} per hop");
        eprintln!(
            "{NAME}: for the record, a ractor call to a different one of {HOPS} actors each time \
             {:.2} µs (hop / that: {:.2})",
            micros(across),
            micros(hop) / micros(across),
        );
        trip.stop().await;
        for trip in ring {
            trip.stop().await;
        }
        empty.stop().await;
        long.stop().await;
        log.close().await;
        census.tasks_settled().await;
        if census.tasks() != 0 {
            anyhow::bail!("{} recovery tasks outlived the plugin hosts", census.tasks());
        }
        Ok(Metric::new(NAME, micros(hop), micros(rtt), BUDGET))
    })
}

/// A plugin host over `plugins` pass-through plugins.
async fn host(plugins: u32, census: &Census) -> anyhow::Result<PluginHost> {
    let chain: Vec<Arc<dyn Plugin>> = (0..plugins)
        .map(|i| Arc::new(PassThrough(format!("pass-{i}"))) as Arc<dyn Plugin>)
        .collect();
    let jitter = Arc::new(SeededJitter::new(7));
    Ok(PluginHost::spawn(chain, RestartIntensity::default(), jitter, census.clone(), None).await?)
}

/// The mean time of one walk of `host`'s chain over `n` walks in a row.
async fn walk(
    host: &PluginHost,
    payload: &RequestErrorPayload,
    n: u32,
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    for _ in 0..n {
        let outcome = waterfall::run(host.chain(), payload.clone()).await;
        if outcome != Outcome::Stop {
            anyhow::bail!("a chain of pass-through plugins answered {outcome:?}, not Stop");
        }
    }
    Ok(start.elapsed() / n)
}
