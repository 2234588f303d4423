//! The event vocabulary of the session log (`docs/runtime-semantics.md`, "Events").
//!
//! Every line of a log is an [`Envelope`]: `{"seq", "time", "type", "data"}`. [`Event`] is the
//! typed `type` + `data` pair; each variant's data is its own struct so that producers, plugins
//! and the invariant rules can name it. Field names are camelCase on the wire.
//!
//! # Why some fields are loosely typed
//!
//! `llm/retry.mode` is a `String`, not an enum: the log is checked by the `invariant` crate, and a
//! log written by a faulty plugin must still parse so the checker can name the broken rule
//! (`mode "sometimes"`) instead of failing the whole file.
//!
//! - `counters`: the counters a line carries (`seq`, `turn`, `step`, `attempt`, `retry`) and
//!   [`Envelope::exhausted`], the one at its largest value, which no reader or writer accepts.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::failure::Failure;
use crate::json_number;

mod counters;

pub use counters::Exhausted;

/// The format version written in `session/start`.
pub const LOG_FORMAT: u32 = 1;

/// One line of a session log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// Position in the log, from 0, contiguous.
    pub seq: u64,
    /// Milliseconds from the runtime clock (epoch ms, or virtual ms in scenarios).
    pub time: u64,
    /// The typed event (`type` and `data` on the wire).
    #[serde(flatten)]
    pub event: Event,
}

impl Envelope {
    /// The event's `family/name` tag.
    pub fn kind(&self) -> &'static str {
        self.event.kind()
    }
}

/// A typed event: the `type` tag and its `data`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data")]
#[non_exhaustive]
pub enum Event {
    /// The first event of every log.
    #[serde(rename = "session/start")]
    SessionStart(SessionStart),
    /// A user's message (model-visible).
    #[serde(rename = "user/message")]
    UserMessage(UserMessage),
    /// A turn began.
    #[serde(rename = "turn/start")]
    TurnStart(TurnStart),
    /// A step began.
    #[serde(rename = "step/start")]
    StepStart(StepRef),
    /// A provider attempt began.
    #[serde(rename = "request/start")]
    RequestStart(RequestStart),
    /// A raw stream chunk (never model-visible).
    #[serde(rename = "assistant/chunk")]
    AssistantChunk(AssistantChunk),
    /// An attempt failed; written before the waterfall runs.
    #[serde(rename = "request/error")]
    RequestError(RequestError),
    /// A retry was scheduled; written before the wait.
    #[serde(rename = "llm/retry")]
    LlmRetry(LlmRetry),
    /// A scheduled retry's wait elapsed; the next attempt follows.
    #[serde(rename = "llm/retry-started")]
    LlmRetryStarted(LlmRetryStarted),
    /// The model's answer (model-visible).
    #[serde(rename = "assistant/message")]
    AssistantMessage(AssistantMessage),
    /// A tool call (model-visible).
    #[serde(rename = "tool/call")]
    ToolCall(ToolCallEvent),
    /// A tool's result (model-visible).
    #[serde(rename = "tool/result")]
    ToolResult(ToolResult),
    /// A recovery moved the step to another provider route; the retry on it follows.
    #[serde(rename = "route/switched")]
    RouteSwitched(RouteSwitched),
    /// Compaction dropped part of the model-visible history.
    #[serde(rename = "context/compacted")]
    ContextCompacted(ContextCompacted),
    /// A step ended.
    #[serde(rename = "step/end")]
    StepEnd(StepRef),
    /// A turn ended; exactly one per `turn/start`.
    #[serde(rename = "turn/end")]
    TurnEnd(TurnEnd),
    /// Nothing runs and nothing is queued.
    #[serde(rename = "agent/idle")]
    AgentIdle(AgentIdle),
    /// A plugin crashed (diagnostics).
    #[serde(rename = "plugin/crashed")]
    PluginCrashed(PluginCrashed),
    /// A plugin's settings changed at run time.
    #[serde(rename = "config/changed")]
    ConfigChanged(ConfigChanged),
    /// A reopened session continues a turn a crash left open (never model-visible).
    #[serde(rename = "turn/resumed")]
    TurnResumed(TurnResumed),
    /// A plugin declined a retry because the route's retry budget is spent (never model-visible).
    #[serde(rename = "retry/throttled")]
    RetryThrottled(RetryThrottled),
}

