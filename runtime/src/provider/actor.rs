//! [`ProviderActor`]: one actor per provider route; every request it serves runs in a task of its
//! own.
//!
//! A step sends [`ProviderMsg::Call`] with the request, the sink its chunks stream into (each
//! chunk reaches the step as a message), the step's cancellation token and where the outcome
//! goes (the step, as a message). The handler starts the attempt and polls it once
//! (`first_poll`): an adapter that answers without waiting (a scripted or cached reply) is
//! answered right there; one that waits — any real request — continues as a tracked task, and
//! the handler returns at once, so a thousand sessions streaming from one route never wait on
//! each other.
//! The task races the adapter's future against the turn's token (cancelled → `ABORTED`) and the
//! actor's own stop token, and catches a panicking adapter (→ `UNKNOWN`, the code of an error that
//! is not a typed failure).
//!
//! A route with health settings (`crate::route_health`) first asks its breaker: a refused
//! attempt is answered at once with `CIRCUIT_OPEN` and never reaches the adapter; an admitted
//! one counts its outcome in the route's budget and breaker just before its reply.
//!
//! # Why chunks bypass the actor
//!
//! The adapter's chunks go straight to the step's mailbox: routing each chunk through this
//! actor's mailbox would serialize every stream of the route behind one queue and add a hop per
//! chunk, for nothing — the actor has no state a chunk could change.
//!
//! # Why stopping waits
//!
//! `post_stop` cancels every in-flight attempt (they answer `ABORTED`) and waits until their tasks
//! ended, so "shutdown leaves no task" holds for provider calls too.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::message::{AttemptResult, ProviderCall, ProviderMsg};
use crate::census::{ActorKind, Alive, Census};
use crate::crash::panic_message;
use crate::failure::{self, Failure};
use crate::first_poll::{FirstPoll, first_poll};
use crate::future::BoxFuture;
use crate::provider::{Adapter, ChunkSink, Request};
use crate::route_health::cell::HealthCell;
use crate::route_health::{Admission, circuit_open};

/// The actor of one provider route (its configuration: the route's name, its adapter and its
/// health, if any).
pub(crate) struct ProviderActor {
    route: String,
    adapter: Arc<dyn Adapter>,
    health: Option<Arc<HealthCell>>,
    census: Census,
}

impl ProviderActor {
    /// An actor serving route `route` with `adapter` (and `health`: its budget and breaker),
    /// counted in `census`.
    pub(crate) fn new(
        route: String,
        adapter: Arc<dyn Adapter>,
        health: Option<Arc<HealthCell>>,
        census: Census,
    ) -> Self {
        Self { route, adapter, health, census }
    }
}

/// A [`ProviderActor`]'s state: its in-flight attempts.
#[derive(Debug)]
pub(crate) struct ProviderState {
    tracker: TaskTracker,
    stopping: CancellationToken,
    _alive: Alive,
}

/// Runs one attempt to its outcome (the body of an attempt's task).
async fn attempt(
    adapter: Arc<dyn Adapter>,
    request: Request,
    chunks: ChunkSink,
    cancel: CancellationToken,
    stopping: CancellationToken,
) -> AttemptResult {
    if cancel.is_cancelled() || stopping.is_cancelled() {
        return Err(Failure::aborted());
    }
    let started = std::panic::catch_unwind(AssertUnwindSafe(|| adapter.call(request, chunks)));
    let future = match started {
        Ok(future) => AssertUnwindSafe(future).catch_unwind(),
        Err(panic) => return Err(adapter_panic(panic_message(panic.as_ref()))),
    };
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(Failure::aborted()),
        () = stopping.cancelled() => Err(Failure::aborted()),
        outcome = future => match outcome {
            Ok(result) => result,
            Err(panic) => Err(adapter_panic(panic_message(panic.as_ref()))),
        },
    }
}

/// The failure of an adapter that panicked.
fn adapter_panic(message: String) -> Failure {
    Failure::internal(failure::UNKNOWN, format!("adapter panicked: {message}"))
}

