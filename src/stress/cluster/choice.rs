//! The seeded decisions of `rein stress --nodes`, pure: which node a request goes to, which
//! faults a turn's end sets off, which node a fault hits and for how long.
//!
//! Every draw comes from ChaCha8 streams of `--seed` that the one-process run does not use: a
//! stream per agent for its choice of nodes (so an agent's turn plan is the one it draws in a
//! one-process run, and its choices do not depend on the others' timing), and one stream for
//! the faults. A turn's end always draws the same number of samples, so the faults set off
//! depend only on how many turns ended, not on which agent's turn it was.

use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::stress::plan::StressRng;

/// The share of requests sent to a node that does not serve their session (when one is up):
/// forwarding is what a cluster adds, so most requests take that path; the rest measure the
/// local path beside it.
pub(crate) const FORWARDED_SHARE: f64 = 0.75;

/// The stream of agent `agent`'s choices of nodes (agents' turn plans use streams `1..`).
pub(crate) fn node_rng(seed: u64, agent: usize) -> StressRng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream((1 << 40) + agent as u64);
    rng
}

/// The stream of the faults.
pub(crate) fn fault_rng(seed: u64) -> StressRng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(u64::MAX);
    rng
}

/// Where a request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pick {
    /// The node (an index among the run's nodes).
    pub(crate) node: usize,
    /// Whether that node serves the session now (as far as the run knows).
    pub(crate) serves: bool,
}

/// The node a request for a session goes to, among the nodes `up`, when `owner` serves the
/// session: another node than the owner [`FORWARDED_SHARE`] of the time (when there is one),
/// else the owner; any node when the owner is unknown or not up. `None` when no node is up.
/// Always draws two samples.
pub(crate) fn pick(rng: &mut impl Rng, up: &[usize], owner: Option<usize>) -> Option<Pick> {
    let forward = rng.random::<f64>() < FORWARDED_SHARE;
    let at = rng.random::<f64>();
    let among = |nodes: &[usize]| nodes[((at * nodes.len() as f64) as usize).min(nodes.len() - 1)];
    if up.is_empty() {
        return None;
    }
    match owner.filter(|o| up.contains(o)) {
        Some(owner) => {
            let others: Vec<usize> = up.iter().copied().filter(|&n| n != owner).collect();
            if forward && !others.is_empty() {
                Some(Pick { node: among(&others), serves: false })
            } else {
                Some(Pick { node: owner, serves: true })
            }
        }
        None => Some(Pick { node: among(up), serves: false }),
    }
}

/// A fault of a node or of the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// `kill -9` a node, then start it again.
    Kill,
    /// `SIGSTOP` a node for longer than its lease, then `SIGCONT`.
    Pause,
    /// Restart the database (`--pg-restart`).
    RestartDatabase,
}

/// The per-turn rates of the faults.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct FaultRates {
    /// `--node-kill-rate`.
    pub(crate) kill: f64,
    /// `--node-pause-rate`.
    pub(crate) pause: f64,
    /// `--pg-restart-rate`.
    pub(crate) restart_database: f64,
}

/// The faults the end of a turn sets off (in this order: kill, pause, database restart), each
/// with its rate. Always draws three samples.
pub(crate) fn after_turn(rng: &mut impl Rng, rates: &FaultRates) -> Vec<Fault> {
    let draws = [rng.random::<f64>(), rng.random::<f64>(), rng.random::<f64>()];
    [
        (draws[0] < rates.kill, Fault::Kill),
        (draws[1] < rates.pause, Fault::Pause),
        (draws[2] < rates.restart_database, Fault::RestartDatabase),
    ]
    .into_iter()
    .filter_map(|(fires, fault)| fires.then_some(fault))
    .collect()
}

/// The node a node fault hits, among those `up` (`None`: none is).
pub(crate) fn victim(rng: &mut impl Rng, up: &[usize]) -> Option<usize> {
    let at = rng.random::<f64>();
    (!up.is_empty()).then(|| up[((at * up.len() as f64) as usize).min(up.len() - 1)])
}

