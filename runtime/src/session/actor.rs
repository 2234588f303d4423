//! [`SessionActor`]: the actor of an awake session.
//!
//! It owns the session's log while awake (it opens it on waking and closes it on hibernating),
//! queues prompts, runs one turn at a time (a task it holds through a [`TurnLink`], see `turn`),
//! writes the ended turn's closing events and `agent/idle` when nothing runs and nothing is
//! queued (a turn's outcome resolves after them, or as the next queued turn starts), and then
//! hibernates: it closes its log and stops, once the directory confirms no client message is
//! still on its way (see `directory`).
//!
//! Every decision it makes is in `agent_loop` (whether a retry applies) or trivially local (the
//! queue is FIFO); this file is wiring.
//!
//! # Why `pre_start` never fails
//!
//! The actor is spawned without awaiting its start (under the directory's lock), so client
//! messages may already wait in its mailbox. If opening the log failed in `pre_start`, those
//! messages would be dropped silently. Instead the state records the open error and every
//! message is answered with it; the actor then hibernates, so the next call tries again.
//!
//! # Why the handlers are boxed
//!
//! ractor boxes an actor's processing loop once, for the actor's whole life, and that box is as
//! large as the largest handler future (starting a turn, closing a crashed one, hibernating:
//! ≈ 3.9 KiB in a release build). An awake session spends nearly all its life waiting for a
//! message while its turn runs, so `handle` boxes its body: those bytes are allocated per
//! message, while it is handled, instead of for as long as the session is awake (the loop's box
//! is then ≈ 0.8 KiB, what any actor's is).

use std::collections::VecDeque;
use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::oneshot;

use super::directory::Lease;
use super::last_route::{LAST_ROUTE, LastRouteProjection};
use super::{Prompt, SessionError};
use crate::agent_loop::{self, RUNTIME_ERROR};
use crate::cancel::CancelScope;
use crate::census::Alive;
use crate::event::{
    AgentIdle, CancelCause, ConfigChanged, Envelope, Event, StepRef, TurnEnd, TurnEndReason,
    TurnStart, UserMessage,
};
use crate::failure::Failure;
use crate::history::HistoryProjection;
use crate::runtime::Shared;
use crate::session_log::{OpenOptions, SessionLog};
use crate::turn::{self, TurnArgs, TurnLink};
use crate::turn_handle::{Started, TurnOutcome, TurnSink};

/// A message to a session actor.
pub(crate) enum SessionMsg {
    /// From a [`Session`](super::Session) handle, through the directory (counted).
    Client(ClientMsg),
    /// The running turn ended; `closing` (a cancelled step's `step/end`, the `turn/end`) is for
    /// this actor to write (see `turn`).
    TurnEnded { turn: u32, reason: TurnEndReason, closing: Vec<Event> },
    /// The running turn's task panicked before writing its `turn/end`.
    TurnCrashed { turn: u32, error: String },
    /// The log closed or failed, and not by this actor's hibernation.
    LogClosed,
}

/// A client's request.
pub(crate) enum ClientMsg {
    Open(oneshot::Sender<Result<(), SessionError>>),
    Prompt(Prompt, TurnSink),
    Retry(TurnSink, oneshot::Sender<Result<(), SessionError>>),
    Cancel(CancelCause, oneshot::Sender<bool>),
    Close(oneshot::Sender<()>),
    Events(oneshot::Sender<Result<Vec<Envelope>, SessionError>>),
    ConfigChanged(ConfigChanged),
}

/// The actor of one awake session.
pub(crate) struct SessionActor {
    shared: Arc<Shared>,
    id: Arc<str>,
}

impl SessionActor {
    pub(crate) fn new(shared: Arc<Shared>, id: Arc<str>) -> Self {
        Self { shared, id }
    }
}

enum Work {
    Prompt(String),
    Retry,
}

struct Queued {
    work: Work,
    route: Option<String>,
    sink: TurnSink,
}

