//! [`History`]: a builder of session logs, one event a call, each with the next `seq` and the
//! builder's clock, numbered by the builder's current turn, step and attempt.
//!
//! The events carry fixed, plain contents (provider `mock` unless named, model `m`, text `par`
//! and `done`, tool `echo`); a test that needs other contents pushes its own event ([`push`])
//! or edits the last one ([`edit`]). [`Retry`] describes an `llm/retry` of one of the shipped
//! policies, with their policy keys ([`OFFICIAL_KEY`], [`AUTO_KEY`], [`ALWAYS_KEY`]).
//!
//! [`push`]: History::push
//! [`edit`]: History::edit

use rein_event::event::{
    AgentIdle, AssistantChunk, AssistantMessage, ConfigChanged, ContextCompacted, Envelope, Event,
    LlmRetry, LlmRetryStarted, PluginCrashed, RequestError, RequestStart, RetryThrottled,
    RouteSwitched, SessionStart, StepRef, ToolCall, ToolCallEvent, ToolResult, TurnEnd,
    TurnEndReason, TurnResumed, TurnStart, UserMessage,
};
use rein_event::failure::Failure;

/// The official default policy's key.
pub const OFFICIAL_KEY: &str =
    r#"["normal",2,["RATE_LIMIT","SERVER","TIMEOUT","TRANSPORT"],500,10000,0.1]"#;
/// The codes the official policy retries.
pub const OFFICIAL_CODES: &[&str] = &["RATE_LIMIT", "SERVER", "TIMEOUT", "TRANSPORT"];
/// auto-retry's default key.
pub const AUTO_KEY: &str = r#"["auto-retry",3,["EMPTY_RESPONSE","PI_AI_ERROR","PROVIDER_ERROR","RATE_LIMIT","SERVER","STREAM_CLOSED","TIMEOUT","TRANSPORT"],1000,60000,0.2]"#;
/// An always-mode key.
pub const ALWAYS_KEY: &str = r#"["always",500,10000,0.1]"#;

/// A retry to schedule.
#[derive(Debug, Clone)]
pub struct Retry {
    /// The plugin that schedules it.
    pub plugin: &'static str,
    /// Its mode (`normal` or `always`).
    pub mode: &'static str,
    /// The key of the policy it follows.
    pub policy_key: &'static str,
    /// The chain's id.
    pub retry_id: String,
    /// Its number in the chain (from 1).
    pub retry: u64,
    /// The chain's budget (`None` in always mode).
    pub max_retries: Option<u64>,
    /// The wait before the retry starts.
    pub delay_ms: f64,
}

impl Retry {
    /// llm-retry, normal mode, the official default policy.
    pub fn official(id: &str, retry: u64) -> Self {
        Self {
            plugin: "llm-retry",
            mode: "normal",
            policy_key: OFFICIAL_KEY,
            retry_id: id.to_owned(),
            retry,
            max_retries: Some(2),
            delay_ms: 500.0,
        }
    }

    /// auto-retry with its defaults.
    pub fn auto(id: &str, retry: u64) -> Self {
        Self {
            plugin: "auto-retry",
            mode: "normal",
            policy_key: AUTO_KEY,
            retry_id: id.to_owned(),
            retry,
            max_retries: Some(3),
            delay_ms: 1000.0,
        }
    }

    /// llm-retry in always mode.
    pub fn always(id: &str, retry: u64) -> Self {
        Self {
            plugin: "llm-retry",
            mode: "always",
            policy_key: ALWAYS_KEY,
            retry_id: id.to_owned(),
            retry,
            max_retries: None,
            delay_ms: 500.0,
        }
    }

    /// The same retry with another delay.
    pub fn delay(mut self, delay_ms: f64) -> Self {
        self.delay_ms = delay_ms;
        self
    }
}

/// Builds a log: each method appends one event with the next `seq` and the current time, using
/// the current turn, step and attempt numbers.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// The events so far.
    pub events: Vec<Envelope>,
    /// The time of the next event.
    pub time: u64,
    /// The current turn.
    pub turn: u32,
    /// The current step.
    pub step: u32,
    /// The current attempt.
    pub attempt: u32,
    /// The provider of the current attempt.
    pub provider: String,
    /// The failure of the latest `request/error`.
    pub failure: Option<Failure>,
}

/// A failure with `code` and the message `it failed`.
pub fn failure(code: &str) -> Failure {
    Failure::new(code, "it failed").expect("a valid failure")
}

