//! Metric `realistic_10k_agents_turns_per_s_vs_hand_rolled`: a realistic streaming load — 10,000
//! agents of [`TURNS`] turns each on a model that answers after [`LATENCY`] and streams its answer
//! in [`CHUNKS`] chunks — through rein (memory store, the stress run's chain: llm-retry,
//! compaction, auto-retry), against a hand-rolled tokio loop doing the same work. Budget: rein's
//! turns per second at least [`BUDGET`] × the loop's.
//!
//! - **The model** ([`Streaming`], the same adapter on both sides): waits [`LATENCY`], then
//!   streams [`CHUNKS`] chunks of one word each, [`PER_BURST`] at a time every [`GAP`] (the
//!   answer takes `LATENCY + (CHUNKS / PER_BURST - 1) × GAP`: a fast model read by a client that
//!   wakes every 10 ms), and succeeds. No fault, no cancellation: the load is the streaming.
//! - **rein**: every agent opens its session and runs its turns one after another, reading each
//!   turn's events as they are committed (`TurnHandle::next_event`, as a chat UI streams the
//!   answer) and then its outcome.
//! - **The loop**: one task per agent, each turn's events appended to a `Vec` as rein writes
//!   them (`user/message` + `turn/start`, `step/start` + `request/start`, one `assistant/chunk`
//!   per chunk as it arrives, `assistant/message`, `step/end` + `turn/end` + `agent/idle`), the
//!   request built from the agent's history.
//!
//! Turns per second run from the first agent's start to the last turn's end; each side runs in a
//! process of its own (`child`). A second line, for the record, is the CPU time per turn of the
//! two sides (`realistic_10k_agents_cpu_per_turn_vs_hand_rolled`).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rein::runtime::BoxFuture;
use rein::runtime::clock::{Clock as _, WallClock};
use rein::runtime::event::{
    AgentIdle, AssistantChunk, AssistantMessage, Envelope, Event, LOG_FORMAT, RequestStart,
    SessionStart, StepRef, TurnEnd, TurnEndReason, TurnStart, Usage, UserMessage,
};
use rein::runtime::failure::Failure;
use rein::runtime::provider::{Adapter, ChunkSink, Completion, Message, Messages, Request};
use rein::runtime::runtime::{Route, Runtime};
use rein::runtime::store::memory::MemoryStore;
use tokio::task::JoinSet;

use crate::Options;
use crate::bare_stress;
use crate::child::{self, Kind, Run};
use crate::cpu::process_seconds;
use crate::heap::allocations;
use crate::report::{Budget, Metric};

/// The prefix of the metrics' names (what a filter matches).
pub(crate) const NAME: &str = "realistic";

/// Rein's turns per second: at least this × the loop's (DESIGN §6).
const BUDGET: Budget = Budget::AtLeast(0.9);

/// Agents, all started at once.
const AGENTS: usize = 10_000;
/// Turns per agent, one after another.
const TURNS: u32 = 3;
/// The model's wait before its first chunk.
const LATENCY: Duration = Duration::from_millis(200);
/// Chunks per answer.
const CHUNKS: usize = 200;
/// Chunks that arrive together.
const PER_BURST: usize = 10;
/// The wait between two bursts.
const GAP: Duration = Duration::from_millis(10);

/// The route both sides name.
const ROUTE: &str = "streaming";
/// Its model.
const MODEL: &str = "streaming-1";

/// Measures the metric.
pub(crate) fn run(_: &Options) -> anyhow::Result<Vec<Metric>> {
    let name = format!("{NAME}_{}k_agents", AGENTS / 1000);
    let rein = child::spawn(Kind::RealisticRein, AGENTS, TURNS)?;
    let hand = child::spawn(Kind::RealisticHandRolled, AGENTS, TURNS)?;
    let bare = child::spawn(Kind::RealisticBare, AGENTS, TURNS)?;
    for (side, run) in [("rein", &rein), ("hand-rolled", &hand), ("bare actors", &bare)] {
        eprintln!(
            "{name}: {side}: {} turns in {:.2} s ({:.0} turns/s, {:.0} µs CPU and {:.0} allocations \
             per turn), {} events",
            run.turns,
            run.elapsed_s,
            run.turns_per_s(),
            run.cpu_per_turn_us(),
            run.allocations as f64 / run.turns as f64,
            run.events,
        );
    }
    Ok(vec![
        Metric::new(
            &format!("{name}_turns_per_s_vs_hand_rolled"),
            rein.turns_per_s(),
            hand.turns_per_s(),
            BUDGET,
        ),
        Metric::record(
            &format!("{name}_bare_actors_turns_per_s_vs_hand_rolled"),
            bare.turns_per_s(),
            hand.turns_per_s(),
        ),
        Metric::record(
            &format!("{name}_turns_per_s_vs_bare_actors"),
            rein.turns_per_s(),
            bare.turns_per_s(),
        ),
        Metric::record(
            &format!("{name}_cpu_per_turn_vs_hand_rolled"),
            rein.cpu_per_turn_us(),
            hand.cpu_per_turn_us(),
        ),
        Metric::record(
            &format!("{name}_cpu_per_turn_vs_bare_actors"),
            rein.cpu_per_turn_us(),
            bare.cpu_per_turn_us(),
        ),
    ])
}

