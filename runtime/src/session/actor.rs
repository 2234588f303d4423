//! [`SessionActor`]: the actor of an awake session.
//!
//! It opens the session's log on waking — a [`SessionLogActor`](crate::session_log) linked
//! under it — queues prompts, runs one turn at a time (a [`TurnActor`] linked under it), writes
//! each ended turn's closing events, and, when nothing runs and nothing is queued, stays awake
//! for the runtime's idle grace period before it hibernates: it closes its log and stops, once
//! the directory confirms no client message is still on its way (see `directory`).
//!
//! ```text
//! SessionActor
//! ├── SessionLogActor (linked): the only writer of the session's log
//! └── TurnActor (linked, while a turn runs)
//!     └── StepActor (linked, while a step runs)
//! ```
//!
//! Its state is in a `Phase` (a turn runs, between turns, idle with or without its grace timer,
//! hibernating) and an `Ending` (whether a close or the runtime's shutdown waits for it). Every
//! decision it makes is in `session::phase` (what to do next after a message — start a queued
//! prompt, write `agent/idle`, drop the queue, arm the grace timer, hibernate — and whether a
//! closing batch carries `agent/idle`), `agent_loop` (whether a retry applies) or the log's
//! `close_turn` (which closing events a turn needs); this file is wiring.
//!
//! # How a turn ends
//!
//! A turn reports its end by stopping with its report in its state; the session reads it from
//! the termination event ractor sends it (see `turn`). A turn that fails, or ends without a
//! report, crashed: its turn ends `error` naming the crash. Either way the session asks the log
//! to close the turn — `step/end` for a step left open, `turn/end`, and `agent/idle` in the same
//! batch when nothing is queued (one write per ended turn). The turn's outcome resolves once that
//! is durable; when a prompt is queued, the closing events are written alone and the outcome
//! resolves as the next turn starts.
//!
//! # How a turn is cancelled
//!
//! `Session::cancel` (and `close`, and runtime shutdown) records the cause in the turn's scope
//! and stops the turn actor: the stop cascades to its step through the link, their `post_stop`s
//! cancel the tokens every outside wait races, and the turn reports `aborted` with that cause.
//! If this actor itself ends abnormally (it failed, or was killed), ractor kills its children —
//! the turn, its step, the log — and the tokens fire as their states are dropped: no wait of the
//! turn outlives its session. The log then still shows the turn open; the session's lease wakes
//! the session again at once, and the reopened session resumes the turn (or closes it
//! `interrupted`), as after any crash (see "How a crash's turn resumes").
//!
//! # When the log fails
//!
//! An append the store failed (a full disk) ends the session's log (see `session_log`): nothing
//! the session does can be recorded any more, and going on would write a session that never was.
//! However the session learns it — an append of its own failing, or the log actor's failure
//! through the link — it answers every caller waiting on it with [`SessionError::LogFailed`]
//! naming the store's error (the running turn's outcome, the queued prompts, and every message
//! still on its way, like a session whose log could not be opened), takes no more turns and
//! hibernates; its turn and step stop with it. When a turn was left open in the log, its lease
//! then wakes a fresh session at once, which resumes that turn or closes it `interrupted`, as
//! after a crash (if the store still fails, that open fails, and the next call tries again).
//!
//! # How a crash's turn resumes
//!
//! A runtime that resumes (`Resume`, the default) opens the log keeping a turn a crash left open
//! (`OpenOptions::keep_open_turn`), reads that turn's tail and asks `resume::plan::decide`: the
//! turn is closed `interrupted` right there (resumption off, resumed too often, its route gone),
//! or, once the actor started (`post_start`), `turn/resumed` is appended and a turn actor starts
//! at the decided point, running like any turn — cancelled the same way, closed the same way —
//! except that nobody awaits its outcome.
//!
//! # Why `pre_start` never fails
//!
//! The actor is spawned without awaiting its start (under the directory's lock), so client
//! messages may already wait in its mailbox. If opening the log failed in `pre_start`, those
//! messages would be dropped silently. Instead the state records the open error and every
//! message is answered with it; the actor then hibernates, so the next call tries again.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use ractor::{
    Actor, ActorCell, ActorProcessingErr, ActorRef, ActorRuntime, SpawnErr, SupervisionEvent,
};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::closing::Closing;
use super::directory::Lease;
use super::last_route::{LAST_ROUTE, LastRoute, LastRouteProjection};
use super::message::{ClientMsg, Closed, SessionMsg};
use super::phase::{self, Action, Ending, Grace, Phase, Running, View};
use super::turn_handle::{self, Started, TurnHandle, TurnOutcome, TurnSink};
use super::{SessionError, Sessions};
use crate::agent_loop;
use crate::agent_loop::runtime_failure;
use crate::cancel::CancelScope;
use crate::census::{ActorKind, Alive};
use crate::context::Shared;
use crate::event::{AgentIdle, CancelCause, Event, TurnEndReason, TurnStart, UserMessage};
use crate::history::HistoryProjection;
use crate::provider::Generation;
use crate::resume::plan::{self, Decision, Plan};
use crate::session_log::{AppendError, Batch, LogError, OpenOptions, OpenTurn, SessionLog};
use crate::step::TurnCtx;
use crate::turn::{TurnActor, TurnArgs, TurnReport, TurnState};

