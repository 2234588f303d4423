//! `llm/retry` and `llm/retry-started` (`docs/runtime-semantics.md`, "Retry chains" and "Schedule,
//! wait, start").
//!
//! A retry is scheduled (`llm/retry`) for the failed current attempt, then started
//! (`llm/retry-started`) once its delay has elapsed. Retries are counted per chain — (turn, step,
//! provider, policyKey) — from the log alone, so a checker can replay exactly the budget the
//! plugins saw.
//!
//! # Why `retry-after-request-error` also wants the failure unconsumed
//!
//! The contract asks for "a `request/error` of the current attempt". Once an `llm/retry-started`
//! has answered that error, the next thing is a new attempt; a second `llm/retry` for the same
//! failure would mean two plugins both recovered one failure. Before the start, two `llm/retry` for
//! one failure are legal: an auto-retry wait aborted by `enabled = false` answers `Stop`, and an
//! always-mode `llm-retry` then schedules its own (`docs/runtime-semantics.md`, "Always mode").

use rein_event::event::{Envelope, Event, LlmRetry, LlmRetryStarted};
use rein_event::failure::{CIRCUIT_OPEN, HARD_FLOOR};

use crate::catalogue::{MAX_DELAY_MS, MAX_SAFE_INTEGER, Rule};
use crate::state::{ChainKey, State};
use crate::violation::Violation;

/// The plugin name `auto-retry` writes in `llm/retry.plugin`.
const AUTO_RETRY: &str = "auto-retry";

/// Checks `event` against the retry rules.
pub(super) fn check(state: &State, event: &Envelope, out: &mut Vec<Violation>) {
    match &event.event {
        Event::LlmRetry(r) => {
            fields(event, r, out);
            placement(state, event, r, out);
            chain(state, event, r, out);
            budget(event, r, out);
            if r.plugin == AUTO_RETRY && HARD_FLOOR.contains(&r.failure.code()) {
                out.push(Violation::new(
                    event,
                    Rule::AutoRetryHardFloor,
                    format!(
                        "auto-retry retries {}, a hard-floor code it must never retry",
                        r.failure.code()
                    ),
                ));
            }
        }
        Event::LlmRetryStarted(s) => started(state, event, s, out),
        _ => {}
    }
    if let Event::LlmRetry(r) = &event.event
        && r.failure.code() == CIRCUIT_OPEN
    {
        out.push(Violation::new(
            event,
            Rule::CircuitOpenNeverRetried,
            format!(
                "{} retries CIRCUIT_OPEN on route {:?}, whose breaker is open",
                r.plugin, r.provider
            ),
        ));
    }
}

fn fields(event: &Envelope, r: &LlmRetry, out: &mut Vec<Violation>) {
    let empty: Vec<&str> = [
        ("retryId", &r.retry_id),
        ("provider", &r.provider),
        ("policyKey", &r.policy_key),
        ("plugin", &r.plugin),
    ]
    .into_iter()
    .filter(|(_, value)| value.is_empty())
    .map(|(name, _)| name)
    .collect();
    if !empty.is_empty() {
        out.push(Violation::new(
            event,
            Rule::RetryFieldsNonEmpty,
            format!("{} must be non-empty", empty.join(", ")),
        ));
    }
    if !(r.delay_ms.is_finite() && (0.0..=MAX_DELAY_MS).contains(&r.delay_ms)) {
        out.push(Violation::new(
            event,
            Rule::RetryDelayValid,
            format!("delayMs {} must be finite and within [0, 2147483647]", r.delay_ms),
        ));
    }
}

fn budget(event: &Envelope, r: &LlmRetry, out: &mut Vec<Violation>) {
    if !(1..=MAX_SAFE_INTEGER).contains(&r.retry) {
        out.push(Violation::new(
            event,
            Rule::RetryNumberValid,
            format!("retry {} must be a safe integer >= 1", r.retry),
        ));
    }
    match (r.mode.as_str(), r.max_retries) {
        ("normal", None) => out.push(Violation::new(
            event,
            Rule::RetryMaxRetriesValid,
            "a normal-mode retry must carry maxRetries",
        )),
        ("normal", Some(max)) if !(1..=MAX_SAFE_INTEGER).contains(&max) => {
            out.push(Violation::new(
                event,
                Rule::RetryMaxRetriesValid,
                format!("maxRetries {max} must be a safe integer >= 1"),
            ));
        }
        ("normal", Some(max)) if r.retry > max => out.push(Violation::new(
            event,
            Rule::RetryWithinMaxRetries,
            format!("retry {} exceeds maxRetries {max}", r.retry),
        )),
        ("normal", Some(_)) => {}
        ("always", Some(max)) => out.push(Violation::new(
            event,
            Rule::RetryAlwaysNoMaxRetries,
            format!("an always-mode retry has no budget, but carries maxRetries {max}"),
        )),
        ("always", None) => {}
        (mode, _) => out.push(Violation::new(
            event,
            Rule::RetryModeKnown,
            format!("mode {mode:?} must be \"normal\" or \"always\""),
        )),
    }
}

