//! Metrics `nodes_*` (SPEC §12, "Measured"): `rein stress --nodes` — the real binary, its nodes
//! real `rein node` processes — on a throwaway PostgreSQL (`rein-testkit`'s `PgCluster`; without
//! PostgreSQL the group is skipped with a note). No budget: printed for the record, and failing
//! only if a run breaks its own checks.
//!
//! - `nodes_3_vs_1_turns_per_s`: the stress workload (the one-process stress defaults but no
//!   plugin chaos, [`AGENTS`] agents × [`TURNS`] turns) on 3 nodes against the same on 1 node,
//!   each on a fresh database: what the cluster's forwarding and fencing cost, or give, in turns
//!   per second on one machine.
//! - `nodes_cross_node_cancel_p50_ms_vs_local`, `…_p99_…`: on 3 nodes, turns that last (up to
//!   300 ms to the first word) half of them cancelled: cancellation latency (the cancel sent to
//!   a node, to the turn's `turn/end` received from it) through a node that does not serve the
//!   session against through the node that does.
//! - `nodes_takeover_after_kill_ms_vs_lease`: a run whose nodes are killed (`kill -9`) while
//!   slow turns run: from a killed node's lease running out to the first resumed write
//!   (`turn/resumed`) in its partitions, the largest over the kills, against the lease.

use std::process::Command;

use anyhow::Context as _;
use serde_json::Value;

use crate::Options;
use crate::report::Metric;

/// The metrics' prefix (what the bench's filter matches).
pub(crate) const NAME: &str = "nodes";

/// Agents of the throughput runs (and with `--quick`).
const AGENTS: (&str, &str) = ("300", "100");
/// Their turns each.
const TURNS: (&str, &str) = ("5", "3");
/// The lease of every run.
const LEASE_MS: &str = "1000";

/// Measures the metrics.
pub(crate) fn run(options: &Options) -> anyhow::Result<Vec<Metric>> {
    let Some(cluster) = rein_testkit::PgCluster::start() else {
        eprintln!("{NAME}: skipped (no PostgreSQL)");
        return Ok(Vec::new());
    };
    let (agents, turns) = if options.quick { (AGENTS.1, TURNS.1) } else { (AGENTS.0, TURNS.0) };
    let workload = ["--agents", agents, "--turns", turns];
    let one = stress(&cluster.create_database("one"), "1", &workload)?;
    let three = stress(&cluster.create_database("three"), "3", &workload)?;
    let per_s = |summary: &Value| summary["cluster"]["turnsPerSecond"].as_f64().unwrap_or(0.0);
    eprintln!(
        "{NAME}: {agents} agents × {turns} turns: 1 node {:.0} turns/s, 3 nodes {:.0} turns/s \
         ({} of {} prompts forwarded)",
        per_s(&one),
        per_s(&three),
        three["cluster"]["requests"]["forwardedPrompts"],
        three["tally"]["turns"]
            .as_object()
            .map_or(0, |t| t.values().filter_map(Value::as_u64).sum::<u64>()),
    );
    let mut metrics = vec![Metric::record("nodes_3_vs_1_turns_per_s", per_s(&three), per_s(&one))];

    // Cancels of turns that last (0.3 s to the first word): most land, through either path.
    let cancelled = stress(
        &cluster.create_database("cancelled"),
        "3",
        &[
            "--agents",
            "100",
            "--turns",
            if options.quick { "3" } else { "6" },
            "--latency-ms",
            "300",
            "--cancel-rate",
            "0.5",
        ],
    )?;
    let requests = &cancelled["cluster"]["requests"];
    let cancels =
        |kind: &str, p: &str| -> f64 { requests[kind]["latency"][p].as_f64().unwrap_or(f64::NAN) };
    let line = |kind: &str| {
        format!(
            "{} requested, {} landed, p50 {:.1} ms p99 {:.1} ms ({} measured)",
            requests[kind]["requested"],
            requests[kind]["landed"],
            cancels(kind, "p50Ms"),
            cancels(kind, "p99Ms"),
            requests[kind]["latency"]["samples"],
        )
    };
    eprintln!(
        "{NAME}: cancels on 3 nodes, to the turn's end: cross-node {}; local {}",
        line("crossNodeCancels"),
        line("localCancels")
    );
    metrics.push(Metric::record(
        "nodes_cross_node_cancel_p50_ms_vs_local",
        cancels("crossNodeCancels", "p50Ms"),
        cancels("localCancels", "p50Ms"),
    ));
    metrics.push(Metric::record(
        "nodes_cross_node_cancel_p99_ms_vs_local",
        cancels("crossNodeCancels", "p99Ms"),
        cancels("localCancels", "p99Ms"),
    ));

    // Kills while slow turns run: most turns are in a retry wait or an attempt at any moment.
    let killed = stress(
        &cluster.create_database("killed"),
        "3",
        &[
            "--agents",
            "60",
            "--turns",
            if options.quick { "6" } else { "12" },
            "--latency-ms",
            "300",
            "--backoff-ms",
            "100",
            "--fault-rate",
            "0.4",
            "--cancel-rate",
            "0",
            "--node-kill-rate",
            "0.02",
            "--seed",
            "3",
        ],
    )?;
    let takeover = &killed["cluster"]["resumed"]["takeoverAfterKill"];
    let (max, samples) = (takeover["maxMs"].as_f64().unwrap_or(f64::NAN), &takeover["samples"]);
    eprintln!(
        "{NAME}: {} kills with a lease of {LEASE_MS} ms: lease expiry to the first resumed write \
         p50 {} ms, max {max} ms ({samples} measured); kill to it p50 {} ms; resumed turns \
         silent p50 {} ms",
        killed["cluster"]["faults"]["nodeKills"],
        takeover["p50Ms"],
        killed["cluster"]["resumed"]["killToResumed"]["p50Ms"],
        killed["cluster"]["resumed"]["delay"]["p50Ms"],
    );
    let lease: f64 = LEASE_MS.parse().context("the lease")?;
    metrics.push(Metric::record("nodes_takeover_after_kill_ms_vs_lease", max, lease));
    Ok(metrics)
}

/// What every run shares: no plugin chaos (a node's API cannot dispose of a plugin, and
/// settings changes are not what is measured), [`LEASE_MS`], 64 partitions.
const EVERY_RUN: [&str; 8] =
    ["--dispose-rate", "0", "--config-rate", "0", "--lease-ms", LEASE_MS, "--partitions", "64"];

/// `rein stress --nodes NODES --json` on `url` with [`EVERY_RUN`]'s flags and `args`: its
/// summary, once every check passed.
fn stress(url: &str, nodes: &str, args: &[&str]) -> anyhow::Result<Value> {
    let output = Command::new(env!("CARGO_BIN_EXE_rein"))
        .args(["stress", "--nodes", nodes, "--store", "postgres", "--url", url, "--json"])
        .args(EVERY_RUN)
        .args(args)
        .output()
        .context("rein stress --nodes")?;
    let summary: Value = serde_json::from_slice(&output.stdout)
        .with_context(|| format!("no summary: {}", String::from_utf8_lossy(&output.stderr)))?;
    anyhow::ensure!(
        output.status.success() && summary["ok"] == true,
        "the run on {nodes} nodes broke its checks: {summary}"
    );
    Ok(summary)
}
