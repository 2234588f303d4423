//! The adapters and plugins the runtime metrics drive the real runtime with.
//!
//! - [`Instant`]: a provider with no latency: one chunk, then success.
//! - [`FailsFirst`]: a provider whose first attempt of every step fails at once (`SERVER`) and
//!   whose later attempts answer as [`Instant`] does.
//! - [`Down`]: a provider that fails every attempt at once (`SERVER`).
//! - [`PassThrough`]: a plugin that answers `Next` at once (a waterfall hop and nothing else).
//! - [`RetryNow`]: a plugin that answers `Retry` at once (no wait, nothing written).
//! - [`Parking`]: a plugin whose recovery waits an hour (a retry's backoff) unless the turn is
//!   cancelled or the plugin disposed first, holding its whole `Recovery` as a real retry
//!   plugin's wait does, and counts how many recoveries are parked.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

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

/// A provider whose first attempt fails at once; the others stream [`CHUNK`] and succeed.
pub(crate) struct FailsFirst(Failure);

impl FailsFirst {
    pub(crate) fn new() -> anyhow::Result<Arc<Self>> {
        Ok(Arc::new(Self(Failure::new("SERVER", "the provider is overloaded")?)))
    }
}

impl Adapter for FailsFirst {
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

/// A provider that fails every attempt at once.
pub(crate) struct Down(Failure);

impl Down {
    pub(crate) fn new() -> anyhow::Result<Arc<Self>> {
        Ok(Arc::new(Self(Self::failure()?)))
    }

    /// The failure it answers with.
    pub(crate) fn failure() -> anyhow::Result<Failure> {
        Ok(Failure::new("SERVER", "the provider is down")?)
    }
}

impl Adapter for Down {
    fn call(&self, _: Request, _: ChunkSink) -> BoxFuture<'static, Result<Completion, Failure>> {
        let failure = self.0.clone();
        Box::pin(async move { Err(failure) })
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

/// A plugin that answers `Retry` at once.
pub(crate) struct RetryNow;

impl Plugin for RetryNow {
    fn name(&self) -> &str {
        "retry-now"
    }

    fn recover(self: Arc<Self>, _: Recovery) -> BoxFuture<'static, Verdict> {
        Box::pin(async { Verdict::Retry })
    }
}

/// A plugin whose recovery waits an hour for a retry, unless the turn is cancelled (or the
/// plugin disposed) first, which answers `Stop`.
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
                () = recovery.payload.cancel.cancelled() => Verdict::Stop,
                () = recovery.disposed.cancelled() => Verdict::Stop,
                () = tokio::time::sleep(Duration::from_secs(3600)) => Verdict::Retry,
            }
        })
    }
}
