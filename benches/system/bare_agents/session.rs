//! The bare session actor: spawns its log (linked) when it starts, appends `user/message` +
//! `turn/start` and spawns the turn (linked) on a prompt, and when the turn ended appends the
//! closing batch — `step/end` if a step was left open, `turn/end`, `agent/idle` — and answers
//! the prompt. A cancel is rein's: it fires the turn's token, stops the turn (the cascade goes on
//! through the links) and closes the turn in one log operation that answers the cancel's caller
//! from the log; the session stops only once the cancelled turns' actors are gone.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use rein::runtime::event::{
    AgentIdle, CancelCause, Envelope, Event, StepRef, TurnEnd, TurnEndReason, TurnStart,
    UserMessage,
};
use rein::runtime::session::TurnOutcome;
use tokio::sync::{mpsc, oneshot};

use super::Ctx;
use super::turn::{BareTurn, TurnArgs, TurnShared, TurnState};
use crate::bare_log::{BareLog, LogMsg, append};

/// What the session is told.
pub(super) enum SessionMsg {
    /// Run a turn; the reply once its closing batch is durable; its batches to the subscriber,
    /// if one is given (subscribed before the turn's first event).
    Prompt(String, oneshot::Sender<TurnOutcome>, Option<mpsc::UnboundedSender<Arc<[Envelope]>>>),
    /// Cancel the running turn with this cause; the reply says whether one ran (once its
    /// closing batch is durable).
    Cancel(CancelCause, oneshot::Sender<bool>),
    /// Cancel the running turn (`disposed`), then stop the log, then the session.
    Shutdown,
    /// A cancelled turn's closing batch is written (from the log).
    Closed,
    /// Answer once the session runs (what rein's open waits for).
    Ready(oneshot::Sender<()>),
}

pub(super) struct BareSession;

pub(super) struct SessionArgs {
    pub(super) ctx: Arc<Ctx>,
    pub(super) id: Arc<str>,
}

pub(super) struct SessionState {
    ctx: Arc<Ctx>,
    id: Arc<str>,
    log: ActorRef<LogMsg>,
    next_turn: u32,
    running: Option<Running>,
    /// Cancelled turns' actors still stopping.
    stopping: Vec<ActorRef<()>>,
    /// A cancelled turn's closing batch is on its way.
    closing: bool,
    shutting_down: bool,
}

struct Running {
    turn: u32,
    actor: ActorRef<()>,
    shared: Arc<TurnShared>,
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
        let args = (Arc::clone(&ctx.store), Arc::clone(&id));
        let (log, _) = Actor::spawn_linked(None, BareLog, args, myself.get_cell()).await?;
        Ok(SessionState {
            ctx,
            id,
            log,
            next_turn: 1,
            running: None,
            stopping: Vec::new(),
            closing: false,
            shutting_down: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<SessionMsg>,
        message: SessionMsg,
        state: &mut SessionState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SessionMsg::Prompt(text, reply, subscriber) => {
                if state.running.is_some() || state.shutting_down {
                    return Err("the bare session takes one turn at a time".into());
                }
                let turn = state.next_turn;
                state.next_turn += 1;
                if let Some(subscriber) = subscriber {
                    state.log.send_message(LogMsg::Subscribe(subscriber))?;
                }
                let start = vec![
                    Event::UserMessage(UserMessage { text }),
                    Event::TurnStart(TurnStart { turn }),
                ];
                append(&state.log, start).await?;
                let shared = Arc::new(TurnShared::default());
                let args = TurnArgs {
                    ctx: Arc::clone(&state.ctx),
                    log: state.log.clone(),
                    session: Arc::clone(&state.id),
                    turn,
                    shared: Arc::clone(&shared),
                };
                let (actor, _) =
                    Actor::spawn_linked(None, BareTurn, args, myself.get_cell()).await?;
                state.running = Some(Running { turn, actor, shared, reply });
            }
            SessionMsg::Cancel(cause, reply) => cancel(&myself, state, cause, Some(reply))?,
            SessionMsg::Shutdown => {
                state.shutting_down = true;
                cancel(&myself, state, CancelCause::Disposed, None)?;
            }
            SessionMsg::Closed => state.closing = false,
            SessionMsg::Ready(reply) => {
                let _ = reply.send(());
            }
        }
        stop_if_done(&myself, state).await;
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<SessionMsg>,
        event: SupervisionEvent,
        state: &mut SessionState,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, final_state) = match event {
            SupervisionEvent::ActorTerminated(cell, final_state, _) => (cell, final_state),
            SupervisionEvent::ActorFailed(cell, _) => (cell, None),
            _ => return Ok(()),
        };
        if state.stopping.iter().any(|actor| actor.get_id() == cell.get_id()) {
            state.stopping.retain(|actor| actor.get_id() != cell.get_id());
            stop_if_done(&myself, state).await;
            return Ok(());
        }
        let is_turn = state.running.as_ref().is_some_and(|r| r.actor.get_id() == cell.get_id());
        let Some(Running { turn, shared, reply, .. }) = state.running.take_if(|_| is_turn) else {
            return Ok(());
        };
        let reason = final_state
            .and_then(|mut s| s.take::<TurnState>().ok())
            .and_then(|s| s.report)
            .ok_or("the bare turn stopped without a report")?;
        append(&state.log, closing(turn, &shared, reason.clone())).await?;
        let _ = reply.send(TurnOutcome { turn, reason });
        stop_if_done(&myself, state).await;
        Ok(())
    }
}

/// The batch that closes turn `turn`.
fn closing(turn: u32, shared: &TurnShared, reason: TurnEndReason) -> Vec<Event> {
    let mut closing = Vec::with_capacity(3);
    match shared.open_step.load(Ordering::Acquire) {
        0 => {}
        step => closing.push(Event::StepEnd(StepRef { turn, step })),
    }
    closing.push(Event::TurnEnd(TurnEnd { turn, reason }));
    closing.push(Event::AgentIdle(AgentIdle {}));
    closing
}

/// Cancels the running turn: records the cause, fires its token, stops it, and has the log
/// write its closing batch and answer `reply` and the prompt's caller.
fn cancel(
    myself: &ActorRef<SessionMsg>,
    state: &mut SessionState,
    cause: CancelCause,
    reply: Option<oneshot::Sender<bool>>,
) -> Result<(), ActorProcessingErr> {
    let Some(Running { turn, actor, shared, reply: outcome }) = state.running.take() else {
        if let Some(reply) = reply {
            let _ = reply.send(false);
        }
        return Ok(());
    };
    let _ = shared.cause.set(cause.clone());
    shared.token.cancel();
    actor.stop(None);
    state.stopping.push(actor);
    state.closing = true;
    let reason = TurnEndReason::Aborted { cause };
    let session = myself.clone();
    let answered = TurnOutcome { turn, reason: reason.clone() };
    let then = Box::new(move |_| {
        let _ = session.send_message(SessionMsg::Closed);
        if let Some(reply) = reply {
            let _ = reply.send(true);
        }
        let _ = outcome.send(answered);
    });
    state.log.send_message(LogMsg::Close(closing(turn, &shared, reason), then))?;
    Ok(())
}

/// Once shutting down with nothing running, closing or stopping: stops the log, then itself.
async fn stop_if_done(myself: &ActorRef<SessionMsg>, state: &mut SessionState) {
    if state.shutting_down && state.running.is_none() && !state.closing && state.stopping.is_empty()
    {
        let _ = state.log.stop_and_wait(None, None).await;
        myself.stop(None);
    }
}
