//! Envelopes for store tests, stamped without a clock: event `seq` at [`EPOCH`] + `seq`
//! milliseconds, so a log written by hand reads back the same from every store; and the
//! many-sessions workload the stores' concurrency tests run ([`append_concurrently`]).

use std::sync::Arc;

use rein_event::event::{AgentIdle, Envelope, Event, UserMessage};
use rein_runtime::store::SessionStore;

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

/// Appends to `sessions` sessions (`session-0`, `session-1`, …) at once, each task `appends`
/// batches of 1 to 3 messages (varying by session and round) whose text is `SESSION/SEQ`;
/// returns each session with how many events it appended, once every append succeeded.
pub async fn append_concurrently<S: SessionStore + ?Sized>(
    store: &Arc<S>,
    sessions: usize,
    appends: u64,
) -> Vec<(String, u64)> {
    let mut tasks = tokio::task::JoinSet::new();
    for s in 0..sessions {
        let store = Arc::clone(store);
        tasks.spawn(async move {
            let session = format!("session-{s}");
            let mut seq = 0;
            for append in 0..appends {
                let n = 1 + (s as u64 + append) % 3;
                let batch: Vec<Envelope> =
                    (seq..seq + n).map(|q| message(q, &format!("{session}/{q}"))).collect();
                store.append(&session, &batch).await.unwrap();
                seq += n;
            }
            (session, seq)
        });
    }
    let mut appended = Vec::new();
    while let Some(done) = tasks.join_next().await {
        appended.push(done.unwrap());
    }
    appended
}
