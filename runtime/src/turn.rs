//! [`TurnActor`]: one turn — its steps, one after another, each a [`StepActor`] linked under it.
//!
//! The turn starts step 1; each step reports how it ended; [`agent_loop::after_step`] decides
//! whether a next step runs or the turn ends (`completed`, `error`, `aborted`, `max-steps`). The
//! turn writes its `turn/end`, tells its session, and stops.
//!
//! # Why a step is an actor of its own
//!
//! A step's work is one long procedure (build the request, stream the attempt, run the waterfall,
//! call tools) that awaits inside the step's handler. Running it in a separate actor keeps the
//! turn's mailbox free and makes the step a unit of supervision: if the step's code panics, ractor
//! tells the turn, which closes the step and ends the turn with an error instead of leaving the
//! session's log with an open turn.

use std::sync::Arc;

use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};

use crate::agent_loop::{self, StepOutcome, TurnDecision};
use crate::cancel::CancelScope;
use crate::census::Alive;
use crate::event::{Event, StepRef, TurnEnd, TurnEndReason};
use crate::runtime::Shared;
use crate::session::actor::{SessionMsg, runtime_failure};
use crate::session_log::SessionLog;
use crate::step::{StepActor, StepArgs, StepMsg};

/// A message to a turn actor.
pub(crate) enum TurnMsg {
    /// A step ended (its `step/end` is written, if it started).
    StepEnded { actor: ActorId, outcome: StepOutcome },
}

/// What a turn runs with.
pub(crate) struct TurnArgs {
    pub(crate) shared: Arc<Shared>,
    pub(crate) session: ActorRef<SessionMsg>,
    pub(crate) log: SessionLog,
    pub(crate) session_id: Arc<str>,
    pub(crate) turn: u32,
    pub(crate) route: String,
    pub(crate) scope: CancelScope,
}

/// The actor of one turn.
pub(crate) struct TurnActor;

/// A turn's state.
pub(crate) struct TurnState {
    args: TurnArgs,
    step: u32,
    step_actor: Option<ActorRef<StepMsg>>,
    ended: bool,
    _alive: Alive,
}

impl TurnActor {
    async fn start_step(
        &self,
        myself: &ActorRef<TurnMsg>,
        state: &mut TurnState,
        step: u32,
    ) -> Result<(), ActorProcessingErr> {
        state.step = step;
        let a = &state.args;
        let args = StepArgs {
            shared: Arc::clone(&a.shared),
            turn_actor: myself.clone(),
            log: a.log.clone(),
            session_id: Arc::clone(&a.session_id),
            turn: a.turn,
            step,
            route: a.route.clone(),
            scope: a.scope.clone(),
        };
        match Actor::spawn_linked(None, StepActor, args, myself.get_cell()).await {
            Ok((actor, _)) => {
                state.step_actor = Some(actor);
                Ok(())
            }
            Err(error) => {
                let failure = runtime_failure(format!("step {step} could not start: {error}"));
                self.end(myself, state, TurnEndReason::Error { failure }).await;
                Ok(())
            }
        }
    }

    /// Writes `turn/end`, tells the session and stops.
    async fn end(&self, myself: &ActorRef<TurnMsg>, state: &mut TurnState, reason: TurnEndReason) {
        if state.ended {
            return;
        }
        state.ended = true;
        let a = &state.args;
        let end = Event::TurnEnd(TurnEnd { turn: a.turn, reason: reason.clone() });
        if let Err(error) = a.log.append(vec![end]).await {
            tracing::error!(session.id = %a.session_id, turn = a.turn, %error, "could not write turn/end");
        }
        let ended = SessionMsg::TurnEnded { actor: myself.get_id(), turn: a.turn, reason };
        let _ = a.session.send_message(ended);
        myself.stop(None);
    }
}

impl Actor for TurnActor {
    type Msg = TurnMsg;
    type State = TurnState;
    type Arguments = TurnArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: TurnArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let alive = args.shared.census.enter();
        Ok(TurnState { args, step: 0, step_actor: None, ended: false, _alive: alive })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        self.start_step(&myself, state, 1).await
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            TurnMsg::StepEnded { actor, outcome } => {
                if state.step_actor.as_ref().is_none_or(|s| s.get_id() != actor) {
                    return Ok(());
                }
                state.step_actor = None;
                let cause = state.args.scope.cause();
                let max = state.args.shared.max_steps;
                match agent_loop::after_step(&outcome, state.step, max, cause.as_ref()) {
                    TurnDecision::NextStep(step) => self.start_step(&myself, state, step).await?,
                    TurnDecision::End(reason) => self.end(&myself, state, reason).await,
                }
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let SupervisionEvent::ActorFailed(who, error) = event {
            if state.step_actor.as_ref().is_some_and(|s| s.get_id() == who.get_id()) {
                // The step crashed: close it and end the turn with the runtime's failure.
                state.step_actor = None;
                let a = &state.args;
                let step = StepRef { turn: a.turn, step: state.step };
                let step_open =
                    a.log.open_turn().await.ok().and_then(|o| o.step) == Some(state.step);
                if step_open {
                    let _ = a.log.append(vec![Event::StepEnd(step)]).await;
                }
                let reason = match a.scope.cause() {
                    Some(cause) => TurnEndReason::Aborted { cause },
                    None => TurnEndReason::Error {
                        failure: runtime_failure(format!("step {} crashed: {error}", state.step)),
                    },
                };
                self.end(&myself, state, reason).await;
            }
        }
        Ok(())
    }
}
