//! The scenario files of `tests/scenarios/`, one per retry or agent-loop behaviour, run through
//! `rein scenario run FILE --json` as a process. Each test asserts the whole report (retry ids
//! masked as `#1`, `#2`… in order of appearance: they are UUID v4s drawn from the scenario's seed,
//! equal on every run but unreadable in an expectation) and its invariant verdict. The files of
//! `llm-retry` and the agent loop are run here, those of `auto-retry`,
//! `compaction` and the whole chain are run by `tests/recovery_scenarios.rs`, those of `fallback`
//! by `tests/fallback_scenarios.rs`.

// Helpers outside `#[test]` functions panic on purpose, like the tests themselves.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use rein_testkit::scenario_files::{
    AGENT_LOOP, FALLBACK, LLM_RETRY, RECOVERY, dir, requests, run, run_with_log,
};
use serde_json::{Value, json};

const DEFAULT_FLAT: &str =
    r#"["normal",2,["RATE_LIMIT","SERVER","TIMEOUT","TRANSPORT"],500,10000,0]"#;

#[test]
fn every_scenario_file_is_run_by_a_test() {
    let on_disk: BTreeSet<String> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".json"))
        .collect();
    let listed: BTreeSet<String> = LLM_RETRY
        .iter()
        .chain(AGENT_LOOP)
        .chain(RECOVERY)
        .chain(FALLBACK)
        .map(|f| (*f).to_owned())
        .collect();
    assert_eq!(on_disk, listed);
}

#[test]
fn a_retried_rate_limit_is_recorded_before_the_wait_and_retried_delay_ms_later() {
    let report = run("llm-retry-rate-limit.json");
    assert_eq!(report["turns"], json!([{"turn": 1, "reason": {"kind": "completed"}}]));
    assert_eq!(requests(&report), [(0, 1), (500, 2)], "exactly delayMs later");
    assert_eq!(
        report["retries"],
        json!([{"atMs": 0, "turn": 1, "step": 1, "plugin": "llm-retry", "retryId": "#1",
                "retry": 1, "maxRetries": 2, "mode": "normal", "policyKey": DEFAULT_FLAT,
                "delayMs": 500, "code": "RATE_LIMIT", "provider": "mock"}]),
        "scheduled at 0, before the wait"
    );
    assert_eq!(report["retriesStarted"], json!([{"atMs": 500, "retryId": "#1", "retry": 1}]));
    assert_eq!(
        report["messages"],
        json!([{"role": "user", "text": "hello"}, {"role": "assistant", "text": "done"}]),
        "the failed attempt's chunks never reach the history"
    );
    assert_eq!(report["endMs"], 500);
}

#[test]
fn budget_exhaustion_ends_the_turn_with_the_last_failure() {
    let report = run("llm-retry-budget-exhausted.json");
    assert_eq!(
        report["turns"],
        json!([{"turn": 1, "reason": {"kind": "error",
                "failure": {"code": "SERVER", "message": "busy three", "status": 503}}}])
    );
    assert_eq!(requests(&report), [(0, 1), (500, 2), (1500, 3)]);
    let retries: Vec<(Value, Value, Value, Value)> = report["retries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (r["retry"].clone(), r["delayMs"].clone(), r["code"].clone(), r["retryId"].clone())
        })
        .collect();
    assert_eq!(
        retries,
        [
            (json!(1), json!(500), json!("SERVER"), json!("#1")),
            (json!(2), json!(1000), json!("TIMEOUT"), json!("#1")),
        ]
    );
    assert_eq!(report["endMs"], 1500);
}

#[test]
fn a_provider_delay_within_the_cap_is_used_verbatim() {
    let report = run("llm-retry-provider-delay-within-cap.json");
    assert_eq!(report["turns"], json!([{"turn": 1, "reason": {"kind": "completed"}}]));
    // Retry 1 waits the provider's 2000 (no jitter, no sample); retry 2 has no hint and takes
    // the file's first sample (r = 1): 1000 · (1 − 0.1 + 0.2) = 1100.
    let delays: Vec<&Value> =
        report["retries"].as_array().unwrap().iter().map(|r| &r["delayMs"]).collect();
    assert_eq!(delays, [&json!(2000), &json!(1100)]);
    assert_eq!(requests(&report), [(0, 1), (2000, 2), (3100, 3)]);
}

