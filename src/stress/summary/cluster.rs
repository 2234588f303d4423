//! What `rein stress --nodes` adds to the summary: the cluster's faults and ownership changes,
//! the forwarding, the takeovers and their times, the checks only a cluster has — the `cluster`
//! object of `--json`, its lines of the text, and the failures among them.

use std::fmt::Write as _;

use serde::Serialize;

use super::{LISTED, LatencySummary};
use crate::runtime::plural::count;

/// The faults the run made.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Faults {
    /// Nodes killed (`kill -9`) and started again.
    pub node_kills: u64,
    /// Nodes stopped (`SIGSTOP`) for longer than their lease, then continued.
    pub node_pauses: u64,
    /// Database restarts (`--pg-restart`).
    pub database_restarts: u64,
    /// Faults the turns set off that were still waiting when the last turn ended (faults run
    /// one at a time), not run.
    pub not_run: u64,
}

/// What the nodes said of their partitions (their standard error), summed over the nodes.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Ownership {
    /// Partitions taken.
    pub taken: u64,
    /// Of those, taken over from a node whose lease had run out (killed, paused, cut off).
    pub taken_over: u64,
    /// Partitions a node lost because another took them over.
    pub lost_taken_over: u64,
    /// Partitions a node lost because a lease went by without a renewal answering.
    pub lost_lease_ran_out: u64,
    /// Appends the fence refused: each a batch of a node whose partition another node had
    /// taken over (`lost … (fenced)`), nothing of which was written.
    pub fenced_writes_refused: u64,
    /// Partitions given back (a node joined, or drained).
    pub given_back: u64,
    /// Open turns the nodes resumed after taking partitions (their `resumed N turns`).
    pub resumed_by_nodes: u64,
    /// Keeper rounds that could not reach the database.
    pub unreachable_rounds: u64,
}

/// The turns a new owner resumed, from the logs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Resumed {
    /// `turn/resumed` events.
    pub turns: u64,
    /// How long each resumed turn had been silent: from the event before its `turn/resumed`.
    pub delay: LatencySummary,
    /// Retry waits resumed whose next attempt kept the chain (`retryId`, retry number) and did
    /// not start before its deadline.
    pub retry_waits_continued: u64,
    /// How late after its deadline such an attempt started.
    pub retry_wait_late: LatencySummary,
    /// Retry waits resumed whose turn ended before the next attempt.
    pub retry_waits_ended: u64,
    /// Retry waits resumed that broke their chain or their deadline: failures.
    pub retry_waits_broken: u64,
    /// The first few, in words.
    pub broken_examples: Vec<String>,
    /// After each kill: from the killed node's lease running out to the first resumed write
    /// in its partitions (`turn/resumed`), when one of them had an open turn.
    pub takeover_after_kill: LatencySummary,
    /// After each kill: from the kill to that first resumed write.
    pub kill_to_resumed: LatencySummary,
    /// After each pause: from the paused node's lease running out to the first resumed write in
    /// its partitions.
    pub takeover_after_pause: LatencySummary,
}

/// One kind of cancellation: what the run sent, and how long it took.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelKind {
    /// Cancels sent.
    pub requested: u64,
    /// Those that found their turn running.
    pub landed: u64,
    /// From the cancel sent to the turn's `turn/end` received, for those that landed and ended
    /// their turn `aborted` with the stream that carried the turn still open.
    pub latency: LatencySummary,
}

/// How the run reached the sessions.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Requests {
    /// Prompts sent to a node that did not serve their session (forwarded there).
    pub forwarded_prompts: u64,
    /// Prompts sent to the node serving their session.
    pub local_prompts: u64,
    /// Prompts a node refused before they started a turn, sent again.
    pub refused_and_sent_again: u64,
    /// Prompts whose node went away before answering, found in the log afterwards.
    pub found_after_a_cut: u64,
    /// Prompts whose node went away and that never reached the log within the wait, sent again
    /// (one may still run later: an extra turn).
    pub lost_and_sent_again: u64,
    /// Turns whose stream was cut (their node went away) and that were followed to their end
    /// through another node.
    pub followed_elsewhere: u64,
    /// Cancels sent to the node serving the session.
    pub local_cancels: CancelKind,
    /// Cancels sent to a node that did not serve the session (forwarded there).
    pub cross_node_cancels: CancelKind,
}

/// A check over the whole cluster: how much it looked at, and what broke.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    /// What it looked at (events).
    pub checked: u64,
    /// What broke it.
    pub violations: u64,
    /// The first few, in words.
    pub examples: Vec<String>,
}

impl Check {
    /// Adds what broke it.
    pub fn add(&mut self, found: Vec<String>) {
        self.violations += found.len() as u64;
        let room = LISTED.saturating_sub(self.examples.len());
        self.examples.extend(found.into_iter().take(room));
    }
}

