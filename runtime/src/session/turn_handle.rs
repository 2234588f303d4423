//! [`TurnHandle`]: what `Session::prompt` and `Session::retry` return — the turn's events as
//! they are committed, and its outcome.
//!
//! The handle is created before the turn starts (a prompt sent while another turn runs waits in
//! the session's queue). [`TurnHandle::next_event`] yields every event committed from the turn's
//! first event (`user/message`, or `turn/start` for a retry) up to and including its `turn/end`,
//! then `None`. Awaiting the handle (or [`TurnHandle::outcome`]) resolves to how the turn ended.
//!
//! # Why the subscription is lazy
//!
//! The turn's events are written by several parties — the step, the session, plugins appending
//! `llm/retry` — and only the session log sees them all, in commit order, so the stream is a log
//! subscription. But a subscription is an unbounded channel (a block of buffer once created),
//! and most callers only await the outcome; a turn parked in a retry wait must stay small. So a
//! handle subscribes only if its caller reads events: a caller that asks for the first event
//! before the turn started (the usual streaming loop) gets a subscription the session takes
//! right before the turn's first append, so every event arrives live and nothing is read back. A
//! caller that starts reading later gets what was committed since the turn's first event read
//! back from the store from that event on (a cost that grows with the turn, not with the
//! session: [`SessionStore::load_from`]), then the rest live; once the session hibernated, the
//! whole turn is read from the store the same way.

use std::collections::VecDeque;
use std::future::IntoFuture;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{mpsc, oneshot};

use super::SessionError;
use crate::event::{Envelope, Event, TurnEndReason};
use crate::future::BoxFuture;
use crate::session_log::{Batch, SessionLog};
use crate::store::SessionStore;

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    /// The turn's number.
    pub turn: u32,
    /// Why it ended (as written in its `turn/end`).
    pub reason: TurnEndReason,
}

/// A turn started: where its events are.
pub(crate) struct Started {
    pub(crate) turn: u32,
    /// The `seq` of the turn's first event.
    pub(crate) from_seq: u64,
    source: Source,
    store: Arc<dyn SessionStore>,
    /// Every batch from the turn's first one, when the handle asked for events in time (or
    /// what follows the turn on another node).
    live: Option<mpsc::UnboundedReceiver<Batch>>,
}

/// Where the turn runs.
enum Source {
    /// Here: the session's open log.
    Local(SessionLog),
    /// On another node: the session.
    Remote(Arc<str>),
}

impl Started {
    /// A turn running here, in `log`.
    pub(crate) fn local(
        turn: u32,
        from_seq: u64,
        log: SessionLog,
        store: Arc<dyn SessionStore>,
        live: Option<mpsc::UnboundedReceiver<Batch>>,
    ) -> Self {
        Self { turn, from_seq, source: Source::Local(log), store, live }
    }

    /// A turn running on another node: `live` gets its events from `from_seq` on, as the node
    /// that follows it reads them.
    pub(crate) fn remote(
        turn: u32,
        from_seq: u64,
        session: Arc<str>,
        store: Arc<dyn SessionStore>,
        live: mpsc::UnboundedReceiver<Batch>,
    ) -> Self {
        Self { turn, from_seq, source: Source::Remote(session), store, live: Some(live) }
    }
}

/// The session's side of a [`TurnHandle`].
pub(crate) struct TurnSink {
    started: Option<oneshot::Sender<Started>>,
    outcome: oneshot::Sender<Result<TurnOutcome, SessionError>>,
    streams: Arc<AtomicBool>,
}

impl TurnSink {
    /// Whether the handle's caller reads events (asked for one before the turn started).
    pub(crate) fn streams(&self) -> bool {
        self.streams.load(Ordering::Acquire)
    }

    /// Reports that the turn started.
    pub(crate) fn started(&mut self, started: Started) {
        if let Some(sender) = self.started.take() {
            let _ = sender.send(started);
        }
    }

    /// Resolves the handle.
    pub(crate) fn finish(self, outcome: Result<TurnOutcome, SessionError>) {
        let _ = self.outcome.send(outcome);
    }
}

/// Where the stream stands.
enum Position {
    /// The turn has not started (or its start was not yet seen).
    Waiting(oneshot::Receiver<Started>),
    /// Started; nothing read yet.
    Started(Started),
    /// Reading: caught-up events first, then the subscription's batches.
    Reading(Reading),
    /// The turn's `turn/end` was yielded, or the turn never started.
    Ended,
}

/// Where a reading stream stands.
struct Reading {
    turn: u32,
    /// Events read back from the store, not yet yielded.
    pending: VecDeque<Envelope>,
    /// The batch being yielded, and the index of its next event.
    batch: Option<(Batch, usize)>,
    /// The log's later batches.
    live: Option<mpsc::UnboundedReceiver<Batch>>,
    /// Events below it were yielded.
    next_seq: u64,
}

