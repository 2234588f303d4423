//! The durable session log: one actor per open session, the only writer of its log.
//!
//! [`SessionLog`] is the handle other actors hold. [`SessionLog::open`] loads a session's log
//! from a [`SessionStore`], repairs what a crash left open and spawns the session-log actor;
//! [`SessionLog::append`] writes a batch and resolves once the store acknowledged it at its
//! [`Durability`](crate::store::Durability); projections (pure folds, [`Projection`]) are kept
//! current on every commit and read by key; validators ([`Validator`]) can reject an append
//! before anything is written; subscribers receive every committed event in order.
//!
//! - [`retry_chains`]: the retry-chain projection (SPEC §5.4), built in.
//! - [`open_turn`]: the open turn/step and the last turn/step/attempt numbers, built in; it also
//!   names the repair a reopen appends.
//! - `sequencer`: contiguous `seq`, non-decreasing `time`.
//! - `registry`: projections by key, type-erased.
//! - `state`: what the actor holds and the steps of each request.
//! - `reopen`: load, fold, repair.
//! - `actor`: the ractor wiring.
//!
//! ```
//! # tokio_test::block_on(async {
//! use std::sync::Arc;
//! use rein_runtime::clock::WallClock;
//! use rein_runtime::event::{Event, TurnStart, UserMessage};
//! use rein_runtime::session_log::SessionLog;
//! use rein_runtime::store::memory::MemoryStore;
//!
//! let store = Arc::new(MemoryStore::new());
//! let (log, report) = SessionLog::open(store, Arc::new(WallClock), "s1", None).await?;
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
//! validators and projections judge each batch against everything committed before it. An
//! actor's mailbox gives exactly that order without a lock, and lets a supervisor own the log's
//! lifetime (the session actor links it).
//!
//! # Why the append handler awaits the store
//!
//! "Durable before effect" (SPEC §5.5: `llm/retry` is durable before the wait begins) needs an
//! append to resolve only after the store holds it, and the next batch of the same session must
//! be checked against a committed predecessor. So the handler awaits the store's ack before it
//! takes the next message; appends of one session are serialized by design, and appends of
//! different sessions (different actors) still overlap, which is what lets the SQLite store
//! group-commit them. Reads (projections, subscribe) are answered from memory at once; they wait
//! only behind an append already in flight, which is also what makes them read-your-writes.
//!
//! # Why the actor keeps no events
//!
//! A session parked in a retry wait must cost little (the budget is 24 KiB for session, log,
//! turn, step and wait together), so the actor holds projections, not the event list.
//! [`SessionLog::events`], [`SessionLog::register`] and [`SessionLog::add_validator`] read the
//! history back from the store; an opener that knows its projections and validators up front
//! passes them to [`SessionLog::open_with`] instead, which folds them over the log it loads
//! anyway (a session waking from hibernation reads its log once, not once per projection). They go through the actor, not around it: a store may cut a
//! torn last line while loading, and a load racing an in-flight append could mistake that
//! append's half-written line for a torn one.
//!
//! # Why repair on open
//!
//! A crash can leave a turn open (`turn/start` without `turn/end`), and every reader — the
//! invariant checker, a manual `retry()`, the retry-chain projection — needs closed turns.
//! Opening closes it with `step/end` (for an open step), `turn/end {kind:"interrupted"}` and
//! `agent/idle`, written before the actor takes any message, so the projections read by the
//! first caller equal a fresh fold of the repaired log.

use std::sync::Arc;

use ractor::rpc::CallResult;
use ractor::{Actor, ActorCell, ActorRef, RpcReplyPort};
use tokio::sync::mpsc::UnboundedReceiver;
use tracing::Instrument;

use crate::clock::Clock;
use crate::event::{Envelope, Event};
use crate::projection::Projection;
use crate::store::{SessionStore, StoreError, TornTail};
use crate::validator::{Rejection, Validator};

mod actor;
mod open_options;
pub mod open_turn;
mod registry;
mod reopen;
pub mod retry_chains;
mod sequencer;
mod state;

#[cfg(test)]
mod tests;

pub use open_options::OpenOptions;
pub use open_turn::{OpenTurn, OpenTurnProjection};
pub use retry_chains::{Chain, RetryChainProjection, RetryChains};

use actor::{Msg, SessionLogActor};

/// A handle on an open session's log. Clones share the same actor.
#[derive(Clone)]
pub struct SessionLog {
    actor: ActorRef<Msg>,
    session: Arc<str>,
}

impl std::fmt::Debug for SessionLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionLog")
            .field("session", &self.session)
            .field("actor", &self.actor.get_id())
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
    /// The session-log actor is stopped.
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
    /// The session-log actor is stopped.
    #[error("the session log is closed")]
    Closed,
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
    /// The actor could not be spawned.
    #[error("could not start the session-log actor: {0}")]
    Spawn(String),
}