#[test]
fn an_over_cap_provider_delay_delegates_with_no_event_and_no_timer() {
    let report = run("llm-retry-provider-delay-over-cap.json");
    assert_eq!(report["turns"][0]["reason"]["failure"]["code"], "RATE_LIMIT");
    assert_eq!(
        (report["retries"].clone(), report["retriesStarted"].clone()),
        (json!([]), json!([]))
    );
    assert_eq!(requests(&report), [(0, 1)]);
    assert_eq!(report["endMs"], 0, "no timer");
}

#[test]
fn a_non_retryable_code_delegates_without_a_timer() {
    let report = run("llm-retry-not-retryable.json");
    assert_eq!(
        report["turns"],
        json!([{"turn": 1, "reason": {"kind": "error",
                "failure": {"code": "AUTH", "message": "bad key", "status": 401}}}])
    );
    assert_eq!(report["retries"], json!([]));
    assert_eq!(report["endMs"], 0);
}

#[test]
fn a_new_step_restarts_the_budget_with_a_new_retry_id() {
    let report = run("llm-retry-budget-per-step.json");
    assert_eq!(report["turns"], json!([{"turn": 1, "reason": {"kind": "completed"}}]));
    let retries: Vec<(Value, Value, Value)> = report["retries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["step"].clone(), r["retry"].clone(), r["retryId"].clone()))
        .collect();
    assert_eq!(retries, [(json!(1), json!(1), json!("#1")), (json!(2), json!(1), json!("#2"))]);
}

#[test]
fn a_manual_retry_is_a_new_turn_with_a_fresh_budget() {
    let report = run("llm-retry-budget-per-turn.json");
    assert_eq!(report["turns"][0]["reason"]["failure"]["message"], "turn one, second");
    assert_eq!(report["turns"][1], json!({"turn": 2, "reason": {"kind": "completed"}}));
    let retries: Vec<(Value, Value, Value)> = report["retries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["turn"].clone(), r["retry"].clone(), r["retryId"].clone()))
        .collect();
    assert_eq!(retries, [(json!(1), json!(1), json!("#1")), (json!(2), json!(1), json!("#2"))]);
    assert_eq!(requests(&report), [(0, 1), (500, 2), (1000, 1), (1500, 2)]);
}

#[test]
fn the_configuration_is_the_default_route_policy_and_a_declared_policy_wins() {
    let report = run("llm-retry-route-policy-wins.json");
    assert_eq!(report["turns"][0]["reason"]["failure"]["message"], "plain two");
    assert_eq!(report["turns"][1]["reason"], json!({"kind": "completed"}));
    let retries: Vec<(Value, Value, Value, Value)> = report["retries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["provider"].clone(),
                r["retry"].clone(),
                r["maxRetries"].clone(),
                r["delayMs"].clone(),
            )
        })
        .collect();
    assert_eq!(
        retries,
        [
            (json!("plain"), json!(1), json!(1), json!(100)),
            (json!("declared"), json!(1), json!(3), json!(500)),
            (json!("declared"), json!(2), json!(3), json!(1000)),
            (json!("declared"), json!(3), json!(3), json!(2000)),
        ]
    );
    assert_eq!(
        report["retries"][0]["policyKey"],
        r#"["normal",1,["RATE_LIMIT","SERVER","TIMEOUT","TRANSPORT"],100,10000,0]"#
    );
    assert_eq!(
        report["retries"][1]["policyKey"],
        r#"["normal",3,["RATE_LIMIT","SERVER","TIMEOUT","TRANSPORT"],500,10000,0]"#
    );
}

