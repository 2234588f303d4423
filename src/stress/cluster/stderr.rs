//! What a node's standard error says about its partitions (the lines `rein node` writes as they
//! change, `src/cli/node.rs`), read back by the run: pure.
//!
//! `rein node N: took 4 partitions (2 taken over from n2)`, `… resumed 3 turns`, `… lost 2
//! partitions (fenced); stopped 1 session(s)`, `… gave back 4 partitions; stopped 0 session(s)`,
//! `… database unreachable: …`. Any other line is [`Said::Other`].

/// Why a node lost partitions, as its line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Loss {
    /// `taken over`: another node took them (the renewal did not renew them).
    TakenOver,
    /// `lease ran out`: no renewal answered for a whole lease.
    LeaseRanOut,
    /// `fenced`: an append found the partition's epoch moved, and was refused.
    Fenced,
}

/// One line of a node's standard error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Said {
    /// It took `partitions`, `over` of them from nodes whose lease had run out.
    Took { partitions: u64, over: u64 },
    /// It resumed the open turns of `turns` sessions of partitions it took.
    Resumed { turns: u64 },
    /// It lost `partitions`.
    Lost { partitions: u64, by: Loss },
    /// It gave `partitions` back.
    GaveBack { partitions: u64 },
    /// A round could not reach the database.
    Unreachable,
    /// Anything else.
    Other,
}

/// What `line` of node `node`'s standard error says.
pub(crate) fn said(node: &str, line: &str) -> Said {
    let Some(what) = line.strip_prefix("rein node ").and_then(|rest| rest.strip_prefix(node))
    else {
        return Said::Other;
    };
    let Some(what) = what.strip_prefix(": ") else { return Said::Other };
    let number = |text: &str| text.split_whitespace().next()?.parse::<u64>().ok();
    if let Some(rest) = what.strip_prefix("took ") {
        let Some(partitions) = number(rest) else { return Said::Other };
        let over = rest.split_once('(').and_then(|(_, over)| number(over)).unwrap_or(0);
        return Said::Took { partitions, over };
    }
    if let Some(rest) = what.strip_prefix("resumed ") {
        return number(rest).map_or(Said::Other, |turns| Said::Resumed { turns });
    }
    if let Some(rest) = what.strip_prefix("lost ") {
        let by = if rest.contains("(fenced)") {
            Loss::Fenced
        } else if rest.contains("(lease ran out)") {
            Loss::LeaseRanOut
        } else if rest.contains("(taken over)") {
            Loss::TakenOver
        } else {
            return Said::Other;
        };
        return number(rest).map_or(Said::Other, |partitions| Said::Lost { partitions, by });
    }
    if let Some(rest) = what.strip_prefix("gave back ") {
        return number(rest).map_or(Said::Other, |partitions| Said::GaveBack { partitions });
    }
    if what.starts_with("database unreachable") {
        return Said::Unreachable;
    }
    Said::Other
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ownership_line_of_a_node_is_read_back() {
        let cases = [
            ("rein node n1: took 128 partitions", Said::Took { partitions: 128, over: 0 }),
            (
                "rein node n1: took 3 partitions (2 taken over from n2, n3)",
                Said::Took { partitions: 3, over: 2 },
            ),
            ("rein node n1: took 1 partition", Said::Took { partitions: 1, over: 0 }),
            ("rein node n1: resumed 1 turn", Said::Resumed { turns: 1 }),
            (
                "rein node n1: resumed 4 turns; cannot resume session s: gone",
                Said::Resumed { turns: 4 },
            ),
            (
                "rein node n1: lost 2 partitions (fenced); stopped 1 session(s)",
                Said::Lost { partitions: 2, by: Loss::Fenced },
            ),
            (
                "rein node n1: lost 1 partition (lease ran out); stopped 0 session(s)",
                Said::Lost { partitions: 1, by: Loss::LeaseRanOut },
            ),
            (
                "rein node n1: lost 7 partitions (taken over); stopped 3 session(s)",
                Said::Lost { partitions: 7, by: Loss::TakenOver },
            ),
            (
                "rein node n1: gave back 4 partitions; stopped 2 session(s)",
                Said::GaveBack { partitions: 4 },
            ),
            ("rein node n1: database unreachable: no answer", Said::Unreachable),
            // Another node's line, the banner, a stop: nothing to count.
            ("rein node n10: took 3 partitions", Said::Other),
            ("rein node n2: took 3 partitions", Said::Other),
            ("rein node n1: drained", Said::Other),
            ("rein node n1 stopped", Said::Other),
            ("rein node n1: took many partitions", Said::Other),
            ("rein node n1: lost 2 partitions (eaten)", Said::Other),
            ("Ctrl-C stops it", Said::Other),
        ];
        for (line, want) in cases {
            assert_eq!(said("n1", line), want, "{line}");
        }
    }
}
