//! [`Simulated`]: an embedded provider with a seeded, realistic fault model, so the retry
//! machinery can be seen working with no key and no server.
//!
//! Each attempt streams a plausible answer word by word (a latency before the first word, a
//! shorter one between words) — or, at configurable rates, fails the way a real provider does:
//! a 429 with a `Retry-After` (`providerRetryAfterMs`), a 5xx, a connection dropped mid-answer
//! (`TRANSPORT`), or a stall that lasts until the turn is cancelled or the dead-air watchdog
//! ends it (`TIMEOUT`, the same default as the real adapter's). Deterministic for a seed
//! (see `plan`), and every wait is a `tokio::time` sleep, so it runs on paused time in tests and
//! scenarios.

use std::fmt;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

use rein_runtime::BoxFuture;
use rein_runtime::failure::Failure;
use rein_runtime::provider::{Adapter, ChunkSink, Completion, Request};
use tracing::Instrument;

use crate::answer::Assembled;
use crate::config::{DEFAULT_IDLE_TIMEOUT, ProviderConfigError};
use crate::telemetry;

mod answer;
mod plan;

use plan::Outcome;

/// The simulated provider's `gen_ai.provider.name`.
pub const NAME: &str = "simulated";

/// The simulated provider's fault model and pace. Rates are probabilities per attempt, each in
/// `[0, 1]`, summing to at most 1.
#[derive(Debug, Clone, PartialEq)]
pub struct SimulatedConfig {
    /// The seed: the same seed replays the same answers, faults and latencies.
    pub seed: u64,
    /// The model name it answers as (a route's model).
    pub model: String,
    /// How often an attempt is refused with a 429.
    pub rate_limit_rate: f64,
    /// The `Retry-After` of a 429, in milliseconds.
    pub retry_after_ms: RangeInclusive<u64>,
    /// How often an attempt fails with a 5xx (500, 502 or 503).
    pub server_error_rate: f64,
    /// How often the connection drops mid-answer.
    pub drop_rate: f64,
    /// How often the stream stalls.
    pub stall_rate: f64,
    /// The wait before the first word (and before an HTTP fault), in milliseconds.
    pub first_chunk_latency_ms: RangeInclusive<u64>,
    /// The wait between words, in milliseconds.
    pub chunk_latency_ms: RangeInclusive<u64>,
    /// How long a stall lasts before it fails `TIMEOUT`; `None`: until cancelled.
    pub idle_timeout: Option<Duration>,
    /// Whether the session id is part of what the draws are keyed by. `true` (the default):
    /// every session of a seed meets its own faults and answers. `false`: the draws depend on
    /// the seed and the attempt's place (turn, step, attempt) only, so a one-session program
    /// (`rein chat`) replays by its seed alone, whatever its session's fresh id.
    pub per_session: bool,
    /// On what share of the steps that answer a prompt the answer calls the first tool the
    /// request offers (its arguments `{}`), in `[0, 1]`; the step after the tool's result answers
    /// in words. 0 (the default): never.
    pub tool_call_rate: f64,
}

impl Default for SimulatedConfig {
    /// Seed 0; 15 % rate limits (Retry-After 0.5–3 s), 10 % server errors, 5 % drops, 2 %
    /// stalls (ended by a 300 s watchdog); 200–900 ms to the first word, 20–90 ms between
    /// words; draws keyed per session.
    fn default() -> Self {
        Self {
            seed: 0,
            model: "simulated-1".to_owned(),
            rate_limit_rate: 0.15,
            retry_after_ms: 500..=3000,
            server_error_rate: 0.10,
            drop_rate: 0.05,
            stall_rate: 0.02,
            first_chunk_latency_ms: 200..=900,
            chunk_latency_ms: 20..=90,
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            per_session: true,
            tool_call_rate: 0.0,
        }
    }
}

impl SimulatedConfig {
    /// The default pace with no fault at all.
    pub fn faultless(seed: u64) -> Self {
        Self {
            seed,
            rate_limit_rate: 0.0,
            server_error_rate: 0.0,
            drop_rate: 0.0,
            stall_rate: 0.0,
            ..Self::default()
        }
    }

