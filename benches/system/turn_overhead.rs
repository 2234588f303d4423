//! Metric `turn_overhead_vs_bare_tree`: a turn through rein against the same turn through its
//! bare actor tree. Budget: at most 2 ×.
//!
//! - **Value**: µs per turn of back-to-back turns (prompt, await the outcome, prompt again) on one
//!   warm session of a real [`Runtime`]: a [`MemoryStore`], a provider of no latency
//!   ([`Instant`]: one chunk, then success), `llm-retry` in the chain. The session stays awake
//!   between turns (the idle grace period), so no turn pays a wake-up.
//! - **Baseline** (the floor): µs per turn of the same turns through `bare_tree` — bare ractor
//!   session, log, turn, step and provider actors passing the same messages and appending the
//!   same events in the same batches to the same store.
//!
//! For the record it also prints the ratio to `plain_loop` (the same appends and adapter call
//! with no actor at all), allocations per turn of each, and — from a pass over a [`Stamped`]
//! store — how long each stretch of a turn takes in each, from one append to the next.
//!
//! One sample is [`TURNS_PER_SAMPLE`] turns of each of the three, one after the other; samples
//! interleave so that all three see the same load on a shared machine, and each is reported as
//! its median over the samples. Everything is driven from a task of the tokio runtime, as an
//! application drives rein. Before measuring, the bench checks that rein's log of a session is,
//! event for event, what the floor and the plain loop write — if rein's appends change, the floor
//! must change too, and the bench fails rather than compare different work.

use std::sync::Arc;
use std::time::{Duration, Instant as Clock};

use rein::plugins::llm_retry::LlmRetry;
use rein::runtime::event::{Envelope, Event, TurnEndReason};
use rein::runtime::runtime::{Route, Runtime};
use rein::runtime::session::Session;
use rein::runtime::store::SessionStore;
use rein::runtime::store::memory::MemoryStore;

use crate::Options;
use crate::bare_tree::{Answer, BareRuntime, BareSessionHandle};
use crate::doubles::Instant;
use crate::heap::allocations;
use crate::plain_loop::PlainSession;
use crate::report::{Budget, Metric};
use crate::sample::{median, micros};
use crate::stamped::{Stamp, Stamped};

/// The metric's name.
pub(crate) const NAME: &str = "turn_overhead_vs_bare_tree";

const BUDGET: Budget = Budget::AtMost(2.0);

/// Turns of each kind per sample.
const TURNS_PER_SAMPLE: u32 = 8;

/// The route's name and model, and the prompt.
const ROUTE: &str = "instant";
const MODEL: &str = "instant-1";
const PROMPT: &str = "hi";

/// Measures the metric.
pub(crate) fn run(options: &Options) -> anyhow::Result<Vec<Metric>> {
    let samples = if options.quick { 1_000 } else { 5_000 };
    crate::drive(measure(samples))
}

async fn measure(samples: u32) -> anyhow::Result<Vec<Metric>> {
    check_same_logs().await?;
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    let rein = ReinSide::start(Arc::clone(&store), "rein").await?;
    let floor = FloorSide::start(Arc::clone(&store), "floor").await?;
    let mut plain = plain(store, "plain").await?;
    for _ in 0..samples / 10 {
        rein.turns(TURNS_PER_SAMPLE).await?;
        floor.turns(TURNS_PER_SAMPLE).await?;
        plain_turns(&mut plain, TURNS_PER_SAMPLE).await?;
    }
    let (mut reins, mut floors, mut plains) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..samples {
        reins.push(rein.turns(TURNS_PER_SAMPLE).await?);
        floors.push(floor.turns(TURNS_PER_SAMPLE).await?);
        plains.push(plain_turns(&mut plain, TURNS_PER_SAMPLE).await?);
    }
    let (rein_turn, floor_turn, plain_turn) = (median(reins), median(floors), median(plains));

    // For the record: allocations per turn, and whether the session stayed awake.
    let counted = 1_000;
    let (mut asleep, before) = (0, allocations());
    for _ in 0..counted {
        asleep += u32::from(!rein.session.is_awake());
        rein.turns(1).await?;
    }
    let rein_allocs = (allocations() - before) as f64 / f64::from(counted);
    let before = allocations();
    floor.turns(counted).await?;
    let floor_allocs = (allocations() - before) as f64 / f64::from(counted);
    let before = allocations();
    plain_turns(&mut plain, counted).await?;
    let plain_allocs = (allocations() - before) as f64 / f64::from(counted);
    rein.runtime.shutdown().await;
    floor.stop().await?;

    eprintln!(
        "{NAME}: medians of {samples} samples of {TURNS_PER_SAMPLE} turns: rein {:.1} µs, bare \
         tree {:.1} µs, plain loop {:.1} µs per turn; rein / bare tree {:.2}, rein / plain loop \
         {:.2}, bare tree / plain loop {:.2}",
        micros(rein_turn),
        micros(floor_turn),
        micros(plain_turn),
        micros(rein_turn) / micros(floor_turn),
        micros(rein_turn) / micros(plain_turn),
        micros(floor_turn) / micros(plain_turn),
    );
    eprintln!(
        "{NAME}: allocations per turn: rein {rein_allocs:.0}, bare tree {floor_allocs:.0}, plain \
         loop {plain_allocs:.0}; {asleep} of {counted} rein turns found their session asleep"
    );
    breakdown(samples).await?;
    Ok(vec![Metric::new(NAME, micros(rein_turn), micros(floor_turn), BUDGET)])
}

