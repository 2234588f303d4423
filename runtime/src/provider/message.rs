//! The messages of a provider actor (`actor`): one attempt to run, and where its outcome goes.
//! Apart from the actor, so that what sends them (a step) needs only this file.

use tokio_util::sync::CancellationToken;

use crate::failure::Failure;
use crate::provider::{ChunkSink, Completion, Request};

/// One attempt's outcome.
pub(crate) type AttemptResult = Result<Completion, Failure>;

/// A message to a [`ProviderActor`](super::actor::ProviderActor).
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum ProviderMsg {
    /// Run one attempt.
    Call(ProviderCall),
}

/// Where an attempt's outcome goes (the step that asked, as a message).
pub(crate) type OnOutcome = Box<dyn FnOnce(AttemptResult) + Send>;

/// One attempt to run.
pub(crate) struct ProviderCall {
    /// The request.
    pub request: Request,
    /// Where the adapter streams chunks.
    pub chunks: ChunkSink,
    /// The step's cancellation token: cancelled → the attempt ends `ABORTED`.
    pub cancel: CancellationToken,
    /// Where the outcome goes.
    pub reply: OnOutcome,
}

impl std::fmt::Debug for ProviderCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderCall").field("request", &self.request).finish_non_exhaustive()
    }
}
