//! What `llm-retry` does with a failure: the pure decisions of normal mode and always mode
//! (`docs/runtime-semantics.md`, "The normal-mode decision" and "Always mode").
//!
//! The actor gathers the inputs — the payload's effective policy, the failure, the chain's current
//! count from the retry-chain projection and, in always mode, the downstream answer — and performs
//! the [`Decision`]: `Delegate` answers `Next`, `Schedule` appends `llm/retry` and waits,
//! `AskDownstream` consults the rest of the chain and calls [`after_downstream`],
//! `AcceptDownstreamRetry` answers `Retry` and writes nothing, `Throttle` appends
//! `retry/throttled` and answers `Next`.
//!
//! # Route health
//!
//! `CIRCUIT_OPEN` (the route's breaker refused the attempt) is delegated first thing, in both
//! modes: nothing retried on that route can succeed before it half-opens; a route switch
//! (`fallback`) is the only recovery. And [`throttle`] turns a retry the decision would schedule
//! into a `Throttle` when the payload's health report says the route's retry budget is spent.
//!
//! # Why the sample is drawn lazily
//!
//! A scenario's `random` samples are consumed in order by every plugin. If `llm-retry` drew a
//! sample for a failure it then delegates, or for a provider delay it uses verbatim, `auto-retry`
//! would see the sequence shifted by one. So the decision takes a `FnOnce() -> f64` and calls it
//! only when it computes a backoff: exactly one sample per backoff-timed retry, none otherwise.
//!
//! # Why the chain id is decided here
//!
//! Retry 1 of a chain gets a fresh UUID; later retries keep the chain's id. The UUID itself is
//! randomness the actor makes, but *whether* a chain is new is part of the decision, so
//! [`Schedule::chain`] says [`ChainId::New`] or carries the id to continue.

use rein_runtime::failure::{self, Failure};
use rein_runtime::retry_policy::{Backoff, RetryPolicy};

use crate::backoff;

/// What to do with a failure.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Answer `Next`: the rest of the chain decides (steps 1–4 of the normal-mode decision).
    Delegate(Delegation),
    /// Always mode: consult the rest of the chain first, then call [`after_downstream`].
    AskDownstream,
    /// Always mode: downstream answered `Retry`; answer `Retry` and write nothing.
    AcceptDownstreamRetry,
    /// Schedule an own retry: append `llm/retry`, wait, append `llm/retry-started`, answer `Retry`.
    Schedule(Schedule),
    /// A retry it would have scheduled, declined because the route's retry budget is spent:
    /// append `retry/throttled`, answer `Next`.
    Throttle,
}

/// Why a failure is delegated, named after the step of the normal-mode decision that delegates it.
#[derive(Debug, Clone, PartialEq)]
pub enum Delegation {
    /// The route's breaker refused the attempt (`CIRCUIT_OPEN`): never retried on that route.
    CircuitOpen,
    /// Step 1: no effective policy (no adapter served the request).
    NoPolicy,
    /// Step 2: the code is not in `retryableCodes`.
    NotRetryable,
    /// Step 3: the chain already made `retries ≥ max_retries` retries.
    BudgetSpent {
        /// The chain's count.
        retries: u64,
        /// The budget.
        max_retries: u64,
    },
    /// Step 4: the provider asked for a delay above the cap; no event, no timer.
    ProviderDelayOverCap {
        /// The provider's delay.
        delay_ms: f64,
        /// The policy's `maxDelayMs`.
        max_delay_ms: f64,
    },
}

/// An own retry to schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// The retry number in its chain (count + 1).
    pub retry: u64,
    /// The wait before the next attempt.
    pub delay_ms: f64,
    /// Where the delay came from.
    pub source: DelaySource,
    /// Whether this retry opens a chain or continues one.
    pub chain: ChainId,
}

/// Where a scheduled delay came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DelaySource {
    /// The provider's `providerRetryAfterMs`, used verbatim (no jitter).
    Provider,
    /// The policy's backoff curve for the retry number.
    Backoff,
}

/// The chain a scheduled retry belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainId {
    /// Retry 1: make a fresh `retryId` (UUID v4).
    New,
    /// A later retry: keep the chain's `retryId`.
    Continue(String),
}

