//! Following a turn that runs on another node: its events read from the store as they are
//! committed, until its `turn/end`.
//!
//! The node that serves a session notifies `rein_appended` with the partitions of every batch it
//! commits (in the batch's transaction, so the notice arrives once the rows are readable); a
//! follower of a session in one of those partitions reads what follows the last event it saw
//! ([`SessionStore::load_from`]). A notice can be missed — the listening connection was away —
//! so a follower also reads every [`POLL`] on its own, and once more whenever the listener
//! connects again. Whichever node ends up serving the turn (it may move on a takeover), its
//! `turn/end` reaches the follower the same way.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{Notify, mpsc};

use crate::event::{Envelope, Event, TurnEndReason};
use crate::session::TurnOutcome;
use crate::session_log::Batch;
use crate::store::SessionStore;

/// How often a follower reads without being told.
pub(crate) const POLL: Duration = Duration::from_secs(1);

/// The followers of a node, by partition.
#[derive(Default)]
pub(crate) struct Follows {
    by_partition: Mutex<HashMap<u32, Vec<Arc<Notify>>>>,
}

impl Follows {
    fn lock(&self) -> MutexGuard<'_, HashMap<u32, Vec<Arc<Notify>>>> {
        self.by_partition.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Batches of `partitions` were committed: their followers read.
    pub(crate) fn wake(&self, partitions: impl IntoIterator<Item = u32>) {
        let followers = self.lock();
        for partition in partitions {
            for notify in followers.get(&partition).into_iter().flatten() {
                notify.notify_one();
            }
        }
    }

    /// Every follower reads (notices may have been missed).
    pub(crate) fn wake_all(&self) {
        for notify in self.lock().values().flatten() {
            notify.notify_one();
        }
    }

    /// Follows turn `turn` of `session` (in `partition`) from `seq` `from`: sends the events of
    /// each read, up to the turn's `turn/end`, to `events` as one batch (while anyone listens)
    /// and resolves to the turn's outcome at that `turn/end`.
    /// Reads that fail (the database away) are tried again at the next notice or poll.
    pub(crate) async fn follow(
        &self,
        store: &dyn SessionStore,
        partition: u32,
        session: &str,
        turn: u32,
        from: u64,
        events: mpsc::UnboundedSender<Batch>,
    ) -> TurnOutcome {
        let notify = Arc::new(Notify::new());
        self.lock().entry(partition).or_default().push(Arc::clone(&notify));
        let _registered = Registered { follows: self, partition, notify: Arc::clone(&notify) };
        let mut next = from;
        loop {
            if let Ok(mut read) = store.load_from(session, next).await {
                let reason = up_to_end(&mut read, turn);
                if let Some(last) = read.last() {
                    next = last.seq + 1;
                    let _ = events.send(Batch::from(read));
                }
                if let Some(reason) = reason {
                    return TurnOutcome { turn, reason };
                }
            }
            tokio::select! {
                () = notify.notified() => {}
                () = tokio::time::sleep(POLL) => {}
            }
        }
    }
}

/// Cuts `read` after turn `turn`'s `turn/end`, if it holds it, and says how the turn ended.
fn up_to_end(read: &mut Vec<Envelope>, turn: u32) -> Option<TurnEndReason> {
    let end =
        read.iter().position(|e| matches!(&e.event, Event::TurnEnd(end) if end.turn == turn))?;
    read.truncate(end + 1);
    match &read[end].event {
        Event::TurnEnd(end) => Some(end.reason.clone()),
        _ => None,
    }
}

/// A follower's registration, removed however the follow ends.
struct Registered<'a> {
    follows: &'a Follows,
    partition: u32,
    notify: Arc<Notify>,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        let mut followers = self.follows.lock();
        if let Some(list) = followers.get_mut(&self.partition) {
            list.retain(|n| !Arc::ptr_eq(n, &self.notify));
            if list.is_empty() {
                followers.remove(&self.partition);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{AgentIdle, TurnEnd};

    /// A read of `events`: `Some(n)` a `turn/end` of turn `n`, `None` any other event.
    fn read(events: &[Option<u32>]) -> Vec<Envelope> {
        let event = |end: &Option<u32>| match end {
            Some(turn) => Event::TurnEnd(TurnEnd { turn: *turn, reason: TurnEndReason::Completed }),
            None => Event::AgentIdle(AgentIdle {}),
        };
        let envelope = |(seq, end)| Envelope { seq, time: 0, event: event(end) };
        (0u64..).zip(events).map(envelope).collect()
    }

    #[test]
    fn a_read_is_cut_after_the_followed_turns_end_and_says_how_it_ended() {
        // (the read, the turn followed, what is left of the read, whether the turn ended)
        let cases: [(&[Option<u32>], u32, usize, bool); 5] = [
            (&[], 2, 0, false),
            (&[None, None], 2, 2, false),
            (&[None, Some(2), None, None], 2, 2, true),
            (&[Some(1), None], 2, 2, false), // an earlier turn's end is not this one's
            (&[None, Some(2), Some(3)], 2, 2, true),
        ];
        for (events, turn, left, ended) in cases {
            let mut events = read(events);
            let reason = up_to_end(&mut events, turn);
            assert_eq!((events.len(), reason.is_some()), (left, ended), "{events:?}");
            if ended {
                assert_eq!(reason, Some(TurnEndReason::Completed));
            }
        }
    }
}
