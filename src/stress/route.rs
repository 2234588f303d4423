//! What the run's route went through, folded from the logs: attempts, the requests they sent (an
//! attempt the breaker short-circuited with `CIRCUIT_OPEN` sends none), retries the route's
//! budget declined (`retry/throttled`), the turns that failed and the requests each cost — the
//! retry amplification an outage causes — and how long after an outage the route served every
//! attempt again.
//!
//! - [`RouteTally`]: the fold, log by log (pure).
//! - [`RouteSummary`]: what the run reports of its route (`route` in `--json`), the tally with
//!   the outage's window, the breaker's history and what the provider counted.
//!
//! # Retry amplification
//!
//! The requests the failed turns sent to the route, per failed turn: a failed turn retried to the
//! end of every budget sends 1 + llm-retry's + auto-retry's retries (5 at a run's settings); with
//! route health, a spent budget stops the retries and an open breaker the requests themselves.
//! Turns that completed or were cancelled are not counted: an outage is what failed turns
//! measure.
//!
//! # Back to full throughput
//!
//! After an outage the route serves every attempt again once its breaker has closed: the first
//! answer at or after the end of the outage and after the last attempt the breaker refused. Its
//! distance from the end of the outage is `recoveryMs` (with route health off, the first answer
//! after the outage: nothing holds requests back).

use serde::Serialize;
use serde_json::Value;

use crate::runtime::event::{Envelope, Event, TurnEndReason};
use crate::runtime::failure::CIRCUIT_OPEN;

/// The fold over the logs. See the module docs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RouteTally {
    /// When the outage ended (clock ms), if the run had one.
    outage_end: Option<u64>,
    /// Attempts (`request/start`).
    pub attempts: u64,
    /// Attempts the breaker refused (`request/error` `CIRCUIT_OPEN`).
    pub short_circuited: u64,
    /// Retries declined because the route's budget was spent (`retry/throttled`).
    pub throttled: u64,
    /// Turns that ended `error`.
    pub failed_turns: u64,
    /// The requests those turns sent (their attempts less the short-circuited ones).
    pub requests_of_failed_turns: u64,
    /// When the latest refusal was written.
    last_refused: Option<u64>,
    /// When the answers at or after the outage's end were written.
    answered_after: Vec<u64>,
}

impl RouteTally {
    /// A tally for a run whose outage ended at `outage_end` (clock ms; `None`: no outage).
    pub fn new(outage_end: Option<u64>) -> Self {
        Self { outage_end, ..Self::default() }
    }

    /// Folds one log in.
    pub fn add_log(&mut self, events: &[Envelope]) {
        // The open turn's requests.
        let mut requests = 0u64;
        for envelope in events {
            match &envelope.event {
                Event::TurnStart(_) => requests = 0,
                Event::RequestStart(_) => {
                    self.attempts += 1;
                    requests += 1;
                }
                Event::RequestError(error) if error.failure.code() == CIRCUIT_OPEN => {
                    self.short_circuited += 1;
                    requests = requests.saturating_sub(1);
                    self.last_refused = self.last_refused.max(Some(envelope.time));
                }
                Event::AssistantMessage(_)
                    if self.outage_end.is_some_and(|end| envelope.time >= end) =>
                {
                    self.answered_after.push(envelope.time);
                }
                Event::RetryThrottled(_) => self.throttled += 1,
                Event::TurnEnd(end) => {
                    if matches!(end.reason, TurnEndReason::Error { .. }) {
                        self.failed_turns += 1;
                        self.requests_of_failed_turns += requests;
                    }
                    requests = 0;
                }
                _ => {}
            }
        }
    }

    /// The requests the route was sent: attempts less the short-circuited.
    pub fn requests(&self) -> u64 {
        self.attempts - self.short_circuited
    }

    /// The requests per failed turn; `None` without a failed turn.
    pub fn retry_amplification(&self) -> Option<f64> {
        (self.failed_turns > 0)
            .then(|| self.requests_of_failed_turns as f64 / self.failed_turns as f64)
    }

    /// How long after the outage's end the route answered again with its breaker closed for
    /// good (see the module docs); `None` without an outage, or when no such answer came.
    pub fn recovery_ms(&self) -> Option<u64> {
        let end = self.outage_end?;
        let from = self.last_refused.map_or(end, |refused| refused.max(end));
        let first = self.answered_after.iter().copied().filter(|t| *t >= from).min()?;
        Some(first - end)
    }
}

/// The outage of the run, as reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutageWindow {
    /// When it started, in ms from the agents' start.
    pub at_ms: u64,
    /// How long it lasted.
    pub ms: u64,
}

/// What the breaker did (route health on).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BreakerSummary {
    /// How many times it opened (again after a failed probe included).
    pub opened: u64,
    /// How many times it closed.
    pub closed: u64,
    /// When it first opened, in ms from the agents' start (of the changes the route keeps).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_opened_ms: Option<u64>,
    /// When it last closed, in ms from the agents' start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_closed_ms: Option<u64>,
}

/// What the run reports of its route (`route` in `--json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteSummary {
    /// The route's name.
    pub name: String,
    /// Its health settings in force, or `"off"`.
    pub health: Value,
    /// The outage, if the run had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outage: Option<OutageWindow>,
    /// Attempts on the route.
    pub attempts: u64,
    /// Requests sent (attempts less the short-circuited).
    pub requests: u64,
    /// Attempts the breaker refused with `CIRCUIT_OPEN`.
    pub short_circuited: u64,
    /// Retries declined by the spent budget.
    pub throttled: u64,
    /// Turns that ended `error`.
    pub failed_turns: u64,
    /// The requests they sent.
    pub requests_of_failed_turns: u64,
    /// `requestsOfFailedTurns / failedTurns` (absent without a failed turn).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_amplification: Option<f64>,
    /// Requests that reached the provider while the breaker was open (route health on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests_while_open: Option<u64>,
    /// The breaker's openings and closings (route health on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breaker: Option<BreakerSummary>,
    /// From the end of the outage to the route serving every attempt again (absent without an
    /// outage, or when that did not happen before the run ended).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery_ms: Option<u64>,
}

