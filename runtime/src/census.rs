//! [`Census`]: what a runtime has alive — actors and tasks — so that "shutdown leaves no actor and
//! no task" is a number a test can read, not a hope.
//!
//! Every actor the runtime spawns holds an [`Alive`] in its state, entered under its
//! [`ActorKind`]: the count goes up when its `pre_start` builds the state and down when the state
//! is dropped, which ractor does however the actor ends (stopped, failed or killed). So a test
//! can read the supervision tree's shape — how many session, log, turn and step actors are alive
//! — not only its size. Every task the runtime spawns (a turn, a provider
//! request, a plugin recovery) is tracked by the census's [`TaskTracker`].
//!
//! # Why our own counters
//!
//! ractor's registry only knows named actors, and naming every session actor would put
//! them all in one global map (and make two runtimes in one process collide). A
//! counter per runtime costs one atomic add per actor and answers exactly "how many of *this*
//! runtime's actors are alive".

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

/// What an actor of the runtime is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ActorKind {
    /// The runtime's root supervisor.
    Root,
    /// The plugin host (the plugins' supervisor).
    PluginHost,
    /// A plugin's actor (one incarnation).
    Plugin,
    /// A provider route's actor.
    Provider,
    /// An awake session's actor.
    Session,
    /// A session log's actor.
    SessionLog,
    /// A running turn's actor.
    Turn,
    /// A running step's actor.
    Step,
}

impl ActorKind {
    /// Every kind, in the order of the runtime's tree.
    pub const ALL: [ActorKind; 8] = [
        ActorKind::Root,
        ActorKind::PluginHost,
        ActorKind::Plugin,
        ActorKind::Provider,
        ActorKind::Session,
        ActorKind::SessionLog,
        ActorKind::Turn,
        ActorKind::Step,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

/// Live actors and tasks of one runtime. Clones share the counts.
#[derive(Debug, Clone, Default)]
pub struct Census {
    actors: Arc<[AtomicUsize; 8]>,
    tasks: TaskTracker,
}

/// A live actor's mark in the [`Census`]; dropping it (with the actor's state) counts it out.
#[derive(Debug)]
pub struct Alive {
    actors: Arc<[AtomicUsize; 8]>,
    kind: ActorKind,
}

impl Drop for Alive {
    fn drop(&mut self) {
        self.actors[self.kind.index()].fetch_sub(1, Ordering::AcqRel);
    }
}

impl Census {
    /// An empty census.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Counts an actor of `kind` in until the returned mark is dropped.
    pub(crate) fn enter(&self, kind: ActorKind) -> Alive {
        self.actors[kind.index()].fetch_add(1, Ordering::AcqRel);
        Alive { actors: Arc::clone(&self.actors), kind }
    }

    /// How many actors are alive.
    pub fn actors(&self) -> usize {
        self.actors.iter().map(|n| n.load(Ordering::Acquire)).sum()
    }

    /// How many actors of `kind` are alive.
    pub fn actors_of(&self, kind: ActorKind) -> usize {
        self.actors[kind.index()].load(Ordering::Acquire)
    }

    /// The live actors by kind (kinds with none left out), in tree order.
    pub fn tree(&self) -> Vec<(ActorKind, usize)> {
        ActorKind::ALL
            .into_iter()
            .map(|kind| (kind, self.actors_of(kind)))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// How many tracked tasks are alive.
    pub fn tasks(&self) -> usize {
        self.tasks.len()
    }

    /// Spawns a tracked task.
    pub(crate) fn spawn<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tasks.spawn(task)
    }

    /// Resolves when every tracked task has ended (call after the runtime stopped spawning).
    pub async fn tasks_settled(&self) {
        self.tasks.close();
        self.tasks.wait().await;
        self.tasks.reopen();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn actors_and_tasks_are_counted_until_they_end() {
        let census = Census::new();
        let a = census.enter(ActorKind::Turn);
        let b = census.enter(ActorKind::Step);
        let c = census.enter(ActorKind::Step);
        assert_eq!(census.actors(), 3);
        assert_eq!(census.tree(), [(ActorKind::Turn, 1), (ActorKind::Step, 2)]);
        drop(a);
        assert_eq!(census.actors(), 2);
        assert_eq!(census.actors_of(ActorKind::Turn), 0);
        drop((b, c));
        assert_eq!(census.actors(), 0);
        assert!(census.tree().is_empty());

        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = census.spawn(async move {
            let _ = rx.await;
        });
        assert_eq!(census.tasks(), 1);
        tx.send(()).unwrap();
        task.await.unwrap();
        census.tasks_settled().await;
        assert_eq!(census.tasks(), 0);
    }
}
