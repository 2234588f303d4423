//! The bare turn actor: runs its steps one at a time, each spawned linked under it, and reads
//! how each ended from its final state — the tools ran (the next step), the model answered (the
//! turn completed), the failure was not retried (the turn ended in error). Stopped before that
//! (a cancel), its `post_stop` stops its step and waits for it, and it reports `aborted` with the
//! cause the session recorded.

use std::sync::atomic::AtomicU32;
use std::sync::{Arc, OnceLock};

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use rein::runtime::event::{CancelCause, TurnEndReason};
use tokio_util::sync::CancellationToken;

use super::Ctx;
use super::step::{BareStep, StepArgs, StepEnd, StepMsg, StepState};
use crate::bare_log::LogMsg;

/// What the session, the turn and its steps share about one turn.
#[derive(Default)]
pub(super) struct TurnShared {
    /// Why the session stopped the turn.
    pub(super) cause: OnceLock<CancelCause>,
    /// The step whose `step/start` is durable and whose `step/end` is not written (0: none).
    pub(super) open_step: AtomicU32,
    /// Fired by the session's cancel; every step's token is a child of it.
    pub(super) token: CancellationToken,
}

pub(super) struct BareTurn;

pub(super) struct TurnArgs {
    pub(super) ctx: Arc<Ctx>,
    pub(super) log: ActorRef<LogMsg>,
    pub(super) session: Arc<str>,
    pub(super) turn: u32,
    pub(super) shared: Arc<TurnShared>,
}

pub(super) struct TurnState {
    args: TurnArgs,
    /// The running step and its number.
    step: Option<(ActorRef<StepMsg>, u32)>,
    /// How the turn ended, once it did.
    pub(super) report: Option<TurnEndReason>,
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
        start_step(&myself, state, 1).await
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
        let Some((_, step)) = state.step.take_if(|(s, _)| s.get_id() == cell.get_id()) else {
            return Ok(());
        };
        let ended = final_state.and_then(|mut s| s.take::<StepState>().ok()).and_then(|s| s.ended);
        let report = match ended.ok_or("the bare step stopped without an end")? {
            StepEnd::ToolsRan => return start_step(&myself, state, step + 1).await,
            StepEnd::Answered => TurnEndReason::Completed,
            StepEnd::Failed(failure) => TurnEndReason::Error { failure },
        };
        state.report = Some(report);
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
        if let Some((step, _)) = state.step.take() {
            let _ = step.stop_and_wait(None, None).await;
        }
        let cause = state.args.shared.cause.get().cloned().unwrap_or(CancelCause::Parent);
        state.report = Some(TurnEndReason::Aborted { cause });
        Ok(())
    }
}

/// Spawns step `step` linked under the turn.
async fn start_step(
    myself: &ActorRef<()>,
    state: &mut TurnState,
    step: u32,
) -> Result<(), ActorProcessingErr> {
    let TurnArgs { ctx, log, session, turn, shared } = &state.args;
    let args = StepArgs {
        ctx: Arc::clone(ctx),
        log: log.clone(),
        session: Arc::clone(session),
        turn: *turn,
        step,
        shared: Arc::clone(shared),
    };
    let (actor, _) = Actor::spawn_linked(None, BareStep, args, myself.get_cell()).await?;
    state.step = Some((actor, step));
    Ok(())
}