struct Running {
    turn: u32,
    link: TurnLink,
    scope: CancelScope,
    sink: TurnSink,
    route: String,
}

/// The state of an awake session.
pub(crate) struct SessionState {
    log: Result<SessionLog, SessionError>,
    next_turn: u32,
    last: Option<(u32, TurnEndReason)>,
    last_route: Option<String>,
    queue: VecDeque<Queued>,
    running: Option<Running>,
    /// Client messages handled (the directory compares it with those sent).
    handled: u64,
    /// A turn ended and `agent/idle` is not written yet.
    idle_due: bool,
    /// The ended turn's closing events, not written yet.
    unwritten: Vec<Event>,
    /// The ended turn's outcome, held until `agent/idle` is durable (or the next turn starts).
    ended: Option<(TurnSink, TurnOutcome)>,
    closers: Vec<oneshot::Sender<()>>,
    closing: bool,
    /// Forgets this actor's directory entry if it ends without hibernating; counts it live.
    _lease: Lease,
    _alive: Alive,
}

impl SessionActor {
    async fn open(&self) -> Result<(SessionLog, SessionInit), SessionError> {
        let open_error =
            |source| SessionError::Open { session: self.id.to_string(), source: Arc::new(source) };
        // One read of the log: the session's projections and validators are folded with the
        // built-in ones (see `OpenOptions`).
        let mut options =
            OpenOptions::new().projection(HistoryProjection).projection(LastRouteProjection);
        for validator in &self.shared.validators {
            options = options.validator(validator());
        }
        let (log, _report) = SessionLog::open_with(
            Arc::clone(&self.shared.store),
            Arc::clone(&self.shared.clock),
            &self.id,
            options,
        )
        .await
        .map_err(open_error)?;
        let init = async {
            let open = log.open_turn().await?;
            let route = log.read::<LastRouteProjection>(LAST_ROUTE).await?;
            Ok(SessionInit {
                next_turn: open.next_turn(),
                last: open.last_end.map(|end| (end.turn, end.reason)),
                last_route: route.route,
            })
        };
        match init.await {
            Ok(init) => Ok((log, init)),
            Err(error) => {
                log.close().await;
                Err(open_error(error))
            }
        }
    }

