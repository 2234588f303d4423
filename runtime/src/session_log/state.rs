//! What an open session log holds, and the steps of each operation on it.
//!
//! The state is small on purpose: the session id, the store and clock handles, the next `seq`
//! and last `time`, the projections, the validators and the subscribers. It never holds the
//! events themselves; what needs the history (installing a validator or a projection late,
//! [`LogState::events`]) reads it back from the store, and a subscription from an earlier `seq`
//! reads back only the events from there ([`SessionStore::load_from`]): a reader catching up
//! with a turn of a long session pays for that turn, not for the session.
//!
//! # Why the append steps are in this order
//!
//! stamp → check every validator → refuse a late write for an ended turn (`turn_guard`) → write
//! and await the store's ack → commit validators → fold
//! projections → notify subscribers → reply. Everything before the ack only reads; a rejection
//! or a store error returns before anything changed, so a failed append leaves no trace in the
//! state. Everything after the ack cannot fail, so what projections, validators and subscribers
//! see is exactly what the store holds.
//!
//! # Why a store error ends the log
//!
//! A rejected batch is the caller's business: the log is as it was, and the next append takes
//! the same `seq`. A batch the store failed to write is not: the session has already acted on
//! what it meant to record (a turn ended, a step started), so a later, smaller batch that happens
//! to fit — a full disk takes a few bytes more — would record a session that never was (turn 6
//! opened inside turn 5). So the first store error marks the state failed ([`LogState::failed`])
//! and its actor stops taking operations (see `actor`): the log ends exactly at its last
//! acknowledged append, and the next open repairs it as after a crash.

use std::sync::Arc;

use tokio::sync::mpsc;
use tracing::Instrument;

use crate::clock::Clock;
use crate::event::{AgentIdle, Envelope, Event, TurnEndReason};
use crate::store::{Claim, SessionStore, StoreError};
use crate::validator::Validator;

use super::open_turn::{OpenTurn, OpenTurnProjection};
use super::registry::{ErasedProjection, Registry};
use super::sequencer::Sequencer;
use super::turn_guard;
use super::{AppendError, LogError, OpenOptions};

/// A batch as written: one allocation the store (a memory store keeps it), the subscribers and
/// the caller share, instead of a copy of every event for each.
pub(crate) type Batch = Arc<[Envelope]>;

/// Where committed events go.
enum Subscriber {
    /// Each event on its own (a [`SessionLog::subscribe`](super::SessionLog::subscribe)r's).
    Events(mpsc::UnboundedSender<Envelope>),
    /// Each batch as one message (a turn handle's stream: it clones the events it yields).
    Batches(mpsc::UnboundedSender<Batch>),
}

impl Subscriber {
    /// Sends `batch`; false when the receiver is gone.
    fn send(&self, batch: &Batch) -> bool {
        match self {
            Subscriber::Events(tx) => batch.iter().all(|e| tx.send(e.clone()).is_ok()),
            Subscriber::Batches(tx) => tx.send(Arc::clone(batch)).is_ok(),
        }
    }
}

/// The state of one session's log.
pub(crate) struct LogState {
    session: Arc<str>,
    store: Arc<dyn SessionStore>,
    /// The session, held for writing while the log is open (released when the state drops).
    _claim: Claim,
    clock: Arc<dyn Clock>,
    sequencer: Sequencer,
    registry: Registry,
    validators: Vec<Box<dyn Validator>>,
    subscribers: Vec<Subscriber>,
    /// The store failed an append: the log takes nothing more (see the module docs).
    failed: Option<String>,
}

impl LogState {
    /// The state of a log whose stored events are `log` (contiguous from seq 0): the built-in
    /// projections and `opening`'s projections folded over it, `opening`'s validators replayed
    /// it (one [`Validator::commit`] batch) — one pass over the loaded log for all of them.
    pub(crate) fn new(
        session: Arc<str>,
        store: Arc<dyn SessionStore>,
        clock: Arc<dyn Clock>,
        claim: Claim,
        log: &[Envelope],
        opening: OpenOptions,
    ) -> Result<Self, LogError> {
        let sequencer = Sequencer::continuing(log).map_err(|gap| LogError::NotContiguous {
            session: session.to_string(),
            expected: gap.expected,
            found: gap.found,
        })?;
        let mut registry = Registry::with_builtins();
        for projection in opening.projections {
            registry.insert(projection)?;
        }
        registry.fold(log);
        let mut validators = opening.validators;
        if !log.is_empty() {
            for validator in &mut validators {
                validator.commit(log);
            }
        }
        Ok(Self {
            session,
            store,
            _claim: claim,
            clock,
            sequencer,
            registry,
            validators,
            subscribers: Vec::new(),
            failed: None,
        })
    }

