//! How many log files a `rein stress` run's JSONL store keeps open.
//!
//! The store caches open files (256 by default) and reopens an evicted one on its next append
//! (an `open` and a read of its last line). A stress run keeps every agent's session awake at
//! once, and a run-time settings change appends `config/changed` to each of them in turn: with
//! more agents than cached files, that round robin misses the cache on every append. So the run
//! raises its soft limit on open files towards the hard one and caches one file per agent when
//! the limit allows, leaving [`RESERVE`] descriptors for everything else — and one per agent for
//! the lock each open session holds on its log (`<session>.jsonl.lock`), which is not cached:
//! it is held while the session is awake.

/// Descriptors left for the rest of the process (sockets, the runtime, the SQLite of a check).
const RESERVE: u64 = 256;
/// The fewest files the store caches, however low the limit.
const MIN: usize = 64;

/// Raises the soft limit on open files (as far as the hard limit allows) to what `agents`
/// cached files need, and returns how many files to cache. If the limit cannot be read or
/// raised, the current one (or the store's default) decides.
pub(super) fn for_agents(agents: usize) -> usize {
    let agents_files = u64::try_from(agents).unwrap_or(u64::MAX);
    let wanted = agents_files.saturating_mul(2).saturating_add(RESERVE);
    match rlimit::increase_nofile_limit(wanted) {
        Ok(limit) => cached(agents, limit),
        Err(error) => {
            tracing::warn!(%error, "could not read or raise the open-file limit");
            cached(agents, 256 + RESERVE + agents_files)
        }
    }
}

/// Files to cache for `agents` agents under a soft limit of `limit` open files: what is left
/// once [`RESERVE`] and the agents' lock files are set aside.
fn cached(agents: usize, limit: u64) -> usize {
    let locks = u64::try_from(agents).unwrap_or(u64::MAX);
    let left = limit.saturating_sub(RESERVE).saturating_sub(locks);
    let allowed = usize::try_from(left).unwrap_or(usize::MAX);
    agents.min(allowed).max(MIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_file_per_agent_when_the_limit_allows_else_what_it_allows() {
        let cases = [
            // (agents, limit) → cached
            (10_000, 20_256, 10_000),
            (10_000, 20_000, 9_744),
            (400, 1_024, 368),
            (100, 1_024, 100),
            (10, 1_024, MIN),
            (10_000, 1_024, MIN),
            (10_000, 0, MIN),
            (10_000, u64::MAX, 10_000),
        ];
        for (agents, limit, expected) in cases {
            assert_eq!(cached(agents, limit), expected, "{agents} agents, limit {limit}");
        }
    }

    #[test]
    fn the_limit_is_raised_for_the_agents_and_never_lowered() {
        let (before, _) = rlimit::getrlimit(rlimit::Resource::NOFILE).unwrap();
        let cached = for_agents(16);
        let (after, _) = rlimit::getrlimit(rlimit::Resource::NOFILE).unwrap();
        assert!(after >= before, "the soft limit went from {before} to {after}");
        assert_eq!(cached, MIN, "16 agents fit in the minimum");
    }
}
