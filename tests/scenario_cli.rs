//! `rein scenario run` as a process: exit codes, the `--json` report, `--log`, the summary, and
//! the shipped example scenarios. Every run that produces a report ends with its invariant check
//! (`invariant.ok`).

// Helpers outside `#[test]` functions panic on purpose, like the tests themselves.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rein::runtime::event::Envelope;
use rein_cli::scenario::Report;
use serde_json::{Value, json};

fn rein(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rein")).args(args).output().expect("rein runs")
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/scenarios").join(name)
}

/// Writes `doc` to a scenario file in `dir`.
fn scenario_file(dir: &tempfile::TempDir, doc: &Value) -> PathBuf {
    let path = dir.path().join("scenario.json");
    std::fs::write(&path, serde_json::to_string_pretty(doc).unwrap()).unwrap();
    path
}

/// Runs with `--json`, expects exit 0 and exactly one JSON object on stdout; checks the
/// invariant verdict.
fn run_json(args: &[&str]) -> (Report, Output) {
    let out = rein(args);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    assert_eq!(stdout.lines().count(), 1, "one JSON object on one line: {stdout}");
    let report: Report = serde_json::from_str(&stdout).expect("the report parses");
    assert!(report.invariant.ok, "{:?}", report.invariant.violations);
    (report, out)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_happy_path_example_reports_a_completed_turn_with_its_tool_call() {
    let file = example("happy-tool-call.json");
    let (report, out) = run_json(&["scenario", "run", file.to_str().unwrap(), "--json"]);
    let value = serde_json::to_value(&report).unwrap();
    assert_eq!(value["turns"], json!([{"turn": 1, "reason": {"kind": "completed"}}]));
    assert_eq!(
        value["requests"],
        json!([
            {"atMs": 0, "turn": 1, "step": 1, "attempt": 1, "provider": "mock"},
            {"atMs": 120, "turn": 1, "step": 2, "attempt": 1, "provider": "mock"}
        ])
    );
    assert_eq!(
        value["messages"],
        json!([
            {"role": "user", "text": "Please echo hello"},
            {"role": "assistant", "text": "Let me echo that.",
             "toolCalls": [{"id": "call-1", "name": "echo", "arguments": {"text": "hello"}}]},
            {"role": "tool", "id": "call-1", "output": "hello", "isError": false},
            {"role": "assistant", "text": "The tool said: hello"}
        ])
    );
    assert_eq!((value["retries"].clone(), value["configErrors"].clone()), (json!([]), json!([])));
    assert_eq!(value["endMs"], 200);
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
}

#[test]
fn every_example_scenario_is_a_valid_file() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/scenarios");
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        if let Err(e) = rein_cli::scenario::Scenario::from_json(&text) {
            panic!("{}: {e}", path.display());
        }
        seen += 1;
    }
    assert!(seen >= 2, "the examples are there");
}

#[test]
fn log_writes_the_session_log_as_jsonl() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("session.jsonl");
    let file = example("happy-tool-call.json");
    let (report, _) = run_json(&[
        "scenario",
        "run",
        file.to_str().unwrap(),
        "--json",
        "--log",
        log.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.ends_with('\n'));
    let events: Vec<Envelope> =
        text.lines().map(|line| serde_json::from_str(line).expect(line)).collect();
    assert_eq!(events.len() as u64, report.events);
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (0..report.events).collect::<Vec<_>>());
    assert_eq!(events[0].kind(), "session/start");
    assert!(events.iter().any(|e| e.kind() == "tool/result"));
    // The same run again writes the same bytes: virtual time makes scenarios reproducible.
    let again = dir.path().join("again.jsonl");
    let _ = run_json(&[
        "scenario",
        "run",
        file.to_str().unwrap(),
        "--json",
        "--log",
        again.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::read(&again).unwrap(), text.as_bytes());
}