/// How long a fault keeps its node away: a killed node is started again 1 to 2 leases after the
/// kill (its partitions are taken over meanwhile, or by itself when it is the only node); a
/// paused one is continued 1.5 to 2.5 leases after it stopped (always longer than its lease, so
/// its partitions move while it sleeps and what it tries to write when it wakes is fenced).
pub(crate) fn away(rng: &mut impl Rng, fault: Fault, lease: Duration) -> Duration {
    let at = rng.random::<f64>();
    match fault {
        Fault::Kill => lease.mul_f64(1.0 + at),
        Fault::Pause => lease.mul_f64(1.5 + at),
        Fault::RestartDatabase => Duration::ZERO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn most_requests_go_to_a_node_that_does_not_serve_the_session() {
        let mut rng = node_rng(3, 0);
        let up = [0, 1, 2];
        let picks: Vec<Pick> = (0..4000).map(|_| pick(&mut rng, &up, Some(1)).unwrap()).collect();
        let forwarded = picks.iter().filter(|p| !p.serves).count();
        assert!((2800..=3200).contains(&forwarded), "{forwarded}");
        assert!(picks.iter().all(|p| p.serves == (p.node == 1)), "serves means the owner");
        for node in [0, 2] {
            let n = picks.iter().filter(|p| p.node == node).count();
            assert!((1300..=1700).contains(&n), "node {node}: {n}");
        }
    }

    #[test]
    fn a_request_goes_where_it_can() {
        /// (nodes up, owner, where it may go, whether to the owner)
        type Case<'a> = (&'a [usize], Option<usize>, &'a [usize], Option<bool>);
        let cases: [Case; 5] = [
            // Only the owner is up: it serves everything.
            (&[1], Some(1), &[1], Some(true)),
            // The owner is down: any node up, none of which serves it.
            (&[0, 2], Some(1), &[0, 2], Some(false)),
            // Unknown owner (its lease ran out): any node up.
            (&[0, 1], None, &[0, 1], Some(false)),
            // One node, the owner.
            (&[0], Some(0), &[0], Some(true)),
            // Nothing up.
            (&[], Some(0), &[], None),
        ];
        for (up, owner, may, serves) in cases {
            let mut rng = node_rng(1, 7);
            for _ in 0..200 {
                let got = pick(&mut rng, up, owner);
                assert_eq!(got.map(|p| p.serves), serves, "{up:?} {owner:?}");
                if let Some(p) = got {
                    assert!(may.contains(&p.node), "{up:?} {owner:?}: {p:?}");
                }
            }
        }
    }

    #[test]
    fn faults_follow_their_rates_and_the_seed_alone() {
        let rates = FaultRates { kill: 0.1, pause: 0.05, restart_database: 0.0 };
        let draw = |seed| {
            let mut rng = fault_rng(seed);
            (0..10_000).flat_map(|_| after_turn(&mut rng, &rates)).collect::<Vec<_>>()
        };
        let faults = draw(5);
        let kills = faults.iter().filter(|f| **f == Fault::Kill).count();
        let pauses = faults.iter().filter(|f| **f == Fault::Pause).count();
        assert!((850..=1150).contains(&kills), "{kills}");
        assert!((400..=600).contains(&pauses), "{pauses}");
        assert!(!faults.contains(&Fault::RestartDatabase));
        assert_eq!(draw(5), faults, "the same seed sets off the same faults");
        assert_ne!(draw(6), faults);
        let none = FaultRates::default();
        let mut rng = fault_rng(5);
        assert!((0..1000).all(|_| after_turn(&mut rng, &none).is_empty()));
    }

    #[test]
    fn the_faults_of_the_cluster_test_are_those_its_seed_sets_off() {
        // tests/stress_nodes.rs counts on these: seed 5, 8 agents × 12 turns.
        let rates = FaultRates { kill: 0.02, pause: 0.02, restart_database: 0.01 };
        let mut rng = fault_rng(5);
        let fired: Vec<(u32, Fault)> = (0..96)
            .flat_map(|turn| after_turn(&mut rng, &rates).into_iter().map(move |f| (turn, f)))
            .collect();
        assert_eq!(
            fired,
            [(6, Fault::Pause), (6, Fault::RestartDatabase), (43, Fault::Kill), (56, Fault::Kill)]
        );
    }

    #[test]
    fn a_fault_keeps_its_node_away_longer_than_a_lease() {
        let lease = Duration::from_millis(1000);
        let mut rng = fault_rng(2);
        for _ in 0..1000 {
            let kill = away(&mut rng, Fault::Kill, lease);
            assert!((lease..=lease * 2).contains(&kill), "{kill:?}");
            let pause = away(&mut rng, Fault::Pause, lease);
            assert!((lease.mul_f64(1.5)..=lease.mul_f64(2.5)).contains(&pause), "{pause:?}");
        }
        assert_eq!(victim(&mut rng, &[]), None);
        let hits: Vec<usize> = (0..300).filter_map(|_| victim(&mut rng, &[2, 4])).collect();
        assert!(hits.contains(&2) && hits.contains(&4) && hits.iter().all(|n| [2, 4].contains(n)));
    }
}
