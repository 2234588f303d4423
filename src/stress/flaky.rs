//! `flaky`: the plugin `rein stress --crash-rate` (or `--decide-ms`) puts first in the chain. It
//! delegates every failure (`Next`), except that on a share of them ([`plan::crashes`], a
//! function of the seed and the attempt) its recovery panics: its actor fails and the plugin
//! host restarts it (or, past its restart intensity, removes it from the chain, and the run
//! registers it again). The panic skips the process's panic hook, so a crash on purpose prints
//! nothing. Each recovery first takes `decide` (racing the turn's cancellation and the plugin's
//! disposal, as a plugin's wait must): the window in which a crash of the process finds a
//! failure the waterfall was deciding.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::runtime::BoxFuture;
use crate::runtime::plugin::{Plugin, Recovery, Verdict};

use super::plan;

/// The plugin's name.
pub(crate) const NAME: &str = "flaky";

/// The plugin.
pub(crate) struct Flaky {
    seed: u64,
    rate: f64,
    /// How long each recovery takes before it answers.
    decide: Duration,
    /// Crashes so far, shared by every instance of a run.
    crashes: Arc<AtomicU64>,
}

impl Flaky {
    /// A `flaky` plugin taking `decide` over each failure and crashing on `rate` of them,
    /// counting into `crashes`.
    pub(crate) fn new(seed: u64, rate: f64, decide: Duration, crashes: Arc<AtomicU64>) -> Self {
        Self { seed, rate, decide, crashes }
    }
}

impl Plugin for Flaky {
    fn name(&self) -> &str {
        NAME
    }

    fn recover(self: Arc<Self>, recovery: Recovery) -> BoxFuture<'static, Verdict> {
        let p = &recovery.payload;
        let crash = plan::crashes(self.seed, &p.session, p.turn, p.step, p.attempt, self.rate)
            .then(|| {
                format!(
                    "flaky: a crash on purpose ({} turn {} step {} attempt {})",
                    p.session, p.turn, p.step, p.attempt
                )
            });
        Box::pin(async move {
            if !self.decide.is_zero() && recovery.wait(self.decide).await.is_err() {
                return Verdict::Next; // cancelled or disposed meanwhile
            }
            let Some(message) = crash else { return Verdict::Next };
            self.crashes.fetch_add(1, Ordering::Relaxed);
            std::panic::resume_unwind(Box::new(message))
        })
    }
}
