//! The bare provider actor (one per route): each attempt it is sent runs as a task calling the
//! workload's adapter, raced against the step's token. The chunks are pushed into a buffer the
//! step shares, and the step is sent a message only when the buffer was empty (the chunks that
//! arrive while it is busy go as one batch, as in rein); the outcome follows as a message. A
//! cancelled attempt sends nothing more.

use std::sync::{Arc, Mutex, PoisonError};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use rein::runtime::provider::{Adapter, ChunkSink, Request, SinkClosed};
use tokio_util::sync::CancellationToken;

use super::step::StepMsg;

/// The chunks of an attempt that reached its step and are not written yet.
#[derive(Clone, Default)]
pub(super) struct Pending(Arc<Mutex<Vec<String>>>);

impl Pending {
    /// Adds a chunk; `true` when the buffer was empty (the step must be told).
    fn push(&self, chunk: String) -> bool {
        let mut pending = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        pending.push(chunk);
        pending.len() == 1
    }

    /// Every chunk pushed so far, in order.
    pub(super) fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// An attempt: the request, the step to answer, its attempt number, its chunk buffer, the
/// step's token.
pub(super) enum ProviderMsg {
    Call(Request, ActorRef<StepMsg>, Pending, CancellationToken),
}

pub(super) struct BareProvider {
    adapter: Arc<dyn Adapter>,
}

impl BareProvider {
    pub(super) fn new(adapter: Arc<dyn Adapter>) -> Self {
        Self { adapter }
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
        ProviderMsg::Call(request, step, pending, token): ProviderMsg,
        (): &mut (),
    ) -> Result<(), ActorProcessingErr> {
        let attempt = request.attempt;
        let sink = {
            let step = step.clone();
            ChunkSink::new(move |chunk| {
                if pending.push(chunk) {
                    step.send_message(StepMsg::Chunks(attempt)).map_err(|_| SinkClosed)?;
                }
                Ok(())
            })
        };
        let call = self.adapter.call(request, sink);
        tokio::spawn(async move {
            let outcome = tokio::select! {
                biased;
                () = token.cancelled() => return,
                outcome = call => outcome,
            };
            let _ = step.send_message(StepMsg::Done(attempt, outcome));
        });
        Ok(())
    }
}