impl Event {
    /// Every `family/name` tag, in the order of `docs/runtime-semantics.md` ("Events").
    pub const KINDS: [&'static str; 21] = [
        "session/start",
        "user/message",
        "turn/start",
        "step/start",
        "request/start",
        "assistant/chunk",
        "request/error",
        "llm/retry",
        "llm/retry-started",
        "assistant/message",
        "tool/call",
        "tool/result",
        "route/switched",
        "context/compacted",
        "step/end",
        "turn/end",
        "agent/idle",
        "plugin/crashed",
        "config/changed",
        "turn/resumed",
        "retry/throttled",
    ];

    /// The event's `family/name` tag.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::SessionStart(_) => "session/start",
            Event::UserMessage(_) => "user/message",
            Event::TurnStart(_) => "turn/start",
            Event::StepStart(_) => "step/start",
            Event::RequestStart(_) => "request/start",
            Event::AssistantChunk(_) => "assistant/chunk",
            Event::RequestError(_) => "request/error",
            Event::LlmRetry(_) => "llm/retry",
            Event::LlmRetryStarted(_) => "llm/retry-started",
            Event::AssistantMessage(_) => "assistant/message",
            Event::ToolCall(_) => "tool/call",
            Event::ToolResult(_) => "tool/result",
            Event::RouteSwitched(_) => "route/switched",
            Event::ContextCompacted(_) => "context/compacted",
            Event::StepEnd(_) => "step/end",
            Event::TurnEnd(_) => "turn/end",
            Event::AgentIdle(_) => "agent/idle",
            Event::PluginCrashed(_) => "plugin/crashed",
            Event::ConfigChanged(_) => "config/changed",
            Event::TurnResumed(_) => "turn/resumed",
            Event::RetryThrottled(_) => "retry/throttled",
        }
    }

    /// Whether the event enters the model-visible history.
    pub fn is_model_visible(&self) -> bool {
        matches!(
            self,
            Event::UserMessage(_)
                | Event::AssistantMessage(_)
                | Event::ToolCall(_)
                | Event::ToolResult(_)
                | Event::ContextCompacted(_)
        )
    }
}

/// `session/start`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionStart {
    /// The session id.
    pub session: String,
    /// The log format version ([`LOG_FORMAT`]).
    pub format: u32,
}

/// `user/message`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserMessage {
    /// What the user said.
    pub text: String,
}

/// `turn/start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnStart {
    /// The turn number, from 1.
    pub turn: u32,
}

/// `step/start` and `step/end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepRef {
    /// The turn.
    pub turn: u32,
    /// The step number within the turn, from 1.
    pub step: u32,
}

/// `request/start`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestStart {
    /// The turn.
    pub turn: u32,
    /// The step.
    pub step: u32,
    /// The attempt number within the step, from 1.
    pub attempt: u32,
    /// The provider route.
    pub provider: String,
    /// The model asked.
    pub model: String,
}

/// `assistant/chunk`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantChunk {
    /// The turn.
    pub turn: u32,
    /// The step.
    pub step: u32,
    /// The attempt that streamed it.
    pub attempt: u32,
    /// The raw text.
    pub text: String,
}

/// `request/error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestError {
    /// The turn.
    pub turn: u32,
    /// The step.
    pub step: u32,
    /// The failed attempt.
    pub attempt: u32,
    /// The provider route that served it.
    pub provider: String,
    /// What went wrong.
    pub failure: Failure,
}

/// `llm/retry`: a retry scheduled, written before its wait.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LlmRetry {
    /// The chain's id: a UUID v4 made at retry 1 and kept for the chain.
    pub retry_id: String,
    /// The turn.
    pub turn: u32,
    /// The step.
    pub step: u32,
    /// The provider route.
    pub provider: String,
    /// The plugin that scheduled it (`llm-retry`, `auto-retry`).
    pub plugin: String,
    /// `normal` or `always`.
    pub mode: String,
    /// The canonical policy key of the chain.
    pub policy_key: String,
    /// The retry number in its chain, from 1.
    pub retry: u64,
    /// The chain's budget (normal mode only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u64>,
    /// The wait before the next attempt.
    #[serde(serialize_with = "json_number::serialize")]
    pub delay_ms: f64,
    /// The failure being retried.
    pub failure: Failure,
}