/// The child side: runs `kind` and prints its [`Run`] as one JSON line.
pub(crate) fn child(kind: Kind, agents: usize, turns: u32) -> ExitCode {
    let measured = crate::drive(async move {
        match kind {
            Kind::RealisticRein => rein(agents, turns).await,
            Kind::RealisticBare => {
                bare_stress::realistic(Arc::new(Streaming), (ROUTE, MODEL), agents, turns, prompt)
                    .await
            }
            _ => hand_rolled(agents, turns).await,
        }
    });
    child::print(measured)
}

/// The model: [`LATENCY`], then [`CHUNKS`] one-word chunks in bursts of [`PER_BURST`] every
/// [`GAP`], then success.
struct Streaming;

impl Adapter for Streaming {
    fn call(
        &self,
        _: Request,
        chunks: ChunkSink,
    ) -> BoxFuture<'static, Result<Completion, Failure>> {
        Box::pin(async move {
            tokio::time::sleep(LATENCY).await;
            for burst in 0..CHUNKS / PER_BURST {
                if burst > 0 {
                    tokio::time::sleep(GAP).await;
                }
                for i in 0..PER_BURST {
                    let _ = chunks.send(format!("word{} ", burst * PER_BURST + i));
                }
            }
            let usage = Usage { input_tokens: 10, output_tokens: CHUNKS as u64 };
            Ok(Completion { usage: Some(usage), ..Completion::default() })
        })
    }
}

/// The prompt of `turn` of `session`.
fn prompt(turn: u32, session: &str) -> String {
    format!("realistic turn {turn} of {session}")
}

/// rein: every agent's session, its turns streamed one after another.
async fn rein(agents: usize, turns: u32) -> anyhow::Result<Run> {
    let (rss_before_kib, _) = child::rss_kib();
    let store = MemoryStore::new();
    let mut builder = Runtime::builder()
        .store(Arc::new(store.clone()))
        .route(Route::new(ROUTE, Arc::new(Streaming)).model(MODEL));
    for plugin in crate::stress::chain()? {
        builder = builder.plugin(plugin);
    }
    let runtime = builder.build().await?;
    let (cpu, allocs, started) = (process_seconds(), allocations(), Instant::now());
    let mut tasks = JoinSet::new();
    for index in 0..agents {
        let runtime = runtime.clone();
        tasks.spawn(async move {
            let id = session_id(index);
            let session = runtime.session(&id).await?;
            let mut events = 0_u64;
            for turn in 1..=turns {
                let mut handle = session.prompt(prompt(turn, &id))?;
                while handle.next_event().await.is_some() {
                    events += 1;
                }
                let outcome = handle.outcome().await?;
                anyhow::ensure!(outcome.reason == TurnEndReason::Completed, "{id}: {outcome:?}");
            }
            anyhow::Ok(events)
        });
    }
    let mut streamed = 0;
    while let Some(events) = tasks.join_next().await {
        streamed += events??;
    }
    let (elapsed, cpu, allocs) =
        (started.elapsed(), process_seconds() - cpu, allocations() - allocs);
    let (_, peak_rss_kib) = child::rss_kib();
    runtime.shutdown().await;
    let turns_ended = agents as u64 * u64::from(turns);
    // Every turn's events reached its reader: all but each log's `session/start` and each turn's
    // `agent/idle` (written with the `turn/end` that ends the stream).
    let stored: u64 = (0..agents).map(|i| store.events(&session_id(i)).len() as u64).sum();
    let unread = agents as u64 + turns_ended;
    anyhow::ensure!(stored == streamed + unread, "{stored} events stored, {streamed} read");
    Ok(Run {
        turns: turns_ended,
        ends: [("completed".to_owned(), turns_ended)].into(),
        events: stored,
        elapsed_s: elapsed.as_secs_f64(),
        cpu_s: cpu,
        allocations: allocs as u64,
        rss_before_kib,
        peak_rss_kib,
        ..Run::default()
    })
}