/// What the rest of the chain answered an always-mode consultation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consulted {
    /// It will retry: `llm-retry` accepts and writes nothing.
    Retry,
    /// It answered anything else (`Stop`; `Next` resolves to the end of the chain's `Stop`).
    Declined,
    /// The consultation failed (a downstream plugin crashed and no answer came back).
    Crashed,
}

/// The first decision on a failure (in normal mode, the whole decision; in always mode, its start).
///
/// `chain` is the chain's latest `llm/retry` as `(retry, retryId)`, or `None` before its first
/// retry. `sample` is drawn only if a backoff is computed.
pub fn on_failure(
    policy: Option<&RetryPolicy>,
    failure: &Failure,
    chain: Option<(u64, &str)>,
    sample: impl FnOnce() -> f64,
) -> Decision {
    if failure.code() == failure::CIRCUIT_OPEN {
        return Decision::Delegate(Delegation::CircuitOpen);
    }
    let Some(policy) = policy else {
        return Decision::Delegate(Delegation::NoPolicy);
    };
    let (max_retries, backoff) = match policy {
        RetryPolicy::Always { .. } => return Decision::AskDownstream,
        RetryPolicy::Normal { max_retries, retryable_codes, backoff } => {
            if !retryable_codes.contains(failure.code()) {
                return Decision::Delegate(Delegation::NotRetryable);
            }
            (*max_retries, backoff)
        }
    };
    let retries = chain.map_or(0, |(retry, _)| retry);
    if retries >= max_retries {
        return Decision::Delegate(Delegation::BudgetSpent { retries, max_retries });
    }
    match failure.provider_retry_after_ms() {
        Some(delay_ms) if delay_ms > backoff.max_delay_ms() => {
            Decision::Delegate(Delegation::ProviderDelayOverCap {
                delay_ms,
                max_delay_ms: backoff.max_delay_ms(),
            })
        }
        provider => Decision::Schedule(schedule(backoff, provider, chain, sample)),
    }
}

/// The always-mode decision once downstream answered: accept its `Retry`, else schedule an own
/// retry for any code, without a budget. A provider delay within the cap is used verbatim; one
/// above the cap falls back to the local backoff (it never delegates).
pub fn after_downstream(
    backoff: &Backoff,
    downstream: Consulted,
    failure: &Failure,
    chain: Option<(u64, &str)>,
    sample: impl FnOnce() -> f64,
) -> Decision {
    if downstream == Consulted::Retry {
        return Decision::AcceptDownstreamRetry;
    }
    if failure.code() == failure::CIRCUIT_OPEN {
        return Decision::Delegate(Delegation::CircuitOpen);
    }
    let provider = failure.provider_retry_after_ms().filter(|ms| *ms <= backoff.max_delay_ms());
    Decision::Schedule(schedule(backoff, provider, chain, sample))
}

/// A decision under the route's retry budget: a retry it would schedule becomes
/// [`Decision::Throttle`] when `throttled` (the budget holds `maxTokens / 2` or less); every
/// other decision stands.
pub fn throttle(decision: Decision, throttled: bool) -> Decision {
    match decision {
        Decision::Schedule(_) if throttled => Decision::Throttle,
        other => other,
    }
}

