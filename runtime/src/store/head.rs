//! A session's [`Head`]: what a store knows of a log without reading it — its next `seq`, the
//! turn it left open (if any), and when a retry wait pending in that turn wakes up.
//!
//! The head is a pure fold over the log's events ([`Head::apply`]), so every store can keep it
//! up to date as it appends and any reader can rebuild it from the events. Only a few kinds
//! change more than the next `seq` ([`Mark`]): `turn/start` opens a turn, `turn/end` closes it,
//! `llm/retry` inside the open turn schedules a wake-up at `time + delayMs` (rounded up to the
//! millisecond: never early), and `llm/retry-started` (or a new turn, or its end) clears it.
//! Every other event (`turn/resumed` included: a resumed turn stays open, and its wait, if any,
//! is still pending until `llm/retry-started`) only moves the next `seq`. The stores whose writer
//! gets encoded lines rather than events take the marks of an append ([`Mark::of`]) with it, so a
//! batch's heads are folded without decoding a line.
//!
//! `Runtime::resume_pending` reads every session's head ([`SessionStore::heads`]) to find the
//! sessions with an open turn without reading their logs.
//!
//! [`SessionStore::heads`]: super::SessionStore::heads

use crate::event::{Envelope, Event};

/// What a store keeps of a session's log: see the [module](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Head {
    /// The `seq` the next event must have (the number of events).
    pub next_seq: u64,
    /// The turn started and not ended, if any.
    pub open_turn: Option<u32>,
    /// When the retry wait pending in the open turn ends (runtime-clock ms: the `llm/retry`'s
    /// `time + delayMs`), if an `llm/retry` of that turn has no `llm/retry-started` after it.
    pub wake_at: Option<u64>,
}

/// The part of an event that changes a head beyond its next `seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// `turn/start` of this turn.
    TurnStart(u32),
    /// `turn/end`.
    TurnEnd,
    /// `llm/retry`: its wait ends at this time.
    Retry {
        /// `time + delayMs`, rounded up.
        wake_at: u64,
    },
    /// `llm/retry-started`.
    RetryStarted,
}

impl Mark {
    /// The mark of `envelope`, `None` for an event that only moves the next `seq`.
    pub fn of(envelope: &Envelope) -> Option<Mark> {
        match &envelope.event {
            Event::TurnStart(start) => Some(Mark::TurnStart(start.turn)),
            Event::TurnEnd(_) => Some(Mark::TurnEnd),
            Event::LlmRetry(retry) => {
                Some(Mark::Retry { wake_at: wake_at(envelope.time, retry.delay_ms) })
            }
            Event::LlmRetryStarted(_) => Some(Mark::RetryStarted),
            _ => None,
        }
    }
}

/// `time + delay_ms`, rounded up to the millisecond; a delay that is not a positive number adds
/// nothing.
fn wake_at(time: u64, delay_ms: f64) -> u64 {
    let delay = if delay_ms.is_finite() && delay_ms > 0.0 { delay_ms.ceil() } else { 0.0 };
    // `as` saturates: a delay past u64's range wakes at the end of time.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    time.saturating_add(delay as u64)
}

impl Head {
    /// The head of the log `events` (in `seq` order): the fold of [`Head::apply`] from an empty
    /// log.
    pub fn of(events: &[Envelope]) -> Head {
        let mut head = Head::default();
        for event in events {
            head.apply(event);
        }
        head
    }

    /// The head after `envelope` was appended.
    pub fn apply(&mut self, envelope: &Envelope) {
        self.next_seq = envelope.seq.saturating_add(1);
        if let Some(mark) = Mark::of(envelope) {
            self.mark(mark);
        }
    }

    /// Applies the mark of an event (the next `seq` is the caller's: see [`Head::apply`]).
    pub fn mark(&mut self, mark: Mark) {
        match mark {
            Mark::TurnStart(turn) => {
                self.open_turn = Some(turn);
                self.wake_at = None;
            }
            Mark::TurnEnd => {
                self.open_turn = None;
                self.wake_at = None;
            }
            Mark::Retry { wake_at } if self.open_turn.is_some() => self.wake_at = Some(wake_at),
            Mark::Retry { .. } => {}
            Mark::RetryStarted => self.wake_at = None,
        }
    }

    /// The head after an append of `count` events from `seq` `first` whose marks are `marks`, in
    /// order: what [`Head::apply`] of each event gives.
    pub fn append(&mut self, first: u64, count: u64, marks: &[Mark]) {
        for &mark in marks {
            self.mark(mark);
        }
        self.next_seq = first.saturating_add(count);
    }
}

