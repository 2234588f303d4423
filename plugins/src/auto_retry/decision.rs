//! What `auto-retry` does with a failure: the pure decision, in two steps around the downstream
//! consultation (see `docs/runtime-semantics.md`, "auto-retry").
//!
//! 1. [`on_failure`]: if `auto-retry` could not retry this failure whatever downstream says —
//!    switched off, `extraRetries = 0`, a hard-floor code, a code it does not list, its own
//!    budget spent — it [`Decline`](Decision::Decline)s at once (answer `Next`: the rest of the
//!    chain's answer becomes the answer, exactly what "ask downstream, then stop" gives, without
//!    a consultation). Otherwise it asks downstream first.
//! 2. [`after_downstream`]: a downstream answer other than `Stop` is the answer; then a turn
//!    cancelled or a plugin disposed meanwhile → `Stop`, writing nothing; then the same checks
//!    again, against the settings in force now (a run-time update applies to running chains);
//!    then an own retry is scheduled.
//!
//! The own chain is keyed by [`AutoRetrySettings::policy_key`] and counted, like the official
//! executor's, from the retry-chain projection under (provider, policyKey). The delay:
//! - a provider delay wins, clamped to `maxDelayMs` (the official executor gives up over its
//!   cap; `auto-retry` keeps the attempt: the provider said when to come back, not to stop);
//! - else, if the official chain of this step and provider (under the key of the payload's
//!   effective policy) made `k ≥ 1` retries, the official curve continues: the backoff of retry
//!   `k + own retry` with the official `initialDelayMs` and `jitterRatio` and
//!   `min(official maxDelayMs, own maxDelayMs)` as the cap — restarting at one second would
//!   hammer a provider that just asked to slow down;
//! - else the backoff of the own retry number on the own curve.
//!
//! A jitter sample is drawn only when a backoff is computed (see [`crate::llm_retry::decision`]).
//!
//! `CIRCUIT_OPEN` is in the hard floor (the route's breaker is open: only a route switch
//! recovers it), and [`throttle`] declines an own retry while the route's retry budget is spent.

use rein_runtime::event::LlmRetry;
use rein_runtime::failure::Failure;
use rein_runtime::plugin::{DownstreamAnswer, Verdict};
use rein_runtime::retry_policy::RetryPolicy;
use rein_runtime::session_log::retry_chains::RetryChains;

use super::catalogue;
use super::settings::AutoRetrySettings;
use crate::backoff;
use crate::llm_retry::ChainId;

/// The parts of a waterfall payload the decision reads, and the session's retry chains.
#[derive(Debug, Clone, Copy)]
pub struct Failed<'a> {
    /// What went wrong.
    pub failure: &'a Failure,
    /// The provider route that served the attempt (chains are keyed by it).
    pub provider: &'a str,
    /// The payload's effective policy (the official curve); `None` when no adapter served it.
    pub official: Option<&'a RetryPolicy>,
    /// The retry-chain projection of the session, read once per recovery.
    pub chains: &'a RetryChains,
}

/// What to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Consult the rest of the chain, then call [`after_downstream`].
    AskDownstream,
    /// `auto-retry` does not retry this failure: answer `Next` (downstream's answer, if it was
    /// asked — it was `Stop` — or the rest of the chain's, if not).
    Decline(Declined),
    /// Downstream answered something other than `Stop`: that is the answer (answer `Next`,
    /// which returns it).
    Downstream(DownstreamAnswer),
    /// The turn was cancelled or the plugin disposed: answer `Stop`, write nothing.
    Abandon(Gone),
    /// Schedule an own retry: append its `llm/retry` ([`Schedule::event`]), wait, append
    /// `llm/retry-started`, answer `Retry` — the shared schedule-wait-start sequence.
    Schedule(Schedule),
    /// An own retry it would have scheduled, declined because the route's retry budget is
    /// spent: append `retry/throttled`, answer `Next` ([`throttle`]).
    Throttle,
}

