//! The durable session log: one actor per open session, the only writer of its log.
//!
//! [`SessionLog`] is the handle the session, its turn and the plugins hold. [`SessionLog::open`]
//! loads a session's log from a [`SessionStore`] and repairs what a crash left open;
//! [`SessionLog::append`] writes a batch and resolves once the store acknowledged it at its
//! [`Durability`](crate::store::Durability); projections (pure folds, [`Projection`]) are kept
//! current on every commit and read by key; validators ([`Validator`]) can reject an append
//! before anything is written; subscribers receive every committed event in order.
//!
//! - [`retry_chains`]: the retry-chain projection, built in.
//! - [`step_routes`]: the routes the open step asked and a pending route switch, built in.
//! - [`open_turn`]: the open turn/step and the last turn/step/attempt numbers, built in; it also
//!   names the repair a reopen appends.
//! - `sequencer`: contiguous `seq`, non-decreasing `time`.
//! - `registry`: projections by key, type-erased.
//! - `state`: what an open log holds and the steps of each operation.
//! - `reopen`: load, fold, repair.
//! - `actor`: the session-log actor (wiring: one message, one state operation, one reply).
//! - `turn_guard`: refuses events of a turn that has already ended.
//!
//! ```
//! # tokio_test::block_on(async {
//! use std::sync::{Arc, OnceLock};
//! use rein_runtime::clock::WallClock;
//! use rein_runtime::event::{Event, TurnStart, UserMessage};
//! use rein_runtime::session_log::SessionLog;
//! use rein_runtime::store::memory::MemoryStore;
//!
//! let store = Arc::new(MemoryStore::new());
//! let (log, report) = SessionLog::open(store, Arc::new(WallClock), "s1").await?;
//! assert!(report.created); // `session/start` is seq 0
//! let mut committed = log.subscribe().await?;
//! let written = log
//!     .append(vec![
//!         Event::UserMessage(UserMessage { text: "hello".into() }),
//!         Event::TurnStart(TurnStart { turn: 1 }),
//!     ])
//!     .await?;
//! assert_eq!(written[1].seq, 2);
//! assert_eq!(committed.recv().await, Some(written[0].clone()));
//! assert_eq!(log.open_turn().await?.turn, Some(1));
//! log.close().await;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! # Why one actor per log
//!
//! A log needs one writer: `seq`s are contiguous only if one party hands them out, and
//! validators and projections judge each batch against everything committed before it. The
//! session-log actor (`actor`) is that writer: its mailbox puts operations in arrival order and
//! runs them one at a time, and its link to the session it belongs to is how the session learns
//! that its log failed (a validator or a projection panicked) — the log fails alone, every
//! caller gets [`LogError::Closed`] or [`AppendError::Closed`], and the session decides what
//! that means for it. [`SessionLog::close`] stops the actor: the operation in progress finishes,
//! those still queued fail with `Closed`.
//!
//! # Why an append holds the log until the store acknowledged
//!
//! "Durable before effect" (`llm/retry` is durable before its wait begins) needs an append to
//! resolve only after the store holds it, and the next batch of the same session must be checked
//! against a committed predecessor. So an append holds the log actor until the store's ack;
//! appends of one session are serialized by design, and appends of different sessions overlap,
//! which is what lets the SQLite store group-commit them. Reads (projections, subscribe) are
//! answered from memory; they wait only behind an operation already in progress, which is also
//! what makes them read-your-writes.
//!
//! # Why the log keeps no events
//!
//! A session parked in a retry wait must cost little, and an awake session's log must not grow
//! with its length, so the log holds projections, not the event list.
//! [`SessionLog::events`], [`SessionLog::register`] and [`SessionLog::add_validator`] read the
//! history back from the store; an opener that knows its projections and validators up front
//! passes them to [`SessionLog::open_with`] instead, which folds them over the log it loads
//! anyway (a session waking from hibernation reads its log once, not once per projection). They
//! take their turn like every other operation: a store may cut a torn last line while loading,
//! and a load racing an in-flight append could mistake that append's half-written line for a
//! torn one.
//!
//! # Why repair on open
//!
//! A crash can leave a turn open (`turn/start` without `turn/end`), and every reader — the
//! invariant checker, a manual `retry()`, the retry-chain projection — needs closed turns.
//! Opening closes it with `step/end` (for an open step), `turn/end {kind:"interrupted"}` and
//! `agent/idle`, written before anyone holds a handle, so the projections read by the first
//! caller equal a fresh fold of the repaired log. An opener that resumes such a turn (the
//! session actor, see `resume`) asks to keep it open instead ([`OpenOptions::keep_open_turn`])
//! and continues it from its tail.

