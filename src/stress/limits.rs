//! How large a stress run's numbers may be, and how long a turn of it may legitimately take.
//!
//! - [`AGENTS`], [`TURNS`], [`LATENCY_MS`], [`BACKOFF_MS`], [`STALL_MS`], [`TOOL_MS`],
//!   [`DECIDE_MS`], [`THINK_MS`], [`OUTAGE_MS`], [`OUTAGE_AT_MS`], [`HANG_DEADLINE_MS`]:
//!   the inclusive bounds of the numeric settings, each named by its `rein stress` flag in
//!   [`within`]'s refusal.
//! - [`default_hang_deadline_ms`]: the hang deadline a run gets when none is given, derived from
//!   its pace.
//!
//! # Why bounds
//!
//! A run allocates each agent's state up front, and its waits multiply these values (a
//! cancellation window of 2 × latency + 4 × backoff, retry delays up to 20 × backoff). Without a
//! bound, `--agents 18446744073709551615` overflowed a capacity and panicked, and
//! `--agents 100000000000` aborted the process asking for 400 GB; a huge latency would overflow
//! a duration. Every bound is far above what a run on one machine can use, and a value outside it
//! is a usage error naming the flag and the range, before anything runs.
//!
//! # Why the hang deadline follows the pace
//!
//! A turn is hung when it is still running this long after the last turn of the run ended. A
//! fixed 30 s is right for the default pace (a turn lasts a second at most) and wrong for a slow
//! one: with `--backoff-ms 5000` a single retry may wait 100 s on purpose, and such a turn was
//! reported hung. The default is therefore twice the longest a turn can take when everything
//! that may slow it does — every attempt stalls until its watchdog, every retry waits its
//! longest — and never below 30 s.

use std::ops::RangeInclusive;

/// `--agents`.
pub const AGENTS: RangeInclusive<u64> = 1..=1_000_000;
/// `--turns`.
pub const TURNS: RangeInclusive<u64> = 1..=1_000_000;
/// `--latency-ms` (10 minutes).
pub const LATENCY_MS: RangeInclusive<u64> = 0..=600_000;
/// `--backoff-ms` (100 s: retries then wait up to 2,000 s).
pub const BACKOFF_MS: RangeInclusive<u64> = 1..=100_000;
/// `--stall-ms` (an hour).
pub const STALL_MS: RangeInclusive<u64> = 0..=3_600_000;
/// `--tool-ms` (10 minutes).
pub const TOOL_MS: RangeInclusive<u64> = 0..=600_000;
/// `--decide-ms` (10 minutes).
pub const DECIDE_MS: RangeInclusive<u64> = 0..=600_000;
/// `--think-ms` (an hour).
pub const THINK_MS: RangeInclusive<u64> = 0..=3_600_000;
/// `--outage-ms` (a day).
pub const OUTAGE_MS: RangeInclusive<u64> = 1..=86_400_000;
/// `--outage-at-ms` (a day).
pub const OUTAGE_AT_MS: RangeInclusive<u64> = 0..=86_400_000;
/// `--hang-deadline-ms` (a week).
pub const HANG_DEADLINE_MS: RangeInclusive<u64> = 1..=604_800_000;

/// The most attempts a step of a stress run makes: the first, `llm-retry`'s 2 retries, and up to
/// 4 more from `auto-retry` (whose `extraRetries` a settings change may raise to 4).
pub const MAX_ATTEMPTS: u64 = 7;

/// The longest retry delay, as a multiple of `--backoff-ms` (the plugins' `maxDelayMs`; a
/// simulated `Retry-After` is at most 4 ×, and jitter never exceeds the cap).
pub const MAX_DELAY_FACTOR: u64 = 20;

/// The least default hang deadline.
pub const MIN_DEFAULT_HANG_DEADLINE_MS: u64 = 30_000;

/// Refuses `value` outside `range`, naming `flag`: `--agents: must be within [1, 1000000], got 0`.
pub fn within(flag: &str, value: u64, range: &RangeInclusive<u64>) -> Result<(), String> {
    if range.contains(&value) {
        Ok(())
    } else {
        Err(format!("{flag}: must be within [{}, {}], got {value}", range.start(), range.end()))
    }
}

/// How long the parts of a turn take at most: the flags of the pace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pace {
    /// `--latency-ms`.
    pub latency_ms: u64,
    /// `--backoff-ms`.
    pub backoff_ms: u64,
    /// `--stall-ms`.
    pub stall_ms: u64,
    /// `--tool-ms`, when answers call the tool (`--tool-rate` above 0); `None`: no tool.
    pub tool_ms: Option<u64>,
    /// `--decide-ms`.
    pub decide_ms: u64,
}

