//! The fence of a node (SPEC §12): which partitions this node holds, at which epoch, and the
//! sessions claimed under them — and the check every append batch makes against the
//! `partitions` table in its own transaction.
//!
//! A node's `PartitionKeeper` (`crate::cluster`) takes partitions (each taking bumps the
//! partition's `epoch`) and tells the fence ([`Fence::hold`], [`Fence::release`]). A session may
//! be claimed only while its partition is held ([`StoreError::NotOwned`] otherwise), and the
//! claim remembers the epoch it was taken at. Every batch the writer commits reads the epochs of
//! its partitions `FOR SHARE` in the same transaction (`judge`): a request whose claim's epoch is
//! not the partition's epoch in the database (another node took the partition over since) is
//! refused with [`StoreError::Fenced`] and nothing of it is written; the fence forgets that
//! partition at once and reports it ([`Fence::losses`]) so the node stops the partition's other
//! sessions without writing.
//!
//! # Why the epoch, and why `FOR SHARE`
//!
//! A lease's expiry alone cannot fence: a paused owner wakes up believing in a lease that expired
//! long ago, and its append may reach the database before it learns. The taker bumps the epoch
//! with an `UPDATE` of the partition's row; a batch's `FOR SHARE` read of that row either comes
//! after that update committed (it sees the new epoch: refused) or holds the row until the batch
//! commits (the taker waits, and reads the session's log after the batch). Either way no append
//! of an old owner lands after a new owner read the log.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::mpsc;

use super::partition::partition_of;
use crate::store::StoreError;

/// A partition held at an epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Held {
    /// The partition.
    pub partition: u32,
    /// The epoch this node took it at.
    pub epoch: u64,
}

#[derive(Default)]
struct State {
    held: HashMap<u32, u64>,
    /// Session → the partition and epoch it was claimed under.
    claimed: HashMap<String, Held>,
}

/// What one node holds. Shared (`Arc`) by the store, its writer and the node's keeper.
pub struct Fence {
    node: String,
    partitions: u32,
    state: Mutex<State>,
    losses: mpsc::UnboundedSender<u32>,
    receiver: Mutex<Option<mpsc::UnboundedReceiver<u32>>>,
}

impl std::fmt::Debug for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fence")
            .field("node", &self.node)
            .field("partitions", &self.partitions)
            .finish_non_exhaustive()
    }
}

