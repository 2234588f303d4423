//! The scenario files of `tests/scenarios/` for `fallback`, one per behaviour, run through
//! `rein scenario run FILE --json --log PATH` as a process. Each asserts the behaviour in the
//! report (which route each request went to, when, and every retry) and, for the switches
//! themselves, in the session log; every run's invariant verdict must be clean (it includes the
//! `route/switched` rules).

#![allow(clippy::unwrap_used)]

use rein_testkit::scenario_files::run_with_log;
use serde_json::{Value, json};

/// `(atMs, turn, step, attempt, provider)` of every request.
fn requests(report: &Value) -> Vec<(u64, u64, u64, u64, String)> {
    report["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["atMs"].as_u64().unwrap(),
                r["turn"].as_u64().unwrap(),
                r["step"].as_u64().unwrap(),
                r["attempt"].as_u64().unwrap(),
                r["provider"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn at(ms: u64, turn: u64, step: u64, attempt: u64, provider: &str) -> (u64, u64, u64, u64, String) {
    (ms, turn, step, attempt, provider.to_owned())
}

/// `(time, data)` of every `route/switched` of the log.
fn switches(events: &[Value]) -> Vec<(u64, Value)> {
    events
        .iter()
        .filter(|e| e["type"] == "route/switched")
        .map(|e| (e["time"].as_u64().unwrap(), e["data"].clone()))
        .collect()
}

fn switch(turn: u64, from: &str, to: &str, code: &str, reason: &str) -> Value {
    json!({"turn": turn, "step": 1, "from": from, "to": to, "code": code, "reason": reason})
}

/// The `model` of every `request/start` of the log.
fn models(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .filter(|e| e["type"] == "request/start")
        .map(|e| e["data"]["model"].as_str().unwrap())
        .collect()
}

/// How each turn ended: `completed`, `aborted`, or the failure's code.
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

#[test]
fn an_eager_quota_switches_on_the_first_failure_with_no_llm_retry() {
    let (report, events) = run_with_log("fallback-eager-quota.json");
    assert_eq!(endings(&report), ["completed"]);
    assert_eq!(requests(&report), [at(0, 1, 1, 1, "main"), at(0, 1, 1, 2, "backup")]);
    assert_eq!(models(&events), ["main-model", "backup-model"], "another provider and model");
    assert_eq!(report["retries"], json!([]), "the rest of the chain was never asked");
    assert_eq!(switches(&events), [(0, switch(1, "main", "backup", "QUOTA", "eager"))]);
    assert_eq!(
        report["messages"],
        json!([{"role": "user", "text": "hello"},
               {"role": "assistant", "text": "answered by the backup"}])
    );
}

#[test]
fn a_rate_limit_is_retried_by_llm_retry_first_and_switches_when_its_budget_is_spent() {
    let (report, events) = run_with_log("fallback-rate-limit-after-llm-retry.json");
    assert_eq!(endings(&report), ["completed"]);
    let retries: Vec<(u64, &str, u64, u64)> = report["retries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["atMs"].as_u64().unwrap(),
                r["provider"].as_str().unwrap(),
                r["retry"].as_u64().unwrap(),
                r["delayMs"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        retries,
        [(0, "main", 1, 500), (500, "main", 2, 1000), (1500, "backup", 1, 500)],
        "main's budget first; the backup's chain starts fresh at retry 1"
    );
    assert_ne!(report["retries"][1]["retryId"], report["retries"][2]["retryId"]);
    assert_eq!(switches(&events), [(1500, switch(1, "main", "backup", "RATE_LIMIT", "exhausted"))]);
    assert_eq!(
        requests(&report),
        [
            at(0, 1, 1, 1, "main"),
            at(500, 1, 1, 2, "main"),
            at(1500, 1, 1, 3, "main"),
            at(1500, 1, 1, 4, "backup"),
            at(2000, 1, 1, 5, "backup"),
        ]
    );
}

#[test]
fn a_retry_after_over_max_wait_ms_switches_at_once() {
    let (report, events) = run_with_log("fallback-retry-after-over-max-wait.json");
    assert_eq!(endings(&report), ["completed"]);
    assert_eq!(report["retries"], json!([]), "the route's policy would have waited 45 s");
    assert_eq!(switches(&events), [(0, switch(1, "main", "backup", "RATE_LIMIT", "delay"))]);
    assert_eq!(report["endMs"], 0);
}

#[test]
fn two_fallbacks_are_used_in_order_and_never_twice_in_one_step() {
    let (report, events) = run_with_log("fallback-two-routes-in-order.json");
    assert_eq!(
        requests(&report),
        [at(0, 1, 1, 1, "main"), at(0, 1, 1, 2, "b1"), at(0, 1, 1, 3, "b2")],
        "main is listed among the routes but was asked in this step already"
    );
    assert_eq!(
        switches(&events),
        [
            (0, switch(1, "main", "b1", "QUOTA", "eager")),
            (0, switch(1, "b1", "b2", "QUOTA", "eager"))
        ]
    );
    assert_eq!(report["turns"][0]["reason"]["failure"]["message"], "b2: out of credit");
}

#[test]
fn a_cooling_route_is_skipped_and_used_again_after_the_cooldown() {
    let (report, events) = run_with_log("fallback-cooldown.json");
    assert_eq!(endings(&report), ["completed", "completed", "completed"]);
    assert_eq!(
        requests(&report),
        [
            at(0, 1, 1, 1, "main"),
            at(0, 1, 1, 2, "b1"),
            at(0, 1, 1, 3, "b2"),
            // b1 was rate limited in turn 1: it cools down for 60 s and is skipped.
            at(0, 2, 1, 1, "main"),
            at(0, 2, 1, 2, "b2"),
            // Turn 3's first attempt takes 60 s: b1 is back.
            at(0, 3, 1, 1, "main"),
            at(60000, 3, 1, 2, "b1"),
        ]
    );
    assert_eq!(
        switches(&events),
        [
            (0, switch(1, "main", "b1", "QUOTA", "eager")),
            (0, switch(1, "b1", "b2", "RATE_LIMIT", "exhausted")),
            (0, switch(2, "main", "b2", "QUOTA", "eager")),
            (60000, switch(3, "main", "b1", "QUOTA", "eager")),
        ]
    );
}

#[test]
fn a_code_outside_codes_and_the_hard_floor_never_switch() {
    let (report, events) = run_with_log("fallback-codes-that-never-switch.json");
    assert_eq!(endings(&report), ["INVALID_REQUEST", "AUTH", "CONTEXT_WINDOW_EXCEEDED", "ABORTED"]);
    assert!(requests(&report).iter().all(|r| r.4 == "main"), "the backup is never asked");
    assert_eq!(switches(&events), []);
}

#[test]
fn cancelling_during_the_fallback_attempt_ends_the_turn_aborted() {
    let (report, events) = run_with_log("fallback-cancel-during-fallback-attempt.json");
    assert_eq!(
        report["turns"],
        json!([{"turn": 1, "reason": {"kind": "aborted", "cause": {"kind": "user"}}}])
    );
    assert_eq!(requests(&report), [at(0, 1, 1, 1, "main"), at(0, 1, 1, 2, "backup")]);
    assert_eq!(switches(&events).len(), 1);
    assert_eq!(report["endMs"], 1000);
}

#[test]
fn the_fallback_attempt_is_built_from_the_same_history() {
    let (report, events) = run_with_log("fallback-same-history.json");
    assert_eq!(endings(&report), ["completed", "completed"]);
    assert_eq!(
        report["messages"],
        json!([
            {"role": "user", "text": "first question"},
            {"role": "assistant", "text": "first answer"},
            {"role": "user", "text": "second question"},
            {"role": "assistant", "text": "second answer, from the backup"}
        ]),
        "the failed draft never reached the history"
    );
    assert_eq!(models(&events), ["main-model", "main-model", "backup-model"]);
}

#[test]
fn the_turns_later_steps_stay_on_the_fallback_and_the_next_turn_starts_on_its_own_route() {
    let (report, _) = run_with_log("fallback-later-steps-stay.json");
    assert_eq!(endings(&report), ["completed", "completed"]);
    assert_eq!(
        requests(&report),
        [
            at(0, 1, 1, 1, "main"),
            at(0, 1, 1, 2, "backup"),
            at(0, 1, 2, 1, "backup"),
            at(0, 2, 1, 1, "main"),
        ]
    );
}

#[test]
fn llm_retry_in_always_mode_passes_a_downstream_switch_on() {
    let (report, events) = run_with_log("fallback-always-mode-downstream.json");
    assert_eq!(endings(&report), ["completed"]);
    assert_eq!(report["retries"], json!([]), "it accepted the downstream retry, writing nothing");
    assert_eq!(switches(&events), [(0, switch(1, "main", "backup", "SERVER", "exhausted"))]);
    assert_eq!(requests(&report), [at(0, 1, 1, 1, "main"), at(0, 1, 1, 2, "backup")]);
}

#[test]
fn a_switch_the_log_refuses_retries_nothing() {
    let (report, events) = run_with_log("fallback-rejected-switch.json");
    assert_eq!(endings(&report), ["QUOTA"]);
    assert_eq!(requests(&report), [at(0, 1, 1, 1, "main")]);
    assert_eq!(switches(&events), []);
}

#[test]
fn routes_are_patched_at_run_time_and_an_unknown_route_or_a_hard_floor_code_is_refused() {
    let (report, events) = run_with_log("fallback-configure-routes.json");
    assert_eq!(endings(&report), ["completed", "completed"]);
    assert_eq!(
        report["configErrors"],
        json!([
            {"atMs": 150, "plugin": "fallback",
             "error": "routes[1]: no provider route named \"nowhere\" is served (served: b1, b2, main)"},
            {"atMs": 150, "plugin": "fallback",
             "error": "codes[1]: AUTH never switches (hard floor) and cannot be listed"}
        ])
    );
    assert_eq!(
        requests(&report),
        [
            at(0, 1, 1, 1, "main"),
            at(100, 1, 1, 2, "b1"),
            at(200, 2, 1, 1, "main"),
            at(300, 2, 1, 2, "b2"),
        ]
    );
    let changed: Vec<&Value> =
        events.iter().filter(|e| e["type"] == "config/changed").map(|e| &e["data"]).collect();
    assert_eq!(changed, [&json!({"plugin": "fallback", "revision": 1, "changed": ["routes"]})]);
}