/// Retry `count + 1` of `chain`, waiting `provider` verbatim if given, else the backoff.
fn schedule(
    backoff: &Backoff,
    provider: Option<f64>,
    chain: Option<(u64, &str)>,
    sample: impl FnOnce() -> f64,
) -> Schedule {
    let retry = chain.map_or(0, |(retry, _)| retry).saturating_add(1);
    let (delay_ms, source) = match provider {
        Some(ms) => (ms, DelaySource::Provider),
        None => (backoff::delay_for(backoff, retry, sample()), DelaySource::Backoff),
    };
    let chain = match chain {
        None => ChainId::New,
        Some((_, id)) => ChainId::Continue(id.to_owned()),
    };
    Schedule { retry, delay_ms, source, chain }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use rein_runtime::retry_policy::RetryableCodes;

    use super::*;

    /// A chain as the projection reports it: `(retry, retryId)` of its latest `llm/retry`.
    type ChainIn = Option<(u64, &'static str)>;

    /// (policy, failure, chain, sample) → (decision, samples drawn).
    type NormalCase<'p> = (Option<&'p RetryPolicy>, Failure, ChainIn, f64, Decision, usize);

    fn failure(code: &str) -> Failure {
        Failure::new(code, "boom").unwrap()
    }

    fn after(code: &str, ms: f64) -> Failure {
        failure(code).with_retry_after_ms(ms).unwrap()
    }

    fn normal(max_retries: u64, codes: &[&str], b: (f64, f64, f64)) -> RetryPolicy {
        RetryPolicy::Normal {
            max_retries,
            retryable_codes: RetryableCodes::new(codes.iter().copied()).unwrap(),
            backoff: Backoff::new(b.0, b.1, b.2).unwrap(),
        }
    }

    fn always(b: (f64, f64, f64)) -> RetryPolicy {
        RetryPolicy::Always { backoff: Backoff::new(b.0, b.1, b.2).unwrap() }
    }

    fn scheduled(retry: u64, delay_ms: f64, source: DelaySource, chain: Option<&str>) -> Decision {
        let chain = chain.map_or(ChainId::New, |id| ChainId::Continue(id.to_owned()));
        Decision::Schedule(Schedule { retry, delay_ms, source, chain })
    }

    /// Runs a decision with a sample that counts how often it was drawn.
    fn decide(run: impl FnOnce(&dyn Fn() -> f64) -> Decision, r: f64) -> (Decision, usize) {
        let drawn = Cell::new(0);
        let sample = || {
            drawn.set(drawn.get() + 1);
            r
        };
        let decision = run(&sample);
        (decision, drawn.get())
    }

    #[test]
    fn normal_mode_follows_the_spec_steps_in_order() {
        use DelaySource::{Backoff as B, Provider as P};
        let default = RetryPolicy::default();
        let flat = normal(2, &["RATE_LIMIT", "SERVER"], (500.0, 10000.0, 0.0));
        let jittered = normal(3, &["SERVER"], (500.0, 10000.0, 0.1));
        let zero = normal(0, &["SERVER"], (500.0, 10000.0, 0.0));
        // (policy, failure, chain, r) → (decision, samples drawn)
        let cases: Vec<NormalCase> = vec![
            // Step 1: no effective policy (NO_ADAPTER) → Next, whatever the code.
            (None, failure("NO_ADAPTER"), None, 0.5, Decision::Delegate(Delegation::NoPolicy), 0),
            (None, failure("SERVER"), None, 0.5, Decision::Delegate(Delegation::NoPolicy), 0),
            // Step 2: not a retryable code → Next (also before the budget and the provider delay).
            (
                Some(&default),
                failure("AUTH"),
                None,
                0.5,
                Decision::Delegate(Delegation::NotRetryable),
                0,
            ),
            (
                Some(&flat),
                after("TIMEOUT", 100.0),
                None,
                0.5,
                Decision::Delegate(Delegation::NotRetryable),
                0,
            ),
            (
                Some(&flat),
                failure("server"),
                None,
                0.5,
                Decision::Delegate(Delegation::NotRetryable),
                0,
            ),
            // Step 3: budget spent → Next.
            (
                Some(&flat),
                failure("SERVER"),
                Some((2, "id")),
                0.5,
                Decision::Delegate(Delegation::BudgetSpent { retries: 2, max_retries: 2 }),
                0,
            ),
            (
                Some(&flat),
                after("SERVER", 1.0),
                Some((5, "id")),
                0.5,
                Decision::Delegate(Delegation::BudgetSpent { retries: 5, max_retries: 2 }),
                0,
            ),
            (
                Some(&zero),
                failure("SERVER"),
                None,
                0.5,
                Decision::Delegate(Delegation::BudgetSpent { retries: 0, max_retries: 0 }),
                0,
            ),
            // Step 4: a provider delay within the cap is used verbatim, no jitter, no sample.
            (Some(&jittered), after("SERVER", 2000.0), None, 0.0, scheduled(1, 2000.0, P, None), 0),
            (
                Some(&jittered),
                after("SERVER", 10000.0),
                Some((1, "c")),
                1.0,
                scheduled(2, 10000.0, P, Some("c")),
                0,
            ),
            (Some(&jittered), after("SERVER", 0.5), None, 1.0, scheduled(1, 0.5, P, None), 0),
            // Step 4: over the cap → Next (no event, no timer).
            (
                Some(&jittered),
                after("SERVER", 10000.5),
                None,
                0.5,
                Decision::Delegate(Delegation::ProviderDelayOverCap {
                    delay_ms: 10000.5,
                    max_delay_ms: 10000.0,
                }),
                0,
            ),
            // Step 5: backoff of retry n = count + 1, one sample.
            (Some(&flat), failure("RATE_LIMIT"), None, 0.9, scheduled(1, 500.0, B, None), 1),
            (
                Some(&flat),
                failure("SERVER"),
                Some((1, "chain-1")),
                0.9,
                scheduled(2, 1000.0, B, Some("chain-1")),
                1,
            ),
            (Some(&jittered), failure("SERVER"), None, 0.0, scheduled(1, 450.0, B, None), 1),
            (
                Some(&jittered),
                failure("SERVER"),
                Some((1, "x")),
                1.0,
                scheduled(2, 1100.0, B, Some("x")),
                1,
            ),
            (
                Some(&jittered),
                failure("SERVER"),
                Some((2, "x")),
                0.5,
                scheduled(3, 2000.0, B, Some("x")),
                1,
            ),
        ];
        for (policy, failure, chain, r, expected, samples) in cases {
            let (got, drawn) = decide(|s| on_failure(policy, &failure, chain, s), r);
            assert_eq!(got, expected, "{failure:?} chain {chain:?}");
            assert_eq!(drawn, samples, "samples drawn for {failure:?} chain {chain:?}");
        }
    }

    #[test]
    fn circuit_open_is_never_retried_on_its_route_in_either_mode() {
        let listed = normal(5, &["CIRCUIT_OPEN", "SERVER"], (500.0, 10000.0, 0.0));
        let policy = always((500.0, 10000.0, 0.0));
        let open = failure("CIRCUIT_OPEN");
        let circuit = Decision::Delegate(Delegation::CircuitOpen);
        for (policy, chain) in
            [(Some(&listed), None), (Some(&policy), None), (None, Some((1, "a")))]
        {
            let (got, drawn) = decide(|s| on_failure(policy, &open, chain, s), 0.5);
            assert_eq!((got, drawn), (circuit.clone(), 0), "{policy:?}: even when listed");
        }
        let curve = Backoff::new(1.0, 4.0, 0.0).unwrap();
        for consulted in [Consulted::Declined, Consulted::Crashed] {
            let (got, drawn) = decide(|s| after_downstream(&curve, consulted, &open, None, s), 0.5);
            assert_eq!((got, drawn), (circuit.clone(), 0), "always mode after {consulted:?}");
        }
        let (got, _) = decide(|s| after_downstream(&curve, Consulted::Retry, &open, None, s), 0.5);
        assert_eq!(got, Decision::AcceptDownstreamRetry, "a downstream switch is accepted");
    }

    #[test]
    fn a_spent_budget_turns_a_scheduled_retry_into_a_throttle() {
        let retry = scheduled(1, 500.0, DelaySource::Backoff, None);
        let cases = [
            (retry.clone(), false, retry.clone()),
            (retry.clone(), true, Decision::Throttle),
            // Only a retry it would schedule is declined: every other decision stands.
            (
                Decision::Delegate(Delegation::NotRetryable),
                true,
                Decision::Delegate(Delegation::NotRetryable),
            ),
            (
                Decision::Delegate(Delegation::CircuitOpen),
                true,
                Decision::Delegate(Delegation::CircuitOpen),
            ),
            (Decision::AskDownstream, true, Decision::AskDownstream),
            (Decision::AcceptDownstreamRetry, true, Decision::AcceptDownstreamRetry),
        ];
        for (decision, throttled, expected) in cases {
            assert_eq!(throttle(decision.clone(), throttled), expected, "{decision:?} {throttled}");
        }
    }

    #[test]
    fn always_mode_asks_downstream_first_for_any_code() {
        let policy = always((500.0, 10000.0, 0.1));
        for code in ["AUTH", "NO_ADAPTER", "SERVER", "HTTP_418", "CONTEXT_WINDOW_EXCEEDED"] {
            for chain in [None, Some((1_000_000, "id"))] {
                let (got, drawn) =
                    decide(|s| on_failure(Some(&policy), &failure(code), chain, s), 0.5);
                assert_eq!(got, Decision::AskDownstream, "{code}");
                assert_eq!(drawn, 0, "asking downstream draws no sample");
            }
        }
        // Step 1 still comes first: with no policy there is no mode.
        let (got, _) = decide(|s| on_failure(None, &failure("AUTH"), None, s), 0.5);
        assert_eq!(got, Decision::Delegate(Delegation::NoPolicy));
    }

    #[test]
    fn always_mode_after_downstream_accepts_a_retry_or_retries_itself() {
        use Consulted::{Crashed, Declined, Retry};
        use DelaySource::{Backoff as B, Provider as P};
        let curve = Backoff::new(1.0, 4.0, 0.1).unwrap();
        let cases: Vec<(Consulted, Failure, ChainIn, f64, Decision, usize)> = vec![
            // Downstream retries: accept, write nothing, draw nothing.
            (Retry, failure("SERVER"), None, 1.0, Decision::AcceptDownstreamRetry, 0),
            (Retry, after("SERVER", 2.0), Some((3, "id")), 1.0, Decision::AcceptDownstreamRetry, 0),
            // Declined or crashed: an own retry for ANY code, without a budget.
            (Declined, failure("AUTH"), None, 1.0, scheduled(1, 1.1, B, None), 1),
            (Crashed, failure("AUTH"), None, 1.0, scheduled(1, 1.1, B, None), 1),
            (Declined, failure("SERVER"), Some((1, "a")), 1.0, scheduled(2, 2.2, B, Some("a")), 1),
            (Declined, failure("SERVER"), Some((2, "a")), 1.0, scheduled(3, 4.0, B, Some("a")), 1),
            (Declined, failure("SERVER"), Some((3, "a")), 1.0, scheduled(4, 4.0, B, Some("a")), 1),
            (
                Declined,
                failure("SERVER"),
                Some((u64::MAX - 1, "a")),
                0.0,
                scheduled(u64::MAX, 3.6, B, Some("a")),
                1,
            ),
            // A provider delay within the cap: verbatim.
            (Declined, after("RATE_LIMIT", 3.5), None, 1.0, scheduled(1, 3.5, P, None), 0),
            (
                Crashed,
                after("RATE_LIMIT", 4.0),
                Some((7, "b")),
                1.0,
                scheduled(8, 4.0, P, Some("b")),
                0,
            ),
            // Over the cap: the local backoff instead of delegating.
            (Declined, after("RATE_LIMIT", 4.5), None, 1.0, scheduled(1, 1.1, B, None), 1),
            (
                Crashed,
                after("RATE_LIMIT", 60000.0),
                Some((1, "b")),
                0.0,
                scheduled(2, 1.8, B, Some("b")),
                1,
            ),
        ];
        for (downstream, failure, chain, r, expected, samples) in cases {
            let (got, drawn) =
                decide(|s| after_downstream(&curve, downstream, &failure, chain, s), r);
            assert_eq!(got, expected, "{downstream:?} {failure:?} chain {chain:?}");
            assert_eq!(drawn, samples, "samples drawn for {downstream:?} {failure:?}");
        }
    }

    #[test]
    fn a_normal_chain_spends_exactly_its_budget() {
        let policy = normal(3, &["SERVER"], (500.0, 10000.0, 0.0));
        let mut chain: Option<(u64, String)> = None;
        let mut delays = Vec::new();
        loop {
            let current = chain.as_ref().map(|(n, id)| (*n, id.as_str()));
            match on_failure(Some(&policy), &failure("SERVER"), current, || 0.5) {
                Decision::Schedule(s) => {
                    let id = match s.chain {
                        ChainId::New => "fresh".to_owned(),
                        ChainId::Continue(id) => id,
                    };
                    delays.push(s.delay_ms);
                    chain = Some((s.retry, id));
                }
                other => {
                    assert_eq!(
                        other,
                        Decision::Delegate(Delegation::BudgetSpent { retries: 3, max_retries: 3 })
                    );
                    break;
                }
            }
        }
        assert_eq!(delays, [500.0, 1000.0, 2000.0]);
        assert_eq!(chain, Some((3, "fresh".to_owned())), "the id of retry 1 is kept");
    }
}