impl History {
    /// A log holding only `session/start`.
    pub fn new() -> Self {
        let mut h = Self::empty();
        h.push(Event::SessionStart(SessionStart { session: "s1".into(), format: 1 }));
        h
    }

    /// The failed-attempt prefix most retry tests start from: `session/start`, then turn 1,
    /// step 1, attempt 1 on `mock` streamed a chunk and, a millisecond later, failed with
    /// `code`.
    pub fn failed(code: &str) -> Self {
        let mut h = Self::new();
        h.user().turn().step().request("mock").chunk().wait(1).error(code);
        h
    }

    /// A log with no events at all.
    pub fn empty() -> Self {
        Self { provider: "mock".into(), ..Self::default() }
    }

    /// The events built so far.
    pub fn build(&self) -> Vec<Envelope> {
        self.events.clone()
    }

    /// Appends `event` with the next seq and the current time.
    pub fn push(&mut self, event: Event) -> &mut Self {
        let seq = self.events.len() as u64;
        self.events.push(Envelope { seq, time: self.time, event });
        self
    }

    /// Changes the last event.
    pub fn edit(&mut self, f: impl FnOnce(&mut Envelope)) -> &mut Self {
        f(self.events.last_mut().expect("an event to edit"));
        self
    }

    /// Moves the clock `ms` on.
    pub fn wait(&mut self, ms: u64) -> &mut Self {
        self.time += ms;
        self
    }

    /// `user/message` (`hello`).
    pub fn user(&mut self) -> &mut Self {
        self.push(Event::UserMessage(UserMessage { text: "hello".into() }))
    }

    /// `turn/start` of the next turn.
    pub fn turn(&mut self) -> &mut Self {
        self.turn += 1;
        self.step = 0;
        self.push(Event::TurnStart(TurnStart { turn: self.turn }))
    }

    /// `step/start` of the next step of the turn.
    pub fn step(&mut self) -> &mut Self {
        self.step += 1;
        self.attempt = 0;
        self.push(Event::StepStart(StepRef { turn: self.turn, step: self.step }))
    }

    /// `request/start` of the next attempt, on `provider`.
    pub fn request(&mut self, provider: &str) -> &mut Self {
        self.attempt += 1;
        self.provider = provider.to_owned();
        self.push(Event::RequestStart(RequestStart {
            turn: self.turn,
            step: self.step,
            attempt: self.attempt,
            provider: provider.to_owned(),
            model: "m".into(),
        }))
    }

    /// `assistant/chunk` of the current attempt.
    pub fn chunk(&mut self) -> &mut Self {
        self.push(Event::AssistantChunk(AssistantChunk {
            turn: self.turn,
            step: self.step,
            attempt: self.attempt,
            text: "par".into(),
        }))
    }

    /// `request/error` of the current attempt, failed with `code`.
    pub fn error(&mut self, code: &str) -> &mut Self {
        self.fail(failure(code))
    }

    /// `request/error` of the current attempt, failed with `failure`.
    pub fn fail(&mut self, failure: Failure) -> &mut Self {
        self.failure = Some(failure.clone());
        self.push(Event::RequestError(RequestError {
            turn: self.turn,
            step: self.step,
            attempt: self.attempt,
            provider: self.provider.clone(),
            failure,
        }))
    }

    /// `llm/retry` for the latest failure, in the current step, for the current provider.
    pub fn retry(&mut self, r: Retry) -> &mut Self {
        let failure = self.failure.clone().unwrap_or_else(|| failure("SERVER"));
        self.push(Event::LlmRetry(LlmRetry {
            retry_id: r.retry_id,
            turn: self.turn,
            step: self.step,
            provider: self.provider.clone(),
            plugin: r.plugin.into(),
            mode: r.mode.into(),
            policy_key: r.policy_key.into(),
            retry: r.retry,
            max_retries: r.max_retries,
            delay_ms: r.delay_ms,
            failure,
        }))
    }

    /// `llm/retry-started` at the current time.
    pub fn started(&mut self, id: &str, retry: u64) -> &mut Self {
        self.push(Event::LlmRetryStarted(LlmRetryStarted {
            retry_id: id.to_owned(),
            turn: self.turn,
            step: self.step,
            retry,
        }))
    }

    /// `llm/retry`, the wait (`floor(delay)`, the earliest legal start), `llm/retry-started`.
    pub fn retried(&mut self, r: Retry) -> &mut Self {
        let (id, n) = (r.retry_id.clone(), r.retry);
        let wait = r.delay_ms.floor() as u64;
        self.retry(r).wait(wait).started(&id, n)
    }

