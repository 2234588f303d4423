//! `rein stress --nodes` as a process: the stress workload through two `rein node` processes
//! over one throwaway PostgreSQL, with a node killed (`kill -9`) and started again, a node
//! paused past its lease, and the database restarted, must end with every guarantee held
//! across the cluster (exit 0) — every log valid and finished, no turn run on two nodes, every
//! acknowledged event present, resumed retry waits continuing their chain, no hung turn — and
//! report what happened; its logs must pass `rein check --finished`. Flags that need a cluster,
//! or a cluster without its database, are usage errors (exit 2).
//!
//! Without PostgreSQL the cluster test says how to install it and passes, except with
//! `CI=true`.

#![allow(clippy::unwrap_used)]

use rein_testkit::PgCluster;
use rein_testkit::cli::Run;
use serde_json::Value;

/// `rein ARGS` in a directory of its own, with a clean environment.
fn rein(args: &[&str]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    rein_testkit::cli::rein(dir.path(), args, &[], "")
}

/// Seed 5 at these rates sets off, out of 96 turns (8 agents × 12): a pause and a database
/// restart at the 7th turn's end, kills at the 44th and the 57th.
const SEED: &str = "5";

#[test]
fn two_nodes_survive_a_kill_a_pause_and_a_database_restart_with_every_guarantee() {
    let Some(cluster) = PgCluster::start() else { return };
    let url = cluster.create_database("nodes");
    let restart = cluster.restart_command();
    let run = rein(&[
        "stress",
        "--nodes",
        "2",
        "--store",
        "postgres",
        "--url",
        &url,
        "--agents",
        "8",
        "--turns",
        "12",
        "--seed",
        SEED,
        "--lease-ms",
        "500",
        "--partitions",
        "16",
        "--node-kill-rate",
        "0.02",
        "--node-pause-rate",
        "0.02",
        "--pg-restart-rate",
        "0.01",
        "--pg-restart",
        &restart,
        "--cancel-rate",
        "0.2",
        "--config-rate",
        "0.05",
        "--json",
    ]);
    assert!(!run.stdout.contains(rein_testkit::postgres::PASSWORD), "{}", run.stdout);
    assert!(!run.stderr.contains(rein_testkit::postgres::PASSWORD), "{}", run.stderr);
    assert_eq!(run.code, Some(0), "{run:?}");
    let summary: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    let at = |path: &str| -> u64 {
        path.split('.')
            .fold(&summary, |v, key| &v[key])
            .as_u64()
            .unwrap_or_else(|| panic!("{path} is not a number in {summary:#}"))
    };
    // Every planned turn ended, every log is valid and finished.
    assert_eq!(summary["ok"], true, "{summary:#}");
    assert_eq!(at("tally.logs"), 8);
    assert!(at("tally.events") > 0);
    assert_eq!(at("tally.violations"), 0, "{summary:#}");
    assert_eq!(at("hung"), 0);
    assert_eq!(at("agentErrors"), 0, "{summary:#}");
    let ended: u64 =
        summary["tally"]["turns"].as_object().unwrap().values().map(|n| n.as_u64().unwrap()).sum();
    assert!(ended >= 96, "every planned turn ended (and maybe a prompt sent twice): {ended}");
    // The faults happened and the cluster took them over.
    assert!(at("cluster.faults.nodeKills") >= 1, "{summary:#}");
    assert!(at("cluster.faults.nodePauses") >= 1, "{summary:#}");
    assert!(at("cluster.faults.databaseRestarts") >= 1, "{summary:#}");
    assert!(at("cluster.ownership.takenOver") >= 1, "{summary:#}");
    assert!(at("cluster.requests.forwardedPrompts") > 0, "{summary:#}");
    assert!(at("cluster.requests.localPrompts") > 0, "{summary:#}");
    // No turn ran on two nodes, nothing acknowledged was lost, no retry chain broke.
    assert!(at("cluster.writers.checked") >= at("tally.events") / 2, "{summary:#}");
    assert_eq!(at("cluster.writers.violations"), 0, "{summary:#}");
    assert!(at("cluster.acks.checked") > 0);
    assert_eq!(at("cluster.acks.violations"), 0, "{summary:#}");
    assert_eq!(at("cluster.resumed.retryWaitsBroken"), 0, "{summary:#}");
    assert_eq!(summary["cluster"]["settingsConverged"], true);
    assert_eq!(summary["cluster"]["openAtEnd"], serde_json::json!([]));
    assert_eq!(summary["cluster"]["nodeFailures"], serde_json::json!([]));
    // The faults are told as they happen.
    assert!(run.stderr.contains("killed (kill -9), started again"), "{}", run.stderr);
    assert!(run.stderr.contains("paused (SIGSTOP), continued"), "{}", run.stderr);

    // Every log, read by another program, passes the finished-log check.
    let checked = rein(&["check", "--finished", "--postgres", &url]);
    assert_eq!(checked.code, Some(0), "{checked:?}");
}

#[test]
fn a_cluster_needs_its_database_and_cluster_flags_need_a_cluster() {
    let url = "postgres://rein@127.0.0.1:1/none";
    let cases: [(&[&str], &str); 9] = [
        (&["--nodes", "2"], "--nodes: needs --store postgres --url URL"),
        (&["--nodes", "2", "--store", "postgres"], "--nodes: needs --store postgres --url URL"),
        (&["--nodes", "0", "--store", "postgres", "--url", url], "--nodes"),
        (
            &["--nodes", "2", "--store", "postgres", "--url", url, "--durability", "os"],
            "--durability os",
        ),
        (&["--lease-ms", "500"], "--lease-ms: only with --nodes"),
        (&["--node-kill-rate", "0.1"], "--node-kill-rate: only with --nodes"),
        (
            &["--nodes", "2", "--store", "postgres", "--url", url, "--pg-restart-rate", "0.1"],
            "--pg-restart-rate: needs --pg-restart COMMAND",
        ),
        (
            &["--nodes", "2", "--store", "postgres", "--url", url, "--outage-ms", "1000"],
            "--outage-ms: not with --nodes",
        ),
        (
            &["--nodes", "2", "--store", "postgres", "--url", url, "--route-health", "on"],
            "--route-health: not with --nodes",
        ),
    ];
    for (args, want) in cases {
        let mut all = vec!["stress"];
        all.extend_from_slice(args);
        let run = rein(&all);
        assert_eq!(run.code, Some(2), "{args:?}: {run:?}");
        assert!(run.stderr.contains(want), "{args:?}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
    }
}