    /// Starts the next queued turn; false when it could not start.
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
        let route = route.unwrap_or_default();
        let mut batch = Vec::with_capacity(2);
        if let Work::Prompt(text) = work {
            batch.push(Event::UserMessage(UserMessage { text }));
        }
        batch.push(Event::TurnStart(TurnStart { turn }));
        let from_seq = match log.append(batch).await {
            Ok(written) => written.first().map_or(0, |e| e.seq),
            Err(error) => {
                let message = error.to_string();
                let error = SessionError::NotStarted { session: self.id.to_string(), message };
                sink.finish(Err(error));
                return false;
            }
        };
        state.next_turn += 1;
        let store = Arc::clone(&self.shared.store);
        sink.started(Started { turn, from_seq, log: log.clone(), store });
        let scope = self.shared.scope.child();
        let args = TurnArgs {
            shared: Arc::clone(&self.shared),
            session: myself.clone(),
            log,
            session_id: Arc::clone(&self.id),
            turn,
            route: route.clone(),
            scope: scope.clone(),
        };
        let link = turn::spawn(args);
        state.running = Some(Running { turn, link, scope, sink, route });
        true
    }

    /// After every message: start queued work, or write `agent/idle` and hibernate.
    async fn settle(&self, myself: &ActorRef<SessionMsg>, state: &mut SessionState) {
        if state.running.is_some() || state.closing {
            resolve_ended(state);
            return;
        }
        // The runtime is shutting down (its root scope is cancelled): stop, whatever is queued.
        let stopping = self.shared.scope.is_cancelled();
        if stopping {
            drop_queue(state, CancelCause::Disposed);
        }
        while let Some(next) = next_queued(state) {
            // The next turn starts: no `agent/idle` comes between them.
            let closing = std::mem::take(&mut state.unwritten);
            self.write(state, closing, "the ended turn's closing events").await;
            resolve_ended(state);
            if self.start(myself, state, next).await {
                return;
            }
        }
        let mut closing = std::mem::take(&mut state.unwritten);
        if state.idle_due {
            closing.push(Event::AgentIdle(AgentIdle {}));
        }
        self.write(state, closing, "the ended turn's closing events and agent/idle").await;
        state.idle_due = false;
        // `agent/idle` is durable: whoever awaits the outcome now finds the log idle.
        resolve_ended(state);
        let hibernate = stopping
            || self.shared.directory.try_hibernate(&self.id, myself.get_id(), state.handled);
        if !hibernate {
            // A client message is on its way: handle it first.
            for closer in state.closers.drain(..) {
                let _ = closer.send(());
            }
            return;
        }
        state.closing = true;
        if let Ok(log) = &state.log {
            log.clone().close().await;
        }
        for done in state.closers.drain(..) {
            let _ = done.send(());
        }
        myself.stop(None);
    }

    /// Appends `events` (if any) to the log; a failure is logged (the log says what happened).
    async fn write(&self, state: &SessionState, events: Vec<Event>, what: &str) {
        if let (false, Ok(log)) = (events.is_empty(), &state.log) {
            if let Err(error) = log.append(events).await {
                tracing::warn!(session.id = %self.id, %error, "could not write {what}");
            }
        }
    }

    async fn client(&self, state: &mut SessionState, message: ClientMsg) {
        state.handled += 1;
        match message {
            ClientMsg::Open(reply) => {
                let _ = reply.send(state.log.as_ref().map(|_| ()).map_err(Clone::clone));
            }
            ClientMsg::Prompt(prompt, sink) => {
                let route = prompt.route.or_else(|| self.shared.default_route.clone());
                state.queue.push_back(Queued { work: Work::Prompt(prompt.text), route, sink });
            }
            ClientMsg::Retry(sink, reply) => {
                let busy = state.running.is_some() || !state.queue.is_empty();
                let last = state.last.as_ref().map(|(turn, reason)| (*turn, reason));
                let allowed = match &state.log {
                    Err(error) => Err(error.clone()),
                    Ok(_) => agent_loop::retry_allowed(last, busy).map_err(SessionError::from),
                };
                match allowed {
                    Ok(()) => {
                        let route =
                            state.last_route.clone().or_else(|| self.shared.default_route.clone());
                        state.queue.push_back(Queued { work: Work::Retry, route, sink });
                        let _ = reply.send(Ok(()));
                    }
                    Err(error) => {
                        let _ = reply.send(Err(error));
                    }
                }
            }
            ClientMsg::Cancel(cause, reply) => {
                let running = state.running.is_some();
                if let Some(running) = &state.running {
                    running.scope.cancel(cause.clone());
                }
                drop_queue(state, cause);
                let _ = reply.send(running);
            }
            ClientMsg::Close(reply) => {
                if let Some(running) = &state.running {
                    running.scope.cancel(CancelCause::Parent);
                }
                drop_queue(state, CancelCause::Parent);
                state.closers.push(reply);
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
            ClientMsg::ConfigChanged(change) => {
                if let Ok(log) = &state.log {
                    if let Err(error) = log.append(vec![Event::ConfigChanged(change)]).await {
                        tracing::warn!(session.id = %self.id, %error, "could not write config/changed");
                    }
                }
            }
        }
    }

    /// The running turn ended (or its actor crashed and the session closed it). Its outcome
    /// resolves in [`Self::settle`], once `agent/idle` is durable or the next turn starts.
    fn ended(&self, state: &mut SessionState, turn: u32, reason: TurnEndReason) {
        if let Some(Running { link, sink, route, .. }) = state.running.take() {
            link.disarm();
            state.last_route = Some(route);
            resolve_ended(state);
            state.ended = Some((sink, TurnOutcome { turn, reason: reason.clone() }));
        }
        state.last = Some((turn, reason));
        state.idle_due = true;
    }
}

