//! The `--json` report of a scenario run (`docs/runtime-semantics.md`, "Scenario files"), built by
//! a pure function from the session's log.
//!
//! [`build`] reads only the committed events plus what the log cannot hold: the configuration
//! errors of `configure` actions (a rejected patch writes nothing), the invariant checker's
//! verdict over the same events, and the virtual time at which the run ended. Every row's `atMs`
//! is the `time` of the event it comes from, so the report and the log never disagree.
//!
//! # Why the report is folded from the log
//!
//! The runner could collect rows while it drives the session, but then the report would describe
//! what the runner saw rather than what was recorded. Folding the log makes the report a view of
//! the durable truth — the same one `rein check` and a reopened session see — and makes the
//! builder a plain function that table tests cover with hand-made event lists.

use serde::{Deserialize, Serialize};

use rein_event::event::{Envelope, Event, TurnEndReason};
use rein_event::history::History;
use rein_event::json_number;
use rein_event::message::Message;
use rein_event::validator::Rejection;

/// The report `rein scenario run --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Report {
    /// Each ended turn and why, in log order.
    pub turns: Vec<TurnRow>,
    /// Every `request/start`.
    pub requests: Vec<RequestRow>,
    /// Every `llm/retry`, in log order.
    pub retries: Vec<RetryRow>,
    /// Every `llm/retry-started`.
    pub retries_started: Vec<RetryStartedRow>,
    /// Every refused `configure` action.
    pub config_errors: Vec<ConfigErrorRow>,
    /// The final model-visible history.
    pub messages: Vec<Message>,
    /// The invariant checker's verdict over the log.
    pub invariant: InvariantRow,
    /// How many events the log holds.
    pub events: u64,
    /// The virtual time at which the run ended.
    pub end_ms: u64,
}

/// `turns[i]`: a `turn/end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnRow {
    /// The turn.
    pub turn: u32,
    /// Why it ended.
    pub reason: TurnEndReason,
}

/// `requests[i]`: a `request/start`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestRow {
    /// When.
    pub at_ms: u64,
    /// The turn.
    pub turn: u32,
    /// The step.
    pub step: u32,
    /// The attempt.
    pub attempt: u32,
    /// The provider route.
    pub provider: String,
}

/// `retries[i]`: an `llm/retry`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetryRow {
    /// When it was scheduled.
    pub at_ms: u64,
    /// The turn.
    pub turn: u32,
    /// The step.
    pub step: u32,
    /// The plugin that scheduled it.
    pub plugin: String,
    /// The chain's id.
    pub retry_id: String,
    /// The retry number in its chain.
    pub retry: u64,
    /// The chain's budget; absent in `always` mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u64>,
    /// `normal` or `always`.
    pub mode: String,
    /// The chain's canonical policy key.
    pub policy_key: String,
    /// The wait before the next attempt.
    #[serde(serialize_with = "json_number::serialize")]
    pub delay_ms: f64,
    /// The code of the failure it retries.
    pub code: String,
    /// The provider route.
    pub provider: String,
}

/// `retriesStarted[i]`: an `llm/retry-started`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetryStartedRow {
    /// When the wait elapsed.
    pub at_ms: u64,
    /// The chain's id.
    pub retry_id: String,
    /// The retry number.
    pub retry: u64,
}

/// `configErrors[i]`: a `configure` action the plugin refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigErrorRow {
    /// When the action ran.
    pub at_ms: u64,
    /// The plugin.
    pub plugin: String,
    /// Why it refused (names the field).
    pub error: String,
}

/// `invariant`: the checker's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InvariantRow {
    /// Whether every rule holds.
    pub ok: bool,
    /// The broken rules.
    pub violations: Vec<ViolationRow>,
}

/// `invariant.violations[i]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ViolationRow {
    /// The offending event's `seq`.
    pub seq: u64,
    /// Its type.
    #[serde(rename = "type")]
    pub kind: String,
    /// The rule's name.
    pub rule: String,
    /// What a person needs to know.
    pub message: String,
}

impl From<Rejection> for ViolationRow {
    fn from(r: Rejection) -> Self {
        Self { seq: r.seq, kind: r.kind, rule: r.rule, message: r.message }
    }
}

/// Builds the report of a run from its log, the refused `configure` actions, the invariant
/// violations found in the log, and the virtual time the run ended.
pub fn build(
    events: &[Envelope],
    config_errors: Vec<ConfigErrorRow>,
    violations: Vec<Rejection>,
    end_ms: u64,
) -> Report {
    let mut report = Report {
        turns: Vec::new(),
        requests: Vec::new(),
        retries: Vec::new(),
        retries_started: Vec::new(),
        config_errors,
        messages: Vec::new(),
        invariant: InvariantRow {
            ok: violations.is_empty(),
            violations: violations.into_iter().map(ViolationRow::from).collect(),
        },
        events: u64::try_from(events.len()).unwrap_or(u64::MAX),
        end_ms,
    };
    for envelope in events {
        let at_ms = envelope.time;
        match &envelope.event {
            Event::TurnEnd(e) => {
                report.turns.push(TurnRow { turn: e.turn, reason: e.reason.clone() });
            }
            Event::RequestStart(e) => report.requests.push(RequestRow {
                at_ms,
                turn: e.turn,
                step: e.step,
                attempt: e.attempt,
                provider: e.provider.clone(),
            }),
            Event::LlmRetry(e) => report.retries.push(RetryRow {
                at_ms,
                turn: e.turn,
                step: e.step,
                plugin: e.plugin.clone(),
                retry_id: e.retry_id.clone(),
                retry: e.retry,
                max_retries: e.max_retries,
                mode: e.mode.clone(),
                policy_key: e.policy_key.clone(),
                delay_ms: e.delay_ms,
                code: e.failure.code().to_owned(),
                provider: e.provider.clone(),
            }),
            Event::LlmRetryStarted(e) => report.retries_started.push(RetryStartedRow {
                at_ms,
                retry_id: e.retry_id.clone(),
                retry: e.retry,
            }),
            _ => {}
        }
    }
    report.messages = History::from_events(events).messages().to_vec();
    report
}

#[cfg(test)]
mod tests;
