//! [`HealthCell`]: where one route's [`RouteHealth`] lives while the runtime runs — read and
//! changed by the route's provider actor (admitting an attempt), by the attempts' tasks (counting
//! an outcome) and by the runtime's accessors, with the runtime's clock; each change of the
//! breaker's state is published on a watch channel and kept in the route's [`HealthHistory`].
//!
//! Its settings carry a revision: `crate::route_settings` puts the revision fence of a plugin's
//! settings in front of [`HealthCell::reconfigure`], which keeps the route's state
//! ([`RouteHealth::reconfigure`]).
//!
//! # Why a lock, not the actor's state
//!
//! An attempt's outcome arrives in its own task. Handing it back to the provider actor as a
//! message would add a mailbox hop to every attempt, and an attempt ending while the actor stops
//! would lose its reply. The lock is held for a few arithmetic steps and never across an await.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

use super::{
    Admission, HealthHistory, HealthSettings, HealthSnapshot, RouteHealth, Ticket, counted,
};
use crate::clock::Clock;
use crate::failure::Failure;

/// A route's health, the revision of its settings, and its changes of state.
#[derive(Debug)]
struct Revisioned {
    health: RouteHealth,
    revision: u64,
    history: HealthHistory,
}

/// One route's health, shared. See the module docs.
pub(crate) struct HealthCell {
    health: Mutex<Revisioned>,
    changes: watch::Sender<HealthSnapshot>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for HealthCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealthCell").field("now", &self.snapshot()).finish_non_exhaustive()
    }
}

impl HealthCell {
    /// A healthy route with `settings`, on `clock`.
    pub(crate) fn new(settings: HealthSettings, clock: Arc<dyn Clock>) -> Self {
        let health = RouteHealth::new(settings);
        let (changes, _) = watch::channel(health.snapshot(clock.now_ms()));
        let state = Revisioned { health, revision: 0, history: HealthHistory::new() };
        Self { health: Mutex::new(state), changes, clock }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Revisioned> {
        self.health.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies `change` to the health now; when the breaker's state changed, records the change
    /// in the history and publishes the snapshot.
    fn with<T>(&self, change: impl FnOnce(&mut Revisioned, u64) -> T) -> T {
        let now = self.clock.now_ms();
        let mut health = self.lock();
        let before = health.health.snapshot(now).state;
        let out = change(&mut health, now);
        let after = health.health.snapshot(now);
        health.history.record(now, before, &after);
        drop(health);
        if after.state != before {
            tracing::info!(
                state = after.state.as_str(),
                tokens = after.tokens,
                "route health changed"
            );
            self.changes.send_replace(after);
        }
        out
    }

    /// Whether an attempt goes through now.
    pub(crate) fn admit(&self) -> Admission {
        self.with(|health, now| health.health.admit(now))
    }

    /// Counts the outcome of an attempt admitted with `ticket`.
    pub(crate) fn record<T>(&self, ticket: Ticket, outcome: Result<&T, &Failure>) {
        let counted = counted(outcome);
        self.with(|health, now| health.health.record(ticket, counted, now));
    }

    /// The health now.
    pub(crate) fn snapshot(&self) -> HealthSnapshot {
        let now = self.clock.now_ms();
        self.lock().health.snapshot(now)
    }

    /// Its latest changes of state, and how many times it opened and closed.
    pub(crate) fn history(&self) -> HealthHistory {
        self.lock().history.clone()
    }

    /// The snapshots published at each change of the breaker's state (the latest first).
    pub(crate) fn subscribe(&self) -> watch::Receiver<HealthSnapshot> {
        self.changes.subscribe()
    }

    /// Its settings and their revision.
    pub(crate) fn settings(&self) -> (HealthSettings, u64) {
        let health = self.lock();
        (health.health.settings().clone(), health.revision)
    }

    /// Takes `settings` at `revision`, keeping the route's state, if the current revision is
    /// `expected` (any, when `None`); else nothing changes and the current revision is the error.
    pub(crate) fn reconfigure(
        &self,
        settings: HealthSettings,
        expected: Option<u64>,
        revision: u64,
    ) -> Result<(), u64> {
        self.with(|health, _| {
            if expected.is_some_and(|base| base != health.revision) {
                return Err(health.revision);
            }
            health.health.reconfigure(settings);
            health.revision = revision;
            Ok(())
        })
    }
}