#[test]
fn always_mode_retries_any_code_without_max_retries() {
    let report = run("llm-retry-always-any-code.json");
    assert_eq!(report["turns"], json!([{"turn": 1, "reason": {"kind": "completed"}}]));
    let key = r#"["always",500,10000,0]"#;
    let row = |at: u64, retry: u64, delay: u64, code: &str| {
        json!({"atMs": at, "turn": 1, "step": 1, "plugin": "llm-retry", "retryId": "#1",
               "retry": retry, "mode": "always", "policyKey": key, "delayMs": delay,
               "code": code, "provider": "mock"})
    };
    assert_eq!(
        report["retries"],
        json!([
            row(0, 1, 500, "AUTH"),
            row(500, 2, 1000, "INVALID_REQUEST"),
            // An over-cap provider delay falls back to the backoff instead of delegating.
            row(1500, 3, 2000, "RATE_LIMIT"),
            // One within the cap is used verbatim.
            row(3500, 4, 7, "HTTP_418"),
        ])
    );
    assert_eq!(requests(&report), [(0, 1), (500, 2), (1500, 3), (3500, 4), (3507, 5)]);
}

#[test]
fn cancelling_during_the_wait_ends_the_turn_aborted_without_a_start() {
    let report = run("llm-retry-cancel-during-wait.json");
    assert_eq!(
        report["turns"],
        json!([{"turn": 1, "reason": {"kind": "aborted", "cause": {"kind": "user"}}}])
    );
    assert_eq!(report["retries"].as_array().unwrap().len(), 1);
    assert_eq!(report["retriesStarted"], json!([]));
    assert_eq!(requests(&report), [(0, 1)]);
    assert_eq!(report["endMs"], 100, "no timer outlived the cancel");
}

#[test]
fn disposing_during_the_wait_ends_the_turn_with_its_failure_after_one_request() {
    let report = run("llm-retry-dispose-during-wait.json");
    assert_eq!(
        report["turns"],
        json!([{"turn": 1, "reason": {"kind": "error", "failure": {"code": "SERVER", "message": "down"}}}])
    );
    assert_eq!(report["retries"].as_array().unwrap().len(), 1);
    assert_eq!(report["retriesStarted"], json!([]));
    assert_eq!(requests(&report), [(0, 1)]);
    assert_eq!(report["endMs"], 100);
}

/// `request/start` rows of turn 1, step 1 on `provider`, as `(atMs, attempt)`.
fn request_rows(provider: &str, rows: &[(u64, u64)]) -> Value {
    rows.iter()
        .map(|(at, attempt)| {
            json!({"atMs": at, "turn": 1, "step": 1, "attempt": attempt, "provider": provider})
        })
        .collect()
}

#[test]
fn no_policy_when_no_adapter_served_the_attempt_so_llm_retry_delegates() {
    let report = run("llm-retry-no-adapter.json");
    // No adapter serves `ghost`: each attempt fails with NO_ADAPTER and no policy. llm-retry
    // delegates (Next, not Stop): the scripted plugin behind it answers its one `retry`, then
    // `next`, and the end of the chain stops. No llm/retry at any point.
    let failure = json!({"code": "NO_ADAPTER", "message": "no provider route named \"ghost\""});
    assert_eq!(
        report,
        json!({
            "turns": [{"turn": 1, "reason": {"kind": "error", "failure": failure}}],
            "requests": request_rows("ghost", &[(0, 1), (0, 2)]),
            "retries": [],
            "retriesStarted": [],
            "configErrors": [],
            "messages": [{"role": "user", "text": "hello"}],
            "invariant": {"ok": true, "violations": []},
            "events": 11,
            "endMs": 0
        })
    );
}

#[test]
fn always_mode_accepts_a_downstream_retry_and_writes_nothing() {
    let report = run("llm-retry-always-accepts-downstream-retry.json");
    // Attempt 1: downstream answers `retry`; llm-retry accepts it, writes nothing, and attempt 2
    // follows at once. Attempt 2: downstream has nothing more to say (`next`, then the end of the
    // chain stops), so llm-retry schedules its own retry 1 — the only llm/retry of the run.
    assert_eq!(
        report,
        json!({
            "turns": [{"turn": 1, "reason": {"kind": "completed"}}],
            "requests": request_rows("mock", &[(0, 1), (0, 2), (500, 3)]),
            "retries": [{"atMs": 0, "turn": 1, "step": 1, "plugin": "llm-retry", "retryId": "#1",
                         "retry": 1, "mode": "always", "policyKey": r#"["always",500,10000,0]"#,
                         "delayMs": 500, "code": "SERVER", "provider": "mock"}],
            "retriesStarted": [{"atMs": 500, "retryId": "#1", "retry": 1}],
            "configErrors": [],
            "messages": [{"role": "user", "text": "hello"}, {"role": "assistant", "text": "done"}],
            "invariant": {"ok": true, "violations": []},
            "events": 16,
            "endMs": 500
        })
    );
}