use std::sync::{Arc, OnceLock};

use ractor::{Actor, ActorCell, ActorRef, ActorStatus, SpawnErr};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::oneshot;
use tracing::Instrument;

use crate::census::Census;
use crate::clock::Clock;
use crate::event::{Envelope, Event, TurnEndReason};
use crate::future::BoxFuture;
use crate::projection::Projection;
use crate::store::{SessionStore, StoreError, TornTail};
use crate::validator::{Rejection, Validator};

mod actor;
mod message;
mod open_options;
pub mod open_turn;
mod registry;
mod reopen;
pub mod retry_chains;
mod sequencer;
mod state;
pub mod step_routes;
mod turn_guard;

#[cfg(test)]
mod tests;

pub use open_options::OpenOptions;
pub use open_turn::{OpenTurn, OpenTurnProjection};
pub use retry_chains::{Chain, RetryChainProjection, RetryChains};
pub use step_routes::{StepRouteProjection, StepRoutes};

use actor::{OpenArgs, SessionLogActor};
use message::LogMsg;
pub(crate) use state::Batch;
use state::LogState;

/// A handle on an open session's log. Clones share the same log.
#[derive(Clone)]
pub struct SessionLog {
    actor: ActorRef<LogMsg>,
    session: Arc<str>,
    /// Why the log failed, once it did (the store failed an append).
    failure: Arc<OnceLock<String>>,
}

impl std::fmt::Debug for SessionLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionLog")
            .field("session", &self.session)
            .field("open", &self.is_open())
            .finish()
    }
}
/// What opening a log found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenReport {
    /// The log was new (absent or empty): `session/start` was appended.
    pub created: bool,
    /// A torn last line the store cut while loading.
    pub torn: Option<TornTail>,
    /// The turn a crash had left open, now closed `interrupted`.
    pub interrupted_turn: Option<u32>,
    /// The turn a crash had left open, left open for the opener
    /// ([`OpenOptions::keep_open_turn`]).
    pub open_turn: Option<u32>,
    /// How many events the log holds after opening (the `seq` the next event takes).
    pub events: u64,
}

/// Why an append failed. Whatever the reason, nothing was written and nothing was folded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AppendError {
    /// A validator rejected the batch.
    #[error("append rejected: {0}")]
    Rejected(Rejection),
    /// The store could not write the batch.
    #[error("append failed: {0}")]
    Store(StoreError),
    /// The log is closed (or failed: an operation on it panicked).
    #[error("the session log is closed")]
    Closed,
}

