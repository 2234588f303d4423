//! The shape floor of the `agents` metric: the `agents` workload (`agents_workload`) run by
//! rein's actor tree rebuilt from bare ractor actors and tokio primitives, with no rein runtime
//! code — what the actor shape itself costs on that workload. It writes the same events, in the
//! same batches, through the [`SessionStore`] it is given (the metric gives it the store rein
//! gets: a `JsonlStore` at `Os`).
//!
//! ```text
//! BareSession (one per session, not linked)    BareProvider (one per route)
//! ├── BareLog (linked; `bare_log`)              BarePlugin × 3 (llm-retry, compaction, auto-retry)
//! └── BareTurn (linked, one per running turn)
//!     └── BareStep (linked, one per step) ── a task: the waterfall walk, or the tool calls
//! ```
//!
//! - **Open**: the driver spawns the session actor, whose `pre_start` spawns its log actor
//!   linked; the log's `pre_start` loads the log through the store and appends `session/start`.
//!   The driver opens the agents one after another, as the metric does for rein: open, prompt,
//!   and for one agent in ten cancel right away (a message to the session, answered).
//! - **A turn** (`session`, `turn`): the session appends `user/message` + `turn/start` and spawns
//!   the turn linked; the turn spawns one step at a time, linked. Each reports its end through
//!   its termination (its final state), as in rein and `bare_tree`.
//! - **A step** (`step`): appends `step/start` + `request/start` and sends the attempt to the
//!   provider actor (`provider`), which calls the workload's adapter in a task racing the step's
//!   token and sends back each chunk and the outcome as messages. A chunk is appended as
//!   `assistant/chunk`. A success appends `assistant/message` (+ `tool/call`); the tool calls run
//!   as a task that reports their results, appended with `step/end`. A failure appends
//!   `request/error` and runs the waterfall walk as a task of the step (`plugin`): a message to
//!   each plugin actor in order and its reply; a retry is `llm/retry`, the backoff raced against
//!   the step's token, `llm/retry-started`, then the step's next `request/start`.
//! - **Cancel**: the session records the cause and stops the turn; the turn's `post_stop` stops
//!   its step and waits for it; the step's `post_stop` cancels its token and waits for its task.
//!   A step that finds the cause recorded starts no attempt and no walk (rein's step checks its
//!   cancel scope the same way), so an agent cancelled right after its prompt writes what it
//!   writes in rein.
//!   The session then appends `step/end` (if a step was open) + `turn/end` + `agent/idle`, as it
//!   does when a turn ends on its own.
//!
//! What it leaves out is what rein adds (see `bare_tree`): validators, projections (the history
//! the request is built from, the retry chains), subscriptions, the session directory and its
//! lease, the idle grace timer, cancel scopes with causes, census marks, the plugins' recovery
//! tasks, supervision and disposal, the routes' policies, tracing spans, crash handling. The
//! plugin actors are stand-ins deciding as the workload's chain decides (`plugin`).

mod plugin;
mod provider;
mod session;
mod step;
mod turn;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorRef};
use rein::runtime::event::{CancelCause, TurnEndReason};
use rein::runtime::provider::Adapter;
use rein::runtime::session::TurnOutcome;
use rein::runtime::store::SessionStore;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use self::plugin::{BarePlugin, PluginMsg, StandIn};
use self::provider::{BareProvider, ProviderMsg};
use self::session::{BareSession, SessionArgs, SessionMsg};
use crate::agents::Side;
use crate::agents_workload::{AgentsProvider, CANCELLED, PROMPT, ROUTE, session_id};
use crate::cpu::process_seconds;
use crate::heap::allocations;

/// What every actor of the tree shares (one allocation per runtime).
struct Ctx {
    store: Arc<dyn SessionStore>,
    provider: ActorRef<ProviderMsg>,
    /// The route's name and model.
    route: (String, String),
    /// The chain, in order.
    plugins: Vec<ActorRef<PluginMsg>>,
}

/// A bare tree's shared actors — the provider of its one route, the plugins of the chain — and
/// what its sessions share, for the workloads of other metrics (`bare_stress`, `realistic`).
pub(crate) struct BareTree {
    ctx: Arc<Ctx>,
}

impl BareTree {
    /// Spawns the provider actor (route `route`: name and model, on `adapter`) and the plugin
    /// actors; sessions append to `store`.
    pub(crate) async fn start(
        store: Arc<dyn SessionStore>,
        adapter: Arc<dyn Adapter>,
        route: (&str, &str),
    ) -> anyhow::Result<Self> {
        let (provider, _) = Actor::spawn(None, BareProvider::new(adapter), ()).await?;
        let mut plugins = Vec::new();
        for stand_in in [StandIn::LlmRetry, StandIn::Compaction, StandIn::AutoRetry] {
            plugins.push(Actor::spawn(None, BarePlugin(stand_in), ()).await?.0);
        }
        let route = (route.0.to_owned(), route.1.to_owned());
        Ok(Self { ctx: Arc::new(Ctx { store, provider, route, plugins }) })
    }

    /// Wakes session `id`: spawns its actor, which opens its log.
    pub(crate) async fn open(&self, id: &str) -> anyhow::Result<Session> {
        Session::open(&self.ctx, id).await
    }

