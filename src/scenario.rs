//! Scenario runs with everything rein ships: the plugins of `rein-plugins` registered under
//! their names, the `echo` tool, and the invariant checker of `rein-invariant` judging every log.
//!
//! The runtime's [`ScenarioRunner`] knows no plugin and no rule (it cannot import either); this
//! module is where the family is assembled, for the `rein scenario run` command and for programs
//! and tests that want the same behaviour.

use rein_runtime::event::Envelope;
use rein_runtime::validator::Rejection;
use rein_scenario::{PluginRegistry, ScenarioRunner};

pub use rein_scenario::{
    InvalidScenario, Report, RunError, RunOutcome, Scenario, ToolRegistry, report, scripted,
};

/// The plugins a scenario may `use`, by name: every plugin of `rein-plugins`
/// ([`rein_plugins::ALL`]).
pub fn plugins() -> PluginRegistry {
    let mut registry = PluginRegistry::new();
    for (name, factory) in rein_plugins::ALL {
        registry.register_lenient(*name, *factory);
    }
    registry
}

/// A runner with [`plugins`], the default tools and the invariant checker ([`check`]).
pub fn runner() -> ScenarioRunner {
    ScenarioRunner::new().plugins(plugins()).checker(check)
}

/// The report's invariant verdict: every rule of the session-log contract over the finished log
/// (a turn left open is a violation too, since a run ends only when nothing runs).
pub fn check(events: &[Envelope]) -> Vec<Rejection> {
    rein_invariant::check_finished_log(events).into_iter().map(Rejection::from).collect()
}
