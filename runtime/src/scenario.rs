//! Scenarios (SPEC §10): one session driven deterministically on virtual time.
//!
//! Pure core first:
//! - [`format`](mod@format): the scenario file as validated types; every error names its JSON path.
//! - [`agenda`]: what the run does next (turns in order, actions at their time, deferred retry).
//! - [`report`]: the pure builder of the `--json` report from the session's log.
//! - [`reject`]: [`RejectAppends`], the validator behind a scenario's `reject` (fault injection).
//!
//! Shells:
//! - [`registry`]: plugin factories and tools by name.
//! - [`runner`]: [`ScenarioRunner`], which runs a scenario on a paused clock and reports.

pub mod agenda;
pub mod format;
pub mod registry;
pub mod reject;
pub mod report;
pub mod runner;

pub use format::{InvalidScenario, Scenario};
pub use registry::{PluginRegistry, ToolRegistry};
pub use reject::RejectAppends;
pub use report::Report;
pub use runner::{Outcome, RunError, ScenarioRunner};