#[test]
fn always_mode_falls_back_to_its_own_retry_when_downstream_crashes() {
    let (report, events) = run_with_log("llm-retry-always-downstream-crashed.json");
    assert_eq!(
        report,
        json!({
            "turns": [{"turn": 1, "reason": {"kind": "completed"}}],
            "requests": request_rows("mock", &[(0, 1), (500, 2)]),
            "retries": [{"atMs": 0, "turn": 1, "step": 1, "plugin": "llm-retry", "retryId": "#1",
                         "retry": 1, "mode": "always", "policyKey": r#"["always",500,10000,0]"#,
                         "delayMs": 500, "code": "AUTH", "provider": "mock"}],
            "retriesStarted": [{"atMs": 500, "retryId": "#1", "retry": 1}],
            "configErrors": [],
            "messages": [{"role": "user", "text": "hello"}, {"role": "assistant", "text": "done"}],
            "invariant": {"ok": true, "violations": []},
            "events": 15,
            "endMs": 500
        })
    );
    // The report has no row for a crash; the log shows it came first: the scripted plugin
    // crashed while llm-retry consulted it, then llm-retry retried on its own.
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types[5..9], ["request/error", "plugin/crashed", "llm/retry", "llm/retry-started"]);
    assert_eq!(
        events[6]["data"],
        json!({"plugin": "scripted", "error": "scripted crash (failure 1)", "restarts": 1})
    );
}

#[test]
fn a_rejected_append_abandons_the_retry() {
    let report = run("llm-retry-rejected-append.json");
    // The log refuses every llm/retry: llm-retry abandons the retry with Stop (not Next — the
    // scripted plugin behind it, which would retry, is never asked), and the turn ends with the
    // failure after exactly one request, without a timer.
    let failure = json!({"code": "SERVER", "message": "down", "status": 503});
    assert_eq!(
        report,
        json!({
            "turns": [{"turn": 1, "reason": {"kind": "error", "failure": failure}}],
            "requests": request_rows("mock", &[(0, 1)]),
            "retries": [],
            "retriesStarted": [],
            "configErrors": [],
            "messages": [{"role": "user", "text": "hello"}],
            "invariant": {"ok": true, "violations": []},
            "events": 9,
            "endMs": 0
        })
    );
}

#[test]
fn a_call_to_an_unknown_tool_gets_an_error_result_and_the_turn_goes_on() {
    let (report, events) = run_with_log("agent-loop-unknown-tool.json");
    assert_eq!(report["turns"], json!([{"turn": 1, "reason": {"kind": "completed"}}]));
    assert_eq!(requests(&report), [(0, 1), (0, 1), (0, 1)], "three steps, no retry");
    assert_eq!(
        report["messages"],
        json!([
            {"role": "user", "text": "find retry"},
            {"role": "assistant", "text": "let me grep",
             "toolCalls": [{"id": "c1", "name": "grep", "arguments": {"pattern": "retry"}}]},
            {"role": "tool", "id": "c1", "output": "no tool named \"grep\"; available: \"echo\"",
             "isError": true},
            {"role": "assistant", "text": "I have no grep; echo it is",
             "toolCalls": [{"id": "c2", "name": "echo", "arguments": {"text": "retry"}}]},
            {"role": "tool", "id": "c2", "output": "retry", "isError": false},
            {"role": "assistant", "text": "found: retry"}
        ]),
        "the model saw the error, then used the tool it has"
    );
    // The log, read back, passes the invariant crate's checker for a finished log.
    let log: Vec<rein_runtime::event::Envelope> =
        events.into_iter().map(|e| serde_json::from_value(e).unwrap()).collect();
    assert_eq!(rein_invariant::check_finished_log(&log), []);
}