/// A runtime with one warm session.
struct ReinSide {
    runtime: Runtime,
    session: Session,
}

impl ReinSide {
    async fn start(store: Arc<dyn SessionStore>, id: &str) -> anyhow::Result<Self> {
        let runtime = Runtime::builder()
            .store(store)
            .route(Route::new(ROUTE, Arc::new(Instant)).model(MODEL))
            .plugin(LlmRetry::default())
            .build()
            .await?;
        let session = runtime.session(id).await?;
        Ok(Self { runtime, session })
    }

    /// The mean time of `n` turns in a row.
    async fn turns(&self, n: u32) -> anyhow::Result<Duration> {
        let start = Clock::now();
        for _ in 0..n {
            let outcome = self.session.prompt(PROMPT)?.outcome().await?;
            completed(outcome.reason)?;
        }
        Ok(start.elapsed() / n)
    }
}

/// A bare tree with one session.
struct FloorSide {
    tree: BareRuntime,
    session: BareSessionHandle,
}

impl FloorSide {
    async fn start(store: Arc<dyn SessionStore>, id: &str) -> anyhow::Result<Self> {
        let tree = BareRuntime::start(store, ROUTE, MODEL, Answer::Instant).await?;
        let session = tree.session(id).await?;
        Ok(Self { tree, session })
    }

    /// The mean time of `n` turns in a row.
    async fn turns(&self, n: u32) -> anyhow::Result<Duration> {
        let start = Clock::now();
        for _ in 0..n {
            completed(self.session.turn(PROMPT).await?.reason)?;
        }
        Ok(start.elapsed() / n)
    }

    async fn stop(self) -> anyhow::Result<()> {
        self.session.shutdown();
        self.session.ended().await?;
        self.tree.stop().await;
        Ok(())
    }
}

async fn plain(store: Arc<dyn SessionStore>, id: &str) -> anyhow::Result<PlainSession> {
    PlainSession::open(store, Arc::new(Instant), id, (ROUTE, MODEL)).await
}

/// The mean time of `n` turns of the plain loop in a row.
async fn plain_turns(plain: &mut PlainSession, n: u32) -> anyhow::Result<Duration> {
    let start = Clock::now();
    for _ in 0..n {
        plain.turn(PROMPT).await?;
    }
    Ok(start.elapsed() / n)
}

fn completed(reason: TurnEndReason) -> anyhow::Result<()> {
    match reason {
        TurnEndReason::Completed => Ok(()),
        other => anyhow::bail!("a turn ended {other:?}"),
    }
}

/// Fails unless a session driven through rein writes exactly the events its bare tree and the
/// plain loop write (times aside).
async fn check_same_logs() -> anyhow::Result<()> {
    const TURNS: u32 = 8;
    const ID: &str = "shape";
    let through_rein = MemoryStore::new();
    let rein = ReinSide::start(Arc::new(through_rein.clone()), ID).await?;
    rein.turns(TURNS).await?;
    rein.runtime.shutdown().await;
    let through_floor = MemoryStore::new();
    let floor = FloorSide::start(Arc::new(through_floor.clone()), ID).await?;
    floor.turns(TURNS).await?;
    floor.stop().await?;
    let through_loop = MemoryStore::new();
    let mut plain = plain(Arc::new(through_loop.clone()), ID).await?;
    plain_turns(&mut plain, TURNS).await?;
    let rein = strip(through_rein.events(ID));
    for (name, other) in [("bare tree", through_floor), ("plain loop", through_loop)] {
        same_events(&rein, &strip(other.events(ID)), name)?;
    }
    Ok(())
}