/// A session's id and its head, as [`SessionStore::heads`](super::SessionStore::heads) lists
/// them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionHead {
    /// The session.
    pub session: String,
    /// Its head, or why it cannot be read (the message of the store's error: a log whose end
    /// does not parse, say).
    pub head: Result<Head, String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{
        AgentIdle, LlmRetry, LlmRetryStarted, StepRef, TurnEnd, TurnEndReason, TurnStart,
    };
    use crate::failure::Failure;

    fn at(seq: u64, time: u64, event: Event) -> Envelope {
        Envelope { seq, time, event }
    }

    fn retry(delay_ms: f64) -> Event {
        Event::LlmRetry(LlmRetry {
            retry_id: "r".into(),
            turn: 1,
            step: 1,
            provider: "p".into(),
            plugin: "llm-retry".into(),
            mode: "normal".into(),
            policy_key: "k".into(),
            retry: 1,
            max_retries: Some(3),
            delay_ms,
            failure: Failure::new("TRANSPORT", "x").unwrap(),
        })
    }

    fn started() -> Event {
        Event::LlmRetryStarted(LlmRetryStarted { retry_id: "r".into(), turn: 1, step: 1, retry: 1 })
    }

    fn start(turn: u32) -> Event {
        Event::TurnStart(TurnStart { turn })
    }

    fn end(turn: u32) -> Event {
        Event::TurnEnd(TurnEnd { turn, reason: TurnEndReason::Completed })
    }

    fn idle() -> Event {
        Event::AgentIdle(AgentIdle {})
    }

    #[test]
    fn the_head_follows_turns_and_retry_waits() {
        /// (the log's events as (time, event), the head after them)
        type Case = (Vec<(u64, Event)>, Head);
        let head = |next_seq, open_turn, wake_at| Head { next_seq, open_turn, wake_at };
        let cases: Vec<Case> = vec![
            (vec![], head(0, None, None)),
            (vec![(5, idle())], head(1, None, None)),
            (vec![(5, start(1))], head(1, Some(1), None)),
            (vec![(5, start(1)), (6, end(1))], head(2, None, None)),
            (vec![(5, start(1)), (100, retry(250.0))], head(2, Some(1), Some(350))),
            // Rounded up: never woken early.
            (vec![(5, start(1)), (100, retry(0.2))], head(2, Some(1), Some(101))),
            (vec![(5, start(1)), (100, retry(-3.0))], head(2, Some(1), Some(100))),
            (vec![(5, start(1)), (100, retry(f64::NAN))], head(2, Some(1), Some(100))),
            (vec![(5, start(1)), (100, retry(f64::MAX))], head(2, Some(1), Some(u64::MAX))),
            (vec![(5, start(1)), (100, retry(250.0)), (350, started())], head(3, Some(1), None)),
            // The last retry of the turn counts.
            (
                vec![(5, start(1)), (10, retry(5.0)), (15, started()), (20, retry(30.0))],
                head(4, Some(1), Some(50)),
            ),
            // Other events leave the wait pending.
            (
                vec![(5, start(1)), (10, retry(5.0)), (11, idle()), (12, idle())],
                head(4, Some(1), Some(15)),
            ),
            (vec![(5, start(1)), (10, retry(5.0)), (12, end(1))], head(3, None, None)),
            (
                vec![(5, start(1)), (10, retry(5.0)), (12, end(1)), (13, start(2))],
                head(4, Some(2), None),
            ),
            // A retry outside a turn (an invalid log) schedules nothing.
            (vec![(10, retry(5.0))], head(1, None, None)),
        ];
        for (events, want) in cases {
            let events: Vec<Envelope> =
                events.into_iter().enumerate().map(|(seq, (t, e))| at(seq as u64, t, e)).collect();
            let kinds: Vec<&str> = events.iter().map(Envelope::kind).collect();
            assert_eq!(Head::of(&events), want, "{kinds:?}");
            // Folding the marks of appends in any split gives the same head.
            for split in 0..=events.len() {
                let mut folded = Head::default();
                for part in [&events[..split], &events[split..]] {
                    let marks: Vec<Mark> = part.iter().filter_map(Mark::of).collect();
                    if let Some(first) = part.first() {
                        folded.append(first.seq, part.len() as u64, &marks);
                    }
                }
                assert_eq!(folded, want, "{kinds:?} split at {split}");
            }
        }
        let step = StepRef { turn: 1, step: 1 };
        assert_eq!(Mark::of(&at(0, 0, Event::StepStart(step))), None);
    }
}
