//! rein-plugins: rein's retry plugins.
//!
//! # Layout
//!
//! Pure core first:
//! - [`backoff`]: the backoff curve, a pure function of the retry number and a jitter sample.
//! - [`llm_retry`]: the official executor `llm-retry`: its strict configuration
//!   ([`llm_retry::config`]) and its normal/always decisions ([`llm_retry::decision`]).
//! - [`settings`]: plugin settings and the two ways they arrive — a configuration file read
//!   leniently (each fallback a warning), a run-time patch read strictly behind a revision fence
//!   ([`settings::Revisioned`]).
//! - [`auto_retry`]: the downstream takeover `auto-retry`: its settings, its code catalogue and
//!   its decision.
//! - [`compaction`]: `compaction`, the context-overflow recovery: its settings, the cut rule
//!   that shrinks the model-visible history, and its decision.
//! - [`fallback`]: `fallback`, route failover: its strict settings, its decision (switch now, or
//!   after the rest of the chain gave up) and the cooldown table.
//! - [`scripted`]: the answer list and strict configuration of `scripted`, the waterfall's test
//!   double (its thin [`ScriptedPlugin`](scripted::ScriptedPlugin) shell is in the same file).
//!
//! Shells:
//! - [`schedule`]: schedule, wait, start — `llm/retry` durable before a cancellable wait, then
//!   `llm/retry-started`; shared by every plugin that writes `llm/retry`.
//! - [`throttle`]: a retry declined because the route's retry budget is spent —
//!   `retry/throttled`, then `Next`; shared by `llm-retry` and `auto-retry`.
//! - [`llm_retry::plugin`]: [`LlmRetry`](llm_retry::LlmRetry), the plugin the runtime runs; build
//!   it from a configuration value with [`llm_retry::factory`].
//! - [`auto_retry::plugin`]: [`AutoRetry`](auto_retry::AutoRetry), with its run-time settings
//!   and the switch that ends its waits; [`auto_retry::factory`].
//! - [`compaction::plugin`]: [`Compaction`](compaction::Compaction); [`compaction::factory`].
//! - [`fallback::plugin`]: [`Fallback`](fallback::Fallback), with the runtime's cooldowns;
//!   [`fallback::factory`].
//! - [`ALL`]: every plugin of the crate under its name, with the factory that builds it from a
//!   configuration value.
//!
//! The default chain is [`DEFAULT_CHAIN`]: `llm-retry`, `compaction`, `auto-retry` — the
//! official executor first (it never consults downstream when it retries), then the overflow
//! recovery, then the takeover of what both declined. Their budgets are independent and add up.
//! `fallback` is not in it — it needs the routes to fall back to — and goes first when
//! configured ([`FALLBACK_FIRST`]): it lets the whole chain retry the failing route before it
//! moves the step to another.
//!
//! # Quick start
//!
//! The default chain, each plugin built from its configuration, on a provider that answers only
//! its sixth attempt: `llm-retry` spends its two retries, `auto-retry` takes over with three of
//! its own, and the log says who retried what.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU32, Ordering};
//!
//! use rein_plugins::{ALL, DEFAULT_CHAIN};
//! use rein_runtime::prelude::*;
//! use rein_runtime::provider::prelude::*;
//! use serde_json::json;
//!
//! /// Fails with a 503 five times, then answers.
//! #[derive(Default)]
//! struct Overloaded(AtomicU32);
//!
//! impl Adapter for Overloaded {
//!     fn call(&self, _: Request, chunks: ChunkSink) -> BoxFuture<'static, Result<Completion, Failure>> {
//!         let call = self.0.fetch_add(1, Ordering::SeqCst) + 1;
//!         Box::pin(async move {
//!             if call <= 5 {
//!                 return Err(Failure::new("SERVER", "503 overloaded").expect("a valid failure"));
//!             }
//!             let _ = chunks.send("at last".into());
//!             Ok(Completion::default())
//!         })
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let configs = [
//!     json!({"maxTransientRetries": 2}), // llm-retry: the routes' default policy
//!     json!({}),                         // compaction: its defaults
//!     json!({"extraRetries": 3}),        // auto-retry
//! ];
//! let mut builder = Runtime::builder()
//!     .clock(Arc::new(VirtualClock::start())) // the waits pass on tokio's paused clock
//!     .route(Route::new("main", Arc::new(Overloaded::default())).model("m-1"));
//! for (name, config) in DEFAULT_CHAIN.iter().zip(&configs) {
//!     let (_, factory) = ALL.iter().find(|(known, _)| known == name).expect("in ALL");
//!     let built = factory(config)?;
//!     assert!(built.warnings.is_empty(), "{:?}", built.warnings);
//!     builder = builder.plugin(built);
//! }
//! let runtime = builder.build().await?;
//! assert_eq!(runtime.plugins(), DEFAULT_CHAIN);
//!
//! let session = runtime.session("s").await?;
//! let outcome = session.ask("hi").await?;
//! assert_eq!(outcome.reason, TurnEndReason::Completed);
//!
//! let retried_by: Vec<(String, u64)> = session
//!     .events()
//!     .await?
//!     .into_iter()
//!     .filter_map(|e| match e.event {
//!         Event::LlmRetry(retry) => Some((retry.plugin, retry.retry)),
//!         _ => None,
//!     })
//!     .collect();
//! let by = |plugin: &str, n: u64| (plugin.to_owned(), n);
//! assert_eq!(
//!     retried_by,
//!     [by("llm-retry", 1), by("llm-retry", 2), by("auto-retry", 1), by("auto-retry", 2), by("auto-retry", 3)]
//! );
//! runtime.shutdown().await;
//! # Ok(())
//! # }
//! ```

pub mod auto_retry;
pub mod backoff;
pub mod compaction;
pub mod fallback;
pub mod llm_retry;
pub mod schedule;
pub mod scripted;
pub mod settings;
pub mod throttle;

use rein_runtime::plugin::{BuiltPlugin, ConfigError};
use serde_json::Value;

/// Builds a plugin from its configuration value (what a scenario's `plugins[i].config` or the
/// CLI's configuration holds): strictly for `llm-retry`, `fallback` and `scripted` (an error
/// names the field),
/// leniently for `compaction` and `auto-retry` (their fallbacks come back as warnings).
pub type Factory = fn(&Value) -> Result<BuiltPlugin, ConfigError>;

/// Every plugin of this crate under its name (`llm-retry`, `compaction`, `auto-retry`,
/// `fallback`, and the test double `scripted`), with the factory that builds it: what a scenario
/// runner or a CLI registers.
pub const ALL: &[(&str, Factory)] = &[
    (llm_retry::NAME, llm_retry::factory),
    (compaction::NAME, compaction::factory),
    (auto_retry::NAME, auto_retry::factory),
    (fallback::NAME, fallback::factory),
    (scripted::NAME, scripted_factory),
];

/// The plugins of the default chain, in chain order (first = outermost).
pub const DEFAULT_CHAIN: [&str; 3] = [llm_retry::NAME, compaction::NAME, auto_retry::NAME];

/// The default chain with `fallback` configured: `fallback` first, then [`DEFAULT_CHAIN`].
pub const FALLBACK_FIRST: [&str; 4] =
    [fallback::NAME, llm_retry::NAME, compaction::NAME, auto_retry::NAME];

fn scripted_factory(config: &Value) -> Result<BuiltPlugin, ConfigError> {
    scripted::factory(config).map(BuiltPlugin::strict)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_plugin_is_listed_under_its_own_name() {
        let names: Vec<&str> = ALL.iter().map(|(name, _)| *name).collect();
        assert_eq!(names, ["llm-retry", "compaction", "auto-retry", "fallback", "scripted"]);
        for (name, factory) in ALL {
            // `fallback` has no default routes: its configuration must name them.
            let config =
                if *name == fallback::NAME { json!({"routes": ["backup"]}) } else { json!({}) };
            let built = factory(&config).unwrap();
            assert_eq!(built.plugin.name(), *name);
            assert!(built.warnings.is_empty(), "{name}: {:?}", built.warnings);
        }
        for name in DEFAULT_CHAIN.iter().chain(&FALLBACK_FIRST) {
            assert!(names.contains(name), "{name}");
        }
        assert_eq!(FALLBACK_FIRST[1..], DEFAULT_CHAIN, "fallback first, then the default chain");
        assert_eq!(
            fallback::factory(&json!({})).unwrap_err().to_string(),
            "routes: required: the routes to fall back to, in order of preference",
            "a strict reader refuses, naming the field"
        );
        let built = auto_retry::factory(&json!({"extraRetries": "3"})).unwrap();
        let warnings: Vec<String> = built.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(
            warnings,
            ["extraRetries: must be an integer, got \"3\"; using the default 3"],
            "a lenient reader's fallbacks come back with the plugin"
        );
    }

    #[test]
    fn a_typo_in_any_plugins_configuration_reaches_the_caller_naming_the_field() {
        // (plugin, configuration with a typo'd key, what the caller gets)
        let cases: [(&str, Value, &str); 4] = [
            (
                llm_retry::NAME,
                json!({"maxTransientRetires": 3}),
                "error: maxTransientRetires: unknown key",
            ),
            (
                compaction::NAME,
                json!({"keepRecentMesages": 3}),
                "warning: keepRecentMesages: unknown key",
            ),
            (auto_retry::NAME, json!({"extraRetrys": 3}), "warning: extraRetrys: unknown key"),
            (
                fallback::NAME,
                json!({"routes": ["backup"], "maxWaitMS": 1}),
                "error: maxWaitMS: unknown key",
            ),
        ];
        for (name, config, expected) in cases {
            let (_, factory) = ALL.iter().find(|(known, _)| *known == name).unwrap();
            let got = match factory(&config) {
                Err(error) => format!("error: {error}"),
                Ok(built) => {
                    let warnings: Vec<String> =
                        built.warnings.iter().map(|w| format!("warning: {w}")).collect();
                    assert_eq!(warnings.len(), 1, "{name}: {warnings:?}");
                    warnings[0].clone()
                }
            };
            assert!(got.starts_with(expected), "{name}: {got}");
        }
        // The typed constructors say the same, and a registry's prefix reaches the path.
        let typo = auto_retry::AutoRetry::from_config(&json!({"extraRetrys": 3})).unwrap();
        let typo = typo.within("plugins[2].config");
        assert!(typo.warnings[0].to_string().starts_with("plugins[2].config.extraRetrys: unknown"));
        let refused = llm_retry::LlmRetry::from_config(&json!({"maxTransientRetires": 3}));
        let refused = refused.unwrap_err().within("plugins[0].config");
        assert!(refused.to_string().starts_with("plugins[0].config.maxTransientRetires: unknown"));
    }

    #[tokio::test]
    async fn a_runtime_keeps_every_plugins_warnings_with_its_name() {
        let auto_retry = auto_retry::AutoRetry::from_config(&json!({"extraRetrys": 3})).unwrap();
        let compaction = compaction::Compaction::from_config(&json!({"keepRecentMessages": 0}));
        let runtime = rein_runtime::runtime::Runtime::builder()
            .plugin(llm_retry::LlmRetry::default())
            .plugin(compaction.unwrap())
            .plugin(auto_retry)
            .build()
            .await
            .unwrap();
        let warnings: Vec<String> =
            runtime.config_warnings().iter().map(ToString::to_string).collect();
        assert_eq!(
            warnings,
            [
                "plugin compaction: keepRecentMessages: 0 is outside 1..=1000; clamped to 1",
                "plugin auto-retry: extraRetrys: unknown key (expected one of: enabled, \
                 extraRetries, initialDelayMs, maxDelayMs, jitterRatio, retryableCodes); ignored",
            ]
        );
        assert_eq!(runtime.plugins(), DEFAULT_CHAIN, "in the order of registration");
        runtime.shutdown().await;
    }
}