/// A log without its times.
pub(crate) fn strip(events: Vec<Envelope>) -> Vec<(u64, Event)> {
    events.into_iter().map(|e| (e.seq, e.event)).collect()
}

/// Fails, naming `name`, unless `other` is `rein`, event for event.
pub(crate) fn same_events(
    rein: &[(u64, Event)],
    other: &[(u64, Event)],
    name: &str,
) -> anyhow::Result<()> {
    if rein != other {
        let kinds = |events: &[(u64, Event)]| -> Vec<&'static str> {
            events.iter().map(|(_, e)| e.kind()).collect()
        };
        anyhow::bail!(
            "the {name} no longer writes what rein writes:\nrein: {:?}\n{name}: {:?}",
            kinds(rein),
            kinds(other)
        );
    }
    Ok(())
}

/// The stretches of a turn, each ending when its batch (named by its first event) reaches the
/// store; the last ends when the caller has the outcome.
const STRETCHES: [(&str, &str); 6] = [
    ("prompt → user/message + turn/start", "user/message"),
    ("→ step/start + request/start", "step/start"),
    ("→ assistant/chunk", "assistant/chunk"),
    ("→ assistant/message", "assistant/message"),
    ("→ step/end + turn/end + agent/idle", "step/end"),
    ("→ the outcome at the caller", ""),
];

/// Prints, for rein, its bare tree and the plain loop, the median time of each stretch of a turn
/// over `turns` turns (interleaved, on a [`Stamped`] memory store).
async fn breakdown(turns: u32) -> anyhow::Result<()> {
    let store = Stamped::new(MemoryStore::new());
    let shared: Arc<dyn SessionStore> = store.clone();
    let rein = ReinSide::start(Arc::clone(&shared), "rein").await?;
    let floor = FloorSide::start(Arc::clone(&shared), "floor").await?;
    let mut plain = plain(shared, "plain").await?;
    let mut stretches: [Vec<Vec<Duration>>; 3] = Default::default();
    for side in &mut stretches {
        *side = vec![Vec::with_capacity(turns as usize); STRETCHES.len()];
    }
    store.take();
    for _ in 0..turns {
        let start = Clock::now();
        rein.turns(1).await?;
        split(&mut stretches[0], start, store.take())?;
        let start = Clock::now();
        floor.turns(1).await?;
        split(&mut stretches[1], start, store.take())?;
        let start = Clock::now();
        plain.turn(PROMPT).await?;
        split(&mut stretches[2], start, store.take())?;
    }
    rein.runtime.shutdown().await;
    floor.stop().await?;
    let [rein, floor, plain] =
        stretches.map(|side| side.into_iter().map(median).collect::<Vec<_>>());
    eprintln!(
        "{NAME}: where a turn's time goes (median µs of {turns} turns each, a stretch ends when its \
         batch reaches the store): rein | bare tree | plain loop"
    );
    for (i, (stretch, _)) in STRETCHES.iter().enumerate() {
        eprintln!(
            "{NAME}:   {stretch:<38} {:>7.2} | {:>7.2} | {:>7.2}",
            micros(rein[i]),
            micros(floor[i]),
            micros(plain[i])
        );
    }
    let sum = |side: &[Duration]| micros(side.iter().sum());
    eprintln!(
        "{NAME}:   {:<38} {:>7.2} | {:>7.2} | {:>7.2}",
        "sum of the medians",
        sum(&rein),
        sum(&floor),
        sum(&plain)
    );
    Ok(())
}

/// Splits one turn that started at `start` and ended just now at its `stamps`.
fn split(into: &mut [Vec<Duration>], start: Clock, stamps: Vec<Stamp>) -> anyhow::Result<()> {
    let end = Clock::now();
    let kinds: Vec<&str> = stamps.iter().map(|s| s.kind).collect();
    let expected: Vec<&str> =
        STRETCHES.iter().map(|(_, kind)| *kind).filter(|k| !k.is_empty()).collect();
    if kinds != expected {
        anyhow::bail!("a turn appended {kinds:?}, not {expected:?}");
    }
    let ends = stamps.iter().map(|s| s.at).chain([end]);
    let starts = [start].into_iter().chain(stamps.iter().map(|s| s.at));
    for (stretch, (from, to)) in into.iter_mut().zip(starts.zip(ends)) {
        stretch.push(to - from);
    }
    Ok(())
}