/// The actor of one awake session.
pub(crate) struct SessionActor {
    sessions: Arc<Sessions>,
    shared: Arc<Shared>,
    id: Arc<str>,
}

impl SessionActor {
    fn new(sessions: Arc<Sessions>, id: Arc<str>) -> Self {
        Self { shared: Arc::clone(&sessions.shared), sessions, id }
    }
}

/// Spawns the actor of session `id`, without awaiting its start: the directory calls it under
/// its lock (see `directory`), so messages may wait in the mailbox before `pre_start` ends.
pub(crate) fn wake(
    sessions: &Arc<Sessions>,
    id: &Arc<str>,
) -> Result<ActorRef<SessionMsg>, SpawnErr> {
    let actor = SessionActor::new(Arc::clone(sessions), Arc::clone(id));
    ActorRuntime::spawn_instant(None, actor, ()).map(|(actor, _starting)| actor)
}

enum Work {
    /// A new user message, with the prompt's generation settings.
    Prompt(String, Generation),
    /// A manual retry: no message, the route's settings alone.
    Retry,
}

struct Queued {
    work: Work,
    route: Option<String>,
    sink: TurnSink,
}

/// The state of an awake session.
pub(crate) struct SessionState {
    log: Result<SessionLog, SessionError>,
    next_turn: u32,
    /// The last turn that ended, and how (boxed: a live session reads it rarely).
    last: Option<Box<(u32, TurnEndReason)>>,
    last_route: Option<String>,
    queue: VecDeque<Queued>,
    /// What it is doing: running a turn, between turns, idle (waiting out its grace or not),
    /// hibernating.
    phase: Phase,
    /// Whether it was asked to stop: callers of `Session::close` wait, or the runtime shuts down.
    ending: Ending,
    /// Client messages handled (the directory compares it with those sent).
    handled: u64,
    /// The ended turn's outcome, held until the next queued turn starts.
    ended: Option<Box<(TurnSink, TurnOutcome)>>,
    /// How many times the grace timer was armed (a `GraceOver` of an earlier arming is stale).
    armed: u64,
    /// The actors of turns a cancellation closed, until they stopped (their steps and the waits
    /// of both settle): the session does not hibernate before.
    stopping: Vec<ActorRef<()>>,
    /// A cancelled turn whose closing batch the log is writing (see `closing`): no turn starts
    /// before the session heard it was written.
    closing: Option<u32>,
    /// The turn a crash left open, resumed once the actor started.
    resume: Option<Plan>,
    /// The handle on the turn this wake resumed, until `Session::resumed` takes it.
    resumed: Option<TurnHandle>,
    /// The census mark; declared before the lease so it is dropped first: shutdown waits for the
    /// leases, and must then find no session actor counted (on a multi-threaded runtime the
    /// other order let it see one for an instant).
    _alive: Alive,
    /// Forgets this actor's directory entry if it ends without hibernating; counts it live.
    lease: Lease,
}

struct SessionInit {
    next_turn: u32,
    last: Option<(u32, TurnEndReason)>,
    last_route: Option<String>,
    /// The turn a crash left open, to continue once the actor started.
    resume: Option<Plan>,
}

impl SessionInit {
    /// A session whose log holds nothing but `session/start`.
    fn new_session() -> Self {
        Self {
            next_turn: OpenTurn::default().next_turn(),
            last: None,
            last_route: None,
            resume: None,
        }
    }
}

