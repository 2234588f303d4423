//! `llm-retry`: the official retry executor (`docs/runtime-semantics.md`, "Retry policies and
//! `llm-retry` decisions"), re-creating the `@deepseek-ai/dsh-llm-retry` JavaScript executor.
//!
//! It retries selected transient failures of a provider route through the request-error
//! waterfall: for each failure it decides from the route's effective policy (which the runtime
//! puts in the waterfall payload), appends `llm/retry` before waiting, waits the backoff (or the
//! provider's own delay) while the turn stays live, appends `llm/retry-started` and answers
//! `Retry`.
//!
//! # Layout
//!
//! Pure core (no tokio, no ractor):
//! - [`config`]: the plugin configuration with the original executor's keys, read strictly into
//!   the normal policy it describes (the runtime's default route policy).
//! - [`decision`]: the normal-mode (§5.3) and always-mode (§5.6) decisions.
//!
//! Shell:
//! - [`plugin`]: [`LlmRetry`], the runtime [`Plugin`](rein_runtime::plugin::Plugin): reads the
//!   chain from the retry-chain projection, calls the decision, performs it through
//!   [`crate::schedule`]; [`factory`] builds it from a configuration value.
//!
//! The policy type itself, its declared form, the effective-policy resolution and the
//! `policyKey` are runtime vocabulary ([`rein_runtime::retry_policy`]); the curve is
//! [`crate::backoff`].
//!
//! # Why the decision is split from the actor
//!
//! Every branch of the decision (normal and always mode) is a pure function with a table test; the
//! actor only gathers the inputs (payload, retry-chain projection, downstream answer, jitter),
//! performs the result (append, wait, answer) and owns the cancellable waits.

pub mod config;
pub mod decision;
pub mod plugin;

pub use config::LlmRetryConfig;
pub use decision::{ChainId, Consulted, Decision, DelaySource, Delegation, Schedule};
pub use plugin::{LlmRetry, factory};

/// The name the plugin is registered under (scenarios, the CLI, `llm/retry.plugin`).
pub const NAME: &str = "llm-retry";
