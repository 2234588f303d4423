//! A node's fair share of the partitions, as a pure decision: how many to take, how many to give
//! back.
//!
//! Every live node (its heartbeat younger than a lease) aims at `ceil(P / live)` partitions. A
//! node under its share takes free or expired partitions — never one another node holds, so a
//! node that briefly misses the others' heartbeats takes nothing from them; a node over its share
//! (a node joined) gives its excess back, draining it first. Shares round up, so the nodes'
//! shares always cover every partition.

/// What a node does this round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Plan {
    /// Free or expired partitions to take, at most.
    pub(crate) take: usize,
    /// Held partitions to give back.
    pub(crate) give_back: usize,
}

/// The plan of a node holding `held` of `partitions` partitions, with `live` nodes (itself
/// included: at least 1) alive.
pub(crate) fn plan(partitions: u32, live: usize, held: usize) -> Plan {
    let share = (partitions as usize).div_ceil(live.max(1));
    Plan { take: share.saturating_sub(held), give_back: held.saturating_sub(share) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_node_aims_at_its_rounded_up_share() {
        let p = |take, give_back| Plan { take, give_back };
        // (partitions, live nodes, held, plan)
        let cases: [(u32, usize, usize, Plan); 9] = [
            (256, 1, 0, p(256, 0)), // alone: everything
            (256, 1, 256, p(0, 0)),
            (256, 2, 256, p(0, 128)), // a node joined: half goes back
            (256, 2, 0, p(128, 0)),   // the joiner takes what is given back
            (256, 3, 86, p(0, 0)),    // 86 + 86 + 84 cover 256
            (256, 3, 84, p(2, 0)),    // under its share: takes if any is free
            (256, 0, 0, p(256, 0)),   // nobody seen alive (not even itself yet): alone
            (8, 3, 2, p(1, 0)),
            (1, 4, 1, p(0, 0)), // fewer partitions than nodes: some hold none
        ];
        for (partitions, live, held, want) in cases {
            assert_eq!(plan(partitions, live, held), want, "{partitions} {live} {held}");
        }
    }

    #[test]
    fn the_shares_of_the_live_nodes_cover_every_partition() {
        for partitions in [1u32, 7, 64, 256, 1000] {
            for live in 1..=9usize {
                let share = plan(partitions, live, 0).take;
                assert!(share * live >= partitions as usize, "{partitions} {live}");
            }
        }
    }
}