impl Actor for ProviderActor {
    type Msg = ProviderMsg;
    type State = ProviderState;
    type Arguments = ();

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        (): (),
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(ProviderState {
            tracker: TaskTracker::new(),
            stopping: CancellationToken::new(),
            _alive: self.census.enter(ActorKind::Provider),
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            ProviderMsg::Call(ProviderCall { request, chunks, cancel, mut reply }) => {
                if let Some(health) = &self.health {
                    match health.admit() {
                        Admission::Refused { until } => {
                            reply(Err(circuit_open(&self.route, until)));
                            return Ok(());
                        }
                        Admission::Admitted(ticket) => {
                            let health = Arc::clone(health);
                            reply = Box::new(move |outcome| {
                                health.record(ticket, outcome.as_ref());
                                reply(outcome);
                            });
                        }
                    }
                }
                let adapter = Arc::clone(&self.adapter);
                let stopping = state.stopping.clone();
                // Counted from before its first poll, so `post_stop` waits for it either way.
                let token = state.tracker.token();
                let run = move || -> BoxFuture<'static, ()> {
                    Box::pin(async move {
                        let outcome = attempt(adapter, request, chunks, cancel, stopping).await;
                        reply(outcome);
                    })
                };
                match first_poll(run) {
                    FirstPoll::Ready(()) => {}
                    FirstPoll::Pending(rest) => {
                        self.census.spawn(async move {
                            rest.await;
                            drop(token);
                        });
                    }
                    FirstPoll::Panicked(panic) => {
                        // `attempt` catches the adapter's panics; this is the runtime's own bug.
                        // The reply port is dropped with the future: the step sees the attempt
                        // end without an answer and fails it.
                        let error = panic_message(panic.as_ref());
                        tracing::error!(%error, "an attempt panicked");
                    }
                }
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.stopping.cancel();
        state.tracker.close();
        state.tracker.wait().await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::Completion;
    use crate::provider::message::OnOutcome;
    use std::time::Duration;
    use tokio::sync::{mpsc, oneshot};

    /// An adapter driven by a closure over the request.
    struct Scripted<F>(F);

    impl<F> Adapter for Scripted<F>
    where
        F: Fn(Request, ChunkSink) -> crate::future::BoxFuture<'static, AttemptResult>
            + Send
            + Sync
            + 'static,
    {
        fn call(
            &self,
            request: Request,
            chunks: ChunkSink,
        ) -> crate::future::BoxFuture<'static, AttemptResult> {
            (self.0)(request, chunks)
        }
    }

    fn request(attempt: u32) -> Request {
        Request {
            session: "s".into(),
            turn: 1,
            step: 1,
            attempt,
            provider: "mock".into(),
            model: "m".into(),
            messages: Default::default(),
            tools: vec![],
            generation: Default::default(),
        }
    }

    /// Attempt 1 stalls until cancelled; every other attempt streams "a","b" and completes.
    fn adapter() -> Arc<dyn Adapter> {
        Arc::new(Scripted(|request: Request, chunks: ChunkSink| {
            Box::pin(async move {
                match request.attempt {
                    1 => {
                        let _ = chunks.send("partial".into());
                        std::future::pending::<()>().await;
                        unreachable!()
                    }
                    99 => panic!("adapter bug"),
                    _ => {
                        let _ = chunks.send("a".into());
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        let _ = chunks.send("b".into());
                        Ok(Completion::default())
                    }
                }
            }) as crate::future::BoxFuture<'static, AttemptResult>
        }))
    }

    struct Pending {
        chunks: mpsc::UnboundedReceiver<String>,
        outcome: oneshot::Receiver<AttemptResult>,
        cancel: CancellationToken,
    }

    fn deliver(reply: oneshot::Sender<AttemptResult>) -> OnOutcome {
        Box::new(move |outcome| {
            let _ = reply.send(outcome);
        })
    }

    fn call(actor: &ActorRef<ProviderMsg>, attempt: u32) -> Pending {
        let (sink, chunks) = ChunkSink::channel();
        let (reply, outcome) = oneshot::channel();
        let cancel = CancellationToken::new();
        actor
            .send_message(ProviderMsg::Call(ProviderCall {
                request: request(attempt),
                chunks: sink,
                cancel: cancel.clone(),
                reply: deliver(reply),
            }))
            .unwrap();
        Pending { chunks, outcome, cancel }
    }

    async fn drain(rx: &mut mpsc::UnboundedReceiver<String>) -> Vec<String> {
        let mut out = vec![];
        while let Some(c) = rx.recv().await {
            out.push(c);
        }
        out
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_that_answers_at_once_needs_no_task_and_one_that_waits_gets_one() {
        let census = Census::new();
        let (actor, handle) = Actor::spawn(
            None,
            ProviderActor::new("mock".into(), adapter(), None, census.clone()),
            (),
        )
        .await
        .unwrap();
        // Attempt 99 panics in the adapter before any wait: answered UNKNOWN in the handler.
        let mut instant = call(&actor, 99);
        let failure = instant.outcome.await.unwrap().unwrap_err();
        assert_eq!(failure.code(), "UNKNOWN");
        assert_eq!(census.tasks(), 0, "no task was spawned for it");
        assert!(drain(&mut instant.chunks).await.is_empty());

        // Attempt 2 sleeps between its chunks: the rest of it runs as a tracked task.
        let mut waiting = call(&actor, 2);
        assert_eq!(waiting.chunks.recv().await.as_deref(), Some("a"), "its first poll ran");
        assert_eq!(census.tasks(), 1, "the rest waits in a task");
        assert_eq!(waiting.outcome.await.unwrap(), Ok(Completion::default()));
        assert_eq!(drain(&mut waiting.chunks).await, ["b"]);

        // Stopping waits for a pending attempt started before it (aborted, not lost).
        let stalled = call(&actor, 1);
        tokio::task::yield_now().await;
        actor.stop(None);
        handle.await.unwrap();
        assert_eq!(stalled.outcome.await.unwrap().unwrap_err().code(), "ABORTED");
        census.tasks_settled().await;
        assert_eq!((census.tasks(), census.actors()), (0, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_request_does_not_hold_the_mailbox_and_cancelling_it_aborts() {
        let census = Census::new();
        let (actor, handle) = Actor::spawn(
            None,
            ProviderActor::new("mock".into(), adapter(), None, census.clone()),
            (),
        )
        .await
        .unwrap();
        let mut stalled = call(&actor, 1);
        let mut served = call(&actor, 2);

        assert_eq!(served.outcome.await.unwrap(), Ok(Completion::default()));
        assert_eq!(drain(&mut served.chunks).await, ["a", "b"]);
        assert_eq!(stalled.chunks.recv().await.as_deref(), Some("partial"));

        stalled.cancel.cancel();
        let failure = stalled.outcome.await.unwrap().unwrap_err();
        assert_eq!(failure.code(), "ABORTED");
        assert_eq!(census.tasks(), 0, "the attempt's task ended");

        actor.stop(None);
        handle.await.unwrap();
        assert_eq!(census.actors(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_adapter_is_an_unknown_failure() {
        let census = Census::new();
        let (actor, handle) = Actor::spawn(
            None,
            ProviderActor::new("mock".into(), adapter(), None, census.clone()),
            (),
        )
        .await
        .unwrap();
        let failure = call(&actor, 99).outcome.await.unwrap().unwrap_err();
        assert_eq!(failure.code(), "UNKNOWN");
        assert_eq!(failure.message(), "adapter panicked: adapter bug");
        // The actor survived the adapter's panic.
        assert_eq!(call(&actor, 2).outcome.await.unwrap(), Ok(Completion::default()));
        actor.stop(None);
        handle.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn stopping_the_actor_aborts_in_flight_attempts_and_waits_for_them() {
        let census = Census::new();
        let (actor, handle) = Actor::spawn(
            None,
            ProviderActor::new("mock".into(), adapter(), None, census.clone()),
            (),
        )
        .await
        .unwrap();
        let stalled: Vec<Pending> = (0..100).map(|_| call(&actor, 1)).collect();
        tokio::task::yield_now().await;
        actor.stop_and_wait(None, None).await.unwrap();
        handle.await.unwrap();
        assert_eq!(census.tasks(), 0, "no attempt outlives its actor");
        assert_eq!(census.actors(), 0);
        for pending in stalled {
            assert_eq!(pending.outcome.await.unwrap().unwrap_err().code(), "ABORTED");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_already_cancelled_turn_never_reaches_the_adapter() {
        let census = Census::new();
        let (actor, handle) = Actor::spawn(
            None,
            ProviderActor::new("mock".into(), adapter(), None, census.clone()),
            (),
        )
        .await
        .unwrap();
        let (sink, mut chunks) = ChunkSink::channel();
        let (reply, outcome) = oneshot::channel();
        let cancel = CancellationToken::new();
        cancel.cancel();
        actor
            .send_message(ProviderMsg::Call(ProviderCall {
                request: request(2),
                chunks: sink,
                cancel,
                reply: deliver(reply),
            }))
            .unwrap();
        assert_eq!(outcome.await.unwrap().unwrap_err().code(), "ABORTED");
        assert!(drain(&mut chunks).await.is_empty(), "no chunk streamed");
        actor.stop(None);
        handle.await.unwrap();
    }
}