fn session_id(index: usize) -> String {
    format!("agent-{index:05}")
}

/// The hand-rolled loop: one task per agent.
async fn hand_rolled(agents: usize, turns: u32) -> anyhow::Result<Run> {
    let (rss_before_kib, _) = child::rss_kib();
    let model: Arc<dyn Adapter> = Arc::new(Streaming);
    let (cpu, allocs, started) = (process_seconds(), allocations(), Instant::now());
    let mut tasks = JoinSet::new();
    for index in 0..agents {
        tasks.spawn(agent(Arc::clone(&model), session_id(index), turns));
    }
    let mut logs = Vec::with_capacity(agents);
    while let Some(log) = tasks.join_next().await {
        logs.push(log?);
    }
    let (elapsed, cpu, allocs) =
        (started.elapsed(), process_seconds() - cpu, allocations() - allocs);
    let (_, peak_rss_kib) = child::rss_kib();
    let turns_ended = agents as u64 * u64::from(turns);
    Ok(Run {
        turns: turns_ended,
        ends: [("completed".to_owned(), turns_ended)].into(),
        events: logs.iter().map(|log| log.len() as u64).sum(),
        elapsed_s: elapsed.as_secs_f64(),
        cpu_s: cpu,
        allocations: allocs as u64,
        rss_before_kib,
        peak_rss_kib,
        ..Run::default()
    })
}

/// One agent of the loop: its turns, its log.
async fn agent(model: Arc<dyn Adapter>, session: String, turns: u32) -> Vec<Envelope> {
    let mut log = Vec::new();
    let append = |log: &mut Vec<Envelope>, events: Vec<Event>| {
        let time = WallClock.now_ms();
        for event in events {
            let seq = log.len() as u64;
            log.push(Envelope { seq, time, event });
        }
    };
    let start = SessionStart { session: session.clone(), format: LOG_FORMAT };
    append(&mut log, vec![Event::SessionStart(start)]);
    let mut history = Messages::new();
    for turn in 1..=turns {
        let text = prompt(turn, &session);
        history.push(Message::User { text: text.clone() });
        append(
            &mut log,
            vec![Event::UserMessage(UserMessage { text }), Event::TurnStart(TurnStart { turn })],
        );
        let at = StepRef { turn, step: 1 };
        append(
            &mut log,
            vec![
                Event::StepStart(at),
                Event::RequestStart(RequestStart {
                    turn,
                    step: 1,
                    attempt: 1,
                    provider: ROUTE.to_owned(),
                    model: MODEL.to_owned(),
                }),
            ],
        );
        let request = Request {
            session: session.clone(),
            turn,
            step: 1,
            attempt: 1,
            provider: ROUTE.to_owned(),
            model: MODEL.to_owned(),
            messages: history.clone(),
            tools: Vec::new(),
            generation: Default::default(),
        };
        let (sink, mut chunks) = ChunkSink::channel();
        let call = model.call(request, sink);
        tokio::pin!(call);
        let mut text = String::new();
        let outcome = loop {
            tokio::select! {
                biased;
                Some(chunk) = chunks.recv() => {
                    text.push_str(&chunk);
                    append(&mut log, vec![Event::AssistantChunk(AssistantChunk { turn, step: 1, attempt: 1, text: chunk })]);
                }
                outcome = &mut call => break outcome,
            }
        };
        while let Ok(chunk) = chunks.try_recv() {
            text.push_str(&chunk);
            let chunk = AssistantChunk { turn, step: 1, attempt: 1, text: chunk };
            append(&mut log, vec![Event::AssistantChunk(chunk)]);
        }
        let usage = outcome.ok().and_then(|completion| completion.usage);
        history.push(Message::Assistant { text: text.clone(), tool_calls: Vec::new() });
        let message = AssistantMessage { turn, step: 1, text, tool_calls: None, usage };
        append(&mut log, vec![Event::AssistantMessage(message)]);
        append(
            &mut log,
            vec![
                Event::StepEnd(at),
                Event::TurnEnd(TurnEnd { turn, reason: TurnEndReason::Completed }),
                Event::AgentIdle(AgentIdle {}),
            ],
        );
    }
    log
}