/// What the next step of a reading stream is. Returned and matched at once, never stored: the
/// event moves out of it as it would out of a boxed one.
#[allow(clippy::large_enum_variant)]
enum Read {
    /// This event (the stream goes on, or ended with it).
    Event(Envelope),
    /// Nothing more: the stream ended.
    Ended,
    /// Wait for the next batch.
    Pending,
}

impl Reading {
    /// The next event of the turn, if one is at hand or the live receiver has one ready: no
    /// allocation and no await for the events of a batch that arrived.
    fn poll_read(&mut self, cx: &mut std::task::Context<'_>) -> Read {
        loop {
            let event = if let Some(event) = self.pending.pop_front() {
                event
            } else if let Some((batch, at)) = &mut self.batch {
                match batch.get(*at) {
                    Some(event) => {
                        *at += 1;
                        event.clone()
                    }
                    None => {
                        self.batch = None;
                        continue;
                    }
                }
            } else {
                match self.live.as_mut().map(|live| live.poll_recv(cx)) {
                    Some(std::task::Poll::Ready(Some(batch))) => {
                        self.batch = Some((batch, 0));
                        continue;
                    }
                    Some(std::task::Poll::Pending) => return Read::Pending,
                    Some(std::task::Poll::Ready(None)) | None => return Read::Ended,
                }
            };
            if event.seq < self.next_seq {
                continue;
            }
            self.next_seq = event.seq + 1;
            return Read::Event(event);
        }
    }
}

/// A prompted (or retried) turn: stream its events, await its outcome.
///
/// It is a [`futures::Stream`] of the turn's events, from its `user/message` to its `turn/end`,
/// and a future of its outcome; read the events first, or only await the outcome:
///
/// ```
/// use std::sync::Arc;
/// use futures::StreamExt;
/// use rein_runtime::prelude::*;
/// use rein_runtime::provider::prelude::*;
///
/// /// Streams "hi" and " there".
/// struct Greeter;
///
/// impl Adapter for Greeter {
///     fn call(&self, _: Request, chunks: ChunkSink) -> BoxFuture<'static, Result<Completion, Failure>> {
///         let _ = chunks.send("hi".into());
///         let _ = chunks.send(" there".into());
///         Box::pin(async { Ok(Completion::default()) })
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::builder()
///     .route(Route::new("greeter", Arc::new(Greeter)).model("m"))
///     .build()
///     .await?;
/// let session = runtime.session("s1").await?;
/// let mut turn = session.prompt("hello")?;
/// let mut streamed = String::new();
/// while let Some(envelope) = turn.next().await {
///     if let Event::AssistantChunk(chunk) = &envelope.event {
///         streamed.push_str(&chunk.text);
///     }
/// }
/// assert_eq!(streamed, "hi there");
/// assert_eq!(turn.await?.reason, TurnEndReason::Completed);
/// runtime.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub struct TurnHandle {
    position: Position,
    /// The step of the stream in progress (it owns the position meanwhile).
    advancing: Option<BoxFuture<'static, Advanced>>,
    turn: Option<u32>,
    outcome: oneshot::Receiver<Result<TurnOutcome, SessionError>>,
    streams: Arc<AtomicBool>,
}

/// What a step of the stream that waited gave: where the stream now stands, and the turn's
/// number once seen.
struct Advanced {
    position: Position,
    turn: Option<u32>,
}

impl std::fmt::Debug for TurnHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ended = matches!(self.position, Position::Ended);
        f.debug_struct("TurnHandle").field("turn", &self.turn).field("ended", &ended).finish()
    }
}

/// A new handle and the session's side of it.
pub(crate) fn channel() -> (TurnSink, TurnHandle) {
    let (started_tx, started_rx) = oneshot::channel();
    let (outcome_tx, outcome_rx) = oneshot::channel();
    let streams = Arc::new(AtomicBool::new(false));
    let sink =
        TurnSink { started: Some(started_tx), outcome: outcome_tx, streams: Arc::clone(&streams) };
    let handle = TurnHandle {
        position: Position::Waiting(started_rx),
        advancing: None,
        turn: None,
        outcome: outcome_rx,
        streams,
    };
    (sink, handle)
}

/// Whether `event` is turn `turn`'s `turn/end`.
fn ends(event: &Envelope, turn: u32) -> bool {
    matches!(&event.event, Event::TurnEnd(end) if end.turn == turn)
}