/// A scenario with two retry chains (two turns, each retried once), so two retry ids.
fn two_chains(dir: &tempfile::TempDir) -> PathBuf {
    scenario_file(
        dir,
        &json!({
            "seed": 11,
            "plugins": [{"use": "llm-retry", "config": {"maxTransientRetries": 2}}],
            "providers": [{"id": "mock", "script": [
                {"fail": {"code": "SERVER", "message": "busy", "status": 503, "latencyMs": 5}},
                {"reply": {"text": "one"}},
                {"fail": {"code": "RATE_LIMIT", "message": "slow", "status": 429}},
                {"reply": {"text": "two"}}
            ]}],
            "turns": [{"prompt": "a", "provider": "mock"}, {"prompt": "b", "provider": "mock"}]
        }),
    )
}

#[test]
fn two_runs_of_a_scenario_write_byte_identical_logs_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    let file = two_chains(&dir);
    let runs: Vec<(Vec<u8>, Vec<u8>)> = ["first.jsonl", "second.jsonl"]
        .iter()
        .map(|name| {
            let log = dir.path().join(name);
            let args = [
                "scenario",
                "run",
                file.to_str().unwrap(),
                "--json",
                "--log",
                log.to_str().unwrap(),
            ];
            let (_, out) = run_json(&args);
            (out.stdout, std::fs::read(&log).unwrap())
        })
        .collect();
    assert!(runs[0].0 == runs[1].0, "the same report, byte for byte");
    assert!(runs[0].1 == runs[1].1, "the same log, byte for byte");

    // Retry ids included: valid UUID v4s, one per chain.
    let report: Report = serde_json::from_slice(&runs[0].0).unwrap();
    let ids: Vec<&str> = report.retries.iter().map(|r| r.retry_id.as_str()).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_ne!(ids[0], ids[1], "two chains, two ids");
    for id in &ids {
        let uuid = uuid::Uuid::parse_str(id).unwrap();
        assert_eq!((uuid.get_version_num(), uuid.hyphenated().to_string()), (4, (*id).to_owned()));
    }
    // The same holds for the summary, and another seed draws other ids.
    let summary = |file: &Path| rein(&["scenario", "run", file.to_str().unwrap()]).stdout;
    assert_eq!(summary(&file), summary(&file));
    let reseeded = std::fs::read_to_string(&file).unwrap().replace("\"seed\": 11", "\"seed\": 12");
    std::fs::write(&file, reseeded).unwrap();
    let (other, _) = run_json(&["scenario", "run", file.to_str().unwrap(), "--json"]);
    assert_ne!(other.retries[0].retry_id, ids[0]);
    assert_eq!(other.retries.len(), 2);
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[cfg(unix)]
#[test]
fn a_run_killed_while_writing_its_log_leaves_the_previous_log_intact() {
    use std::os::unix::process::ExitStatusExt;
    const SIGXFSZ: i32 = 25;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("session.jsonl");
    let happy = example("happy-tool-call.json");
    run_json(&[
        "scenario",
        "run",
        happy.to_str().unwrap(),
        "--json",
        "--log",
        log.to_str().unwrap(),
    ]);
    let previous = std::fs::read(&log).unwrap();
    assert!(previous.len() < 16 * 1024, "{}", previous.len());

    // A run whose log is far longer than the previous one: a reply of 256 KiB (the log holds it
    // twice, as a chunk and as the message).
    let big = dir.path().join("big.json");
    let doc = json!({
        "providers": [{"id": "mock", "script": [{"reply": {"text": "x".repeat(256 * 1024)}}]}],
        "turns": [{"prompt": "hello", "provider": "mock"}]
    });
    std::fs::write(&big, doc.to_string()).unwrap();
    let args = ["scenario", "run", big.to_str().unwrap(), "--json", "--log", log.to_str().unwrap()];

    // The kernel kills the run while it writes the log: past 32 KiB (64 blocks of 512 bytes; 64
    // KiB where the shell counts in KiB) of a file it writes, the process gets SIGXFSZ, whose
    // default action ends it at once — like SIGKILL, no destructor or cleanup runs.
    let killed = Command::new("sh")
        .args(["-c", "ulimit -c 0; ulimit -f 64; exec \"$0\" \"$@\"", env!("CARGO_BIN_EXE_rein")])
        .args(args)
        .output()
        .unwrap();
    assert_eq!(killed.status.signal(), Some(SIGXFSZ), "killed while writing: {:?}", killed.status);
    assert!(killed.stdout.is_empty(), "no report: the run never finished");
    assert!(std::fs::read(&log).unwrap() == previous, "the previous log, byte for byte");
    // What the kill left is a hidden temporary file beside it, nothing that reads as the log.
    let left = names(dir.path());
    assert_eq!(left[1..], ["big.json", "session.jsonl"], "{left:?}");
    assert!(left[0].starts_with(".session.jsonl.") && left[0].ends_with(".tmp"), "{left:?}");

    // The same run, not killed, replaces the log whole.
    let (report, _) = run_json(&args);
    let written = std::fs::read_to_string(&log).unwrap();
    assert_eq!(written.lines().count() as u64, report.events);
    let check = rein(&["check", "--finished", log.to_str().unwrap()]);
    assert_eq!(check.status.code(), Some(0), "{}", String::from_utf8_lossy(&check.stdout));
}