/// Everything a run on several nodes adds: the `cluster` object of `--json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterReport {
    /// Nodes.
    pub nodes: u64,
    /// Their lease, ms.
    pub lease_ms: u64,
    /// The cluster's partitions.
    pub partitions: u32,
    /// Turns ended per second, from the first prompt to the last turn's end.
    pub turns_per_second: f64,
    /// The faults.
    pub faults: Faults,
    /// The partitions' changes of owner.
    pub ownership: Ownership,
    /// Turns resumed by a new owner.
    pub resumed: Resumed,
    /// How the run reached the sessions.
    pub requests: Requests,
    /// No turn ran on two nodes: inside an open turn, the writer changes only at a takeover.
    pub writers: Check,
    /// Every event a node acknowledged to the run is in the log as it was acknowledged.
    pub acks: Check,
    /// Every node shows the same settings (revision and values) of every plugin at the end.
    pub settings_converged: bool,
    /// What differed, when they did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings_difference: Option<String>,
    /// Sessions of the run with a turn still open when the cluster was stopped (after waiting
    /// the hang deadline for it to end): hung.
    pub open_at_end: Vec<String>,
    /// Nodes that stopped on their own, or not cleanly on SIGTERM (exit 0 after draining), or
    /// would not start again: in words, with their last lines.
    pub node_failures: Vec<String>,
    /// The largest peak resident set size of a node (at its SIGTERM), KiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_peak_rss_kib: Option<u64>,
}

impl ClusterReport {
    /// What makes the run fail.
    pub fn failures(&self) -> Vec<String> {
        let mut failures = Vec::new();
        if self.writers.violations > 0 {
            let n = self.writers.violations;
            failures.push(format!(
                "{} by another node inside a running turn",
                count(n, "event written", "events written")
            ));
        }
        if self.acks.violations > 0 {
            let n = self.acks.violations;
            failures.push(count(n, "acknowledged event lost", "acknowledged events lost"));
        }
        if self.resumed.retry_waits_broken > 0 {
            let n = self.resumed.retry_waits_broken;
            failures.push(count(n, "resumed retry wait broken", "resumed retry waits broken"));
        }
        if !self.settings_converged {
            failures.push("the nodes' settings differ".to_owned());
        }
        if !self.open_at_end.is_empty() {
            let n = self.open_at_end.len() as u64;
            failures.push(count(n, "turn left open", "turns left open"));
        }
        if !self.node_failures.is_empty() {
            let n = self.node_failures.len() as u64;
            failures.push(count(n, "node failure", "node failures"));
        }
        failures
    }

