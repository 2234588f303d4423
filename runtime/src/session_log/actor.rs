//! The session-log actor: one per open session, the only writer of its log.
//!
//! Wiring only: each message is one [`LogState`] step and a reply. The actor processes one
//! message at a time, so appends of a session are serialized and the `seq`s it hands out are
//! contiguous without a lock.

use std::any::Any;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::mpsc::UnboundedReceiver;
use tracing::Instrument;

use crate::event::{Envelope, Event};
use crate::validator::Validator;

use super::registry::{ErasedProjection, View};
use super::state::LogState;
use super::{AppendError, LogError};

/// What the session-log actor is asked.
pub(crate) enum Msg {
    /// Append a batch.
    Append(Vec<Event>, RpcReplyPort<Result<Vec<Envelope>, AppendError>>),
    /// Subscribe to the events committed from now on.
    Subscribe(RpcReplyPort<UnboundedReceiver<Envelope>>),
    /// Install a validator.
    AddValidator(Box<dyn Validator>, RpcReplyPort<Result<(), LogError>>),
    /// Register a projection.
    Register(Box<dyn ErasedProjection>, RpcReplyPort<Result<(), LogError>>),
    /// Read a projection's state.
    Read(&'static str, RpcReplyPort<Result<Box<dyn Any + Send>, LogError>>),
    /// Apply a view to a projection's state (borrowed) and reply with what it made.
    View(&'static str, View, RpcReplyPort<Result<Box<dyn Any + Send>, LogError>>),
    /// Read the whole log back from the store.
    Events(RpcReplyPort<Result<Vec<Envelope>, LogError>>),
}

/// The actor (its state is the [`LogState`] it is spawned with).
pub(crate) struct SessionLogActor;

impl Actor for SessionLogActor {
    type Msg = Msg;
    type State = LogState;
    type Arguments = LogState;

    async fn pre_start(
        &self,
        _myself: ActorRef<Msg>,
        state: LogState,
    ) -> Result<LogState, ActorProcessingErr> {
        Ok(state)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Msg>,
        message: Msg,
        state: &mut LogState,
    ) -> Result<(), ActorProcessingErr> {
        // Boxed: ractor keeps the processing loop's future for the actor's whole life, sized
        // for the largest handler (an append awaiting the store); boxed, that space is only
        // held while a message is handled.
        Box::pin(serve(message, state)).await;
        Ok(())
    }
}

/// Serves one message.
async fn serve(message: Msg, state: &mut LogState) {
    let span = tracing::debug_span!("session_log", session.id = %state.session());
    // A caller that gave up waiting dropped its port; the step is done either way, so a
    // failed reply is not an error of the log.
    async move {
        match message {
            Msg::Append(events, reply) => {
                let _ = reply.send(state.append(events).await);
            }
            Msg::Subscribe(reply) => {
                let _ = reply.send(state.subscribe());
            }
            Msg::AddValidator(validator, reply) => {
                let _ = reply.send(state.add_validator(validator).await);
            }
            Msg::Register(projection, reply) => {
                let _ = reply.send(state.register(projection).await);
            }
            Msg::Read(key, reply) => {
                let _ = reply.send(state.snapshot(key));
            }
            Msg::View(key, view, reply) => {
                let _ = reply.send(state.view(key, view));
            }
            Msg::Events(reply) => {
                let _ = reply.send(state.events().await);
            }
        }
    }
    .instrument(span)
    .await;
}
