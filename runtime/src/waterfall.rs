//! The request-error waterfall (SPEC §4): the pure rules of the chain walk, and the driver that
//! walks a [`PluginChain`].
//!
//! Pure core (table-tested below):
//! - [`offered`]: whether a failure reaches the chain at all (not when the turn is cancelled, not
//!   `SCRIPT_EXHAUSTED`).
//! - [`hop`]: what one plugin's answer means for the walk — `Retry`/`Stop` decide, `Next`
//!   continues (or takes the answer downstream already gave), a crash counts as `Next`, and a
//!   plugin disposed during its recovery answers `Stop` whatever it said (fail closed).
//! - [`END_OF_CHAIN`]: the end of the chain answers `Stop`.
//! - [`outcome`]: rule 1 — cancellation beats everything.
//!
//! Shell: [`run`] walks the chain from the first plugin in registration order; a plugin's
//! [`Downstream`](crate::plugin::Downstream) walks the same chain from the plugin after it, under
//! a child of the turn's cancellation token. A walk offers its failure to the plugins that were
//! in the chain when it started (a plugin registered meanwhile takes part in later failures).
//!
//! # Why the walk runs in the caller's task
//!
//! The driver is plain async code awaited by the step that failed (and, for a downstream
//! consultation, by the consulting plugin's recovery task). Each hop is one message to a plugin
//! actor and one reply; nothing else is queued anywhere, so a thousand failing sessions walk
//! the chain concurrently and the only shared state is the chain itself.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use tokio_util::sync::CancellationToken;

use crate::event::{Event, PluginCrashed};
use crate::failure::{self, Failure};
use crate::plugin::{DownstreamAnswer, RequestErrorPayload, Verdict};
use crate::plugin_host::plugin_actor::{PluginReply, ReplyAnswer};
use crate::plugin_host::{Offered, PluginChain, Slots};
use crate::store::BoxFuture;

/// One plugin's answer as the walk sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginAnswer {
    /// The plugin answered.
    Verdict(Verdict),
    /// The recovery panicked (counts as `Next`).
    Crashed,
}

/// What the chain answers as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainAnswer {
    /// Rerun the request as a new attempt in the same step.
    Retry,
    /// No recovery.
    Stop,
}

/// What one hop means for the walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hop {
    /// The chain's answer is decided.
    Answer(ChainAnswer),
    /// Ask the next plugin.
    Continue,
}

/// The waterfall's outcome for the failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Run a new attempt in the same step.
    Retry,
    /// End the step and the turn with the failure.
    Stop,
    /// The turn was cancelled: end it `aborted`.
    Aborted,
}

/// The end of the chain answers `Stop`.
pub const END_OF_CHAIN: ChainAnswer = ChainAnswer::Stop;

/// Whether a failure is offered to the waterfall: not when the turn is cancelled (it ends
/// `aborted`), and not `SCRIPT_EXHAUSTED` (SPEC §10: no policy may retry a finished script).
pub fn offered(failure: &Failure, cancelled: bool) -> bool {
    !cancelled && failure.code() != failure::SCRIPT_EXHAUSTED
}

/// What one plugin's answer means. `disposed`: the plugin left the chain during its recovery.
/// `downstream`: what the rest of the chain answered, if the plugin consulted it.
pub fn hop(answer: PluginAnswer, disposed: bool, downstream: Option<DownstreamAnswer>) -> Hop {
    if disposed {
        return Hop::Answer(ChainAnswer::Stop);
    }
    match answer {
        PluginAnswer::Verdict(Verdict::Retry) => Hop::Answer(ChainAnswer::Retry),
        PluginAnswer::Verdict(Verdict::Stop) => Hop::Answer(ChainAnswer::Stop),
        PluginAnswer::Verdict(Verdict::Next) | PluginAnswer::Crashed => match downstream {
            // "Next" is whatever the rest of the chain answers — it already did.
            Some(DownstreamAnswer::Retry) => Hop::Answer(ChainAnswer::Retry),
            Some(DownstreamAnswer::Stop | DownstreamAnswer::Crashed) => {
                Hop::Answer(ChainAnswer::Stop)
            }
            None => Hop::Continue,
        },
    }
}

