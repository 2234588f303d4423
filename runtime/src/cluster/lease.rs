//! What a node knows of its own leases, as a pure decision: which partitions it lost.
//!
//! A renewal that answered tells exactly which partitions are still this node's (a partition
//! another node took is missing from the answer). A renewal that did not answer (the database
//! away, the connection cut) tells nothing, so the node counts from when it *sent* its last
//! renewal that answered: the database set that lease's end no earlier than that moment plus the
//! lease, so once a lease has gone by locally every partition may have been taken over, and the
//! node stops writing them all. The epoch check in every append (`fence`) is what makes this
//! safe; this only stops a cut-off node from working on in vain.

use std::collections::BTreeSet;
use std::time::Duration;

/// How a renewal went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Renewal {
    /// It answered: the partitions renewed.
    Renewed(BTreeSet<u32>),
    /// It did not answer (an error, a timeout).
    Failed,
}

/// The partitions of `held` this node must consider lost after `renewal`: `since_renewed` is the
/// time since the last renewal that answered was sent, `lease` the lease.
pub(crate) fn lost(
    held: &BTreeSet<u32>,
    renewal: &Renewal,
    since_renewed: Duration,
    lease: Duration,
) -> BTreeSet<u32> {
    match renewal {
        Renewal::Renewed(renewed) => held.difference(renewed).copied().collect(),
        Renewal::Failed if since_renewed >= lease => held.clone(),
        Renewal::Failed => BTreeSet::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_loses_what_was_not_renewed_or_everything_once_a_lease_went_by_unrenewed() {
        let set = |p: &[u32]| p.iter().copied().collect::<BTreeSet<u32>>();
        let ms = Duration::from_millis;
        let lease = ms(1500);
        // (held, renewal, since the last answered renewal was sent, lost)
        let cases: [(&[u32], Renewal, u64, &[u32]); 6] = [
            (&[1, 2, 3], Renewal::Renewed(set(&[1, 2, 3])), 0, &[]),
            (&[1, 2, 3], Renewal::Renewed(set(&[1, 3])), 0, &[2]),
            (&[1, 2, 3], Renewal::Renewed(set(&[])), 9000, &[1, 2, 3]),
            (&[1, 2, 3], Renewal::Failed, 1499, &[]),
            (&[1, 2, 3], Renewal::Failed, 1500, &[1, 2, 3]),
            (&[], Renewal::Failed, 9000, &[]),
        ];
        for (held, renewal, since, want) in cases {
            assert_eq!(lost(&set(held), &renewal, ms(since), lease), set(want), "{renewal:?}");
        }
    }
}
