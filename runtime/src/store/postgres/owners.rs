//! [`Owners`]: which node serves each session of a cluster now, as the `partitions` table says —
//! what `rein console` shows against a cluster's database.

use super::partition::partition_of;

/// The live owner of every partition of a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owners {
    /// The node holding each partition on a lease that has not run out (`None`: nobody).
    pub by_partition: Vec<Option<String>>,
}

impl Owners {
    /// The node serving `session` now, if any.
    pub fn of(&self, session: &str) -> Option<&str> {
        let count = u32::try_from(self.by_partition.len()).unwrap_or(u32::MAX);
        if count == 0 {
            return None;
        }
        self.by_partition.get(partition_of(session, count) as usize)?.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_served_by_its_partitions_owner() {
        let owners = Owners { by_partition: vec![Some("a".into()), None, Some("b".into())] };
        let session = |p| (0..).map(|i| format!("s{i}")).find(|s| partition_of(s, 3) == p).unwrap();
        assert_eq!(owners.of(&session(0)), Some("a"));
        assert_eq!(owners.of(&session(1)), None);
        assert_eq!(owners.of(&session(2)), Some("b"));
        assert_eq!(Owners { by_partition: vec![] }.of("s"), None);
    }
}
