//! rein-scenario: scenario files — one session driven deterministically on virtual time by a
//! scripted provider, with the plugins and tools a scenario names, reported as JSON. What rein's
//! `scenario run` command and its tests run; an agent needs none of it (`rein-runtime` alone).
//!
//! # Layout
//!
//! Pure core first:
//! - [`format`](mod@format): the scenario file as validated types; every error names its JSON path.
//! - [`agenda`]: what the run does next (turns in order, actions at their time, deferred retry).
//! - [`report`]: the pure builder of the `--json` report from the session's log.
//! - [`reject`]: [`RejectAppends`], the validator behind a scenario's `reject` (fault injection).
//!
//! Shells:
//! - [`scripted`]: the scripted provider, one script entry per attempt (the scenarios' provider,
//!   and a test double).
//! - [`registry`]: plugin factories and tools by name.
//! - [`runner`]: [`ScenarioRunner`], which runs a scenario on a paused clock and reports.
//!
//! # Quick start
//!
//! A plugin of your own, a provider that fails once, and the report of the run — on virtual
//! time, so a scenario that waits an hour runs at once:
//!
//! ```
//! use std::sync::Arc;
//!
//! use rein_runtime::prelude::*;
//! use rein_runtime::plugin::prelude::*;
//! use rein_scenario::{PluginRegistry, Scenario, ScenarioRunner};
//!
//! /// Retries the first failed attempt of a step after `delay_ms`; delegates the rest.
//! struct RetryOnce {
//!     delay_ms: u64,
//! }
//!
//! impl Plugin for RetryOnce {
//!     fn name(&self) -> &str {
//!         "retry-once"
//!     }
//!     fn recover(self: Arc<Self>, recovery: Recovery) -> BoxFuture<'static, Verdict> {
//!         Box::pin(async move {
//!             if recovery.payload.attempt > 1 {
//!                 return Verdict::Next;
//!             }
//!             let delay = std::time::Duration::from_millis(self.delay_ms);
//!             match recovery.wait(delay).await {
//!                 Ok(()) => Verdict::Retry,
//!                 Err(_interrupted) => Verdict::Stop, // cancelled or disposed meanwhile
//!             }
//!         })
//!     }
//! }
//!
//! let mut plugins = PluginRegistry::new();
//! plugins.register("retry-once", |config: &serde_json::Value| {
//!     let delay_ms = config["delayMs"].as_u64().unwrap_or(1000);
//!     Ok(Arc::new(RetryOnce { delay_ms }) as Arc<dyn Plugin>)
//! });
//! let scenario = Scenario::from_json(r#"{
//!   "plugins": [{"use": "retry-once", "config": {"delayMs": 3600000}}],
//!   "providers": [{"id": "mock", "script": [
//!     {"fail": {"code": "SERVER", "message": "busy", "status": 503}},
//!     {"reply": {"text": "done"}}
//!   ]}],
//!   "turns": [{"prompt": "hello", "provider": "mock"}]
//! }"#)?;
//! let run = ScenarioRunner::new().plugins(plugins).run(&scenario)?;
//!
//! let report = &run.report;
//! assert_eq!(report.turns[0].reason, TurnEndReason::Completed);
//! let starts: Vec<(u64, u32)> = report.requests.iter().map(|r| (r.at_ms, r.attempt)).collect();
//! assert_eq!(starts, [(0, 1), (3_600_000, 2)]); // the hour passed on the virtual clock
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod agenda;
pub mod format;
pub mod registry;
pub mod reject;
pub mod report;
pub mod runner;
pub mod scripted;

pub use format::{InvalidScenario, Scenario};
pub use registry::{PluginRegistry, ToolRegistry};
pub use reject::RejectAppends;
pub use report::Report;
pub use runner::{RunError, RunOutcome, ScenarioRunner};
