//! One agent of a stress run: a session that runs its turns one after another (thinking before
//! each, [`plan::think`], when the run has a think time), cancelling some of them at a random
//! moment and asking the chaos task for plugin disposals and settings changes, as its
//! [`plan::turn`] says.
//!
//! [`Watch`] is what the run reads to find hung turns: which turn each agent is waiting for, and
//! when a turn last began or ended anywhere.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::runtime::event::{CancelCause, TurnEndReason};
use crate::runtime::runtime::Runtime;
use crate::runtime::session::Session;
use tokio::sync::mpsc;

use super::acks::AckSender;
use super::chaos::Request;
use super::plan::{self, Rates};
use super::progress::Progress;
use super::summary::Errors;

/// The session id of agent `index`.
pub(crate) fn session_id(index: usize) -> String {
    format!("agent-{index:05}")
}

/// Whether `session` is the session of one of agents `0..agents` (what a run of that many
/// agents opens, and so what it may judge).
pub(crate) fn is_agent_session(session: &str, agents: usize) -> bool {
    let index = session.strip_prefix("agent-").and_then(|n| n.parse::<usize>().ok());
    index.is_some_and(|index| index < agents && session_id(index) == session)
}

/// What every agent shares.
pub(crate) struct Shared {
    /// The runtime.
    pub(crate) runtime: Runtime,
    /// The run's seed.
    pub(crate) seed: u64,
    /// Turns per agent.
    pub(crate) turns: u32,
    /// The per-turn rates.
    pub(crate) rates: Rates,
    /// The mean think time before a turn, in ms.
    pub(crate) think_ms: u64,
    /// A cancellation lands within this long of its prompt.
    pub(crate) cancel_window: Duration,
    /// Ended turns.
    pub(crate) progress: Progress,
    /// Turns in flight.
    pub(crate) watch: Watch,
}

/// Which turn each agent waits for, and when a turn last began or ended.
pub(crate) struct Watch {
    origin: Instant,
    last_ms: AtomicU64,
    running: Vec<AtomicU32>,
    stopping: AtomicBool,
}

impl Watch {
    /// A watch over `agents` agents, starting now.
    pub(crate) fn new(agents: usize) -> Self {
        Self {
            origin: Instant::now(),
            last_ms: AtomicU64::new(0),
            running: (0..agents).map(|_| AtomicU32::new(0)).collect(),
            stopping: AtomicBool::new(false),
        }
    }

    pub(crate) fn begin(&self, agent: usize, turn: u32) {
        self.running[agent].store(turn, Ordering::Release);
        self.stir();
    }

    pub(crate) fn end(&self, agent: usize) {
        self.running[agent].store(0, Ordering::Release);
        self.stir();
    }

    /// A turn began or ended now.
    fn stir(&self) {
        let now = self.origin.elapsed().as_millis() as u64;
        self.last_ms.fetch_max(now, Ordering::AcqRel);
    }

    /// How long since a turn last began or ended (or since the start): a turn that began after
    /// agents thought for longer than the deadline is not taken for hung.
    pub(crate) fn quiet_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_ms.load(Ordering::Acquire));
        self.origin.elapsed().saturating_sub(last)
    }

    /// The turns still running: (agent, its turn number in this run).
    pub(crate) fn running(&self) -> Vec<(usize, u32)> {
        self.running
            .iter()
            .enumerate()
            .filter_map(|(agent, turn)| {
                let turn = turn.load(Ordering::Acquire);
                (turn > 0).then_some((agent, turn))
            })
            .collect()
    }

    /// Tells agents to start no more turns (the run is over).
    pub(crate) fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    pub(crate) fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }
}

/// What one agent measured.
#[derive(Debug, Default)]
pub(crate) struct AgentReport {
    /// Cancellation latencies (a few per agent; the run folds them into one histogram).
    pub(crate) latencies: Vec<Duration>,
    /// `session.cancel` calls.
    pub(crate) requested: u64,
    /// Those that found the turn running.
    pub(crate) landed: u64,
    /// Errors from the runtime (not counting those after the run was stopped).
    pub(crate) errors: Errors,
}