impl SessionActor {
    async fn open(
        &self,
        myself: &ActorRef<SessionMsg>,
    ) -> Result<(SessionLog, SessionInit), SessionError> {
        let open_error =
            |source| SessionError::Open { session: self.id.to_string(), source: Arc::new(source) };
        // One read of the log: the session's projections and validators are folded with the
        // built-in ones (see `OpenOptions`).
        let mut options =
            OpenOptions::new().projection(HistoryProjection).projection(LastRouteProjection);
        if self.shared.resume.is_on() {
            // The open turn's tail decides below whether it resumes or is closed `interrupted`.
            options = options.keep_open_turn();
        }
        for validator in &self.shared.validators {
            options = options.validator(validator());
        }
        let (log, report) = SessionLog::open_linked(
            Arc::clone(&self.shared.store),
            Arc::clone(&self.shared.clock),
            &self.id,
            options,
            myself.get_cell(),
            self.shared.census.clone(),
        )
        .await
        .map_err(open_error)?;
        if report.created {
            // A new log holds only its `session/start`: nothing to read back.
            return Ok((log, SessionInit::new_session()));
        }
        let open_turn = report.open_turn;
        let init = async {
            let (open, route) = log.open_turn_and::<LastRouteProjection>(LAST_ROUTE).await?;
            let mut init = SessionInit {
                next_turn: open.next_turn(),
                last: open.last_end.map(|end| (end.turn, end.reason)),
                last_route: route.route,
                resume: None,
            };
            if let Some(turn) = open_turn {
                match self.decide(&log, init.last_route.as_deref()).await? {
                    Decision::Resume(plan) => init.resume = Some(plan),
                    Decision::Interrupt(why) => {
                        tracing::warn!(session.id = %self.id, turn, ?why, "closing a turn a crash left open as interrupted");
                        log.close_turn(turn, TurnEndReason::Interrupted, true).await.map_err(
                            |error| match error {
                                AppendError::Store(error) => LogError::Store(error),
                                AppendError::Closed => LogError::Closed,
                                rejected => LogError::Failed(rejected.to_string()),
                            },
                        )?;
                        init.last = Some((turn, TurnEndReason::Interrupted));
                    }
                }
            }
            Ok(init)
        };
        match init.await {
            Ok(init) => Ok((log, init)),
            Err(error) => {
                log.close().await;
                Err(open_error(error))
            }
        }
    }

    /// What to do with the turn a crash left open in `log` (see `resume::plan`).
    async fn decide(
        &self,
        log: &SessionLog,
        last_route: Option<&str>,
    ) -> Result<Decision, LogError> {
        let events = log.events().await?;
        let fallback = last_route.or(self.shared.default_route.as_deref());
        let shared = &self.shared;
        Ok(plan::decide(plan::open_tail(&events), shared.resume, fallback, |route| {
            shared.routes.contains_key(route)
        }))
    }

    /// Continues the turn a crash left open: `turn/resumed` first, then a turn actor at the
    /// point `plan` names. Nobody awaits its outcome (its caller was in the process that
    /// stopped); a prompt queued meanwhile runs after it.
    async fn resume(&self, myself: &ActorRef<SessionMsg>, state: &mut SessionState, plan: Plan) {
        let Ok(log) = state.log.clone() else { return };
        // Its caller was in the process that stopped: the handle waits for `Session::resumed`.
        let (mut sink, handle) = turn_handle::channel();
        state.resumed = Some(handle);
        let (turn, route) = (plan.turn, plan.route.clone());
        tracing::info!(session.id = %self.id, turn, step = plan.step, pending = plan.pending(), "resuming a turn a crash left open");
        state.lease.turn_open(true);
        match log.write(vec![plan.resumed()]).await {
            Ok(written) => {
                let from_seq = written.first().map_or(0, |e| e.seq);
                let store = Arc::clone(&self.shared.store);
                sink.started(Started::local(turn, from_seq, log.clone(), store, None));
            }
            Err(error @ AppendError::Rejected(_)) => {
                tracing::warn!(session.id = %self.id, turn, %error, "a validator refused turn/resumed: the turn is interrupted");
                self.close_turn(state, turn, TurnEndReason::Interrupted, sink, route).await;
                return;
            }
            Err(error) => {
                self.lost(state, failure(&log, &error), Some(sink));
                return;
            }
        }
        let scope = CancelScope::new();
        let ctx = Arc::new(TurnCtx {
            shared: Arc::clone(&self.shared),
            route: self.shared.route(&route),
            // The prompt's own settings are not in the log: the route's apply.
            generation: Generation::default(),
            log,
            session_id: Arc::clone(&self.id),
            turn,
        });
        let args = TurnArgs { ctx, scope: scope.clone(), resume: Some((plan.step, plan.point)) };
        match Actor::spawn_linked(None, TurnActor, args, myself.get_cell()).await {
            Ok((actor, _)) => {
                state.phase = Phase::Running(Running { turn, actor, scope, sink, route });
            }
            Err(error) => {
                let failure = runtime_failure(format!("turn {turn} could not resume: {error}"));
                let reason = TurnEndReason::Error { failure };
                Box::pin(self.close_turn(state, turn, reason, sink, route)).await;
            }
        }
    }