/// `llm/retry-started`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LlmRetryStarted {
    /// The chain's id.
    pub retry_id: String,
    /// The turn.
    pub turn: u32,
    /// The step.
    pub step: u32,
    /// The retry number.
    pub retry: u64,
}

/// A tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// The call id.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, as the model wrote them.
    pub arguments: Value,
}

/// Token usage reported by a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
}

/// `assistant/message`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    /// The turn.
    pub turn: u32,
    /// The step.
    pub step: u32,
    /// The answer's text (the successful attempt's chunks only).
    pub text: String,
    /// Tool calls the model asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// Token usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// `tool/call`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallEvent {
    /// The turn.
    pub turn: u32,
    /// The step.
    pub step: u32,
    /// The call id.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments.
    pub arguments: Value,
}

/// `tool/result`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    /// The turn.
    pub turn: u32,
    /// The step.
    pub step: u32,
    /// The call id it answers.
    pub id: String,
    /// The tool's output.
    pub output: String,
    /// Whether the tool failed.
    pub is_error: bool,
}

/// `route/switched`: written by the recovery that moves a step to another route, before the retry
/// on route `to`; never model-visible.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteSwitched {
    /// The turn.
    pub turn: u32,
    /// The step.
    pub step: u32,
    /// The route of the step's latest attempt.
    pub from: String,
    /// The route the retry goes to.
    pub to: String,
    /// The code of the failure that caused the switch.
    pub code: String,
    /// Why now: `eager`, `delay` or `exhausted` (a string, so a log with another word still
    /// parses and its checker can name it).
    pub reason: String,
}

/// `context/compacted`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextCompacted {
    /// The turn.
    pub turn: u32,
    /// The step.
    pub step: u32,
    /// The seqs of the model-visible events dropped.
    pub removed: Vec<u64>,
    /// How many model-visible events remain.
    pub kept: u64,
}

/// `turn/end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnEnd {
    /// The turn.
    pub turn: u32,
    /// Why it ended.
    pub reason: TurnEndReason,
}

/// `turn/resumed`: written first when a reopened session continues a turn a crash left open,
/// so the log says a restart happened; never model-visible.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnResumed {
    /// The turn.
    pub turn: u32,
    /// The step it continues in (its open step, else the last step started; 0 before any).
    pub step: u32,
    /// What the tail was: `retry-wait`, `attempt`, `waterfall`, `tool` or `loop` (a string, so
    /// a log with another word still parses and its checker can name it).
    pub pending: String,
}

/// `retry/throttled`: a plugin declined a retry it would otherwise have scheduled, because the
/// route's retry budget is spent (its tokens are at half or below); written after the attempt's
/// `request/error`, in its open step; never model-visible.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryThrottled {
    /// The turn.
    pub turn: u32,
    /// The step.
    pub step: u32,
    /// The route whose budget is spent (the provider of the step's latest `request/start`).
    pub provider: String,
    /// The plugin that declined (`llm-retry`, `auto-retry`).
    pub plugin: String,
    /// The code of the failure it did not retry.
    pub code: String,
}

/// `agent/idle` (no data).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AgentIdle {}

/// `plugin/crashed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginCrashed {
    /// The plugin's name.
    pub plugin: String,
    /// What the crash said.
    pub error: String,
    /// Restarts so far within the intensity window.
    pub restarts: u32,
}

/// `config/changed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigChanged {
    /// The plugin's name.
    pub plugin: String,
    /// The new revision.
    pub revision: u64,
    /// The names of the fields that changed.
    pub changed: Vec<String>,
}

/// Why a turn ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum TurnEndReason {
    /// The model answered without tool calls.
    Completed,
    /// A failure nobody recovered.
    Error {
        /// The last failure.
        failure: Failure,
    },
    /// The turn was cancelled.
    Aborted {
        /// Who cancelled it.
        cause: CancelCause,
    },
    /// The per-turn step limit was reached.
    MaxSteps,
    /// A crash left the turn open; written on reopen.
    Interrupted,
}

