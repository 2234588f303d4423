//! Running the scenario files of the workspace's `tests/scenarios/` through
//! `rein scenario run FILE --json` as a process ([`crate::cli::bin`]), and reading what it
//! printed: the lists of the files each scenario test binary runs, the reports with their retry
//! ids masked, the logs read back as JSON.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

/// The `llm-retry` scenario files (`tests/scenarios.rs` runs each).
pub const LLM_RETRY: &[&str] = &[
    "llm-retry-always-accepts-downstream-retry.json",
    "llm-retry-always-any-code.json",
    "llm-retry-always-downstream-crashed.json",
    "llm-retry-budget-exhausted.json",
    "llm-retry-budget-per-step.json",
    "llm-retry-budget-per-turn.json",
    "llm-retry-cancel-during-wait.json",
    "llm-retry-dispose-during-wait.json",
    "llm-retry-no-adapter.json",
    "llm-retry-not-retryable.json",
    "llm-retry-provider-delay-over-cap.json",
    "llm-retry-provider-delay-within-cap.json",
    "llm-retry-rate-limit.json",
    "llm-retry-rejected-append.json",
    "llm-retry-route-policy-wins.json",
];

/// The agent-loop scenario files: tools, steps (`tests/scenarios.rs` runs each).
pub const AGENT_LOOP: &[&str] = &["agent-loop-unknown-tool.json"];

/// The `auto-retry`, `compaction` and whole-chain scenario files (`tests/recovery_scenarios.rs`
/// runs each).
pub const RECOVERY: &[&str] = &[
    "auto-retry-after-route-policy.json",
    "auto-retry-always-mode-accepts-its-retry.json",
    "auto-retry-continues-official-curve.json",
    "auto-retry-disabled-during-wait.json",
    "auto-retry-extra-retries-zero.json",
    "auto-retry-file-empty-codes-is-default.json",
    "auto-retry-file-negative-is-default.json",
    "auto-retry-file-out-of-range-is-clamped.json",
    "auto-retry-file-string-codes-is-default.json",
    "auto-retry-hard-floor.json",
    "auto-retry-official-never-retries.json",
    "auto-retry-opt-in-codes.json",
    "auto-retry-provider-delay-clamped.json",
    "auto-retry-restart-mid-chain.json",
    "auto-retry-update-concurrent-one-wins.json",
    "auto-retry-update-invalid-refused.json",
    "auto-retry-update-stale-revision-refused.json",
    "chain-budgets-add-up.json",
    "compaction-nothing-to-remove.json",
    "compaction-rejected-append.json",
    "compaction-second-overflow-ends-turn.json",
    "compaction-shrinks-and-retries-once.json",
];

/// The `fallback` scenario files (`tests/fallback_scenarios.rs` runs each).
pub const FALLBACK: &[&str] = &[
    "fallback-always-mode-downstream.json",
    "fallback-cancel-during-fallback-attempt.json",
    "fallback-codes-that-never-switch.json",
    "fallback-configure-routes.json",
    "fallback-cooldown.json",
    "fallback-eager-quota.json",
    "fallback-later-steps-stay.json",
    "fallback-rate-limit-after-llm-retry.json",
    "fallback-rejected-switch.json",
    "fallback-retry-after-over-max-wait.json",
    "fallback-same-history.json",
    "fallback-two-routes-in-order.json",
];

/// The folder of the scenario files (the workspace's `tests/scenarios`).
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios")
}

/// Runs `tests/scenarios/<name>` with `--json`: exit 0, one JSON line, nothing on stderr, a
/// clean invariant verdict; returns the report with retry ids masked.
pub fn run(name: &str) -> Value {
    let (report, stderr) = run_with(name, &[]);
    assert_eq!(stderr, "", "{name}: nothing to note, no panic message");
    report
}

/// [`run`], also writing the session log (`--log`); returns the report and the log's events.
pub fn run_with_log(name: &str) -> (Value, Vec<Value>) {
    let (report, events, stderr) = run_with_log_and_stderr(name);
    assert_eq!(stderr, "", "{name}: nothing to note, no panic message");
    (report, events)
}

/// [`run_with_log`], returning what was printed on stderr instead of requiring it empty.
pub fn run_with_log_and_stderr(name: &str) -> (Value, Vec<Value>, String) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("session.jsonl");
    let (report, stderr) = run_with(name, &["--log", log.to_str().unwrap()]);
    let text = std::fs::read_to_string(&log).unwrap();
    let events = text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    (report, events, stderr)
}

/// Runs the file with `--json` and `extra` arguments: exit 0, one JSON line, a clean invariant
/// verdict; returns the report (retry ids masked) and stderr.
pub fn run_with(name: &str, extra: &[&str]) -> (Value, String) {
    let file = dir().join(name);
    let out = Command::new(crate::cli::bin())
        .args(["scenario", "run", file.to_str().unwrap(), "--json"])
        .args(extra)
        .output()
        .expect("rein runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{name}: {stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "{name}: one JSON object on one line");
    let mut report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["invariant"], json!({"ok": true, "violations": []}), "{name}");
    mask_retry_ids(&mut report);
    (report, stderr)
}

/// Replaces each retry id by `#n` (n = order of first appearance) after checking it is a UUID
/// v4, so reports compare exactly while a chain's id stays visibly the same.
pub fn mask_retry_ids(report: &mut Value) {
    let mut seen: Vec<String> = Vec::new();
    for list in ["retries", "retriesStarted"] {
        for row in report[list].as_array_mut().unwrap() {
            let id = row["retryId"].as_str().unwrap().to_owned();
            let parsed = uuid::Uuid::parse_str(&id).unwrap();
            assert_eq!(parsed.get_version_num(), 4, "{id} is a UUID v4");
            let n = match seen.iter().position(|s| *s == id) {
                Some(i) => i + 1,
                None => {
                    seen.push(id);
                    seen.len()
                }
            };
            row["retryId"] = json!(format!("#{n}"));
        }
    }
}

/// `(atMs, attempt)` of every request.
pub fn requests(report: &Value) -> Vec<(u64, u64)> {
    report["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["atMs"].as_u64().unwrap(), r["attempt"].as_u64().unwrap()))
        .collect()
}

/// The `type` of every event of a log read back as JSON.
pub fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}
