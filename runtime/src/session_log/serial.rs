//! [`Serial`]: a state that takes one operation at a time, in arrival order — what an actor's
//! mailbox gives its state, without a task of its own.
//!
//! Every operation waits its turn in a fair queue (tokio's mutex is first come, first served),
//! then runs on the state in the caller's task. Two rules make it behave like the actor it
//! replaces (see the module docs of `session_log` for why it replaced one):
//!
//! - **A panic fails the state, not the caller.** An operation that panics — a validator's or
//!   a projection's bug — is caught here; the state is dropped, as a crashed actor's state is,
//!   every later operation answers `None` (the caller's "closed"), and the caller of the
//!   panicking operation gets `None` too rather than the panic. Blame stays with the log: a
//!   plugin whose `llm/retry` append hit a panicking validator is not counted as crashed.
//! - **Close lets the operation in progress finish and fails those queued behind it** — an
//!   actor's stop. [`Serial::close`] marks the state closing at once; an operation that was
//!   queued checks the mark when its turn comes and answers `None`.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::FutureExt;
use tokio::sync::{Mutex, MutexGuard};

use crate::crash::panic_message;

/// An operation's future, borrowing the state.
pub(crate) type Op<'a, R> = Pin<Box<dyn Future<Output = R> + Send + 'a>>;

/// Told once, when the state stops serving (closed or failed).
pub(crate) type OnClose = Box<dyn FnOnce() + Send>;

/// A state served one operation at a time.
pub(crate) struct Serial<T> {
    state: Mutex<Option<T>>,
    closing: AtomicBool,
    on_close: std::sync::Mutex<Option<OnClose>>,
}

impl<T: Send> Serial<T> {
    /// Serves `state`.
    pub(crate) fn new(state: T) -> Self {
        Self {
            state: Mutex::new(Some(state)),
            closing: AtomicBool::new(false),
            on_close: std::sync::Mutex::new(None),
        }
    }

    /// Calls `on_close` once it stops serving — at once if it already has. Replaces an earlier
    /// one. (The owner of a log learns this way that someone else closed it, or that it failed,
    /// even when it is not in the middle of an operation of its own: an actor's supervisor is
    /// told that its child stopped.)
    pub(crate) fn on_close(&self, on_close: OnClose) {
        let mut slot = self.on_close.lock().unwrap_or_else(PoisonError::into_inner);
        if self.is_open() {
            *slot = Some(on_close);
        } else {
            drop(slot);
            on_close();
        }
    }

    /// Whether it still serves (not closed, not failed).
    pub(crate) fn is_open(&self) -> bool {
        !self.closing.load(Ordering::Acquire)
    }

