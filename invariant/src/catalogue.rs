//! The catalogue of the session-log contract's rules: [`Rule`], its [`Family`], and the limits
//! the rules check against. A leaf: it names no other module of the crate, so the fold
//! (`state`), the violations and the rule code (`rules`) all build on it. Its items are public
//! as `rein_invariant::rules::…`.

use std::fmt;

/// The largest integer a JSON reader using doubles holds exactly (2^53 − 1): a "safe integer".
pub const MAX_SAFE_INTEGER: u64 = 9_007_199_254_740_991;

/// The largest delay a retry may schedule (`delayMs` in [0, 2147483647]: the longest timer).
pub const MAX_DELAY_MS: f64 = 2_147_483_647.0;

/// A family of rules (the file its code lives in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Family {
    /// The raw log: lines that are JSON and events.
    Log,
    /// Sessions, turns, steps and attempts: how events nest and are numbered.
    Sessions,
    /// Provider requests: errors and chunks of the current attempt.
    Requests,
    /// `llm/retry` and `llm/retry-started`.
    Retries,
    /// `route/switched` and the attempt after it.
    Routes,
    /// `turn/resumed`: a turn a crash left open, continued.
    Resumes,
    /// `retry/throttled`: a retry a route's spent budget declined.
    Throttles,
}

impl Family {
    /// The family's name.
    pub fn name(self) -> &'static str {
        match self {
            Family::Log => "log",
            Family::Sessions => "sessions",
            Family::Requests => "requests",
            Family::Retries => "retries",
            Family::Routes => "routes",
            Family::Resumes => "resumes",
            Family::Throttles => "throttles",
        }
    }
}

macro_rules! rules {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal, $family:ident, $summary:literal; )*) => {
        /// One rule of the session-log contract. See [`Rule::ALL`] for the list and
        /// [`Rule::summary`] for what each one demands.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Rule {
            $( $(#[$doc])* $variant, )*
        }

        impl Rule {
            /// Every rule, in catalogue order.
            pub const ALL: &'static [Rule] = &[ $( Rule::$variant, )* ];

            /// The stable kebab-case name.
            pub fn name(self) -> &'static str {
                match self { $( Rule::$variant => $name, )* }
            }

            /// The family (file) the rule belongs to.
            pub fn family(self) -> Family {
                match self { $( Rule::$variant => Family::$family, )* }
            }

            /// What the rule demands, in one sentence.
            pub fn summary(self) -> &'static str {
                match self { $( Rule::$variant => $summary, )* }
            }
        }
    };
}

