//! Stamping a batch: contiguous `seq`, and a `time` that never goes backwards.
//!
//! # Why time is clamped to the last written time
//!
//! `time` comes from the injected clock, but a wall clock can step backwards (NTP, a suspended
//! laptop, a virtual machine migrated between hosts). Readers of a log order and measure by
//! `time` — the invariant "`llm/retry-started.time ≥ llm/retry.time + delayMs`" does — so a log
//! whose times go down would report a wait that never happened. Each batch is therefore stamped
//! `max(clock, last written time)`: the log's times are non-decreasing even if the clock is not,
//! and a clock that jumps back simply stalls the log's time until the clock catches up.
//!
//! The clock is read once per batch: events appended together (`step/end` + `turn/end`) share
//! one time.
//!
//! # Why stamping does not advance
//!
//! [`Sequencer::stamp`] only computes; [`Sequencer::advance`] moves past a batch once the store
//! acknowledged it. A batch a validator rejected, or that the store failed to write, leaves the
//! next `seq` where it was, so the log stays contiguous.

use std::sync::Arc;

use crate::event::{Envelope, Event};

/// A loaded log whose `seq`s are not `0, 1, 2, …`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gap {
    /// The `seq` that belongs at the position.
    pub(crate) expected: u64,
    /// The `seq` found there.
    pub(crate) found: u64,
}

/// The next `seq` and the last written `time` of a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Sequencer {
    next_seq: u64,
    last_time: u64,
}

impl Sequencer {
    /// A sequencer continuing a loaded log, which must be contiguous from seq 0: the next
    /// `seq` is its length and its last event's `time` is the floor for the next batch.
    pub(crate) fn continuing(log: &[Envelope]) -> Result<Self, Gap> {
        if let Some((expected, found)) =
            log.iter().zip(0u64..).map(|(e, i)| (i, e.seq)).find(|(i, seq)| i != seq)
        {
            return Err(Gap { expected, found });
        }
        Ok(log.last().map_or_else(Self::default, |e| Self {
            next_seq: e.seq.saturating_add(1),
            last_time: e.time,
        }))
    }

    /// The `seq` the next event takes (= the number of events in a contiguous log).
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Stamps `events` as the next batch, at clock reading `now`. Changes nothing. The batch is
    /// one allocation, the one the log then shares (see `state`).
    pub(crate) fn stamp(&self, events: Vec<Event>, now: u64) -> Arc<[Envelope]> {
        let time = now.max(self.last_time);
        events
            .into_iter()
            .zip(self.next_seq..)
            .map(|(event, seq)| Envelope { seq, time, event })
            .collect()
    }

    /// Moves past a batch [`Sequencer::stamp`] made and the store acknowledged.
    pub(crate) fn advance(&mut self, batch: &[Envelope]) {
        if let Some(last) = batch.last() {
            self.next_seq = last.seq.saturating_add(1);
            self.last_time = self.last_time.max(last.time);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{AgentIdle, UserMessage};

    fn idle() -> Event {
        Event::AgentIdle(AgentIdle {})
    }

    #[test]
    fn seqs_are_contiguous_and_times_never_decrease() {
        // (clock reading, batch size, expected seqs, expected time)
        let table: [(u64, usize, &[u64], u64); 6] = [
            (10, 1, &[0], 10),
            (12, 3, &[1, 2, 3], 12),
            (5, 2, &[4, 5], 12), // the clock went backwards: the time holds
            (12, 1, &[6], 12),
            (13, 0, &[], 13),
            (40, 1, &[7], 40),
        ];
        let mut seq = Sequencer::default();
        for (now, n, seqs, time) in table {
            let batch = seq.stamp(vec![idle(); n], now);
            assert_eq!(batch.iter().map(|e| e.seq).collect::<Vec<_>>(), seqs, "at {now}");
            assert!(batch.iter().all(|e| e.time == time), "at {now}");
            seq.advance(&batch);
        }
        assert_eq!(seq.next_seq(), 8);
    }

    #[test]
    fn stamping_without_advancing_reuses_the_seq() {
        let seq = Sequencer::default();
        let rejected = seq.stamp(vec![idle(), idle()], 100);
        let next = seq.stamp(vec![idle()], 50);
        assert_eq!(rejected[0].seq, 0);
        assert_eq!(next[0].seq, 0);
        assert_eq!(next[0].time, 50, "a batch never written does not hold the time back");
    }

    fn log(seqs: &[u64]) -> Vec<Envelope> {
        seqs.iter()
            .map(|&seq| Envelope {
                seq,
                time: 9_000 + seq,
                event: Event::UserMessage(UserMessage { text: "hi".into() }),
            })
            .collect()
    }

    #[test]
    fn a_loaded_log_continues_after_its_last_event() {
        let seq = Sequencer::continuing(&log(&[0, 1, 2])).unwrap();
        assert_eq!(seq.next_seq(), 3);
        let batch = seq.stamp(vec![idle()], 1_000);
        assert_eq!((batch[0].seq, batch[0].time), (3, 9_002), "the clock is behind the log");
        assert_eq!(Sequencer::continuing(&[]).unwrap(), Sequencer::default());
    }

    #[test]
    fn a_loaded_log_with_a_gap_names_the_first_bad_seq() {
        let table: [(&[u64], Gap); 4] = [
            (&[1], Gap { expected: 0, found: 1 }),
            (&[0, 2, 3], Gap { expected: 1, found: 2 }),
            (&[0, 1, 1], Gap { expected: 2, found: 1 }),
            (&[0, 1, 2, 7], Gap { expected: 3, found: 7 }),
        ];
        for (seqs, gap) in table {
            assert_eq!(Sequencer::continuing(&log(seqs)), Err(gap), "{seqs:?}");
        }
    }

    #[test]
    fn events_keep_their_order_within_a_batch() {
        let events = vec![Event::UserMessage(UserMessage { text: "a".into() }), idle()];
        let batch = Sequencer::default().stamp(events.clone(), 1);
        assert_eq!(batch.iter().map(|e| e.event.clone()).collect::<Vec<_>>(), events);
    }
}
