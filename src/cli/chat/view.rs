//! What a person sees of a turn while it runs: a pure function of the turn's events.
//!
//! - The answer goes to stdout ([`Out::Answer`]), as the runtime's answer stream
//!   ([`rein_runtime::session::Answer`]) says. On a terminal it streams as the chunks arrive, every
//!   attempt's as they come — a person watches the model type — and an attempt that fails after
//!   streaming text gets a note (that text is not part of the answer: the log keeps only the
//!   successful attempt's chunks). Piped, stdout gets only what succeeded: each answered step's
//!   text, written when its attempt answered, so a file or a program reading it never holds a
//!   failed attempt's text.
//! - Everything else is a line for stderr ([`Out::Note`]): one status line per scheduled retry
//!   (`retry 1/2 in 1.5 s · RATE_LIMIT 429`), per retry the route's spent budget declined
//!   (`retry throttled · RATE_LIMIT 429: route deepseek's retry budget is spent`), tool calls and
//!   results, route switches (`switched to openai:gpt-4o-mini · QUOTA`), compactions, plugin
//!   crashes, and each change of a route's breaker ([`health_line`]: `route deepseek opened
//!   (circuit breaker) …`, `route deepseek closed …`).
//! - A note never lands on the same line as answer text: an open answer line is ended first.
//!
//! When stdout is a terminal, control characters in the answer (other than newline and tab) are
//! written as escapes (`\u{1b}`), as `rein show` does with provider text: a model's output must
//! not drive the terminal. Piped, the answer is written verbatim.

use rein_runtime::event::{CancelCause, Event, LlmRetry, RetryThrottled, TurnEndReason};
use rein_runtime::failure::Failure;
use rein_runtime::plural::count;
use rein_runtime::route_health::{BreakerState, HealthSnapshot};
use rein_runtime::session::{Answer, AnswerDelta};

use rein::show::escape;

/// The longest tool argument or result shown, in characters.
const SHOWN: usize = 80;

/// How a note should look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tone {
    /// Progress: retries, tool calls.
    Status,
    /// Something was lost or cut short.
    Warning,
}

/// A piece of output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Out {
    /// Answer text for stdout, written as it is (no newline added).
    Answer(String),
    /// One line for stderr (without its newline).
    Note(Tone, String),
}

/// The state of the output while a turn runs.
#[derive(Debug)]
pub(crate) struct View {
    /// Stdout is a terminal: the answer streams (its control characters escaped); else only
    /// what succeeded is written.
    terminal: bool,
    /// Stdout's last character is not a newline.
    open_line: bool,
    /// The answer so far.
    answer: Answer,
}

impl View {
    /// A view; `terminal` when stdout is a terminal.
    pub(crate) fn new(terminal: bool) -> Self {
        Self { terminal, open_line: false, answer: Answer::new() }
    }

    /// What `event` shows.
    pub(crate) fn on(&mut self, event: &Event) -> Vec<Out> {
        let mut out = Vec::new();
        if let Some(delta) = self.answer.on(event) {
            self.answer_delta(&mut out, delta);
        }
        match event {
            Event::LlmRetry(retry) => self.note(&mut out, Tone::Status, retry_line(retry)),
            Event::RetryThrottled(throttled) => {
                self.note(&mut out, Tone::Warning, throttled_line(throttled));
            }
            Event::ToolCall(call) => {
                let arguments = shorten(&call.arguments.to_string());
                self.note(
                    &mut out,
                    Tone::Status,
                    format!("tool {} {arguments}", escape(&call.name)),
                );
            }
            Event::ToolResult(result) => {
                let what = if result.is_error { "tool error" } else { "tool result" };
                self.note(&mut out, Tone::Status, format!("{what}: {}", shorten(&result.output)));
            }
            Event::RouteSwitched(switch) => {
                let note = format!("switched to {} · {}", escape(&switch.to), escape(&switch.code));
                self.note(&mut out, Tone::Status, note);
            }
            Event::ContextCompacted(compacted) => {
                let note = format!(
                    "context compacted: {} removed, {} kept",
                    count(compacted.removed.len(), "event", "events"),
                    compacted.kept
                );
                self.note(&mut out, Tone::Status, note);
            }
            Event::PluginCrashed(crash) => {
                let note = format!(
                    "plugin {} crashed (restart {}): {}",
                    crash.plugin,
                    crash.restarts,
                    shorten(&crash.error)
                );
                self.note(&mut out, Tone::Warning, note);
            }
            Event::TurnEnd(_) => out.extend(self.close()),
            _ => {}
        }
        out
    }

