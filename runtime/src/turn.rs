//! A turn: its steps, one after another, run by one task its session owns.
//!
//! The turn runs step 1; each step reports how it ended; [`agent_loop::after_step`] decides
//! whether a next step runs or the turn ends (`completed`, `error`, `aborted`, `max-steps`). The
//! turn tells its session ([`SessionMsg::TurnEnded`]) with its closing events, which the
//! session writes.
//!
//! # Why the session writes a turn's closing events
//!
//! After a turn's `turn/end` the session writes `agent/idle` (nothing queued) — and the turn's
//! outcome resolves only once that is durable. Written by the turn, `turn/end` and `agent/idle`
//! were two appends a message apart; written by the session, they are one batch: one log turn,
//! one store write (one group commit for a durable store) per ended turn, which is the bulk of a
//! mass cancel. When another prompt is queued, the session writes the closing events alone,
//! then the next turn's start (not in one batch: a validator refusing the next prompt must not
//! take the previous turn's end with it). Should the session actor die in between, the log
//! shows the turn open, and the next wake-up closes it `interrupted`, as after any crash.
//!
//! # Why a turn is a task, not an actor
//!
//! A turn never receives a message: it is cancelled through its token, and it reports once, at
//! its end. An actor would give it a mailbox nobody writes to — and ractor allocates every
//! actor's two channels eagerly (a 32-slot block each, ≈ 4.4 KiB with their headers) plus its
//! task and the boxed processing loop: ≈ 6.3 KiB per actor measured, in a budget of 24 KiB for a
//! whole turn parked in a retry wait (DESIGN §6; `docs/architecture.md` has the figures). What
//! the actor gave, the task keeps:
//!
//! - **Supervision.** A panic is caught at the task's boundary and reported to the session
//!   ([`SessionMsg::TurnCrashed`]), which closes the turn with the runtime's failure — what its
//!   `handle_supervisor_evt` did for a crashed turn actor. A step's panic is caught at the
//!   step's own boundary ([`step::run`]).
//! - **The link.** The session owns the task through a [`TurnLink`] in its state: however the
//!   session actor ends (stopped, failed, killed), dropping its state cancels the turn's scope
//!   (cause `parent`) and aborts the task — what ractor does to a linked child when its
//!   supervisor ends, and more: the turn's token fires, so waits outside the turn (a plugin's
//!   backoff, a provider stream) end too.
//! - **The census.** The task is tracked by the runtime's [`Census`](crate::census::Census), so
//!   shutdown still proves that no turn outlived it.
//!
//! # Why a turn starts in its session's handler
//!
//! A turn's first stretch — build the request from the log, write `step/start` and
//! `request/start`, hand the attempt to the provider actor — never waits on anything but the
//! log, which answers at once when nobody else is writing. Spawning the task first made every
//! turn pay a wake-up of another worker thread before it did any of that, on the latency a
//! caller waits for (DESIGN §6 budgets a turn's overhead at four ractor round trips). So the
//! session polls the new turn once, in its handler (`first_poll`), and spawns the rest as the
//! turn's task when it first waits — usually on the provider's answer. A turn that ends without
//! ever waiting (no such route, a cancelled scope) needs no task at all; its report to the
//! session is already in the session's mailbox. The session's mailbox is held only for that
//! first stretch, never through a wait.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use ractor::ActorRef;
use tokio::task::AbortHandle;

use crate::agent_loop::{self, TurnDecision};
use crate::cancel::CancelScope;
use crate::crash::panic_message;
use crate::event::{CancelCause, Event, TurnEnd, TurnEndReason};
use crate::first_poll::{FirstPoll, first_poll};
use crate::runtime::Shared;
use crate::session::actor::SessionMsg;
use crate::session_log::SessionLog;
use crate::step;
use crate::store::BoxFuture;

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

/// The session's hold on its running turn: dropping it while armed cancels the turn (cause
/// `parent`) and aborts its task.
pub(crate) struct TurnLink {
    scope: CancelScope,
    task: Option<AbortHandle>,
}

impl TurnLink {
    /// The turn reported its end: let its task finish on its own.
    pub(crate) fn disarm(mut self) {
        self.task = None;
    }
}

impl Drop for TurnLink {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            self.scope.cancel(CancelCause::Parent);
            task.abort();
        }
    }
}

/// Starts the turn: runs it up to its first wait right here, then continues it as a task
/// (tracked by the census) — see "# Why a turn starts in its session's handler".
pub(crate) fn spawn(args: TurnArgs) -> TurnLink {
    let scope = args.scope.clone();
    let (session, turn) = (args.session.clone(), args.turn);
    let census = args.shared.census.clone();
    let start = || -> BoxFuture<'static, ()> { Box::pin(census.track(run(args))) };
    let task = match first_poll(start) {
        // It ended without waiting (its report to the session is already sent).
        FirstPoll::Ready(()) => None,
        FirstPoll::Pending(rest) => Some(tokio::spawn(rest).abort_handle()),
        // `run` catches what its steps throw; this is the turn's own wiring failing.
        FirstPoll::Panicked(panic) => {
            let error = panic_message(panic.as_ref());
            let _ = session.send_message(SessionMsg::TurnCrashed { turn, error });
            None
        }
    };
    TurnLink { scope, task }
}

/// The turn's task: its steps, then its report to the session with its closing events.
async fn run(args: TurnArgs) {
    let (session, turn) = (args.session.clone(), args.turn);
    let ran = AssertUnwindSafe(steps(&args)).catch_unwind().await;
    let report = match ran {
        Ok((reason, closing)) => SessionMsg::TurnEnded { turn, reason, closing },
        Err(panic) => SessionMsg::TurnCrashed { turn, error: panic_message(panic.as_ref()) },
    };
    let _ = session.send_message(report);
}

/// Runs the steps until the turn ends; returns why it ended and its closing events (a cancelled
/// step's `step/end`, the `turn/end`), which the session writes (see "# Why the session writes
/// a turn's closing events").
async fn steps(a: &TurnArgs) -> (TurnEndReason, Vec<Event>) {
    let mut step = 1;
    let (reason, step_end) = loop {
        let ended = step::run(a, step).await;
        let cause = a.scope.cause();
        match agent_loop::after_step(&ended.outcome, step, a.shared.max_steps, cause.as_ref()) {
            TurnDecision::NextStep(next) => {
                // Only a cancelled step leaves its `step/end`, and it ends the turn; written
                // here all the same, should that ever change.
                if let Some(end) = ended.end {
                    if let Err(error) = a.log.append(vec![end]).await {
                        tracing::error!(session.id = %a.session_id, turn = a.turn, %error, "could not write step/end");
                    }
                }
                step = next;
            }
            TurnDecision::End(reason) => break (reason, ended.end),
        }
    };
    let mut closing = Vec::with_capacity(3);
    closing.extend(step_end);
    closing.push(Event::TurnEnd(TurnEnd { turn: a.turn, reason: reason.clone() }));
    (reason, closing)
}
