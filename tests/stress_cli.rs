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
fn answers_call_the_pause_tool_and_a_slow_decision_keeps_every_guarantee() {
    // Every prompt's answer calls `pause` (20 ms) and, with no fault, nothing else happens: a
    // call and its result per turn. Then with faults, cancellations, and flaky taking 10 ms
    // over each failure: the same guarantees.
    let quiet = ["--fault-rate", "0", "--cancel-rate", "0", "--dispose-rate", "0"];
    let tools = ["--tool-rate", "1", "--tool-ms", "20", "--config-rate", "0", "--json"];
    let mut args = vec!["stress", "--agents", "5", "--turns", "3", "--seed", "9"];
    args.extend(quiet.iter().chain(&tools));
    let run = rein(&args);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let summary = json_of(&run);
    assert_clean(&summary, 5, 3);
    assert_eq!(summary["tally"]["turns"]["completed"], 15, "{summary:#}");
    assert_eq!(summary["tally"]["toolCalls"], 15, "{summary:#}");
    assert_eq!(summary["tally"]["toolErrors"], 0, "{summary:#}");

    let chaos = ["--fault-rate", "0.4", "--cancel-rate", "0.5", "--decide-ms", "10"];
    let mut args = vec!["stress", "--agents", "10", "--turns", "3", "--seed", "9"];
    args.extend(chaos.iter().chain(&tools));
    let run = rein(&args);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let summary = json_of(&run);
    assert_clean(&summary, 10, 3);
    let calls = summary["tally"]["toolCalls"].as_u64().unwrap();
    assert!(calls > 0, "{summary:#}");
    assert!(summary["tally"]["retriesByPlugin"]["llm-retry"].as_u64().unwrap() > 0);
}

#[test]
fn the_text_summary_ends_ok_and_progress_goes_to_stderr() {
    let run = rein(&["stress", "--agents", "20", "--turns", "2"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.starts_with("rein stress: 20 agents × 2 turns, seed 0, memory store"));
    for line in ["turns       40 ended:", "retries     ", "cancels     ", "invariants  20 logs"] {
        assert!(run.stdout.contains(line), "{line:?} in\n{}", run.stdout);
    }
    assert!(run.stdout.contains("hung        0 turns (deadline 30.0 s)\n"), "{}", run.stdout);
    assert!(run.stdout.contains("shutdown    0 actors, 0 tasks alive\n"), "{}", run.stdout);
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
/// never end on their own: about half of the turns stall once in their attempts); the run is
/// over a second after the last turn ended.
///
/// The other turns must end well within that second, or they are judged hung too — and one that
/// ends on its own between that judgement and the shutdown is counted hung and not aborted. So
/// they run at the fastest pace (no latency, 1 ms backoffs: what they take is mostly
/// scheduling). At the default pace (first words within 10 ms, backoffs from 5 ms up to 100 ms)
/// they took up to a third of a second, and with a deadline of 300 ms on a loaded machine no
/// turn had ended in time: every turn was judged hung. The deadline also bounds the shutdown
/// that must end the hung turns (an actor still alive then is a leak); 300 ms was once too short
/// for that too.
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
    "--latency-ms",
    "0",
    "--backoff-ms",
    "1",
    "--hang-deadline-ms",
    "1000",
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
        (Some(0), Some(0)),
        "{summary:#}"
    );

    // A run of its own: how many turns miss the deadline may differ from the run above.
    let text = rein(HUNG);
    assert_eq!(text.code, 1, "{}{}", text.stdout, text.stderr);
    let line = text.stdout.lines().find(|l| l.starts_with("hung        ")).unwrap();
    let hung: u64 = line["hung        ".len()..].split(' ').next().unwrap().parse().unwrap();
    assert!(hung >= 1, "{}", text.stdout);
    let hung = rein_runtime::plural::count(hung, "hung turn", "hung turns");
    assert!(text.stdout.ends_with(&format!("FAILED: {hung}\n")), "{}", text.stdout);
}