impl SessionActor {
    /// One message (boxed by `handle`, see the module docs).
    async fn message(
        &self,
        myself: ActorRef<SessionMsg>,
        message: SessionMsg,
        state: &mut SessionState,
    ) {
        match message {
            SessionMsg::Client(message) => self.client(state, message).await,
            SessionMsg::TurnEnded { turn, reason, closing } => {
                if state.running.as_ref().is_some_and(|r| r.turn == turn) {
                    state.unwritten = closing;
                    self.ended(state, turn, reason);
                }
            }
            SessionMsg::TurnCrashed { turn, error } => {
                if state.running.as_ref().is_some_and(|r| r.turn == turn) {
                    self.crashed(state, turn, error).await;
                }
            }
            // Checked after every message (`handle`).
            SessionMsg::LogClosed => {}
        }
        self.settle(&myself, state).await;
    }

    /// The running turn's task panicked before writing its `turn/end`: close the turn for it.
    async fn crashed(&self, state: &mut SessionState, turn: u32, error: String) {
        let failure = runtime_failure(format!("turn {turn} crashed: {error}"));
        let reason = TurnEndReason::Error { failure };
        if let Ok(log) = &state.log {
            let mut closing = Vec::new();
            if let Some(step) = log.open_turn().await.ok().and_then(|open| open.step) {
                closing.push(Event::StepEnd(StepRef { turn, step }));
            }
            closing.push(Event::TurnEnd(TurnEnd { turn, reason: reason.clone() }));
            let _ = log.append(closing).await;
        }
        self.ended(state, turn, reason);
    }
}

struct SessionInit {
    next_turn: u32,
    last: Option<(u32, TurnEndReason)>,
    last_route: Option<String>,
}

/// Resolves the outcome of the turn that ended, if it is still held.
fn resolve_ended(state: &mut SessionState) {
    if let Some((sink, outcome)) = state.ended.take() {
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

/// A failure of the runtime's own machinery.
pub(crate) fn runtime_failure(message: String) -> Failure {
    Failure::new(RUNTIME_ERROR, message).unwrap_or_else(|_| Failure::aborted())
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
        let alive = self.shared.census.enter();
        let lease = self.shared.directory.lease(Arc::clone(&self.id), myself.get_id());
        let (log, init) = match self.open().await {
            Ok((log, init)) => {
                log.on_close(move || {
                    let _ = myself.send_message(SessionMsg::LogClosed);
                });
                (Ok(log), init)
            }
            Err(error) => {
                tracing::warn!(session.id = %self.id, %error, "session could not open");
                (Err(error), SessionInit { next_turn: 1, last: None, last_route: None })
            }
        };
        Ok(SessionState {
            log,
            next_turn: init.next_turn,
            last: init.last,
            last_route: init.last_route,
            queue: VecDeque::new(),
            running: None,
            handled: 0,
            idle_due: false,
            unwritten: Vec::new(),
            ended: None,
            closers: Vec::new(),
            _lease: lease,
            closing: false,
            _alive: alive,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        Box::pin(self.message(myself, message, state)).await;
        match &state.log {
            Ok(log) if !log.is_open() && !state.closing => {
                // The log went away under it (an operation panicked and failed it, or someone
                // closed it): nothing this actor does can be recorded. Fail; the next message wakes a fresh actor that reopens (and
                // repairs) the log. Its running turn, if any, is cancelled and aborted with the
                // state (`TurnLink`).
                tracing::error!(session.id = %self.id, "the session's log closed under it: the session actor fails");
                Err(format!("session {}: its log closed", self.id).into())
            }
            _ => Ok(()),
        }
    }
}
