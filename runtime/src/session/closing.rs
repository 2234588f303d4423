//! [`Closing`]: the closing batch of a cancelled turn on its way through the session's log,
//! and what it does once the log wrote it — or could not.
//!
//! A cancellation that lands closes its turn in one log operation (see `actor`, `cancel`). The
//! session does not wait for it: the log runs [`Closing::done`] right after the store's ack,
//! which tells the session (`Closed`, a message) and then answers the caller — the cancel's
//! reply and the turn's outcome. So the cancel's caller is answered by the log itself, one
//! hand-off after the session took the cancel, instead of the log answering the session and the
//! session the caller: each hand-off is a wait behind every task the other agents made ready,
//! and the session's own bookkeeping is not on the caller's path.
//!
//! The session hears first and the caller last: a caller that goes on at once (another prompt)
//! finds the session's mailbox holding the `Closed` before its message. A closing that never
//! ran (the log stopped first) tells the session as a failure on drop, with the turn's sink, so
//! no caller is left waiting.

use ractor::ActorRef;
use tokio::sync::oneshot;

use super::message::{Closed, SessionMsg};
use super::turn_handle::{TurnOutcome, TurnSink};
use crate::session_log::{AppendError, Batch};

/// The closing of a cancelled turn in flight: what answers its caller.
pub(crate) struct Closing {
    session: ActorRef<SessionMsg>,
    turn: u32,
    /// The turn's sink and its outcome, until answered.
    outcome: Option<(TurnSink, TurnOutcome)>,
    /// The cancel's reply (none for a close or a shutdown).
    reply: Option<oneshot::Sender<bool>>,
}

impl Closing {
    /// The closing of `outcome`'s turn, answering `sink` and `reply` once written.
    pub(crate) fn new(
        session: ActorRef<SessionMsg>,
        sink: TurnSink,
        outcome: TurnOutcome,
        reply: Option<oneshot::Sender<bool>>,
    ) -> Self {
        Self { session, turn: outcome.turn, outcome: Some((sink, outcome)), reply }
    }

    /// The log wrote the closing batch (`Ok`), a validator refused it (the turn counts as closed,
    /// as when the session writes it itself), or the log failed.
    /// `route`: the route of the turn's latest attempt.
    pub(crate) fn done(mut self, written: Result<Batch, AppendError>, route: Option<String>) {
        match written {
            Ok(_) => self.answer(None, route),
            Err(error @ AppendError::Rejected(_)) => {
                tracing::warn!(turn = self.turn, %error, "a validator refused the turn's closing events");
                self.answer(None, route);
            }
            Err(error) => self.answer(Some(error), None),
        }
    }

    /// Tells the session, then the caller (once).
    fn answer(&mut self, failed: Option<AppendError>, route: Option<String>) {
        let Some((sink, outcome)) = self.outcome.take() else { return };
        let (failed, answered) = match failed {
            None => (None, Some((sink, outcome))),
            Some(error) => (Some((error, sink)), None),
        };
        let closed = Closed { turn: self.turn, route, failed };
        let _ = self.session.send_message(SessionMsg::Closed(closed));
        if let Some(reply) = self.reply.take() {
            let _ = reply.send(true);
        }
        if let Some((sink, outcome)) = answered {
            sink.finish(Ok(outcome));
        }
    }
}

impl Drop for Closing {
    fn drop(&mut self) {
        // The log stopped before the closing ran: the session answers the turn's caller.
        self.answer(Some(AppendError::Closed), None);
    }
}
