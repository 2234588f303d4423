use super::*;
use rein_event::event::*;
use rein_event::failure::Failure;
use serde_json::{Value, json};

/// A hand-made log: events get contiguous seqs and the time last set.
#[derive(Default)]
struct Log {
    events: Vec<Envelope>,
    now: u64,
}

impl Log {
    fn at(mut self, ms: u64) -> Self {
        self.now = ms;
        self
    }

    fn push(mut self, event: Event) -> Self {
        let seq = self.events.len() as u64;
        self.events.push(Envelope { seq, time: self.now, event });
        self
    }

    fn start(self) -> Self {
        self.push(Event::SessionStart(SessionStart { session: "s".into(), format: 1 }))
    }

    fn user(self, text: &str) -> Self {
        self.push(Event::UserMessage(UserMessage { text: text.into() }))
    }

    fn turn(self, turn: u32) -> Self {
        self.push(Event::TurnStart(TurnStart { turn }))
    }

    fn step(self, turn: u32, step: u32) -> Self {
        self.push(Event::StepStart(StepRef { turn, step }))
    }

    fn step_end(self, turn: u32, step: u32) -> Self {
        self.push(Event::StepEnd(StepRef { turn, step }))
    }

    fn request(self, turn: u32, step: u32, attempt: u32) -> Self {
        self.push(Event::RequestStart(RequestStart {
            turn,
            step,
            attempt,
            provider: "mock".into(),
            model: "scripted".into(),
        }))
    }

    fn chunk(self, turn: u32, step: u32, attempt: u32, text: &str) -> Self {
        self.push(Event::AssistantChunk(AssistantChunk { turn, step, attempt, text: text.into() }))
    }

    fn error(self, turn: u32, step: u32, attempt: u32, failure: Failure) -> Self {
        self.push(Event::RequestError(RequestError {
            turn,
            step,
            attempt,
            provider: "mock".into(),
            failure,
        }))
    }

    fn answer(self, turn: u32, step: u32, text: &str, calls: Option<Vec<ToolCall>>) -> Self {
        self.push(Event::AssistantMessage(AssistantMessage {
            turn,
            step,
            text: text.into(),
            tool_calls: calls,
            usage: None,
        }))
    }

    fn end(self, turn: u32, reason: TurnEndReason) -> Self {
        self.push(Event::TurnEnd(TurnEnd { turn, reason })).push(Event::AgentIdle(AgentIdle {}))
    }

