//! The scenario files of `tests/scenarios/` for `auto-retry`, `compaction` and the whole default
//! chain (`llm-retry`, `compaction`, `auto-retry`), one per behaviour, run through
//! `rein scenario run FILE --json` as a process. Each asserts what the behaviour is about in the
//! report (retry ids masked as `#1`, `#2`… in order of appearance), and, where the report has no
//! row for it, in the `--log`; every run's invariant verdict must be clean (the checker includes
//! the rule that `auto-retry` never retries a hard-floor code).

#![allow(clippy::unwrap_used)]

use rein_testkit::scenario_files::{
    requests, run, run_with, run_with_log, run_with_log_and_stderr, types,
};
use serde_json::{Value, json};

/// `auto-retry`'s policy key with its default settings and `jitterRatio: 0`.
const OWN_FLAT: &str = r#"["auto-retry",3,["EMPTY_RESPONSE","PI_AI_ERROR","PROVIDER_ERROR","RATE_LIMIT","SERVER","STREAM_CLOSED","TIMEOUT","TRANSPORT"],1000,60000,0]"#;

/// `(plugin, retry, delayMs)` of every `llm/retry`.
fn retries(report: &Value) -> Vec<(String, u64, u64)> {
    report["retries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["plugin"].as_str().unwrap().to_owned(),
                r["retry"].as_u64().unwrap(),
                r["delayMs"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn own(retry: u64, delay_ms: u64) -> (String, u64, u64) {
    ("auto-retry".to_owned(), retry, delay_ms)
}

fn official(retry: u64, delay_ms: u64) -> (String, u64, u64) {
    ("llm-retry".to_owned(), retry, delay_ms)
}

/// How each turn ended: `completed`, or the failure's code.
fn endings(report: &Value) -> Vec<String> {
    report["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| match t["reason"]["kind"].as_str().unwrap() {
            "error" => t["reason"]["failure"]["code"].as_str().unwrap().to_owned(),
            other => other.to_owned(),
        })
        .collect()
}

fn warnings(stderr: &str) -> Vec<&str> {
    stderr.lines().collect()
}

// ---- the official curve, continued or not ----------------------------------------------------

#[test]
fn a_code_the_official_executor_never_retries_takes_the_own_curve() {
    let report = run("auto-retry-official-never-retries.json");
    assert_eq!(retries(&report), [own(1, 1000), own(2, 2000), own(3, 4000)]);
    let row = &report["retries"][0];
    assert_eq!(
        (&row["mode"], &row["maxRetries"], &row["policyKey"], &row["retryId"]),
        (&json!("normal"), &json!(3), &json!(OWN_FLAT), &json!("#1"))
    );
    assert!(report["retries"].as_array().unwrap().iter().all(|r| r["retryId"] == "#1"));
    assert_eq!(requests(&report), [(0, 1), (1000, 2), (3000, 3), (7000, 4)]);
    // Then the extra budget is spent: the turn ends with the last failure.
    assert_eq!(report["turns"][0]["reason"]["failure"]["message"], "bad gateway dialect four");
}

#[test]
fn after_the_official_budget_the_official_curve_continues() {
    let report = run("auto-retry-continues-official-curve.json");
    assert_eq!(
        retries(&report),
        [official(1, 500), official(2, 1000), own(1, 2000), own(2, 4000), own(3, 8000)]
    );
    let ids: Vec<&Value> =
        report["retries"].as_array().unwrap().iter().map(|r| &r["retryId"]).collect();
    assert_eq!(
        ids,
        [&json!("#1"), &json!("#1"), &json!("#2"), &json!("#2"), &json!("#2")],
        "two chains"
    );
    assert_eq!(endings(&report), ["RATE_LIMIT"]);
    assert_eq!(report["endMs"], 15500);
}

#[test]
fn after_a_route_policy_of_five_the_curve_is_saturated() {
    let report = run("auto-retry-after-route-policy.json");
    assert_eq!(
        retries(&report)[5..],
        [own(1, 10000), own(2, 10000), own(3, 10000)],
        "the official curve's retries 6, 7, 8, capped at its 10000"
    );
    assert_eq!(retries(&report)[4], official(5, 8000));
    assert_eq!(endings(&report), ["completed"]);
}

// ---- which codes ---------------------------------------------------------------------------------

#[test]
fn the_hard_floor_is_never_retried_even_when_listed() {
    let (report, stderr) = run_with("auto-retry-hard-floor.json", &[]);
    assert_eq!(
        endings(&report),
        [
            "AUTH",
            "MISSING_CREDENTIAL",
            "INVALID_CREDENTIAL",
            "NO_ADAPTER",
            "INVALID_MODEL",
            "INVALID_CONFIG",
            "CONTEXT_WINDOW_EXCEEDED",
            "IMAGE_OFFLOAD_REQUIRED",
            "ABORTED",
            "completed"
        ]
    );
    // Nine failed turns, one attempt each; only the listed SERVER (not in the floor) is retried.
    assert_eq!(retries(&report), [official(1, 500), official(2, 1000), own(1, 2000)]);
    assert!(report["retries"].as_array().unwrap().iter().all(|r| r["code"] == "SERVER"));
    // The configuration keeps the codes as written, and says they have no effect.
    let expected: Vec<String> = [
        "AUTH",
        "MISSING_CREDENTIAL",
        "INVALID_CREDENTIAL",
        "NO_ADAPTER",
        "INVALID_MODEL",
        "INVALID_CONFIG",
        "CONTEXT_WINDOW_EXCEEDED",
        "IMAGE_OFFLOAD_REQUIRED",
        "ABORTED",
    ]
    .iter()
    .enumerate()
    .map(|(i, code)| {
        format!(
            "warning: plugins[1].config.retryableCodes[{}]: {code} is never retried (hard floor); \
             listing it has no effect",
            i + 1
        )
    })
    .collect();
    assert_eq!(warnings(&stderr), expected);
}

#[test]
fn opt_in_codes_are_retried_only_once_listed() {
    let report = run("auto-retry-opt-in-codes.json");
    // Not listed: each of the four ends its turn at once.
    assert_eq!(
        endings(&report),
        ["QUOTA", "ACCOUNT_QUOTA", "INVALID_REQUEST", "UNKNOWN", "completed"]
    );
    // Listed at 100 ms (a run-time update), the manual retry at 200 ms retries every one of them.
    let codes: Vec<&str> =
        report["retries"].as_array().unwrap().iter().map(|r| r["code"].as_str().unwrap()).collect();
    assert_eq!(codes, ["UNKNOWN", "QUOTA", "ACCOUNT_QUOTA", "INVALID_REQUEST"]);
    assert!(report["retries"].as_array().unwrap().iter().all(|r| r["turn"] == 5));
    assert_eq!(report["retries"][0]["atMs"], 200);
    assert_eq!(report["configErrors"], json!([]));
}

#[test]
fn extra_retries_zero_is_inert() {
    let report = run("auto-retry-extra-retries-zero.json");
    assert_eq!(endings(&report), ["PROVIDER_ERROR"]);
    assert_eq!((report["retries"].clone(), requests(&report)), (json!([]), vec![(0, 1)]));
    assert_eq!(report["endMs"], 0, "no timer");
}

// ---- the configuration file, read leniently ----------------------------------------------------

#[test]
fn a_negative_number_in_the_file_is_the_default_not_zero() {
    let (report, _, stderr) = run_with_log_and_stderr("auto-retry-file-negative-is-default.json");
    // extraRetries -1 → 3 (0 would be inert), initialDelayMs -5 → 1000 (0 would retry at once).
    assert_eq!(retries(&report), [own(1, 1000), own(2, 2000), own(3, 4000)]);
    assert_eq!(report["retries"][0]["maxRetries"], 3);
    assert_eq!(endings(&report), ["completed"]);
    assert_eq!(
        warnings(&stderr),
        [
            "warning: plugins[2].config.extraRetries: -1 is negative; using the default 3",
            "warning: plugins[2].config.initialDelayMs: -5 is negative; using the default 1000",
        ]
    );
}

#[test]
fn an_out_of_range_number_in_the_file_is_clamped() {
    let (report, stderr) = run_with("auto-retry-file-out-of-range-is-clamped.json", &[]);
    // extraRetries 99 → 10; maxDelayMs 700000 → 600000, so retry 10 still waits 512000 (the
    // default 60000 would have capped it).
    let delays: Vec<u64> = retries(&report).iter().map(|r| r.2).collect();
    assert_eq!(delays, [1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000, 256000, 512000]);
    assert!(report["retries"].as_array().unwrap().iter().all(|r| r["maxRetries"] == 10));
    assert_eq!(endings(&report), ["PROVIDER_ERROR"]);
    assert_eq!(
        warnings(&stderr),
        [
            "warning: plugins[2].config.extraRetries: 99 is outside 0..=10; clamped to 10",
            "warning: plugins[2].config.maxDelayMs: 700000 is outside 0..=600000; clamped to 600000",
        ]
    );
}

#[test]
fn a_string_instead_of_a_code_list_is_the_default_list() {
    let (report, stderr) = run_with("auto-retry-file-string-codes-is-default.json", &[]);
    // The default list: PROVIDER_ERROR is retried; QUOTA is not (no substring match either).
    assert_eq!(endings(&report), ["completed", "QUOTA"]);
    assert_eq!(retries(&report), [own(1, 1000)]);
    assert_eq!(report["retries"][0]["code"], "PROVIDER_ERROR");
    assert_eq!(
        warnings(&stderr),
        [
            "warning: plugins[2].config.retryableCodes: must be a list of codes, got \"QUOTA\"; using \
          the default EMPTY_RESPONSE, RATE_LIMIT, SERVER, TIMEOUT, TRANSPORT, PROVIDER_ERROR, \
          PI_AI_ERROR, STREAM_CLOSED"
        ]
    );
}

#[test]
fn an_empty_code_list_in_the_file_is_the_default_list() {
    let (report, stderr) = run_with("auto-retry-file-empty-codes-is-default.json", &[]);
    assert_eq!(endings(&report), ["completed"]);
    assert_eq!(retries(&report), [own(1, 1000)]);
    assert_eq!(report["retries"][0]["policyKey"], OWN_FLAT);
    assert_eq!(
        warnings(&stderr),
        ["warning: plugins[2].config.retryableCodes: lists no code; using the default list \
          (EMPTY_RESPONSE, RATE_LIMIT, SERVER, TIMEOUT, TRANSPORT, PROVIDER_ERROR, PI_AI_ERROR, \
          STREAM_CLOSED)"]
    );
}

// ---- run-time updates ----------------------------------------------------------------------------

/// `(atMs, plugin, error)` of every config error.
fn config_errors(report: &Value) -> Vec<(u64, String, String)> {
    report["configErrors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["atMs"].as_u64().unwrap(),
                e["plugin"].as_str().unwrap().to_owned(),
                e["error"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn refused(at_ms: u64, plugin: &str, error: &str) -> (u64, String, String) {
    (at_ms, plugin.to_owned(), error.to_owned())
}

#[test]
fn an_invalid_update_is_refused_naming_the_field_and_changes_nothing() {
    let (report, events) = run_with_log("auto-retry-update-invalid-refused.json");
    assert_eq!(
        config_errors(&report),
        [
            refused(0, "auto-retry", "extraRetries: must be an integer within 0..=10, got 11"),
            refused(0, "auto-retry", "retryableCodes: must list at least one code"),
            refused(
                0,
                "auto-retry",
                "initialDelayMs: must be an integer within 0..=600000, got -1"
            ),
            refused(
                0,
                "auto-retry",
                "retryableCodes[1]: AUTH is never retried (hard floor) and cannot be added"
            ),
            refused(
                0,
                "llm-retry",
                "the settings of plugin llm-retry are read-only at run time: its policy is the \
                 runtime's default route policy, fixed when the runtime is built; change its \
                 configuration and start the runtime again"
            ),
        ]
    );
    // Nothing changed (not even the valid jitterRatio of the refused patch): the defaults retry.
    assert_eq!(retries(&report), [own(1, 1000)]);
    assert_eq!(report["retries"][0]["policyKey"], OWN_FLAT);
    assert!(!types(&events).contains(&"config/changed"));
}

#[test]
fn a_stale_revision_is_refused_and_overwrites_nothing() {
    let (report, events) = run_with_log("auto-retry-update-stale-revision-refused.json");
    assert_eq!(
        config_errors(&report),
        [refused(
            500,
            "auto-retry",
            "stale revision: the patch is based on revision 0, the settings are at 1"
        )]
    );
    // extraRetries stays 1 (the accepted patch), not 5 (the stale one).
    assert_eq!(retries(&report), [own(1, 1000)]);
    assert_eq!(report["retries"][0]["maxRetries"], 1);
    assert_eq!(endings(&report), ["PROVIDER_ERROR"]);
    let changed: Vec<&Value> =
        events.iter().filter(|e| e["type"] == "config/changed").map(|e| &e["data"]).collect();
    assert_eq!(
        changed,
        [&json!({"plugin": "auto-retry", "revision": 1, "changed": ["extraRetries"]})]
    );
}

#[test]
fn of_two_updates_from_one_revision_exactly_one_wins() {
    let (report, events) = run_with_log("auto-retry-update-concurrent-one-wins.json");
    assert_eq!(
        config_errors(&report),
        [refused(
            0,
            "auto-retry",
            "stale revision: the patch is based on revision 0, the settings are at 1"
        )]
    );
    // The winner's field (extraRetries 1) applies; the loser's (initialDelayMs 50) does not.
    assert_eq!(retries(&report), [own(1, 1000)]);
    assert_eq!(report["retries"][0]["maxRetries"], 1);
    let changed: Vec<&Value> =
        events.iter().filter(|e| e["type"] == "config/changed").map(|e| &e["data"]).collect();
    assert_eq!(changed.len(), 1);
}

#[test]
fn switching_off_during_a_wait_ends_the_turn_with_its_failure_at_once() {
    let (report, events) = run_with_log("auto-retry-disabled-during-wait.json");
    assert_eq!(
        report["turns"],
        json!([{"turn": 1, "reason": {"kind": "error",
                "failure": {"code": "PROVIDER_ERROR", "message": "bad gateway", "status": 502}}}])
    );
    assert_eq!(retries(&report), [own(1, 1000)]);
    assert_eq!(report["retriesStarted"], json!([]), "no llm/retry-started");
    assert_eq!(requests(&report), [(0, 1)]);
    assert_eq!(report["endMs"], 400, "at the switch, not at the end of the 1000 ms wait");
    assert_eq!(
        types(&events)[6..],
        ["llm/retry", "config/changed", "step/end", "turn/end", "agent/idle"]
    );
    assert_eq!(
        events[7]["data"],
        json!({"plugin": "auto-retry", "revision": 1, "changed": ["enabled"]})
    );
}

// ---- delays, modes, restarts ---------------------------------------------------------------------

#[test]
fn an_over_cap_provider_delay_is_clamped_to_max_delay_ms() {
    let report = run("auto-retry-provider-delay-clamped.json");
    // llm-retry gives up on a 60 s delay over its 10 s cap; auto-retry waits its own cap, 5 s
    // (no jitter: the provider's delay is used, clamped).
    assert_eq!(retries(&report), [own(1, 5000)]);
    assert_eq!(requests(&report), [(0, 1), (5000, 2)]);
    assert_eq!(endings(&report), ["completed"]);
}

#[test]
fn always_mode_accepts_auto_retrys_retry_and_writes_nothing_itself() {
    let report = run("auto-retry-always-mode-accepts-its-retry.json");
    assert_eq!(
        report["retries"],
        json!([{"atMs": 0, "turn": 1, "step": 1, "plugin": "auto-retry", "retryId": "#1",
                "retry": 1, "maxRetries": 3, "mode": "normal", "policyKey": OWN_FLAT,
                "delayMs": 1000, "code": "PROVIDER_ERROR", "provider": "mock"}]),
        "the only llm/retry is auto-retry's"
    );
    assert_eq!(report["retriesStarted"], json!([{"atMs": 1000, "retryId": "#1", "retry": 1}]));
    assert_eq!(requests(&report), [(0, 1), (1000, 2)]);
    assert_eq!(report["events"], 14);
}

#[test]
fn the_own_count_continues_across_restarts_of_the_plugins_actor() {
    let report = run("auto-retry-restart-mid-chain.json");
    // The actor is crashed (and restarted by its supervisor) at 1200 and 3700 ms, between
    // failures: each new incarnation reads the chain from the log and continues it.
    assert_eq!(retries(&report), [own(1, 1000), own(2, 2000), own(3, 4000)]);
    assert!(report["retries"].as_array().unwrap().iter().all(|r| r["retryId"] == "#1"));
    assert_eq!(requests(&report), [(0, 1), (1000, 2), (3500, 3), (8000, 4)]);
    assert_eq!(endings(&report), ["PROVIDER_ERROR"], "and its budget of 3 is spent");
}

// ---- compaction ------------------------------------------------------------------------------------

#[test]
fn compaction_shrinks_the_history_and_retries_once() {
    let (report, events) = run_with_log("compaction-shrinks-and-retries-once.json");
    assert_eq!(endings(&report), ["completed", "completed", "completed"]);
    // Turn 3's first attempt overflowed; compaction dropped turn 1 (its tool call and result
    // with it) and retried at once, writing no llm/retry.
    assert_eq!(report["retries"], json!([]));
    let turn3: Vec<(u64, u64)> = report["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["turn"] == 3)
        .map(|r| (r["atMs"].as_u64().unwrap(), r["attempt"].as_u64().unwrap()))
        .collect();
    assert_eq!(turn3, [(0, 1), (0, 2)]);
    let compacted: Vec<&Value> =
        events.iter().filter(|e| e["type"] == "context/compacted").map(|e| &e["data"]).collect();
    // Dropped: turn 1's question (seq 1), its tool-calling answer, the call and the result
    // (6, 7, 8: one unit) and the answer that followed (13). Kept: turn 2's question and answer,
    // turn 3's question.
    let seqs: Vec<&Value> = [1, 6, 7, 8, 13].iter().map(|seq| &events[*seq]["type"]).collect();
    assert_eq!(
        seqs,
        ["user/message", "assistant/message", "tool/call", "tool/result", "assistant/message"]
    );
    assert_eq!(compacted, [&json!({"turn": 3, "step": 1, "removed": [1, 6, 7, 8, 13], "kept": 3})]);
    assert_eq!(
        report["messages"],
        json!([
            {"role": "user", "text": "Second question"},
            {"role": "assistant", "text": "Second answer"},
            {"role": "user", "text": "Third question"},
            {"role": "assistant", "text": "Third answer, with room to spare"},
        ])
    );
}

#[test]
fn compaction_does_not_retry_when_nothing_can_be_removed() {
    let (report, events) = run_with_log("compaction-nothing-to-remove.json");
    assert_eq!(endings(&report), ["CONTEXT_WINDOW_EXCEEDED"]);
    assert_eq!(requests(&report), [(0, 1)]);
    assert!(!types(&events).contains(&"context/compacted"));
    assert_eq!(report["retries"], json!([]), "and auto-retry never retries an overflow");
}

#[test]
fn a_second_overflow_in_the_same_turn_ends_it() {
    let (report, events) = run_with_log("compaction-second-overflow-ends-turn.json");
    assert_eq!(endings(&report), ["completed", "completed", "CONTEXT_WINDOW_EXCEEDED"]);
    assert_eq!(report["turns"][2]["reason"]["failure"]["message"], "still over the context window");
    let compactions = types(&events).iter().filter(|t| **t == "context/compacted").count();
    assert_eq!(compactions, 1, "maxOverflowRetries 1 per turn");
    assert_eq!(report["requests"].as_array().unwrap().len(), 4);
}

#[test]
fn a_refused_compaction_stops_the_chain() {
    let report = run("compaction-rejected-append.json");
    // The log refuses context/compacted: compaction answers Stop, so the scripted plugin at the
    // end of the chain, which would retry, is never asked.
    assert_eq!(endings(&report), ["completed", "CONTEXT_WINDOW_EXCEEDED"]);
    assert_eq!(report["requests"].as_array().unwrap().len(), 2);
    assert_eq!(
        report["messages"],
        json!([
            {"role": "user", "text": "First question"},
            {"role": "assistant", "text": "First answer"},
            {"role": "user", "text": "Second question"},
        ]),
        "nothing was removed"
    );
}

// ---- the whole chain -----------------------------------------------------------------------------

#[test]
fn the_budgets_of_the_three_plugins_add_up_in_one_turn() {
    let (report, events) = run_with_log("chain-budgets-add-up.json");
    assert_eq!(endings(&report), ["completed", "SERVER"]);
    // 2 official retries, then 1 own, then a compaction (no llm/retry), then 2 more own: the
    // budgets are independent, so turn 2 makes 1 + 2 + 1 + 3 = 7 attempts.
    assert_eq!(
        retries(&report),
        [official(1, 500), official(2, 1000), own(1, 2000), own(2, 4000), own(3, 8000)]
    );
    let turn2: Vec<(u64, u64)> = report["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["turn"] == 2)
        .map(|r| (r["atMs"].as_u64().unwrap(), r["attempt"].as_u64().unwrap()))
        .collect();
    assert_eq!(turn2, [(0, 1), (500, 2), (1500, 3), (3500, 4), (3500, 5), (7500, 6), (15500, 7)]);
    let compactions = types(&events).iter().filter(|t| **t == "context/compacted").count();
    assert_eq!(compactions, 1);
    assert_eq!(report["turns"][1]["reason"]["failure"]["message"], "503: six");
}

#[test]
fn rein_codes_prints_the_catalogue_a_settings_page_renders() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rein"))
        .args(["codes", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed, serde_json::to_value(rein::plugins::auto_retry::CATALOGUE).unwrap());
    let never = &printed["groups"][2];
    assert_eq!((&never["group"], &never["retried"]), (&json!("never"), &json!("never")));
    assert_eq!(never["codes"].as_array().unwrap().len(), 10);
}