impl Fence {
    /// The fence of node `node` in a cluster of `partitions` partitions, holding none.
    pub fn new(node: impl Into<String>, partitions: u32) -> Arc<Self> {
        let (losses, receiver) = mpsc::unbounded_channel();
        Arc::new(Self {
            node: node.into(),
            partitions: partitions.max(1),
            state: Mutex::default(),
            losses,
            receiver: Mutex::new(Some(receiver)),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The node's id.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// How many partitions the cluster has.
    pub fn partitions(&self) -> u32 {
        self.partitions
    }

    /// The partition of `session`.
    pub fn partition_of(&self, session: &str) -> u32 {
        partition_of(session, self.partitions)
    }

    /// Whether this node holds `session`'s partition now.
    pub fn holds_session(&self, session: &str) -> bool {
        self.lock().held.contains_key(&self.partition_of(session))
    }

    /// The partitions held now, with their epochs, in partition order.
    pub fn held(&self) -> Vec<Held> {
        let mut held: Vec<Held> =
            self.lock().held.iter().map(|(&partition, &epoch)| Held { partition, epoch }).collect();
        held.sort_by_key(|h| h.partition);
        held
    }

    /// This node took `held` (its epoch bumped by the taking).
    pub fn hold(&self, held: &[Held]) {
        let mut state = self.lock();
        for h in held {
            state.held.insert(h.partition, h.epoch);
        }
    }

    /// This node gave `partitions` back, or learnt it lost them: claims under them stay until
    /// their sessions let go, and every append of theirs is refused from now on.
    pub fn release(&self, partitions: &[u32]) {
        let mut state = self.lock();
        for p in partitions {
            state.held.remove(p);
        }
    }

    /// The sessions claimed under `partitions` (to stop them).
    pub fn claimed_in(&self, partitions: &HashSet<u32>) -> Vec<String> {
        let state = self.lock();
        let mut sessions: Vec<String> = state
            .claimed
            .iter()
            .filter(|(_, h)| partitions.contains(&h.partition))
            .map(|(s, _)| s.clone())
            .collect();
        sessions.sort();
        sessions
    }

    /// Every session claimed now.
    pub fn claimed(&self) -> Vec<String> {
        let mut sessions: Vec<String> = self.lock().claimed.keys().cloned().collect();
        sessions.sort();
        sessions
    }

    /// The receiver of the partitions a batch found fenced (once: the keeper takes it).
    pub fn losses(&self) -> Option<mpsc::UnboundedReceiver<u32>> {
        self.receiver.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    /// Claims `session` under its partition's epoch; refused when the partition is not held.
    pub(super) fn claim(self: &Arc<Self>, session: &str) -> Result<FencedClaim, StoreError> {
        let partition = self.partition_of(session);
        let mut state = self.lock();
        let Some(&epoch) = state.held.get(&partition) else {
            return Err(StoreError::NotOwned {
                session: session.to_owned(),
                partition,
                node: self.node.clone(),
            });
        };
        state.claimed.insert(session.to_owned(), Held { partition, epoch });
        Ok(FencedClaim { fence: Arc::clone(self), session: session.to_owned() })
    }

    /// The partition and epoch `session` was claimed under, if it is claimed.
    pub(super) fn claim_of(&self, session: &str) -> Option<Held> {
        self.lock().claimed.get(session).copied()
    }

    /// A batch found `partition` fenced: it is not held any more.
    pub(super) fn fenced(&self, partition: u32) {
        let was = self.lock().held.remove(&partition).is_some();
        if was {
            let _ = self.losses.send(partition);
        }
    }
}

/// A session's claim under the fence; dropping it forgets the session.
pub(super) struct FencedClaim {
    fence: Arc<Fence>,
    session: String,
}

impl Drop for FencedClaim {
    fn drop(&mut self) {
        self.fence.lock().claimed.remove(&self.session);
    }
}

/// What the `partitions` table says of a partition, read `FOR SHARE` in a batch's transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Row {
    pub(super) epoch: u64,
    pub(super) node: Option<String>,
}

/// Whether each request of a batch may be written: `requests` are the claims of their sessions
/// (`None`: not claimed), `rows` the partitions' rows as the transaction reads them, `node` this
/// node. A request passes when its partition's row is this node's at its claim's epoch.
pub(super) fn judge(requests: &[Option<Held>], rows: &HashMap<u32, Row>, node: &str) -> Vec<bool> {
    requests
        .iter()
        .map(|claim| {
            claim.is_some_and(|h| {
                rows.get(&h.partition)
                    .is_some_and(|row| row.epoch == h.epoch && row.node.as_deref() == Some(node))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_passes_only_at_its_partitions_epoch_on_this_node() {
        let row = |epoch, node: Option<&str>| Row { epoch, node: node.map(str::to_owned) };
        let rows: HashMap<u32, Row> =
            [(1, row(5, Some("a"))), (2, row(6, Some("b"))), (3, row(7, None))]
                .into_iter()
                .collect();
        let at = |partition, epoch| Some(Held { partition, epoch });
        // (the request's claim, passes)
        let cases: [(Option<Held>, bool); 7] = [
            (at(1, 5), true),
            (at(1, 4), false), // taken over since, even by this node again
            (at(1, 6), false), // an epoch the database does not have
            (at(2, 6), false), // another node's
            (at(3, 7), false), // given back
            (at(9, 1), false), // no such partition
            (None, false),     // never claimed
        ];
        for (claim, want) in cases {
            assert_eq!(judge(&[claim], &rows, "a"), [want], "{claim:?}");
        }
        assert_eq!(judge(&[at(1, 5), at(1, 4), at(1, 5)], &rows, "a"), [true, false, true]);
    }

    #[test]
    fn a_claim_needs_its_partition_held_and_a_fenced_partition_is_lost_once() {
        let fence = Fence::new("a", 4);
        let session = "agent-00001";
        let partition = fence.partition_of(session);
        assert!(matches!(
            fence.claim(session),
            Err(StoreError::NotOwned { partition: p, .. }) if p == partition
        ));
        fence.hold(&[Held { partition, epoch: 3 }]);
        assert!(fence.holds_session(session));
        let claim = fence.claim(session).unwrap();
        assert_eq!(fence.claim_of(session), Some(Held { partition, epoch: 3 }));
        assert_eq!(fence.claimed_in(&[partition].into()), [session]);
        let mut losses = fence.losses().unwrap();
        assert!(fence.losses().is_none(), "taken once");
        fence.fenced(partition);
        fence.fenced(partition);
        assert_eq!(losses.try_recv().ok(), Some(partition));
        assert!(losses.try_recv().is_err(), "reported once");
        assert!(!fence.holds_session(session));
        assert_eq!(fence.claim_of(session), Some(Held { partition, epoch: 3 }), "until let go");
        drop(claim);
        assert_eq!(fence.claim_of(session), None);
    }
}
