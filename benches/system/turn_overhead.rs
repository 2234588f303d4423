//! Metric `turn_overhead_vs_ractor_call`: what the runtime adds to a turn, in ractor `call`
//! round trips. Budget: at most 4.
//!
//! - **Value**: the time per turn through the real [`Runtime`] — `Session::prompt`, then the
//!   turn's outcome awaited — with a provider of no latency ([`Instant`]: one chunk, then
//!   success) and a [`MemoryStore`], *minus* the time per turn of a plain async loop that makes
//!   the same appends (the same events in the same batches, stamped with `seq` and `time`) to a
//!   [`MemoryStore`] of its own. What is left is the runtime's own cost: its actors, messages,
//!   projections, and waking the session from hibernation (a session hibernates between turns).
//! - **Baseline**: one ractor `call` round trip ([`RoundTrip`]), measured in the same round.
//!
//! Turns run one at a time (prompt, await the outcome, prompt again): the overhead is a latency.
//! One sample is [`CALLS_PER_SAMPLE`] ractor calls, then [`TURNS_PER_SESSION`] turns of a fresh
//! session (opened before its clock starts; a long session would add the cost of reloading its
//! growing log), then the same turns through the plain loop. Samples interleave finely so that
//! all three see the same load on a shared machine; each is reported as its median over the
//! samples. Before measuring, the bench checks that the runtime's log of a session is, event for
//! event, what the plain loop writes — if the runtime's appends change, the baseline must change
//! too, and the bench fails rather than compare different work.

use std::sync::Arc;
use std::time::{Duration, Instant as Clock};

use anyhow::Context as _;
use rein::runtime::clock::{Clock as _, WallClock};
use rein::runtime::event::{
    AgentIdle, AssistantChunk, AssistantMessage, Envelope, Event, StepRef, TurnEnd, TurnEndReason,
    TurnStart, UserMessage,
};
use rein::runtime::event::{LOG_FORMAT, RequestStart, SessionStart};
use rein::runtime::runtime::Runtime;
use rein::runtime::store::SessionStore;
use rein::runtime::store::memory::MemoryStore;

use crate::Options;
use crate::doubles::{CHUNK, Instant};
use crate::heap::allocations;
use crate::report::{Budget, Metric};
use crate::round_trip::RoundTrip;

/// The metric's name.
pub(crate) const NAME: &str = "turn_overhead_vs_ractor_call";

const BUDGET: Budget = Budget::AtMost(4.0);

/// Turns per session (one sample).
const TURNS_PER_SESSION: u32 = 8;

/// Ractor calls per sample.
const CALLS_PER_SAMPLE: u32 = 200;

/// The route's name and model.
const ROUTE: &str = "instant";
const MODEL: &str = "instant-1";

