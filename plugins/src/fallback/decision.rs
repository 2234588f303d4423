//! What `fallback` does with a failure: the pure decision, in two steps around the downstream
//! consultation, and the cooldown table (see `docs/runtime-semantics.md`, "fallback").
//!
//! 1. [`on_failure`]: a code outside `codes` is declined (answer `Next`). `CIRCUIT_OPEN` (the
//!    route's breaker is open: nothing on it can succeed before `openMs`), an eager code, or a
//!    provider delay over `maxWaitMs`, switches at once — without asking the rest of the chain,
//!    so nothing waits on a route that will not recover soon. Otherwise the rest of the chain
//!    speaks first.
//! 2. [`after_downstream`]: a downstream `Retry` is the answer (the failing route gets its
//!    retries first); a `Stop` switches (the chain gave up on the route: `exhausted`); a
//!    consultation that could not finish (`Crashed`: the runtime shuts down) switches nothing.
//!
//! Switching picks the first of `routes` that the step has not asked yet, that is not cooling
//! down and whose breaker is not open ([`pick`]); when none is left the failure goes on as if `fallback` were not there
//! (`Next`: the rest of the chain's answer).
//!
//! [`Cooldowns`] remembers, for the whole runtime, until when a route that failed with
//! `RATE_LIMIT` or `QUOTA` is skipped: `max(cooldownMs, provider delay)` from the failure.
//! It is generic over the instant type, so the shell uses tokio's clock (paused in tests) and
//! this module knows no clock at all.

use std::collections::HashMap;
use std::time::Duration;

use rein_runtime::failure::{self, Failure};
use rein_runtime::plugin::DownstreamAnswer;

use super::settings::FallbackSettings;

/// Why a switch happens now: the word `route/switched.reason` carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// An eager code (`eagerCodes`): switched without retrying the failing route.
    Eager,
    /// The provider asked for a wait longer than `maxWaitMs`.
    Delay,
    /// The rest of the chain gave up on the failing route (answered `Stop`).
    Exhausted,
}

impl Reason {
    /// `eager`, `delay` or `exhausted`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Eager => "eager",
            Reason::Delay => "delay",
            Reason::Exhausted => "exhausted",
        }
    }
}

/// A switch to make: append `route/switched` naming `to` and `reason`, then answer `Retry`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Switch {
    /// The route the step's next attempt goes to.
    pub to: String,
    /// Why now.
    pub reason: Reason,
}

/// Why `fallback` does not switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Declined {
    /// `codes` does not list the code.
    NotListed,
    /// Every fallback route was asked in this step already, or is cooling down.
    NoRouteLeft,
    /// The rest of the chain retries the failing route.
    DownstreamRetries,
    /// The consultation of the rest of the chain could not finish.
    DownstreamCrashed,
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Consult the rest of the chain, then call [`after_downstream`].
    AskDownstream,
    /// No switch: answer `Next` (the rest of the chain's answer, asked or not).
    Decline(Declined),
    /// Switch the step to another route.
    Switch(Switch),
}

/// What the decision reads of a failure and its step.
#[derive(Debug, Clone, Copy)]
pub struct Failed<'a> {
    /// What went wrong.
    pub failure: &'a Failure,
    /// The routes the step has asked (the failing one included).
    pub used: &'a [String],
    /// The routes cooling down now.
    pub cooling: &'a [String],
    /// The routes whose circuit breaker is open (the payload's health report).
    pub open: &'a [String],
}

/// Whether `fallback` looks at a failure with `code` at all: `CIRCUIT_OPEN` always (it needs no
/// listing), any other code when `codes` lists it.
pub fn considers(settings: &FallbackSettings, code: &str) -> bool {
    code == failure::CIRCUIT_OPEN || settings.lists(code)
}

