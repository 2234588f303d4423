//! [`RetryBudget`]: gRPC's retry throttling (proposal A6) for one route — a token bucket that
//! every attempt on the route fills or drains, and that says whether retries may still be sent.
//!
//! The bucket starts full at `maxTokens`. A failed attempt takes 1 token (not below 0), a
//! successful one gives back `tokenRatio` (not above `maxTokens`); neutral outcomes
//! ([`Counted::Neutral`]) change nothing. Retries are allowed while the bucket holds more than
//! `maxTokens / 2`. Tokens are counted in thousandths, as gRPC does, so that ten successes of
//! 0.1 give back exactly one token.
//!
//! # Why a bucket, not a per-session budget
//!
//! Each session's own budget (llm-retry's 2, auto-retry's 3) bounds what one turn sends; it does
//! not bound what a thousand turns send into an outage. The bucket is the route's: once half of it
//! is spent, every session's retries on that route stop until successes fill it again, and a
//! turn's first attempts (never throttled) are what probes the route.

use super::outcome::Counted;
use super::settings::HealthSettings;

/// A route's retry budget. See the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryBudget {
    /// Thousandths of a token.
    tokens: u32,
    max: u32,
    ratio: u32,
}

/// Thousandths of `value` (a valid setting: finite, ≥ 0.001, ≤ 1000).
fn milli(value: f64) -> u32 {
    (value * 1000.0).round().clamp(1.0, 1_000_000.0) as u32
}

impl RetryBudget {
    /// A full bucket for `settings`.
    pub fn new(settings: &HealthSettings) -> Self {
        let max = milli(settings.max_tokens());
        Self { tokens: max, max, ratio: milli(settings.token_ratio()) }
    }

    /// The same bucket under new `settings` (a run-time change): its capacity and ratio are the
    /// new ones, the tokens it holds stay (down to the new capacity) — a change does not refill
    /// a spent budget, nor drain a full one below its new capacity.
    #[must_use]
    pub fn resized(&self, settings: &HealthSettings) -> Self {
        let max = milli(settings.max_tokens());
        Self { tokens: self.tokens.min(max), max, ratio: milli(settings.token_ratio()) }
    }

    /// Counts one attempt's outcome.
    pub fn record(&mut self, counted: Counted) {
        match counted {
            Counted::Failure => self.tokens = self.tokens.saturating_sub(1000),
            Counted::Success => self.tokens = self.tokens.saturating_add(self.ratio).min(self.max),
            Counted::Neutral => {}
        }
    }

    /// Whether a retry may be sent: the bucket holds more than half its capacity.
    pub fn allows_retry(&self) -> bool {
        u64::from(self.tokens) * 2 > u64::from(self.max)
    }

    /// The tokens it holds.
    pub fn tokens(&self) -> f64 {
        f64::from(self.tokens) / 1000.0
    }

    /// Its capacity.
    pub fn max_tokens(&self) -> f64 {
        f64::from(self.max) / 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Counted::{Failure as F, Neutral as N, Success as S};

    fn budget(max: f64, ratio: f64) -> RetryBudget {
        let settings =
            HealthSettings::new().with_max_tokens(max).unwrap().with_token_ratio(ratio).unwrap();
        RetryBudget::new(&settings)
    }

    #[test]
    fn failures_drain_successes_refill_and_half_stops_retries() {
        // (max, ratio, outcomes, tokens after, retries allowed)
        let cases: Vec<(f64, f64, Vec<Counted>, f64, bool)> = vec![
            (10.0, 0.1, vec![], 10.0, true),
            (10.0, 0.1, vec![F], 9.0, true),
            (10.0, 0.1, vec![F; 4], 6.0, true),
            // Exactly half: no more retries (retries need more than half).
            (10.0, 0.1, vec![F; 5], 5.0, false),
            (10.0, 0.1, vec![F; 6], 4.0, false),
            // Never below 0.
            (10.0, 0.1, vec![F; 30], 0.0, false),
            // Ten successes give back exactly one token: above half again.
            (10.0, 0.1, [vec![F; 5], vec![S; 10]].concat(), 6.0, true),
            (10.0, 0.1, [vec![F; 5], vec![S; 1]].concat(), 5.1, true),
            // Never above the capacity.
            (10.0, 0.1, vec![S; 50], 10.0, true),
            (10.0, 0.1, [vec![F], vec![S; 20]].concat(), 10.0, true),
            // Neutral outcomes change nothing.
            (10.0, 0.1, [vec![F; 5], vec![N; 100]].concat(), 5.0, false),
            // Other capacities and ratios.
            (3.0, 1.0, vec![F, F], 1.0, false),
            (3.0, 1.0, vec![F, F, S], 2.0, true),
            (1.0, 0.5, vec![F], 0.0, false),
            (1.0, 0.5, vec![F, S], 0.5, false),
            (1.0, 0.5, vec![F, S, S], 1.0, true),
        ];
        for (max, ratio, outcomes, tokens, allowed) in cases {
            let mut b = budget(max, ratio);
            for outcome in &outcomes {
                b.record(*outcome);
            }
            let case = format!("max {max} ratio {ratio} after {outcomes:?}");
            assert_eq!(b.tokens(), tokens, "{case}");
            assert_eq!(b.allows_retry(), allowed, "{case}");
            assert_eq!(b.max_tokens(), max, "{case}");
        }
    }

    #[test]
    fn a_resize_keeps_the_tokens_up_to_the_new_capacity() {
        let settings = |max: f64| HealthSettings::new().with_max_tokens(max).unwrap();
        let mut b = RetryBudget::new(&settings(10.0));
        for _ in 0..4 {
            b.record(Counted::Failure);
        }
        let cases = [
            (20.0, 6.0, 20.0, false),
            (10.0, 6.0, 10.0, true),
            (4.0, 4.0, 4.0, true),
            (12.0, 6.0, 12.0, false),
        ];
        for (max, tokens, capacity, allows) in cases {
            let resized = b.resized(&settings(max));
            assert_eq!(
                (resized.tokens(), resized.max_tokens(), resized.allows_retry()),
                (tokens, capacity, allows),
                "{max}"
            );
        }
    }
}