    /// The store error that ended the log, if one did: nothing may be appended after it.
    pub(crate) fn failed(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// How many events the log holds.
    pub(crate) fn len(&self) -> u64 {
        self.sequencer.next_seq()
    }

    /// A typed clone of a projection's state.
    pub(crate) fn read<S: Clone + 'static>(&self, key: &'static str) -> Result<S, LogError> {
        self.registry.read(key)
    }

    /// Appends a batch (see the module docs for the order of the steps).
    pub(crate) async fn append(&mut self, events: Vec<Event>) -> Result<Batch, AppendError> {
        if events.is_empty() {
            return Ok(Batch::from([]));
        }
        let batch = self.sequencer.stamp(events, self.clock.now_ms());
        let span = self.span(&batch);
        for validator in &self.validators {
            if let Err(rejection) = validator.check(&batch) {
                span.in_scope(|| {
                    tracing::info!(validator = validator.name(), %rejection, "append rejected");
                });
                return Err(AppendError::Rejected(rejection));
            }
        }
        // After the validators: a live invariant names the rule more precisely; the guard holds
        // when none is installed.
        let guarded = self
            .registry
            .view::<OpenTurn, _>(OpenTurnProjection::KEY, |open| turn_guard::check(open, &batch));
        if let Ok(Err(rejection)) = guarded {
            span.in_scope(|| tracing::info!(%rejection, "append refused: its turn has ended"));
            return Err(AppendError::Rejected(rejection));
        }
        self.commit(batch).instrument(span).await.map_err(AppendError::Store)
    }

    /// Closes turn `turn` (see [`SessionLog::close_turn`](super::SessionLog::close_turn)).
    pub(crate) async fn close_turn(
        &mut self,
        turn: u32,
        reason: TurnEndReason,
        idle: bool,
    ) -> Result<Batch, AppendError> {
        let closing = self
            .registry
            .view::<OpenTurn, _>(OpenTurnProjection::KEY, |open| open.closing(turn, reason));
        let mut events = closing.unwrap_or_default();
        if idle {
            events.push(Event::AgentIdle(AgentIdle {}));
        }
        self.append(events).await
    }

    /// Appends a batch without asking the validators: the repair on reopen, written before any
    /// validator can be installed.
    pub(crate) async fn append_unchecked(
        &mut self,
        events: Vec<Event>,
    ) -> Result<Batch, StoreError> {
        if events.is_empty() {
            return Ok(Batch::from([]));
        }
        let batch = self.sequencer.stamp(events, self.clock.now_ms());
        let span = self.span(&batch);
        self.commit(batch).instrument(span).await
    }

    fn span(&self, batch: &[Envelope]) -> tracing::Span {
        tracing::debug_span!(
            "session_log.append",
            session.id = %self.session,
            seq = batch.first().map(|e| e.seq),
            events = batch.len(),
        )
    }

    /// Writes a stamped batch, waits for the store's ack, then makes it visible.
    async fn commit(&mut self, batch: Batch) -> Result<Batch, StoreError> {
        if self.failed.is_some() {
            return Err(StoreError::Closed);
        }
        if let Err(error) = self.store.append_shared(&self.session, &batch).await {
            tracing::error!(%error, "append failed in the store: the session log ends here");
            self.failed = Some(error.to_string());
            return Err(error);
        }
        self.sequencer.advance(&batch);
        for validator in &mut self.validators {
            validator.commit(&batch);
        }
        self.registry.fold(&batch);
        self.notify(&batch);
        Ok(batch)
    }

    fn notify(&mut self, batch: &Batch) {
        // A subscriber whose receiver is gone is dropped; the others get every event in order.
        self.subscribers.retain(|subscriber| subscriber.send(batch));
    }

    /// The events committed from `seq` on, and a receiver of every later one.
    pub(crate) async fn subscribe_from(
        &mut self,
        seq: u64,
    ) -> Result<(Vec<Envelope>, mpsc::UnboundedReceiver<Envelope>), LogError> {
        let committed = self.committed_from(seq).await?;
        Ok((committed, self.subscribe()))
    }

