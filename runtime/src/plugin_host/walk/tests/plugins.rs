//! [`TestPlugin`]: a test plugin whose recovery is a closure of the recovery and the call number,
//! recording who was asked in a [`Trace`] shared by the plugins of one test.
//!
//! The walk's unit tests' own copy of `rein_testkit::plugins` (a unit test of this crate cannot
//! use the test kit, which depends on this crate: it would see two copies of its types).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::BoxFuture;
use crate::plugin::{DownstreamAnswer, Plugin, Recovery, Verdict};

/// Who was asked, in order (shared by the plugins of one test).
#[derive(Debug, Clone, Default)]
pub(super) struct Trace(Arc<Mutex<Vec<String>>>);

impl Trace {
    /// Adds `entry`.
    pub(super) fn push(&self, entry: impl Into<String>) {
        self.0.lock().unwrap().push(entry.into());
    }
    /// Everything so far, in order; empties the trace.
    pub(super) fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

type Behaviour = dyn Fn(Recovery, usize) -> BoxFuture<'static, Verdict> + Send + Sync;

/// A plugin whose recovery is a closure of the recovery and the call number (from 1).
pub(super) struct TestPlugin {
    name: String,
    trace: Trace,
    calls: AtomicUsize,
    parked: Arc<AtomicUsize>,
    behaviour: Box<Behaviour>,
}

impl TestPlugin {
    /// A plugin named `name`, tracing into `trace`, recovering by `behaviour`.
    pub(super) fn new(
        name: &str,
        trace: &Trace,
        behaviour: impl Fn(Recovery, usize) -> BoxFuture<'static, Verdict> + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(Self {
            name: name.to_owned(),
            trace: trace.clone(),
            calls: AtomicUsize::new(0),
            parked: Arc::new(AtomicUsize::new(0)),
            behaviour: Box::new(behaviour),
        })
    }

    /// Always answers `verdict`.
    pub(super) fn answering(name: &str, trace: &Trace, verdict: Verdict) -> Arc<Self> {
        Self::new(name, trace, move |_, _| Box::pin(async move { verdict }))
    }

    /// Panics on every recovery.
    pub(super) fn crashing(name: &str, trace: &Trace) -> Arc<Self> {
        Self::new(name, trace, |_, n| Box::pin(async move { panic!("crash #{n}") }))
    }

    /// Waits `delay` (aborted by cancellation or disposal → `Stop`), then answers `verdict`.
    pub(super) fn slow(name: &str, trace: &Trace, delay: Duration, verdict: Verdict) -> Arc<Self> {
        Self::new(name, trace, move |r, _| Box::pin(wait(r, delay, verdict)))
    }

    /// Asks downstream first; answers `Retry` if downstream did, else `if_not`.
    pub(super) fn downstream_first(name: &str, trace: &Trace, if_not: Verdict) -> Arc<Self> {
        Self::new(name, trace, move |mut r, _| {
            Box::pin(async move {
                match r.downstream.ask().await {
                    DownstreamAnswer::Retry => Verdict::Retry,
                    _ => if_not,
                }
            })
        })
    }

    /// How many recoveries it was offered.
    pub(super) fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// How many recoveries are parked in [`wait`] right now (for `slow` plugins).
    pub(super) fn parked(&self) -> usize {
        self.parked.load(Ordering::SeqCst)
    }

    /// A plugin parked in a long wait that counts itself.
    pub(super) fn parking(
        name: &str,
        trace: &Trace,
        delay: Duration,
        verdict: Verdict,
    ) -> Arc<Self> {
        let parked = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&parked);
        Arc::new(Self {
            name: name.to_owned(),
            trace: trace.clone(),
            calls: AtomicUsize::new(0),
            parked,
            behaviour: Box::new(move |r, _| {
                let counter = Arc::clone(&counter);
                Box::pin(async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                    let verdict = wait(r, delay, verdict).await;
                    counter.fetch_sub(1, Ordering::SeqCst);
                    verdict
                })
            }),
        })
    }
}

/// Waits `delay` racing the turn's cancellation and the plugin's disposal (→ `Stop`).
pub(super) async fn wait(recovery: Recovery, delay: Duration, verdict: Verdict) -> Verdict {
    tokio::select! {
        () = recovery.payload.cancel.cancelled() => Verdict::Stop,
        () = recovery.disposed.cancelled() => Verdict::Stop,
        () = tokio::time::sleep(delay) => verdict,
    }
}

impl Plugin for TestPlugin {
    fn name(&self) -> &str {
        &self.name
    }

    fn recover(self: Arc<Self>, recovery: Recovery) -> BoxFuture<'static, Verdict> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        self.trace.push(self.name.clone());
        (self.behaviour)(recovery, n)
    }
}