/// Who cancelled a turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum CancelCause {
    /// The user cancelled.
    User,
    /// A parent (session, runtime) was cancelled.
    Parent,
    /// The runtime or a plugin was disposed.
    Disposed,
    /// A hook cancelled it.
    Hook {
        /// The hook's reason.
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure() -> Failure {
        Failure::new("RATE_LIMIT", "busy")
            .unwrap()
            .with_status(429)
            .unwrap()
            .with_retry_after_ms(2000.0)
            .unwrap()
            .with_request_id("r-1")
            .unwrap()
    }

    /// Every event type, with its exact JSON.
    fn table() -> Vec<(Event, &'static str)> {
        vec![
            (
                Event::SessionStart(SessionStart { session: "s1".into(), format: 1 }),
                r#"{"seq":0,"time":5,"type":"session/start","data":{"session":"s1","format":1}}"#,
            ),
            (
                Event::UserMessage(UserMessage { text: "hello".into() }),
                r#"{"seq":0,"time":5,"type":"user/message","data":{"text":"hello"}}"#,
            ),
            (
                Event::TurnStart(TurnStart { turn: 1 }),
                r#"{"seq":0,"time":5,"type":"turn/start","data":{"turn":1}}"#,
            ),
            (
                Event::StepStart(StepRef { turn: 1, step: 2 }),
                r#"{"seq":0,"time":5,"type":"step/start","data":{"turn":1,"step":2}}"#,
            ),
            (
                Event::RequestStart(RequestStart {
                    turn: 1,
                    step: 1,
                    attempt: 3,
                    provider: "mock".into(),
                    model: "m".into(),
                }),
                r#"{"seq":0,"time":5,"type":"request/start","data":{"turn":1,"step":1,"attempt":3,"provider":"mock","model":"m"}}"#,
            ),
            (
                Event::AssistantChunk(AssistantChunk {
                    turn: 1,
                    step: 1,
                    attempt: 1,
                    text: "par".into(),
                }),
                r#"{"seq":0,"time":5,"type":"assistant/chunk","data":{"turn":1,"step":1,"attempt":1,"text":"par"}}"#,
            ),
            (
                Event::RequestError(RequestError {
                    turn: 1,
                    step: 1,
                    attempt: 1,
                    provider: "mock".into(),
                    failure: failure(),
                }),
                r#"{"seq":0,"time":5,"type":"request/error","data":{"turn":1,"step":1,"attempt":1,"provider":"mock","failure":{"code":"RATE_LIMIT","message":"busy","status":429,"providerRetryAfterMs":2000,"requestId":"r-1"}}}"#,
            ),
            (
                Event::LlmRetry(LlmRetry {
                    retry_id: "id".into(),
                    turn: 1,
                    step: 1,
                    provider: "mock".into(),
                    plugin: "llm-retry".into(),
                    mode: "normal".into(),
                    policy_key: r#"["normal",2,["SERVER"],500,10000,0]"#.into(),
                    retry: 1,
                    max_retries: Some(2),
                    delay_ms: 500.0,
                    failure: Failure::new("SERVER", "down").unwrap(),
                }),
                r#"{"seq":0,"time":5,"type":"llm/retry","data":{"retryId":"id","turn":1,"step":1,"provider":"mock","plugin":"llm-retry","mode":"normal","policyKey":"[\"normal\",2,[\"SERVER\"],500,10000,0]","retry":1,"maxRetries":2,"delayMs":500,"failure":{"code":"SERVER","message":"down"}}}"#,
            ),
            (
                Event::LlmRetry(LlmRetry {
                    retry_id: "id".into(),
                    turn: 1,
                    step: 1,
                    provider: "mock".into(),
                    plugin: "llm-retry".into(),
                    mode: "always".into(),
                    policy_key: r#"["always",1,4,0.1]"#.into(),
                    retry: 7,
                    max_retries: None,
                    delay_ms: 1.1,
                    failure: Failure::new("AUTH", "no").unwrap(),
                }),
                r#"{"seq":0,"time":5,"type":"llm/retry","data":{"retryId":"id","turn":1,"step":1,"provider":"mock","plugin":"llm-retry","mode":"always","policyKey":"[\"always\",1,4,0.1]","retry":7,"delayMs":1.1,"failure":{"code":"AUTH","message":"no"}}}"#,
            ),
            (
                Event::LlmRetryStarted(LlmRetryStarted {
                    retry_id: "id".into(),
                    turn: 1,
                    step: 1,
                    retry: 1,
                }),
                r#"{"seq":0,"time":5,"type":"llm/retry-started","data":{"retryId":"id","turn":1,"step":1,"retry":1}}"#,
            ),
            (
                Event::AssistantMessage(AssistantMessage {
                    turn: 1,
                    step: 1,
                    text: "done".into(),
                    tool_calls: Some(vec![ToolCall {
                        id: "c1".into(),
                        name: "echo".into(),
                        arguments: serde_json::json!({"text": "hi"}),
                    }]),
                    usage: Some(Usage { input_tokens: 3, output_tokens: 4 }),
                }),
                r#"{"seq":0,"time":5,"type":"assistant/message","data":{"turn":1,"step":1,"text":"done","toolCalls":[{"id":"c1","name":"echo","arguments":{"text":"hi"}}],"usage":{"inputTokens":3,"outputTokens":4}}}"#,
            ),
            (
                Event::AssistantMessage(AssistantMessage {
                    turn: 1,
                    step: 1,
                    text: "done".into(),
                    tool_calls: None,
                    usage: None,
                }),
                r#"{"seq":0,"time":5,"type":"assistant/message","data":{"turn":1,"step":1,"text":"done"}}"#,
            ),
            (
                Event::ToolCall(ToolCallEvent {
                    turn: 1,
                    step: 1,
                    id: "c1".into(),
                    name: "echo".into(),
                    arguments: serde_json::json!({"text": "hi"}),
                }),
                r#"{"seq":0,"time":5,"type":"tool/call","data":{"turn":1,"step":1,"id":"c1","name":"echo","arguments":{"text":"hi"}}}"#,
            ),
            (
                Event::ToolResult(ToolResult {
                    turn: 1,
                    step: 1,
                    id: "c1".into(),
                    output: "hi".into(),
                    is_error: false,
                }),
                r#"{"seq":0,"time":5,"type":"tool/result","data":{"turn":1,"step":1,"id":"c1","output":"hi","isError":false}}"#,
            ),
            (
                Event::RouteSwitched(RouteSwitched {
                    turn: 1,
                    step: 1,
                    from: "mock".into(),
                    to: "backup".into(),
                    code: "RATE_LIMIT".into(),
                    reason: "exhausted".into(),
                }),
                r#"{"seq":0,"time":5,"type":"route/switched","data":{"turn":1,"step":1,"from":"mock","to":"backup","code":"RATE_LIMIT","reason":"exhausted"}}"#,
            ),
            (
                Event::ContextCompacted(ContextCompacted {
                    turn: 2,
                    step: 1,
                    removed: vec![1, 4],
                    kept: 6,
                }),
                r#"{"seq":0,"time":5,"type":"context/compacted","data":{"turn":2,"step":1,"removed":[1,4],"kept":6}}"#,
            ),
            (
                Event::StepEnd(StepRef { turn: 1, step: 2 }),
                r#"{"seq":0,"time":5,"type":"step/end","data":{"turn":1,"step":2}}"#,
            ),
            (
                Event::TurnEnd(TurnEnd { turn: 1, reason: TurnEndReason::Completed }),
                r#"{"seq":0,"time":5,"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}"#,
            ),
            (
                Event::TurnEnd(TurnEnd {
                    turn: 1,
                    reason: TurnEndReason::Error { failure: Failure::new("SERVER", "x").unwrap() },
                }),
                r#"{"seq":0,"time":5,"type":"turn/end","data":{"turn":1,"reason":{"kind":"error","failure":{"code":"SERVER","message":"x"}}}}"#,
            ),
            (
                Event::TurnEnd(TurnEnd {
                    turn: 1,
                    reason: TurnEndReason::Aborted { cause: CancelCause::User },
                }),
                r#"{"seq":0,"time":5,"type":"turn/end","data":{"turn":1,"reason":{"kind":"aborted","cause":{"kind":"user"}}}}"#,
            ),
            (
                Event::TurnEnd(TurnEnd {
                    turn: 1,
                    reason: TurnEndReason::Aborted { cause: CancelCause::Parent },
                }),
                r#"{"seq":0,"time":5,"type":"turn/end","data":{"turn":1,"reason":{"kind":"aborted","cause":{"kind":"parent"}}}}"#,
            ),
            (
                Event::TurnEnd(TurnEnd {
                    turn: 1,
                    reason: TurnEndReason::Aborted { cause: CancelCause::Disposed },
                }),
                r#"{"seq":0,"time":5,"type":"turn/end","data":{"turn":1,"reason":{"kind":"aborted","cause":{"kind":"disposed"}}}}"#,
            ),
            (
                Event::TurnEnd(TurnEnd {
                    turn: 1,
                    reason: TurnEndReason::Aborted {
                        cause: CancelCause::Hook { reason: "budget".into() },
                    },
                }),
                r#"{"seq":0,"time":5,"type":"turn/end","data":{"turn":1,"reason":{"kind":"aborted","cause":{"kind":"hook","reason":"budget"}}}}"#,
            ),
            (
                Event::TurnEnd(TurnEnd { turn: 3, reason: TurnEndReason::MaxSteps }),
                r#"{"seq":0,"time":5,"type":"turn/end","data":{"turn":3,"reason":{"kind":"max-steps"}}}"#,
            ),
            (
                Event::TurnEnd(TurnEnd { turn: 3, reason: TurnEndReason::Interrupted }),
                r#"{"seq":0,"time":5,"type":"turn/end","data":{"turn":3,"reason":{"kind":"interrupted"}}}"#,
            ),
            (Event::AgentIdle(AgentIdle {}), r#"{"seq":0,"time":5,"type":"agent/idle","data":{}}"#),
            (
                Event::PluginCrashed(PluginCrashed {
                    plugin: "p".into(),
                    error: "boom".into(),
                    restarts: 2,
                }),
                r#"{"seq":0,"time":5,"type":"plugin/crashed","data":{"plugin":"p","error":"boom","restarts":2}}"#,
            ),
            (
                Event::ConfigChanged(ConfigChanged {
                    plugin: "auto-retry".into(),
                    revision: 4,
                    changed: vec!["enabled".into()],
                }),
                r#"{"seq":0,"time":5,"type":"config/changed","data":{"plugin":"auto-retry","revision":4,"changed":["enabled"]}}"#,
            ),
            (
                Event::TurnResumed(TurnResumed { turn: 2, step: 1, pending: "retry-wait".into() }),
                r#"{"seq":0,"time":5,"type":"turn/resumed","data":{"turn":2,"step":1,"pending":"retry-wait"}}"#,
            ),
            (
                Event::RetryThrottled(RetryThrottled {
                    turn: 1,
                    step: 2,
                    provider: "main".into(),
                    plugin: "llm-retry".into(),
                    code: "SERVER".into(),
                }),
                r#"{"seq":0,"time":5,"type":"retry/throttled","data":{"turn":1,"step":2,"provider":"main","plugin":"llm-retry","code":"SERVER"}}"#,
            ),
        ]
    }

    #[test]
    fn every_event_has_its_documented_shape_and_parses_back() {
        let table = table();
        let mut seen: Vec<&str> = table.iter().map(|(e, _)| e.kind()).collect();
        seen.dedup();
        assert_eq!(seen, Event::KINDS.to_vec(), "the table covers every type, in order");
        for (event, json) in table {
            let envelope = Envelope { seq: 0, time: 5, event };
            assert_eq!(serde_json::to_string(&envelope).unwrap(), json);
            let back: Envelope = serde_json::from_str(json).unwrap();
            assert_eq!(back, envelope, "{json}");
        }
    }

    #[test]
    fn a_bad_failure_inside_an_event_is_rejected_naming_the_field() {
        let line = r#"{"seq":0,"time":5,"type":"request/error","data":{"turn":1,"step":1,"attempt":1,"provider":"mock","failure":{"code":"SERVER","message":"m","status":600}}}"#;
        let err = serde_json::from_str::<Envelope>(line).unwrap_err().to_string();
        assert!(err.contains("failure.status"), "{err}");
    }

    #[test]
    fn unknown_types_are_rejected() {
        let line = r#"{"seq":0,"time":5,"type":"nope/nope","data":{}}"#;
        assert!(serde_json::from_str::<Envelope>(line).is_err());
    }

    #[test]
    fn only_the_documented_events_are_model_visible() {
        let visible: Vec<&str> = table()
            .into_iter()
            .filter(|(e, _)| e.is_model_visible())
            .map(|(e, _)| e.kind())
            .collect();
        assert_eq!(
            visible,
            [
                "user/message",
                "assistant/message",
                "assistant/message",
                "tool/call",
                "tool/result",
                "context/compacted"
            ]
        );
    }
}
