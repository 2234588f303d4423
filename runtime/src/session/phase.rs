//! The session actor's phase, and its decisions as pure functions (table-tested below).
//!
//! An awake session is in one [`Phase`]: a turn runs; a turn just ended without `agent/idle`
//! (a prompt was queued behind it); it is idle, with or without its grace timer armed; or it is
//! hibernating. Apart from that, its [`Ending`] says whether it was asked to stop: callers of
//! `Session::close` wait for it to hibernate, or the runtime shuts down.
//!
//! After every message, the actor (`session::actor`) asks [`next`] what to do, given a [`View`]
//! of its state — start the next queued prompt, write `agent/idle`, drop the queue, arm the grace
//! timer, hibernate, or wait — and does it, asking again after dropping the queue, after a prompt
//! that could not start and after writing `agent/idle`. [`turn_end`] says how a turn that ended is
//! closed, [`grace_over`] what the grace timer's end does. The actor only acts on them.

use ractor::ActorRef;
use tokio::sync::oneshot;
use tokio_util::sync::DropGuard;

use super::turn_handle::TurnSink;
use crate::cancel::CancelScope;

/// What an awake session is doing.
pub(crate) enum Phase {
    /// A turn runs (its actor is linked under the session's).
    Running(Running),
    /// A turn ended and its closing events went without `agent/idle`, because a prompt was
    /// queued behind it: the next turn starts, or `agent/idle` follows.
    Between,
    /// Nothing runs, `agent/idle` is durable (or the log failed), and no timer is armed.
    Idle,
    /// Idle, waiting out the grace period before it hibernates.
    Grace(Grace),
    /// It closes its log and stops: nothing more happens.
    Hibernating,
}

/// The running turn.
pub(crate) struct Running {
    pub(crate) turn: u32,
    pub(crate) actor: ActorRef<()>,
    pub(crate) scope: CancelScope,
    pub(crate) sink: TurnSink,
    pub(crate) route: String,
}

/// An armed grace timer.
pub(crate) struct Grace {
    /// Which arming this is (a `GraceOver` of an earlier one is stale).
    pub(crate) generation: u64,
    /// Dropping it disarms the timer.
    pub(crate) _disarm: DropGuard,
}

/// Whether the session was asked to stop.
pub(crate) enum Ending {
    /// No: idle, it waits out its grace period.
    Open,
    /// Callers of `Session::close` wait for it to hibernate (or to stay awake for a message that
    /// arrived meanwhile): idle, it hibernates at once.
    Close(Vec<oneshot::Sender<()>>),
    /// The runtime shuts down (callers of `close` may wait too): no turn starts, the queue is
    /// dropped, and idle, it hibernates at once.
    Shutdown(Vec<oneshot::Sender<()>>),
}

impl Phase {
    /// What it is, without what it holds.
    pub(crate) fn now(&self) -> Now {
        match self {
            Phase::Running(_) => Now::Running,
            Phase::Between => Now::Between,
            Phase::Idle => Now::Idle,
            Phase::Grace(_) => Now::Grace,
            Phase::Hibernating => Now::Hibernating,
        }
    }
}

impl Ending {
    /// What it is, without what it holds.
    pub(crate) fn now(&self) -> Asked {
        match self {
            Ending::Open => Asked::Nothing,
            Ending::Close(_) => Asked::Close,
            Ending::Shutdown(_) => Asked::Shutdown,
        }
    }

    /// A caller of `Session::close` waits.
    pub(crate) fn close(&mut self, closer: oneshot::Sender<()>) {
        match self {
            Ending::Open => *self = Ending::Close(vec![closer]),
            Ending::Close(closers) | Ending::Shutdown(closers) => closers.push(closer),
        }
    }

    /// The runtime shuts down (for good: the callers of `close` keep waiting).
    pub(crate) fn shutdown(&mut self) {
        let closers = self.take_closers();
        *self = Ending::Shutdown(closers);
    }

