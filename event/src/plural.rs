//! Counts in the words people read: `1 time`, `2 times`, `0 turns` — never `time(s)`.
//!
//! Every user-facing count of the family (panels, summaries, reports, the CLI's lines) goes
//! through [`count`], so a one is singular everywhere and everything else plural. English
//! plurals are irregular (`retry`/`retries`, `crash`/`crashes`), so the caller gives both forms.

/// `n` and the noun for it: `one` when `n` is 1, else `many`.
///
/// ```
/// use rein_event::plural::count;
///
/// assert_eq!(count(1_u32, "time", "times"), "1 time");
/// assert_eq!(count(0_usize, "turn", "turns"), "0 turns");
/// assert_eq!(count(3_u64, "retry", "retries"), "3 retries");
/// ```
pub fn count<N>(n: N, one: &str, many: &str) -> String
where
    N: Copy + std::fmt::Display + PartialEq + From<u8>,
{
    let noun = if n == N::from(1) { one } else { many };
    format!("{n} {noun}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        let cases = [(0_u64, "0 crashes"), (1, "1 crash"), (2, "2 crashes"), (11, "11 crashes")];
        for (n, want) in cases {
            assert_eq!(count(n, "crash", "crashes"), want);
        }
        assert_eq!(count(1_usize, "log", "logs"), "1 log");
        assert_eq!(count(21_u32, "time", "times"), "21 times");
    }
}
