//! [`TurnHandle`]: what `Session::prompt` and `Session::retry` return — the turn's events as
//! they are committed, and its outcome.
//!
//! The handle is created before the turn starts (a prompt sent while another turn runs waits in
//! the session's queue). When the turn starts, the session subscribes to its log and hands the
//! subscription over; [`TurnHandle::next_event`] yields every event committed from the turn's
//! first event (`user/message`, or `turn/start` for a retry) up to and including its
//! `turn/end`, then `None`. Awaiting the handle (or [`TurnHandle::outcome`]) resolves to how
//! the turn ended.
//!
//! # Why a log subscription
//!
//! The turn's events are written by several parties — the step, the turn, and plugins appending
//! `llm/retry` — and only the session log sees them all, in commit order. Subscribing at the
//! start of the turn gives the handle exactly the log's view, nothing buffered twice.

use std::future::IntoFuture;

use tokio::sync::{mpsc, oneshot};

use crate::event::{Envelope, Event, TurnEndReason};
use crate::session::SessionError;
use crate::store::BoxFuture;

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    /// The turn's number.
    pub turn: u32,
    /// Why it ended (as written in its `turn/end`).
    pub reason: TurnEndReason,
}

/// A turn started: its number and the log subscription its events arrive on.
pub(crate) struct Started {
    pub(crate) turn: u32,
    pub(crate) events: Option<mpsc::UnboundedReceiver<Envelope>>,
}

/// The session's side of a [`TurnHandle`].
pub(crate) struct TurnSink {
    started: Option<oneshot::Sender<Started>>,
    outcome: oneshot::Sender<Result<TurnOutcome, SessionError>>,
}

impl TurnSink {
    /// Reports that the turn started.
    pub(crate) fn started(&mut self, turn: u32, events: Option<mpsc::UnboundedReceiver<Envelope>>) {
        if let Some(started) = self.started.take() {
            let _ = started.send(Started { turn, events });
        }
    }

    /// Resolves the handle.
    pub(crate) fn finish(self, outcome: Result<TurnOutcome, SessionError>) {
        let _ = self.outcome.send(outcome);
    }
}

/// A prompted (or retried) turn: stream its events, await its outcome.
pub struct TurnHandle {
    started: Option<oneshot::Receiver<Started>>,
    turn: Option<u32>,
    events: Option<mpsc::UnboundedReceiver<Envelope>>,
    ended: bool,
    outcome: oneshot::Receiver<Result<TurnOutcome, SessionError>>,
}

impl std::fmt::Debug for TurnHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnHandle").field("turn", &self.turn).field("ended", &self.ended).finish()
    }
}

/// A new handle and the session's side of it.
pub(crate) fn channel() -> (TurnSink, TurnHandle) {
    let (started_tx, started_rx) = oneshot::channel();
    let (outcome_tx, outcome_rx) = oneshot::channel();
    let sink = TurnSink { started: Some(started_tx), outcome: outcome_tx };
    let handle = TurnHandle {
        started: Some(started_rx),
        turn: None,
        events: None,
        ended: false,
        outcome: outcome_rx,
    };
    (sink, handle)
}

impl TurnHandle {
    /// The turn's number, once [`TurnHandle::next_event`] saw it start.
    pub fn turn(&self) -> Option<u32> {
        self.turn
    }

    /// The next event of the turn, in commit order; `None` after its `turn/end` (or when the
    /// turn never started).
    pub async fn next_event(&mut self) -> Option<Envelope> {
        if self.ended {
            return None;
        }
        if let Some(started) = self.started.take() {
            match started.await {
                Ok(Started { turn, events }) => {
                    self.turn = Some(turn);
                    self.events = events;
                }
                Err(_) => {
                    self.ended = true;
                    return None;
                }
            }
        }
        let turn = self.turn?;
        let event = self.events.as_mut()?.recv().await;
        match &event {
            Some(Envelope { event: Event::TurnEnd(end), .. }) if end.turn == turn => {
                self.ended = true;
            }
            None => self.ended = true,
            Some(_) => {}
        }
        event
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
