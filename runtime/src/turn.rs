//! [`TurnActor`]: one per running turn, linked under its session; it runs the turn's steps, one
//! [`StepActor`](crate::step::StepActor) at a time, each linked under it.
//!
//! The turn spawns step 1 — or, resuming a turn a crash left open, the open step at the point
//! the log decided (`resume::plan`), or the decision that follows the step that had ended. A step reports its end by stopping with its outcome in its state;
//! ractor hands that state to the turn with the step's termination (the supervision event), and
//! [`agent_loop::after_step`] decides: the next step, or the turn's end. The turn reports its own
//! end the same way to its session — it stops with its [`TurnReport`] in its state — and the
//! session writes the closing events (see `session::actor`).
//!
//! # Why a child reports through its termination
//!
//! A step's end *is* its termination, and ractor tells a supervisor about a child's termination
//! in any case, after the child's `post_stop`. Carrying the outcome in that event is one message
//! where a report followed by a stop would be two, and it cannot race: supervision events
//! overtake ordinary messages in ractor's mailbox, so a report sent as a message could arrive
//! after the termination it announced. A child that ends without a report — it failed, or was
//! killed — is a crash of that child.
//!
//! # Cancellation
//!
//! The session cancels a turn by recording the cause in the turn's [`CancelScope`] and stopping
//! the turn actor. Its `post_stop` cancels the scope (every wait of the turn — a provider
//! stream, a plugin's backoff, a tool — races that scope's token or a child of it), then stops
//! its step and waits for it (the step's own `post_stop` lets its waits settle, so nothing of
//! the turn is written afterwards), and reports `aborted` with the recorded cause. A turn that
//! ends on its own seals its scope as it decides; a cause recorded before that still makes it
//! `aborted`, and one recorded after it is refused (the session then answers that its cancel
//! did not land — see [`CancelScope::seal`]). A killed turn
//! runs no `post_stop`; its state's guard cancels the scope as the state is dropped, so its waits
//! end all the same.
//!
//! # Supervision
//!
//! A step that panics fails; the turn ends `error` naming the step that crashed (or `aborted`, if
//! it was being cancelled). A panic in the turn's own code fails the turn actor, and its session
//! closes it the same way (see `session::actor`).

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio_util::sync::DropGuard;

use crate::agent_loop::{self, StepOutcome, TurnDecision, runtime_failure};
use crate::cancel::CancelScope;
use crate::census::{ActorKind, Alive};
use crate::context::RouteUse;
use crate::event::{CancelCause, TurnEndReason};
use crate::resume::plan::{Point, StepPoint};
use crate::step::{StepActor, StepArgs, StepMsg, StepState, TurnCtx};

/// How a turn ended, carried in its final state to its session.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TurnReport {
    pub(crate) reason: TurnEndReason,
    /// The route of its latest attempt (where a route switch left it): what a manual retry of
    /// the turn runs on, as the session's last-route projection folds it from the log.
    pub(crate) route: String,
}

/// The actor of one running turn.
pub(crate) struct TurnActor;

/// What a turn actor starts with.
pub(crate) struct TurnArgs {
    pub(crate) ctx: Arc<TurnCtx>,
    pub(crate) scope: CancelScope,
    /// Where a turn a crash left open continues: its step and the point in it (see `resume`);
    /// `None`: a new turn, from step 1.
    pub(crate) resume: Option<(u32, Point)>,
}

/// A turn actor's state.
pub(crate) struct TurnState {
    ctx: Arc<TurnCtx>,
    scope: CancelScope,
    step: u32,
    /// The route the next step starts on: the turn's, until a step was switched to another.
    route: RouteUse,
    current: Option<ActorRef<StepMsg>>,
    /// Set once the turn ended: what its session writes.
    pub(crate) report: Option<TurnReport>,
    /// Where it resumes, until it started.
    resume: Option<(u32, Point)>,
    _cancel_on_drop: DropGuard,
    _alive: Alive,
}

impl TurnActor {
    /// Spawns step `step` linked under this turn, or ends the turn if it cannot.
    async fn run_step(
        &self,
        myself: &ActorRef<()>,
        state: &mut TurnState,
        step: u32,
        resume: Option<StepPoint>,
    ) {
        state.step = step;
        let args = StepArgs {
            ctx: Arc::clone(&state.ctx),
            step,
            route: state.route.clone(),
            scope: state.scope.child(),
            resume,
        };
        match Actor::spawn_linked(None, StepActor, args, myself.get_cell()).await {
            Ok((actor, _)) => state.current = Some(actor),
            Err(error) => {
                let failure = runtime_failure(format!("step {step} could not start: {error}"));
                self.end(myself, state, TurnEndReason::Error { failure });
            }
        }
    }

