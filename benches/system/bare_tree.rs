//! The floor of the turn metrics: rein's actor tree rebuilt from bare ractor actors and tokio
//! primitives, with no rein code in it — the shape a turn has (see `docs/architecture.md`,
//! "Agent runtime"), passing the same messages and writing the same events, in the same batches,
//! to the same store.
//!
//! ```text
//! BareSession (one per session, not linked)        BareProvider (one per route)
//! ├── BareLog (linked; `bare_log`): stamps seq/time, appends, replies after the store's ack
//! └── BareTurn (linked, one per running turn)
//!     └── BareStep (linked, one per running step) ── a waiting task, when the attempt failed
//! ```
//!
//! A prompt: the session appends `user/message` + `turn/start` and spawns the turn; the turn
//! spawns its step; the step appends `step/start` + `request/start` and sends the call to the
//! provider, which sends the step one chunk and the outcome as two messages. On a chunk the step
//! appends `assistant/chunk`; on success `assistant/message`, and it stops with its report in its
//! state; the turn reads it from the termination ractor sends it and stops the same way; the
//! session, told the same way, appends `step/end` + `turn/end` + `agent/idle` in one batch and
//! answers the prompt. On failure the step appends `request/error` and parks in a task racing a
//! child of its token against an hour's sleep (a retry's wait).
//!
//! A shutdown: the session stops its turn; the turn's `post_stop` stops its step and waits for it;
//! the step's `post_stop` cancels its token and waits for its waiting task; the turn reports
//! `aborted`; the session appends the same closing batch, stops its log and stops.
//!
//! What it leaves out is what rein adds: validators, projections (the history the request is
//! built from, the open turn), subscriptions, the session directory and its lease, the idle grace
//! timer, cancellation scopes with causes, census marks, the waterfall and the plugin actors
//! (here the wait is the step's own task), the adapter's boxed future and chunk sink, tracing
//! spans, crash handling.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use rein::runtime::event::{
    AgentIdle, AssistantChunk, AssistantMessage, CancelCause, Event, RequestError, RequestStart,
    StepRef, TurnEnd, TurnEndReason, TurnStart, UserMessage,
};
use rein::runtime::failure::Failure;
use rein::runtime::session::TurnOutcome;
use rein::runtime::store::SessionStore;
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::bare_log::{BareLog, LogMsg, append};
use crate::doubles::CHUNK;

/// What every actor of a tree shares (one allocation per tree, as rein's per-turn context).
struct Ctx {
    store: Arc<dyn SessionStore>,
    provider: ActorRef<ProviderMsg>,
    route: String,
    model: String,
    parked: Arc<Parked>,
}

/// How many steps are parked in their wait.
#[derive(Default)]
struct Parked {
    count: AtomicUsize,
    changed: Notify,
}

/// What the provider answers every call with.
pub(crate) enum Answer {
    /// One chunk ([`CHUNK`]), then success.
    Instant,
    /// This failure at once.
    Fails(Failure),
}

/// A tree's provider actor and what its sessions share.
pub(crate) struct BareRuntime {
    ctx: Arc<Ctx>,
}

impl BareRuntime {
    /// Spawns the provider actor of route `route` (model `model`), answering with `answer`;
    /// sessions append to `store`.
    pub(crate) async fn start(
        store: Arc<dyn SessionStore>,
        route: &str,
        model: &str,
        answer: Answer,
    ) -> anyhow::Result<Self> {
        let (provider, _) = Actor::spawn(None, BareProvider { answer }, ()).await?;
        let ctx = Ctx {
            store,
            provider,
            route: route.to_owned(),
            model: model.to_owned(),
            parked: Arc::default(),
        };
        Ok(Self { ctx: Arc::new(ctx) })
    }

    /// Wakes session `id`: spawns its actor, which opens its log (`session/start` if new).
    pub(crate) async fn session(&self, id: &str) -> anyhow::Result<BareSessionHandle> {
        let args = SessionArgs { ctx: Arc::clone(&self.ctx), id: Arc::from(id) };
        let (actor, ended) = Actor::spawn(None, BareSession, args).await?;
        Ok(BareSessionHandle { actor, ended })
    }

