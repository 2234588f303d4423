//! What each command does with a session a crash left with an open turn, run as a process: the
//! store holds logs written as a crash leaves them (a turn started, an attempt cut, a retry wait
//! pending); `rein chat --session ID` says it resumed the turn, `rein console` and `rein stress`
//! say how many sessions they resumed at start; afterwards `rein check --finished` accepts
//! every log.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use rein_runtime::event::*;
use rein_runtime::failure::Failure;
use rein_testkit::{cli, console};

/// Writes `DIR/ID.jsonl`: session `id`, a prompt, turn 1 started, an attempt on `provider`
/// begun, and — when `waiting` — failed, with a retry scheduled (its wait never started).
fn crashed_log(dir: &Path, id: &str, provider: &str, waiting: bool) {
    let mut events = vec![
        Event::SessionStart(SessionStart { session: id.into(), format: LOG_FORMAT }),
        Event::UserMessage(UserMessage { text: "hello".into() }),
        Event::TurnStart(TurnStart { turn: 1 }),
        Event::StepStart(StepRef { turn: 1, step: 1 }),
        Event::RequestStart(RequestStart {
            turn: 1,
            step: 1,
            attempt: 1,
            provider: provider.into(),
            model: "m".into(),
        }),
    ];
    if waiting {
        let failure = Failure::new("TRANSPORT", "connection reset").unwrap();
        events.push(Event::RequestError(RequestError {
            turn: 1,
            step: 1,
            attempt: 1,
            provider: provider.into(),
            failure: failure.clone(),
        }));
        events.push(Event::LlmRetry(LlmRetry {
            retry_id: "0f8fad5b-d9cb-469f-a165-70867728950e".into(),
            turn: 1,
            step: 1,
            provider: provider.into(),
            plugin: "llm-retry".into(),
            mode: "normal".into(),
            policy_key: "k".into(),
            retry: 1,
            max_retries: Some(3),
            delay_ms: 200.0,
            failure,
        }));
    }
    let mut text = String::new();
    for (seq, event) in events.into_iter().enumerate() {
        let envelope = Envelope { seq: seq as u64, time: 1_700_000_000_000 + seq as u64, event };
        text.push_str(&serde_json::to_string(&envelope).unwrap());
        text.push('\n');
    }
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(format!("{id}.jsonl")), text).unwrap();
}

/// `rein check --finished` on every log of `dir`: it must accept them all.
fn check_finished(cwd: &Path, dir: &Path) {
    let mut logs: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path().to_str().unwrap().to_owned())
        .filter(|p| p.ends_with(".jsonl"))
        .collect();
    logs.sort();
    assert!(!logs.is_empty());
    let mut args = vec!["check", "--finished"];
    args.extend(logs.iter().map(String::as_str));
    let run = cli::rein(cwd, &args, &[], "");
    assert_eq!(run.code, Some(0), "{run:?}");
}

/// The number of `turn/start`s in `DIR/ID.jsonl`.
fn turns(dir: &Path, id: &str) -> usize {
    let log = rein_runtime::store::jsonl::read_log(&dir.join(format!("{id}.jsonl"))).unwrap();
    log.events.iter().filter(|e| e.kind() == "turn/start").count()
}

#[test]
fn rein_chat_on_a_session_with_an_open_turn_resumes_it_before_the_prompt_and_says_so() {
    let cwd = tempfile::tempdir().unwrap();
    let store = cwd.path().join("sessions");
    crashed_log(&store, "waiting", "simulated", true);
    crashed_log(&store, "cut", "simulated", false);
    let store_arg = store.to_str().unwrap();
    let run = cli::rein(
        cwd.path(),
        &["chat", "--store", store_arg, "--session", "waiting", "--seed", "7", "again"],
        &[],
        "",
    );
    assert!(
        run.stderr.contains("resumed turn 1 of session waiting (it was waiting for a retry)"),
        "{run:?}"
    );
    assert!(run.stderr.contains("session waiting (resumed, 1 turn)"), "{run:?}");
    assert_eq!(turns(&store, "waiting"), 2, "the resumed turn, then the prompt's");
    // The resumed turn's answer is shown (the simulated model quotes its prompt), then the
    // prompt's.
    let resumed = run.stdout.find("“hello”");
    let prompted = run.stdout.find("“again”");
    assert!(resumed.is_some() && prompted.is_some() && resumed < prompted, "{run:?}");
    let run = cli::rein(
        cwd.path(),
        &["chat", "--store", store_arg, "--session", "cut", "--seed", "7", "x"],
        &[],
        "",
    );
    assert!(run.stderr.contains("resumed turn 1 of session cut\n"), "{run:?}");
    // A session without an open turn says nothing of the kind.
    let again = cli::rein(
        cwd.path(),
        &["chat", "--store", store_arg, "--session", "cut", "--seed", "7", "y"],
        &[],
        "",
    );
    assert!(!again.stderr.contains("resumed turn"), "{again:?}");
    check_finished(cwd.path(), &store);
}

#[test]
fn rein_console_resumes_every_pending_session_at_start() {
    let cwd = tempfile::tempdir().unwrap();
    let store = cwd.path().join("sessions");
    crashed_log(&store, "a", "simulated", true);
    crashed_log(&store, "b", "simulated", false);
    let console = console::Console::start(
        cwd.path(),
        &["--store", store.to_str().unwrap(), "--seed", "3"],
        &[],
    );
    let line = "rein console: resumed 2 sessions a crash had left with an open turn (1 was waiting for a retry)";
    assert!(console.wait_for_stderr(line, Duration::from_secs(30)), "{}", console.stderr());
    let (code, stderr) = console.stop();
    assert_eq!(code, Some(0), "{stderr}");
    check_finished(cwd.path(), &store);

    // Started again: nothing is pending any more.
    let console = console::Console::start(
        cwd.path(),
        &["--store", store.to_str().unwrap(), "--seed", "3"],
        &[],
    );
    let none = "rein console: no session had an open turn to resume";
    assert!(console.wait_for_stderr(none, Duration::from_secs(30)), "{}", console.stderr());
    console.stop();
}

#[test]
fn rein_stress_on_a_reopened_dir_resumes_what_a_crash_left_open() {
    let cwd = tempfile::tempdir().unwrap();
    let dir = cwd.path().join("jsonl");
    crashed_log(&dir, "agent-00000", "simulated", true);
    crashed_log(&dir, "agent-00001", "simulated", false);
    let dir_arg = dir.to_str().unwrap();
    let args =
        ["stress", "--agents", "2", "--turns", "1", "--store", "jsonl", "--dir", dir_arg, "--json"];
    let run = cli::rein(cwd.path(), &args, &[], "");
    assert_eq!(run.code, Some(0), "{run:?}");
    let summary: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(summary["resumed"], 2, "{summary}");
    assert_eq!(summary["tally"]["violations"], 0, "{summary}");
    check_finished(cwd.path(), &dir);
    let again = cli::rein(cwd.path(), &args, &[], "");
    let summary: serde_json::Value = serde_json::from_str(&again.stdout).unwrap();
    assert_eq!(summary["resumed"], 0, "{summary}");
}
