//! The walk: offers a failed attempt to the plugins of a [`PluginChain`] in order, applying the
//! waterfall's rules (`crate::waterfall`) to each answer.
//!
//! [`run`] walks the whole chain for a failing step (its future is a task of the step, and its
//! outcome reaches the step as a message). [`RestOfWalk`] is the chain after one plugin, walked
//! when that plugin's `Downstream::ask` consults it, under a child of the step's token. A walk
//! offers its failure to the plugins that were in the chain when it started (a plugin registered
//! meanwhile takes part in later failures).
//!
//! # Why the walk is plain async code
//!
//! Each hop is one message to a plugin actor and one reply; nothing else is queued anywhere, so
//! a thousand failing sessions walk the chain concurrently and the only shared state is the
//! chain itself.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, OnceLock};

use futures::FutureExt;
use tokio_util::sync::CancellationToken;

use super::slot::{Offered, PluginChain, Slots};
use crate::event::{Event, PluginCrashed};
use crate::future::BoxFuture;
use crate::plugin::{DownstreamAnswer, DownstreamWalk, RequestErrorPayload};
use crate::waterfall::{self, Answered, END_OF_CHAIN, Hop, Resolution};

/// Offers a failed attempt to the chain and returns what the step must do. The caller has
/// already appended `request/error` and checked [`waterfall::offered`].
///
/// The walk is built (boxed) before the returned future is first polled, so that future holds
/// only the walk and the step's token — not a copy of the payload — for as long as a plugin
/// waits: it is part of every turn parked in a retry wait.
pub(crate) fn run(
    chain: &Arc<PluginChain>,
    payload: RequestErrorPayload,
) -> impl Future<Output = Resolution> + Send + 'static {
    let cancel = payload.cancel.clone();
    let walk = (!cancel.is_cancelled()).then(|| walk(chain.snapshot(), 0, Arc::new(payload)));
    async move {
        let Some(walk) = walk else {
            return Resolution::Aborted;
        };
        waterfall::outcome(walk.await, cancel.is_cancelled())
    }
}

/// Walks the chain from `from`; `Crashed` when the host is unreachable (the runtime shuts down).
/// Every plugin of the walk is offered the same `payload` (one allocation per walk, not a copy
/// per hop).
fn walk(
    slots: Slots,
    from: usize,
    payload: Arc<RequestErrorPayload>,
) -> BoxFuture<'static, DownstreamAnswer> {
    Box::pin(async move {
        for (index, slot) in slots.iter().enumerate().skip(from) {
            if payload.cancel.is_cancelled() {
                // Cancellation beats everything: the outcome is `aborted` whatever the rest of
                // the chain would answer, and offering it the failure would only wake its plugins
                // to give up.
                return END_OF_CHAIN;
            }
            let rest = || RestOfWalk {
                slots: Arc::clone(&slots),
                from: index + 1,
                payload: Arc::clone(&payload),
                answer: OnceLock::new(),
            };
            let (offered, asked) = slot.offer(&payload, rest).await;
            let reply = match offered {
                Offered::Skipped => continue,
                Offered::Unreachable => return DownstreamAnswer::Crashed,
                Offered::Answer(reply) => reply,
            };
            if let Answered::Crashed { error, restarts } = &reply.answer {
                // Boxed: a rare path that should not size every walk's future.
                Box::pin(record_crash(&slot.name, &payload, error.clone(), *restarts)).await;
            }
            let downstream = asked.and_then(|a| a.answer());
            if let Hop::Decided(answer) = waterfall::hop(&reply.answer, reply.disposed, downstream)
            {
                return answer;
            }
        }
        END_OF_CHAIN
    })
}

/// The walk of the chain after one plugin, as that plugin's downstream handle holds it: three
/// shared pointers, no copy of the payload until the plugin actually asks, and the answer once
/// given.
pub(crate) struct RestOfWalk {
    slots: Slots,
    from: usize,
    payload: Arc<RequestErrorPayload>,
    answer: OnceLock<DownstreamAnswer>,
}

impl DownstreamWalk for RestOfWalk {
    fn tokens(&self) -> (CancellationToken, CancellationToken) {
        // The walk's token (the step's, or an enclosing consultation's scope), and the
        // `disposed` token of the plugin whose downstream this is (the one before `from`).
        let asker = self.from.checked_sub(1).and_then(|index| self.slots.get(index));
        let disposed = asker.map_or_else(CancellationToken::new, |slot| slot.disposed.clone());
        (self.payload.cancel.clone(), disposed)
    }

    fn walk(&self, scope: CancellationToken) -> BoxFuture<'static, DownstreamAnswer> {
        let payload = Arc::new(RequestErrorPayload { cancel: scope, ..(*self.payload).clone() });
        let walk = walk(Arc::clone(&self.slots), self.from, payload);
        Box::pin(async move {
            // A walk that panics answers `Crashed`, as one that cannot reach the host.
            AssertUnwindSafe(walk).catch_unwind().await.unwrap_or(DownstreamAnswer::Crashed)
        })
    }

    fn answer(&self) -> &OnceLock<DownstreamAnswer> {
        &self.answer
    }
}

/// Appends `plugin/crashed` (diagnostics; nothing is written once the turn is cancelled).
async fn record_crash(plugin: &str, payload: &RequestErrorPayload, error: String, restarts: u32) {
    if payload.cancel.is_cancelled() {
        return;
    }
    let event = Event::PluginCrashed(PluginCrashed { plugin: plugin.to_owned(), error, restarts });
    if let Err(error) = payload.log.append(vec![event]).await {
        tracing::warn!(%error, "could not record plugin/crashed");
    }
}

#[cfg(test)]
mod tests;