    /// What a piece of the answer shows: on a terminal, the text as it streams and a note when
    /// an attempt's streamed text is dropped; piped, only each answered step's text.
    fn answer_delta(&mut self, out: &mut Vec<Out>, delta: AnswerDelta) {
        let text = match delta {
            AnswerDelta::Text(text) if self.terminal => escape_answer(&text),
            AnswerDelta::Settled(text) if !self.terminal && !text.is_empty() => text,
            AnswerDelta::Reset { attempt, failure: Some(failure), .. } if self.terminal => {
                let note = format!(
                    "cut off: attempt {attempt} failed with {}; the text above is not part of the \
                     answer",
                    failure.code()
                );
                return self.note(out, Tone::Warning, note);
            }
            // A turn that ended mid-stream: its ending line says how.
            _ => return,
        };
        self.open_line = !text.ends_with('\n');
        out.push(Out::Answer(text));
    }

    /// The line of a change of `route`'s breaker to `now` (its snapshot), at `now_ms` (the
    /// runtime clock's).
    pub(crate) fn health(&mut self, route: &str, now: &HealthSnapshot, now_ms: u64) -> Vec<Out> {
        let mut out = Vec::new();
        let tone = if now.state == BreakerState::Closed { Tone::Status } else { Tone::Warning };
        self.note(&mut out, tone, health_line(route, now, now_ms));
        out
    }

    /// Ends an open answer line on a terminal, before a status line is drawn on it (piped,
    /// stdout is elsewhere).
    pub(crate) fn before_status(&mut self) -> Option<Out> {
        if self.terminal { self.close() } else { None }
    }

    /// Ends an open answer line (before anything else is printed, and at a turn's end).
    pub(crate) fn close(&mut self) -> Option<Out> {
        std::mem::take(&mut self.open_line).then(|| Out::Answer("\n".to_owned()))
    }

    fn note(&mut self, out: &mut Vec<Out>, tone: Tone, text: String) {
        out.extend(self.close());
        out.push(Out::Note(tone, text));
    }
}

/// The status line of a scheduled retry: `retry 1/2 in 1.5 s · RATE_LIMIT 429`, the budget `∞`
/// in always mode, the plugin named when it is not `llm-retry`.
pub(crate) fn retry_line(retry: &LlmRetry) -> String {
    let budget = match retry.max_retries {
        Some(max) if retry.mode != "always" => max.to_string(),
        _ => "∞".to_owned(),
    };
    let mut line = format!(
        "retry {}/{budget} in {} · {}",
        retry.retry,
        wait(retry.delay_ms),
        failure_label(&retry.failure)
    );
    if retry.plugin != rein_plugins::llm_retry::NAME {
        line.push_str(&format!(" · {}", retry.plugin));
    }
    line
}

/// The status line of a retry the route's spent budget declined: `retry throttled · SERVER:
/// route deepseek's retry budget is spent`, the plugin named when it is not `llm-retry`.
pub(crate) fn throttled_line(throttled: &RetryThrottled) -> String {
    let mut line = format!(
        "retry throttled · {}: route {}'s retry budget is spent",
        escape(&throttled.code),
        escape(&throttled.provider)
    );
    if throttled.plugin != rein_plugins::llm_retry::NAME {
        line.push_str(&format!(" · {}", throttled.plugin));
    }
    line
}

/// The status line of a change of `route`'s breaker to `now`, at `now_ms`: `route deepseek
/// opened (circuit breaker): attempts fail at once with CIRCUIT_OPEN for 30.0 s`, `route deepseek
/// closed (circuit breaker): requests go through again`.
pub(crate) fn health_line(route: &str, now: &HealthSnapshot, now_ms: u64) -> String {
    let route = escape(route);
    match (now.state, now.open_until_ms) {
        (BreakerState::Open, Some(until)) => format!(
            "route {route} opened (circuit breaker): attempts fail at once with CIRCUIT_OPEN for \
             {}, then one probes",
            wait(until.saturating_sub(now_ms) as f64)
        ),
        (BreakerState::Open, None) => {
            format!(
                "route {route} opened (circuit breaker): attempts fail at once with CIRCUIT_OPEN"
            )
        }
        (BreakerState::HalfOpen, _) => {
            format!("route {route} half-open (circuit breaker): its next attempt probes")
        }
        (BreakerState::Closed, _) => {
            format!("route {route} closed (circuit breaker): requests go through again")
        }
    }
}

/// `RATE_LIMIT 429`, or the code alone when no HTTP status came with it.
fn failure_label(failure: &Failure) -> String {
    match failure.status() {
        Some(status) => format!("{} {status}", failure.code()),
        None => failure.code().to_owned(),
    }
}

