//! [`PluginActor`]: one actor per plugin (per incarnation), serving every session at once.
//!
//! Its handler never waits. A [`PluginMsg::Recover`] starts the plugin's recovery and polls it
//! once (`first_poll`): a recovery that answers at once (a pass-through plugin's `Next`) is
//! answered right there; one that waits becomes a task tracked by the plugin's slot (so disposal
//! can wait for it) and by the runtime's census (so shutdown can prove it ended), and the
//! handler returns to the mailbox.
//!
//! A panicking recovery — in `recover` itself, in its first poll or later in its task — is
//! caught. A task then tells the actor that spawned it ([`PluginMsg::RecoveryCrashed`]), and the
//! actor *fails* with a [`RecoveryCrash`] error that carries the report port: ractor hands the
//! error to the supervisor (the plugin host), which restarts the plugin or removes it and answers
//! the port with the restart count the `plugin/crashed` event records. If that incarnation is
//! already gone (another recovery crashed it first), the report goes to the host directly and
//! counts as a crash of the plugin without a second restart.
//!
//! # Why a ready recovery is answered in the handler
//!
//! A waterfall hop should cost about one actor round trip (≤ 1.5 ractor calls: the budget in
//! `docs/architecture.md`, "Benchmark"). A call wakes two tasks: the actor, then the caller.
//! Spawning every recovery as a task added a third wake-up (and a task allocation) to each hop,
//! even for a plugin that answers without waiting — the common case: a plugin that delegates a
//! failure it does not handle. So the handler polls the recovery once, with a no-op waker. If it is
//! ready, the reply goes out at once and no task exists; if it is pending, that same started future
//! (boxed by the plugin, so moving it moves a pointer) is spawned as the tracked task, whose first
//! poll registers the real waker — a wake-up sent to the no-op waker in between is not lost,
//! because a spawned task is always polled.
//!
//! The price: what a recovery does *before its first `.await`* runs in the actor, on its
//! mailbox. The mailbox still never blocks: the handler runs the recovery only
//! up to its first wait, never through one, so a backoff, a log append or a downstream
//! consultation still happens in the task. The CPU before that first wait is the same CPU the
//! task would have spent on the same worker threads; only its place changed. A plugin that
//! computes for long before its first `.await` was already a bad citizen (it would hold a tokio
//! worker in its task just the same). `llm-retry`'s first `.await` is its read of the session's
//! retry chains (waiting its turn on the session's log), so its handler share is reading the payload;
//! the actor opens the recovery's span (one for every plugin) around it.
//!
//! The slot's tracker counts the recovery from before its first poll (a token is taken first and
//! moved into the task if there is one), so disposal's `tracker.wait()` covers the recovery from
//! its start, whichever way it goes.
//!
//! # Why the slot, not the actor, owns the tasks
//!
//! A crashed actor's state is dropped without `post_stop`. If it owned the recoveries of the other
//! sessions, one session's panic would abandon a thousand others' waits. The tracker and the
//! `disposed` token live in the slot, shared by every incarnation: a restart keeps them running,
//! and disposal (`post_stop`: cancel the token, wait for the tracker) ends them all.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};

use futures::FutureExt;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::oneshot;
use tokio_util::task::task_tracker::TaskTrackerToken;
use tracing::Instrument;

use super::HostMsg;
use super::plugin_msg::{CrashNotice, PluginMsg, PluginReply, RecoverCall};
use super::slot::Slot;
use crate::census::{ActorKind, Alive, Census};
use crate::crash::panic_message;
use crate::first_poll::{FirstPoll, first_poll};
use crate::plugin::{Plugin, Recovery, RequestErrorPayload, Verdict};
use crate::waterfall::Answered;

/// The error a plugin actor fails with when a recovery panicked. It carries the report port
/// through ractor's supervision event to the host.
pub(crate) struct RecoveryCrash {
    pub(crate) error: String,
    report: Mutex<Option<oneshot::Sender<u32>>>,
}

impl RecoveryCrash {
    /// Takes the port the restart count is reported on (once).
    pub(crate) fn take_report(&self) -> Option<oneshot::Sender<u32>> {
        self.report.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

impl std::fmt::Debug for RecoveryCrash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecoveryCrash").field("error", &self.error).finish_non_exhaustive()
    }
}

impl std::fmt::Display for RecoveryCrash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a recovery panicked: {}", self.error)
    }
}

impl std::error::Error for RecoveryCrash {}

/// One incarnation of a plugin's actor.
pub(crate) struct PluginActor {
    pub(crate) slot: Arc<Slot>,
    pub(crate) plugin: Arc<dyn Plugin>,
    pub(crate) census: Census,
}

/// A plugin actor's state: only its census mark (the slot holds what outlives an incarnation).
pub(crate) struct PluginState {
    _alive: Alive,
}

