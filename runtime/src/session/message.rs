//! The messages of a session actor (`actor`): what a [`Session`](super::Session) handle asks
//! (through the directory, which counts them) and what the actor tells itself or hears from the
//! runtime. Apart from the actor, so that the directory, which delivers them, needs only this
//! file.

use tokio::sync::oneshot;

use super::turn_handle::{TurnHandle, TurnSink};
use super::{Prompt, SessionError};
use crate::event::{CancelCause, ConfigChanged, Envelope};
use crate::session_log::AppendError;

/// A message to a session actor.
pub(crate) enum SessionMsg {
    /// From a [`Session`](super::Session) handle, through the directory (counted).
    Client(ClientMsg),
    /// The idle grace period armed as generation `.0` elapsed.
    GraceOver(u64),
    /// The runtime shuts down: cancel the running turn (`disposed`), drop the queue, hibernate.
    Shutdown,
    /// A cancelled turn's closing batch was written (or not), by the log (see `closing`).
    Closed(Closed),
}

/// A client's request.
pub(crate) enum ClientMsg {
    Open(oneshot::Sender<Result<(), SessionError>>),
    Prompt(Prompt, TurnSink),
    Retry(TurnSink, oneshot::Sender<Result<(), SessionError>>),
    Cancel(CancelCause, oneshot::Sender<bool>),
    Close(oneshot::Sender<()>),
    Events(oneshot::Sender<Result<Vec<Envelope>, SessionError>>),
    Resumed(oneshot::Sender<Option<TurnHandle>>),
    ConfigChanged(ConfigChanged),
}

/// What the session hears once a cancelled turn's closing batch was written (or not).
pub(crate) struct Closed {
    /// The turn closed.
    pub(crate) turn: u32,
    /// The route of the turn's latest attempt, as the log folded it (none: it made none).
    pub(crate) route: Option<String>,
    /// Why it could not be written, and the turn's sink to answer (the session's log failed).
    pub(crate) failed: Option<(AppendError, TurnSink)>,
}
