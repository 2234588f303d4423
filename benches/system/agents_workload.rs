//! The `agents` workload, defined here so the bench does not depend on an example file: every
//! agent is a session with one turn on a provider of 2 ms per attempt. Step 1's first attempt is
//! rate limited (a 429 with no `Retry-After`: the retry waits the backoff), its second streams
//! one chunk and asks for the `echo` tool with the session's id; step 2 streams one chunk and
//! answers. One agent in ten is cancelled right after its prompt.
//!
//! The chain is the default one with its delays scaled down to milliseconds: `llm-retry` (2
//! transient retries, 5 ms doubling to 100 ms, 10 % jitter), `compaction`, `auto-retry` (5 ms
//! to 100 ms). rein, the bare actors (`bare_agents`) and the hand-rolled loop all run this
//! provider and these delays, and write the same `llm/retry` lines.

use std::time::Duration;

use backon::{BackoffBuilder as _, ExponentialBackoff, ExponentialBuilder};
use rein::runtime::BoxFuture;
use rein::runtime::event::{LlmRetry, StepRef, ToolCall};
use rein::runtime::failure::Failure;
use rein::runtime::provider::{Adapter, ChunkSink, Completion, Request};
use serde_json::{Value, json};

/// What each agent asks.
pub(crate) const PROMPT: &str = "Please echo my name";
/// Every `CANCELLED`-th agent (from agent 0) is cancelled right after its prompt.
pub(crate) const CANCELLED: usize = 10;
/// The provider's time per attempt.
pub(crate) const LATENCY: Duration = Duration::from_millis(2);
/// The first backoff and its ceiling (ms), and llm-retry's jitter.
pub(crate) const BACKOFF_MS: (u64, u64) = (5, 100);
pub(crate) const JITTER: f64 = 0.1;
/// llm-retry's transient retries, then auto-retry's.
pub(crate) const RETRIES: (usize, usize) = (2, 2);
/// What step 1 streams before its tool call, and what step 2 answers.
pub(crate) const CHUNKS: (&str, &str) = ("Let me echo that.", "Done.");

/// The route and model the workload's requests name.
pub(crate) const ROUTE: (&str, &str) = ("sim", "sim-1");
/// The policy key the `llm/retry` lines carry (llm-retry's, as rein writes it).
const POLICY_KEY: &str = r#"["normal",2,["RATE_LIMIT","SERVER","TIMEOUT","TRANSPORT"],5,100,0.1]"#;

/// The session id of agent `index`.
pub(crate) fn session_id(index: usize) -> String {
    format!("agent-{index:05}")
}

/// llm-retry's settings.
pub(crate) fn llm_retry_settings() -> Value {
    json!({"maxTransientRetries": RETRIES.0, "initialDelayMs": BACKOFF_MS.0,
           "maxDelayMs": BACKOFF_MS.1, "jitterRatio": JITTER})
}

/// auto-retry's settings.
pub(crate) fn auto_retry_settings() -> Value {
    json!({"extraRetries": RETRIES.1, "initialDelayMs": BACKOFF_MS.0, "maxDelayMs": BACKOFF_MS.1})
}

/// The backoff of a step's retries: llm-retry's, then auto-retry's, from the first delay
/// doubling to the ceiling (before jitter).
pub(crate) fn backoff() -> ExponentialBackoff {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(BACKOFF_MS.0))
        .with_max_delay(Duration::from_millis(BACKOFF_MS.1))
        .with_factor(2.0)
        .with_max_times(RETRIES.0 + RETRIES.1)
        .build()
}

/// `delay` with llm-retry's jitter (± [`JITTER`]).
pub(crate) fn jittered(delay: Duration) -> Duration {
    delay.mul_f64(1.0 + JITTER * (2.0 * rand::random::<f64>() - 1.0))
}

/// The `llm/retry` that retry number `retry` of chain `retry_id` writes before its wait.
pub(crate) fn retry_event(
    retry_id: &str,
    retry: u64,
    at: StepRef,
    delay: Duration,
    failure: Failure,
) -> LlmRetry {
    LlmRetry {
        retry_id: retry_id.to_owned(),
        turn: at.turn,
        step: at.step,
        provider: ROUTE.0.to_owned(),
        plugin: "llm-retry".to_owned(),
        mode: "normal".to_owned(),
        policy_key: POLICY_KEY.to_owned(),
        retry,
        max_retries: Some(RETRIES.0 as u64),
        delay_ms: delay.as_secs_f64() * 1000.0,
        failure,
    }
}

/// The tool call step 1 asks for.
pub(crate) fn echo_call(session: &str) -> ToolCall {
    ToolCall { id: "call-1".into(), name: "echo".into(), arguments: json!({"text": session}) }
}

/// The workload's provider.
pub(crate) struct AgentsProvider {
    rate_limit: Failure,
}

impl AgentsProvider {
    pub(crate) fn new() -> anyhow::Result<Self> {
        Ok(Self { rate_limit: Failure::new("RATE_LIMIT", "429: slow down")?.with_status(429)? })
    }
}

impl Adapter for AgentsProvider {
    fn call(
        &self,
        request: Request,
        chunks: ChunkSink,
    ) -> BoxFuture<'static, Result<Completion, Failure>> {
        let answer = match (request.step, request.attempt) {
            (1, 1) => Err(self.rate_limit.clone()),
            (1, _) => Ok((CHUNKS.0, vec![echo_call(&request.session)])),
            _ => Ok((CHUNKS.1, vec![])),
        };
        Box::pin(async move {
            tokio::time::sleep(LATENCY).await;
            let (chunk, tool_calls) = answer?;
            let _ = chunks.send(chunk.to_owned());
            Ok(Completion { tool_calls, usage: None })
        })
    }
}
