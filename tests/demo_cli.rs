//! `rein demo` — the README's main job — run as a process: it must run on a fresh machine with
//! no key and no server, recover the scripted failures with `llm-retry`, and leave a log that
//! `rein check` accepts.

#![allow(clippy::unwrap_used)]

use std::process::Command;

use serde_json::Value;

fn rein(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rein")).args(args).output().expect("rein runs")
}

#[test]
fn the_demo_recovers_retries_writes_a_log_and_the_log_checks_clean() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("demo.jsonl");
    let out = rein(&["demo", "--json", "--log", log.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();

    let kinds: Vec<&str> = report["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["reason"]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["completed", "error", "completed"], "turn 2 fails AUTH, turn 3 retries it");
    assert_eq!(report["turns"][1]["reason"]["failure"]["code"], "AUTH");

    let retries = report["retries"].as_array().unwrap();
    let codes: Vec<&str> = retries.iter().map(|r| r["code"].as_str().unwrap()).collect();
    assert_eq!(codes, ["RATE_LIMIT", "SERVER"], "AUTH is never retried by llm-retry");
    assert_eq!(retries[0]["delayMs"], 1500, "the provider's delay is used verbatim");
    assert_eq!(retries[0]["retryId"], retries[1]["retryId"], "one chain within the step");
    assert_eq!(report["invariant"]["ok"], true);

    let check = rein(&["check", log.to_str().unwrap()]);
    assert_eq!(check.status.code(), Some(0), "{}", String::from_utf8_lossy(&check.stdout));
}

#[test]
fn the_demo_summary_says_where_the_log_is() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("d.jsonl");
    let out = rein(&["demo", "--log", log.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("invariant: ok"), "{stdout}");
    assert!(stdout.contains(&format!("session log: {}", log.display())), "{stdout}");
    assert!(log.exists());
}