rules! {
    /// A line that is not JSON, other than a torn last line.
    CorruptLine = "corrupt-line", Log,
        "every line of a log is a JSON object (a torn last line is a crash's trace, not a violation)";
    /// A JSON line that is not a valid event envelope.
    EventSchema = "event-schema", Log,
        "every line is an event: {seq, time, type, data} with the data its type defines";

    /// `seq` starts at 0 and is contiguous.
    SeqContiguous = "seq-contiguous", Sessions,
        "seq starts at 0 and increases by exactly 1 per event";
    /// `session/start` is the first event and only the first.
    SessionStartFirst = "session-start-first", Sessions,
        "session/start is the first event, and only the first";
    /// `session/start.format` is a format this checker knows.
    LogFormatKnown = "log-format-known", Sessions,
        "session/start.format is a log format this checker knows";
    /// Turns are numbered 1, 2, 3… in order.
    TurnNumberedInOrder = "turn-numbered-in-order", Sessions,
        "turns are numbered 1, 2, 3… in log order";
    /// A turn starts only when no turn is open.
    TurnsDoNotNest = "turns-do-not-nest", Sessions,
        "a turn/start comes only when no turn is open";
    /// `turn/end` closes the open turn: exactly one per `turn/start`.
    TurnEndMatchesTurn = "turn-end-matches-turn", Sessions,
        "a turn/end closes the open turn (exactly one turn/end per turn/start)";
    /// A finished log has no turn left open (checked only at the end of a finished log).
    TurnLeftOpen = "turn-left-open", Sessions,
        "a finished log has a turn/end for every turn/start";
    /// A step starts inside the open turn.
    StepInOpenTurn = "step-in-open-turn", Sessions,
        "a step/start names the open turn";
    /// Steps are numbered 1, 2, 3… within a turn.
    StepNumberedInOrder = "step-numbered-in-order", Sessions,
        "steps are numbered 1, 2, 3… within their turn";
    /// A step starts only when no step is open.
    StepsDoNotNest = "steps-do-not-nest", Sessions,
        "a step/start comes only when no step is open";
    /// `step/end` closes the open step.
    StepEndMatchesStep = "step-end-matches-step", Sessions,
        "a step/end closes the open step";
    /// A turn ends only after its open step ended.
    StepClosedBeforeTurnEnd = "step-closed-before-turn-end", Sessions,
        "a turn/end comes only when its step is closed (steps nest inside turns)";
    /// Every `request/start` is inside the open step.
    RequestInOpenStep = "request-in-open-step", Sessions,
        "every request/start names the open step";
    /// Attempts are numbered 1, 2, 3… within a step.
    AttemptNumberedInOrder = "attempt-numbered-in-order", Sessions,
        "attempts are numbered 1, 2, 3… within their step";
    /// Chunks, messages, tool calls and results and compactions belong to the open step.
    EventInOpenStep = "event-in-open-step", Sessions,
        "assistant/chunk, assistant/message, tool/call, tool/result and context/compacted name the open step";
    /// `agent/idle` comes only when no turn is running.
    IdleOutsideTurn = "idle-outside-turn", Sessions,
        "agent/idle comes only when no turn is open";

    /// `request/error` is for the current attempt of the open step.
    RequestErrorCurrentAttempt = "request-error-current-attempt", Requests,
        "a request/error names the current attempt (the latest request/start) of the open step";
    /// `request/error.provider` is its `request/start`'s provider.
    RequestErrorProvider = "request-error-provider", Requests,
        "a request/error's provider is the provider of its request/start";
    /// One `request/error` per attempt.
    RequestErrorOnce = "request-error-once", Requests,
        "an attempt fails at most once";
    /// `assistant/chunk` is for the current attempt.
    ChunkCurrentAttempt = "chunk-current-attempt", Requests,
        "an assistant/chunk names the current attempt of the open step";

    /// `retryId`, `provider`, `policyKey` and `plugin` are non-empty.
    RetryFieldsNonEmpty = "retry-fields-non-empty", Retries,
        "llm/retry has a non-empty retryId, provider, policyKey and plugin";
    /// `failure` is a valid failure.
    RetryFailureValid = "retry-failure-valid", Retries,
        "llm/retry.failure is a valid failure (non-empty code and message; status, retry-after and request id valid when present)";
    /// `retry` is a safe integer ≥ 1.
    RetryNumberValid = "retry-number-valid", Retries,
        "llm/retry.retry is a safe integer >= 1";
    /// `mode` is `normal` or `always`.
    RetryModeKnown = "retry-mode-known", Retries,
        "llm/retry.mode is \"normal\" or \"always\"";
    /// Normal mode carries `maxRetries`, a safe integer ≥ 1.
    RetryMaxRetriesValid = "retry-max-retries-valid", Retries,
        "a normal-mode llm/retry has maxRetries, a safe integer >= 1";
    /// Normal mode: `retry ≤ maxRetries`.
    RetryWithinMaxRetries = "retry-within-max-retries", Retries,
        "a normal-mode llm/retry has retry <= maxRetries";
    /// Always mode carries no `maxRetries`.
    RetryAlwaysNoMaxRetries = "retry-always-no-max-retries", Retries,
        "an always-mode llm/retry has no maxRetries";
    /// `delayMs` is finite in [0, 2147483647].
    RetryDelayValid = "retry-delay-valid", Retries,
        "llm/retry.delayMs is finite and within [0, 2147483647]";
    /// `llm/retry` is inside the open turn and the open step.
    RetryInOpenStep = "retry-in-open-step", Retries,
        "an llm/retry names the open turn and the open step";
    /// `llm/retry.provider` is the provider of the step's latest `request/start`.
    RetryProviderMatchesRequest = "retry-provider-matches-request", Retries,
        "an llm/retry's provider is the provider of the step's latest request/start";
    /// `llm/retry` follows a `request/error` of the current attempt.
    RetryAfterRequestError = "retry-after-request-error", Retries,
        "an llm/retry follows a request/error of the current attempt that no llm/retry-started has consumed";
    /// `retry` is the previous retry of its chain + 1, or 1.
    RetryContinuesChain = "retry-continues-chain", Retries,
        "an llm/retry's retry is its chain's previous retry + 1, or 1 for a new chain";
    /// A chain keeps its `retryId`.
    RetryIdContinuesChain = "retry-id-continues-chain", Retries,
        "every llm/retry of a chain carries the retryId of the chain's first retry";
    /// A `retryId` belongs to one chain.
    RetryIdOwnedByOneChain = "retry-id-owned-by-one-chain", Retries,
        "a retryId is owned by exactly one chain (turn, step, provider, policyKey)";
    /// `auto-retry` never retries a hard-floor code.
    AutoRetryHardFloor = "auto-retry-hard-floor", Retries,
        "auto-retry never retries a hard-floor code (AUTH, NO_ADAPTER, CONTEXT_WINDOW_EXCEEDED, …)";
    /// No plugin retries `CIRCUIT_OPEN` on the same route.
    CircuitOpenNeverRetried = "circuit-open-never-retried", Retries,
        "no llm/retry retries a CIRCUIT_OPEN failure (its route's breaker is open; only a route switch recovers it)";
    /// `llm/retry-started` pairs the latest `llm/retry` with its `retryId` and `retry`.
    RetryStartedPairsRetry = "retry-started-pairs-retry", Retries,
        "an llm/retry-started has the retryId and retry of the latest llm/retry with that retryId";
    /// `llm/retry-started` is in the turn and step of its `llm/retry`, still open.
    RetryStartedSameStep = "retry-started-same-step", Retries,
        "an llm/retry-started names the turn and step of its llm/retry, and that step is still open";
    /// `llm/retry-started` comes before the next attempt of its step.
    RetryStartedBeforeNextAttempt = "retry-started-before-next-attempt", Retries,
        "an llm/retry-started comes while the attempt it retries is still the step's latest";
    /// `llm/retry-started` is not repeated.
    RetryStartedOnce = "retry-started-once", Retries,
        "a scheduled retry starts at most once";
    /// `llm/retry-started.time ≥ floor(llm/retry.time + delayMs)`.
    RetryStartedAfterDelay = "retry-started-after-delay", Retries,
        "an llm/retry-started's time is >= floor(its llm/retry's time + delayMs)";

    /// `from`, `to`, `code` and `reason` are non-empty.
    RouteSwitchedFieldsNonEmpty = "route-switched-fields-non-empty", Routes,
        "route/switched has a non-empty from, to, code and reason";
    /// `to` is not `from`.
    RouteSwitchedToAnotherRoute = "route-switched-to-another-route", Routes,
        "a route/switched's to is another route than its from";
    /// `route/switched` is inside the open turn and the open step.
    RouteSwitchedInOpenStep = "route-switched-in-open-step", Routes,
        "a route/switched names the open turn and the open step";
    /// `route/switched` follows a `request/error` of the current attempt.
    RouteSwitchedAfterRequestError = "route-switched-after-request-error", Routes,
        "a route/switched follows a request/error of the step's current attempt";
    /// `from` is the provider of the step's latest `request/start`.
    RouteSwitchedFromCurrentRoute = "route-switched-from-current-route", Routes,
        "a route/switched's from is the provider of the step's latest request/start";
    /// One switch per failed attempt.
    RouteSwitchedOncePerAttempt = "route-switched-once-per-attempt", Routes,
        "a failed attempt is switched away from at most once";
    /// The next `request/start` of the step names the switch's `to`.
    RequestFollowsRouteSwitch = "request-follows-route-switch", Routes,
        "the request/start after a route/switched in its step names the switch's to";

    /// `turn/resumed` is inside the open turn.
    TurnResumedInOpenTurn = "turn-resumed-in-open-turn", Resumes,
        "a turn/resumed names the open turn (a reopen continues the turn a crash left open)";
    /// `turn/resumed.step` is where the turn stands.
    TurnResumedNamesStep = "turn-resumed-names-step", Resumes,
        "a turn/resumed names the open step, or the last step its turn started when none is open";
    /// `turn/resumed.pending` is a known tag.
    TurnResumedPendingKnown = "turn-resumed-pending-known", Resumes,
        "turn/resumed.pending is retry-wait, attempt, waterfall, tool or loop";

    /// `provider`, `plugin` and `code` are non-empty.
    RetryThrottledFieldsNonEmpty = "retry-throttled-fields-non-empty", Throttles,
        "retry/throttled has a non-empty provider, plugin and code";
    /// `retry/throttled` is inside the open turn and the open step.
    RetryThrottledInOpenStep = "retry-throttled-in-open-step", Throttles,
        "a retry/throttled names the open turn and the open step";
    /// `retry/throttled` follows a `request/error` of the current attempt.
    RetryThrottledAfterRequestError = "retry-throttled-after-request-error", Throttles,
        "a retry/throttled follows a request/error of the step's current attempt";
    /// `provider` is the provider of the step's latest `request/start`.
    RetryThrottledProvider = "retry-throttled-provider", Throttles,
        "a retry/throttled's provider is the provider of the step's latest request/start";
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn names_are_unique_kebab_case() {
        let mut seen = HashSet::new();
        for rule in Rule::ALL {
            let name = rule.name();
            assert!(seen.insert(name), "duplicate rule name {name}");
            assert!(
                name.bytes().all(|b| b.is_ascii_lowercase() || b == b'-')
                    && !name.starts_with('-')
                    && !name.ends_with('-'),
                "{name} is not kebab-case"
            );
            assert!(!rule.summary().is_empty());
            assert_eq!(rule.to_string(), name);
        }
    }

    #[test]
    fn the_architecture_doc_lists_every_rule_as_the_code_does() {
        let doc = include_str!("../../docs/architecture.md");
        for rule in Rule::ALL {
            let row =
                format!("| `{}` | {} | {} |", rule.name(), rule.family().name(), rule.summary());
            assert!(doc.contains(&row), "docs/architecture.md lacks the row {row}");
        }
    }
}