/// A wait as a person reads it: `250 ms` under a second, else seconds with one decimal (`1.5 s`).
pub(crate) fn wait(ms: f64) -> String {
    let rounded = ms.round();
    if rounded < 1000.0 { format!("{rounded} ms") } else { format!("{:.1} s", ms / 1000.0) }
}

/// The line that says how a turn ended, for a turn that has no panel (one that retried or
/// failed has one, which says it): `None` for a completed turn.
pub(crate) fn ending(turn: u32, reason: &TurnEndReason) -> Option<String> {
    let how = match reason {
        TurnEndReason::Completed => return None,
        TurnEndReason::Error { failure } => {
            format!("failed with {}: {}", failure.code(), escape(failure.message()))
        }
        TurnEndReason::Aborted { cause: CancelCause::User } => "cancelled".to_owned(),
        TurnEndReason::Aborted { cause: CancelCause::Parent } => {
            "cancelled with its session".to_owned()
        }
        TurnEndReason::Aborted { cause: CancelCause::Disposed } => {
            "cancelled: the runtime shut down".to_owned()
        }
        TurnEndReason::Aborted { cause: CancelCause::Hook { reason } } => {
            format!("cancelled by a hook: {}", escape(reason))
        }
        TurnEndReason::MaxSteps => "stopped at the step limit".to_owned(),
        TurnEndReason::Interrupted => "interrupted".to_owned(),
    };
    Some(format!("turn {turn} {how}"))
}

/// The exit status of a chat whose last turn ended `last` (`None`: no turn ran): 0 when it
/// completed (or none ran), 1 otherwise.
pub(crate) fn exit_status(last: Option<&TurnEndReason>) -> u8 {
    match last {
        None | Some(TurnEndReason::Completed) => 0,
        Some(_) => 1,
    }
}

/// Answer text for a terminal: control characters other than newline and tab escaped.
fn escape_answer(text: &str) -> String {
    text.split('\n').map(escape).collect::<Vec<_>>().join("\n")
}

