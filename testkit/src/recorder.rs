//! [`Recorder`]: a test plugin, placed downstream of `llm-retry` or another plugin, that records
//! every offer that reached it, then answers, crashes or waits as told.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rein_runtime::BoxFuture;
use rein_runtime::plugin::{Plugin, Recovery, Verdict};
use rein_runtime::retry_policy::RetryPolicy;

/// What a recording plugin was offered.
#[derive(Debug, Clone, PartialEq)]
pub struct Offer {
    /// The failure's code.
    pub code: String,
    /// The attempt that failed.
    pub attempt: u32,
    /// The provider of the attempt.
    pub provider: String,
    /// The route's retry policy, if it has one.
    pub retry_policy: Option<RetryPolicy>,
}

/// How a recording plugin answers.
#[derive(Debug, Clone, Copy)]
pub enum Behaviour {
    /// Answer at once.
    Answer(Verdict),
    /// Panic.
    Crash,
    /// Wait this long racing the turn's cancellation and disposal (→ `Stop`), then answer.
    Slow(Duration, Verdict),
}

/// Records every offer, then behaves as told.
pub struct Recorder {
    name: String,
    behaviour: Behaviour,
    offers: Mutex<Vec<Offer>>,
    settled: Arc<AtomicUsize>,
}

impl Recorder {
    /// A recorder named `name` that behaves as `behaviour`.
    pub fn new(name: &str, behaviour: Behaviour) -> Arc<Self> {
        Arc::new(Self {
            name: name.to_owned(),
            behaviour,
            offers: Mutex::default(),
            settled: Arc::default(),
        })
    }

    /// A recorder that answers `Next`.
    pub fn next(name: &str) -> Arc<Self> {
        Self::new(name, Behaviour::Answer(Verdict::Next))
    }

    /// Every offer so far, in order.
    pub fn offers(&self) -> Vec<Offer> {
        self.offers.lock().unwrap().clone()
    }

    /// How many recoveries have finished (answered or given up a wait).
    pub fn settled(&self) -> usize {
        self.settled.load(Ordering::SeqCst)
    }
}

impl Plugin for Recorder {
    fn name(&self) -> &str {
        &self.name
    }

    fn recover(self: Arc<Self>, recovery: Recovery) -> BoxFuture<'static, Verdict> {
        let p = &recovery.payload;
        self.offers.lock().unwrap().push(Offer {
            code: p.failure.code().to_owned(),
            attempt: p.attempt,
            provider: p.provider.clone(),
            retry_policy: p.retry_policy.clone(),
        });
        let behaviour = self.behaviour;
        let settled = Arc::clone(&self.settled);
        Box::pin(async move {
            let verdict = match behaviour {
                Behaviour::Answer(verdict) => verdict,
                Behaviour::Crash => panic!("the recorder crashes"),
                Behaviour::Slow(delay, verdict) => tokio::select! {
                    () = recovery.payload.cancel.cancelled() => Verdict::Stop,
                    () = recovery.disposed.cancelled() => Verdict::Stop,
                    () = tokio::time::sleep(delay) => verdict,
                },
            };
            settled.fetch_add(1, Ordering::SeqCst);
            verdict
        })
    }
}