    /// The callers of `close`, to answer: a close is over once they are (a shutdown is not).
    pub(crate) fn take_closers(&mut self) -> Vec<oneshot::Sender<()>> {
        match self {
            Ending::Open => Vec::new(),
            Ending::Close(closers) => {
                let closers = std::mem::take(closers);
                *self = Ending::Open;
                closers
            }
            Ending::Shutdown(closers) => std::mem::take(closers),
        }
    }
}

/// A [`Phase`] without what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Now {
    Running,
    Between,
    Idle,
    Grace,
    Hibernating,
}

/// An [`Ending`] without what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asked {
    Nothing,
    Close,
    Shutdown,
}

/// What the decisions read of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct View {
    /// Its phase.
    pub(crate) now: Now,
    /// Whether it was asked to stop.
    pub(crate) asked: Asked,
    /// A prompt (or a retry) is queued.
    pub(crate) queued: bool,
    /// Its log failed, or could not be opened (the next call should try again).
    pub(crate) log_failed: bool,
    /// The runtime's idle grace period is zero.
    pub(crate) no_grace: bool,
    /// A cancelled turn's closing batch is on its way through the log (the session has not
    /// heard it was written).
    pub(crate) closing: bool,
    /// The actors of a turn a cancellation closed are still stopping.
    pub(crate) stopping: bool,
}

/// What the session does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Nothing until the next message: a turn runs, the grace timer is armed, or it hibernates.
    Wait,
    /// Drop the queued prompts (`disposed`), then ask again.
    DropQueue,
    /// Start the next queued prompt; ask again if it could not start.
    StartNext,
    /// Write `agent/idle` (the last turn's closing events went without it), then ask again.
    WriteIdle,
    /// Arm the grace timer: stay awake for the grace period, then hibernate.
    ArmGrace,
    /// Hibernate now: close the log and stop, if no client message is on its way (if one is,
    /// stay awake to handle it, and answer the callers of `close`).
    Hibernate,
}

/// What the session does next (after every message, and again after some actions: see
/// [`Action`]).
pub(crate) fn next(view: &View) -> Action {
    match view.now {
        Now::Running | Now::Hibernating => Action::Wait,
        _ if view.queued && view.asked == Asked::Shutdown => Action::DropQueue,
        // The session learns that a cancelled turn is closed before it goes on (its last route
        // comes with it: what a retry reruns on).
        _ if view.closing => Action::Wait,
        _ if view.queued => Action::StartNext,
        Now::Between => Action::WriteIdle,
        // A cancelled turn's actors finish stopping before the session arms its grace timer or
        // hibernates (it is told again when they are gone); a next turn need not wait for them.
        _ if view.stopping => Action::Wait,
        Now::Idle | Now::Grace
            if view.asked != Asked::Nothing || view.no_grace || view.log_failed =>
        {
            Action::Hibernate
        }
        Now::Grace => Action::Wait,
        Now::Idle => Action::ArmGrace,
    }
}

/// How a turn that just ended is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TurnEnd {
    /// `agent/idle` goes in the turn's closing batch, and the turn's outcome resolves once that
    /// batch is durable. Otherwise the closing events go alone (the phase is then
    /// [`Phase::Between`]) and the outcome resolves as the next queued turn starts (no
    /// `agent/idle` comes between queued turns).
    pub(crate) idle: bool,
}

/// How a turn that just ended is closed: idle unless a prompt is queued behind it and the
/// session goes on (not shutting down: shutdown drops the queue).
pub(crate) fn turn_end(view: &View) -> TurnEnd {
    TurnEnd { idle: !view.queued || view.asked == Asked::Shutdown }
}

