//! Which partition a session belongs to: `fnv1a64(session id) mod P`, the same on every node and
//! in every version of rein (it decides which node may write a session, so it can never change
//! for a database that has sessions).
//!
//! FNV-1a is used for being fixed and tiny, not for quality: session ids are uuids or names, and
//! what matters is that every node computes the same number.

/// How many partitions a new cluster gets when `--partitions` does not say.
pub const DEFAULT_PARTITIONS: u32 = 256;

/// The most partitions a cluster can have.
pub const MAX_PARTITIONS: u32 = 65_536;

/// The partition of `session` among `count` (at least 1) partitions.
pub fn partition_of(session: &str, count: u32) -> u32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in session.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (hash % u64::from(count.max(1))) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_always_falls_in_the_same_partition() {
        // Fixed values: a change here would move every stored session to another owner.
        let cases: [(&str, u32, u32); 6] = [
            ("", 256, 37),
            ("a", 256, 140),
            ("agent-00001", 256, 176),
            ("agent-00002", 256, 201),
            ("0f8fad5b-d9cb-469f-a165-70867728950e", 256, 193),
            ("agent-00001", 1, 0),
        ];
        for (session, count, want) in cases {
            assert_eq!(partition_of(session, count), want, "{session:?} of {count}");
        }
        assert_eq!(partition_of("x", 0), 0, "no partitions counts as one");
    }

    #[test]
    fn sessions_spread_over_the_partitions() {
        let mut counts = vec![0u32; 16];
        for i in 0..16_000 {
            counts[partition_of(&format!("agent-{i:05}"), 16) as usize] += 1;
        }
        assert!(counts.iter().all(|&n| (700..=1300).contains(&n)), "{counts:?}");
    }
}