/// Why a session-log operation other than an append failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// The store failed (a corrupt line names the file and line).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The log is closed (or failed: an operation on it panicked).
    #[error("the session log is closed")]
    Closed,
    /// The log's actor could not start (it panicked while opening).
    #[error("the session log could not start: {0}")]
    Failed(String),
    /// A loaded log whose `seq`s are not `0, 1, 2, …`.
    #[error("{session}: seq {found} where seq {expected} belongs: the log is not contiguous")]
    NotContiguous {
        /// The session.
        session: String,
        /// The `seq` that belongs at that position.
        expected: u64,
        /// The `seq` found there.
        found: u64,
    },
    /// The store holds a different number of events than this log wrote (another writer?).
    #[error("{session}: the store holds {stored} events but the log wrote {written}")]
    Diverged {
        /// The session.
        session: String,
        /// How many events the log wrote.
        written: u64,
        /// How many the store holds.
        stored: u64,
    },
    /// A projection is already registered under this key.
    #[error("a projection is already registered under {0:?}")]
    DuplicateProjection(&'static str),
    /// No projection is registered under this key.
    #[error("no projection is registered under {0:?}")]
    UnknownProjection(&'static str),
    /// The projection under `key` holds another state type than the one asked for.
    #[error("the projection {key:?} does not hold a {expected}")]
    ProjectionType {
        /// The key.
        key: &'static str,
        /// The type asked for.
        expected: &'static str,
    },
}

impl SessionLog {
    /// Opens (or creates) a session's log: loads it from the store, closes a turn left open
    /// (appends `step/end` for an open step, then `turn/end {kind:"interrupted"}`, then
    /// `agent/idle`), appends `session/start {session, format: LOG_FORMAT}` if the log is new,
    /// and folds all projections. A log whose last turn ended without a following `agent/idle`
    /// gets that `agent/idle`; a closed log gets nothing.
    ///
    /// The log's actor is not linked to any supervisor: it runs until [`SessionLog::close`].
    /// It holds the session's claim ([`SessionStore::claim`]) until then: a second open of the
    /// same session through the same store waits for this log to close, and one through another
    /// store or process fails with the store's `Locked` error, writing nothing.
    pub async fn open(
        store: Arc<dyn SessionStore>,
        clock: Arc<dyn Clock>,
        session: &str,
    ) -> Result<(SessionLog, OpenReport), LogError> {
        Self::open_with(store, clock, session, OpenOptions::new()).await
    }

    /// [`SessionLog::open`], with `options`' projections registered and validators installed
    /// before the loaded log is folded: the log is read from the store once, where opening and
    /// then calling [`SessionLog::register`] and [`SessionLog::add_validator`] reads it back once
    /// more for each. The result is the same: each projection and validator has seen the whole
    /// log, the repair included.
    pub async fn open_with(
        store: Arc<dyn SessionStore>,
        clock: Arc<dyn Clock>,
        session: &str,
        options: OpenOptions,
    ) -> Result<(SessionLog, OpenReport), LogError> {
        Self::spawn(store, clock, session, options, None).await
    }

    /// Opens the log with its actor linked under `supervisor` (the session actor) and counted
    /// in the runtime's `census`.
    pub(crate) async fn open_linked(
        store: Arc<dyn SessionStore>,
        clock: Arc<dyn Clock>,
        session: &str,
        options: OpenOptions,
        supervisor: ActorCell,
        census: Census,
    ) -> Result<(SessionLog, OpenReport), LogError> {
        Self::spawn(store, clock, session, options, Some((supervisor, census))).await
    }

    async fn spawn(
        store: Arc<dyn SessionStore>,
        clock: Arc<dyn Clock>,
        session: &str,
        options: OpenOptions,
        link: Option<(ActorCell, Census)>,
    ) -> Result<(SessionLog, OpenReport), LogError> {
        let span = tracing::info_span!("session_log.open", session.id = session);
        async move {
            let session: Arc<str> = Arc::from(session);
            let (report, opened) = oneshot::channel();
            let (supervisor, census) = link.unzip();
            let failure = Arc::new(OnceLock::new());
            let args = OpenArgs {
                store,
                clock,
                session: Arc::clone(&session),
                options,
                report,
                census,
                failure: Arc::clone(&failure),
            };
            let spawned = match supervisor {
                Some(supervisor) => {
                    Actor::spawn_linked(None, SessionLogActor, args, supervisor).await
                }
                None => Actor::spawn(None, SessionLogActor, args).await,
            };
            let (actor, _task) = spawned.map_err(open_error)?;
            let report = opened.await.map_err(|_| LogError::Closed)?;
            tracing::debug!(events = report.events, created = report.created, "session log open");
            Ok((SessionLog { actor, session, failure }, report))
        }
        .instrument(span)
        .await
    }

    /// The session id.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// Why the log failed, once the store failed one of its appends (every later operation
    /// fails `Closed`); `None` while it runs, or when it was closed or failed otherwise.
    pub fn failure(&self) -> Option<&str> {
        self.failure.get().map(String::as_str)
    }

    /// Whether the log is open: its actor runs (not closed, not failed).
    pub fn is_open(&self) -> bool {
        matches!(self.actor.get_status(), ActorStatus::Running | ActorStatus::Starting)
    }

    /// The log actor's cell (to link or to tell it apart in a supervision event).
    pub(crate) fn cell(&self) -> ActorCell {
        self.actor.get_cell()
    }

    /// Appends a batch atomically: assigns `seq` (contiguous) and `time` (from the clock, never
    /// below the log's last time), refuses events of a turn that already ended, runs every
    /// validator's check on the whole batch (a [`Rejection`] rejects it: nothing written,
    /// nothing folded, the caller gets [`AppendError::Rejected`]), writes to the store and waits
    /// for its ack at the store's durability, then commits validators, folds projections,
    /// notifies subscribers and returns the batch as written. An empty batch writes nothing and
    /// returns empty.
    pub async fn append(&self, events: Vec<Event>) -> Result<Vec<Envelope>, AppendError> {
        self.write(events).await.map(|written| written.to_vec())
    }

    /// [`SessionLog::append`], the batch as written shared with the store and the subscribers
    /// (no copy of it).
    pub(crate) async fn write(&self, events: Vec<Event>) -> Result<Batch, AppendError> {
        let (reply, appended) = oneshot::channel();
        self.actor.send_message(LogMsg::Append(events, reply)).map_err(|_| AppendError::Closed)?;
        appended.await.unwrap_or(Err(AppendError::Closed))
    }

    /// [`SessionLog::write`] of `events`, then what `view` makes of the state of the projection
    /// under `key` (as [`SessionLog::view`]), in one operation of the log's actor: a step writes
    /// its `request/start` and reads the history its request carries in one round trip.
    pub(crate) async fn write_and_view<P: Projection, T: Send + 'static>(
        &self,
        events: Vec<Event>,
        key: &'static str,
        view: impl FnOnce(&P::State) -> T + Send + 'static,
    ) -> Result<(Batch, Result<T, LogError>), AppendError> {
        let done = self
            .run(move |log, reply| {
                Box::pin(async move {
                    let written = log.append(events).await;
                    let _ = reply
                        .send(written.map(|batch| (batch, log.view::<P::State, T>(key, view))));
                })
            })
            .await;
        done.unwrap_or(Err(AppendError::Closed))
    }

    /// Closes turn `turn` with `reason` in one batch: `step/end` for its open step and
    /// `turn/end` — computed by the log from its own fold, so a turn is closed exactly once
    /// whoever asks first — then `agent/idle` when `idle`. A turn already closed gets nothing
    /// (only the `agent/idle`, if asked).
    pub async fn close_turn(
        &self,
        turn: u32,
        reason: TurnEndReason,
        idle: bool,
    ) -> Result<Vec<Envelope>, AppendError> {
        self.close_turn_shared(turn, reason, idle).await.map(|written| written.to_vec())
    }

    /// [`SessionLog::close_turn`], the batch as written shared (see [`SessionLog::write`]).
    pub(crate) async fn close_turn_shared(
        &self,
        turn: u32,
        reason: TurnEndReason,
        idle: bool,
    ) -> Result<Batch, AppendError> {
        let closed = self
            .run(move |log, reply| {
                Box::pin(async move {
                    let _ = reply.send(log.close_turn(turn, reason, idle).await);
                })
            })
            .await;
        closed.unwrap_or(Err(AppendError::Closed))
    }

    /// Closes turn `turn` as [`SessionLog::close_turn`] does, without waiting: `then` runs in
    /// the log's actor as soon as the store acknowledged the batch (or with why not), with what
    /// `read` made of the state of the projection under `key` then (`None`: no such projection).
    /// If the log is closed, `then` is dropped without running.
    pub(crate) fn close_turn_then<S: 'static, T: Send + 'static>(
        &self,
        turn: u32,
        reason: TurnEndReason,
        idle: bool,
        key: &'static str,
        read: impl FnOnce(&S) -> T + Send + 'static,
        then: impl FnOnce(Result<Batch, AppendError>, Option<T>) + Send + 'static,
    ) {
        let op: message::Op = Box::new(move |log| {
            Box::pin(async move {
                let written = log.close_turn(turn, reason, idle).await;
                then(written, log.view(key, read).ok());
                // Whoever `then` woke runs next (the scheduler's slot for the task woken last),
                // not after whatever this log's next message would wake first.
                tokio::task::yield_now().await;
            })
        });
        let _ = self.actor.send_message(LogMsg::Run(op));
    }

    /// Runs `op` on the log's state in its turn and returns what it sent back; `None` when the
    /// log closed (or failed) before answering.
    async fn run<T: Send + 'static>(
        &self,
        op: impl for<'a> FnOnce(&'a mut LogState, oneshot::Sender<T>) -> BoxFuture<'a, ()>
        + Send
        + 'static,
    ) -> Option<T> {
        let (reply, answer) = oneshot::channel();
        let op: message::Op = Box::new(move |state| op(state, reply));
        self.actor.send_message(LogMsg::Run(op)).ok()?;
        answer.await.ok()
    }

    /// A receiver of every event committed after this call, in `seq` order. It ends (`None`)
    /// when the log closes.
    pub async fn subscribe(&self) -> Result<UnboundedReceiver<Envelope>, LogError> {
        let subscribed = self
            .run(|log, reply| {
                let _ = reply.send(log.subscribe());
                Box::pin(async {})
            })
            .await;
        subscribed.ok_or(LogError::Closed)
    }

    /// The events committed from `seq` on, then every later one as it commits: what was already
    /// committed comes back as a list (read back from the store from `seq` on, with
    /// [`SessionStore::load_from`]: its cost follows what it returns, not the log's length),
    /// the rest through the receiver (no event twice, none missed).
    pub async fn subscribe_from(
        &self,
        seq: u64,
    ) -> Result<(Vec<Envelope>, UnboundedReceiver<Envelope>), LogError> {
        let subscribed = self
            .run(move |log, reply| {
                Box::pin(async move {
                    let _ = reply.send(log.subscribe_from(seq).await);
                })
            })
            .await;
        subscribed.ok_or(LogError::Closed)?
    }

    /// [`SessionLog::subscribe`], each committed batch as one message (a turn handle's stream).
    pub(crate) async fn subscribe_batches(&self) -> Result<UnboundedReceiver<Batch>, LogError> {
        let subscribed = self
            .run(|log, reply| {
                let _ = reply.send(log.subscribe_batches());
                Box::pin(async {})
            })
            .await;
        subscribed.ok_or(LogError::Closed)
    }

    /// [`SessionLog::subscribe_from`], the later events as batches.
    pub(crate) async fn subscribe_batches_from(
        &self,
        seq: u64,
    ) -> Result<(Vec<Envelope>, UnboundedReceiver<Batch>), LogError> {
        let subscribed = self
            .run(move |log, reply| {
                Box::pin(async move {
                    let _ = reply.send(log.subscribe_batches_from(seq).await);
                })
            })
            .await;
        subscribed.ok_or(LogError::Closed)?
    }

    /// Installs a validator; the existing log is replayed into it first as one
    /// [`Validator::commit`] batch. It checks every later append.
    pub async fn add_validator(&self, validator: Box<dyn Validator>) -> Result<(), LogError> {
        let added = self
            .run(|log, reply| {
                Box::pin(async move {
                    let _ = reply.send(log.add_validator(validator).await);
                })
            })
            .await;
        added.ok_or(LogError::Closed)?
    }

    /// Registers a projection under its key; the existing log is folded into it at once.
    pub async fn register<P: Projection>(&self, projection: P) -> Result<(), LogError> {
        let erased = registry::erase(projection);
        let registered = self
            .run(|log, reply| {
                Box::pin(async move {
                    let _ = reply.send(log.register(erased).await);
                })
            })
            .await;
        registered.ok_or(LogError::Closed)?
    }

    /// A clone of the state of the projection registered under `key`.
    pub async fn read<P: Projection>(&self, key: &'static str) -> Result<P::State, LogError> {
        self.view::<P, _>(key, P::State::clone).await
    }

    /// What `view` makes of the state of the projection registered under `key`, computed on
    /// the state itself, in the log's actor: where [`SessionLog::read`] clones the whole state,
    /// this clones only what `view` returns.
    pub async fn view<P: Projection, T: Send + 'static>(
        &self,
        key: &'static str,
        view: impl FnOnce(&P::State) -> T + Send + 'static,
    ) -> Result<T, LogError> {
        let made = self
            .run(move |log, reply| {
                let _ = reply.send(log.view::<P::State, T>(key, view));
                Box::pin(async {})
            })
            .await;
        made.ok_or(LogError::Closed)?
    }

    /// The retry chains of the open step.
    pub async fn retry_chains(&self) -> Result<RetryChains, LogError> {
        self.read::<RetryChainProjection>(RetryChainProjection::KEY).await
    }

    /// The routes the open step asked, and where a pending route switch sends its next attempt.
    pub async fn step_routes(&self) -> Result<StepRoutes, LogError> {
        self.read::<StepRouteProjection>(StepRouteProjection::KEY).await
    }

    /// Where the turn lifecycle stands.
    pub async fn open_turn(&self) -> Result<OpenTurn, LogError> {
        self.read::<OpenTurnProjection>(OpenTurnProjection::KEY).await
    }

    /// Where the turn lifecycle stands, and a clone of the state of the projection registered
    /// under `key`, read together: one round trip to the log's actor (what a session reads when
    /// it opens).
    pub(crate) async fn open_turn_and<P: Projection>(
        &self,
        key: &'static str,
    ) -> Result<(OpenTurn, P::State), LogError> {
        let read = self
            .run(move |log, reply| {
                let open = log.view::<OpenTurn, _>(OpenTurnProjection::KEY, OpenTurn::clone);
                let _ = reply.send(open.and_then(|o| Ok((o, log.view(key, P::State::clone)?))));
                Box::pin(async {})
            })
            .await;
        read.ok_or(LogError::Closed)?
    }

    /// The whole log, read back from the store.
    pub async fn events(&self) -> Result<Vec<Envelope>, LogError> {
        let events = self
            .run(|log, reply| {
                Box::pin(async move {
                    let _ = reply.send(log.events().await);
                })
            })
            .await;
        events.ok_or(LogError::Closed)?
    }

    /// Closes the log once the operation in progress finished (an append in flight completes).
    /// Operations still queued, and every later one through any clone of this handle, fail
    /// with `Closed`; subscribers' receivers end.
    pub async fn close(self) {
        // An error means the actor is already stopped, which is what was asked.
        let _ = self.actor.stop_and_wait(None, None).await;
    }
}

/// A log actor that could not start: the open's own error, or what ractor reported.
fn open_error(error: SpawnErr) -> LogError {
    match error {
        SpawnErr::StartupFailed(error) => match error.downcast::<LogError>() {
            Ok(error) => *error,
            Err(error) => LogError::Failed(error.to_string()),
        },
        other => LogError::Failed(other.to_string()),
    }
}
