//! [`first_poll`]: start a future and poll it once, right where it is started, before deciding
//! whether it needs a task of its own.
//!
//! An actor that must never block its mailbox hands each piece of work to a task (a plugin's
//! recovery, a provider's attempt). Much of that work finishes without waiting — a plugin that
//! passes a failure on, an adapter that answers from memory — and for it the task is pure cost:
//! an allocation, and a wake-up of another worker thread that a caller then waits for. So the
//! actor polls the work once, with a no-op waker: ready, it answers at once and no task exists;
//! pending, the *same* started future is spawned, and the task's first poll registers the real
//! waker (a wake-up sent to the no-op waker in between is not lost: a spawned task is always
//! polled).
//!
//! # Why this keeps the mailbox from blocking
//!
//! The work runs in the actor only up to its first wait, never through one; whatever waits
//! (a backoff, a log append, a network read) still waits in the task. The CPU before that first
//! wait is what the task would have spent on the same worker threads; only its place changed.
//! Work that computes for long before its first `.await` would hold a tokio worker in a task
//! just the same.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::task::{Context, Poll, Waker};

use crate::future::BoxFuture;

/// How a started future's first poll ended.
pub(crate) enum FirstPoll<T> {
    /// It answered without waiting.
    Ready(T),
    /// It waits: the rest of it is this (started) future.
    Pending(BoxFuture<'static, T>),
    /// Starting it, or its first poll, panicked.
    Panicked(Box<dyn Any + Send>),
}

/// Starts a future and polls it once with a no-op waker, catching a panic in either step.
/// A pending future must be polled again (by a task) before anything can wake it.
pub(crate) fn first_poll<T>(start: impl FnOnce() -> BoxFuture<'static, T>) -> FirstPoll<T> {
    let mut future = match std::panic::catch_unwind(AssertUnwindSafe(start)) {
        Ok(future) => future,
        Err(panic) => return FirstPoll::Panicked(panic),
    };
    let mut cx = Context::from_waker(Waker::noop());
    match std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(&mut cx))) {
        Ok(Poll::Ready(value)) => FirstPoll::Ready(value),
        Ok(Poll::Pending) => FirstPoll::Pending(future),
        Err(panic) => FirstPoll::Panicked(panic),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use std::sync::Arc;

    use tokio::sync::oneshot;

    use super::*;
    use crate::crash::panic_message;

    type Start = Box<dyn FnOnce() -> BoxFuture<'static, u32>>;

    fn name(poll: &FirstPoll<u32>) -> String {
        match poll {
            FirstPoll::Ready(value) => format!("ready {value}"),
            FirstPoll::Pending(_) => "pending".into(),
            FirstPoll::Panicked(panic) => format!("panicked: {}", panic_message(panic.as_ref())),
        }
    }

    #[tokio::test]
    async fn the_first_poll_answers_waits_or_catches_the_panic() {
        let cases: Vec<(&str, Start, &str)> = vec![
            ("answers at once", Box::new(|| Box::pin(async { 7 })), "ready 7"),
            (
                "waits first",
                Box::new(|| {
                    Box::pin(async {
                        tokio::task::yield_now().await;
                        7
                    })
                }),
                "pending",
            ),
            ("recover itself panics", Box::new(|| panic!("in recover")), "panicked: in recover"),
            (
                "the first poll panics",
                Box::new(|| Box::pin(async { panic!("in the first poll") })),
                "panicked: in the first poll",
            ),
            (
                "a panic after the first wait is the task's",
                Box::new(|| {
                    Box::pin(async {
                        tokio::task::yield_now().await;
                        panic!("later")
                    })
                }),
                "pending",
            ),
        ];
        for (case, start, expected) in cases {
            assert_eq!(name(&first_poll(start)), expected, "{case}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_pending_recovery_resumes_where_its_first_poll_stopped() {
        // The work before the first wait runs once, in the first poll; the task finishes the rest.
        let before = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&before);
        let (tx, rx) = oneshot::channel::<u32>();
        let poll = first_poll(move || {
            Box::pin(async move {
                counter.fetch_add(1, Ordering::SeqCst);
                rx.await.unwrap_or(0) + 1
            })
        });
        assert_eq!(before.load(Ordering::SeqCst), 1, "the first poll ran up to the wait");
        let FirstPoll::Pending(rest) = poll else { panic!("{}", name(&poll)) };
        // Woken while nobody but the no-op waker listens: the task's first poll still sees it.
        tx.send(41).unwrap();
        assert_eq!(tokio::spawn(rest).await.unwrap(), 42);
        assert_eq!(before.load(Ordering::SeqCst), 1, "the start is not run twice");
    }
}
