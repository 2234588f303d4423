//! The adapters and plugins the runtime metrics drive the real runtime with.
//!
//! - [`Instant`]: a provider with no latency: one chunk, then success.
//! - [`Down`]: a provider that fails every attempt at once (`SERVER`).
//! - [`FailFirst`]: a provider whose first attempt of a step fails, the next succeeds.
//! - [`PassThrough`]: a plugin that answers `Next` at once (a waterfall hop and nothing else).
//! - [`RetryAll`]: a plugin that answers `Retry` at once.
//! - [`Parking`]: a plugin whose recovery waits until the turn is cancelled (or the plugin
//!   disposed), holding its whole `Recovery` as a real retry plugin's backoff does, and counts
//!   how many recoveries are parked.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rein::runtime::BoxFuture;
use rein::runtime::failure::Failure;
use rein::runtime::plugin::{Plugin, Recovery, Verdict};
use rein::runtime::provider::{Adapter, ChunkSink, Completion, Request};
use tokio::sync::Notify;

/// The text [`Instant`] streams.
pub(crate) const CHUNK: &str = "ok";

/// A provider with no latency: streams [`CHUNK`] and succeeds.
pub(crate) struct Instant;

impl Adapter for Instant {
    fn call(
        &self,
        _: Request,
        chunks: ChunkSink,
    ) -> BoxFuture<'static, Result<Completion, Failure>> {
        Box::pin(async move {
            let _ = chunks.send(CHUNK.to_owned());
            Ok(Completion::default())
        })
    }
}

/// A provider that fails every attempt at once.
pub(crate) struct Down(Failure);

impl Down {
    pub(crate) fn new() -> anyhow::Result<Arc<Self>> {
        Ok(Arc::new(Self(Failure::new("SERVER", "the provider is down")?)))
    }
}

impl Adapter for Down {
    fn call(&self, _: Request, _: ChunkSink) -> BoxFuture<'static, Result<Completion, Failure>> {
        let failure = self.0.clone();
        Box::pin(async move { Err(failure) })
    }
}

/// A provider whose first attempt of every step fails at once (`SERVER`); later attempts
/// stream [`CHUNK`] and succeed.
pub(crate) struct FailFirst(Failure);

impl FailFirst {
    pub(crate) fn new() -> anyhow::Result<Arc<Self>> {
        Ok(Arc::new(Self(Failure::new("SERVER", "the first attempt fails")?)))
    }
}

impl Adapter for FailFirst {
    fn call(
        &self,
        request: Request,
        chunks: ChunkSink,
    ) -> BoxFuture<'static, Result<Completion, Failure>> {
        let failure = (request.attempt == 1).then(|| self.0.clone());
        Box::pin(async move {
            match failure {
                Some(failure) => Err(failure),
                None => {
                    let _ = chunks.send(CHUNK.to_owned());
                    Ok(Completion::default())
                }
            }
        })
    }
}

/// A plugin that answers `Retry` at once.
pub(crate) struct RetryAll;

impl Plugin for RetryAll {
    fn name(&self) -> &str {
        "retry-all"
    }

    fn recover(self: Arc<Self>, _: Recovery) -> BoxFuture<'static, Verdict> {
        Box::pin(async { Verdict::Retry })
    }
}

/// A plugin that answers `Next` at once.
pub(crate) struct PassThrough(pub(crate) String);

impl Plugin for PassThrough {
    fn name(&self) -> &str {
        &self.0
    }

    fn recover(self: Arc<Self>, _: Recovery) -> BoxFuture<'static, Verdict> {
        Box::pin(async { Verdict::Next })
    }
}

/// A plugin whose recovery waits for the turn's cancellation (or the plugin's disposal), then
/// answers `Stop`.
#[derive(Default)]
pub(crate) struct Parking {
    parked: AtomicUsize,
    goal: AtomicUsize,
    reached: Notify,
}

impl Parking {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Resolves once `n` recoveries in all have parked.
    pub(crate) async fn parked(&self, n: usize) {
        self.goal.store(n, Ordering::SeqCst);
        loop {
            let reached = self.reached.notified();
            tokio::pin!(reached);
            reached.as_mut().enable();
            if self.parked.load(Ordering::SeqCst) >= n {
                return;
            }
            reached.await;
        }
    }
}

impl Plugin for Parking {
    fn name(&self) -> &str {
        "parking"
    }

    fn recover(self: Arc<Self>, recovery: Recovery) -> BoxFuture<'static, Verdict> {
        Box::pin(async move {
            if self.parked.fetch_add(1, Ordering::SeqCst) + 1 >= self.goal.load(Ordering::SeqCst) {
                self.reached.notify_waiters();
            }
            tokio::select! {
                () = recovery.payload.cancel.cancelled() => {}
                () = recovery.disposed.cancelled() => {}
            }
            Verdict::Stop
        })
    }
}