/// Inside the open step, for the provider of its latest attempt, after that attempt failed.
fn placement(state: &State, event: &Envelope, r: &LlmRetry, out: &mut Vec<Violation>) {
    let Some(open) = state.open_step.as_ref().filter(|s| s.is(r.turn, r.step)) else {
        let now = state.open_step_now();
        out.push(Violation::new(
            event,
            Rule::RetryInOpenStep,
            format!("retry of turn {} step {}, but {now}", r.turn, r.step),
        ));
        return;
    };
    let Some(attempt) = &open.attempt else {
        out.push(Violation::new(
            event,
            Rule::RetryAfterRequestError,
            format!("turn {} step {} has no attempt to retry (no request/start)", r.turn, r.step),
        ));
        return;
    };
    if attempt.provider != r.provider {
        out.push(Violation::new(
            event,
            Rule::RetryProviderMatchesRequest,
            format!(
                "provider {:?} must be {:?}, the provider of attempt {}'s request/start",
                r.provider, attempt.provider, attempt.number
            ),
        ));
    }
    match (attempt.error, attempt.retry_started) {
        (None, _) => out.push(Violation::new(
            event,
            Rule::RetryAfterRequestError,
            format!("attempt {} has no request/error to retry", attempt.number),
        )),
        (Some(error), Some(started)) => out.push(Violation::new(
            event,
            Rule::RetryAfterRequestError,
            format!(
                "the failure of attempt {} (request/error seq {error}) was already retried \
                 (llm/retry-started seq {started}); a new attempt must come first",
                attempt.number
            ),
        )),
        (Some(_), None) => {}
    }
}

fn chain(state: &State, event: &Envelope, r: &LlmRetry, out: &mut Vec<Violation>) {
    let key = ChainKey::of(r);
    match state.chains.get(&key) {
        None => {
            if r.retry != 1 {
                out.push(Violation::new(
                    event,
                    Rule::RetryContinuesChain,
                    format!("retry {} must equal 1: chain {key} has no retry yet", r.retry),
                ));
            }
        }
        Some(chain) => {
            let expected = chain.retry.saturating_add(1);
            if r.retry != expected {
                out.push(Violation::new(
                    event,
                    Rule::RetryContinuesChain,
                    format!("retry {} must equal {expected} in chain {key}", r.retry),
                ));
            }
            if r.retry_id != chain.retry_id {
                out.push(Violation::new(
                    event,
                    Rule::RetryIdContinuesChain,
                    format!(
                        "retryId {:?} must be {:?}, the id of chain {key}",
                        r.retry_id, chain.retry_id
                    ),
                ));
            }
        }
    }
    if let Some(record) = state.retry_ids.get(&r.retry_id)
        && record.owner != key
    {
        out.push(Violation::new(
            event,
            Rule::RetryIdOwnedByOneChain,
            format!(
                "retryId {:?} already belongs to chain {} of turn {} step {} (llm/retry seq {}), \
                     not to chain {key}",
                r.retry_id, record.owner, record.owner.turn, record.owner.step, record.first_seq
            ),
        ));
    }
}

fn started(state: &State, event: &Envelope, s: &LlmRetryStarted, out: &mut Vec<Violation>) {
    let Some(record) = state.retry_ids.get(&s.retry_id) else {
        out.push(Violation::new(
            event,
            Rule::RetryStartedPairsRetry,
            format!("no llm/retry has retryId {:?}", s.retry_id),
        ));
        return;
    };
    let scheduled = &record.latest;
    if scheduled.retry != s.retry {
        out.push(Violation::new(
            event,
            Rule::RetryStartedPairsRetry,
            format!(
                "retry {} must be {}, the retry of the latest llm/retry with retryId {:?} (seq {})",
                s.retry, scheduled.retry, s.retry_id, scheduled.seq
            ),
        ));
        return;
    }
    if let Some(first) = scheduled.started {
        out.push(Violation::new(
            event,
            Rule::RetryStartedOnce,
            format!("retry {} of {:?} already started at seq {first}", s.retry, s.retry_id),
        ));
    }
    if (s.turn, s.step) != (scheduled.turn, scheduled.step) {
        out.push(Violation::new(
            event,
            Rule::RetryStartedSameStep,
            format!(
                "names turn {} step {}, but its llm/retry (seq {}) is of turn {} step {}",
                s.turn, s.step, scheduled.seq, scheduled.turn, scheduled.step
            ),
        ));
    } else {
        match &state.open_step {
            Some(open) if open.is(s.turn, s.step) => {
                let current = open.attempt.as_ref().map(|a| a.number);
                if scheduled.attempt.is_some() && current != scheduled.attempt {
                    out.push(Violation::new(
                        event,
                        Rule::RetryStartedBeforeNextAttempt,
                        format!(
                            "the retry of attempt {} starts after attempt {} began",
                            scheduled.attempt.unwrap_or_default(),
                            current.unwrap_or_default()
                        ),
                    ));
                }
            }
            _ => out.push(Violation::new(
                event,
                Rule::RetryStartedSameStep,
                format!("turn {} step {} is no longer open", s.turn, s.step),
            )),
        }
    }
    if event.time < scheduled.due {
        out.push(Violation::new(
            event,
            Rule::RetryStartedAfterDelay,
            format!(
                "time {} is before {} = floor({} + {}), its llm/retry's time + delayMs (seq {})",
                event.time,
                scheduled.due,
                scheduled.time,
                rein_event::json_number::format(scheduled.delay_ms),
                scheduled.seq
            ),
        ));
    }
}