    /// Runs `op` on the state once every operation that arrived before it is done. `None`:
    /// closed, or failed (now or earlier). `what` names the operation in the failure's report.
    pub(crate) async fn run<R>(
        &self,
        what: &'static str,
        op: impl for<'a> FnOnce(&'a mut T) -> Op<'a, R>,
    ) -> Option<R> {
        let mut slot = self.turn().await?;
        let state = slot.as_mut()?;
        let outcome = AssertUnwindSafe(op(state)).catch_unwind().await;
        match outcome {
            Ok(done) => Some(done),
            Err(panic) => {
                self.fail(&mut slot, what, panic_message(panic.as_ref()));
                None
            }
        }
    }

    /// [`Serial::run`] for an operation that does not wait.
    pub(crate) async fn run_now<R>(
        &self,
        what: &'static str,
        op: impl FnOnce(&mut T) -> R,
    ) -> Option<R> {
        let mut slot = self.turn().await?;
        let state = slot.as_mut()?;
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| op(state)));
        match outcome {
            Ok(done) => Some(done),
            Err(panic) => {
                self.fail(&mut slot, what, panic_message(panic.as_ref()));
                None
            }
        }
    }

    /// Lets the operation in progress finish, fails those still queued, then drops the state.
    pub(crate) async fn close(&self) {
        self.stop();
        self.state.lock().await.take();
    }

    /// Marks it closing and tells whoever asked to be told.
    fn stop(&self) {
        self.closing.store(true, Ordering::Release);
        let told = self.on_close.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(tell) = told {
            tell();
        }
    }

    /// Waits for this operation's turn; `None` when closing or closed by then.
    async fn turn(&self) -> Option<MutexGuard<'_, Option<T>>> {
        let slot = self.state.lock().await;
        self.is_open().then_some(slot)
    }

    fn fail(&self, slot: &mut Option<T>, what: &'static str, error: String) {
        tracing::error!(operation = what, %error, "a session-log operation panicked: the log is closed");
        slot.take();
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn operations_run_one_at_a_time_in_arrival_order() {
        let serial = Arc::new(Serial::new(Vec::<u32>::new()));
        let mut tasks = Vec::new();
        for i in 0..5u32 {
            let serial = Arc::clone(&serial);
            tasks.push(tokio::spawn(async move {
                serial
                    .run("push", move |log| {
                        Box::pin(async move {
                            // Each waits while holding the state: nobody overtakes it.
                            tokio::time::sleep(Duration::from_millis(u64::from(5 - i))).await;
                            log.push(i);
                        })
                    })
                    .await
            }));
            tokio::task::yield_now().await;
        }
        for task in tasks {
            assert_eq!(task.await.unwrap(), Some(()));
        }
        assert_eq!(serial.run_now("read", |log| log.clone()).await, Some(vec![0, 1, 2, 3, 4]));
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_operation_fails_the_state_and_not_its_caller() {
        let serial = Serial::new(1u32);
        let panicked: Option<()> = serial.run_now("bug", |_| panic!("a projection's bug")).await;
        assert_eq!(panicked, None, "the caller gets `closed`, not the panic");
        assert!(!serial.is_open());
        assert_eq!(serial.run_now("read", |n| *n).await, None, "and so does everyone after");

        let serial = Serial::new(1u32);
        let panicked: Option<()> =
            serial.run("bug", |_| Box::pin(async { panic!("a validator's bug") })).await;
        assert_eq!(panicked, None);
        assert!(!serial.is_open());
    }

    #[tokio::test(start_paused = true)]
    async fn close_lets_the_operation_in_progress_finish_and_fails_the_queued_ones() {
        let serial = Arc::new(Serial::new(0u32));
        let in_progress = {
            let serial = Arc::clone(&serial);
            tokio::spawn(async move {
                serial
                    .run("slow", |n| {
                        Box::pin(async move {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            *n += 1;
                            *n
                        })
                    })
                    .await
            })
        };
        tokio::task::yield_now().await;
        let queued = {
            let serial = Arc::clone(&serial);
            tokio::spawn(async move { serial.run_now("queued", |n| *n).await })
        };
        tokio::task::yield_now().await;
        serial.close().await;
        assert_eq!(in_progress.await.unwrap(), Some(1));
        assert_eq!(queued.await.unwrap(), None);
        assert!(!serial.is_open());
    }

    #[tokio::test(start_paused = true)]
    async fn the_owner_is_told_once_when_it_closes_or_fails() {
        let told = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let tell = |told: &Arc<std::sync::atomic::AtomicU32>| -> OnClose {
            let told = Arc::clone(told);
            Box::new(move || {
                told.fetch_add(1, Ordering::SeqCst);
            })
        };
        let serial = Serial::new(0u32);
        serial.on_close(tell(&told));
        assert_eq!(told.load(Ordering::SeqCst), 0);
        serial.close().await;
        serial.close().await;
        assert_eq!(told.load(Ordering::SeqCst), 1, "once");
        serial.on_close(tell(&told));
        assert_eq!(told.load(Ordering::SeqCst), 2, "at once when already closed");

        let serial = Serial::new(0u32);
        serial.on_close(tell(&told));
        let _: Option<()> = serial.run_now("bug", |_| panic!("bug")).await;
        assert_eq!(told.load(Ordering::SeqCst), 3, "a failure tells too");
    }
}