    /// Checks the rates and ranges; the error names the field.
    pub fn validate(&self) -> Result<(), ProviderConfigError> {
        let invalid = |field: &str, reason: String| {
            Err(ProviderConfigError::Invalid { field: field.to_owned(), reason })
        };
        let rates = [
            ("rate_limit_rate", self.rate_limit_rate),
            ("server_error_rate", self.server_error_rate),
            ("drop_rate", self.drop_rate),
            ("stall_rate", self.stall_rate),
        ];
        for (field, rate) in rates.into_iter().chain([("tool_call_rate", self.tool_call_rate)]) {
            if !(0.0..=1.0).contains(&rate) {
                return invalid(field, format!("must be within [0, 1], got {rate}"));
            }
        }
        let sum: f64 = rates.iter().map(|(_, r)| r).sum();
        if sum > 1.0 + 1e-9 {
            return invalid("stall_rate", format!("the rates must sum to at most 1, got {sum}"));
        }
        let ranges = [
            ("retry_after_ms", &self.retry_after_ms),
            ("first_chunk_latency_ms", &self.first_chunk_latency_ms),
            ("chunk_latency_ms", &self.chunk_latency_ms),
        ];
        for (field, range) in ranges {
            if range.start() > range.end() {
                return invalid(field, format!("empty range {range:?}"));
            }
        }
        if *self.retry_after_ms.start() == 0 {
            return invalid("retry_after_ms", "must start above 0".to_owned());
        }
        if self.model.trim().is_empty() {
            return invalid("model", "must not be empty".to_owned());
        }
        Ok(())
    }
}

/// The simulated provider (an [`Adapter`]).
#[derive(Clone)]
pub struct Simulated {
    config: Arc<SimulatedConfig>,
}

impl fmt::Debug for Simulated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Simulated").field("config", &self.config).finish()
    }
}

impl Simulated {
    /// A simulated provider with `config` (checked).
    pub fn new(config: SimulatedConfig) -> Result<Self, ProviderConfigError> {
        config.validate()?;
        Ok(Self { config: Arc::new(config) })
    }

    /// Its configuration.
    pub fn config(&self) -> &SimulatedConfig {
        &self.config
    }

    /// The model a route on it should request.
    pub fn model(&self) -> &str {
        &self.config.model
    }
}

impl Adapter for Simulated {
    fn call(
        &self,
        request: Request,
        chunks: ChunkSink,
    ) -> BoxFuture<'static, Result<Completion, Failure>> {
        let plan = plan::plan(&self.config, &request);
        let idle = self.config.idle_timeout;
        let model = request.model.clone();
        let span = telemetry::attempt_span(NAME, &request);
        let record = span.clone();
        Box::pin(
            async move {
                let mut text = String::new();
                for (delay, chunk) in plan.chunks {
                    pause(delay).await;
                    text.push_str(&chunk);
                    let _ = chunks.send(chunk);
                }
                let outcome = match plan.outcome {
                    Outcome::Reply(usage, tool_calls) => Ok(Assembled {
                        text,
                        reasoning: String::new(),
                        finish_reason: Some(
                            if tool_calls.is_empty() { "stop" } else { "tool_calls" }.to_owned(),
                        ),
                        completion: Completion { tool_calls, usage: Some(usage) },
                        response_model: Some(model),
                    }),
                    Outcome::Fail(delay, failure) => {
                        pause(delay).await;
                        Err(failure)
                    }
                    Outcome::Stall => match idle {
                        Some(silence) => {
                            tokio::time::sleep(silence).await;
                            Err(plan::stalled(silence))
                        }
                        None => std::future::pending().await,
                    },
                };
                telemetry::record(&record, &outcome);
                outcome.map(|answer| answer.completion)
            }
            .instrument(span),
        )
    }
}

/// Waits `delay` (not at all for zero, so a zero-latency configuration answers in its first
/// poll).
async fn pause(delay: Duration) {
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_configs_name_the_field() {
        let base = SimulatedConfig::default();
        let cases = [
            (
                SimulatedConfig { rate_limit_rate: 1.5, ..base.clone() },
                "rate_limit_rate: must be within [0, 1]",
            ),
            (
                SimulatedConfig { drop_rate: -0.1, ..base.clone() },
                "drop_rate: must be within [0, 1]",
            ),
            (
                SimulatedConfig { stall_rate: f64::NAN, ..base.clone() },
                "stall_rate: must be within [0, 1]",
            ),
            (
                SimulatedConfig { rate_limit_rate: 0.6, server_error_rate: 0.6, ..base.clone() },
                "stall_rate: the rates must sum to at most 1",
            ),
            #[allow(clippy::reversed_empty_ranges)]
            (
                SimulatedConfig { chunk_latency_ms: 5..=1, ..base.clone() },
                "chunk_latency_ms: empty range",
            ),
            (
                SimulatedConfig { retry_after_ms: 0..=10, ..base.clone() },
                "retry_after_ms: must start above 0",
            ),
            (SimulatedConfig { model: " ".into(), ..base.clone() }, "model: must not be empty"),
        ];
        for (config, expected) in cases {
            let error = Simulated::new(config).unwrap_err().to_string();
            assert!(error.starts_with(expected), "{error}");
        }
        assert!(Simulated::new(base).is_ok());
    }
}