/// What the end of the current grace period does: hibernate, when the session is still waiting
/// it out with nothing queued; nothing otherwise.
pub(crate) fn grace_over(view: &View) -> Action {
    if view.now == Now::Grace && !view.queued { Action::Hibernate } else { Action::Wait }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An idle session of a runtime that runs on: nothing queued, its log fine, a grace period.
    const QUIET: View = View {
        now: Now::Idle,
        asked: Asked::Nothing,
        queued: false,
        log_failed: false,
        no_grace: false,
        closing: false,
        stopping: false,
    };

    #[test]
    fn what_a_session_does_next() {
        let queued = View { queued: true, ..QUIET };
        let cases = [
            // Idle: hibernate now, wait out the grace period, or keep waiting.
            ("an ordinary idle session waits out its grace", QUIET, Action::ArmGrace),
            ("once armed, it keeps waiting", View { now: Now::Grace, ..QUIET }, Action::Wait),
            ("shutdown", View { asked: Asked::Shutdown, ..QUIET }, Action::Hibernate),
            ("close", View { asked: Asked::Close, now: Now::Grace, ..QUIET }, Action::Hibernate),
            ("close, before the timer", View { asked: Asked::Close, ..QUIET }, Action::Hibernate),
            ("a zero grace", View { no_grace: true, ..QUIET }, Action::Hibernate),
            ("a log that failed to open", View { log_failed: true, ..QUIET }, Action::Hibernate),
            (
                "a log that failed, with the timer armed",
                View { log_failed: true, now: Now::Grace, ..QUIET },
                Action::Hibernate,
            ),
            // A turn runs, or the session hibernates: nothing to do until it ends.
            ("a running turn", View { now: Now::Running, ..queued }, Action::Wait),
            (
                "a running turn, shutting down",
                View { now: Now::Running, asked: Asked::Shutdown, ..queued },
                Action::Wait,
            ),
            ("hibernating", View { now: Now::Hibernating, ..queued }, Action::Wait),
            (
                "hibernating, its log failed",
                View { now: Now::Hibernating, log_failed: true, ..QUIET },
                Action::Wait,
            ),
            // A queued prompt starts, whatever else holds — unless the runtime shuts down.
            ("a queued prompt starts", queued, Action::StartNext),
            ("in the grace period", View { now: Now::Grace, ..queued }, Action::StartNext),
            ("between turns", View { now: Now::Between, ..queued }, Action::StartNext),
            ("asked to close", View { asked: Asked::Close, ..queued }, Action::StartNext),
            (
                "with a failed log (it fails the prompt)",
                View { log_failed: true, ..queued },
                Action::StartNext,
            ),
            ("shutting down", View { asked: Asked::Shutdown, ..queued }, Action::DropQueue),
            (
                "shutting down between turns",
                View { asked: Asked::Shutdown, now: Now::Between, ..queued },
                Action::DropQueue,
            ),
            // Between turns, with nothing left to start: `agent/idle` first.
            (
                "between turns, nothing queued",
                View { now: Now::Between, ..QUIET },
                Action::WriteIdle,
            ),
            (
                "between turns, asked to close",
                View { now: Now::Between, asked: Asked::Close, ..QUIET },
                Action::WriteIdle,
            ),
            (
                "between turns, no grace",
                View { now: Now::Between, no_grace: true, ..QUIET },
                Action::WriteIdle,
            ),
            // A cancelled turn: until the session heard its closing batch was written, nothing
            // starts; then a queued prompt starts even while the turn's actors still stop, but
            // the session stays awake until they are gone. A shutdown still drops the queue.
            (
                "a queued prompt waits for the closing",
                View { closing: true, ..queued },
                Action::Wait,
            ),
            (
                "a queued prompt does not wait for the cancelled turn's actors",
                View { stopping: true, ..queued },
                Action::StartNext,
            ),
            ("no grace timer before they are gone", View { stopping: true, ..QUIET }, Action::Wait),
            (
                "no hibernation before they are gone",
                View { stopping: true, asked: Asked::Close, no_grace: true, ..QUIET },
                Action::Wait,
            ),
            (
                "nor before the closing is heard",
                View { closing: true, asked: Asked::Shutdown, ..QUIET },
                Action::Wait,
            ),
            (
                "shutting down while they stop",
                View { stopping: true, closing: true, asked: Asked::Shutdown, ..queued },
                Action::DropQueue,
            ),
        ];
        for (case, view, expected) in cases {
            assert_eq!(next(&view), expected, "{case}");
        }
    }

    #[test]
    fn asking_again_after_each_step_ends_in_a_wait_or_a_hibernation() {
        // What each action leaves (the actor's part, in the simplest case): the session settles.
        let after = |view: View, action: Action| match action {
            Action::DropQueue => Some(View { queued: false, ..view }),
            Action::StartNext => Some(View { now: Now::Running, queued: false, ..view }),
            Action::WriteIdle => Some(View { now: Now::Idle, ..view }),
            Action::ArmGrace | Action::Hibernate | Action::Wait => None,
        };
        for now in [Now::Running, Now::Between, Now::Idle, Now::Grace, Now::Hibernating] {
            for asked in [Asked::Nothing, Asked::Close, Asked::Shutdown] {
                for bits in 0..32 {
                    let flag = |bit: u32| bits & (1 << bit) != 0;
                    let (queued, log_failed, no_grace) = (flag(0), flag(1), flag(2));
                    let (closing, stopping) = (flag(3), flag(4));
                    let mut view =
                        View { now, asked, queued, log_failed, no_grace, closing, stopping };
                    for _ in 0..4 {
                        match after(view, next(&view)) {
                            Some(then) => view = then,
                            None => break,
                        }
                    }
                    let last = next(&view);
                    assert!(
                        matches!(last, Action::Wait | Action::ArmGrace | Action::Hibernate),
                        "{view:?} settles: {last:?}"
                    );
                    assert!(
                        !(asked == Asked::Shutdown && last == Action::ArmGrace),
                        "a session never waits out its grace while the runtime shuts down"
                    );
                }
            }
        }
    }

    #[test]
    fn a_turns_closing_batch_is_idle_unless_a_prompt_waits_behind_it() {
        let cases = [
            // (queued, shutting down) → idle
            (false, false, true),
            (true, false, false),
            (false, true, true),
            (true, true, true),
        ];
        for (queued, shutting_down, idle) in cases {
            let asked = if shutting_down { Asked::Shutdown } else { Asked::Nothing };
            let view = View { now: Now::Running, asked, queued, ..QUIET };
            assert_eq!(turn_end(&view), TurnEnd { idle }, "{queued} {shutting_down}");
            let closing = View { asked: Asked::Close, ..view };
            assert_eq!(turn_end(&closing), TurnEnd { idle: !queued }, "a close keeps the queue");
        }
    }

    #[test]
    fn the_end_of_the_grace_period_hibernates_a_session_still_waiting_it_out() {
        let grace = View { now: Now::Grace, ..QUIET };
        let cases = [
            ("waiting it out", grace, Action::Hibernate),
            ("asked to close too", View { asked: Asked::Close, ..grace }, Action::Hibernate),
            ("a prompt is queued", View { queued: true, ..grace }, Action::Wait),
            ("a turn started since", View { now: Now::Running, ..grace }, Action::Wait),
            ("the timer was disarmed", View { now: Now::Idle, ..grace }, Action::Wait),
            ("hibernating already", View { now: Now::Hibernating, ..grace }, Action::Wait),
        ];
        for (case, view, expected) in cases {
            assert_eq!(grace_over(&view), expected, "{case}");
        }
    }

    #[test]
    fn a_close_ends_once_its_callers_are_answered_a_shutdown_does_not() {
        let mut ending = Ending::Open;
        assert_eq!(ending.now(), Asked::Nothing);
        assert!(ending.take_closers().is_empty());
        let (closer, _) = oneshot::channel();
        ending.close(closer);
        assert_eq!(ending.now(), Asked::Close);
        assert_eq!(ending.take_closers().len(), 1);
        assert_eq!(ending.now(), Asked::Nothing, "answered: the session goes on");
        let (closer, _) = oneshot::channel();
        ending.close(closer);
        ending.shutdown();
        assert_eq!(ending.now(), Asked::Shutdown, "a shutdown keeps the callers of close");
        assert_eq!(ending.take_closers().len(), 1);
        assert_eq!(ending.now(), Asked::Shutdown, "for good");
    }
}