#[cfg(unix)]
#[test]
fn a_log_path_that_is_a_symbolic_link_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("target.txt");
    std::fs::write(&target, "keep me\n").unwrap();
    let log = dir.path().join("session.jsonl");
    std::os::unix::fs::symlink(&target, &log).unwrap();
    let file = example("happy-tool-call.json");
    let out = rein(&["scenario", "run", file.to_str().unwrap(), "--log", log.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert_eq!(
        stderr(&out),
        format!(
            "error: cannot write the log: {}: is a symbolic link; rein does not write through \
             links it did not create (name the real path)\n",
            log.display()
        )
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me\n");
    assert_eq!(names(dir.path()), ["session.jsonl", "target.txt"]);
}

#[test]
fn without_json_a_short_summary_is_printed() {
    let file = example("happy-tool-call.json");
    let out = rein(&["scenario", "run", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("1 turn, 2 requests, 0 retries"), "{stdout}");
    assert!(stdout.contains("ended at 200 ms (virtual)"), "{stdout}");
    assert!(stdout.contains("turn 1: completed"), "{stdout}");
    assert!(stdout.contains("invariant: ok"), "{stdout}");
}

#[test]
fn a_failed_turn_is_still_a_run_that_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let file = scenario_file(
        &dir,
        &json!({
            "providers": [{"id": "mock", "script": [
                {"fail": {"code": "SERVER", "message": "busy three", "status": 503,
                          "chunks": ["par"], "latencyMs": 40}}
            ]}],
            "turns": [{"prompt": "hello", "provider": "mock"}, {"prompt": "again", "provider": "mock"}]
        }),
    );
    let (report, _) = run_json(&["scenario", "run", file.to_str().unwrap(), "--json"]);
    let value = serde_json::to_value(&report).unwrap();
    assert_eq!(
        value["turns"],
        json!([
            {"turn": 1, "reason": {"kind": "error",
             "failure": {"code": "SERVER", "message": "busy three", "status": 503}}},
            {"turn": 2, "reason": {"kind": "error", "failure": {"code": "SCRIPT_EXHAUSTED",
             "message": value["turns"][1]["reason"]["failure"]["message"].clone()}}}
        ])
    );
    assert_eq!(
        value["messages"],
        json!([{"role": "user", "text": "hello"}, {"role": "user", "text": "again"}]),
        "no chunk of a failed attempt is history"
    );
    assert_eq!(value["endMs"], 40);
}

#[test]
fn two_scripted_plugins_share_a_chain_under_their_names() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("session.jsonl");
    let file = scenario_file(
        &dir,
        &json!({
            "plugins": [
                {"use": "scripted", "config": {"name": "outer", "answers": ["next", "crash"]}},
                {"use": "scripted", "config": {"name": "inner", "answers": ["retry"]}}
            ],
            "providers": [{"id": "mock", "script": [
                {"fail": {"code": "SERVER", "message": "one"}},
                {"fail": {"code": "SERVER", "message": "two", "latencyMs": 100}},
                {"reply": {"text": "never reached"}}
            ]}],
            "turns": [{"prompt": "hello", "provider": "mock"}],
            // Disposing `inner` before the second failure leaves only `outer`, which crashes
            // (`Next`): the end of the chain stops the turn.
            "actions": [{"atMs": 50, "do": "dispose", "plugin": "inner"}]
        }),
    );
    let args =
        ["scenario", "run", file.to_str().unwrap(), "--json", "--log", log.to_str().unwrap()];
    let (report, out) = run_json(&args);
    assert_eq!(stderr(&out), "", "the dispose applied; a scripted crash prints nothing");
    let value = serde_json::to_value(&report).unwrap();
    assert_eq!(
        value["turns"],
        json!([{"turn": 1, "reason": {"kind": "error",
                "failure": {"code": "SERVER", "message": "two"}}}])
    );
    let attempts: Vec<(u64, u32)> = report.requests.iter().map(|r| (r.at_ms, r.attempt)).collect();
    assert_eq!(attempts, [(0, 1), (0, 2)], "outer passed attempt 1 on, inner retried it");
    let text = std::fs::read_to_string(&log).unwrap();
    let crashed: Vec<Envelope> = text
        .lines()
        .map(|line| serde_json::from_str::<Envelope>(line).unwrap())
        .filter(|e| e.kind() == "plugin/crashed")
        .collect();
    assert_eq!(crashed.len(), 1);
    assert_eq!(
        serde_json::to_value(&crashed[0].event).unwrap()["data"],
        json!({"plugin": "outer", "error": "scripted crash (failure 2)", "restarts": 1})
    );
}

#[test]
fn a_cancel_action_and_its_notes() {
    let dir = tempfile::tempdir().unwrap();
    let file = scenario_file(
        &dir,
        &json!({
            "providers": [{"id": "mock", "script": [{"stall": {}}]}],
            "turns": [{"prompt": "hello", "provider": "mock"}],
            "actions": [{"atMs": 700, "do": "cancel"}, {"atMs": 900, "do": "cancel"}]
        }),
    );
    let (report, out) = run_json(&["scenario", "run", file.to_str().unwrap(), "--json"]);
    let value = serde_json::to_value(&report).unwrap();
    assert_eq!(
        value["turns"],
        json!([{"turn": 1, "reason": {"kind": "aborted", "cause": {"kind": "user"}}}])
    );
    assert_eq!(value["endMs"], 900);
    assert_eq!(
        stderr(&out),
        "note: actions[1] at 900 ms: cancel found no running turn\n",
        "what the report has no room for goes to stderr"
    );
}

#[test]
fn an_invalid_file_exits_2_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            json!({
                "providers": [{"id": "mock", "script": [
                    {"fail": {"code": "RATE_LIMIT", "message": "busy", "status": 600}}]}],
                "turns": [{"prompt": "hi", "provider": "mock"}]
            }),
            "providers[0].script[0].fail.status: must be an integer HTTP status in 100..=599, got 600",
        ),
        (
            json!({
                "providers": [{"id": "mock", "script": []}],
                "turns": [{"prompt": "hi", "provider": "mock"}],
                "actoins": []
            }),
            "actoins: unknown field `actoins`",
        ),
        (
            json!({
                "plugins": [{"use": "no-such-plugin"}],
                "providers": [{"id": "mock", "script": []}],
                "turns": [{"prompt": "hi", "provider": "mock"}]
            }),
            "plugins[0].use: unknown plugin \"no-such-plugin\"",
        ),
        (
            json!({
                "providers": [{"id": "mock", "script": []}],
                "tools": ["grep"],
                "turns": [{"prompt": "hi", "provider": "mock"}]
            }),
            "tools[0]: unknown tool \"grep\"",
        ),
        (
            json!({
                "providers": [{"id": "mock", "retryPolicy": {"mode": "normal", "maxRetries": -1},
                               "script": []}],
                "turns": [{"prompt": "hi", "provider": "mock"}]
            }),
            "providers[0].retryPolicy.maxRetries:",
        ),
        // rein's extensions, and the checks only built plugins allow.
        (
            json!({
                "plugins": [{"use": "scripted", "config": {"answers": ["retyr"]}}],
                "providers": [{"id": "mock", "script": []}],
                "turns": [{"prompt": "hi", "provider": "mock"}]
            }),
            "plugins[0].config.answers[0]: unknown answer \"retyr\"",
        ),
        (
            json!({
                "plugins": [{"use": "scripted"}, {"use": "scripted"}],
                "providers": [{"id": "mock", "script": []}],
                "turns": [{"prompt": "hi", "provider": "mock"}]
            }),
            "plugins[1]: the plugin name \"scripted\" is already registered by plugins[0]",
        ),
        (
            json!({
                "plugins": [{"use": "scripted", "config": {"name": "first"}}],
                "providers": [{"id": "mock", "script": []}],
                "turns": [{"prompt": "hi", "provider": "mock"}],
                "actions": [{"atMs": 0, "do": "dispose", "plugin": "scripted"}]
            }),
            "actions[0].plugin: unknown plugin \"scripted\"; registered: \"first\"",
        ),
        (
            json!({
                "providers": [{"id": "ghost", "adapter": false, "script": []}],
                "turns": [{"prompt": "hi", "provider": "ghost"}]
            }),
            "providers[0].script: not allowed: \"adapter\": false",
        ),
        (
            json!({
                "providers": [{"id": "mock", "script": []}],
                "turns": [{"prompt": "hi", "provider": "mock"}],
                "reject": ["llm/retry", "turn/end"]
            }),
            "reject[1]: \"turn/end\" is written by the runtime's own machinery",
        ),
    ];
    for (doc, expected) in cases {
        let file = scenario_file(&dir, &doc);
        let out = rein(&["scenario", "run", file.to_str().unwrap(), "--json"]);
        assert_eq!(out.status.code(), Some(2), "{expected}");
        assert!(out.stdout.is_empty(), "nothing on stdout for {expected}");
        let err = stderr(&out);
        assert!(err.starts_with("error: "), "{err}");
        assert!(err.contains(expected), "{err} should contain {expected}");
        assert!(err.contains(file.to_str().unwrap()), "{err} names the file");
    }
}