    /// Its lines of the text summary.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let f = &self.faults;
        let mut faults = vec![
            format!("{} (kill -9, started again)", count(f.node_kills, "kill", "kills")),
            format!("{} (SIGSTOP past the lease)", count(f.node_pauses, "pause", "pauses")),
        ];
        if f.database_restarts > 0 {
            faults.push(count(f.database_restarts, "database restart", "database restarts"));
        }
        if f.not_run > 0 {
            faults.push(format!("{} not run (the turns had ended)", f.not_run));
        }
        let _ = writeln!(
            out,
            "nodes       {}, lease {} ms, {}: {}; {:.0} turns/s",
            self.nodes,
            self.lease_ms,
            count(u64::from(self.partitions), "partition", "partitions"),
            faults.join(", "),
            self.turns_per_second
        );
        let o = &self.ownership;
        let _ = writeln!(
            out,
            "ownership   {} taken ({} over from a node whose lease ran out), lost {} (taken over) \
             and {} (lease ran out), {} given back; {} refused by the fence",
            o.taken,
            o.taken_over,
            o.lost_taken_over,
            o.lost_lease_ran_out,
            o.given_back,
            count(o.fenced_writes_refused, "append", "appends"),
        );
        let r = &self.resumed;
        let _ = writeln!(
            out,
            "takeovers   {} resumed (silent before: p50 {} ms, p99 {} ms, max {} ms); after a kill, \
             lease expiry to the first resumed write: p50 {} ms, max {} ms ({} measured)",
            count(r.turns, "turn", "turns"),
            r.delay.p50_ms,
            r.delay.p99_ms,
            r.delay.max_ms,
            r.takeover_after_kill.p50_ms,
            r.takeover_after_kill.max_ms,
            r.takeover_after_kill.samples,
        );
        let _ = writeln!(
            out,
            "retry waits {} resumed with their chain (late after the deadline: p50 {} ms, max {} \
             ms), {} ended first, {} broken",
            r.retry_waits_continued,
            r.retry_wait_late.p50_ms,
            r.retry_wait_late.max_ms,
            r.retry_waits_ended,
            r.retry_waits_broken,
        );
        for example in &r.broken_examples {
            let _ = writeln!(out, "  {example}");
        }
        let q = &self.requests;
        let _ = writeln!(
            out,
            "forwarding  {} prompts forwarded, {} local; {} refused and sent again, {} found after \
             a cut, {} lost and sent again, {} followed elsewhere",
            q.forwarded_prompts,
            q.local_prompts,
            q.refused_and_sent_again,
            q.found_after_a_cut,
            q.lost_and_sent_again,
            q.followed_elsewhere,
        );
        for (name, kind) in [("cross-node", &q.cross_node_cancels), ("local", &q.local_cancels)] {
            let _ = writeln!(
                out,
                "  cancels {name}: {} requested, {} landed; to turn/end p50 {} ms, p99 {} ms, max \
                 {} ms ({} measured)",
                kind.requested,
                kind.landed,
                kind.latency.p50_ms,
                kind.latency.p99_ms,
                kind.latency.max_ms,
                kind.latency.samples,
            );
        }
        let _ = writeln!(
            out,
            "writers     {}: {} by another node inside a running turn",
            count(self.writers.checked, "event audited", "events audited"),
            self.writers.violations
        );
        for example in &self.writers.examples {
            let _ = writeln!(out, "  {example}");
        }
        let _ = writeln!(
            out,
            "acks        {} acknowledged: {} missing",
            count(self.acks.checked, "event", "events"),
            self.acks.violations
        );
        for example in &self.acks.examples {
            let _ = writeln!(out, "  {example}");
        }
        let _ = writeln!(
            out,
            "cluster     settings {}; {} open at the end",
            if self.settings_converged {
                "the same on every node".to_owned()
            } else {
                format!("differ: {}", self.settings_difference.as_deref().unwrap_or("?"))
            },
            count(self.open_at_end.len() as u64, "turn", "turns"),
        );
        for session in self.open_at_end.iter().take(LISTED) {
            let _ = writeln!(out, "  {session}");
        }
        for failure in &self.node_failures {
            let _ = writeln!(out, "  {failure}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_broken_guarantee_is_a_failure_and_a_figure_never_is() {
        let clean = ClusterReport { settings_converged: true, ..ClusterReport::default() };
        let broken = |examples: usize| Check {
            checked: 10,
            violations: examples as u64,
            examples: vec!["x".into(); examples],
        };
        let cases = [
            (clean.clone(), vec![]),
            (
                ClusterReport { writers: broken(2), ..clean.clone() },
                vec!["2 events written by another node inside a running turn"],
            ),
            (ClusterReport { acks: broken(1), ..clean.clone() }, vec!["1 acknowledged event lost"]),
            (
                ClusterReport {
                    resumed: Resumed { retry_waits_broken: 1, ..Resumed::default() },
                    ..clean.clone()
                },
                vec!["1 resumed retry wait broken"],
            ),
            (
                ClusterReport { settings_converged: false, ..clean.clone() },
                vec!["the nodes' settings differ"],
            ),
            (
                ClusterReport { open_at_end: vec!["agent-00001".into()], ..clean.clone() },
                vec!["1 turn left open"],
            ),
            (
                ClusterReport { node_failures: vec!["n1".into(), "n2".into()], ..clean.clone() },
                vec!["2 node failures"],
            ),
            // Faults, takeovers, refusals and latencies are figures.
            (
                ClusterReport {
                    faults: Faults { node_kills: 3, not_run: 2, ..Faults::default() },
                    ownership: Ownership { fenced_writes_refused: 4, ..Ownership::default() },
                    requests: Requests { lost_and_sent_again: 1, ..Requests::default() },
                    ..clean.clone()
                },
                vec![],
            ),
        ];
        for (report, want) in cases {
            assert_eq!(report.failures(), want);
        }
    }

    #[test]
    fn a_check_counts_everything_and_lists_the_first_few() {
        let mut check = Check::default();
        check.add((0..7).map(|i| format!("v{i}")).collect());
        check.add((7..15).map(|i| format!("v{i}")).collect());
        assert_eq!(check.violations, 15);
        assert_eq!(check.examples.len(), LISTED);
        assert_eq!(check.examples[0], "v0");
    }

    #[test]
    fn the_text_names_the_cluster_figures() {
        let report = ClusterReport {
            nodes: 3,
            lease_ms: 1000,
            partitions: 64,
            turns_per_second: 412.4,
            faults: Faults { node_kills: 2, node_pauses: 1, ..Faults::default() },
            ownership: Ownership { fenced_writes_refused: 1, taken: 90, ..Ownership::default() },
            settings_converged: true,
            ..ClusterReport::default()
        };
        let text = report.text();
        for want in [
            "nodes       3, lease 1000 ms, 64 partitions: 2 kills (kill -9, started again), 1 pause (SIGSTOP past the lease); 412 turns/s",
            "cluster     settings the same on every node; 0 turns open at the end",
        ] {
            assert!(text.lines().any(|l| l == want), "missing {want:?} in\n{text}");
        }
        assert!(text.contains("1 append refused by the fence"), "{text}");
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["ownership"]["fencedWritesRefused"], 1);
        assert_eq!(json["faults"]["nodeKills"], 2);
        assert_eq!(json["requests"]["crossNodeCancels"]["latency"]["p99Ms"], 0.0);
        assert!(json.get("settingsDifference").is_none());
    }
}