    /// Stops the plugin and provider actors (every session is shut down).
    pub(crate) async fn stop(self) {
        for plugin in &self.ctx.plugins {
            let _ = plugin.stop_and_wait(None, None).await;
        }
        let _ = self.ctx.provider.stop_and_wait(None, None).await;
    }
}

/// Runs `agents` agents of the workload through bare actors appending to `store`; the
/// measurement (from the first open to the last outcome). The sessions, plugins and provider
/// are stopped afterwards, outside the measurement.
pub(crate) async fn run(store: Arc<dyn SessionStore>, agents: usize) -> anyhow::Result<Side> {
    let tree = BareTree::start(store, Arc::new(AgentsProvider::new()?), ROUTE).await?;
    let ctx = Arc::clone(&tree.ctx);

    let (cpu, allocs, started) = (process_seconds(), allocations(), Instant::now());
    let mut sessions = Vec::with_capacity(agents);
    let mut outcomes = Vec::with_capacity(agents);
    let (mut opening, mut cancelling) = (Duration::ZERO, Duration::ZERO);
    for i in 0..agents {
        let open = Instant::now();
        let session = Session::open(&ctx, &session_id(i)).await?;
        opening += open.elapsed();
        outcomes.push(session.prompt(PROMPT)?);
        if i % CANCELLED == 0 {
            let cancel = Instant::now();
            session.cancel(CancelCause::User).await?;
            cancelling += cancel.elapsed();
        }
        sessions.push(session);
    }
    let all_started = started.elapsed();
    for (i, outcome) in outcomes.into_iter().enumerate() {
        let reason = outcome.await?.reason;
        let expected = match i % CANCELLED {
            0 => matches!(reason, TurnEndReason::Aborted { .. }),
            _ => reason == TurnEndReason::Completed,
        };
        anyhow::ensure!(expected, "bare agent {i} ended {reason:?}");
    }
    let side = Side {
        elapsed: started.elapsed(),
        started: all_started,
        opening,
        cancelling,
        cpu_seconds: process_seconds() - cpu,
        allocations: allocations() - allocs,
    };

    for session in &sessions {
        session.shutdown();
    }
    for session in sessions {
        session.ended.await?;
    }
    drop(ctx);
    tree.stop().await;
    Ok(side)
}

/// A bare session as the driver holds it.
pub(crate) struct Session {
    actor: ActorRef<SessionMsg>,
    ended: JoinHandle<()>,
}

impl Session {
    /// Spawns session `id`'s actor; resolves once it (and its log) started.
    async fn open(ctx: &Arc<Ctx>, id: &str) -> anyhow::Result<Self> {
        let args = SessionArgs { ctx: Arc::clone(ctx), id: Arc::from(id) };
        let (actor, ended) = Actor::spawn(None, BareSession, args).await?;
        Ok(Self { actor, ended })
    }

    /// Prompts the session; the receiver resolves once the turn's closing batch is durable.
    pub(crate) fn prompt(&self, text: &str) -> anyhow::Result<oneshot::Receiver<TurnOutcome>> {
        let (reply, outcome) = oneshot::channel();
        let prompt = SessionMsg::Prompt(text.to_owned(), reply, None);
        self.actor.send_message(prompt).map_err(stopped)?;
        Ok(outcome)
    }

    /// [`Session::prompt`], with the log's batches from the turn's first event on.
    pub(crate) fn prompt_streaming(
        &self,
        text: &str,
    ) -> anyhow::Result<(
        oneshot::Receiver<TurnOutcome>,
        mpsc::UnboundedReceiver<crate::bare_log::Batch>,
    )> {
        let (reply, outcome) = oneshot::channel();
        let (subscriber, batches) = mpsc::unbounded_channel();
        let prompt = SessionMsg::Prompt(text.to_owned(), reply, Some(subscriber));
        self.actor.send_message(prompt).map_err(stopped)?;
        Ok((outcome, batches))
    }

    /// Cancels the running turn with `cause`; whether one was running (answered once its
    /// closing batch is durable).
    pub(crate) async fn cancel(&self, cause: CancelCause) -> anyhow::Result<bool> {
        let (reply, answer) = oneshot::channel();
        self.actor.send_message(SessionMsg::Cancel(cause, reply)).map_err(stopped)?;
        Ok(answer.await?)
    }

    /// Resolves once the session's actor runs (as rein's open resolves once its session answered).
    pub(crate) async fn ready(&self) -> anyhow::Result<()> {
        let (reply, ready) = oneshot::channel();
        self.actor.send_message(SessionMsg::Ready(reply)).map_err(stopped)?;
        Ok(ready.await?)
    }

    /// Tells the session to stop (its turn first, if one runs).
    pub(crate) fn shutdown(&self) {
        let _ = self.actor.send_message(SessionMsg::Shutdown);
    }

    /// Resolves once the session actor ended.
    pub(crate) async fn ended(self) -> anyhow::Result<()> {
        Ok(self.ended.await?)
    }
}

fn stopped<E>(_: E) -> anyhow::Error {
    anyhow::anyhow!("the bare session stopped")
}