/// `text` on one line, escaped, cut at [`SHOWN`] characters with `…`.
fn shorten(text: &str) -> String {
    let flat = escape(&text.replace('\n', " "));
    match flat.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rein_runtime::event::{
        AssistantChunk, AssistantMessage, LlmRetry, RequestError, RequestStart, StepRef,
        ToolResult, TurnEnd,
    };

    fn failure(code: &str, status: Option<u16>) -> Failure {
        let failure = Failure::new(code, "m").unwrap();
        match status {
            Some(status) => failure.with_status(status).unwrap(),
            None => failure,
        }
    }

    fn retry(retry: u64, max: Option<u64>, mode: &str, delay_ms: f64, plugin: &str) -> LlmRetry {
        LlmRetry {
            retry_id: "r".into(),
            turn: 1,
            step: 1,
            provider: "simulated".into(),
            plugin: plugin.into(),
            mode: mode.into(),
            policy_key: "k".into(),
            retry,
            max_retries: max,
            delay_ms,
            failure: failure("RATE_LIMIT", Some(429)),
        }
    }

    #[test]
    fn a_retry_is_one_status_line() {
        let cases = [
            (
                retry(1, Some(2), "normal", 1000.0, "llm-retry"),
                "retry 1/2 in 1.0 s · RATE_LIMIT 429",
            ),
            (
                retry(2, Some(2), "normal", 1499.0, "llm-retry"),
                "retry 2/2 in 1.5 s · RATE_LIMIT 429",
            ),
            (
                retry(1, Some(3), "normal", 250.4, "llm-retry"),
                "retry 1/3 in 250 ms · RATE_LIMIT 429",
            ),
            (retry(7, None, "always", 500.0, "llm-retry"), "retry 7/∞ in 500 ms · RATE_LIMIT 429"),
            (
                retry(1, Some(5), "normal", 30_000.0, "auto-retry"),
                "retry 1/5 in 30.0 s · RATE_LIMIT 429 · auto-retry",
            ),
            (
                LlmRetry {
                    failure: failure("TRANSPORT", None),
                    ..retry(1, Some(2), "normal", 500.0, "llm-retry")
                },
                "retry 1/2 in 500 ms · TRANSPORT",
            ),
        ];
        for (retry, want) in cases {
            assert_eq!(retry_line(&retry), want);
        }
    }

    #[test]
    fn a_throttle_and_each_change_of_a_breaker_are_one_status_line() {
        let throttled = |plugin: &str| RetryThrottled {
            turn: 1,
            step: 1,
            provider: "deepseek".into(),
            plugin: plugin.into(),
            code: "SERVER".into(),
        };
        assert_eq!(
            throttled_line(&throttled("llm-retry")),
            "retry throttled · SERVER: route deepseek's retry budget is spent"
        );
        assert_eq!(
            throttled_line(&throttled("auto-retry")),
            "retry throttled · SERVER: route deepseek's retry budget is spent · auto-retry"
        );
        let snapshot = |state, open_until_ms| HealthSnapshot {
            state,
            tokens: 3.0,
            max_tokens: 10.0,
            open_until_ms,
        };
        let cases = [
            (
                snapshot(BreakerState::Open, Some(31_000)),
                "route deepseek opened (circuit breaker): attempts fail at once with CIRCUIT_OPEN \
                 for 30.0 s, then one probes",
            ),
            (
                snapshot(BreakerState::Closed, None),
                "route deepseek closed (circuit breaker): requests go through again",
            ),
            (
                snapshot(BreakerState::HalfOpen, None),
                "route deepseek half-open (circuit breaker): its next attempt probes",
            ),
        ];
        for (now, want) in cases {
            assert_eq!(health_line("deepseek", &now, 1_000), want);
        }
        // A status line never lands on an open answer line; an opening is a warning.
        let mut view = View::new(true);
        view.on(&start(1));
        assert_eq!(view.on(&chunk(1, "half")), [Out::Answer("half".into())]);
        let out = view.health("deepseek", &snapshot(BreakerState::Open, Some(2_000)), 1_000);
        assert_eq!(out[0], Out::Answer("\n".into()));
        assert!(matches!(&out[1], Out::Note(Tone::Warning, line) if line.contains("for 1.0 s")));
        let out = view.health("deepseek", &snapshot(BreakerState::Closed, None), 3_000);
        assert!(matches!(&out[..], [Out::Note(Tone::Status, _)]), "{out:?}");
    }

    fn chunk(attempt: u32, text: &str) -> Event {
        Event::AssistantChunk(AssistantChunk { turn: 1, step: 1, attempt, text: text.into() })
    }

    fn start(attempt: u32) -> Event {
        Event::RequestStart(RequestStart {
            turn: 1,
            step: 1,
            attempt,
            provider: "p".into(),
            model: "m".into(),
        })
    }

    fn error(attempt: u32, code: &str) -> Event {
        Event::RequestError(RequestError {
            turn: 1,
            step: 1,
            attempt,
            provider: "p".into(),
            failure: failure(code, None),
        })
    }

    fn run(view: &mut View, events: &[Event]) -> Vec<Out> {
        events.iter().flat_map(|e| view.on(e)).collect()
    }

    fn answer(text: &str) -> Out {
        Out::Answer(text.into())
    }

    #[test]
    fn the_answer_streams_and_a_cut_off_attempt_is_marked_before_the_retry_line() {
        let mut view = View::new(true);
        let out = run(
            &mut view,
            &[
                start(1),
                chunk(1, "Hel"),
                error(1, "TRANSPORT"),
                Event::LlmRetry(retry(1, Some(2), "normal", 500.0, "llm-retry")),
                start(2),
                chunk(2, "Hello"),
                chunk(2, " world"),
                Event::TurnEnd(TurnEnd { turn: 1, reason: TurnEndReason::Completed }),
            ],
        );
        assert_eq!(
            out,
            [
                answer("Hel"),
                answer("\n"),
                Out::Note(
                    Tone::Warning,
                    "cut off: attempt 1 failed with TRANSPORT; the text above is not part of the answer"
                        .into()
                ),
                Out::Note(Tone::Status, "retry 1/2 in 500 ms · RATE_LIMIT 429".into()),
                answer("Hello"),
                answer(" world"),
                answer("\n"),
            ]
        );
    }

    #[test]
    fn a_failure_before_any_text_adds_nothing_and_a_closed_line_stays_closed() {
        let mut view = View::new(true);
        let out = run(&mut view, &[start(1), error(1, "SERVER")]);
        assert_eq!(out, []);
        let out = run(
            &mut view,
            &[
                start(2),
                chunk(2, "done\n"),
                Event::ToolResult(ToolResult {
                    turn: 1,
                    step: 1,
                    id: "c".into(),
                    output: "x".repeat(100),
                    is_error: false,
                }),
                Event::StepEnd(StepRef { turn: 1, step: 1 }),
                Event::TurnEnd(TurnEnd { turn: 1, reason: TurnEndReason::Completed }),
            ],
        );
        assert_eq!(
            out,
            [
                answer("done\n"),
                Out::Note(Tone::Status, format!("tool result: {}…", "x".repeat(80))),
            ]
        );
    }

    #[test]
    fn a_route_switch_is_one_status_line_after_the_cut_off_note() {
        let mut view = View::new(true);
        let switched = Event::RouteSwitched(rein_runtime::event::RouteSwitched {
            turn: 1,
            step: 1,
            from: "deepseek".into(),
            to: "openai:gpt-4o-mini".into(),
            code: "QUOTA".into(),
            reason: "eager".into(),
        });
        let out = run(&mut view, &[start(1), chunk(1, "Hel"), error(1, "QUOTA"), switched]);
        assert_eq!(
            out,
            [
                answer("Hel"),
                answer("\n"),
                Out::Note(
                    Tone::Warning,
                    "cut off: attempt 1 failed with QUOTA; the text above is not part of the answer"
                        .into()
                ),
                Out::Note(Tone::Status, "switched to openai:gpt-4o-mini · QUOTA".into()),
            ]
        );
    }

    #[test]
    fn on_a_terminal_control_characters_in_the_answer_are_escaped() {
        let cases = [
            (false, "a\u{1b}[2J\tb\nc", "a\u{1b}[2J\tb\nc"),
            (true, "a\u{1b}[2J\tb\nc", "a\\u{1b}[2J\tb\nc"),
            (true, "line\r\n", "line\\u{d}\n"),
        ];
        for (terminal, text, want) in cases {
            let out = run(&mut View::new(terminal), &[start(1), chunk(1, text), message(text)]);
            assert_eq!(out, [answer(want)], "{text:?}");
        }
    }

    fn message(text: &str) -> Event {
        Event::AssistantMessage(AssistantMessage {
            turn: 1,
            step: 1,
            text: text.into(),
            tool_calls: None,
            usage: None,
        })
    }

    #[test]
    fn piped_stdout_gets_only_what_succeeded_each_answered_step_once() {
        let call = Event::ToolCall(rein_runtime::event::ToolCallEvent {
            turn: 1,
            step: 1,
            id: "c1".into(),
            name: "echo".into(),
            arguments: serde_json::json!({"text": "hi"}),
        });
        let out = run(
            &mut View::new(false),
            &[
                start(1),
                chunk(1, "Hel"),
                error(1, "TRANSPORT"),
                Event::LlmRetry(retry(1, Some(2), "normal", 500.0, "llm-retry")),
                start(2),
                chunk(2, "Let me"),
                chunk(2, " echo"),
                message("Let me echo"),
                call,
                Event::StepEnd(StepRef { turn: 1, step: 1 }),
                Event::TurnEnd(TurnEnd { turn: 1, reason: TurnEndReason::Completed }),
            ],
        );
        assert_eq!(
            out,
            [
                Out::Note(Tone::Status, "retry 1/2 in 500 ms · RATE_LIMIT 429".into()),
                answer("Let me echo"),
                answer("\n"),
                Out::Note(Tone::Status, r#"tool echo {"text":"hi"}"#.into()),
            ],
            "no failed attempt's text, no cut-off note: nothing was written to take back"
        );
    }

    #[test]
    fn endings_without_a_panel_and_exit_statuses() {
        let failed = TurnEndReason::Error { failure: failure("AUTH", Some(401)) };
        let cases = [
            (TurnEndReason::Completed, None, 0),
            (failed, Some("turn 2 failed with AUTH: m"), 1),
            (TurnEndReason::Aborted { cause: CancelCause::User }, Some("turn 2 cancelled"), 1),
            (
                TurnEndReason::Aborted { cause: CancelCause::Disposed },
                Some("turn 2 cancelled: the runtime shut down"),
                1,
            ),
            (TurnEndReason::MaxSteps, Some("turn 2 stopped at the step limit"), 1),
            (TurnEndReason::Interrupted, Some("turn 2 interrupted"), 1),
        ];
        for (reason, line, status) in cases {
            assert_eq!(ending(2, &reason).as_deref(), line, "{reason:?}");
            assert_eq!(exit_status(Some(&reason)), status, "{reason:?}");
        }
        assert_eq!(exit_status(None), 0, "no turn ran: nothing failed");
    }

    #[test]
    fn waits_read_as_a_person_writes_them() {
        for (ms, want) in [(0.0, "0 ms"), (999.4, "999 ms"), (999.6, "1.0 s"), (2600.0, "2.6 s")] {
            assert_eq!(wait(ms), want);
        }
    }
}
