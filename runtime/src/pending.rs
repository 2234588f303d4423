//! What [`Runtime::resume_pending`](crate::runtime::Runtime::resume_pending) finds and reports:
//! the sessions of a store that a crash left with an open turn.
//!
//! The choice is pure ([`pending`]): from every session's [`Head`](crate::store::Head), the ones
//! with an open turn, each with the wake-up time of its pending retry wait (if any); a session
//! whose head cannot be read is reported, never fatal. Opening each one is what resumes it (see
//! the session's open).

use crate::store::SessionHead;

/// A session that had an open turn, as `resume_pending` found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingTurn {
    /// The session.
    pub session: String,
    /// Its open turn.
    pub turn: u32,
    /// When the retry wait pending in that turn ends (runtime-clock ms), if it was waiting.
    pub wake_at: Option<u64>,
}

impl PendingTurn {
    /// A status line for a person: `resumed turn 3 of session ID` and, when it was waiting for a
    /// retry, ` (it was waiting for a retry)`.
    pub fn describe(&self) -> String {
        let waiting = if self.wake_at.is_some() { " (it was waiting for a retry)" } else { "" };
        format!("resumed turn {} of session {}{waiting}", self.turn, self.session)
    }
}

/// A session `resume_pending` could not resume, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotResumed {
    /// The session.
    pub session: String,
    /// Why: its head could not be read, or the session did not open.
    pub error: String,
}

/// What `resume_pending` did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Resumed {
    /// The sessions with an open turn that were opened (resumed), in session-id order.
    pub resumed: Vec<PendingTurn>,
    /// The sessions that could not be: their head unreadable, or their log failing to open.
    pub failed: Vec<NotResumed>,
}

impl Resumed {
    /// A status line for a person: how many sessions were resumed (and how many of them were
    /// waiting for a retry), or that none had an open turn.
    pub fn describe(&self) -> String {
        let n = self.resumed.len();
        if n == 0 {
            return "no session had an open turn to resume".to_owned();
        }
        let sessions = if n == 1 { "1 session".to_owned() } else { format!("{n} sessions") };
        let waiting = self.resumed.iter().filter(|t| t.wake_at.is_some()).count();
        let waiting = match waiting {
            0 => String::new(),
            1 if n == 1 => " (it was waiting for a retry)".to_owned(),
            1 => " (1 was waiting for a retry)".to_owned(),
            w => format!(" ({w} were waiting for a retry)"),
        };
        format!("resumed {sessions} a crash had left with an open turn{waiting}")
    }
}

/// The sessions of `heads` with an open turn, and those whose head could not be read.
pub fn pending(heads: &[SessionHead]) -> (Vec<PendingTurn>, Vec<NotResumed>) {
    let mut open = Vec::new();
    let mut failed = Vec::new();
    for SessionHead { session, head } in heads {
        match head {
            Ok(head) => {
                if let Some(turn) = head.open_turn {
                    let session = session.clone();
                    open.push(PendingTurn { session, turn, wake_at: head.wake_at });
                }
            }
            Err(error) => {
                failed.push(NotResumed { session: session.clone(), error: error.clone() })
            }
        }
    }
    (open, failed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Head;

    #[test]
    fn the_sessions_with_an_open_turn_are_pending_and_an_unreadable_head_is_reported() {
        let head = |session: &str, open_turn, wake_at| SessionHead {
            session: session.into(),
            head: Ok(Head { next_seq: 9, open_turn, wake_at }),
        };
        let heads = [
            head("a", None, None),
            head("b", Some(3), None),
            SessionHead { session: "c".into(), head: Err("c.jsonl: bad".into()) },
            head("d", Some(1), Some(500)),
        ];
        let (open, failed) = pending(&heads);
        let turn =
            |session: &str, turn, wake_at| PendingTurn { session: session.into(), turn, wake_at };
        assert_eq!(open, [turn("b", 3, None), turn("d", 1, Some(500))]);
        assert_eq!(failed, [NotResumed { session: "c".into(), error: "c.jsonl: bad".into() }]);
        assert_eq!(pending(&[]), (vec![], vec![]));
        let report = |resumed: Vec<PendingTurn>| Resumed { resumed, failed: vec![] }.describe();
        assert_eq!(report(vec![]), "no session had an open turn to resume");
        assert_eq!(
            report(open[1..].to_vec()),
            "resumed 1 session a crash had left with an open turn (it was waiting for a retry)"
        );
        assert_eq!(
            report(open[..1].to_vec()),
            "resumed 1 session a crash had left with an open turn"
        );
        assert_eq!(
            report(open.clone()),
            "resumed 2 sessions a crash had left with an open turn (1 was waiting for a retry)"
        );
        assert_eq!(
            report(vec![open[1].clone(), open[1].clone()]),
            "resumed 2 sessions a crash had left with an open turn (2 were waiting for a retry)"
        );
        let lines: Vec<String> = open.iter().map(PendingTurn::describe).collect();
        assert_eq!(
            lines,
            [
                "resumed turn 3 of session b",
                "resumed turn 1 of session d (it was waiting for a retry)"
            ]
        );
    }
}
