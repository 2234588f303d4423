//! [`TestPlugin`]: a test plugin whose recovery is a closure of the recovery and the call number,
//! recording who was asked in a [`Trace`] shared by the plugins of one test.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rein_runtime::BoxFuture;
use rein_runtime::event::{Event, LlmRetry, LlmRetryStarted};
use rein_runtime::plugin::{DownstreamAnswer, Plugin, Recovery, RequestErrorPayload, Verdict};

/// Who was asked, in order (shared by the plugins of one test).
#[derive(Debug, Clone, Default)]
pub struct Trace(Arc<Mutex<Vec<String>>>);

impl Trace {
    /// Adds `entry`.
    pub fn push(&self, entry: impl Into<String>) {
        self.0.lock().unwrap().push(entry.into());
    }
    /// Everything so far, in order; empties the trace.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

type Behaviour = dyn Fn(Recovery, usize) -> BoxFuture<'static, Verdict> + Send + Sync;

/// A plugin whose recovery is a closure of the recovery and the call number (from 1).
pub struct TestPlugin {
    name: String,
    trace: Trace,
    calls: AtomicUsize,
    parked: Arc<AtomicUsize>,
    behaviour: Box<Behaviour>,
}

impl TestPlugin {
    /// A plugin named `name`, tracing into `trace`, recovering by `behaviour`.
    pub fn new(
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
    pub fn answering(name: &str, trace: &Trace, verdict: Verdict) -> Arc<Self> {
        Self::new(name, trace, move |_, _| Box::pin(async move { verdict }))
    }

    /// Panics on every recovery.
    pub fn crashing(name: &str, trace: &Trace) -> Arc<Self> {
        Self::new(name, trace, |_, n| Box::pin(async move { panic!("crash #{n}") }))
    }

    /// Waits `delay` (aborted by cancellation or disposal → `Stop`), then answers `verdict`.
    pub fn slow(name: &str, trace: &Trace, delay: Duration, verdict: Verdict) -> Arc<Self> {
        Self::new(name, trace, move |r, _| Box::pin(wait(r, delay, verdict)))
    }

    /// Asks downstream first; answers `Retry` if downstream did, else `if_not`.
    pub fn downstream_first(name: &str, trace: &Trace, if_not: Verdict) -> Arc<Self> {
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
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// How many recoveries are parked in [`wait`] right now (for `slow` plugins).
    pub fn parked(&self) -> usize {
        self.parked.load(Ordering::SeqCst)
    }

    /// A plugin parked in a long wait that counts itself.
    pub fn parking(name: &str, trace: &Trace, delay: Duration, verdict: Verdict) -> Arc<Self> {
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
pub async fn wait(recovery: Recovery, delay: Duration, verdict: Verdict) -> Verdict {
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

/// The `llm/retry` and `llm/retry-started` that `plugin` writes to retry the failure `payload`
/// offers once, at once: retry 1 of a chain with the id `TURN-STEP-ATTEMPT`, under the route's
/// retry policy (which the payload must carry), with no delay.
pub fn first_retry(payload: &RequestErrorPayload, plugin: &str) -> [Event; 2] {
    let policy = payload.retry_policy.clone().unwrap();
    let id = format!("{}-{}-{}", payload.turn, payload.step, payload.attempt);
    let scheduled = Event::LlmRetry(LlmRetry {
        retry_id: id.clone(),
        turn: payload.turn,
        step: payload.step,
        provider: payload.provider.clone(),
        plugin: plugin.into(),
        mode: policy.mode().into(),
        policy_key: policy.policy_key(),
        retry: 1,
        max_retries: policy.max_retries(),
        delay_ms: 0.0,
        failure: payload.failure.clone(),
    });
    let started = Event::LlmRetryStarted(LlmRetryStarted {
        retry_id: id,
        turn: payload.turn,
        step: payload.step,
        retry: 1,
    });
    [scheduled, started]
}