    /// Starts a queued turn; false when it could not start.
    async fn start(
        &self,
        myself: &ActorRef<SessionMsg>,
        state: &mut SessionState,
        queued: Queued,
    ) -> bool {
        let Queued { work, route, mut sink } = queued;
        let log = match &state.log {
            Ok(log) => log.clone(),
            Err(error) => {
                sink.finish(Err(error.clone()));
                return false;
            }
        };
        let turn = state.next_turn;
        // A retry reruns where the last turn's latest attempt went, as known when it starts (a
        // cancelled turn's route comes with its closing, after the retry may have been asked).
        let route = match work {
            Work::Retry => state.last_route.clone().or_else(|| self.shared.default_route.clone()),
            Work::Prompt(..) => route,
        };
        let route = route.unwrap_or_default();
        let mut batch = Vec::with_capacity(2);
        let generation = match work {
            Work::Prompt(text, generation) => {
                batch.push(Event::UserMessage(UserMessage { text }));
                generation
            }
            Work::Retry => Generation::default(),
        };
        batch.push(Event::TurnStart(TurnStart { turn }));
        // A caller already reading the turn's events gets them all live, from the first.
        let live = if sink.streams() { log.subscribe_batches().await.ok() } else { None };
        let from_seq = match log.write(batch).await {
            Ok(written) => written.first().map_or(0, |e| e.seq),
            Err(error @ AppendError::Rejected(_)) => {
                let message = error.to_string();
                let error = SessionError::NotStarted { session: self.id.to_string(), message };
                sink.finish(Err(error));
                return false;
            }
            Err(error) => {
                self.lost(state, failure(&log, &error), Some(sink));
                return false;
            }
        };
        // The previous turn's outcome resolves now that the session moved on; no `agent/idle` is
        // due, and a grace timer is disarmed.
        resolve_ended(state);
        state.phase = Phase::Idle;
        state.next_turn += 1;
        state.lease.turn_open(true);
        let store = Arc::clone(&self.shared.store);
        sink.started(Started::local(turn, from_seq, log.clone(), store, live));
        let scope = CancelScope::new();
        let ctx = Arc::new(TurnCtx {
            shared: Arc::clone(&self.shared),
            route: self.shared.route(&route),
            generation,
            log,
            session_id: Arc::clone(&self.id),
            turn,
        });
        let args = TurnArgs { ctx, scope: scope.clone(), resume: None };
        match Actor::spawn_linked(None, TurnActor, args, myself.get_cell()).await {
            Ok((actor, _)) => {
                state.phase = Phase::Running(Running { turn, actor, scope, sink, route });
            }
            Err(error) => {
                let failure = runtime_failure(format!("turn {turn} could not start: {error}"));
                Box::pin(self.close_turn(
                    state,
                    turn,
                    TurnEndReason::Error { failure },
                    sink,
                    route,
                ))
                .await;
            }
        }
        true
    }

    /// Turn `turn` ended with `reason`: the log closes it (with `agent/idle` when nothing is
    /// queued) and its outcome resolves (now, or as the next queued turn starts).
    async fn close_turn(
        &self,
        state: &mut SessionState,
        turn: u32,
        reason: TurnEndReason,
        sink: TurnSink,
        route: String,
    ) {
        let idle = phase::turn_end(&self.view(state)).idle;
        if let Ok(log) = state.log.clone() {
            match log.close_turn_shared(turn, reason.clone(), idle).await {
                Ok(_) => {}
                Err(error @ AppendError::Rejected(_)) => {
                    tracing::warn!(session.id = %self.id, turn, %error, "a validator refused the turn's closing events");
                }
                Err(error) => {
                    // The turn stays open in the log: its outcome is the failure, and the lease
                    // wakes a session that closes it.
                    self.lost(state, failure(&log, &error), Some(sink));
                    return;
                }
            }
        }
        state.lease.turn_open(false);
        state.phase = if idle { Phase::Idle } else { Phase::Between };
        state.last_route = Some(route);
        state.last = Some(Box::new((turn, reason.clone())));
        resolve_ended(state);
        let outcome = TurnOutcome { turn, reason };
        if idle {
            // `agent/idle` is durable: whoever awaits the outcome now finds the log idle.
            sink.finish(Ok(outcome));
        } else {
            state.ended = Some(Box::new((sink, outcome)));
        }
    }

