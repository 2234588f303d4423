//! Table tests of the summary: its rows, manual retries and tool calls read from the log.

use rein::runtime::event::{
    AgentIdle, Envelope, Event, ToolCallEvent, ToolResult, TurnEnd, TurnStart, UserMessage,
};
use rein::runtime::failure::Failure;
use rein_scenario::report::{ConfigErrorRow, InvariantRow, RetryRow, TurnRow, ViolationRow};
use serde_json::json;

use super::*;

fn report() -> Report {
    Report {
        turns: vec![
            TurnRow {
                turn: 1,
                reason: TurnEndReason::Error {
                    failure: Failure::new("SERVER", "busy three").unwrap(),
                },
            },
            TurnRow {
                turn: 2,
                reason: TurnEndReason::Aborted { cause: CancelCause::Hook { reason: "b".into() } },
            },
        ],
        requests: Vec::new(),
        retries: vec![RetryRow {
            at_ms: 30,
            turn: 1,
            step: 1,
            plugin: "llm-retry".into(),
            retry_id: "id".into(),
            retry: 1,
            max_retries: Some(2),
            mode: "normal".into(),
            policy_key: "k".into(),
            delay_ms: 1.5,
            code: "RATE_LIMIT".into(),
            provider: "mock".into(),
        }],
        retries_started: Vec::new(),
        config_errors: vec![ConfigErrorRow {
            at_ms: 100,
            plugin: "auto-retry".into(),
            error: "extraRetries: too big".into(),
        }],
        messages: Vec::new(),
        invariant: InvariantRow {
            ok: false,
            violations: vec![ViolationRow {
                seq: 7,
                kind: "llm/retry".into(),
                rule: "retry-continues-chain".into(),
                message: "retry 3 must equal 2".into(),
            }],
        },
        events: 17,
        end_ms: 1500,
    }
}

#[test]
fn the_summary_names_every_turn_retry_config_error_and_violation() {
    let outcome = RunOutcome {
        report: report(),
        events: Vec::new(),
        notes: Vec::new(),
        warnings: Vec::new(),
    };
    assert_eq!(
        summary("s.json", &outcome),
        "scenario s.json: 2 turns, 0 requests, 1 retry, 17 events, ended at 1500 ms (virtual)\n\
         \x20 turn 1: error SERVER: busy three\n\
         \x20 turn 2: aborted (hook: b)\n\
         \x20 retry 1 by llm-retry at 30 ms: RATE_LIMIT on mock, next attempt after 1.5 ms\n\
         \x20 config error at 100 ms: auto-retry: extraRetries: too big\n\
         \x20 invariant: 1 rule broken\n\
         \x20   llm/retry seq 7: retry 3 must equal 2 [retry-continues-chain]\n"
    );
}

#[test]
fn many_turns_are_tallied_and_only_the_unfinished_ones_listed() {
    let mut report = report();
    report.turns = (1..=30)
        .map(|turn| TurnRow {
            turn,
            reason: if turn % 2 == 0 || turn == 29 {
                TurnEndReason::Completed
            } else {
                TurnEndReason::MaxSteps
            },
        })
        .collect();
    report.retries.clear();
    report.config_errors.clear();
    report.invariant = InvariantRow { ok: true, violations: Vec::new() };
    let text = summary(
        "s.json",
        &RunOutcome { report, events: Vec::new(), notes: Vec::new(), warnings: Vec::new() },
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[1], "  turns: 14 max-steps, 16 completed");
    assert_eq!(lines[2], "  turn 1: max-steps");
    assert_eq!(lines[11], "  turn 19: max-steps");
    assert_eq!(lines[12], "  … and 4 more");
    assert_eq!(lines[13], "  invariant: ok");
    assert_eq!(lines.len(), 14);
}

#[test]
fn plurals_read_naturally() {
    assert_eq!(plural(0, "retry"), "0 retries");
    assert_eq!(plural(1, "retry"), "1 retry");
    assert_eq!(plural(3, "turn"), "3 turns");
}

fn log(events: Vec<Event>) -> Vec<Envelope> {
    events
        .into_iter()
        .enumerate()
        .map(|(seq, event)| Envelope { seq: seq as u64, time: 0, event })
        .collect()
}

fn user() -> Event {
    Event::UserMessage(UserMessage { text: "hi".into() })
}

fn turn(turn: u32) -> Event {
    Event::TurnStart(TurnStart { turn })
}