    /// Resolves once `n` steps in all are parked in their wait.
    pub(crate) async fn parked(&self, n: usize) {
        let parked = &self.ctx.parked;
        loop {
            let changed = parked.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if parked.count.load(Ordering::SeqCst) >= n {
                return;
            }
            changed.await;
        }
    }

    /// Stops the provider actor.
    pub(crate) async fn stop(self) {
        let _ = self.ctx.provider.stop_and_wait(None, None).await;
    }
}

/// A bare session as its caller holds it.
pub(crate) struct BareSessionHandle {
    actor: ActorRef<SessionMsg>,
    ended: JoinHandle<()>,
}

impl BareSessionHandle {
    /// Prompts the session; the receiver resolves once the turn's closing batch is durable.
    pub(crate) fn prompt(&self, text: &str) -> anyhow::Result<oneshot::Receiver<TurnOutcome>> {
        let (reply, outcome) = oneshot::channel();
        self.actor
            .send_message(SessionMsg::Prompt(text.to_owned(), reply))
            .map_err(|_| anyhow::anyhow!("the bare session stopped"))?;
        Ok(outcome)
    }

    /// Prompts the session and awaits the turn's outcome.
    pub(crate) async fn turn(&self, text: &str) -> anyhow::Result<TurnOutcome> {
        Ok(self.prompt(text)?.await?)
    }

    /// Tells the session to shut down: stop its turn (`aborted`, `disposed`), write the closing
    /// batch, stop its log, stop.
    pub(crate) fn shutdown(&self) {
        let _ = self.actor.send_message(SessionMsg::Shutdown);
    }

    /// Resolves once the session actor ended.
    pub(crate) async fn ended(self) -> anyhow::Result<()> {
        Ok(self.ended.await?)
    }
}

// --- the session -----------------------------------------------------------------------------

enum SessionMsg {
    Prompt(String, oneshot::Sender<TurnOutcome>),
    Shutdown,
}

struct BareSession;

struct SessionArgs {
    ctx: Arc<Ctx>,
    id: Arc<str>,
}

struct SessionState {
    ctx: Arc<Ctx>,
    log: ActorRef<LogMsg>,
    next_turn: u32,
    running: Option<Running>,
    shutting_down: bool,
}

struct Running {
    turn: u32,
    actor: ActorRef<()>,
    cause: Arc<OnceLock<CancelCause>>,
    reply: oneshot::Sender<TurnOutcome>,
}

impl Actor for BareSession {
    type Msg = SessionMsg;
    type State = SessionState;
    type Arguments = SessionArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<SessionMsg>,
        SessionArgs { ctx, id }: SessionArgs,
    ) -> Result<SessionState, ActorProcessingErr> {
        let store = Arc::clone(&ctx.store);
        let (log, _) = Actor::spawn_linked(None, BareLog, (store, id), myself.get_cell()).await?;
        Ok(SessionState { ctx, log, next_turn: 1, running: None, shutting_down: false })
    }

    async fn handle(
        &self,
        myself: ActorRef<SessionMsg>,
        message: SessionMsg,
        state: &mut SessionState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SessionMsg::Prompt(text, reply) => {
                if state.running.is_some() || state.shutting_down {
                    return Err("the bare session takes one turn at a time".into());
                }
                let turn = state.next_turn;
                state.next_turn += 1;
                let start = vec![
                    Event::UserMessage(UserMessage { text }),
                    Event::TurnStart(TurnStart { turn }),
                ];
                append(&state.log, start).await?;
                let cause = Arc::new(OnceLock::new());
                let args = TurnArgs {
                    ctx: Arc::clone(&state.ctx),
                    log: state.log.clone(),
                    turn,
                    cause: Arc::clone(&cause),
                };
                let (actor, _) =
                    Actor::spawn_linked(None, BareTurn, args, myself.get_cell()).await?;
                state.running = Some(Running { turn, actor, cause, reply });
            }
            SessionMsg::Shutdown => {
                state.shutting_down = true;
                match &state.running {
                    Some(running) => {
                        let _ = running.cause.set(CancelCause::Disposed);
                        running.actor.stop(None);
                    }
                    None => stop_session(&myself, state).await,
                }
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<SessionMsg>,
        event: SupervisionEvent,
        state: &mut SessionState,
    ) -> Result<(), ActorProcessingErr> {
        let SupervisionEvent::ActorTerminated(cell, final_state, _) = event else {
            return Ok(());
        };
        let is_turn = state.running.as_ref().is_some_and(|r| r.actor.get_id() == cell.get_id());
        let Some(Running { turn, reply, .. }) = state.running.take_if(|_| is_turn) else {
            return Ok(());
        };
        let reason = final_state
            .and_then(|mut s| s.take::<TurnState>().ok())
            .and_then(|s| s.report)
            .ok_or("the bare turn stopped without a report")?;
        let closing = vec![
            Event::StepEnd(StepRef { turn, step: 1 }),
            Event::TurnEnd(TurnEnd { turn, reason: reason.clone() }),
            Event::AgentIdle(AgentIdle {}),
        ];
        append(&state.log, closing).await?;
        let _ = reply.send(TurnOutcome { turn, reason });
        if state.shutting_down {
            stop_session(&myself, state).await;
        }
        Ok(())
    }
}

