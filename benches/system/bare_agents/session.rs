//! The bare session actor: spawns its log (linked) when it starts, appends `user/message` +
//! `turn/start` and spawns the turn (linked) on a prompt, stops the turn on a cancel, and when
//! the turn ended appends the closing batch — `step/end` if a step was left open, `turn/end`,
//! `agent/idle` — and answers the prompt.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use rein::runtime::event::{
    AgentIdle, CancelCause, Event, StepRef, TurnEnd, TurnStart, UserMessage,
};
use rein::runtime::session::TurnOutcome;
use tokio::sync::oneshot;

use super::Ctx;
use super::turn::{BareTurn, TurnArgs, TurnShared, TurnState};
use crate::bare_log::{BareLog, LogMsg, append};

/// What the session is told.
pub(super) enum SessionMsg {
    /// Run a turn; the reply once its closing batch is durable.
    Prompt(String, oneshot::Sender<TurnOutcome>),
    /// Stop the running turn with this cause; the reply says whether one ran.
    Cancel(CancelCause, oneshot::Sender<bool>),
    /// Stop the running turn (`disposed`), then the log, then the session.
    Shutdown,
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
        Ok(SessionState { ctx, id, log, next_turn: 1, running: None, shutting_down: false })
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
            SessionMsg::Cancel(cause, reply) => {
                let _ = reply.send(stop_turn(state, cause));
            }
            SessionMsg::Shutdown => {
                state.shutting_down = true;
                if !stop_turn(state, CancelCause::Disposed) {
                    stop_session(&myself, state).await;
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
        let Some(Running { turn, shared, reply, .. }) = state.running.take_if(|_| is_turn) else {
            return Ok(());
        };
        let reason = final_state
            .and_then(|mut s| s.take::<TurnState>().ok())
            .and_then(|s| s.report)
            .ok_or("the bare turn stopped without a report")?;
        let mut closing = Vec::with_capacity(3);
        match shared.open_step.load(Ordering::Acquire) {
            0 => {}
            step => closing.push(Event::StepEnd(StepRef { turn, step })),
        }
        closing.push(Event::TurnEnd(TurnEnd { turn, reason: reason.clone() }));
        closing.push(Event::AgentIdle(AgentIdle {}));
        append(&state.log, closing).await?;
        let _ = reply.send(TurnOutcome { turn, reason });
        if state.shutting_down {
            stop_session(&myself, state).await;
        }
        Ok(())
    }
}

/// Records `cause` and stops the running turn; whether one ran.
fn stop_turn(state: &SessionState, cause: CancelCause) -> bool {
    let Some(running) = &state.running else { return false };
    let _ = running.shared.cause.set(cause);
    running.actor.stop(None);
    true
}

/// Stops the session's log, then the session.
async fn stop_session(myself: &ActorRef<SessionMsg>, state: &mut SessionState) {
    let _ = state.log.stop_and_wait(None, None).await;
    myself.stop(None);
}