    /// The running turn's actor terminated (`report`: how the turn ended, if it said) or failed.
    async fn turn_gone(&self, state: &mut SessionState, ended: Result<TurnReport, String>) {
        let Some(Running { turn, sink, route, .. }) = take_running(state) else { return };
        // The route its latest attempt used (a route switch moves it), as the log's last-route
        // projection folds it.
        let (ended, route) = match ended {
            Ok(report) => (Ok(report.reason), report.route),
            Err(error) => (Err(error), route),
        };
        let reason = ended.unwrap_or_else(|error| {
            tracing::error!(session.id = %self.id, turn, %error, "a turn crashed");
            TurnEndReason::Error {
                failure: runtime_failure(format!("turn {turn} crashed: {error}")),
            }
        });
        self.close_turn(state, turn, reason, sink, route).await;
    }

    /// The log ended under the session (`why`: the store's error): every caller waiting on the
    /// session — `sink`, the running turn, the queued prompts — gets [`SessionError::LogFailed`],
    /// and so does every later message; the running turn stops, and the session hibernates as
    /// soon as it is idle, waking a fresh one if a turn was left open (see the module docs).
    fn lost(&self, state: &mut SessionState, why: String, sink: Option<TurnSink>) {
        if state.log.is_err() {
            return;
        }
        let error = SessionError::LogFailed { session: self.id.to_string(), message: why };
        tracing::error!(session.id = %self.id, %error, "the session's log failed: the session closes");
        // The turn before was closed durably: its outcome stands.
        resolve_ended(state);
        let running = take_running(state).map(|running| {
            running.actor.stop(None);
            state.stopping.push(running.actor);
            running.sink
        });
        let queued = std::mem::take(&mut state.queue).into_iter().map(|queued| queued.sink);
        for sink in sink.into_iter().chain(running).chain(queued) {
            sink.finish(Err(error.clone()));
        }
        if let Phase::Between = state.phase {
            // No `agent/idle` can be written any more.
            state.phase = Phase::Idle;
        }
        state.lease.repair_when_gone();
        state.log = Err(error);
    }

    /// What the decisions of `phase` read of the session now.
    fn view(&self, state: &SessionState) -> View {
        View {
            now: state.phase.now(),
            asked: state.ending.now(),
            queued: !state.queue.is_empty(),
            log_failed: state.log.is_err(),
            no_grace: self.shared.idle_grace.is_zero(),
            closing: state.closing.is_some(),
            stopping: !state.stopping.is_empty(),
        }
    }

    /// After every message: does what [`phase::next`] says — start queued work, or settle idle
    /// (grace period, then hibernation) — asking again after the actions that leave more to do.
    async fn settle(&self, myself: &ActorRef<SessionMsg>, state: &mut SessionState) {
        loop {
            match phase::next(&self.view(state)) {
                Action::Wait => return,
                Action::DropQueue => drop_queue(state, CancelCause::Disposed),
                Action::StartNext => {
                    let Some(next) = next_queued(state) else { return };
                    if self.start(myself, state, next).await {
                        return;
                    }
                }
                Action::WriteIdle => {
                    if !self.write_idle(state).await {
                        return;
                    }
                }
                Action::ArmGrace => return self.arm_grace(myself, state, self.shared.idle_grace),
                Action::Hibernate => return self.hibernate(myself, state).await,
            }
        }
    }

    /// The last turn's closing events went out alone (a turn was queued behind it, and it did not
    /// start): the session is idle now. False when the log failed.
    async fn write_idle(&self, state: &mut SessionState) -> bool {
        state.phase = Phase::Idle;
        if let Ok(log) = state.log.clone() {
            match log.write(vec![Event::AgentIdle(AgentIdle {})]).await {
                Ok(_) => {}
                Err(error @ AppendError::Rejected(_)) => {
                    tracing::warn!(session.id = %self.id, %error, "a validator refused agent/idle");
                }
                Err(error) => {
                    self.lost(state, failure(&log, &error), None);
                    return false;
                }
            }
        }
        resolve_ended(state);
        true
    }