/// Stops the session's log, then the session.
async fn stop_session(myself: &ActorRef<SessionMsg>, state: &mut SessionState) {
    let _ = state.log.stop_and_wait(None, None).await;
    myself.stop(None);
}

// --- the turn --------------------------------------------------------------------------------

struct BareTurn;

struct TurnArgs {
    ctx: Arc<Ctx>,
    log: ActorRef<LogMsg>,
    turn: u32,
    cause: Arc<OnceLock<CancelCause>>,
}

struct TurnState {
    args: TurnArgs,
    step: Option<ActorRef<StepMsg>>,
    report: Option<TurnEndReason>,
}

impl Actor for BareTurn {
    type Msg = ();
    type State = TurnState;
    type Arguments = TurnArgs;

    async fn pre_start(
        &self,
        _: ActorRef<()>,
        args: TurnArgs,
    ) -> Result<TurnState, ActorProcessingErr> {
        Ok(TurnState { args, step: None, report: None })
    }

    async fn post_start(
        &self,
        myself: ActorRef<()>,
        state: &mut TurnState,
    ) -> Result<(), ActorProcessingErr> {
        let args = StepArgs {
            ctx: Arc::clone(&state.args.ctx),
            log: state.args.log.clone(),
            turn: state.args.turn,
            step: 1,
        };
        let (step, _) = Actor::spawn_linked(None, BareStep, args, myself.get_cell()).await?;
        state.step = Some(step);
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<()>,
        event: SupervisionEvent,
        state: &mut TurnState,
    ) -> Result<(), ActorProcessingErr> {
        let SupervisionEvent::ActorTerminated(cell, final_state, _) = event else {
            return Ok(());
        };
        if state.step.as_ref().is_none_or(|s| s.get_id() != cell.get_id()) {
            return Ok(());
        }
        state.step = None;
        let completed =
            final_state.and_then(|mut s| s.take::<StepState>().ok()).is_some_and(|s| s.completed);
        if !completed {
            return Err("the bare step stopped without completing".into());
        }
        state.report = Some(TurnEndReason::Completed);
        myself.stop(None);
        Ok(())
    }

    async fn post_stop(
        &self,
        _: ActorRef<()>,
        state: &mut TurnState,
    ) -> Result<(), ActorProcessingErr> {
        if state.report.is_some() {
            return Ok(());
        }
        // Stopped before it ended: cancelled.
        if let Some(step) = state.step.take() {
            let _ = step.stop_and_wait(None, None).await;
        }
        let cause = state.args.cause.get().cloned().unwrap_or(CancelCause::Parent);
        state.report = Some(TurnEndReason::Aborted { cause });
        Ok(())
    }
}

