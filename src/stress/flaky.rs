//! `flaky`: the plugin `rein stress --crash-rate` puts first in the chain. It delegates every
//! failure (`Next`), except that on a share of them ([`plan::crashes`], a function of the seed
//! and the attempt) its recovery panics: its actor fails and the plugin host restarts it (or,
//! past its restart intensity, removes it from the chain, and the run registers it again).
//! The panic skips the process's panic hook, so a crash on purpose prints nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::runtime::BoxFuture;
use crate::runtime::plugin::{Plugin, Recovery, Verdict};

use super::plan;

/// The plugin's name.
pub(crate) const NAME: &str = "flaky";

/// The plugin.
pub(crate) struct Flaky {
    seed: u64,
    rate: f64,
    /// Crashes so far, shared by every instance of a run.
    crashes: Arc<AtomicU64>,
}

impl Flaky {
    /// A `flaky` plugin crashing on `rate` of the failures, counting into `crashes`.
    pub(crate) fn new(seed: u64, rate: f64, crashes: Arc<AtomicU64>) -> Self {
        Self { seed, rate, crashes }
    }
}

impl Plugin for Flaky {
    fn name(&self) -> &str {
        NAME
    }

    fn recover(self: Arc<Self>, recovery: Recovery) -> BoxFuture<'static, Verdict> {
        let p = &recovery.payload;
        if !plan::crashes(self.seed, &p.session, p.turn, p.step, p.attempt, self.rate) {
            return Box::pin(async { Verdict::Next });
        }
        self.crashes.fetch_add(1, Ordering::Relaxed);
        let message = format!(
            "flaky: a crash on purpose ({} turn {} step {} attempt {})",
            p.session, p.turn, p.step, p.attempt
        );
        Box::pin(async move { std::panic::resume_unwind(Box::new(message)) })
    }
}