impl Decision {
    /// The answer to give at once, or `None` when the decision asks for work first (consult
    /// downstream, or schedule a retry).
    pub fn verdict(&self) -> Option<Verdict> {
        match self {
            Decision::Decline(_) | Decision::Downstream(_) => Some(Verdict::Next),
            Decision::Abandon(_) => Some(Verdict::Stop),
            Decision::AskDownstream | Decision::Schedule(_) | Decision::Throttle => None,
        }
    }
}

/// Why `auto-retry` does not retry a failure, in the order the checks run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Declined {
    /// `enabled = false`.
    Disabled,
    /// `extraRetries = 0`.
    NoExtraRetries,
    /// The code is in the hard floor (checked before the allowlist).
    HardFloor,
    /// `retryableCodes` does not list the code.
    NotListed,
    /// The own chain already made `extraRetries` retries (worth a warning: the budget on top of
    /// the official one is spent).
    BudgetSpent {
        /// The own chain's count.
        retries: u64,
        /// The budget.
        extra_retries: u32,
    },
}

/// What ended a recovery before it scheduled anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gone {
    /// The turn was cancelled.
    Cancelled,
    /// The plugin was disposed.
    Disposed,
}

/// An own retry to schedule: everything its `llm/retry` says, decided against one settings
/// snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// The retry number in the own chain (count + 1).
    pub retry: u64,
    /// The own chain's budget (`extraRetries`, ≥ 1), written as `maxRetries`.
    pub max_retries: u64,
    /// The own chain's `policyKey`.
    pub policy_key: String,
    /// The wait before the next attempt.
    pub delay_ms: f64,
    /// Where the delay came from.
    pub source: DelaySource,
    /// Whether this retry opens the own chain or continues it.
    pub chain: ChainId,
}

/// Where a scheduled delay came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DelaySource {
    /// The provider's `providerRetryAfterMs` (clamped to `maxDelayMs` when above it).
    Provider {
        /// What the provider asked for.
        requested_ms: f64,
    },
    /// The official curve, continued after the official chain's retries.
    OfficialCurve {
        /// How many retries the official chain made in this step.
        official_retries: u64,
    },
    /// The own curve (the official executor never retried this step).
    OwnCurve,
}

impl Schedule {
    /// The `llm/retry` event of this retry for the failed attempt of (`turn`, `step`) on
    /// `provider`: `plugin: "auto-retry"`, `mode: "normal"`. `new_retry_id` makes the id of a
    /// new chain (a UUID v4) from its policy key; a continued chain keeps its id.
    pub fn event(
        self,
        turn: u32,
        step: u32,
        provider: &str,
        failure: &Failure,
        new_retry_id: impl FnOnce(&str) -> String,
    ) -> LlmRetry {
        let retry_id = match self.chain {
            ChainId::New => new_retry_id(&self.policy_key),
            ChainId::Continue(id) => id,
        };
        LlmRetry {
            retry_id,
            turn,
            step,
            provider: provider.to_owned(),
            plugin: super::NAME.to_owned(),
            mode: "normal".to_owned(),
            policy_key: self.policy_key,
            retry: self.retry,
            max_retries: Some(self.max_retries),
            delay_ms: self.delay_ms,
            failure: failure.clone(),
        }
    }
}

/// The decision before consulting downstream: decline what `auto-retry` could not retry anyway,
/// else ask downstream first.
pub fn on_failure(settings: &AutoRetrySettings, failed: &Failed<'_>) -> Decision {
    match own_chain(settings, failed) {
        Err(declined) => Decision::Decline(declined),
        Ok(_) => Decision::AskDownstream,
    }
}