impl RouteSummary {
    /// Whether the route has health.
    pub fn health_on(&self) -> bool {
        self.health != Value::String("off".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::event::{
        AssistantMessage, RequestError, RequestStart, RetryThrottled, StepRef, TurnEnd, TurnStart,
    };
    use crate::runtime::failure::Failure;

    /// A turn at `time` whose attempts end as `outcomes` (`ok`, a code), ending `end` (`ok` or a
    /// code), each event a millisecond after the one before.
    fn turn(turn: u32, time: u64, outcomes: &[&str], end: &str) -> Vec<Envelope> {
        let mut events = vec![Event::TurnStart(TurnStart { turn })];
        events.push(Event::StepStart(StepRef { turn, step: 1 }));
        for (i, outcome) in outcomes.iter().enumerate() {
            let attempt = i as u32 + 1;
            events.push(Event::RequestStart(RequestStart {
                turn,
                step: 1,
                attempt,
                provider: "simulated".into(),
                model: "m".into(),
            }));
            events.push(match *outcome {
                "ok" => Event::AssistantMessage(AssistantMessage {
                    turn,
                    step: 1,
                    text: "done".into(),
                    tool_calls: None,
                    usage: None,
                }),
                "throttled" => Event::RetryThrottled(RetryThrottled {
                    turn,
                    step: 1,
                    provider: "simulated".into(),
                    plugin: "llm-retry".into(),
                    code: "SERVER".into(),
                }),
                code => Event::RequestError(RequestError {
                    turn,
                    step: 1,
                    attempt,
                    provider: "simulated".into(),
                    failure: Failure::new(code, "x").unwrap(),
                }),
            });
        }
        let reason = match end {
            "ok" => TurnEndReason::Completed,
            code => TurnEndReason::Error { failure: Failure::new(code, "x").unwrap() },
        };
        events.push(Event::TurnEnd(TurnEnd { turn, reason }));
        events
            .into_iter()
            .enumerate()
            .map(|(i, event)| Envelope { seq: i as u64, time: time + i as u64, event })
            .collect()
    }

    #[test]
    fn failed_turns_count_the_requests_they_sent_not_the_short_circuited() {
        let mut tally = RouteTally::new(None);
        // (log, attempts, requests, short-circuited, failed turns, their requests)
        let cases: Vec<(Vec<Envelope>, [u64; 5])> = vec![
            (
                turn(1, 0, &["SERVER", "SERVER", "SERVER", "SERVER", "SERVER"], "SERVER"),
                [5, 5, 0, 1, 5],
            ),
            (turn(1, 0, &["SERVER", "ok"], "ok"), [7, 7, 0, 1, 5]),
            (turn(1, 0, &["CIRCUIT_OPEN"], "CIRCUIT_OPEN"), [8, 7, 1, 2, 5]),
            (turn(1, 0, &["SERVER", "CIRCUIT_OPEN"], "CIRCUIT_OPEN"), [10, 8, 2, 3, 6]),
        ];
        for (log, [attempts, requests, short, failed, of_failed]) in cases {
            tally.add_log(&log);
            assert_eq!(
                [
                    tally.attempts,
                    tally.requests(),
                    tally.short_circuited,
                    tally.failed_turns,
                    tally.requests_of_failed_turns
                ],
                [attempts, requests, short, failed, of_failed]
            );
        }
        assert_eq!(tally.retry_amplification(), Some(2.0), "6 requests for 3 failed turns");
        assert_eq!(RouteTally::new(None).retry_amplification(), None, "no failed turn");
        let mut throttled = RouteTally::new(None);
        throttled.add_log(&turn(1, 0, &["throttled"], "SERVER"));
        assert_eq!(throttled.throttled, 1);
    }

    #[test]
    fn recovery_is_the_first_answer_after_the_outage_and_after_the_last_refusal() {
        // The outage ended at 1,000.
        // (logs as (start, outcomes, end), recovery)
        type Case = (Vec<(u64, Vec<&'static str>, &'static str)>, Option<u64>);
        let cases: Vec<Case> = vec![
            // No answer after the end: not recovered.
            (vec![(900, vec!["ok"], "ok")], None),
            // Health off: the first answer after the end (its message at 1,205 + 3).
            (vec![(900, vec!["ok"], "ok"), (1_205, vec!["ok"], "ok")], Some(208)),
            // A refusal at 2,003 after an answer at 1,503: the answer after it counts.
            (
                vec![
                    (1_500, vec!["ok"], "ok"),
                    (2_000, vec!["CIRCUIT_OPEN"], "CIRCUIT_OPEN"),
                    (2_500, vec!["ok"], "ok"),
                ],
                Some(1_503),
            ),
        ];
        for (logs, recovery) in cases {
            let mut tally = RouteTally::new(Some(1_000));
            for (start, outcomes, end) in &logs {
                tally.add_log(&turn(1, *start, outcomes, end));
            }
            assert_eq!(tally.recovery_ms(), recovery, "{logs:?}");
        }
        let mut no_outage = RouteTally::new(None);
        no_outage.add_log(&turn(1, 5_000, &["ok"], "ok"));
        assert_eq!(no_outage.recovery_ms(), None);
    }
}
