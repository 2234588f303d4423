//! The shape floor of the `stress` and `realistic` metrics: their workloads through rein's actor
//! tree rebuilt from bare ractor actors (`bare_agents`: session, log, turn, step, provider and
//! plugin actors, the waterfall walk as the step's task), on a memory store — what the actor
//! shape itself costs on them, measured like rein (`child`).
//!
//! - **Stress**: one task per agent, each opening its bare session and running its turns one
//!   after another with the seeded plan `hand_rolled_stress` and `rein stress` follow (the same
//!   turns cancelled at the same moments) on the same simulated provider; a cancel is a message
//!   to the session, its latency from the cancel to the outcome (the closing batch durable, the
//!   log answering, as in rein).
//! - **Realistic**: every agent reads each turn's batches as the log writes them (a subscriber
//!   taken before the turn's first event), cloning each event as rein's turn handle yields it,
//!   up to the turn's `turn/end`.
//!
//! Afterwards (outside the measurement) every session is shut down and every log checked
//! against the invariants.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rein::invariant::check_finished_log;
use rein::providers::Simulated;
use rein::runtime::event::{CancelCause, Event, TurnEndReason};
use rein::runtime::provider::Adapter;
use rein::runtime::store::memory::MemoryStore;
use rein_cli::stress::StressConfig;
use rein_cli::stress::plan;
use rein_cli::stress::summary::{Latencies, outcome_kind};
use tokio::task::JoinSet;

use crate::bare_agents::{BareTree, Session};
use crate::child::{self, Run};
use crate::cpu::process_seconds;
use crate::heap::allocations;

/// The stress workload of `config` (its plugin chaos left out) through the bare tree.
pub(crate) async fn stress(config: &StressConfig) -> anyhow::Result<Run> {
    let simulated = Simulated::new(config.simulated())?;
    let route = ("simulated", simulated.model().to_owned());
    let backoff = Duration::from_millis(config.backoff_ms);
    let window = plan::cancel_window(Duration::from_millis(config.latency_ms), backoff);
    let (seed, turns, rates) = (config.seed, config.turns, config.rates);
    let run = Driven::new(Arc::new(simulated), (route.0, &route.1)).await?;
    let agent = move |session: Session, index: usize| async move {
        let mut rng = plan::agent_rng(seed, index);
        let mut report = Report::default();
        for turn in 1..=turns {
            let plan = plan::turn(&mut rng, &rates, window);
            let mut outcome =
                session.prompt(&format!("stress turn {turn} of {}", session_of(index)))?;
            let moment = async {
                match plan.cancel_after {
                    Some(after) => tokio::time::sleep(after).await,
                    None => std::future::pending().await,
                }
            };
            let reason = tokio::select! {
                ended = &mut outcome => ended?.reason,
                () = moment => {
                    let sent = Instant::now();
                    let landed = session.cancel(CancelCause::User).await?;
                    let reason = outcome.await?.reason;
                    if landed && matches!(reason, TurnEndReason::Aborted { .. }) {
                        report.latencies.push(sent.elapsed());
                    }
                    reason
                }
            };
            *report.ends.entry(outcome_kind(&reason)).or_default() += 1;
        }
        anyhow::Ok((session, report))
    };
    run.drive(config.agents, agent).await
}

/// The realistic workload through the bare tree: `agents` agents of `turns` turns on `adapter`,
/// each turn's events read as they are written.
pub(crate) async fn realistic(
    adapter: Arc<dyn Adapter>,
    route: (&str, &str),
    agents: usize,
    turns: u32,
    prompt: fn(u32, &str) -> String,
) -> anyhow::Result<Run> {
    let run = Driven::new(adapter, route).await?;
    let agent = move |session: Session, index: usize| async move {
        let mut report = Report::default();
        for turn in 1..=turns {
            let (outcome, mut batches) =
                session.prompt_streaming(&prompt(turn, &session_of(index)))?;
            'stream: while let Some(batch) = batches.recv().await {
                for envelope in batch.iter() {
                    // As rein's turn handle yields it: a copy of the event, up to `turn/end`.
                    let event = envelope.clone();
                    report.read += 1;
                    if matches!(&event.event, Event::TurnEnd(end) if end.turn == turn) {
                        break 'stream;
                    }
                }
            }
            let reason = outcome.await?.reason;
            anyhow::ensure!(reason == TurnEndReason::Completed, "bare agent {index}: {reason:?}");
            *report.ends.entry(outcome_kind(&reason)).or_default() += 1;
        }
        anyhow::Ok((session, report))
    };
    run.drive(agents, agent).await
}