    /// The events committed from `seq` on, read back from the store.
    async fn committed_from(&mut self, seq: u64) -> Result<Vec<Envelope>, LogError> {
        let next = self.sequencer.next_seq();
        committed(&*self.store, &self.session, seq, next).await
    }

    /// A receiver of every event committed from now on.
    pub(crate) fn subscribe(&mut self) -> mpsc::UnboundedReceiver<Envelope> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.subscribers.push(Subscriber::Events(tx));
        rx
    }

    /// A receiver of every batch committed from now on.
    pub(crate) fn subscribe_batches(&mut self) -> mpsc::UnboundedReceiver<Batch> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.subscribers.push(Subscriber::Batches(tx));
        rx
    }

    /// [`LogState::subscribe_from`], the later events as batches.
    pub(crate) async fn subscribe_batches_from(
        &mut self,
        seq: u64,
    ) -> Result<(Vec<Envelope>, mpsc::UnboundedReceiver<Batch>), LogError> {
        let committed = self.committed_from(seq).await?;
        Ok((committed, self.subscribe_batches()))
    }

    /// Installs a validator after replaying the existing log into it as one committed batch.
    pub(crate) async fn add_validator(
        &mut self,
        mut validator: Box<dyn Validator>,
    ) -> Result<(), LogError> {
        let log = history(&*self.store, &self.session, self.sequencer.next_seq()).await?;
        if !log.is_empty() {
            validator.commit(&log);
        }
        self.validators.push(validator);
        Ok(())
    }

    /// Registers a projection after folding the existing log into it.
    pub(crate) async fn register(
        &mut self,
        mut projection: Box<dyn ErasedProjection>,
    ) -> Result<(), LogError> {
        if self.registry.contains(projection.key()) {
            return Err(LogError::DuplicateProjection(projection.key()));
        }
        for event in &history(&*self.store, &self.session, self.sequencer.next_seq()).await? {
            projection.fold(event);
        }
        self.registry.insert(projection)
    }

    /// What `view` makes of the state of the projection under `key` (an `S`).
    pub(crate) fn view<S: 'static, T>(
        &self,
        key: &'static str,
        view: impl FnOnce(&S) -> T,
    ) -> Result<T, LogError> {
        self.registry.view(key, view)
    }

    /// The whole log, read back from the store; it must be exactly what this log wrote.
    pub(crate) async fn events(&mut self) -> Result<Vec<Envelope>, LogError> {
        history(&*self.store, &self.session, self.sequencer.next_seq()).await
    }
}

/// The events `seq..next` of `session`, read back from `store`.
async fn committed(
    store: &dyn SessionStore,
    session: &str,
    seq: u64,
    next: u64,
) -> Result<Vec<Envelope>, LogError> {
    if seq >= next {
        return Ok(Vec::new());
    }
    let tail = store.load_from(session, seq).await?;
    check_tail(session, seq, next, &tail)?;
    Ok(tail)
}

/// Checks that `tail`, read from `seq` on, holds exactly the events `seq..written` this log
/// wrote: contiguous (the store checks that) and ending where the log ends.
fn check_tail(session: &str, seq: u64, written: u64, tail: &[Envelope]) -> Result<(), LogError> {
    let stored = tail.last().map_or(seq, |e| e.seq + 1);
    let first = tail.first().map_or(seq, |e| e.seq);
    if first != seq {
        return Err(LogError::NotContiguous {
            session: session.to_owned(),
            expected: seq,
            found: first,
        });
    }
    if stored != written {
        return Err(LogError::Diverged { session: session.to_owned(), written, stored });
    }
    Ok(())
}

/// Loads `session`'s log and checks it holds exactly the `written` events this log wrote.
async fn history(
    store: &dyn SessionStore,
    session: &str,
    written: u64,
) -> Result<Vec<Envelope>, LogError> {
    let log = store.load(session).await?.map(|loaded| loaded.events).unwrap_or_default();
    let stored = Sequencer::continuing(&log).map_err(|gap| LogError::NotContiguous {
        session: session.to_owned(),
        expected: gap.expected,
        found: gap.found,
    })?;
    if stored.next_seq() != written {
        return Err(LogError::Diverged {
            session: session.to_owned(),
            written,
            stored: stored.next_seq(),
        });
    }
    Ok(log)
}
