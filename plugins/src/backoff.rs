//! The backoff curve (`docs/runtime-semantics.md`, "Backoff"), as a pure function of the retry
//! number and a jitter sample.
//!
//! For retry `n ≥ 1`: `base = min(init · 2^min(n−1, 1024), max)` and
//! `delay = min(base · (1 − j + 2·j·r), max)`. The jitter is symmetric around the base, the result
//! may be fractional or 0 (`j = 1, r = 0`) and never exceeds `max`.
//!
//! # Why plain numbers, not a `Backoff`
//!
//! `auto-retry` continues the official curve with a mixed set of parameters (the official
//! `initialDelayMs` and `jitterRatio`, but `min(official max, own max)` as the cap), so the
//! function takes the numbers; [`delay_for`] is the shorthand for one validated [`Backoff`].
//!
//! # Why the exponent is capped at 1024
//!
//! `2^1024` is already infinite in `f64`, so the exponent never needs to grow further, and a
//! `u64` retry number can never overflow an `i32` power. `init · ∞ = ∞` and `min(∞, max) = max`,
//! so a chain that runs for ever (always mode) settles at `max` without a NaN.
//!
//! The evaluation order is exactly the formula's, so results are bit-identical to the original
//! JavaScript executor's (`500 · (1 − 0.1 + 0) = 450`, not `450.00000000000006`).

use rein_runtime::retry_policy::Backoff;

/// The delay before retry `retry` (from 1; 0 is read as 1), in milliseconds, for a curve from
/// `initial` to `max` with jitter ratio `jitter` and the sample `r`.
///
/// Preconditions: `initial` and `max` finite and `≥ 0`, `jitter ∈ [0, 1]` (a [`Backoff`]
/// guarantees more: `0 < initial ≤ max`). An `initial` of 0 waits 0 for every retry; an `initial`
/// above `max` waits `max`. A sample outside `[0, 1]` is clamped into it.
pub fn delay(retry: u64, initial: f64, max: f64, jitter: f64, r: f64) -> f64 {
    let exponent = retry.saturating_sub(1).min(1024);
    // `exponent ≤ 1024`, so the conversion is exact.
    let growth = 2f64.powi(i32::try_from(exponent).unwrap_or(1024));
    // `0 · ∞` is NaN: an initial delay of 0 stays 0 however far the curve runs.
    let base = if initial == 0.0 { 0.0 } else { (initial * growth).min(max) };
    let r = r.clamp(0.0, 1.0);
    (base * (1.0 - jitter + 2.0 * jitter * r)).min(max)
}