    /// Arms the idle grace timer: a task of the runtime that tells this actor when `grace`
    /// elapsed, unless disarmed first (a turn started, the actor ended).
    fn arm_grace(&self, myself: &ActorRef<SessionMsg>, state: &mut SessionState, grace: Duration) {
        state.armed += 1;
        let generation = state.armed;
        let disarmed = CancellationToken::new();
        let session = myself.clone();
        let token = disarmed.clone();
        self.shared.census.spawn(async move {
            tokio::select! {
                () = token.cancelled() => {}
                () = tokio::time::sleep(grace) => {
                    let _ = session.send_message(SessionMsg::GraceOver(generation));
                }
            }
        });
        state.phase = Phase::Grace(Grace { generation, _disarm: disarmed.drop_guard() });
    }

    /// Hibernates if no client message is on its way: closes the log and stops. Otherwise stays
    /// awake to handle it (and the callers of `close` are answered now).
    async fn hibernate(&self, myself: &ActorRef<SessionMsg>, state: &mut SessionState) {
        if !self.sessions.directory.try_hibernate(&self.id, myself.get_id(), state.handled) {
            for closer in state.ending.take_closers() {
                let _ = closer.send(());
            }
            if let Phase::Grace(_) = state.phase {
                state.phase = Phase::Idle;
            }
            return;
        }
        state.phase = Phase::Hibernating;
        if let Ok(log) = &state.log {
            log.clone().close().await;
        }
        for done in state.ending.take_closers() {
            let _ = done.send(());
        }
        myself.stop(None);
    }

    /// Cancels the running turn with `cause`: `reply` learns whether it ends `aborted` — false
    /// when it already decided to end on its own, which it keeps (see `CancelScope::seal`).
    ///
    /// A cancellation that lands fires the turn's token here (every wait of the turn — a
    /// provider stream, a plugin's backoff, a tool — ends now), stops the turn actor (the stop
    /// cascades to its step through the link) and closes the turn in the log in one operation,
    /// without waiting for the actors: the log's turn guard refuses anything of the turn written
    /// after its `turn/end`, so the log is the same. The log answers the caller itself once the
    /// closing batch is durable, and then this actor (`closing`: no turn starts before). The
    /// turn's actors finish stopping meanwhile (`stopping`: the session does not hibernate
    /// before they are gone); the next turn need not wait for them.
    fn cancel(
        &self,
        myself: &ActorRef<SessionMsg>,
        state: &mut SessionState,
        cause: CancelCause,
        reply: Option<oneshot::Sender<bool>>,
    ) {
        drop_queue(state, cause.clone());
        let landed = match &state.phase {
            Phase::Running(running) => running.scope.record(cause.clone()),
            _ => false,
        };
        let running = if landed { take_running(state) } else { None };
        let Some(Running { turn, actor, scope, sink, route }) = running else {
            if let Some(reply) = reply {
                let _ = reply.send(false);
            }
            return;
        };
        scope.cancel(cause.clone());
        actor.stop(None);
        state.stopping.push(actor);
        let reason = TurnEndReason::Aborted { cause: scope.cause().unwrap_or(cause) };
        // The queue was dropped: the closing batch carries `agent/idle`.
        state.phase = Phase::Idle;
        state.last_route = Some(route);
        state.last = Some(Box::new((turn, reason.clone())));
        let outcome = TurnOutcome { turn, reason: reason.clone() };
        let closing = Closing::new(myself.clone(), sink, outcome, reply);
        match &state.log {
            Ok(log) => {
                state.closing = Some(turn);
                // The log's actor is the last one this handler wakes: it runs next. With the
                // closing batch it reads the route the turn's latest attempt used.
                let route = |last: &LastRoute| last.route.clone();
                log.close_turn_then(
                    turn,
                    reason,
                    true,
                    LAST_ROUTE,
                    route,
                    move |written, route| {
                        closing.done(written, route.flatten());
                    },
                );
            }
            // Nothing can be written any more (the caller is answered as by the log).
            Err(_) => closing.done(Ok(Batch::from([])), None),
        }
    }

