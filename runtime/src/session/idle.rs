//! The session's decisions around a turn's end and idleness, as pure functions (table-tested
//! below): whether a turn's closing batch carries `agent/idle` (and its outcome resolves at once),
//! and what an idle session does next — hibernate now, wait out its grace period, or keep waiting.
//!
//! The session actor (`session::actor`) only acts on them.

/// How a turn that just ended is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Closing {
    /// `agent/idle` goes in the turn's closing batch, and the turn's outcome resolves once that
    /// batch is durable. Otherwise the closing events go alone and the outcome resolves as the
    /// next queued turn starts (no `agent/idle` comes between queued turns).
    pub(crate) idle: bool,
}

/// How a turn that just ended is closed: idle unless a prompt is queued behind it and the
/// session goes on (not shutting down: shutdown drops the queue).
pub(crate) fn closing(queued: bool, shutting_down: bool) -> Closing {
    Closing { idle: !queued || shutting_down }
}

/// What an idle session (nothing running, nothing queued, `agent/idle` durable) does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WhenIdle {
    /// Hibernate now: close the log and stop (if no client message is on its way).
    Hibernate,
    /// Arm the grace timer: stay awake for the grace period, then hibernate.
    ArmGrace,
    /// The grace timer is already armed: keep waiting.
    Wait,
}

/// What the session is, as far as idleness goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Idle {
    /// The runtime is shutting down.
    pub(crate) shutting_down: bool,
    /// A caller of `Session::close` waits for the session to hibernate.
    pub(crate) closing: bool,
    /// The runtime's idle grace period is zero.
    pub(crate) no_grace: bool,
    /// The session's log could not be opened (the next call should try again).
    pub(crate) log_failed: bool,
    /// The grace timer is armed.
    pub(crate) grace_armed: bool,
}

/// What an idle session does next.
pub(crate) fn when_idle(idle: Idle) -> WhenIdle {
    if idle.shutting_down || idle.closing || idle.no_grace || idle.log_failed {
        WhenIdle::Hibernate
    } else if idle.grace_armed {
        WhenIdle::Wait
    } else {
        WhenIdle::ArmGrace
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            assert_eq!(
                closing(queued, shutting_down),
                Closing { idle },
                "{queued} {shutting_down}"
            );
        }
    }

    #[test]
    fn an_idle_session_hibernates_at_once_only_when_something_says_so() {
        let quiet = Idle {
            shutting_down: false,
            closing: false,
            no_grace: false,
            log_failed: false,
            grace_armed: false,
        };
        let cases = [
            ("an ordinary idle session waits out its grace", quiet, WhenIdle::ArmGrace),
            ("once armed, it keeps waiting", Idle { grace_armed: true, ..quiet }, WhenIdle::Wait),
            ("shutdown", Idle { shutting_down: true, ..quiet }, WhenIdle::Hibernate),
            ("close", Idle { closing: true, grace_armed: true, ..quiet }, WhenIdle::Hibernate),
            ("a zero grace", Idle { no_grace: true, ..quiet }, WhenIdle::Hibernate),
            ("a log that failed to open", Idle { log_failed: true, ..quiet }, WhenIdle::Hibernate),
        ];
        for (case, idle, expected) in cases {
            assert_eq!(when_idle(idle), expected, "{case}");
        }
    }
}
