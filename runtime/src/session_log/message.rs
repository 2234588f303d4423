//! The messages of a session-log actor (`actor`): an append, or any other operation on the log's
//! state. Apart from the actor, so that the log's handle, which sends them, needs only this file.

use tokio::sync::oneshot;

use super::AppendError;
use super::state::{Batch, LogState};
use crate::event::Event;
use crate::future::BoxFuture;

/// An operation on the log's state, carrying its own reply port.
pub(crate) type Op = Box<dyn for<'a> FnOnce(&'a mut LogState) -> BoxFuture<'a, ()> + Send>;

/// A message to a session-log actor.
pub(crate) enum LogMsg {
    /// Append a batch; answered after the store's ack.
    Append(Vec<Event>, oneshot::Sender<Result<Batch, AppendError>>),
    /// Any other operation (reads, subscriptions, registrations).
    Run(Op),
}
