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

use crate::event::Event;
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
                let end = read.iter().position(
                    |event| matches!(&event.event, Event::TurnEnd(end) if end.turn == turn),
                );
                if let Some(end) = end {
                    read.truncate(end + 1);
                }
                let reason = end.and_then(|end| match &read[end].event {
                    Event::TurnEnd(end) => Some(end.reason.clone()),
                    _ => None,
                });
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
