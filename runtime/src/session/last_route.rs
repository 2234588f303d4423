//! The route of the last turn: the provider of its latest `request/start`, folded from the log,
//! so that `Session::retry()` reruns a turn on the route it failed on — also after the session
//! hibernated or the process restarted.

use crate::event::{Envelope, Event};
use crate::projection::Projection;

/// The registration key of [`LastRouteProjection`].
pub(crate) const LAST_ROUTE: &str = "last-route";

/// The last turn and the route its latest attempt used.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LastRoute {
    /// The last turn started (0 before the first).
    pub(crate) turn: u32,
    /// The provider of its latest `request/start`, if it made one.
    pub(crate) route: Option<String>,
}

/// Folds [`LastRoute`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LastRouteProjection;

impl Projection for LastRouteProjection {
    type State = LastRoute;

    fn key(&self) -> &'static str {
        LAST_ROUTE
    }

    fn fold(&self, state: &mut LastRoute, event: &Envelope) {
        match &event.event {
            Event::TurnStart(start) => *state = LastRoute { turn: start.turn, route: None },
            Event::RequestStart(request) if request.turn == state.turn => {
                state.route = Some(request.provider.clone());
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{RequestStart, TurnStart};

    fn fold(events: Vec<Event>) -> LastRoute {
        let mut state = LastRoute::default();
        for (seq, event) in events.into_iter().enumerate() {
            LastRouteProjection.fold(&mut state, &Envelope { seq: seq as u64, time: 0, event });
        }
        state
    }

    fn request(turn: u32, provider: &str) -> Event {
        Event::RequestStart(RequestStart {
            turn,
            step: 1,
            attempt: 1,
            provider: provider.into(),
            model: "m".into(),
        })
    }

    #[test]
    fn the_last_turns_latest_request_names_the_route() {
        let cases: Vec<(Vec<Event>, LastRoute)> = vec![
            (vec![], LastRoute::default()),
            (vec![Event::TurnStart(TurnStart { turn: 1 })], LastRoute { turn: 1, route: None }),
            (
                vec![Event::TurnStart(TurnStart { turn: 1 }), request(1, "a"), request(1, "b")],
                LastRoute { turn: 1, route: Some("b".into()) },
            ),
            (
                vec![
                    Event::TurnStart(TurnStart { turn: 1 }),
                    request(1, "a"),
                    Event::TurnStart(TurnStart { turn: 2 }),
                ],
                LastRoute { turn: 2, route: None },
            ),
        ];
        for (events, expected) in cases {
            assert_eq!(fold(events), expected);
        }
    }
}