#[test]
fn bad_flags_are_usage_errors() {
    let cases: [(&[&str], &str); 9] = [
        (
            &["--cancel-rate", "1.5"],
            "error: invalid value '1.5' for '--cancel-rate <P>': must be a number within [0, 1]",
        ),
        (
            &["--fault-rate=-0.1"],
            "error: invalid value '-0.1' for '--fault-rate <P>': must be a number within [0, 1]",
        ),
        (
            &["--agents", "0"],
            "error: invalid value '0' for '--agents <N>': must be a whole number within [1, 1000000]",
        ),
        (&["--dir", "/tmp/x"], "error: --dir: only for the jsonl and sqlite stores"),
        (
            &["--durability", "disk"],
            "error: --durability: only for the jsonl, sqlite and postgres stores",
        ),
        (
            &["--outage-at-ms", "500"],
            "error: the following required arguments were not provided:\n  --outage-ms <MS>",
        ),
        (
            &["--route-health", "sometimes"],
            "error: invalid value 'sometimes' for '--route-health <off|on|JSON>': must be off, on, or a JSON object of route-health settings",
        ),
        (
            &["--route-health", r#"{"openMS": 5}"#],
            "error: invalid value '{\"openMS\": 5}' for '--route-health <off|on|JSON>': openMS: unknown key (expected one of maxTokens,",
        ),
        (
            &["--route-health", r#"{"failureRatio": 2}"#],
            "error: invalid value '{\"failureRatio\": 2}' for '--route-health <off|on|JSON>': failureRatio: must be within [0, 1], got 2",
        ),
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

/// Every numeric flag refuses what lies outside its range — before anything runs: no
/// allocation for 10^11 agents, no overflow for the largest number — naming the flag, the value
/// and the range.
#[test]
fn every_numeric_flag_refuses_a_value_outside_its_range() {
    let max = u64::MAX.to_string();
    let beyond = "18446744073709551616";
    // (flag, value, range)
    let cases: Vec<(&str, &str, &str)> = vec![
        ("--agents", &max, "[1, 1000000]"),
        ("--agents", "100000000000", "[1, 1000000]"),
        ("--agents", beyond, "[1, 1000000]"),
        ("--agents", "1000001", "[1, 1000000]"),
        ("--turns", "0", "[1, 1000000]"),
        ("--turns", "4294967296", "[1, 1000000]"),
        ("--latency-ms", &max, "[0, 600000]"),
        ("--backoff-ms", "0", "[1, 100000]"),
        ("--backoff-ms", "100001", "[1, 100000]"),
        ("--stall-ms", "3600001", "[0, 3600000]"),
        ("--hang-deadline-ms", "0", "[1, 604800000]"),
        ("--hang-deadline-ms", &max, "[1, 604800000]"),
        ("--seed", beyond, "[0, 18446744073709551615]"),
        ("--agents", "1.5", "[1, 1000000]"),
        ("--turns", "-3", "[1, 1000000]"),
        ("--dispose-rate", "nan", "[0, 1]"),
        ("--config-rate", "2", "[0, 1]"),
        ("--crash-rate", "inf", "[0, 1]"),
        ("--think-ms", "3600001", "[0, 3600000]"),
        ("--outage-ms", "0", "[1, 86400000]"),
        ("--outage-ms", "86400001", "[1, 86400000]"),
    ];
    for (flag, value, range) in cases {
        let run = rein(&["stress", &format!("{flag}={value}")]);
        assert_eq!(run.code, 2, "{flag} {value}: {}{}", run.stdout, run.stderr);
        let first = run.stderr.lines().next().unwrap_or_default();
        assert!(
            first.starts_with(&format!("error: invalid value '{value}' for '{flag} "))
                && first.ends_with(&format!("within {range}")),
            "{flag} {value}: {}",
            run.stderr
        );
        assert!(run.stdout.is_empty(), "{flag} {value}: nothing ran: {}", run.stdout);
    }
    // The bounds themselves are accepted.
    let run = rein(&["stress", "--agents", "1", "--turns", "1", "--latency-ms", "0", "--json"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
}

/// An outage of the simulated provider: with no `--route-health`, route health is on; the JSON
/// summary reports the route, the outage, the breaker and the retry amplification; with
/// `--route-health off`, no breaker and every failed turn's whole budget. The outage outlasts the
/// run (real time on a loaded machine: a turn of a short outage may end after it, recovered), so
/// every turn after its start fails. (The 1,000-agent run through a 10 s outage, the breaker
/// opening and closing, is `stress_outage.rs`, on paused time.)
#[test]
fn an_outage_is_reported_with_route_health_on_unless_turned_off() {
    let outage = [
        "stress",
        "--agents",
        "40",
        "--turns",
        "6",
        "--think-ms",
        "40",
        "--outage-at-ms",
        "60",
        "--outage-ms",
        "2000",
        "--fault-rate",
        "0",
        "--cancel-rate",
        "0",
        "--config-rate",
        "0",
        "--dispose-rate",
        "0",
        "--json",
    ];
    let on =
        rein(&[&outage[..], &["--route-health", r#"{"openMs": 100, "minAttempts": 5}"#]].concat());
    assert_eq!(on.code, 0, "{}{}", on.stdout, on.stderr);
    let route = json_of(&on)["route"].clone();
    assert_clean(&json_of(&on), 40, 6);
    assert_eq!(route["name"], "simulated", "{route:#}");
    assert_eq!(route["health"]["openMs"], 100, "the settings in force: {route:#}");
    assert_eq!(route["health"]["minAttempts"], 5, "{route:#}");
    assert_eq!(route["outage"], serde_json::json!({"atMs": 60, "ms": 2000}), "{route:#}");
    assert_eq!(route["requestsWhileOpen"], 0, "{route:#}");
    assert!(route["failedTurns"].as_u64().unwrap() > 0, "the outage failed turns: {route:#}");
    assert!(route["retryAmplification"].as_f64().unwrap() <= 5.0, "{route:#}");
    assert!(route["breaker"]["opened"].as_u64().unwrap() >= 1, "{route:#}");

    let default = rein(&outage);
    assert_eq!(default.code, 0, "{}{}", default.stdout, default.stderr);
    let health = &json_of(&default)["route"]["health"];
    assert_eq!(health["openMs"], 30_000, "on with its defaults: {health:#}");

    let off = rein(&[&outage[..], &["--route-health", "off"]].concat());
    assert_eq!(off.code, 0, "{}{}", off.stdout, off.stderr);
    let route = json_of(&off)["route"].clone();
    assert_eq!(route["health"], "off", "{route:#}");
    assert_eq!(route["shortCircuited"], 0, "{route:#}");
    assert!(route.get("breaker").is_none() && route.get("requestsWhileOpen").is_none());
    assert_eq!(route["retryAmplification"], 5.0, "1 + 2 + 2 requests: {route:#}");

    // Without an outage: route health off, and the text says so.
    let plain = rein(&["stress", "--agents", "5", "--turns", "2", "--fault-rate", "0"]);
    assert_eq!(plain.code, 0, "{}{}", plain.stdout, plain.stderr);
    assert!(plain.stdout.contains("route       simulated, route health off: "), "{}", plain.stdout);
    assert!(!plain.stdout.contains("breaker "), "{}", plain.stdout);
}

/// Without `--hang-deadline-ms`, a run waits for a quiet turn as long as its pace allows a turn
/// to take, twice over: 30 s at the default pace, 20 minutes when a retry may wait 100 s.
#[test]
fn the_default_hang_deadline_follows_the_pace() {
    let quick = ["stress", "--agents", "1", "--turns", "1", "--fault-rate", "0", "--json"];
    let deadline = |extra: &[&str]| -> Value {
        let run = rein(&[&quick[..], extra].concat());
        assert_eq!(run.code, 0, "{extra:?}: {}{}", run.stdout, run.stderr);
        json_of(&run)["hangDeadlineMs"].clone()
    };
    assert_eq!(deadline(&[]), 30_000);
    // 2 × (7 × (10 + 100) + 6 × 20 × 5000)
    assert_eq!(deadline(&["--backoff-ms", "5000"]), 1_201_540);
    // An explicit deadline is taken as it is (a long one: with 400 ms, the quick turn missed it
    // on a loaded machine, and the run failed as hung).
    assert_eq!(deadline(&["--backoff-ms", "5000", "--hang-deadline-ms", "45000"]), 45_000);
}

/// A second run on a directory with fewer agents judges only the sessions it opened: a turn a
/// crash left open in a session it never opened is not its violation, and that log is left
/// byte for byte as it was (the run that opens it next repairs it).
#[test]
fn a_reopened_dir_with_fewer_agents_judges_only_the_sessions_it_opened() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    let logs = logs.to_str().unwrap();
    let store = ["--store", "jsonl", "--dir", logs, "--json"];
    let first = rein(&[&["stress", "--agents", "4", "--turns", "1"][..], &store].concat());
    assert_eq!(first.code, 0, "{}{}", first.stdout, first.stderr);
    // Agent 3's log ends inside a turn, as a crash leaves it.
    let left_open = dir.path().join("logs/agent-00003.jsonl");
    let mut text = std::fs::read_to_string(&left_open).unwrap();
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let (seq, time) = (last["seq"].as_u64().unwrap() + 1, last["time"].as_u64().unwrap());
    text.push_str(&format!(
        "{{\"seq\":{seq},\"time\":{time},\"type\":\"user/message\",\"data\":{{\"text\":\"x\"}}}}\n\
         {{\"seq\":{},\"time\":{time},\"type\":\"turn/start\",\"data\":{{\"turn\":2}}}}\n",
        seq + 1
    ));
    std::fs::write(&left_open, &text).unwrap();

    let second = rein(&[&["stress", "--agents", "2", "--turns", "1"][..], &store].concat());
    assert_eq!(second.code, 0, "{}{}", second.stdout, second.stderr);
    let summary = json_of(&second);
    assert_eq!(summary["tally"]["logs"], 2, "{summary:#}");
    assert_eq!(summary["tally"]["violations"], 0, "{summary:#}");
    assert_eq!(summary["otherLogs"], 2, "{summary:#}");
    assert_eq!(std::fs::read_to_string(&left_open).unwrap(), text, "left alone");
    let plain =
        rein(&["stress", "--agents", "2", "--turns", "1", "--store", "jsonl", "--dir", logs]);
    assert_eq!(plain.code, 0, "{}{}", plain.stdout, plain.stderr);
    assert!(
        plain.stdout.contains("(2 other logs in the store not judged: this run did not open them)"),
        "{}",
        plain.stdout
    );

    // Opened again by a run of all four, its open turn is resumed (not interrupted) and judged
    // clean.
    let all = rein(&[&["stress", "--agents", "4", "--turns", "1"][..], &store].concat());
    assert_eq!(all.code, 0, "{}{}", all.stdout, all.stderr);
    let summary = json_of(&all);
    assert_eq!(
        (summary["tally"]["logs"].as_u64(), summary["otherLogs"].as_u64()),
        (Some(4), Some(0))
    );
    assert_eq!(summary["tally"]["turns"]["interrupted"], Value::Null, "resumed: {summary:#}");
    let checked = rein(&["check", "--finished", left_open.to_str().unwrap()]);
    assert_eq!(checked.code, 0, "{}{}", checked.stdout, checked.stderr);
}

/// An `--acks` file that cannot be created is a usage error before anything runs (exit 2); one
/// whose writes fail (a full device) fails the run (exit 1), naming the file: the lines it
/// promised are missing.
#[test]
fn an_acks_file_that_cannot_be_written_fails_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no/such/dir/acks");
    let run =
        rein(&["stress", "--agents", "2", "--turns", "1", "--acks", missing.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.starts_with(&format!("error: --acks {}: ", missing.display())),
        "{}",
        run.stderr
    );
    assert!(run.stdout.is_empty(), "nothing ran: {}", run.stdout);

    let full = Path::new("/dev/full");
    if !full.exists() {
        eprintln!("skipped the full-device half: this system has no /dev/full");
        return;
    }
    let args = ["stress", "--agents", "2", "--turns", "1", "--acks", "/dev/full"];
    let run = rein(&[&args[..], &["--json"]].concat());
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("error: --acks /dev/full: "), "{}", run.stderr);
    let summary = json_of(&run);
    assert_eq!(summary["ok"], false);
    assert!(summary["acksError"].as_str().unwrap().starts_with("/dev/full: "), "{summary:#}");
    let text = rein(&args);
    assert_eq!(text.code, 1);
    let last = text.stdout.lines().last().unwrap_or_default();
    assert!(last.starts_with("FAILED: --acks /dev/full: "), "{}", text.stdout);
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