/// Measures the metric.
pub(crate) fn run(options: &Options) -> anyhow::Result<Metric> {
    let samples = if options.quick { 400 } else { 3_000 };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        let store = MemoryStore::new();
        let agents = Runtime::builder()
            .store(Arc::new(store.clone()))
            .route(ROUTE, Arc::new(Instant), MODEL, None)
            .build()
            .await?;
        let trip = RoundTrip::start().await?;
        check_same_appends(&agents, &store).await?;
        for warm in 0..samples / 10 {
            runtime_turns(&agents, &format!("warm-{warm}")).await?;
            plain_turns(&format!("warm-{warm}")).await?;
        }
        let (mut rtts, mut actor_turns, mut plain) = (Vec::new(), Vec::new(), Vec::new());
        for sample in 0..samples {
            rtts.push(trip.calls(CALLS_PER_SAMPLE).await?);
            actor_turns.push(runtime_turns(&agents, &format!("s-{sample}")).await?);
            plain.push(plain_turns(&format!("s-{sample}")).await?);
        }
        // For the record: allocations per turn and per ractor call, and how often a turn had to
        // wake its session.
        let (counted, mut woke) = (100, 0);
        let before = allocations();
        for session in 0..counted {
            woke += runtime_turns_waking(&agents, &format!("count-{session}")).await?.1;
        }
        let per_turn = (allocations() - before) as f64 / f64::from(counted * TURNS_PER_SESSION);
        let before = allocations();
        trip.calls(1_000).await?;
        let per_call = (allocations() - before) as f64 / 1_000.0;
        let mut queued = Vec::new();
        for session in 0..samples / 4 {
            queued.push(queued_turns(&agents, &format!("queued-{session}")).await?);
        }
        eprintln!(
            "{NAME}: with the session kept awake ({TURNS_PER_SESSION} prompts queued at once) a \
             turn takes {:.1} µs (median)",
            micros(median(queued))
        );
        eprintln!(
            "{NAME}: {per_turn:.0} allocations per turn (session opening included), {per_call:.1} \
             per ractor call; {woke} of {} turns woke a hibernating session",
            counted * TURNS_PER_SESSION
        );
        let wake = RoundTrip::spawn_call_stop(2_000).await?;
        eprintln!(
            "{NAME}: for the record, the floor of a wake-up: a bare ractor actor spawned, called \
             once and stopped takes {:.1} µs ({:.1} ractor calls; a session that hibernated pays \
             at least that on top of its turn)",
            micros(wake),
            micros(wake) / micros(median(vec![trip.calls(1_000).await?])),
        );
        trip.stop().await;
        agents.shutdown().await;
        let (rtt, actor_turn, plain_turn) = (median(rtts), median(actor_turns), median(plain));
        let overhead = actor_turn.saturating_sub(plain_turn);
        eprintln!(
            "{NAME}: medians of {samples} samples: runtime turn {:.1} µs, plain loop {:.1} µs, \
             overhead {:.1} µs, ractor call {:.2} µs",
            micros(actor_turn),
            micros(plain_turn),
            micros(overhead),
            micros(rtt),
        );
        Ok(Metric::new(NAME, micros(overhead), micros(rtt), BUDGET))
    })
}

/// A duration in µs.
pub(crate) fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The median of some durations.
pub(crate) fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

/// Opens the session `id`, then times its turns, one at a time (mean per turn).
async fn runtime_turns(agents: &Runtime, id: &str) -> anyhow::Result<Duration> {
    runtime_turns_waking(agents, id).await.map(|(time, _)| time)
}

/// [`runtime_turns`], and how many of the turns found their session hibernating.
async fn runtime_turns_waking(agents: &Runtime, id: &str) -> anyhow::Result<(Duration, u32)> {
    let session = agents.session(id).await?;
    let mut woke = 0;
    let start = Clock::now();
    for _ in 0..TURNS_PER_SESSION {
        woke += u32::from(!session.is_awake());
        let outcome = session.prompt("hi").await?.outcome().await?;
        if outcome.reason != TurnEndReason::Completed {
            anyhow::bail!("{id}: a turn ended {:?}", outcome.reason);
        }
    }
    Ok((start.elapsed() / TURNS_PER_SESSION, woke))
}

/// Opens the session `id`, queues its turns at once (so it stays awake between them) and times
/// them (mean per turn).
async fn queued_turns(agents: &Runtime, id: &str) -> anyhow::Result<Duration> {
    let session = agents.session(id).await?;
    let start = Clock::now();
    let mut turns = Vec::with_capacity(TURNS_PER_SESSION as usize);
    for _ in 0..TURNS_PER_SESSION {
        turns.push(session.prompt("hi").await?);
    }
    for turn in turns {
        let outcome = turn.outcome().await?;
        if outcome.reason != TurnEndReason::Completed {
            anyhow::bail!("{id}: a turn ended {:?}", outcome.reason);
        }
    }
    Ok(start.elapsed() / TURNS_PER_SESSION)
}

/// Times the plain loop: the same turns, appended straight to a store (mean per turn).
async fn plain_turns(id: &str) -> anyhow::Result<Duration> {
    let store = MemoryStore::new();
    let mut log = PlainLog::new(id.to_owned());
    let start = Event::SessionStart(SessionStart { session: id.to_owned(), format: LOG_FORMAT });
    log.append(&store, vec![start]).await?;
    let start = Clock::now();
    for turn in 1..=TURNS_PER_SESSION {
        plain_turn(&store, &mut log, turn).await?;
    }
    Ok(start.elapsed() / TURNS_PER_SESSION)
}