/// What one agent measured.
#[derive(Default)]
struct Report {
    latencies: Vec<Duration>,
    ends: BTreeMap<&'static str, u64>,
    /// Events read from the log's batches.
    read: u64,
}

/// A bare tree on a memory store, ready to drive agents.
struct Driven {
    store: MemoryStore,
    tree: BareTree,
}

impl Driven {
    async fn new(adapter: Arc<dyn Adapter>, route: (&str, &str)) -> anyhow::Result<Self> {
        let store = MemoryStore::new();
        let tree = BareTree::start(Arc::new(store.clone()), adapter, route).await?;
        Ok(Self { store, tree })
    }

    /// Runs `agent` for agents `0..agents` at once (each opens its session first), then shuts
    /// everything down and checks the logs; what was measured.
    async fn drive<F, Fut>(self, agents: usize, agent: F) -> anyhow::Result<Run>
    where
        F: Fn(Session, usize) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = anyhow::Result<(Session, Report)>> + Send + 'static,
    {
        let tree = Arc::new(self.tree);
        let (rss_before_kib, _) = child::rss_kib();
        let (cpu, allocs, started) = (process_seconds(), allocations(), Instant::now());
        let mut tasks = JoinSet::new();
        for index in 0..agents {
            let (tree, agent) = (Arc::clone(&tree), agent.clone());
            tasks.spawn(async move {
                let session = tree.open(&session_of(index)).await?;
                session.ready().await?;
                agent(session, index).await
            });
        }
        let mut sessions = Vec::with_capacity(agents);
        let (mut latencies, mut ends, mut read) = (Latencies::default(), BTreeMap::new(), 0);
        while let Some(joined) = tasks.join_next().await {
            let (session, report) = joined??;
            sessions.push(session);
            report.latencies.iter().for_each(|latency| latencies.record(*latency));
            for (kind, n) in report.ends {
                *ends.entry(kind.to_owned()).or_insert(0) += n;
            }
            read += report.read;
        }
        let (elapsed, cpu, allocs) =
            (started.elapsed(), process_seconds() - cpu, allocations() - allocs);
        let (_, peak_rss_kib) = child::rss_kib();

        for session in &sessions {
            session.shutdown();
        }
        for session in sessions {
            session.ended().await?;
        }
        if let Ok(tree) = Arc::try_unwrap(tree) {
            tree.stop().await;
        }
        let mut events = 0;
        for index in 0..agents {
            let log = self.store.events(&session_of(index));
            if let Some(violation) = check_finished_log(&log).first() {
                anyhow::bail!("bare {}: {violation}", session_of(index));
            }
            events += log.len() as u64;
        }
        let latency = latencies.summary();
        let turns: u64 = ends.values().sum();
        // A reader read every event but each log's `session/start` and each turn's `agent/idle`.
        let unread = agents as u64 + turns;
        anyhow::ensure!(read == 0 || events == read + unread, "{events} events, {read} read");
        Ok(Run {
            turns,
            ends,
            events,
            elapsed_s: elapsed.as_secs_f64(),
            cpu_s: cpu,
            cancels: latency.samples,
            cancel_p50_ms: latency.p50_ms,
            cancel_p99_ms: latency.p99_ms,
            allocations: allocs as u64,
            rss_before_kib,
            peak_rss_kib,
            failures: Vec::new(),
        })
    }
}

/// The session of agent `index` (as rein's stress agents name theirs).
fn session_of(index: usize) -> String {
    format!("agent-{index:05}")
}