/// Reports a crash and returns the restart count (0 when nobody can answer any more).
async fn report_crash(spawner: ActorRef<PluginMsg>, slot: &Slot, error: String) -> u32 {
    let (report, answer) = oneshot::channel();
    let notice = CrashNotice { error: error.clone(), report };
    if spawner.send_message(PluginMsg::RecoveryCrashed(notice)).is_ok() {
        tokio::select! {
            biased;
            restarts = answer => {
                if let Ok(restarts) = restarts {
                    return restarts;
                }
            }
            () = slot.disposed.cancelled() => return 0,
        }
    }
    // That incarnation is gone already: the host still counts the crash.
    let (report, answer) = oneshot::channel();
    if slot.host().send_message(HostMsg::StaleCrash { slot: slot.id, error, report }).is_err() {
        return 0;
    }
    tokio::select! {
        biased;
        restarts = answer => restarts.unwrap_or(0),
        () = slot.disposed.cancelled() => 0,
    }
}

/// The rest of a recovery that did not answer in the handler (spawned as its task): awaits it or
/// takes its panic, reports a crash, and replies. Holds the slot's tracker token until the reply is sent.
async fn settle(
    rest: FirstPoll<Verdict>,
    slot: Arc<Slot>,
    spawner: ActorRef<PluginMsg>,
    call: (Arc<RequestErrorPayload>, oneshot::Sender<PluginReply>),
    _token: TaskTrackerToken,
) {
    let (payload, reply) = call;
    let outcome = match rest {
        FirstPoll::Ready(verdict) => Ok(verdict),
        FirstPoll::Pending(future) => AssertUnwindSafe(future).catch_unwind().await,
        FirstPoll::Panicked(panic) => Err(panic),
    };
    // Sampled before a crash report, which may itself remove the plugin.
    let mut disposed = slot.disposed.is_cancelled();
    if disposed && matches!(outcome, Ok(Verdict::Retry)) {
        // Disposed during its recovery: it fails closed — unless the retry it answers had
        // started (`llm/retry-started` is durable) before the disposal landed: then the log says
        // the next attempt is under way, and a `Stop` would leave another plugin to retry the
        // same failure a second time. Boxed: the rare path.
        disposed = !Box::pin(retry_started(&payload)).await;
    }
    let answer = match outcome {
        Ok(verdict) => Answered::Verdict(verdict),
        Err(panic) => {
            let error = panic_message(panic.as_ref());
            tracing::warn!(plugin = %slot.name, %error, "a recovery panicked");
            // Boxed: a rare path that should not size every recovery task.
            let restarts = Box::pin(report_crash(spawner, &slot, error.clone())).await;
            Answered::Crashed { error, restarts }
        }
    };
    let _ = reply.send(PluginReply { answer, disposed });
}

/// The span one recovery runs in, opened here for every plugin: the plugin, the failure and its
/// place; a plugin that schedules a retry records `retry.delay_ms` and `retry.number` on it
/// (`tracing::Span::current()`).
fn recovery_span(plugin: &str, p: &RequestErrorPayload) -> tracing::Span {
    tracing::info_span!(
        "recovery",
        plugin = %plugin,
        session.id = %p.session,
        turn = p.turn,
        step = p.step,
        attempt = p.attempt,
        gen_ai.provider.name = %p.provider,
        error.r#type = %p.failure.code(),
        retry.delay_ms = tracing::field::Empty,
        retry.number = tracing::field::Empty,
    )
}

/// Whether the failure of `payload` has a retry that started (read from the session's log).
async fn retry_started(payload: &RequestErrorPayload) -> bool {
    payload.log.retry_chains().await.is_ok_and(|chains| chains.latest_failure_retried())
}

impl Actor for PluginActor {
    type Msg = PluginMsg;
    type State = PluginState;
    type Arguments = ();

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        (): (),
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(PluginState { _alive: self.census.enter(ActorKind::Plugin) })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        _state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            PluginMsg::Recover(call) => {
                let RecoverCall { payload, downstream, reply } = call;
                if self.slot.disposed.is_cancelled() {
                    // Out of the chain: fail closed, consult nobody.
                    let answer = Answered::Verdict(Verdict::Stop);
                    let _ = reply.send(PluginReply { answer, disposed: true });
                    return Ok(());
                }
                let span = recovery_span(&self.slot.name, &payload);
                let kept = Arc::clone(&payload);
                let recovery = Recovery {
                    payload,
                    downstream,
                    disposed: self.slot.disposed.clone(),
                    jitter: self.slot.jitter(),
                };
                // Counted by the slot's tracker from before the first poll.
                let token = self.slot.tracker.token();
                let plugin = Arc::clone(&self.plugin);
                // The recovery runs in its span: the first poll here, the rest in its task.
                match span.in_scope(|| first_poll(|| plugin.recover(recovery))) {
                    FirstPoll::Ready(verdict) => {
                        let disposed = self.slot.disposed.is_cancelled();
                        let answer = Answered::Verdict(verdict);
                        let _ = reply.send(PluginReply { answer, disposed });
                    }
                    rest => {
                        let slot = Arc::clone(&self.slot);
                        let task = settle(rest, slot, myself, (kept, reply), token);
                        self.census.spawn(task.instrument(span));
                    }
                }
                Ok(())
            }
            PluginMsg::RecoveryCrashed(CrashNotice { error, report }) => {
                Err(Box::new(RecoveryCrash { error, report: Mutex::new(Some(report)) }))
            }
        }
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        _state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Stopping (not crashing) is disposal: abort every wait, let every recovery settle, then
        // the plugin's own dispose.
        self.slot.dispose().await;
        Ok(())
    }
}