/// The first decision, before anything is consulted.
pub fn on_failure(settings: &FallbackSettings, failed: &Failed<'_>) -> Decision {
    let code = failed.failure.code();
    if !considers(settings, code) {
        return Decision::Decline(Declined::NotListed);
    }
    let reason = if code == failure::CIRCUIT_OPEN || settings.is_eager(code) {
        Reason::Eager
    } else if failed
        .failure
        .provider_retry_after_ms()
        .is_some_and(|delay| delay > f64::from(settings.max_wait_ms()))
    {
        Reason::Delay
    } else {
        return Decision::AskDownstream;
    };
    switch(settings, failed, reason)
}

/// The decision once the rest of the chain answered `answer`, with the settings in force now.
pub fn after_downstream(
    settings: &FallbackSettings,
    failed: &Failed<'_>,
    answer: DownstreamAnswer,
) -> Decision {
    match answer {
        DownstreamAnswer::Retry => Decision::Decline(Declined::DownstreamRetries),
        DownstreamAnswer::Crashed => Decision::Decline(Declined::DownstreamCrashed),
        // A patch during the consultation may have taken the code out of `codes`.
        DownstreamAnswer::Stop if !settings.lists(failed.failure.code()) => {
            Decision::Decline(Declined::NotListed)
        }
        DownstreamAnswer::Stop => switch(settings, failed, Reason::Exhausted),
    }
}

fn switch(settings: &FallbackSettings, failed: &Failed<'_>, reason: Reason) -> Decision {
    match pick(settings.routes(), failed.used, failed.cooling, failed.open) {
        Some(to) => Decision::Switch(Switch { to: to.to_owned(), reason }),
        None => Decision::Decline(Declined::NoRouteLeft),
    }
}

/// The first of `routes` neither `used` in the step, nor `cooling`, nor `open`.
pub fn pick<'a>(
    routes: &'a [String],
    used: &[String],
    cooling: &[String],
    open: &[String],
) -> Option<&'a str> {
    routes
        .iter()
        .find(|r| !used.contains(r) && !cooling.contains(r) && !open.contains(r))
        .map(String::as_str)
}

/// How long a failure cools its route down: `max(cooldownMs, provider delay)` for `RATE_LIMIT`
/// and `QUOTA`; nothing for other codes (and for a `cooldownMs` of 0 without a provider delay).
pub fn cooldown(settings: &FallbackSettings, failure: &Failure) -> Option<Duration> {
    if ![failure::RATE_LIMIT, failure::QUOTA].contains(&failure.code()) {
        return None;
    }
    let own = f64::from(settings.cooldown_ms());
    let ms = failure.provider_retry_after_ms().map_or(own, |delay| delay.max(own));
    // Bounded to a timer's range, so the conversion cannot fail.
    let ms = ms.clamp(0.0, rein_runtime::retry_policy::MAX_DELAY_MS);
    (ms > 0.0).then(|| Duration::from_secs_f64(ms / 1000.0))
}

/// Until when each route is cooling down, across every session of a runtime.
#[derive(Debug, Clone, Default)]
pub struct Cooldowns<I> {
    until: HashMap<String, I>,
}

impl<I: Copy + Ord> Cooldowns<I> {
    /// No route is cooling down.
    pub fn new() -> Self {
        Self { until: HashMap::new() }
    }

    /// `route` cools down until `until` (a later deadline already set is kept).
    pub fn cool(&mut self, route: &str, until: I) {
        match self.until.get_mut(route) {
            Some(deadline) => *deadline = (*deadline).max(until),
            None => {
                self.until.insert(route.to_owned(), until);
            }
        }
    }