impl SessionLog {
    /// Opens (or creates) a session's log: loads it from the store, closes a turn left open
    /// (appends `step/end` for an open step, then `turn/end {kind:"interrupted"}`, then
    /// `agent/idle`), appends `session/start {session, format: LOG_FORMAT}` if the log is new,
    /// and folds all projections. A log whose last turn ended without a following `agent/idle`
    /// gets that `agent/idle`; a closed log gets nothing.
    ///
    /// `supervisor`: link the actor under this cell (`None` = unlinked). The actor runs until
    /// [`SessionLog::close`] or until its supervisor stops it; dropping the handles does not.
    ///
    /// Opening the same session twice at once (two writers) is the caller's bug: the session
    /// registry keeps one log per session.
    pub async fn open(
        store: Arc<dyn SessionStore>,
        clock: Arc<dyn Clock>,
        session: &str,
        supervisor: Option<ActorCell>,
    ) -> Result<(SessionLog, OpenReport), LogError> {
        Self::open_with(store, clock, session, supervisor, OpenOptions::new()).await
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
        supervisor: Option<ActorCell>,
        options: OpenOptions,
    ) -> Result<(SessionLog, OpenReport), LogError> {
        let span = tracing::info_span!("session_log.open", session.id = session);
        async move {
            let (state, report) = reopen::reopen(store, clock, session, options).await?;
            let session = Arc::clone(state.session());
            let spawned = match supervisor {
                Some(supervisor) => {
                    Actor::spawn_linked(None, SessionLogActor, state, supervisor).await
                }
                None => Actor::spawn(None, SessionLogActor, state).await,
            };
            let (actor, _task) = spawned.map_err(|e| LogError::Spawn(e.to_string()))?;
            tracing::debug!(events = report.events, created = report.created, "session log open");
            Ok((SessionLog { actor, session }, report))
        }
        .instrument(span)
        .await
    }

    /// The session id.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// The actor's cell (to link, monitor or supervise it).
    pub fn actor(&self) -> ActorCell {
        self.actor.get_cell()
    }

    /// Appends a batch atomically: assigns `seq` (contiguous) and `time` (from the clock, never
    /// below the log's last time), runs every validator's check on the whole batch (a
    /// [`Rejection`] rejects it: nothing written, nothing folded, the caller gets
    /// [`AppendError::Rejected`]), writes to the store and waits for its ack at the store's
    /// durability, then commits validators, folds projections, notifies subscribers and replies
    /// with the batch as written. An empty batch writes nothing and returns empty.
    pub async fn append(&self, events: Vec<Event>) -> Result<Vec<Envelope>, AppendError> {
        self.call(|reply| Msg::Append(events, reply)).await.ok_or(AppendError::Closed)?
    }

    /// A receiver of every event committed after this call, in `seq` order. It ends (`None`)
    /// when the log closes.
    pub async fn subscribe(&self) -> Result<UnboundedReceiver<Envelope>, LogError> {
        self.call(Msg::Subscribe).await.ok_or(LogError::Closed)
    }

    /// Installs a validator; the existing log is replayed into it first as one
    /// [`Validator::commit`] batch. It checks every later append.
    pub async fn add_validator(&self, validator: Box<dyn Validator>) -> Result<(), LogError> {
        self.call(|reply| Msg::AddValidator(validator, reply)).await.ok_or(LogError::Closed)?
    }

    /// Registers a projection under its key; the existing log is folded into it at once.
    pub async fn register<P: Projection>(&self, projection: P) -> Result<(), LogError> {
        let erased = registry::erase(projection);
        self.call(|reply| Msg::Register(erased, reply)).await.ok_or(LogError::Closed)?
    }

    /// A clone of the state of the projection registered under `key`.
    pub async fn read<P: Projection>(&self, key: &'static str) -> Result<P::State, LogError> {
        let snapshot = self.call(|reply| Msg::Read(key, reply)).await.ok_or(LogError::Closed)??;
        registry::downcast(key, snapshot)
    }

    /// What `view` makes of the state of the projection registered under `key`, computed in the
    /// log actor on the state itself: where [`SessionLog::read`] clones the whole state, this
    /// clones only what `view` returns (the step builds its request's messages this way, without
    /// first cloning the history they come from).
    pub async fn view<P: Projection, T: Send + 'static>(
        &self,
        key: &'static str,
        view: impl FnOnce(&P::State) -> T + Send + 'static,
    ) -> Result<T, LogError> {
        let erased: registry::View = Box::new(move |state: &dyn std::any::Any| {
            let made: Box<dyn std::any::Any + Send> = match state.downcast_ref::<P::State>() {
                Some(state) => Box::new(Some(view(state))),
                None => Box::new(None::<T>),
            };
            made
        });
        let made =
            self.call(|reply| Msg::View(key, erased, reply)).await.ok_or(LogError::Closed)??;
        registry::downcast::<Option<T>>(key, made)?
            .ok_or(LogError::ProjectionType { key, expected: std::any::type_name::<P::State>() })
    }

    /// The retry chains of the open step (SPEC §5.4).
    pub async fn retry_chains(&self) -> Result<RetryChains, LogError> {
        self.read::<RetryChainProjection>(RetryChainProjection::KEY).await
    }

    /// Where the turn lifecycle stands.
    pub async fn open_turn(&self) -> Result<OpenTurn, LogError> {
        self.read::<OpenTurnProjection>(OpenTurnProjection::KEY).await
    }

    /// The whole log, read back from the store.
    pub async fn events(&self) -> Result<Vec<Envelope>, LogError> {
        self.call(Msg::Events).await.ok_or(LogError::Closed)?
    }

    /// Stops the actor after the message it is handling (an append in flight completes) and
    /// waits for it to stop. Requests still queued, and every later one through any clone of
    /// this handle, fail with `Closed`; subscribers' receivers end.
    pub async fn close(self) {
        // An error means the actor is already stopped, which is what was asked.
        let _ = self.actor.stop_and_wait(None, None).await;
    }

    /// Sends a request and waits for its reply; `None` when the actor is gone or dropped it.
    ///
    /// The round trip is boxed: ractor's `call` future (≈ 400 bytes, its unused timeout
    /// included) would otherwise be inlined in every future that awaits the log — a turn parked
    /// in a retry wait carries the largest of them for as long as it waits.
    async fn call<T: Send + 'static>(
        &self,
        message: impl FnOnce(RpcReplyPort<T>) -> Msg + Send,
    ) -> Option<T> {
        match Box::pin(self.actor.call(message, None)).await {
            Ok(CallResult::Success(reply)) => Some(reply),
            _ => None,
        }
    }
}
