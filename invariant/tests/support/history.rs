//! Test support: a builder for session logs, and a generator of valid ones.
//!
//! Included by the integration tests with `#[path]`; not every test uses every helper.
#![allow(dead_code, unreachable_pub, missing_docs)]

use rein_event::event::{
    AgentIdle, AssistantChunk, AssistantMessage, CancelCause, ConfigChanged, ContextCompacted,
    Envelope, Event, LlmRetry, LlmRetryStarted, PluginCrashed, RequestError, RequestStart,
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
    pub plugin: &'static str,
    pub mode: &'static str,
    pub policy_key: &'static str,
    pub retry_id: String,
    pub retry: u64,
    pub max_retries: Option<u64>,
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

    pub fn delay(mut self, delay_ms: f64) -> Self {
        self.delay_ms = delay_ms;
        self
    }
}

/// Builds a log: each method appends one event with the next `seq` and the current time, using
/// the current turn, step and attempt numbers.
#[derive(Debug, Clone, Default)]
pub struct History {
    pub events: Vec<Envelope>,
    pub time: u64,
    pub turn: u32,
    pub step: u32,
    pub attempt: u32,
    pub provider: String,
    /// The failure of the latest `request/error`.
    pub failure: Option<Failure>,
}

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

    /// A log with no events at all.
    pub fn empty() -> Self {
        Self { provider: "mock".into(), ..Self::default() }
    }

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

    pub fn wait(&mut self, ms: u64) -> &mut Self {
        self.time += ms;
        self
    }

    pub fn user(&mut self) -> &mut Self {
        self.push(Event::UserMessage(UserMessage { text: "hello".into() }))
    }

    pub fn turn(&mut self) -> &mut Self {
        self.turn += 1;
        self.step = 0;
        self.push(Event::TurnStart(TurnStart { turn: self.turn }))
    }

    pub fn step(&mut self) -> &mut Self {
        self.step += 1;
        self.attempt = 0;
        self.push(Event::StepStart(StepRef { turn: self.turn, step: self.step }))
    }

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

    pub fn chunk(&mut self) -> &mut Self {
        self.push(Event::AssistantChunk(AssistantChunk {
            turn: self.turn,
            step: self.step,
            attempt: self.attempt,
            text: "par".into(),
        }))
    }

    pub fn error(&mut self, code: &str) -> &mut Self {
        self.failure = Some(failure(code));
        self.push(Event::RequestError(RequestError {
            turn: self.turn,
            step: self.step,
            attempt: self.attempt,
            provider: self.provider.clone(),
            failure: failure(code),
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

    pub fn tool_call(&mut self, id: &str) -> &mut Self {
        self.push(Event::ToolCall(ToolCallEvent {
            turn: self.turn,
            step: self.step,
            id: id.to_owned(),
            name: "echo".into(),
            arguments: serde_json::json!({"text": "hi"}),
        }))
    }

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

    pub fn compacted(&mut self) -> &mut Self {
        self.push(Event::ContextCompacted(ContextCompacted {
            turn: self.turn,
            step: self.step,
            removed: vec![1],
            kept: 2,
        }))
    }

    pub fn step_end(&mut self) -> &mut Self {
        self.push(Event::StepEnd(StepRef { turn: self.turn, step: self.step }))
    }

    pub fn turn_end(&mut self, reason: TurnEndReason) -> &mut Self {
        self.push(Event::TurnEnd(TurnEnd { turn: self.turn, reason }))
    }

    pub fn completed(&mut self) -> &mut Self {
        self.turn_end(TurnEndReason::Completed)
    }

    pub fn idle(&mut self) -> &mut Self {
        self.push(Event::AgentIdle(AgentIdle {}))
    }

    pub fn crashed(&mut self) -> &mut Self {
        self.push(Event::PluginCrashed(PluginCrashed {
            plugin: "auto-retry".into(),
            error: "boom".into(),
            restarts: 1,
        }))
    }

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

const PROVIDERS: &[&str] = &["mock", "deepseek"];
const CODES: &[&str] = &[
    "RATE_LIMIT",
    "SERVER",
    "TIMEOUT",
    "EMPTY_RESPONSE",
    "QUOTA",
    "AUTH",
    "NO_ADAPTER",
    "CONTEXT_WINDOW_EXCEEDED",
];
const DELAYS: &[f64] = &[500.0, 0.0, 0.5, 1000.7, 2000.0, 10000.0];

/// Draws choices from a byte string (cycling; all zeros when empty).
struct Draw<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Draw<'_> {
    fn pick(&mut self, n: usize) -> usize {
        let byte = if self.bytes.is_empty() { 0 } else { self.bytes[self.at % self.bytes.len()] };
        self.at += 1;
        usize::from(byte) % n
    }
}

/// A step's retry chains, as the plugins count them.
#[derive(Default)]
struct Chains {
    chains: Vec<(String, &'static str, String, u64)>,
}

impl Chains {
    fn count(&self, provider: &str, key: &str) -> u64 {
        self.chains.iter().find(|c| c.0 == provider && c.1 == key).map_or(0, |c| c.3)
    }

    /// The next retry of the chain: (id, retry number).
    fn next(&mut self, provider: &str, key: &'static str, fresh: &mut u64) -> (String, u64) {
        if let Some(chain) = self.chains.iter_mut().find(|c| c.0 == provider && c.1 == key) {
            chain.3 += 1;
            return (chain.2.clone(), chain.3);
        }
        *fresh += 1;
        let id = format!("00000000-0000-4000-8000-{:012}", *fresh);
        self.chains.push((provider.to_owned(), key, id.clone(), 1));
        (id, 1)
    }
}

/// A valid log built from `choices`: turns of steps of attempts; failures recovered by the
/// official chain, auto-retry, always mode, compaction, an always-mode takeover after an aborted
/// auto-retry wait, or not at all (a stop, or a cancel during the wait); tool calls; diagnostics.
pub fn generate(choices: &[u8]) -> Vec<Envelope> {
    let mut d = Draw { bytes: choices, at: 0 };
    let mut h = History::new();
    let mut fresh = 0u64;
    let turns = 1 + d.pick(3);
    for _ in 0..turns {
        if d.pick(4) != 0 {
            h.wait(d.pick(5) as u64).user();
        }
        h.turn();
        let steps = 1 + d.pick(3);
        let mut ended = false;
        'steps: for step in 1..=steps {
            h.wait(d.pick(3) as u64).step();
            let mut chains = Chains::default();
            loop {
                let provider = PROVIDERS[d.pick(PROVIDERS.len())];
                h.wait(d.pick(3) as u64).request(provider);
                for _ in 0..d.pick(3) {
                    h.wait(d.pick(3) as u64).chunk();
                }
                match d.pick(10) {
                    0 => {
                        h.crashed();
                    }
                    1 => {
                        h.config_changed();
                    }
                    _ => {}
                }
                let fails = h.attempt < 8 && d.pick(5) < 2;
                if !fails {
                    let tools: Vec<String> = if step < steps {
                        (0..=d.pick(2)).map(|i| format!("call-{}-{step}-{i}", h.turn)).collect()
                    } else {
                        Vec::new()
                    };
                    let ids: Vec<&str> = tools.iter().map(String::as_str).collect();
                    h.wait(1).message(&ids);
                    for id in &ids {
                        h.tool_call(id);
                    }
                    for id in &ids {
                        h.wait(d.pick(4) as u64).tool_result(id);
                    }
                    h.step_end();
                    break;
                }
                let code = CODES[d.pick(CODES.len())];
                h.wait(1).error(code);
                let hard_floor = rein_event::failure::HARD_FLOOR.contains(&code);
                let official_ok =
                    OFFICIAL_CODES.contains(&code) && chains.count(provider, OFFICIAL_KEY) < 2;
                let auto_ok = !hard_floor && chains.count(provider, AUTO_KEY) < 3;
                let delay = DELAYS[d.pick(DELAYS.len())];
                let mut schedule = |h: &mut History, key: &'static str, start: bool| {
                    let (id, n) = chains.next(provider, key, &mut fresh);
                    let retry = match key {
                        OFFICIAL_KEY => Retry::official(&id, n),
                        AUTO_KEY => Retry::auto(&id, n),
                        _ => Retry::always(&id, n),
                    }
                    .delay(delay);
                    if start {
                        h.retried(retry);
                    } else {
                        h.retry(retry);
                    }
                };
                match d.pick(8) {
                    0 | 1 if official_ok => schedule(&mut h, OFFICIAL_KEY, true),
                    2 if auto_ok => schedule(&mut h, AUTO_KEY, true),
                    3 => schedule(&mut h, ALWAYS_KEY, true),
                    4 if code == "CONTEXT_WINDOW_EXCEEDED" => {
                        h.compacted();
                    }
                    5 if auto_ok => {
                        // auto-retry's wait is aborted (enabled = false); always mode takes over.
                        schedule(&mut h, AUTO_KEY, false);
                        h.wait(d.pick(5) as u64).config_changed();
                        schedule(&mut h, ALWAYS_KEY, true);
                    }
                    6 => {
                        // Cancelled during the wait: no llm/retry-started.
                        schedule(&mut h, ALWAYS_KEY, false);
                        h.wait(d.pick(50) as u64).step_end();
                        h.turn_end(TurnEndReason::Aborted { cause: CancelCause::User });
                        ended = true;
                        break 'steps;
                    }
                    _ => {
                        let failure = h.failure.clone().expect("a failure");
                        h.step_end().turn_end(TurnEndReason::Error { failure });
                        ended = true;
                        break 'steps;
                    }
                }
            }
        }
        if !ended {
            let reason =
                if d.pick(6) == 0 { TurnEndReason::MaxSteps } else { TurnEndReason::Completed };
            h.turn_end(reason);
        }
        if d.pick(2) == 0 {
            h.idle();
        }
    }
    h.build()
}
