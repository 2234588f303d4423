//! The bare provider actor (one per route): each attempt it is sent runs as a task calling the
//! workload's adapter, raced against the step's token; the task sends the step each chunk, then
//! the outcome, as messages. A cancelled attempt sends nothing.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use rein::runtime::provider::{Adapter, ChunkSink, Request};
use tokio_util::sync::CancellationToken;

use super::step::StepMsg;

/// An attempt: the request, the step to answer, the step's token.
pub(super) enum ProviderMsg {
    Call(Request, ActorRef<StepMsg>, CancellationToken),
}

pub(super) struct BareProvider {
    adapter: Arc<dyn Adapter>,
}

impl BareProvider {
    pub(super) fn new(adapter: impl Adapter + 'static) -> Self {
        Self { adapter: Arc::new(adapter) }
    }
}

impl Actor for BareProvider {
    type Msg = ProviderMsg;
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<ProviderMsg>, (): ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn handle(
        &self,
        _: ActorRef<ProviderMsg>,
        ProviderMsg::Call(request, step, token): ProviderMsg,
        (): &mut (),
    ) -> Result<(), ActorProcessingErr> {
        let (sink, mut chunks) = ChunkSink::channel();
        let attempt = self.adapter.call(request, sink);
        tokio::spawn(async move {
            let outcome = tokio::select! {
                biased;
                () = token.cancelled() => return,
                outcome = attempt => outcome,
            };
            while let Ok(chunk) = chunks.try_recv() {
                let _ = step.send_message(StepMsg::Chunk(chunk));
            }
            let _ = step.send_message(StepMsg::Done(outcome));
        });
        Ok(())
    }
}
