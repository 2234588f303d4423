//! [`Census`]: what a runtime has alive — actors and tasks — so that "shutdown leaves no actor and
//! no task" is a number a test can read, not a hope.
//!
//! Every actor the runtime spawns holds an [`Alive`] in its state: the count goes up when its
//! `pre_start` builds the state and down when the state is dropped, which ractor does however the
//! actor ends (stopped, failed or killed). Every task the runtime spawns (a turn, a provider
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

/// Live actors and tasks of one runtime. Clones share the counts.
#[derive(Debug, Clone, Default)]
pub struct Census {
    actors: Arc<AtomicUsize>,
    tasks: TaskTracker,
}

/// A live actor's mark in the [`Census`]; dropping it (with the actor's state) counts it out.
#[derive(Debug)]
pub struct Alive(Arc<AtomicUsize>);

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Census {
    /// An empty census.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts an actor in until the returned mark is dropped.
    pub fn enter(&self) -> Alive {
        self.actors.fetch_add(1, Ordering::AcqRel);
        Alive(Arc::clone(&self.actors))
    }

    /// How many actors are alive.
    pub fn actors(&self) -> usize {
        self.actors.load(Ordering::Acquire)
    }

    /// How many tracked tasks are alive.
    pub fn tasks(&self) -> usize {
        self.tasks.len()
    }

    /// Spawns a tracked task.
    pub fn spawn<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tasks.spawn(task)
    }

    /// Wraps a future so that it counts as a live task while it exists.
    pub fn track<F: Future>(&self, future: F) -> tokio_util::task::task_tracker::TrackedFuture<F> {
        self.tasks.track_future(future)
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
        let a = census.enter();
        let b = census.enter();
        assert_eq!(census.actors(), 2);
        drop(a);
        assert_eq!(census.actors(), 1);
        drop(b);
        assert_eq!(census.actors(), 0);

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