/// The decision once downstream answered. `gone` says whether the turn was cancelled or the
/// plugin disposed meanwhile; `settings` are those in force now. `sample` is drawn only if a
/// backoff is computed.
pub fn after_downstream(
    settings: &AutoRetrySettings,
    failed: &Failed<'_>,
    downstream: DownstreamAnswer,
    gone: Option<Gone>,
    sample: impl FnOnce() -> f64,
) -> Decision {
    if downstream != DownstreamAnswer::Stop {
        return Decision::Downstream(downstream);
    }
    if let Some(gone) = gone {
        return Decision::Abandon(gone);
    }
    let (policy_key, chain) = match own_chain(settings, failed) {
        Err(declined) => return Decision::Decline(declined),
        Ok(own) => own,
    };
    let retry = chain.as_ref().map_or(0, |(retries, _)| *retries).saturating_add(1);
    let (delay_ms, source) = delay(settings, failed, retry, sample);
    let chain = match chain {
        None => ChainId::New,
        Some((_, id)) => ChainId::Continue(id),
    };
    Decision::Schedule(Schedule {
        retry,
        max_retries: u64::from(settings.extra_retries()),
        policy_key,
        delay_ms,
        source,
        chain,
    })
}

/// A decision under the route's retry budget: an own retry it would schedule becomes
/// [`Decision::Throttle`] when `throttled` (the payload's health report: the budget holds
/// `maxTokens / 2` or less); every other decision stands.
pub fn throttle(decision: Decision, throttled: bool) -> Decision {
    match decision {
        Decision::Schedule(_) if throttled => Decision::Throttle,
        other => other,
    }
}

/// The checks of both steps, in order; on success the own `policyKey` and the own chain's
/// `(count, retryId)` if it has begun.
fn own_chain(
    settings: &AutoRetrySettings,
    failed: &Failed<'_>,
) -> Result<(String, Option<(u64, String)>), Declined> {
    let code = failed.failure.code();
    if !settings.enabled() {
        return Err(Declined::Disabled);
    }
    if settings.extra_retries() == 0 {
        return Err(Declined::NoExtraRetries);
    }
    if catalogue::is_hard_floor(code) {
        return Err(Declined::HardFloor);
    }
    if !settings.lists(code) {
        return Err(Declined::NotListed);
    }
    let policy_key = settings.policy_key();
    let chain = failed.chains.get(failed.provider, &policy_key);
    let retries = chain.map_or(0, |c| c.retry);
    if retries >= u64::from(settings.extra_retries()) {
        return Err(Declined::BudgetSpent { retries, extra_retries: settings.extra_retries() });
    }
    Ok((policy_key, chain.map(|c| (c.retry, c.retry_id.clone()))))
}