/// The events of turn `turn` from `from_seq` up to its `turn/end`: committed ones first, then a
/// live receiver — from the open log, or all from the store when the session hibernated.
async fn catch_up(
    started: &mut Started,
) -> (VecDeque<Envelope>, Option<mpsc::UnboundedReceiver<Batch>>) {
    if let Some(live) = started.live.take() {
        return (VecDeque::new(), Some(live));
    }
    let (subscribed, session) = match &mut started.source {
        Source::Local(log) => {
            (log.subscribe_batches_from(started.from_seq).await.ok(), log.session().to_owned())
        }
        Source::Remote(session) => (None, session.to_string()),
    };
    let (events, live) = match subscribed {
        Some((events, live)) => (events, Some(live)),
        None => match started.store.load_from(&session, started.from_seq).await {
            Ok(events) => (events, None),
            Err(_) => (Vec::new(), None),
        },
    };
    let mut out = VecDeque::new();
    for event in events.into_iter().filter(|e| e.seq >= started.from_seq) {
        let last = ends(&event, started.turn);
        out.push_back(event);
        if last {
            break;
        }
    }
    (out, live)
}

/// The stream's steps that wait for the turn to start or read back what it committed: from
/// `position`, where the stream then stands (reading, or ended).
async fn advance(mut position: Position, streams: Arc<AtomicBool>) -> Advanced {
    let mut turn = None;
    loop {
        match position {
            Position::Ended | Position::Reading(_) => {
                return Advanced { position, turn };
            }
            Position::Waiting(started) => {
                // Asked before the turn started: the session subscribes for this handle.
                streams.store(true, Ordering::Release);
                match started.await {
                    Ok(started) => {
                        turn = Some(started.turn);
                        position = Position::Started(started);
                    }
                    Err(_) => return Advanced { position: Position::Ended, turn },
                }
            }
            Position::Started(mut started) => {
                let (pending, live) = catch_up(&mut started).await;
                position = Position::Reading(Reading {
                    turn: started.turn,
                    pending,
                    batch: None,
                    live,
                    next_seq: started.from_seq,
                });
            }
        }
    }
}

impl futures::Stream for TurnHandle {
    type Item = Envelope;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Envelope>> {
        let this = &mut *self;
        loop {
            if this.advancing.is_none()
                && let Position::Reading(reading) = &mut this.position
            {
                return match reading.poll_read(cx) {
                    Read::Pending => std::task::Poll::Pending,
                    Read::Ended => {
                        this.position = Position::Ended;
                        std::task::Poll::Ready(None)
                    }
                    Read::Event(event) => {
                        if ends(&event, reading.turn) {
                            this.position = Position::Ended;
                        }
                        std::task::Poll::Ready(Some(event))
                    }
                };
            }
            if this.advancing.is_none() && matches!(this.position, Position::Ended) {
                return std::task::Poll::Ready(None);
            }
            let advancing = this.advancing.get_or_insert_with(|| {
                let position = std::mem::replace(&mut this.position, Position::Ended);
                Box::pin(advance(position, Arc::clone(&this.streams)))
            });
            let Advanced { position, turn } = std::task::ready!(advancing.as_mut().poll(cx));
            this.advancing = None;
            this.position = position;
            if turn.is_some() {
                this.turn = turn;
            }
        }
    }
}

impl TurnHandle {
    /// The turn's number, once [`TurnHandle::next_event`] saw it start.
    pub fn turn(&self) -> Option<u32> {
        self.turn
    }

    /// The next event of the turn, in commit order; `None` after its `turn/end` (or when the
    /// turn never started). The same as [`futures::StreamExt::next`] on the handle.
    pub async fn next_event(&mut self) -> Option<Envelope> {
        futures::StreamExt::next(self).await
    }

    /// Waits until the turn started: its number and the `seq` of its first event — or, when it
    /// never started, the error its outcome is. For a node serving a prompt another node sent
    /// (`crate::cluster`); the handle streams on from there.
    pub(crate) async fn started(&mut self) -> Result<(u32, u64), SessionError> {
        if let Position::Waiting(started) = std::mem::replace(&mut self.position, Position::Ended) {
            if let Ok(started) = started.await {
                let at = (started.turn, started.from_seq);
                self.turn = Some(started.turn);
                self.position = Position::Started(started);
                return Ok(at);
            }
            return match (&mut self.outcome).await {
                Ok(Err(error)) => Err(error),
                Ok(Ok(outcome)) => Ok((outcome.turn, 0)),
                Err(_) => Err(SessionError::Stopped),
            };
        }
        Err(SessionError::Stopped)
    }

    /// How the turn ended. An error when it never started (the session was closed or the
    /// runtime shut down while it was queued, or its first events could not be written).
    pub async fn outcome(self) -> Result<TurnOutcome, SessionError> {
        self.outcome.await.unwrap_or(Err(SessionError::Stopped))
    }
}

impl IntoFuture for TurnHandle {
    type Output = Result<TurnOutcome, SessionError>;
    type IntoFuture = BoxFuture<'static, Self::Output>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.outcome())
    }
}