/// Rule 1: whatever the chain answered, a cancelled turn ends `aborted`.
pub fn outcome(answer: ChainAnswer, cancelled: bool) -> Outcome {
    match (cancelled, answer) {
        (true, _) => Outcome::Aborted,
        (false, ChainAnswer::Retry) => Outcome::Retry,
        (false, ChainAnswer::Stop) => Outcome::Stop,
    }
}

/// The chain's answer as a consulting plugin receives it.
pub fn as_downstream(answer: Option<ChainAnswer>) -> DownstreamAnswer {
    match answer {
        Some(ChainAnswer::Retry) => DownstreamAnswer::Retry,
        Some(ChainAnswer::Stop) => DownstreamAnswer::Stop,
        None => DownstreamAnswer::Crashed,
    }
}

/// Offers a failed attempt to the chain and returns what the step must do. The caller has
/// already appended `request/error` and checked [`offered`].
///
/// The walk is built (boxed) before the returned future is first polled, so that future holds
/// only the walk and the turn's token — not a copy of the payload — for as long as a plugin
/// waits: it is part of every turn parked in a retry wait.
pub fn run(
    chain: &Arc<PluginChain>,
    payload: RequestErrorPayload,
) -> impl Future<Output = Outcome> + Send + 'static {
    let cancel = payload.cancel.clone();
    let walk = (!cancel.is_cancelled()).then(|| walk(chain.snapshot(), 0, Arc::new(payload)));
    async move {
        let Some(walk) = walk else {
            return Outcome::Aborted;
        };
        // A walk that cannot finish (the host is gone: shutdown) recovers nothing.
        let answer = walk.await.unwrap_or(END_OF_CHAIN);
        outcome(answer, cancel.is_cancelled())
    }
}

/// Walks the chain from `from`; `None` when the host is unreachable. Every plugin of the walk
/// is offered the same `payload` (one allocation per walk, not a copy per hop).
fn walk(
    slots: Slots,
    from: usize,
    payload: Arc<RequestErrorPayload>,
) -> BoxFuture<'static, Option<ChainAnswer>> {
    Box::pin(async move {
        for (index, slot) in slots.iter().enumerate().skip(from) {
            if payload.cancel.is_cancelled() {
                // Rule 1: the outcome is `aborted` whatever the rest of the chain would answer;
                // offering it the failure would only wake its plugins to give up.
                return Some(END_OF_CHAIN);
            }
            let rest = || RestOfWalk {
                slots: Arc::clone(&slots),
                from: index + 1,
                payload: Arc::clone(&payload),
            };
            let (offered, asked) = slot.offer(&payload, rest).await;
            let (answer, disposed) = match offered {
                Offered::Skipped => continue,
                Offered::Unreachable => return None,
                Offered::Answer(PluginReply { answer, disposed }) => match answer {
                    ReplyAnswer::Verdict(verdict) => (PluginAnswer::Verdict(verdict), disposed),
                    ReplyAnswer::Crashed { error, restarts } => {
                        // Boxed: a rare path that should not size every walk's future.
                        Box::pin(record_crash(&slot.name, &payload, error, restarts)).await;
                        (PluginAnswer::Crashed, disposed)
                    }
                },
            };
            let downstream = asked.and_then(|a| a.answer());
            match hop(answer, disposed, downstream) {
                Hop::Answer(answer) => return Some(answer),
                Hop::Continue => {}
            }
        }
        Some(END_OF_CHAIN)
    })
}

/// The walk of the chain after one plugin, as that plugin's downstream handle holds it: three
/// shared pointers, no closure and no copy of the payload until the plugin actually asks.
pub(crate) struct RestOfWalk {
    slots: Slots,
    from: usize,
    payload: Arc<RequestErrorPayload>,
}

impl RestOfWalk {
    /// The walk's cancellation token (the turn's, or an enclosing consultation's scope).
    pub(crate) fn cancel(&self) -> &CancellationToken {
        &self.payload.cancel
    }

