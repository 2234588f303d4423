//! The step-routes projection: which provider routes the open step has asked, and the route a
//! `route/switched` sends its next attempt to.
//!
//! A recovery that moves a step to another route writes `route/switched {from, to}` and answers
//! `Retry`; the step reads [`StepRoutes::switched_to`] when it starts that retry and sends it to
//! `to` (see `docs/runtime-semantics.md`, "fallback"). `fallback` reads [`StepRoutes::used`] to
//! pick a route the step has not tried yet. Both reset on `step/start`, `turn/start`,
//! `turn/end` and `agent/idle`, so everything left in the state belongs to the open step.
//!
//! # Why the switch is read from the log
//!
//! The switch is durable before it takes effect, like every other recovery: the event is the
//! instruction. A plugin therefore answers the plain `Retry` every other plugin answers, a
//! plugin that consulted it downstream (llm-retry in always mode accepting a downstream retry)
//! passes that `Retry` on unchanged, and the step goes where the log says — the log, the step and
//! the invariant checker cannot disagree about which route the next attempt uses.

use crate::event::{Envelope, Event};
use crate::projection::Projection;

/// The routes of the open step.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StepRoutes {
    used: Vec<String>,
    switched_to: Option<String>,
}

impl StepRoutes {
    /// The routes the open step's attempts asked (its `request/start`s' providers), each once,
    /// in the order first asked.
    pub fn used(&self) -> &[String] {
        &self.used
    }

    /// Whether an attempt of the open step asked `route`.
    pub fn has_used(&self, route: &str) -> bool {
        self.used.iter().any(|r| r == route)
    }

    /// The `to` of a `route/switched` of the open step that no `request/start` followed yet:
    /// where the step's next attempt goes.
    pub fn switched_to(&self) -> Option<&str> {
        self.switched_to.as_deref()
    }

    /// Folds one event: `request/start` records its provider (and consumes a pending switch),
    /// `route/switched` records its `to`; `step/start`, `turn/start`, `turn/end` and
    /// `agent/idle` clear everything.
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::RequestStart(request) => {
                self.switched_to = None;
                if !self.has_used(&request.provider) {
                    self.used.push(request.provider.clone());
                }
            }
            Event::RouteSwitched(switch) => self.switched_to = Some(switch.to.clone()),
            Event::StepStart(_) | Event::TurnStart(_) | Event::TurnEnd(_) | Event::AgentIdle(_) => {
                self.switched_to = None;
                self.used.clear();
                // An idle session should not keep an old buffer.
                self.used.shrink_to(1);
            }
            _ => {}
        }
    }
}

/// The [`Projection`] that folds [`StepRoutes`]; registered on every session log under
/// [`StepRouteProjection::KEY`].
#[derive(Debug, Clone, Copy, Default)]
pub struct StepRouteProjection;

impl StepRouteProjection {
    /// The key it is registered under.
    pub const KEY: &'static str = "step-routes";
}

impl Projection for StepRouteProjection {
    type State = StepRoutes;

    fn key(&self) -> &'static str {
        Self::KEY
    }

    fn fold(&self, state: &mut StepRoutes, event: &Envelope) {
        state.apply(&event.event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{
        AgentIdle, RequestError, RequestStart, RouteSwitched, StepRef, TurnEnd, TurnEndReason,
        TurnStart,
    };
    use crate::failure::Failure;

    fn request(attempt: u32, provider: &str) -> Event {
        Event::RequestStart(RequestStart {
            turn: 1,
            step: 1,
            attempt,
            provider: provider.into(),
            model: "m".into(),
        })
    }

    fn switched(from: &str, to: &str) -> Event {
        Event::RouteSwitched(RouteSwitched {
            turn: 1,
            step: 1,
            from: from.into(),
            to: to.into(),
            code: "QUOTA".into(),
            reason: "eager".into(),
        })
    }

    fn error(attempt: u32, provider: &str) -> Event {
        Event::RequestError(RequestError {
            turn: 1,
            step: 1,
            attempt,
            provider: provider.into(),
            failure: Failure::new("QUOTA", "out of credit").unwrap(),
        })
    }

    fn fold(events: Vec<Event>) -> (Vec<String>, Option<String>) {
        let mut state = StepRoutes::default();
        for event in &events {
            state.apply(event);
        }
        (state.used().to_vec(), state.switched_to().map(str::to_owned))
    }

    fn names(routes: &[&str]) -> Vec<String> {
        routes.iter().map(|r| (*r).to_owned()).collect()
    }

    #[test]
    fn the_open_steps_routes_and_its_pending_switch() {
        let step = || Event::StepStart(StepRef { turn: 1, step: 1 });
        /// A case: its name, the events, the routes used, the pending switch.
        type Case = (&'static str, Vec<Event>, Vec<String>, Option<&'static str>);
        let cases: Vec<Case> = vec![
            ("nothing yet", vec![], vec![], None),
            ("one attempt", vec![step(), request(1, "main")], names(&["main"]), None),
            (
                "a retry on the same route is one route",
                vec![step(), request(1, "main"), error(1, "main"), request(2, "main")],
                names(&["main"]),
                None,
            ),
            (
                "a switch is pending until the next request/start",
                vec![step(), request(1, "main"), error(1, "main"), switched("main", "backup")],
                names(&["main"]),
                Some("backup"),
            ),
            (
                "the next attempt consumes it",
                vec![
                    step(),
                    request(1, "main"),
                    error(1, "main"),
                    switched("main", "backup"),
                    request(2, "backup"),
                ],
                names(&["main", "backup"]),
                None,
            ),
            (
                "a new step starts afresh",
                vec![request(1, "main"), switched("main", "backup"), step()],
                vec![],
                None,
            ),
            (
                "a turn's end clears it",
                vec![
                    request(1, "main"),
                    switched("main", "backup"),
                    Event::TurnEnd(TurnEnd { turn: 1, reason: TurnEndReason::Completed }),
                ],
                vec![],
                None,
            ),
            (
                "agent/idle clears it",
                vec![request(1, "a"), Event::AgentIdle(AgentIdle {})],
                vec![],
                None,
            ),
            (
                "turn/start clears it",
                vec![request(1, "a"), Event::TurnStart(TurnStart { turn: 2 })],
                vec![],
                None,
            ),
        ];
        for (case, events, used, switched_to) in cases {
            assert_eq!(fold(events), (used, switched_to.map(str::to_owned)), "{case}");
        }
    }
}
