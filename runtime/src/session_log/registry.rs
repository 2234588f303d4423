//! The projections of one session log, registered by key and type-erased.
//!
//! # Why erase the types
//!
//! A session log keeps projections of types it cannot name (plugins and the agent runtime bring
//! their own), all folded by one log. Each is stored as a `Box<dyn ErasedProjection>` holding
//! the projection and its state; a read downcasts the state to the type the caller names
//! (and clones it, or what a view makes of it), so a caller asking for the wrong type gets an error, not a panic.
//!
//! # Why a `Vec`
//!
//! A log has a handful of projections (the three built-in ones, plus one or two per plugin), and
//! every committed event is folded into each of them in order. A vector keeps that loop tight
//! and the idle footprint small; a key lookup over a few entries is a short scan.

use std::any::Any;

use crate::event::Envelope;
use crate::projection::Projection;

use super::LogError;
use super::open_turn::OpenTurnProjection;
use super::retry_chains::RetryChainProjection;
use super::step_routes::StepRouteProjection;

/// A projection and its state, behind a type-erased interface.
pub(crate) trait ErasedProjection: Send {
    /// The key it is registered under.
    fn key(&self) -> &'static str;
    /// Folds one committed event.
    fn fold(&mut self, event: &Envelope);
    /// The state, as `P::State`, borrowed.
    fn state(&self) -> &dyn Any;
}

/// A projection with its state.
struct Folded<P: Projection> {
    projection: P,
    state: P::State,
}

impl<P: Projection> ErasedProjection for Folded<P> {
    fn key(&self) -> &'static str {
        self.projection.key()
    }

    fn fold(&mut self, event: &Envelope) {
        self.projection.fold(&mut self.state, event);
    }

    fn state(&self) -> &dyn Any {
        &self.state
    }
}

/// Erases a projection, with its default (empty) state.
pub(crate) fn erase<P: Projection>(projection: P) -> Box<dyn ErasedProjection> {
    Box::new(Folded { projection, state: P::State::default() })
}

/// The projections of a log, in registration order.
pub(crate) struct Registry {
    entries: Vec<Box<dyn ErasedProjection>>,
}

impl Registry {
    /// A registry holding the built-in projections (retry chains, open turn, step routes),
    /// empty.
    pub(crate) fn with_builtins() -> Self {
        Self {
            entries: vec![
                erase(RetryChainProjection),
                erase(OpenTurnProjection),
                erase(StepRouteProjection),
            ],
        }
    }

    /// Whether a projection is registered under `key`.
    pub(crate) fn contains(&self, key: &str) -> bool {
        self.entries.iter().any(|p| p.key() == key)
    }

    /// Adds a projection whose state already holds the whole log. Refuses a taken key.
    pub(crate) fn insert(&mut self, projection: Box<dyn ErasedProjection>) -> Result<(), LogError> {
        if self.contains(projection.key()) {
            return Err(LogError::DuplicateProjection(projection.key()));
        }
        self.entries.push(projection);
        Ok(())
    }

    /// Folds a committed batch into every projection.
    pub(crate) fn fold(&mut self, batch: &[Envelope]) {
        for event in batch {
            for projection in &mut self.entries {
                projection.fold(event);
            }
        }
    }

    /// What `view` makes of the state registered under `key` (borrowed, not cloned).
    pub(crate) fn view<S: 'static, T>(
        &self,
        key: &'static str,
        view: impl FnOnce(&S) -> T,
    ) -> Result<T, LogError> {
        let projection =
            self.entries.iter().find(|p| p.key() == key).ok_or(LogError::UnknownProjection(key))?;
        let state = projection
            .state()
            .downcast_ref::<S>()
            .ok_or(LogError::ProjectionType { key, expected: std::any::type_name::<S>() })?;
        Ok(view(state))
    }

    /// A clone of the state registered under `key` (an `S`).
    pub(crate) fn read<S: Clone + 'static>(&self, key: &'static str) -> Result<S, LogError> {
        self.view(key, S::clone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{AgentIdle, Event, StepRef, TurnStart};
    use crate::session_log::{OpenTurn, RetryChains};

    /// Counts events of one kind.
    struct Count(&'static str, &'static str);

    impl Projection for Count {
        type State = u64;
        fn key(&self) -> &'static str {
            self.0
        }
        fn fold(&self, state: &mut u64, event: &Envelope) {
            if event.kind() == self.1 {
                *state += 1;
            }
        }
    }

    fn batch(events: Vec<Event>) -> Vec<Envelope> {
        events.into_iter().zip(0..).map(|(event, seq)| Envelope { seq, time: 0, event }).collect()
    }

    #[test]
    fn builtins_are_registered_and_empty() {
        let registry = Registry::with_builtins();
        assert_eq!(registry.read::<RetryChains>("retry-chains").unwrap(), RetryChains::default());
        assert_eq!(registry.read::<OpenTurn>("open-turn").unwrap(), OpenTurn::default());
    }

    #[test]
    fn every_projection_folds_every_committed_event_in_order() {
        let mut registry = Registry::with_builtins();
        registry.insert(erase(Count("starts", "turn/start"))).unwrap();
        registry.insert(erase(Count("idles", "agent/idle"))).unwrap();
        registry.fold(&batch(vec![
            Event::TurnStart(TurnStart { turn: 1 }),
            Event::StepStart(StepRef { turn: 1, step: 1 }),
            Event::AgentIdle(AgentIdle {}),
            Event::AgentIdle(AgentIdle {}),
        ]));
        assert_eq!(registry.read::<u64>("starts").unwrap(), 1);
        assert_eq!(registry.read::<u64>("idles").unwrap(), 2);
        let open = registry.read::<OpenTurn>("open-turn").unwrap();
        assert_eq!((open.turn, open.step), (Some(1), Some(1)));
    }

    #[test]
    fn a_taken_key_is_refused_and_the_first_projection_kept() {
        let mut registry = Registry::with_builtins();
        registry.insert(erase(Count("n", "turn/start"))).unwrap();
        let err = registry.insert(erase(Count("n", "agent/idle"))).unwrap_err();
        assert!(matches!(err, LogError::DuplicateProjection("n")), "{err}");
        let err = registry.insert(erase(Count("retry-chains", "agent/idle"))).unwrap_err();
        assert!(matches!(err, LogError::DuplicateProjection("retry-chains")), "{err}");
        registry.fold(&batch(vec![Event::AgentIdle(AgentIdle {})]));
        assert_eq!(registry.read::<u64>("n").unwrap(), 0, "the first registration stays");
    }

    #[test]
    fn reading_an_unknown_key_or_the_wrong_type_is_an_error() {
        let registry = Registry::with_builtins();
        assert!(matches!(registry.read::<u64>("nope"), Err(LogError::UnknownProjection("nope"))));
        let err = registry.read::<u64>("retry-chains").unwrap_err();
        assert!(
            matches!(err, LogError::ProjectionType { key: "retry-chains", expected: "u64" }),
            "{err}"
        );
    }
}