/// A session's log as the plain loop keeps it: its id and next `seq`.
struct PlainLog {
    session: String,
    next_seq: u64,
}

impl PlainLog {
    fn new(session: String) -> Self {
        Self { session, next_seq: 0 }
    }

    /// Stamps `events` with `seq` and `time` and appends them as one batch.
    async fn append(&mut self, store: &MemoryStore, events: Vec<Event>) -> anyhow::Result<()> {
        let time = WallClock.now_ms();
        let batch: Vec<Envelope> = events
            .into_iter()
            .map(|event| {
                let seq = self.next_seq;
                self.next_seq += 1;
                Envelope { seq, time, event }
            })
            .collect();
        store.append(&self.session, &batch).await?;
        Ok(())
    }
}

/// One turn's appends, batched as the runtime batches them: the session's start of the turn,
/// the step's start and request, the streamed chunk, the answer with the step's end, the turn's
/// end with the session's `agent/idle`.
async fn plain_turn(store: &MemoryStore, log: &mut PlainLog, turn: u32) -> anyhow::Result<()> {
    let step = 1;
    let at = StepRef { turn, step };
    log.append(
        store,
        vec![
            Event::UserMessage(UserMessage { text: "hi".into() }),
            Event::TurnStart(TurnStart { turn }),
        ],
    )
    .await?;
    log.append(
        store,
        vec![
            Event::StepStart(at),
            Event::RequestStart(RequestStart {
                turn,
                step,
                attempt: 1,
                provider: ROUTE.into(),
                model: MODEL.into(),
            }),
        ],
    )
    .await?;
    log.append(
        store,
        vec![Event::AssistantChunk(AssistantChunk { turn, step, attempt: 1, text: CHUNK.into() })],
    )
    .await?;
    log.append(
        store,
        vec![
            Event::AssistantMessage(AssistantMessage {
                turn,
                step,
                text: CHUNK.into(),
                tool_calls: None,
                usage: None,
            }),
            Event::StepEnd(at),
        ],
    )
    .await?;
    log.append(
        store,
        vec![
            Event::TurnEnd(TurnEnd { turn, reason: TurnEndReason::Completed }),
            Event::AgentIdle(AgentIdle {}),
        ],
    )
    .await?;
    Ok(())
}

/// Fails unless a session driven through the runtime writes exactly the events the plain loop
/// writes (times aside).
async fn check_same_appends(agents: &Runtime, store: &MemoryStore) -> anyhow::Result<()> {
    let session = agents.session("shape").await?;
    for _ in 0..TURNS_PER_SESSION {
        session.prompt("hi").await?.outcome().await?;
    }
    // The turn's outcome resolves once `agent/idle` is durable; closing also hibernates it.
    session.close().await.context("closing the shape session")?;
    let plain = MemoryStore::new();
    let mut log = PlainLog::new("shape".into());
    let start = Event::SessionStart(SessionStart { session: "shape".into(), format: LOG_FORMAT });
    log.append(&plain, vec![start]).await?;
    for turn in 1..=TURNS_PER_SESSION {
        plain_turn(&plain, &mut log, turn).await?;
    }
    let strip = |events: Vec<Envelope>| -> Vec<(u64, Event)> {
        events.into_iter().map(|e| (e.seq, e.event)).collect()
    };
    let through_runtime = strip(store.events("shape"));
    let through_loop = strip(plain.events("shape"));
    if through_runtime != through_loop {
        let kinds = |events: &[(u64, Event)]| -> Vec<&'static str> {
            events.iter().map(|(_, e)| e.kind()).collect()
        };
        anyhow::bail!(
            "the plain loop no longer writes what the runtime writes:\nruntime: {:?}\nloop:    {:?}",
            kinds(&through_runtime),
            kinds(&through_loop)
        );
    }
    Ok(())
}
