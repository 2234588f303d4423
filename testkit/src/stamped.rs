//! Envelopes for store tests, stamped without a clock: event `seq` at [`EPOCH`] + `seq`
//! milliseconds, so a log written by hand reads back the same from every store.

use rein_event::event::{AgentIdle, Envelope, Event, UserMessage};

/// The time of seq 0 (ms since the Unix epoch; November 2023).
pub const EPOCH: u64 = 1_700_000_000_000;

/// `event` as the envelope of `seq`, at [`EPOCH`] + `seq`.
pub fn envelope(seq: u64, event: Event) -> Envelope {
    Envelope { seq, time: EPOCH + seq, event }
}

/// `user/message` with `text`, as the envelope of `seq`.
pub fn message(seq: u64, text: &str) -> Envelope {
    envelope(seq, Event::UserMessage(UserMessage { text: text.into() }))
}

/// `agent/idle`, as the envelope of `seq`.
pub fn idle(seq: u64) -> Envelope {
    envelope(seq, Event::AgentIdle(AgentIdle {}))
}