impl AgentReport {
    /// The report of an agent whose task failed (it panicked).
    pub(crate) fn failed(message: String) -> Self {
        let mut report = Self::default();
        report.error(message);
        report
    }

    fn error(&mut self, message: String) {
        self.errors.add(message);
    }
}

/// Runs agent `index`'s turns.
pub(crate) async fn run(
    shared: Arc<Shared>,
    index: usize,
    chaos: mpsc::UnboundedSender<Request>,
    acks: Option<AckSender>,
) -> AgentReport {
    let mut report = AgentReport::default();
    let id = session_id(index);
    let session = match shared.runtime.session(&id).await {
        Ok(session) => session,
        Err(error) => {
            if !shared.watch.stopping() {
                report.error(format!("{id}: could not open: {error}"));
            }
            return report;
        }
    };
    if let Some(acks) = &acks {
        acks.ack(&id, 0); // `session/start`, durable once the session opened
    }
    let mut rng = plan::agent_rng(shared.seed, index);
    for turn in 1..=shared.turns {
        let plan = plan::turn(&mut rng, &shared.rates, shared.cancel_window);
        let think = plan::think(shared.seed, index, turn, shared.think_ms);
        if !think.is_zero() {
            tokio::time::sleep(think).await;
        }
        if shared.watch.stopping() {
            break;
        }
        if plan.dispose {
            let _ = chaos.send(Request::Dispose);
        }
        if plan.configure {
            let _ = chaos.send(Request::Configure);
        }
        shared.watch.begin(index, turn);
        one_turn(&shared, &session, turn, plan.cancel_after, acks.as_ref(), &mut report).await;
        shared.watch.end(index);
        shared.progress.turn_ended();
    }
    report
}