/// [`delay`] for a validated curve.
pub fn delay_for(backoff: &Backoff, retry: u64, r: f64) -> f64 {
    delay(retry, backoff.initial_delay_ms(), backoff.max_delay_ms(), backoff.jitter_ratio(), r)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use rein_runtime::retry_policy::MAX_DELAY_MS;

    use super::*;

    #[test]
    fn the_curve_matches_the_spec_examples() {
        // (retry, initial, max, jitter, r) → delay; each exact.
        let cases = [
            // j = 0.1: r = 0 then r = 1 → 450 then 1100.
            ((1, 500.0, 10000.0, 0.1, 0.0), 450.0),
            ((2, 500.0, 10000.0, 0.1, 1.0), 1100.0),
            // Full jitter at its lower boundary schedules 0.
            ((1, 500.0, 10000.0, 1.0, 0.0), 0.0),
            ((3, 500.0, 10000.0, 1.0, 1.0), 4000.0),
            // Always-mode example: init 1, max 4, j = 0.1, r = 1 → 1.1, 2.2, 4, 4.
            ((1, 1.0, 4.0, 0.1, 1.0), 1.1),
            ((2, 1.0, 4.0, 0.1, 1.0), 2.2),
            ((3, 1.0, 4.0, 0.1, 1.0), 4.0),
            ((4, 1.0, 4.0, 0.1, 1.0), 4.0),
            // init 2, max 4, j = 0.5, r = 1 → 3 (jitter may lift the delay, up to max).
            ((1, 2.0, 4.0, 0.5, 1.0), 3.0),
            // No jitter: the official default curve.
            ((1, 500.0, 10000.0, 0.0, 0.7), 500.0),
            ((2, 500.0, 10000.0, 0.0, 0.7), 1000.0),
            ((5, 500.0, 10000.0, 0.0, 0.7), 8000.0),
            ((6, 500.0, 10000.0, 0.0, 0.7), 10000.0),
            // Retry 0 is read as retry 1.
            ((0, 500.0, 10000.0, 0.0, 0.0), 500.0),
            // Huge retry numbers settle at max: 2^1024 is infinite, min(∞, max) = max.
            ((1025, 1.0, 4.0, 0.0, 0.0), 4.0),
            ((u64::MAX, 1.0, 4.0, 0.5, 0.0), 2.0),
            ((u64::MAX, 0.5, MAX_DELAY_MS, 0.0, 0.0), MAX_DELAY_MS),
            // Curves auto-retry's settings allow (0..=600000 each, no order between them): an
            // initial delay of 0 waits 0, also where 2^n is infinite; above max waits max.
            ((1, 0.0, 1000.0, 0.5, 1.0), 0.0),
            ((u64::MAX, 0.0, 1000.0, 0.0, 0.0), 0.0),
            ((1, 0.0, 0.0, 1.0, 1.0), 0.0),
            ((1, 5000.0, 3000.0, 0.0, 0.5), 3000.0),
            ((2, 5000.0, 3000.0, 0.5, 0.0), 1500.0),
            // Samples outside [0, 1] are clamped.
            ((1, 100.0, 1000.0, 0.5, -3.0), 50.0),
            ((1, 100.0, 1000.0, 0.5, 7.0), 150.0),
        ];
        for ((retry, initial, max, jitter, r), expected) in cases {
            let got = delay(retry, initial, max, jitter, r);
            assert_eq!(got, expected, "retry {retry}, {initial}→{max}, j {jitter}, r {r}");
        }
    }

    #[test]
    fn delay_for_reads_the_curve() {
        let backoff = Backoff::new(1.0, 4.0, 0.1).unwrap();
        let delays: Vec<f64> = (1..=4).map(|n| delay_for(&backoff, n, 1.0)).collect();
        assert_eq!(delays, [1.1, 2.2, 4.0, 4.0]);
    }

    fn curve() -> impl Strategy<Value = (f64, f64, f64)> {
        (1e-3..=MAX_DELAY_MS, 1e-3..=MAX_DELAY_MS, 0.0..=1.0f64)
            .prop_map(|(a, b, j)| (a.min(b), a.max(b), j))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn never_above_max_never_negative((initial, max, jitter) in curve(),
                                          retry in any::<u64>(), r in 0.0..=1.0f64) {
            let d = delay(retry, initial, max, jitter, r);
            prop_assert!(d.is_finite());
            prop_assert!((0.0..=max).contains(&d), "{d} outside [0, {max}]");
        }

        #[test]
        fn jitter_stays_within_its_ratio_of_the_base((initial, max, jitter) in curve(),
                                                     retry in 1..64u64, r in 0.0..=1.0f64) {
            let base = delay(retry, initial, max, 0.0, r);
            let d = delay(retry, initial, max, jitter, r);
            prop_assert!(d >= base * (1.0 - jitter) * (1.0 - 1e-12));
            prop_assert!(d <= (base * (1.0 + jitter)).min(max) * (1.0 + 1e-12));
        }

        #[test]
        fn later_retries_never_wait_less((initial, max, jitter) in curve(),
                                         retry in 1..2000u64, r in 0.0..=1.0f64) {
            prop_assert!(delay(retry + 1, initial, max, jitter, r) >= delay(retry, initial, max, jitter, r));
        }
    }
}