    /// The `disposed` token of the plugin whose downstream this is (the one before `from`).
    pub(crate) fn asker_disposed(&self) -> CancellationToken {
        let asker = self.from.checked_sub(1).and_then(|index| self.slots.get(index));
        asker.map_or_else(CancellationToken::new, |slot| slot.disposed.clone())
    }

    /// Walks the rest of the chain under the consultation's cancellation `scope`; a walk that
    /// panics or cannot reach the host answers `Crashed`.
    pub(crate) fn walk(self, scope: CancellationToken) -> BoxFuture<'static, DownstreamAnswer> {
        let payload = Arc::new(RequestErrorPayload { cancel: scope, ..(*self.payload).clone() });
        let walk = walk(self.slots, self.from, payload);
        Box::pin(async move {
            match AssertUnwindSafe(walk).catch_unwind().await {
                Ok(answer) => as_downstream(answer),
                Err(_) => DownstreamAnswer::Crashed,
            }
        })
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
mod tests {
    use super::*;
    use DownstreamAnswer as D;
    use PluginAnswer::{Crashed, Verdict as V};
    use Verdict::{Next, Retry, Stop};

    #[test]
    fn a_hop_decides_or_continues() {
        let retry = Hop::Answer(ChainAnswer::Retry);
        let stop = Hop::Answer(ChainAnswer::Stop);
        let cases: Vec<(PluginAnswer, bool, Option<D>, Hop)> = vec![
            // Plain verdicts.
            (V(Retry), false, None, retry),
            (V(Stop), false, None, stop),
            (V(Next), false, None, Hop::Continue),
            // A crash counts as Next.
            (Crashed, false, None, Hop::Continue),
            // Downstream spoke first: Next is its answer, the chain is not walked twice.
            (V(Next), false, Some(D::Retry), retry),
            (V(Next), false, Some(D::Stop), stop),
            (V(Next), false, Some(D::Crashed), stop),
            (Crashed, false, Some(D::Retry), retry),
            (Crashed, false, Some(D::Stop), stop),
            // A plugin may overrule what downstream said.
            (V(Retry), false, Some(D::Stop), retry),
            (V(Stop), false, Some(D::Retry), stop),
            // Disposed during its recovery: Stop, whatever it answered (fail closed).
            (V(Retry), true, None, stop),
            (V(Next), true, None, stop),
            (V(Next), true, Some(D::Retry), stop),
            (Crashed, true, None, stop),
        ];
        for (answer, disposed, downstream, expected) in cases {
            assert_eq!(
                hop(answer, disposed, downstream),
                expected,
                "{answer:?} {disposed} {downstream:?}"
            );
        }
    }

    #[test]
    fn cancellation_beats_every_answer() {
        let cases = [
            (ChainAnswer::Retry, false, Outcome::Retry),
            (ChainAnswer::Stop, false, Outcome::Stop),
            (ChainAnswer::Retry, true, Outcome::Aborted),
            (ChainAnswer::Stop, true, Outcome::Aborted),
        ];
        for (answer, cancelled, expected) in cases {
            assert_eq!(outcome(answer, cancelled), expected);
        }
        assert_eq!(END_OF_CHAIN, ChainAnswer::Stop);
    }

    #[test]
    fn what_reaches_the_chain() {
        let server = Failure::new("SERVER", "down").unwrap();
        let exhausted = Failure::new(failure::SCRIPT_EXHAUSTED, "no more script").unwrap();
        let aborted = Failure::aborted();
        assert!(offered(&server, false));
        assert!(!offered(&server, true), "a cancelled turn ends aborted");
        assert!(!offered(&exhausted, false), "a finished script is never retried");
        assert!(offered(&aborted, false), "an adapter's own ABORTED is a failure like any");
    }

    #[test]
    fn a_consultation_reports_the_chain_or_a_crash() {
        assert_eq!(as_downstream(Some(ChainAnswer::Retry)), D::Retry);
        assert_eq!(as_downstream(Some(ChainAnswer::Stop)), D::Stop);
        assert_eq!(as_downstream(None), D::Crashed);
    }
}
