//! Projections: pure folds of a session log, kept up to date by its session log and
//! readable by other actors.
//!
//! # Why folds
//!
//! Everything the runtime knows about a session must be rebuildable from its log. A
//! projection is a `State` and a pure `fold` over events; reopening a session folds the log
//! again, so a retry count, for example, survives a restart by construction.

use crate::event::Envelope;

/// A pure fold over a session log.
pub trait Projection: Send + 'static {
    /// The folded state.
    type State: Clone + Default + Send + 'static;

    /// The key it is registered and read under.
    fn key(&self) -> &'static str;

    /// Folds one committed event into the state.
    fn fold(&self, state: &mut Self::State, event: &Envelope);
}