    /// A cancelled turn's closing batch was written (the turn is closed: its lease no longer
    /// holds it open), or could not be (the log failed).
    fn closed(&self, state: &mut SessionState, Closed { turn, route, failed }: Closed) {
        if state.closing == Some(turn) {
            state.closing = None;
        }
        if route.is_some() && state.last.as_deref().is_some_and(|(last, _)| *last == turn) {
            state.last_route = route;
        }
        match failed {
            None => state.lease.turn_open(false),
            Some((error, sink)) => match &state.log {
                Ok(log) => {
                    let why = failure(log, &error);
                    self.lost(state, why, Some(sink));
                }
                // The session learnt first that its log failed (the closing went with it).
                Err(failed) => sink.finish(Err(failed.clone())),
            },
        }
    }

    async fn client(
        &self,
        myself: &ActorRef<SessionMsg>,
        state: &mut SessionState,
        message: ClientMsg,
    ) {
        state.handled += 1;
        match message {
            ClientMsg::Open(reply) => {
                let _ = reply.send(state.log.as_ref().map(|_| ()).map_err(Clone::clone));
            }
            ClientMsg::Prompt(prompt, sink) => {
                let route = prompt.route.or_else(|| self.shared.default_route.clone());
                let work = Work::Prompt(prompt.text, prompt.generation);
                state.queue.push_back(Queued { work, route, sink });
            }
            ClientMsg::Retry(sink, reply) => {
                let busy = matches!(state.phase, Phase::Running(_)) || !state.queue.is_empty();
                let last = state.last.as_deref().map(|(turn, reason)| (*turn, reason));
                let allowed = match &state.log {
                    Err(error) => Err(error.clone()),
                    Ok(_) => agent_loop::retry_allowed(last, busy).map_err(SessionError::from),
                };
                match allowed {
                    Ok(()) => {
                        // Its route is decided as it starts (see `start`).
                        state.queue.push_back(Queued { work: Work::Retry, route: None, sink });
                        let _ = reply.send(Ok(()));
                    }
                    Err(error) => {
                        let _ = reply.send(Err(error));
                    }
                }
            }
            ClientMsg::Cancel(cause, reply) => self.cancel(myself, state, cause, Some(reply)),
            ClientMsg::Close(reply) => {
                state.ending.close(reply);
                self.cancel(myself, state, CancelCause::Parent, None);
            }
            ClientMsg::Events(reply) => {
                let events = match &state.log {
                    Ok(log) => log.events().await.map_err(|source| SessionError::Open {
                        session: self.id.to_string(),
                        source: Arc::new(source),
                    }),
                    Err(error) => Err(error.clone()),
                };
                let _ = reply.send(events);
            }
            ClientMsg::Resumed(reply) => {
                let _ = reply.send(state.resumed.take());
            }
            ClientMsg::ConfigChanged(change) => {
                if let Ok(log) = state.log.clone() {
                    match log.write(vec![Event::ConfigChanged(change)]).await {
                        Ok(_) => {}
                        Err(error @ AppendError::Rejected(_)) => {
                            tracing::warn!(session.id = %self.id, %error, "a validator refused config/changed");
                        }
                        Err(error) => self.lost(state, failure(&log, &error), None),
                    }
                }
            }
        }
    }

    /// One message (boxed by `handle`: only while it is handled is its state held).
    async fn message(
        &self,
        myself: &ActorRef<SessionMsg>,
        message: SessionMsg,
        state: &mut SessionState,
    ) {
        match message {
            SessionMsg::Client(message) => self.client(myself, state, message).await,
            SessionMsg::GraceOver(generation) => {
                let current = matches!(&state.phase, Phase::Grace(g) if g.generation == generation);
                if current && phase::grace_over(&self.view(state)) == Action::Hibernate {
                    state.phase = Phase::Idle;
                    self.hibernate(myself, state).await;
                }
                return;
            }
            SessionMsg::Shutdown => {
                state.ending.shutdown();
                self.cancel(myself, state, CancelCause::Disposed, None);
            }
            SessionMsg::Closed(closed) => {
                self.closed(state, closed);
            }
        }
        self.settle(myself, state).await;
    }