    /// The routes cooling down at `now`, sorted; the deadlines that passed are forgotten.
    pub fn cooling(&mut self, now: I) -> Vec<String> {
        self.until.retain(|_, until| *until > now);
        let mut routes: Vec<String> = self.until.keys().cloned().collect();
        routes.sort_unstable();
        routes
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn settings(extra: serde_json::Value) -> FallbackSettings {
        let mut value = json!({"routes": ["b1", "b2"]});
        if let (Some(base), Some(extra)) = (value.as_object_mut(), extra.as_object()) {
            base.extend(extra.clone());
        }
        FallbackSettings::from_file(&value).unwrap()
    }

    fn failure(code: &str, retry_after_ms: Option<f64>) -> Failure {
        let failure = Failure::new(code, "it failed").unwrap();
        match retry_after_ms {
            Some(ms) => failure.with_retry_after_ms(ms).unwrap(),
            None => failure,
        }
    }

    fn names(routes: &[&str]) -> Vec<String> {
        routes.iter().map(|r| (*r).to_owned()).collect()
    }

    fn to(route: &str, reason: Reason) -> Decision {
        Decision::Switch(Switch { to: route.to_owned(), reason })
    }

    #[test]
    fn the_first_decision() {
        let defaults = settings(json!({}));
        let main = names(&["main"]);
        /// A case: its name, the failure, the routes used, the routes cooling, the decision.
        type Case = (&'static str, Failure, Vec<String>, Vec<String>, Decision);
        let cases: Vec<Case> = vec![
            (
                "an eager code switches at once",
                failure("QUOTA", None),
                main.clone(),
                vec![],
                to("b1", Reason::Eager),
            ),
            (
                "a listed code asks downstream first",
                failure("RATE_LIMIT", None),
                main.clone(),
                vec![],
                Decision::AskDownstream,
            ),
            (
                "a provider delay within maxWaitMs asks downstream",
                failure("RATE_LIMIT", Some(30_000.0)),
                main.clone(),
                vec![],
                Decision::AskDownstream,
            ),
            (
                "a provider delay over maxWaitMs switches at once",
                failure("RATE_LIMIT", Some(30_001.0)),
                main.clone(),
                vec![],
                to("b1", Reason::Delay),
            ),
            (
                "eager wins over delay",
                failure("QUOTA", Some(90_000.0)),
                main.clone(),
                vec![],
                to("b1", Reason::Eager),
            ),
            (
                "a code outside codes",
                failure("INVALID_REQUEST", Some(90_000.0)),
                main.clone(),
                vec![],
                Decision::Decline(Declined::NotListed),
            ),
            (
                "the hard floor",
                failure("AUTH", None),
                main.clone(),
                vec![],
                Decision::Decline(Declined::NotListed),
            ),
            (
                "a route asked in this step is skipped",
                failure("QUOTA", None),
                names(&["main", "b1"]),
                vec![],
                to("b2", Reason::Eager),
            ),
            (
                "a cooling route is skipped",
                failure("QUOTA", None),
                main.clone(),
                names(&["b1"]),
                to("b2", Reason::Eager),
            ),
            (
                "none left: the rest of the chain decides",
                failure("QUOTA", None),
                names(&["main", "b1"]),
                names(&["b2"]),
                Decision::Decline(Declined::NoRouteLeft),
            ),
        ];
        for (case, failure, used, cooling, expected) in cases {
            let failed = Failed { failure: &failure, used: &used, cooling: &cooling, open: &[] };
            assert_eq!(on_failure(&defaults, &failed), expected, "{case}");
        }
    }

    #[test]
    fn an_open_breaker_switches_at_once_and_open_routes_are_skipped() {
        let only_quota = settings(json!({"codes": ["QUOTA"], "eagerCodes": []}));
        let main = names(&["main"]);
        /// A case: its name, the failure, the routes open, the decision.
        type Case = (&'static str, Failure, Vec<String>, Decision);
        let cases: Vec<Case> = vec![
            (
                "CIRCUIT_OPEN switches at once, listed or not",
                failure("CIRCUIT_OPEN", None),
                vec![],
                to("b1", Reason::Eager),
            ),
            (
                "an open route is skipped",
                failure("CIRCUIT_OPEN", None),
                names(&["b1"]),
                to("b2", Reason::Eager),
            ),
            (
                "every fallback open: the rest of the chain decides",
                failure("CIRCUIT_OPEN", None),
                names(&["b1", "b2"]),
                Decision::Decline(Declined::NoRouteLeft),
            ),
            (
                "an open route is skipped for a listed code too",
                failure("QUOTA", Some(90_000.0)),
                names(&["b1"]),
                to("b2", Reason::Delay),
            ),
            (
                "a code outside codes is still declined",
                failure("SERVER", None),
                vec![],
                Decision::Decline(Declined::NotListed),
            ),
        ];
        for (case, failure, open, expected) in cases {
            let failed = Failed { failure: &failure, used: &main, cooling: &[], open: &open };
            assert_eq!(on_failure(&only_quota, &failed), expected, "{case}");
        }
        assert!(considers(&only_quota, "CIRCUIT_OPEN"));
        assert!(!considers(&only_quota, "SERVER"));
        let failed = Failed {
            failure: &failure("QUOTA", None),
            used: &main,
            cooling: &[],
            open: &names(&["b1"]),
        };
        assert_eq!(
            after_downstream(&only_quota, &failed, DownstreamAnswer::Stop),
            to("b2", Reason::Exhausted),
            "after the chain gave up, too"
        );
    }

    #[test]
    fn after_the_rest_of_the_chain_answered() {
        let defaults = settings(json!({}));
        let server = failure("SERVER", None);
        let used = names(&["main"]);
        let none = Vec::new();
        let failed = Failed { failure: &server, used: &used, cooling: &none, open: &none };
        let cases = [
            (&defaults, DownstreamAnswer::Retry, Decision::Decline(Declined::DownstreamRetries)),
            (&defaults, DownstreamAnswer::Crashed, Decision::Decline(Declined::DownstreamCrashed)),
            (&defaults, DownstreamAnswer::Stop, to("b1", Reason::Exhausted)),
        ];
        for (settings, answer, expected) in cases {
            assert_eq!(after_downstream(settings, &failed, answer), expected, "{answer:?}");
        }
        // A patch during the consultation took SERVER out of codes.
        let narrowed = settings(json!({"codes": ["QUOTA"]}));
        assert_eq!(
            after_downstream(&narrowed, &failed, DownstreamAnswer::Stop),
            Decision::Decline(Declined::NotListed)
        );
        // Both fallbacks used: the chain's Stop stands.
        let all = names(&["main", "b1", "b2"]);
        let failed = Failed { failure: &server, used: &all, cooling: &none, open: &none };
        assert_eq!(
            after_downstream(&defaults, &failed, DownstreamAnswer::Stop),
            Decision::Decline(Declined::NoRouteLeft)
        );
    }

    #[test]
    fn what_cools_a_route_down_and_for_how_long() {
        let defaults = settings(json!({}));
        let none = settings(json!({"cooldownMs": 0}));
        let secs = |s: u64| Some(Duration::from_secs(s));
        let cases = [
            (&defaults, failure("RATE_LIMIT", None), secs(60)),
            (&defaults, failure("QUOTA", None), secs(60)),
            (&defaults, failure("RATE_LIMIT", Some(90_000.0)), secs(90)),
            (&defaults, failure("RATE_LIMIT", Some(5_000.0)), secs(60)),
            (&defaults, failure("SERVER", Some(90_000.0)), None),
            (&none, failure("QUOTA", None), None),
            (&none, failure("QUOTA", Some(2_000.0)), secs(2)),
        ];
        for (settings, failure, expected) in cases {
            assert_eq!(cooldown(settings, &failure), expected, "{failure:?}");
        }
    }

    #[test]
    fn a_route_cools_down_until_its_latest_deadline() {
        let mut table: Cooldowns<u64> = Cooldowns::new();
        table.cool("a", 100);
        table.cool("b", 50);
        table.cool("a", 80);
        assert_eq!(table.cooling(0), ["a", "b"]);
        assert_eq!(table.cooling(50), ["a"], "a deadline reached is over");
        assert_eq!(table.cooling(99), ["a"], "the later deadline was kept");
        assert_eq!(table.cooling(100), Vec::<String>::new());
        assert!(table.until.is_empty(), "passed deadlines are forgotten");
    }

    #[test]
    fn the_reasons_are_the_words_of_the_log() {
        let words: Vec<&str> =
            [Reason::Eager, Reason::Delay, Reason::Exhausted].iter().map(|r| r.as_str()).collect();
        assert_eq!(words, ["eager", "delay", "exhausted"]);
    }
}
