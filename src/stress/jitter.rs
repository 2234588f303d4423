//! The jitter of a stress run: samples from the seed, retry ids from the operating system.
//!
//! A run may continue logs an earlier run wrote (a `--dir` reopened after a crash, or a second
//! run), maybe with the same seed. Retry ids from the seed would then repeat ids those logs
//! already hold, and an id belongs to one chain for a log's whole life. The samples come from
//! the seed like every other choice of the run (which plugin draws which sample depends on the
//! scheduling anyway).

use crate::runtime::random::{Jitter, SeededJitter};

/// Seeded samples, fresh retry ids.
#[derive(Debug)]
pub(crate) struct StressJitter(SeededJitter);

impl StressJitter {
    /// Samples from `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Self(SeededJitter::new(seed))
    }
}

impl Jitter for StressJitter {
    fn sample(&self) -> f64 {
        self.0.sample()
    }
    // `retry_id`: the trait's own, a UUID v4 from the operating system.
}
