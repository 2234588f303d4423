//! Where a session is served: by this runtime, or by another node of a cluster (SPEC §12).
//!
//! A runtime built without a [`Placement`] serves every session itself. A node of a cluster
//! serves the sessions of the partitions it holds; every request a [`Session`](super::Session)
//! handle makes for another one is forwarded to the node that holds it (`crate::cluster`), which
//! answers through the request's own channels — so the handle behaves the same wherever its
//! session lives. The check happens at each request: a session whose partition moved is served
//! where it is now.

use std::sync::Arc;

use super::turn_handle::TurnSink;
use super::{Prompt, SessionError};
use crate::event::CancelCause;
use crate::future::BoxFuture;

/// What decides where a session is served, and serves the requests of a [`Session`](super::Session)
/// handle for a session another node serves: each answers as the local request would.
pub(crate) trait Router: Send + Sync + 'static {
    /// Whether `session` is served by this runtime now.
    fn is_local(&self, session: &str) -> bool;

    /// Sends the prompt; `sink` learns when its turn started (its events follow) and how it
    /// ended. Fails only when it cannot be sent at all.
    fn prompt(
        &self,
        session: &Arc<str>,
        prompt: Prompt,
        sink: TurnSink,
    ) -> Result<(), SessionError>;

    /// Asks for a retry of the last turn; resolves once it was accepted or refused.
    fn retry(
        &self,
        session: &Arc<str>,
        sink: TurnSink,
    ) -> BoxFuture<'static, Result<(), SessionError>>;

    /// Cancels the running turn: whether one was cancelled.
    fn cancel(
        &self,
        session: &Arc<str>,
        cause: CancelCause,
    ) -> BoxFuture<'static, Result<bool, SessionError>>;

    /// Closes the session.
    fn close(&self, session: &Arc<str>) -> BoxFuture<'static, Result<(), SessionError>>;

    /// Opens the session (creating it if new).
    fn open(&self, session: &Arc<str>) -> BoxFuture<'static, Result<(), SessionError>>;
}

/// How a runtime places its sessions among the nodes of a cluster
/// ([`RuntimeBuilder::placement`](crate::runtime::RuntimeBuilder::placement)); made by a node
/// (`rein_runtime::cluster::Node::placement`, cargo feature `postgres`).
#[derive(Clone)]
pub struct Placement(pub(crate) Arc<dyn Router>);

impl std::fmt::Debug for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Placement")
    }
}
