//! `auto-retry`: the downstream takeover, re-creating the `dsh-plugin-auto-retry` JavaScript
//! plugin.
//!
//! Registered after `llm-retry`, it takes over exactly the failures the official executor hands
//! back — codes it does not retry, a budget it spent — and retries them a few more times,
//! continuing the official backoff curve rather than restarting it. The official executor never
//! consults downstream when it retries, so a failure it handles never reaches `auto-retry`:
//! double retries are impossible by construction. Its retries are ordinary `llm/retry` events
//! (`plugin: "auto-retry"`, mode `normal`) in a chain of its own (its `policyKey` starts with
//! `"auto-retry"`), so the retry-chain projection and the invariants understand them.
//!
//! # Layout
//!
//! Pure core (no tokio, no ractor):
//! - [`settings`]: [`AutoRetrySettings`] — defaults, bounds, the lenient configuration file, the
//!   strict run-time patch, the `policyKey`.
//! - [`catalogue`]: the codes in three groups (on by default, opt in, never retried), as data a
//!   settings page renders.
//! - [`decision`]: what to do with a failure, before and after consulting downstream, and the
//!   `llm/retry` of a scheduled retry.
//!
//! Shell:
//! - [`plugin`]: [`AutoRetry`], the runtime [`Plugin`](rein_runtime::plugin::Plugin): settings
//!   behind a [`Revisioned`](crate::settings::Revisioned) fence (readable, checkable and
//!   patchable at run time), the decision, and the retry performed by [`crate::schedule`] like
//!   `llm-retry`'s; [`factory`] builds it from a configuration value, leniently.

pub mod catalogue;
pub mod decision;
pub mod plugin;
pub mod settings;

pub use catalogue::{CATALOGUE, Catalogue, CodeGroup, CodeInfo};
pub use decision::{Decision, Declined, DelaySource, Failed, Gone, Schedule};
pub use plugin::{AutoRetry, factory};
pub use settings::AutoRetrySettings;

/// The name the plugin is registered under (scenarios, the CLI, `llm/retry.plugin`, the first
/// element of its `policyKey`).
pub const NAME: &str = "auto-retry";