    fn retry(self, retry: u64, max_retries: Option<u64>, delay_ms: f64, failure: Failure) -> Self {
        let (mode, key) = match max_retries {
            Some(_) => ("normal", r#"["normal",2,["SERVER"],500,10000,0]"#),
            None => ("always", r#"["always",500,10000,0]"#),
        };
        self.push(Event::LlmRetry(LlmRetry {
            retry_id: "r-id".into(),
            turn: 1,
            step: 1,
            provider: "mock".into(),
            plugin: "llm-retry".into(),
            mode: mode.into(),
            policy_key: key.into(),
            retry,
            max_retries,
            delay_ms,
            failure,
        }))
    }

    fn retry_started(self, retry: u64) -> Self {
        self.push(Event::LlmRetryStarted(LlmRetryStarted {
            retry_id: "r-id".into(),
            turn: 1,
            step: 1,
            retry,
        }))
    }

    fn report(&self, end_ms: u64) -> Value {
        serde_json::to_value(build(&self.events, Vec::new(), Vec::new(), end_ms)).unwrap()
    }
}

fn server(message: &str) -> Failure {
    Failure::new("SERVER", message).unwrap()
}

fn echo_call() -> ToolCall {
    ToolCall { id: "c1".into(), name: "echo".into(), arguments: json!({"text": "hi"}) }
}

#[test]
fn a_happy_path_with_a_tool_call() {
    let log = Log::default()
        .start()
        .user("hello")
        .turn(1)
        .step(1, 1)
        .request(1, 1, 1)
        .chunk(1, 1, 1, "calling")
        .at(5)
        .answer(1, 1, "calling", Some(vec![echo_call()]))
        .push(Event::ToolCall(ToolCallEvent {
            turn: 1,
            step: 1,
            id: "c1".into(),
            name: "echo".into(),
            arguments: json!({"text": "hi"}),
        }))
        .push(Event::ToolResult(ToolResult {
            turn: 1,
            step: 1,
            id: "c1".into(),
            output: "hi".into(),
            is_error: false,
        }))
        .step_end(1, 1)
        .step(1, 2)
        .request(1, 2, 1)
        .chunk(1, 2, 1, "do")
        .chunk(1, 2, 1, "ne")
        .at(9)
        .answer(1, 2, "done", None)
        .step_end(1, 2)
        .end(1, TurnEndReason::Completed);
    assert_eq!(
        log.report(9),
        json!({
            "turns": [{"turn": 1, "reason": {"kind": "completed"}}],
            "requests": [
                {"atMs": 0, "turn": 1, "step": 1, "attempt": 1, "provider": "mock"},
                {"atMs": 5, "turn": 1, "step": 2, "attempt": 1, "provider": "mock"}
            ],
            "retries": [],
            "retriesStarted": [],
            "configErrors": [],
            "messages": [
                {"role": "user", "text": "hello"},
                {"role": "assistant", "text": "calling",
                 "toolCalls": [{"id": "c1", "name": "echo", "arguments": {"text": "hi"}}]},
                {"role": "tool", "id": "c1", "output": "hi", "isError": false},
                {"role": "assistant", "text": "done"}
            ],
            "invariant": {"ok": true, "violations": []},
            "events": 18,
            "endMs": 9
        })
    );
}

#[test]
fn a_retried_server_error_that_ends_the_turn() {
    let log = Log::default()
        .start()
        .user("hello")
        .turn(1)
        .step(1, 1)
        .request(1, 1, 1)
        .error(1, 1, 1, server("busy one"))
        .retry(1, Some(2), 500.0, server("busy one"))
        .at(500)
        .retry_started(1)
        .request(1, 1, 2)
        .chunk(1, 1, 2, "par")
        .error(1, 1, 2, server("busy two"))
        .retry(2, Some(2), 1000.0, server("busy two"))
        .at(1500)
        .retry_started(2)
        .request(1, 1, 3)
        .error(1, 1, 3, server("busy three"))
        .step_end(1, 1)
        .end(1, TurnEndReason::Error { failure: server("busy three") });
    let report = log.report(1500);
    assert_eq!(
        report["turns"],
        json!([{"turn": 1, "reason": {"kind": "error",
                "failure": {"code": "SERVER", "message": "busy three"}}}])
    );
    assert_eq!(
        report["retries"],
        json!([
            {"atMs": 0, "turn": 1, "step": 1, "plugin": "llm-retry", "retryId": "r-id", "retry": 1,
             "maxRetries": 2, "mode": "normal", "policyKey": r#"["normal",2,["SERVER"],500,10000,0]"#,
             "delayMs": 500, "code": "SERVER", "provider": "mock"},
            {"atMs": 500, "turn": 1, "step": 1, "plugin": "llm-retry", "retryId": "r-id", "retry": 2,
             "maxRetries": 2, "mode": "normal", "policyKey": r#"["normal",2,["SERVER"],500,10000,0]"#,
             "delayMs": 1000, "code": "SERVER", "provider": "mock"}
        ])
    );
    assert_eq!(
        report["retriesStarted"],
        json!([
            {"atMs": 500, "retryId": "r-id", "retry": 1},
            {"atMs": 1500, "retryId": "r-id", "retry": 2}
        ])
    );
    let attempts: Vec<(u64, u64)> = report["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["atMs"].as_u64().unwrap(), r["attempt"].as_u64().unwrap()))
        .collect();
    assert_eq!(attempts, [(0, 1), (500, 2), (1500, 3)]);
    assert_eq!(
        report["messages"],
        json!([{"role": "user", "text": "hello"}]),
        "the chunks of failed attempts are not history"
    );
    assert_eq!(report["events"], 18);
    assert_eq!(report["endMs"], 1500);
}

#[test]
fn always_mode_retries_have_no_max_retries_and_fractional_delays_stay_fractional() {
    let log = Log::default()
        .start()
        .user("hi")
        .turn(1)
        .step(1, 1)
        .request(1, 1, 1)
        .error(1, 1, 1, Failure::new("AUTH", "no").unwrap())
        .retry(1, None, 1.1, Failure::new("AUTH", "no").unwrap());
    let report = log.report(0);
    let retry = report["retries"][0].as_object().unwrap();
    assert!(!retry.contains_key("maxRetries"), "{retry:?}");
    assert_eq!(retry["mode"], "always");
    assert_eq!(retry["code"], "AUTH");
    let text = serde_json::to_string(&build(&log.events, vec![], vec![], 0)).unwrap();
    assert!(text.contains(r#""delayMs":1.1,"#), "{text}");
    assert!(report["turns"].as_array().unwrap().is_empty(), "an open turn is not reported");
}

#[test]
fn compaction_removes_the_dropped_messages_from_the_final_history() {
    let log = Log::default()
        .start()
        .user("one") // seq 1
        .turn(1)
        .step(1, 1)
        .answer(1, 1, "first", None) // seq 4
        .step_end(1, 1)
        .end(1, TurnEndReason::Completed)
        .user("two") // seq 8
        .turn(2)
        .step(2, 1)
        .push(Event::ContextCompacted(ContextCompacted {
            turn: 2,
            step: 1,
            removed: vec![1, 4],
            kept: 1,
        }))
        .answer(2, 1, "second", None);
    assert_eq!(
        log.report(0)["messages"],
        json!([{"role": "user", "text": "two"}, {"role": "assistant", "text": "second"}])
    );
}

#[test]
fn config_errors_and_violations_are_reported_as_given() {
    let log = Log::default().start();
    let errors = vec![ConfigErrorRow {
        at_ms: 100,
        plugin: "auto-retry".into(),
        error: "extraRetries: must be within 0..=10".into(),
    }];
    let violations = vec![Rejection {
        seq: 7,
        kind: "llm/retry".into(),
        rule: "retry-number-continues-chain".into(),
        message: "retry 3 must equal 2".into(),
    }];
    let report = serde_json::to_value(build(&log.events, errors, violations, 2500)).unwrap();
    assert_eq!(
        report["configErrors"],
        json!([{"atMs": 100, "plugin": "auto-retry", "error": "extraRetries: must be within 0..=10"}])
    );
    assert_eq!(
        report["invariant"],
        json!({"ok": false, "violations": [{"seq": 7, "type": "llm/retry",
               "rule": "retry-number-continues-chain", "message": "retry 3 must equal 2"}]})
    );
    assert_eq!(report["events"], 1);
    assert_eq!(report["endMs"], 2500);
}

#[test]
fn every_turn_end_reason_is_reported_verbatim_in_log_order() {
    let reasons = [
        TurnEndReason::Completed,
        TurnEndReason::Aborted { cause: CancelCause::User },
        TurnEndReason::MaxSteps,
        TurnEndReason::Error { failure: server("x") },
        TurnEndReason::Interrupted,
    ];
    let mut log = Log::default().start();
    for (i, reason) in reasons.iter().enumerate() {
        let turn = i as u32 + 1;
        log = log.turn(turn).end(turn, reason.clone());
    }
    let report = build(&log.events, vec![], vec![], 0);
    let got: Vec<(u32, TurnEndReason)> =
        report.turns.into_iter().map(|t| (t.turn, t.reason)).collect();
    let want: Vec<(u32, TurnEndReason)> =
        reasons.into_iter().enumerate().map(|(i, r)| (i as u32 + 1, r)).collect();
    assert_eq!(got, want);
}

#[test]
fn the_top_level_keys_come_in_the_documented_order_and_parse_back() {
    let log = Log::default().start().user("hi");
    let report = build(&log.events, vec![], vec![], 3);
    let text = serde_json::to_string(&report).unwrap();
    let keys = [
        "\"turns\"",
        "\"requests\"",
        "\"retries\"",
        "\"retriesStarted\"",
        "\"configErrors\"",
        "\"messages\"",
        "\"invariant\"",
        "\"events\"",
        "\"endMs\"",
    ];
    let positions: Vec<usize> = keys.iter().map(|k| text.find(k).unwrap()).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{text}");
    assert_eq!(serde_json::from_str::<Report>(&text).unwrap(), report);
}