/// The delay of own retry `retry` (see the module docs for the three rules).
fn delay(
    settings: &AutoRetrySettings,
    failed: &Failed<'_>,
    retry: u64,
    sample: impl FnOnce() -> f64,
) -> (f64, DelaySource) {
    let own_max = f64::from(settings.max_delay_ms());
    if let Some(requested_ms) = failed.failure.provider_retry_after_ms() {
        return (requested_ms.min(own_max), DelaySource::Provider { requested_ms });
    }
    let official = failed.official.and_then(|policy| {
        let chain = failed.chains.get(failed.provider, &policy.policy_key())?;
        (chain.retry >= 1).then_some((policy.backoff(), chain.retry))
    });
    match official {
        Some((curve, official_retries)) => {
            let delay = backoff::delay(
                official_retries.saturating_add(retry),
                curve.initial_delay_ms(),
                curve.max_delay_ms().min(own_max),
                curve.jitter_ratio(),
                sample(),
            );
            (delay, DelaySource::OfficialCurve { official_retries })
        }
        None => {
            let delay = backoff::delay(
                retry,
                f64::from(settings.initial_delay_ms()),
                own_max,
                settings.jitter_ratio(),
                sample(),
            );
            (delay, DelaySource::OwnCurve)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use rein_runtime::event::Event;
    use rein_runtime::failure::HARD_FLOOR;
    use rein_runtime::retry_policy::{Backoff, RetryableCodes};
    use serde_json::{Value, json};

    use super::*;
    use crate::settings::Patchable;

    const MOCK: &str = "mock";

    fn settings(patch: Value) -> AutoRetrySettings {
        AutoRetrySettings::default().patched(&patch).unwrap().settings
    }

    /// The official default curve without jitter: 2 retries, 500 → 10000.
    fn official(max_retries: u64) -> RetryPolicy {
        RetryPolicy::Normal {
            max_retries,
            retryable_codes: RetryableCodes::default(),
            backoff: Backoff::new(500.0, 10000.0, 0.0).unwrap(),
        }
    }

    fn failure(code: &str) -> Failure {
        Failure::new(code, "boom").unwrap()
    }

    fn after(code: &str, ms: f64) -> Failure {
        failure(code).with_retry_after_ms(ms).unwrap()
    }

    /// The projection after `n` `llm/retry` of `plugin` under `key` on `provider`.
    fn chains_with(mut chains: RetryChains, provider: &str, key: &str, n: u64) -> RetryChains {
        for retry in 1..=n {
            chains.apply(&Event::LlmRetry(LlmRetry {
                retry_id: format!("{key}-id"),
                turn: 1,
                step: 1,
                provider: provider.into(),
                plugin: "llm-retry".into(),
                mode: "normal".into(),
                policy_key: key.into(),
                retry,
                max_retries: Some(n),
                delay_ms: 1.0,
                failure: failure("SERVER"),
            }));
        }
        chains
    }

    /// Runs `decide` with a sample that counts how often it was drawn.
    fn sampled(r: f64, decide: impl FnOnce(&dyn Fn() -> f64) -> Decision) -> (Decision, usize) {
        let drawn = Cell::new(0);
        let sample = || {
            drawn.set(drawn.get() + 1);
            r
        };
        let decision = decide(&sample);
        (decision, drawn.get())
    }

    /// Replays failures of `code` until `auto-retry` declines: the own delays (each retry folded
    /// back into the projection as its `llm/retry`), and how it ended.
    fn replay(
        s: &AutoRetrySettings,
        official: Option<&RetryPolicy>,
        mut chains: RetryChains,
        failure: &Failure,
    ) -> (Vec<f64>, Decision) {
        let mut delays = Vec::new();
        let mut ids = Vec::new();
        loop {
            let failed = Failed { failure, provider: MOCK, official, chains: &chains };
            let first = on_failure(s, &failed);
            let decision = after_downstream(s, &failed, DownstreamAnswer::Stop, None, || 0.5);
            let Decision::Schedule(schedule) = decision else {
                assert_eq!(first, decision, "both steps decline alike");
                return (delays, decision);
            };
            assert_eq!(first, Decision::AskDownstream);
            delays.push(schedule.delay_ms);
            let event = schedule.event(1, 1, MOCK, failure, |_| "own-chain".to_owned());
            ids.push(event.retry_id.clone());
            assert_eq!(event.retry, delays.len() as u64);
            chains.apply(&Event::LlmRetry(event));
            assert!(ids.iter().all(|id| id == "own-chain"), "one retryId per chain");
        }
    }

    #[test]
    fn the_spec_examples_continue_or_restart_the_official_curve() {
        // Own settings: the defaults without jitter.
        let s = settings(json!({"jitterRatio": 0}));
        let spent = Decision::Decline(Declined::BudgetSpent { retries: 3, extra_retries: 3 });
        let default_official = official(2);
        let route_official = official(5);
        let key = |p: &RetryPolicy| p.policy_key();
        // (official policy, official retries already made, code) → own delays
        let cases: Vec<(&RetryPolicy, u64, &str, [f64; 3])> = vec![
            // A code the official executor never retries: the own curve, 1000 → 60000.
            (&default_official, 0, "PI_AI_ERROR", [1000.0, 2000.0, 4000.0]),
            // RATE_LIMIT after the official spent its 2 retries: retries 3, 4, 5 of its curve.
            (&default_official, 2, "RATE_LIMIT", [2000.0, 4000.0, 8000.0]),
            // After a route policy of 5 official retries: saturated at the official cap.
            (&route_official, 5, "RATE_LIMIT", [10000.0, 10000.0, 10000.0]),
        ];
        for (policy, k, code, expected) in cases {
            let chains = chains_with(RetryChains::default(), MOCK, &key(policy), k);
            let (delays, end) = replay(&s, Some(policy), chains, &failure(code));
            assert_eq!(delays, expected, "{code} after {k} official retries");
            assert_eq!(end, spent, "{code}: then the extra budget is spent");
        }
    }

    #[test]
    fn the_hard_floor_is_never_retried_even_when_listed() {
        let (listed, _) = AutoRetrySettings::from_file(
            &json!({"retryableCodes": HARD_FLOOR, "jitterRatio": 0}),
            "",
        );
        assert_eq!(listed.retryable_codes(), HARD_FLOOR, "kept as written");
        let chains = RetryChains::default();
        for code in HARD_FLOOR {
            let f = failure(code);
            let failed = Failed { failure: &f, provider: MOCK, official: None, chains: &chains };
            let declined = Decision::Decline(Declined::HardFloor);
            assert_eq!(on_failure(&listed, &failed), declined, "{code}");
            let (got, drawn) = sampled(0.5, |r| {
                after_downstream(&listed, &failed, DownstreamAnswer::Stop, None, r)
            });
            assert_eq!((got, drawn), (declined, 0), "{code}");
        }
    }

    #[test]
    fn a_spent_route_budget_declines_only_an_own_retry() {
        let s = settings(json!({"jitterRatio": 0}));
        let chains = RetryChains::default();
        let f = failure("SERVER");
        let failed = Failed { failure: &f, provider: MOCK, official: None, chains: &chains };
        let own = after_downstream(&s, &failed, DownstreamAnswer::Stop, None, || 0.0);
        assert!(matches!(own, Decision::Schedule(_)), "{own:?}");
        let cases = [
            (own.clone(), false, own.clone()),
            (own.clone(), true, Decision::Throttle),
            // Every other decision stands: downstream's answer, a decline, an abandon.
            (
                Decision::Downstream(DownstreamAnswer::Retry),
                true,
                Decision::Downstream(DownstreamAnswer::Retry),
            ),
            (Decision::Decline(Declined::HardFloor), true, Decision::Decline(Declined::HardFloor)),
            (Decision::Abandon(Gone::Cancelled), true, Decision::Abandon(Gone::Cancelled)),
            (Decision::AskDownstream, true, Decision::AskDownstream),
        ];
        for (decision, throttled, expected) in cases {
            assert_eq!(throttle(decision.clone(), throttled), expected, "{decision:?} {throttled}");
        }
        assert_eq!(Decision::Throttle.verdict(), None, "it writes retry/throttled first");
        // CIRCUIT_OPEN is in the hard floor: never an own retry, throttled or not.
        let open = failure("CIRCUIT_OPEN");
        let failed = Failed { failure: &open, provider: MOCK, official: None, chains: &chains };
        assert_eq!(on_failure(&s, &failed), Decision::Decline(Declined::HardFloor));
    }

    #[test]
    fn opt_in_and_other_codes_are_retried_only_when_listed() {
        let defaults = settings(json!({"jitterRatio": 0}));
        let opted = settings(json!({"jitterRatio": 0, "retryableCodes":
            ["QUOTA", "ACCOUNT_QUOTA", "INVALID_REQUEST", "UNKNOWN", "HTTP_418"]}));
        let chains = RetryChains::default();
        for code in ["QUOTA", "ACCOUNT_QUOTA", "INVALID_REQUEST", "UNKNOWN", "HTTP_418"] {
            let f = failure(code);
            let failed = Failed { failure: &f, provider: MOCK, official: None, chains: &chains };
            assert_eq!(on_failure(&defaults, &failed), Decision::Decline(Declined::NotListed));
            assert_eq!(on_failure(&opted, &failed), Decision::AskDownstream, "{code}");
            let got = after_downstream(&opted, &failed, DownstreamAnswer::Stop, None, || 0.0);
            assert!(matches!(got, Decision::Schedule(Schedule { retry: 1, .. })), "{code}");
        }
        // Codes are exact: a listed SERVER does not cover "server".
        let f = failure("server");
        let failed = Failed { failure: &f, provider: MOCK, official: None, chains: &chains };
        assert_eq!(on_failure(&defaults, &failed), Decision::Decline(Declined::NotListed));
    }

    #[test]
    fn the_checks_run_in_order() {
        let chains =
            chains_with(RetryChains::default(), MOCK, &settings(json!({})).policy_key(), 3);
        // (settings patch, code) → why it is declined
        let cases = [
            (json!({"enabled": false}), "SERVER", Declined::Disabled),
            (json!({"enabled": false, "extraRetries": 0}), "AUTH", Declined::Disabled),
            (json!({"extraRetries": 0}), "SERVER", Declined::NoExtraRetries),
            (json!({"extraRetries": 0}), "AUTH", Declined::NoExtraRetries),
            (json!({}), "AUTH", Declined::HardFloor),
            (json!({}), "QUOTA", Declined::NotListed),
            (json!({}), "SERVER", Declined::BudgetSpent { retries: 3, extra_retries: 3 }),
        ];
        for (patch, code, declined) in cases {
            let s = settings(patch.clone());
            let f = failure(code);
            let failed = Failed { failure: &f, provider: MOCK, official: None, chains: &chains };
            assert_eq!(
                on_failure(&s, &failed),
                Decision::Decline(declined.clone()),
                "{patch} {code}"
            );
            let got = after_downstream(&s, &failed, DownstreamAnswer::Stop, None, || 0.5);
            assert_eq!(got, Decision::Decline(declined), "{patch} {code}");
            assert_eq!(got.verdict(), Some(Verdict::Next));
        }
        // The budget is per chain: another provider, or changed settings (a new key), start fresh.
        let f = failure("SERVER");
        let other = Failed { failure: &f, provider: "other", official: None, chains: &chains };
        assert_eq!(on_failure(&settings(json!({})), &other), Decision::AskDownstream);
        let changed = Failed { failure: &f, provider: MOCK, official: None, chains: &chains };
        assert_eq!(
            on_failure(&settings(json!({"extraRetries": 4})), &changed),
            Decision::AskDownstream
        );
    }

    #[test]
    fn downstream_speaks_first_then_cancellation_then_the_checks() {
        let s = settings(json!({"jitterRatio": 0}));
        let chains = RetryChains::default();
        let f = failure("SERVER");
        let auth = failure("AUTH");
        let failed = Failed { failure: &f, provider: MOCK, official: None, chains: &chains };
        let floor = Failed { failure: &auth, ..failed };
        use DownstreamAnswer::{Crashed, Retry, Stop};
        // (failed, downstream, gone) → decision, verdict
        let cases = [
            (failed, Retry, None, Decision::Downstream(Retry), Some(Verdict::Next)),
            (
                failed,
                Retry,
                Some(Gone::Cancelled),
                Decision::Downstream(Retry),
                Some(Verdict::Next),
            ),
            (floor, Retry, None, Decision::Downstream(Retry), Some(Verdict::Next)),
            (failed, Crashed, None, Decision::Downstream(Crashed), Some(Verdict::Next)),
            (
                failed,
                Stop,
                Some(Gone::Cancelled),
                Decision::Abandon(Gone::Cancelled),
                Some(Verdict::Stop),
            ),
            (
                failed,
                Stop,
                Some(Gone::Disposed),
                Decision::Abandon(Gone::Disposed),
                Some(Verdict::Stop),
            ),
            (
                floor,
                Stop,
                Some(Gone::Disposed),
                Decision::Abandon(Gone::Disposed),
                Some(Verdict::Stop),
            ),
            (floor, Stop, None, Decision::Decline(Declined::HardFloor), Some(Verdict::Next)),
        ];
        for (failed, downstream, gone, expected, verdict) in cases {
            let (got, drawn) = sampled(0.5, |r| after_downstream(&s, &failed, downstream, gone, r));
            assert_eq!(got, expected, "{downstream:?} {gone:?}");
            assert_eq!(got.verdict(), verdict);
            assert_eq!(drawn, 0, "no sample without a backoff");
        }
        let (got, drawn) = sampled(0.5, |r| after_downstream(&s, &failed, Stop, None, r));
        assert_eq!(got.verdict(), None, "a schedule is work, not an answer");
        assert_eq!(drawn, 1);
        assert_eq!(Decision::AskDownstream.verdict(), None);
    }

    #[test]
    fn the_delay_rules() {
        use DelaySource::{OfficialCurve, OwnCurve, Provider};
        let default_official = official(2);
        let jittery_official = RetryPolicy::Normal {
            max_retries: 2,
            retryable_codes: RetryableCodes::default(),
            backoff: Backoff::new(500.0, 10000.0, 0.1).unwrap(),
        };
        let officials = |policy: &RetryPolicy, k| {
            chains_with(RetryChains::default(), MOCK, &policy.policy_key(), k)
        };
        let none = RetryChains::default();
        let two = officials(&default_official, 2);
        let two_jittery = officials(&jittery_official, 2);
        // A chain under another policy's key does not count as the official one.
        let stranger = officials(&official(7), 4);
        // (settings patch, official, chains, failure, r) → (delay, source, samples)
        type Case<'a> = (
            Value,
            Option<&'a RetryPolicy>,
            &'a RetryChains,
            Failure,
            f64,
            (f64, DelaySource, usize),
        );
        let cases: Vec<Case> = vec![
            // A provider delay wins, verbatim under the cap, clamped over it; no sample.
            (
                json!({}),
                Some(&default_official),
                &two,
                after("RATE_LIMIT", 2500.0),
                0.5,
                (2500.0, Provider { requested_ms: 2500.0 }, 0),
            ),
            (
                json!({}),
                None,
                &none,
                after("RATE_LIMIT", 90000.0),
                0.5,
                (60000.0, Provider { requested_ms: 90000.0 }, 0),
            ),
            (
                json!({"maxDelayMs": 0}),
                None,
                &none,
                after("RATE_LIMIT", 5.0),
                0.5,
                (0.0, Provider { requested_ms: 5.0 }, 0),
            ),
            (
                json!({"maxDelayMs": 60000}),
                None,
                &none,
                after("RATE_LIMIT", 60000.0),
                0.5,
                (60000.0, Provider { requested_ms: 60000.0 }, 0),
            ),
            // The own curve with its jitter: 1000 · (1 − 0.25 + 2 · 0.25 · r).
            (
                json!({"jitterRatio": 0.25}),
                None,
                &none,
                failure("SERVER"),
                1.0,
                (1250.0, OwnCurve, 1),
            ),
            (
                json!({"jitterRatio": 0.25}),
                None,
                &none,
                failure("SERVER"),
                0.0,
                (750.0, OwnCurve, 1),
            ),
            // …also when the official chain made no retry, or only under another policy's key.
            (
                json!({"jitterRatio": 0.25}),
                Some(&default_official),
                &none,
                failure("SERVER"),
                0.0,
                (750.0, OwnCurve, 1),
            ),
            (
                json!({"jitterRatio": 0.25}),
                Some(&default_official),
                &stranger,
                failure("SERVER"),
                0.0,
                (750.0, OwnCurve, 1),
            ),
            // The own curve's edges: initialDelayMs 0 waits 0; above maxDelayMs waits the cap.
            (json!({"initialDelayMs": 0}), None, &none, failure("SERVER"), 1.0, (0.0, OwnCurve, 1)),
            (
                json!({"initialDelayMs": 9000, "maxDelayMs": 5000, "jitterRatio": 0}),
                None,
                &none,
                failure("SERVER"),
                0.5,
                (5000.0, OwnCurve, 1),
            ),
            // The official curve continues with the official jitter, not the own one.
            (
                json!({}),
                Some(&default_official),
                &two,
                failure("RATE_LIMIT"),
                1.0,
                (2000.0, OfficialCurve { official_retries: 2 }, 1),
            ),
            (
                json!({}),
                Some(&jittery_official),
                &two_jittery,
                failure("RATE_LIMIT"),
                1.0,
                (2200.0, OfficialCurve { official_retries: 2 }, 1),
            ),
            // …capped by the lower of the two maxima.
            (
                json!({"maxDelayMs": 1500}),
                Some(&default_official),
                &two,
                failure("RATE_LIMIT"),
                0.5,
                (1500.0, OfficialCurve { official_retries: 2 }, 1),
            ),
        ];
        for (patch, official, chains, failure, r, (delay_ms, source, samples)) in cases {
            let s = settings(patch.clone());
            let failed = Failed { failure: &failure, provider: MOCK, official, chains };
            let (got, drawn) =
                sampled(r, |r| after_downstream(&s, &failed, DownstreamAnswer::Stop, None, r));
            let Decision::Schedule(schedule) = got else { panic!("{patch} {failure:?}: {got:?}") };
            assert_eq!(
                (schedule.delay_ms, schedule.source),
                (delay_ms, source),
                "{patch} {failure:?}"
            );
            assert_eq!(drawn, samples, "{patch} {failure:?}");
        }
    }

    #[test]
    fn an_own_retry_continues_the_own_chain_and_writes_a_normal_llm_retry() {
        let s =
            settings(json!({"extraRetries": 2, "jitterRatio": 0, "retryableCodes": ["SERVER"]}));
        let key = r#"["auto-retry",2,["SERVER"],1000,60000,0]"#;
        assert_eq!(s.policy_key(), key);
        let f = failure("SERVER");
        // The own chain made one retry already (the projection holds it).
        let chains = chains_with(RetryChains::default(), MOCK, key, 1);
        let failed = Failed { failure: &f, provider: MOCK, official: None, chains: &chains };
        let decision = after_downstream(&s, &failed, DownstreamAnswer::Stop, None, || 0.5);
        let expected = Schedule {
            retry: 2,
            max_retries: 2,
            policy_key: key.to_owned(),
            delay_ms: 2000.0,
            source: DelaySource::OwnCurve,
            chain: ChainId::Continue(format!("{key}-id")),
        };
        assert_eq!(decision, Decision::Schedule(expected.clone()));
        let event =
            expected.event(4, 7, MOCK, &f, |_| unreachable!("a continued chain keeps its id"));
        assert_eq!(
            event,
            LlmRetry {
                retry_id: format!("{key}-id"),
                turn: 4,
                step: 7,
                provider: MOCK.into(),
                plugin: "auto-retry".into(),
                mode: "normal".into(),
                policy_key: key.into(),
                retry: 2,
                max_retries: Some(2),
                delay_ms: 2000.0,
                failure: f.clone(),
            }
        );
        let first = Schedule { retry: 1, chain: ChainId::New, ..event_schedule(key) };
        assert_eq!(first.event(1, 1, MOCK, &f, |_| "fresh".into()).retry_id, "fresh");
    }

    fn event_schedule(key: &str) -> Schedule {
        Schedule {
            retry: 1,
            max_retries: 2,
            policy_key: key.to_owned(),
            delay_ms: 1.0,
            source: DelaySource::OwnCurve,
            chain: ChainId::New,
        }
    }

    #[test]
    fn settings_changed_during_the_consultation_decide() {
        // Asked downstream under the defaults; switched off (or to zero) meanwhile.
        let before = settings(json!({}));
        let chains = RetryChains::default();
        let f = failure("SERVER");
        let failed = Failed { failure: &f, provider: MOCK, official: None, chains: &chains };
        assert_eq!(on_failure(&before, &failed), Decision::AskDownstream);
        for (patch, declined) in [
            (json!({"enabled": false}), Declined::Disabled),
            (json!({"extraRetries": 0}), Declined::NoExtraRetries),
            (json!({"retryableCodes": ["TIMEOUT"]}), Declined::NotListed),
        ] {
            let now = settings(patch);
            let got = after_downstream(&now, &failed, DownstreamAnswer::Stop, None, || 0.5);
            assert_eq!(got, Decision::Decline(declined));
        }
    }
}