    /// The turn ended: keep the report and stop (the session reads it from the final state). A
    /// cancellation the session recorded before this decision wins — its caller was told it
    /// landed — and one recorded after it does not land (the scope is sealed).
    fn end(&self, myself: &ActorRef<()>, state: &mut TurnState, reason: TurnEndReason) {
        let reason = match state.scope.seal() {
            Some(cause) => TurnEndReason::Aborted { cause },
            None => reason,
        };
        state.current = None;
        state.report = Some(TurnReport { reason, route: state.route.name.clone() });
        myself.stop(None);
    }

    /// The current step ended with `outcome` (`None`: it crashed, with this error).
    async fn step_ended(
        &self,
        myself: &ActorRef<()>,
        state: &mut TurnState,
        outcome: Result<StepOutcome, String>,
    ) {
        let cause = state.scope.cause();
        let outcome = outcome.unwrap_or_else(|error| {
            let step = state.step;
            tracing::error!(session.id = %state.ctx.session_id, turn = state.ctx.turn, step, %error, "a step crashed");
            StepOutcome::Failed(runtime_failure(format!("step {step} crashed: {error}")))
        });
        let max = state.ctx.shared.max_steps;
        match agent_loop::after_step(&outcome, state.step, max, cause.as_ref()) {
            TurnDecision::NextStep(next) => self.run_step(myself, state, next, None).await,
            TurnDecision::End(reason) => self.end(myself, state, reason),
        }
    }
}

impl Actor for TurnActor {
    type Msg = ();
    type State = TurnState;
    type Arguments = TurnArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<()>,
        args: TurnArgs,
    ) -> Result<TurnState, ActorProcessingErr> {
        let TurnArgs { ctx, scope, resume } = args;
        Ok(TurnState {
            _alive: ctx.shared.census.enter(ActorKind::Turn),
            _cancel_on_drop: scope.guard(),
            route: ctx.route.clone(),
            ctx,
            scope,
            step: 0,
            current: None,
            report: None,
            resume,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<()>,
        state: &mut TurnState,
    ) -> Result<(), ActorProcessingErr> {
        match state.resume.take() {
            None | Some((_, Point::AfterStep { after: 0 })) => {
                Box::pin(self.run_step(&myself, state, 1, None)).await;
            }
            Some((step, Point::InStep(point))) => {
                Box::pin(self.run_step(&myself, state, step, Some(point))).await;
            }
            // Resumed where a step had ended: the turn decides what follows, as if it just had.
            Some((step, Point::Answered)) => {
                state.step = step;
                Box::pin(self.step_ended(&myself, state, Ok(StepOutcome::Completed))).await;
            }
            Some((_, Point::AfterStep { after })) => {
                state.step = after;
                Box::pin(self.step_ended(&myself, state, Ok(StepOutcome::ToolsRan))).await;
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<()>,
        event: SupervisionEvent,
        state: &mut TurnState,
    ) -> Result<(), ActorProcessingErr> {
        let is_current = |cell: &ractor::ActorCell| {
            state.current.as_ref().is_some_and(|c| c.get_id() == cell.get_id())
        };
        let outcome = match event {
            SupervisionEvent::ActorTerminated(cell, final_state, _) if is_current(&cell) => {
                let step = final_state.and_then(|mut s| s.take::<StepState>().ok());
                if let Some(step) = &step {
                    // A step switched to another route: the turn's later steps start there.
                    state.route = step.route.clone();
                }
                step.and_then(|s| s.report)
                    .ok_or_else(|| "it stopped without reporting how it ended".to_owned())
            }
            SupervisionEvent::ActorFailed(cell, error) if is_current(&cell) => {
                Err(error.to_string())
            }
            _ => return Ok(()),
        };
        state.current = None;
        state.ctx.shared.faults.at_turn(state.ctx.turn);
        Box::pin(self.step_ended(&myself, state, outcome)).await;
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<()>,
        state: &mut TurnState,
    ) -> Result<(), ActorProcessingErr> {
        if state.report.is_some() {
            state.ctx.shared.faults.at_turn_end(state.ctx.turn).await;
            return Ok(());
        }
        // Stopped before it ended: cancelled (the session recorded why).
        state.scope.cancel(CancelCause::Parent);
        if let Some(step) = state.current.take() {
            let _ = step.stop_and_wait(None, None).await;
        }
        let cause = state.scope.cause().unwrap_or(CancelCause::Parent);
        let route = state.route.name.clone();
        state.report = Some(TurnReport { reason: TurnEndReason::Aborted { cause }, route });
        Ok(())
    }
}
