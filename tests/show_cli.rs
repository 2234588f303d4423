//! `rein show` as a process, over real logs (`rein scenario run --log`) and a hand-built one:
//! the plain output of recovered, exhausted, cancelled and mixed-plugin turns, collapsed and
//! expanded; colour only when asked for (NO_COLOR wins over CLICOLOR_FORCE); corrupt, missing and
//! torn logs. Every log a scenario produced passed its invariant check (`invariant.ok`).

// Helpers outside `#[test]` functions panic on purpose, like the tests themselves.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rein::runtime::failure::Failure;
use rein_testkit::history::{History, Retry};

fn rein(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rein"));
    command.args(args).env_remove("NO_COLOR").env_remove("CLICOLOR_FORCE").env_remove("CLICOLOR");
    command.envs(env.iter().copied()).output().expect("rein runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

fn arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Runs `tests/panels/<name>` and writes its log to `dir/<name>.jsonl`; the run's invariant
/// verdict must be clean.
fn scenario_log(dir: &Path, name: &str) -> PathBuf {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/panels").join(name);
    let log = dir.join(format!("{name}.jsonl"));
    let out = rein(&["scenario", "run", arg(&file), "--json", "--log", arg(&log)], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["invariant"]["ok"], true, "{report}");
    log
}

/// Runs `rein show ARGS` and expects exit 0 and nothing on stderr; returns stdout with the
/// log's directory replaced by `DIR`.
fn show(dir: &Path, args: &[&str]) -> String {
    let out = rein(&[&["show"], args].concat(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "");
    text(&out.stdout).replace(arg(dir), "DIR")
}

#[test]
fn the_four_kinds_of_turns_collapsed() {
    let dir = tempfile::tempdir().unwrap();
    let log = scenario_log(dir.path(), "turn-kinds.json");
    assert_eq!(
        show(dir.path(), &[arg(&log)]),
        "\
DIR/turn-kinds.json.jsonl: session scenario · 5 turns, 4 retried or failed
▸ turn 1 · Retried 1 time this turn · recovered
▸ turn 3 · Retried 3 times this turn · recovered
▸ turn 4 · Retried 2 times this turn · finally failed with SERVER
▸ turn 5 · Retried 1 time this turn · cancelled
"
    );
}

#[test]
fn the_four_kinds_of_turns_expanded() {
    let dir = tempfile::tempdir().unwrap();
    let log = scenario_log(dir.path(), "turn-kinds.json");
    // Turn 2 (a clean tool call) has no panel. Turn 3 mixes llm-retry and the scripted plugin,
    // which retries without writing a record; in turn 4 the scripted plugin crashes. The escape
    // sequence the provider sent in turn 4 is shown, not sent to the terminal.
    let expected = "\
DIR/turn-kinds.json.jsonl: session scenario · 5 turns, 4 retried or failed
▾ turn 1 · Retried 1 time this turn · recovered
    harness · turn 1·step 1 · mock · failed RATE_LIMIT · HTTP 429 · retry-after 1500 ms · request req-1
      429: slow down
      streamed before it ended:
        I will ech
    llm-retry · attempt 1/2 · waited 1500 ms · turn 1·step 1 · mock · answered
▾ turn 3 · Retried 3 times this turn · recovered
    harness · turn 3·step 1 · mock · failed SERVER · HTTP 503
      503: one
    llm-retry · attempt 1/2 · waited 500 ms · turn 3·step 1 · mock · failed SERVER · HTTP 503
      503: two
    llm-retry · attempt 2/2 · waited 1000 ms · turn 3·step 1 · mock · failed SERVER · HTTP 503 · request req-3
      503: three
    unrecorded · turn 3·step 1 · mock · answered
▾ turn 4 · Retried 2 times this turn · finally failed with SERVER
    harness · turn 4·step 1 · mock · failed TIMEOUT
      timed out after 30 s
    llm-retry · attempt 1/2 · waited 500 ms · turn 4·step 1 · mock · failed SERVER · HTTP 502
      upstream said:
        <html>503</html>  
      \\u{1b}[2J
    llm-retry · attempt 2/2 · waited 1000 ms · turn 4·step 1 · mock · failed SERVER · HTTP 503
      still down
    plugin crashed · scripted · restart 1
      scripted crash (failure 2)
▾ turn 5 · Retried 1 time this turn · cancelled
    harness · turn 5·step 1 · mock · failed SERVER · HTTP 500
      down
    llm-retry · attempt 1/2 · waited 500 ms · turn 5·step 1 · mock · cancelled
";
    assert_eq!(show(dir.path(), &["--expand", arg(&log)]), expected);
    assert_eq!(show(dir.path(), &["-e", "--color", "never", arg(&log)]), expected);
}

#[test]
fn a_turn_recovered_by_several_recording_plugins_names_each() {
    let mut h = History::new();
    h.user().turn().step().request("mock");
    h.fail(Failure::new("RATE_LIMIT", "slow").unwrap()).retried(Retry::official("a", 1));
    h.request("mock");
    h.fail(Failure::new("RATE_LIMIT", "slow").unwrap()).retried(Retry::official("a", 2));
    h.request("mock");
    h.fail(Failure::new("RATE_LIMIT", "slower").unwrap())
        .retried(Retry::auto("b", 1).delay(2000.0));
    h.request("mock");
    h.fail(Failure::new("QUOTA", "out of credit").unwrap()).switched("backup", "eager");
    h.request("backup");
    h.fail(Failure::new("SERVER", "backup hiccup").unwrap())
        .retried(Retry::always("c", 1).delay(0.5));
    h.answer("backup").completed().idle();
    let events = h.build();
    assert_eq!(rein::invariant::check_finished_log(&events), [], "a valid log");

    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("mixed.jsonl");
    let lines: String = events.iter().map(|e| serde_json::to_string(e).unwrap() + "\n").collect();
    std::fs::write(&log, lines).unwrap();
    assert_eq!(
        show(dir.path(), &["--expand", arg(&log)]),
        "\
DIR/mixed.jsonl: session s1 · 1 turn, 1 retried or failed
▾ turn 1 · Retried 5 times this turn · recovered
    harness · turn 1·step 1 · mock · failed RATE_LIMIT
      slow
    llm-retry · attempt 1/2 · waited 500 ms · turn 1·step 1 · mock · failed RATE_LIMIT
      slow
    llm-retry · attempt 2/2 · waited 500 ms · turn 1·step 1 · mock · failed RATE_LIMIT
      slower
    auto-retry · attempt 1/3 · waited 2000 ms · turn 1·step 1 · mock · failed QUOTA
      out of credit
    route switched · turn 1·step 1 · mock → backup · QUOTA · eager
    fallback · turn 1·step 1 · backup · failed SERVER
      backup hiccup
    llm-retry · attempt 1/∞ · waited 0.5 ms · turn 1·step 1 · backup · answered
"
    );
}

#[test]
fn colour_only_when_asked_for_and_never_with_no_color() {
    let dir = tempfile::tempdir().unwrap();
    let log = scenario_log(dir.path(), "turn-kinds.json");
    let ansi = |args: &[&str], env: &[(&str, &str)]| {
        let out = rein(&[&["show", arg(&log)], args].concat(), env);
        assert_eq!(out.status.code(), Some(0));
        text(&out.stdout).contains('\u{1b}')
    };
    /// (flags, environment, coloured)
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], bool);
    let cases: [Case<'_>; 6] = [
        (&[], &[], false), // stdout is a pipe
        (&["--color", "always"], &[], true),
        (&["--color", "always"], &[("NO_COLOR", "1")], true), // the flag is explicit
        (&[], &[("CLICOLOR_FORCE", "1")], true),
        (&[], &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")], false),
        (&["--color", "never"], &[("CLICOLOR_FORCE", "1")], false),
    ];
    for (args, env, coloured) in cases {
        assert_eq!(ansi(args, env), coloured, "{args:?} {env:?}");
    }
    let out = rein(&["show", "--color", "always", arg(&log)], &[]);
    assert!(text(&out.stdout).contains("\u{1b}[32mrecovered\u{1b}[0m"), "{}", text(&out.stdout));
}

#[test]
fn unreadable_logs_exit_2_naming_file_and_line_and_the_others_are_shown() {
    let dir = tempfile::tempdir().unwrap();
    let good = scenario_log(dir.path(), "turn-kinds.json");
    let lines = std::fs::read_to_string(&good).unwrap();
    let mut corrupt: Vec<&str> = lines.lines().collect();
    corrupt[2] = "{not json";
    let corrupt_path = dir.path().join("corrupt.jsonl");
    std::fs::write(&corrupt_path, corrupt.join("\n") + "\n").unwrap();
    let missing = dir.path().join("missing.jsonl");

    let out = rein(&["show", arg(&corrupt_path), arg(&missing), arg(&good)], &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr).replace(arg(dir.path()), "DIR");
    let errors: Vec<&str> = stderr.lines().collect();
    assert_eq!(errors.len(), 2, "{stderr}");
    assert!(errors[0].starts_with("error: DIR/corrupt.jsonl:3: corrupt log line: "), "{stderr}");
    assert!(errors[1].starts_with("error: DIR/missing.jsonl: "), "{stderr}");
    assert!(text(&out.stdout).starts_with(&format!("{}: session scenario", arg(&good))));

    // A torn last line (a crash during an append) is left out with a warning.
    let torn = dir.path().join("torn.jsonl");
    let tail = r#"{"seq":78,"ti"#;
    std::fs::write(&torn, format!("{lines}{tail}")).unwrap();
    let out = rein(&["show", arg(&torn)], &[]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        text(&out.stderr),
        format!("warning: {}: torn last line 79 ({} bytes), ignored\n", arg(&torn), tail.len())
    );
    assert!(text(&out.stdout).contains("4 retried or failed"));
    assert_eq!(std::fs::read_to_string(&torn).unwrap(), format!("{lines}{tail}"), "not cut");
}

#[test]
fn a_log_where_nothing_failed_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let events = History::new().user().turn().step().answer("mock").completed().idle().build();
    let log = dir.path().join("clean.jsonl");
    let lines: String = events.iter().map(|e| serde_json::to_string(e).unwrap() + "\n").collect();
    std::fs::write(&log, lines).unwrap();
    assert_eq!(
        show(dir.path(), &["--expand", arg(&log)]),
        "DIR/clean.jsonl: session s1 · 1 turn, none retried or failed\n"
    );
}

#[test]
fn help_states_the_format_and_exit_status() {
    let out = rein(&["show", "--help"], &[]);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    for needle in [
        "--expand",
        "--color <WHEN>",
        "NO_COLOR",
        "on stdout",
        "On stderr",
        "Exit status: 0",
        "2 when a log",
        "or a usage error",
    ] {
        assert!(help.contains(needle), "{needle}: {help}");
    }
}