fn end(turn: u32) -> Event {
    Event::TurnEnd(TurnEnd { turn, reason: TurnEndReason::Completed })
}

#[test]
fn a_turn_without_a_user_message_of_its_own_is_a_manual_retry() {
    let idle = || Event::AgentIdle(AgentIdle {});
    let cases: Vec<(Vec<Event>, Vec<u32>)> = vec![
        (vec![user(), turn(1), end(1), idle()], vec![]),
        (vec![user(), turn(1), end(1), idle(), turn(2), end(2)], vec![2]),
        (vec![user(), turn(1), end(1), turn(2), end(2), turn(3), end(3)], vec![2, 3]),
        // Prompts queued while a turn runs: each opens its own turn.
        (vec![user(), turn(1), user(), user(), end(1), turn(2), end(2), turn(3)], vec![]),
        (vec![turn(1)], vec![1]),
    ];
    for (events, retries) in cases {
        assert_eq!(manual_retries(&log(events.clone())), retries, "{events:?}");
    }
}

fn call(id: &str, arguments: serde_json::Value) -> Event {
    Event::ToolCall(ToolCallEvent {
        turn: 1,
        step: 2,
        id: id.into(),
        name: "echo".into(),
        arguments,
    })
}

fn result(id: &str, output: &str, is_error: bool) -> Event {
    Event::ToolResult(ToolResult {
        turn: 1,
        step: 2,
        id: id.into(),
        output: output.into(),
        is_error,
    })
}

#[test]
fn tool_calls_show_name_arguments_and_result() {
    let long = "y".repeat(100);
    let events = log(vec![
        call("a", json!({"text": "hello"})),
        result("a", "hello", false),
        call("b", json!({})),
        result("b", "line one\nline two", true),
        call("c", json!({"text": long})),
        result("c", &long, false),
        call("d", json!(null)),
    ]);
    let clipped = format!("\"{}…", "y".repeat(79));
    assert_eq!(
        tool_calls(&events),
        [
            r#"tool call echo {"text":"hello"} in turn 1, step 2 (a): "hello""#.to_owned(),
            r#"tool call echo {} in turn 1, step 2 (b): error "line one\nline two""#.to_owned(),
            format!(
                r#"tool call echo {{"text":"{}… in turn 1, step 2 (c): {clipped}"#,
                "y".repeat(71)
            ),
            "tool call echo null in turn 1, step 2 (d): no result".to_owned(),
        ]
    );
}

#[test]
fn the_summary_names_the_manual_retry_and_the_tool_call() {
    let mut report = report();
    report.turns[1].reason = TurnEndReason::Completed;
    report.retries.clear();
    report.config_errors.clear();
    report.invariant = InvariantRow { ok: true, violations: Vec::new() };
    let events = log(vec![
        user(),
        turn(1),
        call("a", json!({"text": "hi"})),
        result("a", "hi", false),
        end(1),
        turn(2),
        end(2),
    ]);
    let text =
        summary("s.json", &RunOutcome { report, events, notes: Vec::new(), warnings: Vec::new() });
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[1], "  turn 1: error SERVER: busy three");
    assert_eq!(lines[2], "  turn 2 (manual retry of turn 1): completed");
    assert_eq!(lines[3], r#"  tool call echo {"text":"hi"} in turn 1, step 2 (a): "hi""#);
    assert_eq!(lines[4], "  invariant: ok");
}

#[test]
fn route_switches_show_when_from_where_to_where_and_why() {
    let switch = |step, from: &str, to: &str, reason: &str| {
        Event::RouteSwitched(rein::runtime::event::RouteSwitched {
            turn: 1,
            step,
            from: from.into(),
            to: to.into(),
            code: "QUOTA".into(),
            reason: reason.into(),
        })
    };
    let mut events =
        log(vec![switch(1, "main", "b1", "eager"), switch(1, "b1", "b2", "exhausted")]);
    events[1].time = 1500;
    assert_eq!(
        route_switches(&events),
        [
            "route switched at 0 ms in turn 1, step 1: main → b1 (QUOTA, eager)",
            "route switched at 1500 ms in turn 1, step 1: b1 → b2 (QUOTA, exhausted)",
        ]
    );
    let mut report = report();
    report.config_errors.clear();
    let text =
        summary("s.json", &RunOutcome { report, events, notes: Vec::new(), warnings: Vec::new() });
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[4], "  route switched at 0 ms in turn 1, step 1: main → b1 (QUOTA, eager)");
}