// --- the step --------------------------------------------------------------------------------

enum StepMsg {
    Chunk(String),
    Outcome(Result<(), Failure>),
}

struct BareStep;

struct StepArgs {
    ctx: Arc<Ctx>,
    log: ActorRef<LogMsg>,
    turn: u32,
    step: u32,
}

struct StepState {
    args: StepArgs,
    chunks: Vec<String>,
    token: CancellationToken,
    wait: Option<JoinHandle<()>>,
    completed: bool,
}

impl Actor for BareStep {
    type Msg = StepMsg;
    type State = StepState;
    type Arguments = StepArgs;

    async fn pre_start(
        &self,
        _: ActorRef<StepMsg>,
        args: StepArgs,
    ) -> Result<StepState, ActorProcessingErr> {
        Ok(StepState {
            args,
            chunks: Vec::new(),
            token: CancellationToken::new(),
            wait: None,
            completed: false,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<StepMsg>,
        state: &mut StepState,
    ) -> Result<(), ActorProcessingErr> {
        let StepArgs { ctx, log, turn, step } = &state.args;
        let (turn, step) = (*turn, *step);
        let start = vec![
            Event::StepStart(StepRef { turn, step }),
            Event::RequestStart(RequestStart {
                turn,
                step,
                attempt: 1,
                provider: ctx.route.clone(),
                model: ctx.model.clone(),
            }),
        ];
        append(log, start).await?;
        ctx.provider.send_message(ProviderMsg::Call(myself))?;
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<StepMsg>,
        message: StepMsg,
        state: &mut StepState,
    ) -> Result<(), ActorProcessingErr> {
        let StepArgs { ctx, log, turn, step } = &state.args;
        let (turn, step) = (*turn, *step);
        match message {
            StepMsg::Chunk(text) => {
                let chunk = AssistantChunk { turn, step, attempt: 1, text: text.clone() };
                append(log, vec![Event::AssistantChunk(chunk)]).await?;
                state.chunks.push(text);
            }
            StepMsg::Outcome(Ok(())) => {
                let text = state.chunks.concat();
                let message = AssistantMessage { turn, step, text, tool_calls: None, usage: None };
                append(log, vec![Event::AssistantMessage(message)]).await?;
                state.completed = true;
                myself.stop(None);
            }
            StepMsg::Outcome(Err(failure)) => {
                let provider = ctx.route.clone();
                let error = RequestError { turn, step, attempt: 1, provider, failure };
                append(log, vec![Event::RequestError(error)]).await?;
                let (token, parked) = (state.token.child_token(), Arc::clone(&ctx.parked));
                state.wait = Some(tokio::spawn(async move {
                    parked.count.fetch_add(1, Ordering::SeqCst);
                    parked.changed.notify_waiters();
                    tokio::select! {
                        () = token.cancelled() => {}
                        () = tokio::time::sleep(Duration::from_secs(3600)) => {}
                    }
                }));
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _: ActorRef<StepMsg>,
        state: &mut StepState,
    ) -> Result<(), ActorProcessingErr> {
        state.token.cancel();
        if let Some(wait) = state.wait.take() {
            let _ = wait.await;
        }
        Ok(())
    }
}

// --- the provider ----------------------------------------------------------------------------

enum ProviderMsg {
    Call(ActorRef<StepMsg>),
}

struct BareProvider {
    answer: Answer,
}

impl Actor for BareProvider {
    type Msg = ProviderMsg;
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<ProviderMsg>, (): ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn handle(
        &self,
        _: ActorRef<ProviderMsg>,
        ProviderMsg::Call(step): ProviderMsg,
        (): &mut (),
    ) -> Result<(), ActorProcessingErr> {
        match &self.answer {
            Answer::Instant => {
                let _ = step.send_message(StepMsg::Chunk(CHUNK.to_owned()));
                let _ = step.send_message(StepMsg::Outcome(Ok(())));
            }
            Answer::Fails(failure) => {
                let _ = step.send_message(StepMsg::Outcome(Err(failure.clone())));
            }
        }
        Ok(())
    }
}