    /// `assistant/message` of the step, calling the tools `tools` (ids) of `echo`.
    pub fn message(&mut self, tools: &[&str]) -> &mut Self {
        let calls: Vec<ToolCall> = tools
            .iter()
            .map(|id| ToolCall {
                id: (*id).to_owned(),
                name: "echo".into(),
                arguments: serde_json::json!({"text": "hi"}),
            })
            .collect();
        self.push(Event::AssistantMessage(AssistantMessage {
            turn: self.turn,
            step: self.step,
            text: "done".into(),
            tool_calls: if calls.is_empty() { None } else { Some(calls) },
            usage: None,
        }))
    }

    /// `tool/call` of `echo` with id `id`.
    pub fn tool_call(&mut self, id: &str) -> &mut Self {
        self.push(Event::ToolCall(ToolCallEvent {
            turn: self.turn,
            step: self.step,
            id: id.to_owned(),
            name: "echo".into(),
            arguments: serde_json::json!({"text": "hi"}),
        }))
    }

    /// `tool/result` of the call `id`.
    pub fn tool_result(&mut self, id: &str) -> &mut Self {
        self.push(Event::ToolResult(ToolResult {
            turn: self.turn,
            step: self.step,
            id: id.to_owned(),
            output: "hi".into(),
            is_error: false,
        }))
    }

    /// `route/switched` from the current provider to `to`, for the latest failure's code.
    pub fn switched(&mut self, to: &str, reason: &str) -> &mut Self {
        let code = self.failure.as_ref().map_or("SERVER", |f| f.code()).to_owned();
        self.push(Event::RouteSwitched(RouteSwitched {
            turn: self.turn,
            step: self.step,
            from: self.provider.clone(),
            to: to.to_owned(),
            code,
            reason: reason.to_owned(),
        }))
    }

    /// `retry/throttled` by `plugin` for the current attempt's failure (its code, or `SERVER`).
    pub fn throttled(&mut self, plugin: &str) -> &mut Self {
        let code = self.failure.as_ref().map_or("SERVER", |f| f.code()).to_owned();
        self.push(Event::RetryThrottled(RetryThrottled {
            turn: self.turn,
            step: self.step,
            provider: self.provider.clone(),
            plugin: plugin.to_owned(),
            code,
        }))
    }

    /// `context/compacted` in the current step.
    pub fn compacted(&mut self) -> &mut Self {
        self.push(Event::ContextCompacted(ContextCompacted {
            turn: self.turn,
            step: self.step,
            removed: vec![1],
            kept: 2,
        }))
    }

    /// `step/end` of the current step.
    pub fn step_end(&mut self) -> &mut Self {
        self.push(Event::StepEnd(StepRef { turn: self.turn, step: self.step }))
    }

    /// `turn/end` of the current turn, for `reason`.
    pub fn turn_end(&mut self, reason: TurnEndReason) -> &mut Self {
        self.push(Event::TurnEnd(TurnEnd { turn: self.turn, reason }))
    }

    /// `turn/end` of the current turn, completed.
    pub fn completed(&mut self) -> &mut Self {
        self.turn_end(TurnEndReason::Completed)
    }

    /// `agent/idle`.
    pub fn idle(&mut self) -> &mut Self {
        self.push(Event::AgentIdle(AgentIdle {}))
    }

    /// `plugin/crashed` (auto-retry).
    pub fn crashed(&mut self) -> &mut Self {
        self.push(Event::PluginCrashed(PluginCrashed {
            plugin: "auto-retry".into(),
            error: "boom".into(),
            restarts: 1,
        }))
    }

    /// `config/changed` (auto-retry's `enabled`).
    pub fn config_changed(&mut self) -> &mut Self {
        self.push(Event::ConfigChanged(ConfigChanged {
            plugin: "auto-retry".into(),
            revision: 2,
            changed: vec!["enabled".into()],
        }))
    }

    /// `turn/resumed` in the current turn and step, with `pending`.
    pub fn resumed(&mut self, pending: &str) -> &mut Self {
        self.push(Event::TurnResumed(TurnResumed {
            turn: self.turn,
            step: self.step,
            pending: pending.into(),
        }))
    }

    /// A successful attempt that ends the step (and, without tools, is the turn's answer).
    pub fn answer(&mut self, provider: &str) -> &mut Self {
        self.request(provider).chunk().message(&[]).step_end()
    }
}

/// Gives the log sequence numbers 0, 1, 2… in its current order.
pub fn renumber(events: &mut [Envelope]) {
    for (seq, event) in events.iter_mut().enumerate() {
        event.seq = seq as u64;
    }
}
