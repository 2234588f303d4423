//! rein-plugins: rein's retry plugins.
//!
//! # Layout
//!
//! Pure core first:
//! - [`backoff`]: the backoff curve of SPEC §5.2, a pure function of the retry number and a
//!   jitter sample.
//! - [`llm_retry`]: the official executor `llm-retry` (SPEC §5): its strict configuration
//!   ([`llm_retry::config`]) and its normal/always decisions ([`llm_retry::decision`]).
//! - [`settings`]: plugin settings and the two ways they arrive — a configuration file read
//!   leniently (each fallback a warning), a run-time patch read strictly behind a revision fence
//!   ([`settings::Revisioned`]).
//! - [`auto_retry`]: the downstream takeover `auto-retry`: its settings, its code catalogue and
//!   its decision.
//! - [`compaction`]: `compaction`, the context-overflow recovery: its settings, the cut rule
//!   that shrinks the model-visible history, and its decision.
//! - [`scripted`]: the answer list and strict configuration of `scripted`, the waterfall's test
//!   double (its thin [`ScriptedPlugin`](scripted::ScriptedPlugin) shell is in the same file).
//!
//! Shells:
//! - [`schedule`]: schedule, wait, start (SPEC §5.5) — `llm/retry` durable before a cancellable
//!   wait, then `llm/retry-started`; shared by every plugin that writes `llm/retry`.
//! - [`llm_retry::plugin`]: [`LlmRetry`](llm_retry::LlmRetry), the plugin the runtime runs; build
//!   it from a configuration value with [`llm_retry::factory`].
//! - [`ALL`]: every plugin of the crate under its name, with its factory.

pub mod auto_retry;
pub mod backoff;
pub mod compaction;
pub mod llm_retry;
pub mod schedule;
pub mod scripted;
pub mod settings;

use std::sync::Arc;

use rein_runtime::plugin::{ConfigError, Plugin};
use serde_json::Value;

/// Builds a plugin from its configuration value (what a scenario's `plugins[i].config` or the
/// CLI's configuration holds).
pub type Factory = fn(&Value) -> Result<Arc<dyn Plugin>, ConfigError>;

/// Every plugin of this crate under its name (`llm-retry`, and the test double `scripted`), with
/// the factory that builds it: what a scenario runner or a CLI registers.
pub const ALL: &[(&str, Factory)] =
    &[(llm_retry::NAME, llm_retry::factory), (scripted::NAME, scripted::factory)];

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_plugin_is_listed_under_its_own_name() {
        let names: Vec<&str> = ALL.iter().map(|(name, _)| *name).collect();
        assert_eq!(names, ["llm-retry", "scripted"]);
        for (name, factory) in ALL {
            assert_eq!(factory(&json!({})).unwrap().name(), *name);
        }
    }
}