#[test]
fn an_unreadable_or_malformed_file_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.json");
    let out = rein(&["scenario", "run", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot read the scenario"), "{}", stderr(&out));

    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "{\n  \"turns\": [\n").unwrap();
    let out = rein(&["scenario", "run", broken.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("line 3"), "{}", stderr(&out));
}

#[test]
fn a_log_that_cannot_be_written_is_an_internal_fault() {
    let dir = tempfile::tempdir().unwrap();
    let file = example("happy-tool-call.json");
    // A directory is not a writable file.
    let out = rein(&[
        "scenario",
        "run",
        file.to_str().unwrap(),
        "--json",
        "--log",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(stderr(&out).contains("cannot write the log"), "{}", stderr(&out));
}

#[test]
fn a_stall_nothing_cancels_ends_by_shutdown_and_leaves_a_valid_log() {
    let dir = tempfile::tempdir().unwrap();
    let file = scenario_file(
        &dir,
        &json!({
            "providers": [{"id": "mock", "script": [{"stall": {}}]}],
            "turns": [{"prompt": "hello", "provider": "mock"}]
        }),
    );
    let (report, out) = run_json(&["scenario", "run", file.to_str().unwrap(), "--json"]);
    let value = serde_json::to_value(&report).unwrap();
    assert_eq!(
        value["turns"],
        json!([{"turn": 1, "reason": {"kind": "aborted", "cause": {"kind": "disposed"}}}])
    );
    assert!(stderr(&out).starts_with("note: at 2147483648 ms: the running turn wrote no event"));
}

#[test]
fn the_report_checker_is_the_invariant_crate() {
    use rein::runtime::event::{Event, SessionStart, TurnStart};
    let open_turn = [
        Envelope {
            seq: 0,
            time: 0,
            event: Event::SessionStart(SessionStart { session: "s".into(), format: 1 }),
        },
        Envelope { seq: 1, time: 0, event: Event::TurnStart(TurnStart { turn: 1 }) },
    ];
    let violations = rein_cli::scenario::check(&open_turn);
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert_eq!(violations[0].seq, 1);
    assert!(violations[0].message.contains("never ends"), "{violations:?}");
}
