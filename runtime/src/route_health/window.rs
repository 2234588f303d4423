//! [`Window`]: the attempts and failures of a route in the last `windowMs`, counted in ten
//! buckets of a tenth of the window each.
//!
//! An exact window would keep one entry per attempt — a hundred thousand for a busy route in ten
//! seconds. Buckets keep at most eleven, whatever the load; the price is that the window's start
//! moves by a tenth of it at a time (an attempt is forgotten between 0.9 and 1.0 `windowMs` after
//! it ended), which a breaker tuned in seconds does not notice.

use std::collections::VecDeque;

/// How many buckets a window is cut into.
const BUCKETS: u64 = 10;

/// The attempts and failures in the last `windowMs`. Time is an input (ms, any origin, never
/// going back).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    window_ms: u64,
    bucket_ms: u64,
    /// (bucket start, attempts, failures), oldest first.
    buckets: VecDeque<(u64, u32, u32)>,
}

impl Window {
    /// An empty window of `window_ms` (≥ 1).
    pub fn new(window_ms: u64) -> Self {
        let window_ms = window_ms.max(1);
        Self { window_ms, bucket_ms: (window_ms / BUCKETS).max(1), buckets: VecDeque::new() }
    }

    /// Counts one attempt at `now`.
    pub fn record(&mut self, now: u64, failed: bool) {
        self.forget(now);
        let start = now - now % self.bucket_ms;
        match self.buckets.back_mut() {
            Some((at, attempts, failures)) if *at == start => {
                *attempts = attempts.saturating_add(1);
                *failures = failures.saturating_add(u32::from(failed));
            }
            _ => self.buckets.push_back((start, 1, u32::from(failed))),
        }
    }

    /// `(attempts, failures)` in the window at `now`.
    pub fn counts(&mut self, now: u64) -> (u32, u32) {
        self.forget(now);
        self.buckets.iter().fold((0, 0), |(a, f), (_, attempts, failures)| {
            (a.saturating_add(*attempts), f.saturating_add(*failures))
        })
    }

    /// Forgets everything (the breaker closed again, or opened).
    pub fn clear(&mut self) {
        self.buckets.clear();
    }

    /// Drops the buckets that ended before the window's start.
    fn forget(&mut self, now: u64) {
        let since = now.saturating_sub(self.window_ms);
        while self.buckets.front().is_some_and(|(start, _, _)| start + self.bucket_ms <= since) {
            self.buckets.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_leave_the_window_a_bucket_at_a_time() {
        // (records as (time, failed), read at, expected (attempts, failures))
        type Case = (Vec<(u64, bool)>, u64, (u32, u32));
        let cases: Vec<Case> = vec![
            (vec![], 0, (0, 0)),
            (vec![(0, true), (5, false), (999, true)], 999, (3, 2)),
            // Bucket [0, 1000) ends at 1000: forgotten once the window starts at or after it.
            (vec![(0, true), (999, true)], 10_999, (2, 2)),
            (vec![(0, true), (999, true)], 11_000, (0, 0)),
            (vec![(0, true), (5_000, false)], 11_000, (1, 0)),
            (vec![(0, true), (5_000, false), (9_999, true)], 15_999, (2, 1)),
            (vec![(0, true), (5_000, false), (9_999, true)], 16_000, (1, 1)),
            // Old buckets go when a new attempt arrives, too.
            (vec![(0, true), (20_000, false)], 20_000, (1, 0)),
        ];
        for (records, at, expected) in cases {
            let mut window = Window::new(10_000);
            for (time, failed) in &records {
                window.record(*time, *failed);
            }
            assert_eq!(window.counts(at), expected, "{records:?} read at {at}");
            assert!(window.buckets.len() <= 11);
        }
    }

    #[test]
    fn a_tiny_window_still_has_buckets_of_a_millisecond_and_clear_empties_it() {
        let mut window = Window::new(3);
        window.record(0, true);
        window.record(2, false);
        assert_eq!(window.counts(3), (2, 1));
        assert_eq!(window.counts(4), (1, 0));
        window.clear();
        assert_eq!(window.counts(4), (0, 0));
    }
}
