//! `rein stress` as a process: a run under faults, cancellations, plugin disposals, settings
//! changes and plugin crashes must end with every guarantee held (exit 0) and say so; its logs
//! must pass `rein check --finished`; a hung turn must fail the run (exit 1) and still leave
//! nothing alive; bad flags are usage errors (exit 2).

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

use serde_json::Value;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn rein(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_rein")).args(args).output().expect("rein runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

fn json_of(run: &Run) -> Value {
    serde_json::from_str(run.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
}

/// The figures every clean run of `agents` × `turns` must show.
fn assert_clean(summary: &Value, agents: u64, turns: u64) {
    assert_eq!(summary["ok"], true, "{summary:#}");
    let tally = &summary["tally"];
    assert_eq!(tally["logs"], agents, "{summary:#}");
    let ended: u64 =
        tally["turns"].as_object().unwrap().values().map(|n| n.as_u64().unwrap()).sum();
    assert_eq!(ended, agents * turns, "every planned turn ended: {summary:#}");
    assert_eq!(tally["violations"], 0, "{summary:#}");
    assert_eq!(summary["hung"], 0, "{summary:#}");
    assert_eq!(summary["agentErrors"], 0, "{summary:#}");
    assert_eq!(summary["leaks"]["actors"], 0, "{summary:#}");
    assert_eq!(summary["leaks"]["tasks"], 0, "{summary:#}");
    assert_eq!(summary["leaks"]["shutdownFinished"], true, "{summary:#}");
    assert!(summary["peakRssKib"].as_u64().unwrap() > 0, "{summary:#}");
    let cancels = &summary["cancellations"];
    assert!(cancels["landed"].as_u64() <= cancels["requested"].as_u64());
    assert!(cancels["latency"]["samples"].as_u64() <= cancels["landed"].as_u64());
}

#[test]
fn a_chaotic_run_keeps_every_guarantee_and_counts_what_happened() {
    let args = [
        "stress",
        "--agents",
        "40",
        "--turns",
        "3",
        "--seed",
        "3",
        "--fault-rate",
        "0.5",
        "--cancel-rate",
        "0.3",
        "--dispose-rate",
        "0.2",
        "--config-rate",
        "0.2",
        "--crash-rate",
        "0.2",
        "--json",
    ];
    let run = rein(&args);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let summary = json_of(&run);
    assert_clean(&summary, 40, 3);
    let tally = &summary["tally"];
    assert!(tally["retriesByPlugin"]["llm-retry"].as_u64().unwrap() > 0, "{summary:#}");
    assert!(summary["cancellations"]["requested"].as_u64().unwrap() > 0, "{summary:#}");
    let plugins = &summary["plugins"];
    assert!(plugins["disposed"].as_u64().unwrap() > 0, "{summary:#}");
    // A crash in a turn already cancelled is not logged: the logs hold at most those injected.
    let logged: u64 =
        tally["crashesByPlugin"].as_object().unwrap().values().map(|n| n.as_u64().unwrap()).sum();
    assert!(logged <= plugins["crashesInjected"].as_u64().unwrap(), "{summary:#}");
    // Every disposed plugin came back before shutdown; so did any removed by supervision.
    let (disposed, removed, registered) = (
        plugins["disposed"].as_u64().unwrap(),
        plugins["removed"].as_u64().unwrap(),
        plugins["registered"].as_u64().unwrap(),
    );
    assert_eq!(registered, disposed + removed, "{summary:#}");
    // Changes go to the plugins with run-time settings (auto-retry, compaction); llm-retry's are
    // read-only and flaky has none: each is asked once, then left alone.
    let config = plugins["config"].as_object().unwrap();
    let kinds = ["unsupported", "read-only", "none", "accepted", "stale", "gone"];
    assert!(config.keys().all(|k| kinds.contains(&k.as_str())), "{summary:#}");
    assert!(config.get("accepted").and_then(Value::as_u64).unwrap_or(0) > 0, "{summary:#}");

    // The agents' requests come from the seed alone.
    let again = json_of(&rein(&args));
    for field in ["disposeRequests", "configRequests"] {
        assert_eq!(again["plugins"][field], plugins[field], "{field}");
    }
}

#[test]
fn crashing_plugins_are_restarted_removed_and_registered_again() {
    // flaky stays first in the chain (no disposals) and panics on half the failures: its
    // supervisor restarts it, and removes it after 3 restarts in 5 s; the run registers it
    // again at the next settings request.
    let run = rein(&[
        "stress",
        "--agents",
        "30",
        "--turns",
        "3",
        "--seed",
        "5",
        "--fault-rate",
        "0.6",
        "--crash-rate",
        "0.5",
        "--dispose-rate",
        "0",
        "--config-rate",
        "0.5",
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let summary = json_of(&run);
    assert_clean(&summary, 30, 3);
    let plugins = &summary["plugins"];
    let injected = plugins["crashesInjected"].as_u64().unwrap();
    let logged = summary["tally"]["crashesByPlugin"]["flaky"].as_u64().unwrap();
    assert!(logged > 3 && logged <= injected, "{summary:#}");
    assert!(plugins["removed"].as_u64().unwrap() > 0, "{summary:#}");
    assert_eq!(plugins["registered"], plugins["removed"], "{summary:#}");
}

#[test]
fn the_text_summary_ends_ok_and_progress_goes_to_stderr() {
    let run = rein(&["stress", "--agents", "20", "--turns", "2"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.starts_with("rein stress: 20 agent(s) × 2 turn(s), seed 0, memory store"));
    for line in ["turns       40 ended:", "retries     ", "cancels     ", "invariants  20 log(s)"] {
        assert!(run.stdout.contains(line), "{line:?} in\n{}", run.stdout);
    }
    assert!(run.stdout.contains("hung        0 turn(s)\n"), "{}", run.stdout);
    assert!(run.stdout.contains("shutdown    0 actor(s), 0 task(s) alive\n"), "{}", run.stdout);
    assert!(run.stdout.ends_with("\nok\n"), "{}", run.stdout);
    // Not a terminal: plain progress lines, one per tenth.
    assert!(run.stderr.contains("stress: 40/40 turns ended (100%)"), "{}", run.stderr);
    assert_eq!(run.stderr.lines().count(), 10, "{}", run.stderr);
}

#[test]
fn durable_stores_leave_logs_that_check_clean() {
    let dir = tempfile::tempdir().unwrap();
    let jsonl = dir.path().join("jsonl");
    let run = rein(&[
        "stress",
        "--agents",
        "12",
        "--turns",
        "3",
        "--store",
        "jsonl",
        "--dir",
        jsonl.to_str().unwrap(),
        "--durability",
        "disk",
        "--dispose-rate",
        "0.2",
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let summary = json_of(&run);
    assert_clean(&summary, 12, 3);
    assert_eq!(summary["logs"], jsonl.to_str().unwrap());
    let mut logs: Vec<String> = std::fs::read_dir(&jsonl)
        .unwrap()
        .map(|e| e.unwrap().path().to_str().unwrap().to_owned())
        .filter(|path| path.ends_with(".jsonl"))
        .collect();
    logs.sort();
    assert_eq!(logs.len(), 12, "beside each log, its lock file");
    assert!(logs[0].ends_with("agent-00000.jsonl"), "{logs:?}");
    let mut check = vec!["check", "--finished"];
    check.extend(logs.iter().map(String::as_str));
    let checked = rein(&check);
    assert_eq!(checked.code, 0, "{}{}", checked.stdout, checked.stderr);

    // A second run on the same directory continues the sessions.
    let again = rein(&[
        "stress",
        "--agents",
        "12",
        "--turns",
        "1",
        "--store",
        "jsonl",
        "--dir",
        jsonl.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(again.code, 0, "{}{}", again.stdout, again.stderr);
    let ended: u64 = json_of(&again)["tally"]["turns"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(ended, 12 * 4, "the logs hold both runs' turns");

    let sqlite = dir.path().join("sqlite");
    let run = rein(&[
        "stress",
        "--agents",
        "12",
        "--turns",
        "3",
        "--store",
        "sqlite",
        "--dir",
        sqlite.to_str().unwrap(),
        "--durability",
        "disk",
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_clean(&json_of(&run), 12, 3);
    let db = sqlite.join("stress.db");
    assert!(Path::new(&db).is_file());
    let checked = rein(&["check", "--finished", "--sqlite", db.to_str().unwrap()]);
    assert_eq!(checked.code, 0, "{}{}", checked.stdout, checked.stderr);
}

/// 20 agents whose every attempt fails, a tenth of them stalling for ten minutes (turns that
/// never end on their own); the run is over 300 ms after the last turn ended.
const HUNG: &[&str] = &[
    "stress",
    "--agents",
    "20",
    "--turns",
    "1",
    "--fault-rate",
    "1",
    "--cancel-rate",
    "0",
    "--dispose-rate",
    "0",
    "--config-rate",
    "0",
    "--stall-ms",
    "600000",
    "--hang-deadline-ms",
    "300",
];

#[test]
fn a_hung_turn_fails_the_run_and_shutdown_still_ends_it() {
    let run = rein(&[HUNG, &["--json"]].concat());
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let summary = json_of(&run);
    assert_eq!(summary["ok"], false);
    let hung = summary["hung"].as_u64().unwrap();
    assert!(hung >= 1, "{summary:#}");
    let listed = summary["hungTurns"].as_array().unwrap();
    assert_eq!(listed.len() as u64, hung.min(10));
    assert!(listed[0]["session"].as_str().unwrap().starts_with("agent-"), "{summary:#}");
    assert_eq!(listed[0]["turn"], 1);
    // Shutdown ended them (aborted, disposed), and left nothing alive.
    assert_eq!(summary["tally"]["abortedByCause"]["disposed"], hung, "{summary:#}");
    assert_eq!(summary["tally"]["violations"], 0, "{summary:#}");
    assert_eq!(
        (summary["leaks"]["actors"].as_u64(), summary["leaks"]["tasks"].as_u64()),
        (Some(0), Some(0))
    );

    let text = rein(HUNG);
    assert_eq!(text.code, 1);
    assert!(text.stdout.ends_with(&format!("FAILED: {hung} hung turn(s)\n")), "{}", text.stdout);
}

#[test]
fn bad_flags_are_usage_errors() {
    let cases: [(&[&str], &str); 5] = [
        (&["--cancel-rate", "1.5"], "error: --cancel-rate: must be within [0, 1], got 1.5"),
        (&["--fault-rate=-0.1"], "error: --fault-rate: must be within [0, 1]"),
        (&["--agents", "0"], "error: --agents: must be at least 1"),
        (&["--dir", "/tmp/x"], "error: --dir: only for the jsonl and sqlite stores"),
        (&["--durability", "disk"], "error: --durability: only for the jsonl and sqlite stores"),
    ];
    for (flags, message) in cases {
        let mut args = vec!["stress"];
        args.extend_from_slice(flags);
        let run = rein(&args);
        assert_eq!(run.code, 2, "{flags:?}: {}{}", run.stdout, run.stderr);
        assert!(run.stderr.starts_with(message), "{flags:?}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "{flags:?}: {}", run.stdout);
    }
    assert_eq!(rein(&["stress", "--store", "nope"]).code, 2);
}

#[test]
fn the_help_states_what_runs_the_output_and_the_exit_status() {
    let run = rein(&["stress", "--help"]);
    assert_eq!(run.code, 0);
    for needle in [
        "--agents <N>",
        "--cancel-rate <P>",
        "--dispose-rate <P>",
        "--config-rate <P>",
        "--fault-rate <P>",
        "--seed <S>",
        "--store <STORE>",
        "--dir <DIR>",
        "--hang-deadline-ms <MS>",
        "--acks <PATH>",
        "--json",
        "Output:",
        "stdout",
        "stderr",
        "Exit status:",
        "\n  0  ",
        "\n  1  ",
        "\n  2  ",
    ] {
        assert!(run.stdout.contains(needle), "--help lacks {needle:?}:\n{}", run.stdout);
    }
}

#[test]
fn a_second_run_on_a_sqlite_store_another_run_holds_is_refused_and_a_killed_holder_frees_it() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("sqlite");
    let store_arg = store.to_str().unwrap();
    let db = store.join("stress.db");
    // Turns that wait up to 2 s for their first word: the run is far from over when its first
    // acknowledgement (the sessions' `session/start`) comes out.
    let mut first = Command::new(env!("CARGO_BIN_EXE_rein"))
        .args(["stress", "--agents", "2", "--turns", "5", "--latency-ms", "2000", "--cancel-rate"])
        .args(["0", "--store", "sqlite", "--dir", store_arg, "--acks", "-"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut acks = std::io::BufReader::new(first.stdout.take().unwrap());
    let mut line = String::new();
    acks.read_line(&mut line).unwrap();
    assert!(line.starts_with("ack agent-0000"), "{line:?}");

    let second =
        rein(&["stress", "--agents", "2", "--turns", "1", "--store", "sqlite", "--dir", store_arg]);
    assert_eq!(second.code, 2, "{}{}", second.stdout, second.stderr);
    let want = format!("{} is in use by another process (pid {}, since ", db.display(), first.id());
    assert!(second.stderr.contains(&want), "{}", second.stderr);
    assert!(
        second.stderr.contains(&format!("lock file {}.lock)", db.display())),
        "{}",
        second.stderr
    );

    // Killed outright, the holder leaves no stale lock: the next run reopens the database,
    // closes the turns the kill left open (interrupted) and goes on.
    first.kill().unwrap();
    first.wait().unwrap();
    let third = rein(&[
        "stress", "--agents", "2", "--turns", "1", "--store", "sqlite", "--dir", store_arg,
        "--json",
    ]);
    assert_eq!(third.code, 0, "{}{}", third.stdout, third.stderr);
    let checked = rein(&["check", "--finished", "--sqlite", db.to_str().unwrap()]);
    assert_eq!(checked.code, 0, "{}{}", checked.stdout, checked.stderr);
}