/// The default hang deadline of a run of this pace: twice the longest turn — per step,
/// [`MAX_ATTEMPTS`] attempts that each wait `latency_ms`, stall for `stall_ms` and are decided
/// for `decide_ms`, and a retry wait of [`MAX_DELAY_FACTOR`] × `backoff_ms` between each two; two
/// such steps and a tool call between them when answers call the tool — and at least
/// [`MIN_DEFAULT_HANG_DEADLINE_MS`]. Saturating: values beyond the bounds give a deadline beyond
/// its bound, which the check then refuses.
pub fn default_hang_deadline_ms(pace: Pace) -> u64 {
    let attempt = pace.latency_ms.saturating_add(pace.stall_ms).saturating_add(pace.decide_ms);
    let attempts = MAX_ATTEMPTS.saturating_mul(attempt);
    let waits = (MAX_ATTEMPTS - 1).saturating_mul(MAX_DELAY_FACTOR).saturating_mul(pace.backoff_ms);
    let step = attempts.saturating_add(waits);
    let turn = match pace.tool_ms {
        None => step,
        Some(tool_ms) => step.saturating_mul(2).saturating_add(tool_ms),
    };
    turn.saturating_mul(2).max(MIN_DEFAULT_HANG_DEADLINE_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_outside_its_range_is_refused_naming_the_flag_and_the_range() {
        let cases: [(&str, u64, &RangeInclusive<u64>, Option<&str>); 6] = [
            ("--agents", 1, &AGENTS, None),
            ("--agents", 1_000_000, &AGENTS, None),
            ("--agents", 0, &AGENTS, Some("--agents: must be within [1, 1000000], got 0")),
            (
                "--agents",
                u64::MAX,
                &AGENTS,
                Some("--agents: must be within [1, 1000000], got 18446744073709551615"),
            ),
            ("--latency-ms", 0, &LATENCY_MS, None),
            (
                "--stall-ms",
                3_600_001,
                &STALL_MS,
                Some("--stall-ms: must be within [0, 3600000], got 3600001"),
            ),
        ];
        for (flag, value, range, refused) in cases {
            assert_eq!(within(flag, value, range).err().as_deref(), refused, "{flag} {value}");
        }
    }

    #[test]
    fn the_default_hang_deadline_covers_the_longest_turn_twice() {
        let pace = |(latency_ms, backoff_ms, stall_ms)| Pace {
            latency_ms,
            backoff_ms,
            stall_ms,
            ..Pace::default()
        };
        // (latency, backoff, stall) → deadline
        let cases = [
            // The defaults: 7 × 110 + 6 × 20 × 5 = 1,370 ms; the floor applies.
            ((10, 5, 100), 30_000),
            ((0, 1, 0), 30_000),
            // Retries of up to 100 s: 7 × 110 + 6 × 100,000 = 600,770 ms, twice.
            ((10, 5_000, 100), 1_201_540),
            // Stalls of an hour dominate.
            ((0, 1, 3_600_000), 2 * (7 * 3_600_000 + 120)),
            // Every bound at once still fits the deadline's bound.
            ((600_000, 100_000, 3_600_000), 2 * (7 * 4_200_000 + 120 * 100_000)),
        ];
        for ((latency, backoff, stall), deadline) in cases {
            let got = default_hang_deadline_ms(pace((latency, backoff, stall)));
            assert_eq!(got, deadline, "{latency} {backoff} {stall}");
            assert!(HANG_DEADLINE_MS.contains(&got), "{got}");
        }
        let most = Pace {
            tool_ms: Some(u64::MAX),
            decide_ms: u64::MAX,
            ..pace((u64::MAX, u64::MAX, u64::MAX))
        };
        assert_eq!(default_hang_deadline_ms(most), u64::MAX, "saturates");
        // A decision's time counts per attempt; a tool doubles the steps and adds its call.
        let slow = Pace { decide_ms: 10_000, ..pace((10, 5, 100)) };
        assert_eq!(default_hang_deadline_ms(slow), 2 * (7 * 10_110 + 600));
        let tools = Pace { tool_ms: Some(20_000), ..pace((10, 5, 100)) };
        assert_eq!(default_hang_deadline_ms(tools), 2 * (2 * 1_370 + 20_000));
    }
}