    /// A supervision event (boxed by `handle_supervisor_evt`). `Err`: this actor must fail.
    async fn supervision(
        &self,
        myself: &ActorRef<SessionMsg>,
        event: SupervisionEvent,
        state: &mut SessionState,
    ) -> Result<(), String> {
        let is_turn = |cell: &ActorCell| {
            let id = cell.get_id();
            matches!(&state.phase, Phase::Running(running) if running.actor.get_id() == id)
        };
        let is_stopping =
            |cell: &ActorCell| state.stopping.iter().any(|actor| actor.get_id() == cell.get_id());
        let hibernating = matches!(state.phase, Phase::Hibernating);
        let is_log = |cell: &ActorCell| {
            state.log.as_ref().is_ok_and(|log| log.cell().get_id() == cell.get_id())
        };
        match event {
            SupervisionEvent::ActorTerminated(cell, final_state, _) if is_turn(&cell) => {
                let report =
                    final_state.and_then(|mut s| s.take::<TurnState>().ok()).and_then(|s| s.report);
                let ended =
                    report.ok_or_else(|| "it stopped without reporting how it ended".to_owned());
                self.turn_gone(state, ended).await;
            }
            SupervisionEvent::ActorFailed(cell, error) if is_turn(&cell) => {
                self.turn_gone(state, Err(error.to_string())).await;
            }
            // A cancelled turn's actor stopped (or crashed while stopping), its turn closed.
            SupervisionEvent::ActorTerminated(cell, _, _)
            | SupervisionEvent::ActorFailed(cell, _)
                if is_stopping(&cell) =>
            {
                state.stopping.retain(|actor| actor.get_id() != cell.get_id());
            }
            SupervisionEvent::ActorTerminated(cell, _, _) if is_log(&cell) && !hibernating => {
                self.lost(state, "the session log closed".to_owned(), None);
            }
            SupervisionEvent::ActorFailed(cell, error) if is_log(&cell) && !hibernating => {
                // The store failed an append, or a validator or projection panicked.
                self.lost(state, error.to_string(), None);
            }
            _ => return Ok(()),
        }
        self.settle(myself, state).await;
        Ok(())
    }
}

/// Why an append of the session failed, for [`SessionError::LogFailed`]: the store's error when
/// the log has ended on one.
fn failure(log: &SessionLog, error: &AppendError) -> String {
    match (error, log.failure()) {
        (AppendError::Closed, Some(why)) => why.to_owned(),
        _ => error.to_string(),
    }
}

/// The running turn, if one runs (the phase becomes idle).
fn take_running(state: &mut SessionState) -> Option<Running> {
    match std::mem::replace(&mut state.phase, Phase::Idle) {
        Phase::Running(running) => Some(running),
        other => {
            state.phase = other;
            None
        }
    }
}

/// Resolves the outcome of the turn that ended, if it is still held.
fn resolve_ended(state: &mut SessionState) {
    if let Some(ended) = state.ended.take() {
        let (sink, outcome) = *ended;
        sink.finish(Ok(outcome));
    }
}

fn drop_queue(state: &mut SessionState, cause: CancelCause) {
    for queued in std::mem::take(&mut state.queue) {
        queued.sink.finish(Err(SessionError::Dropped { cause: cause.clone() }));
    }
}

/// The next queued work. An emptied queue gives its buffer back: a session usually has one
/// prompt queued at a time, and it should not keep the buffer while its turn runs.
fn next_queued(state: &mut SessionState) -> Option<Queued> {
    let next = state.queue.pop_front();
    if state.queue.is_empty() {
        state.queue = VecDeque::new();
    }
    next
}

impl Actor for SessionActor {
    type Msg = SessionMsg;
    type State = SessionState;
    type Arguments = ();

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        (): (),
    ) -> Result<Self::State, ActorProcessingErr> {
        let alive = self.shared.census.enter(ActorKind::Session);
        let lease =
            self.sessions.directory.lease(&self.sessions, Arc::clone(&self.id), myself.get_id());
        let (log, mut init) = match Box::pin(self.open(&myself)).await {
            Ok((log, init)) => (Ok(log), init),
            Err(error) => {
                tracing::warn!(session.id = %self.id, %error, "session could not open");
                (Err(error), SessionInit::new_session())
            }
        };
        Ok(SessionState {
            resume: init.resume.take(),
            stopping: Vec::new(),
            closing: None,
            resumed: None,
            log,
            next_turn: init.next_turn,
            last: init.last.map(Box::new),
            last_route: init.last_route,
            queue: VecDeque::new(),
            phase: Phase::Idle,
            ending: Ending::Open,
            handled: 0,
            ended: None,
            armed: 0,
            lease,
            _alive: alive,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(plan) = state.resume.take() {
            Box::pin(self.resume(&myself, state, plan)).await;
            Box::pin(self.settle(&myself, state)).await;
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        Box::pin(self.message(&myself, message, state)).await;
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        Box::pin(self.supervision(&myself, event, state)).await.map_err(Into::into)
    }
}
