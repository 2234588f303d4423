//! rein-plugins: rein's retry plugins.
//!
//! # Layout
//!
//! Pure core first:
//! - [`backoff`]: the backoff curve of SPEC §5.2, a pure function of the retry number and a
//!   jitter sample.
//! - [`llm_retry`]: the official executor `llm-retry` (SPEC §5): its strict configuration
//!   ([`llm_retry::config`]) and its normal/always decisions ([`llm_retry::decision`]).
//!
//! Shells:
//! - [`schedule`]: schedule, wait, start (SPEC §5.5) — `llm/retry` durable before a cancellable
//!   wait, then `llm/retry-started`; shared by every plugin that writes `llm/retry`.
//! - [`llm_retry::plugin`]: [`LlmRetry`](llm_retry::LlmRetry), the plugin the runtime runs; build
//!   it from a configuration value with [`llm_retry::factory`] (registered as `llm-retry`).

pub mod backoff;
pub mod llm_retry;
pub mod schedule;
