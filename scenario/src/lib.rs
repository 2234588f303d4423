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
