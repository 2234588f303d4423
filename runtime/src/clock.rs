//! The runtime clock, injected so that tests and scenarios run on virtual time.
//!
//! Event `time`s come from a [`Clock`]. [`WallClock`] gives epoch milliseconds; [`VirtualClock`]
//! gives milliseconds since it was made, read from tokio's clock — so under a paused runtime
//! (`start_paused = true`, or a scenario) a 500 ms backoff advances it by exactly 500.

use std::time::{SystemTime, UNIX_EPOCH};

/// A source of event timestamps, in milliseconds.
pub trait Clock: Send + Sync + 'static {
    /// Now, in milliseconds.
    fn now_ms(&self) -> u64;
}

/// Wall-clock epoch milliseconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct WallClock;

impl Clock for WallClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0)
    }
}

/// Milliseconds since the clock was made, on tokio's (pausable) clock.
#[derive(Debug, Clone, Copy)]
pub struct VirtualClock {
    start: tokio::time::Instant,
}

impl VirtualClock {
    /// A clock reading 0 now. Must be called inside a tokio runtime.
    pub fn start() -> Self {
        Self { start: tokio::time::Instant::now() }
    }
}

impl Clock for VirtualClock {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn virtual_time_follows_the_paused_tokio_clock() {
        let clock = VirtualClock::start();
        assert_eq!(clock.now_ms(), 0);
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(clock.now_ms(), 500);
        tokio::time::advance(Duration::from_micros(1500)).await;
        assert_eq!(clock.now_ms(), 501, "rounded down");
    }

    #[test]
    fn wall_clock_is_epoch_milliseconds() {
        // 2020-01-01 in epoch ms: any real clock is past it.
        assert!(WallClock.now_ms() > 1_577_836_800_000);
    }
}