/// Prompts one turn, cancels it after `cancel_after` if it still runs, streams its events to
/// `acks`, and waits for its end.
async fn one_turn(
    shared: &Shared,
    session: &Session,
    turn: u32,
    cancel_after: Option<Duration>,
    acks: Option<&AckSender>,
    report: &mut AgentReport,
) {
    let id = session.id();
    let handle = match session.prompt(format!("stress turn {turn} of {id}")) {
        Ok(handle) => handle,
        Err(error) => {
            if !shared.watch.stopping() {
                report.error(format!("{id} turn {turn}: not started: {error}"));
            }
            return;
        }
    };
    let ended = async move {
        let mut handle = handle;
        if let Some(acks) = acks {
            while let Some(event) = handle.next_event().await {
                acks.ack(id, event.seq);
            }
        }
        handle.outcome().await
    };
    let moment = async {
        match cancel_after {
            Some(after) => tokio::time::sleep(after).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(ended);
    let mut cancelled = None;
    // Only the moment races the turn: once the cancel is sent its answer is awaited in full, so
    // a cancel whose answer and the turn's end are ready together is counted (racing the whole
    // cancel call against the end dropped the answer half of the time).
    let outcome = tokio::select! {
        outcome = &mut ended => outcome,
        () = moment => {
            let sent = Instant::now();
            cancelled = Some((sent, session.cancel(CancelCause::User).await));
            ended.await
        }
    };
    let done = Instant::now();
    if let Some((sent, landed)) = cancelled {
        report.requested += 1;
        match landed {
            Ok(true) => {
                report.landed += 1;
                if matches!(&outcome, Ok(o) if matches!(o.reason, TurnEndReason::Aborted { .. })) {
                    report.latencies.push(done - sent);
                }
            }
            Ok(false) => {}
            Err(error) => {
                if !shared.watch.stopping() {
                    report.error(format!("{id} turn {turn}: cancel failed: {error}"));
                }
            }
        }
    }
    if let Err(error) = outcome
        && !shared.watch.stopping()
    {
        report.error(format!("{id} turn {turn}: {error}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::{Simulated, SimulatedConfig};
    use crate::runtime::runtime::Route;
    use crate::runtime::store::memory::MemoryStore;

    /// A runtime whose provider streams nothing and never answers (every attempt stalls until
    /// cancelled), over `store`, and what its agents share.
    async fn stalling(store: &MemoryStore) -> Shared {
        let config = SimulatedConfig {
            stall_rate: 1.0,
            idle_timeout: None,
            first_chunk_latency_ms: 0..=0,
            ..SimulatedConfig::faultless(1)
        };
        let simulated = Simulated::new(config).unwrap();
        let runtime = Runtime::builder()
            .store(Arc::new(store.clone()))
            .route(Route::new("simulated", Arc::new(simulated)).model("simulated-1"))
            .build()
            .await
            .unwrap();
        let rates =
            Rates { cancel: 1.0, dispose: 0.0, config: 0.0, fault: 0.0, crash: 0.0, tool: 0.0 };
        Shared {
            runtime,
            seed: 1,
            turns: 1,
            rates,
            think_ms: 0,
            cancel_window: Duration::from_millis(10),
            progress: Progress::hidden(),
            watch: Watch::new(1),
        }
    }

    #[test]
    fn a_run_of_n_agents_owns_exactly_their_sessions() {
        // (session, agents, owned)
        let cases = [
            ("agent-00000", 1, true),
            ("agent-00001", 1, false),
            ("agent-00011", 12, true),
            ("agent-00012", 12, false),
            ("agent-123456", 1_000_000, true),
            ("agent-1", 12, false),
            ("agent-+0001", 12, false),
            ("agent-00001.x", 12, false),
            ("other", 12, false),
            ("agent-", 12, false),
        ];
        for (session, agents, owned) in cases {
            assert_eq!(is_agent_session(session, agents), owned, "{session} of {agents}");
        }
    }

    /// A cancel whose answer and the turn's end are both ready when the agent next looks is
    /// counted, landed, with its latency: the agent is polled by hand, once before the cancel
    /// moment, once as it sends the cancel, and again only after the session answered it, ended
    /// the turn and resolved its outcome. (Racing the whole cancel call against the turn's end
    /// dropped the answer whenever `select!` happened to look at the end first: half the time,
    /// so the round is repeated.)
    #[tokio::test(start_paused = true)]
    async fn a_cancel_answered_as_the_turn_ends_is_counted() {
        for round in 0..32 {
            let store = MemoryStore::new();
            let shared = stalling(&store).await;
            let session = shared.runtime.session("agent-00000").await.unwrap();
            let mut report = AgentReport::default();
            let after = Duration::from_millis(5);
            {
                let turn = one_turn(&shared, &session, 1, Some(after), None, &mut report);
                tokio::pin!(turn);
                assert!(futures::poll!(&mut turn).is_pending(), "the turn runs");
                tokio::time::sleep(after).await;
                assert!(futures::poll!(&mut turn).is_pending(), "the cancel is sent");
                // The session answers it, the turn ends, its outcome resolves: all before the
                // agent looks again.
                tokio::time::sleep(Duration::from_secs(1)).await;
                turn.await;
            }
            assert_eq!((report.requested, report.landed), (1, 1), "round {round}");
            assert_eq!(report.latencies.len(), 1, "round {round}");
            assert_eq!(report.errors.count, 0, "{:?}", report.errors.examples);
            shared.runtime.shutdown().await;
            let ends: Vec<String> = store
                .events("agent-00000")
                .iter()
                .filter_map(|e| match &e.event {
                    crate::runtime::event::Event::TurnEnd(end) => Some(format!("{:?}", end.reason)),
                    _ => None,
                })
                .collect();
            assert_eq!(
                ends,
                [format!("{:?}", TurnEndReason::Aborted { cause: CancelCause::User })]
            );
        }
    }
}
