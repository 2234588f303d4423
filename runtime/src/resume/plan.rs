//! What a reopen does with a turn a crash left open: a pure function of the turn's tail (its
//! events from its `turn/start` on), table-tested below.
//!
//! | the tail of the open turn | on reopen ([`Point`]) | `pending` |
//! |---|---|---|
//! | `llm/retry` with no `llm/retry-started` | wait what is left of `time + delayMs`, append `llm/retry-started`, start the next attempt ([`StepPoint::RetryWait`]) | `retry-wait` |
//! | `request/start` with no outcome | append `request/error` `TRANSPORT` for it and offer it to the waterfall ([`StepPoint::Cut`]) | `attempt` |
//! | `request/error` with no answer yet | offer the same failure to the waterfall again ([`StepPoint::Offer`]) | `waterfall` |
//! | `tool/call` with no `tool/result` | append `tool/result {isError: true}` "outcome unknown…" and go on ([`ToolRun::Lost`]) | `tool` |
//! | anything else | continue the loop: the next attempt, tool call, step, or the turn's end | `loop` |
//!
//! It is not resumed — the reopen closes it `interrupted` as before ([`NotResumed`]) — when the
//! runtime resumes nothing ([`Resume::Never`]), when its `turn/resumed` events already number
//! `max_resumes`, or when the route it would continue on is not a route of the runtime.
//!
//! # Why the decision reads only the log
//!
//! Everything a turn did is in its log before it has any effect ("durable before effect"): an
//! `llm/retry` before its wait, a `request/start` before the call, a `tool/call` before the tool
//! runs. So the tail says exactly what was in flight, and what is not in the log never happened.
//! A tool whose call is logged but whose result is not may or may not have run; running it again
//! could do twice what must be done once, so its result is recorded unknown and the model decides.

use crate::event::{Envelope, Event, LlmRetry, LlmRetryStarted, ToolCall, TurnResumed};
use crate::failure::{self, Failure};

use super::Resume;

/// The message of the `request/error` recorded for an attempt a crash cut.
pub(crate) const INTERRUPTED_ATTEMPT: &str = "interrupted: the process stopped during this attempt";

/// The output of the `tool/result` recorded for a tool a crash cut.
pub(crate) const OUTCOME_UNKNOWN: &str = "outcome unknown: the process stopped while this tool ran";

/// What a reopen does with the open turn.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Decision {
    /// Close it `interrupted`, as before.
    Interrupt(NotResumed),
    /// Continue it.
    Resume(Plan),
}

/// Why a turn is not resumed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NotResumed {
    /// The runtime resumes nothing.
    Off,
    /// The turn was resumed this many times already.
    TooMany(u32),
    /// The route it would continue on is not the runtime's (none: it names no route at all).
    RouteGone(Option<String>),
}

/// How a resumed turn continues.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    /// The turn.
    pub(crate) turn: u32,
    /// The step `turn/resumed` names: the open step, else the last one started (0: none).
    pub(crate) step: u32,
    /// The route it continues on: where its latest attempt went (the fallback route when the
    /// turn made no attempt). A `route/switched` after that attempt moves the next attempt, as
    /// in a live step (the step reads it from the log before it retries).
    pub(crate) route: String,
    /// Where it continues.
    pub(crate) point: Point,
}

impl Plan {
    /// The tag of what was pending (`turn/resumed.pending`).
    pub(crate) fn pending(&self) -> &'static str {
        match &self.point {
            Point::InStep(StepPoint::RetryWait { .. }) => "retry-wait",
            Point::InStep(StepPoint::Cut { .. }) => "attempt",
            Point::InStep(StepPoint::Offer { .. }) => "waterfall",
            Point::InStep(StepPoint::Tools { runs, .. }) if runs.contains(&ToolRun::Lost) => "tool",
            _ => "loop",
        }
    }

    /// The `turn/resumed` written first.
    pub(crate) fn resumed(&self) -> Event {
        Event::TurnResumed(TurnResumed {
            turn: self.turn,
            step: self.step,
            pending: self.pending().to_owned(),
        })
    }
}

/// Where a resumed turn continues.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Point {
    /// No step is open: step `after` ended with its tools run (0: no step started yet), and the
    /// turn decides what follows (the next step, or its step limit).
    AfterStep {
        /// The last step started.
        after: u32,
    },
    /// The open step's answer is written and called no tool: the turn completes (its
    /// `step/end` goes with its `turn/end`).
    Answered,
    /// Inside the open step ([`Plan::step`]).
    InStep(StepPoint),
}

/// Where a resumed step continues.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum StepPoint {
    /// Start attempt `attempt` (its `step/start` is written).
    Begin {
        /// The attempt to start.
        attempt: u32,
    },
    /// A retry was scheduled: wait until `due_ms` on the runtime clock, append `started`, then
    /// start attempt `attempt`.
    RetryWait {
        /// The attempt to start (the failed one + 1).
        attempt: u32,
        /// `llm/retry.time + delayMs`, rounded up.
        due_ms: u64,
        /// The `llm/retry-started` to append.
        started: LlmRetryStarted,
    },
    /// Attempt `attempt` was cut: record `failure` for it and offer it to the waterfall.
    Cut {
        /// The cut attempt.
        attempt: u32,
        /// `TRANSPORT`, [`INTERRUPTED_ATTEMPT`].
        failure: Failure,
    },
    /// Attempt `attempt` failed with `failure` and the waterfall had not answered: offer it again.
    Offer {
        /// The failed attempt.
        attempt: u32,
        /// Its failure, as its `request/error` recorded it.
        failure: Failure,
    },
    /// The step's answer called tools: each call goes on as `runs` says (then the step ends).
    Tools {
        /// The calls of the answer, in order.
        calls: Vec<ToolCall>,
        /// Where each call stands, in the same order.
        runs: Vec<ToolRun>,
    },
}

/// Where one tool call of a resumed step stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ToolRun {
    /// Its `tool/result` is written.
    Answered,
    /// Its `tool/call` is written and its result is not: it may have run. Record
    /// [`OUTCOME_UNKNOWN`]; never run it again.
    Lost,
    /// Its `tool/call` was never written: it never ran. Write it and run it.
    NotRun,
}

/// The open turn's tail: the events from its `turn/start` (the last one of `events`) on.
pub(crate) fn open_tail(events: &[Envelope]) -> &[Envelope] {
    let start = events.iter().rposition(|e| matches!(e.event, Event::TurnStart(_)));
    start.map_or(&[], |start| &events[start..])
}

/// What to do with the open turn whose events are `tail` (from its `turn/start` on, as
/// [`open_tail`] cuts it). `fallback_route`: the route a turn that made no attempt runs on (the
/// session's last route, or the runtime's default); `route_exists`: whether the runtime serves
/// a route of that name.
pub(crate) fn decide(
    tail: &[Envelope],
    resume: Resume,
    fallback_route: Option<&str>,
    route_exists: impl Fn(&str) -> bool,
) -> Decision {
    let Resume::On { max_resumes } = resume else {
        return Decision::Interrupt(NotResumed::Off);
    };
    let tail = Tail::fold(tail);
    if tail.resumes >= max_resumes {
        return Decision::Interrupt(NotResumed::TooMany(tail.resumes));
    }
    let route = tail.route.clone().or_else(|| fallback_route.map(str::to_owned));
    let Some(route) = route.filter(|route| route_exists(route)) else {
        return Decision::Interrupt(NotResumed::RouteGone(
            tail.route.or(fallback_route.map(str::to_owned)),
        ));
    };
    let point =
        if tail.step_open { tail.in_step() } else { Point::AfterStep { after: tail.last_step } };
    Decision::Resume(Plan { turn: tail.turn, step: tail.last_step, route, point })
}

/// What the decision reads of a turn's tail.
#[derive(Debug, Default)]
struct Tail {
    turn: u32,
    resumes: u32,
    last_step: u32,
    step_open: bool,
    route: Option<String>,
    /// The latest attempt of the open step.
    attempt: Option<AttemptTail>,
    /// The tool calls of the open step's answer, once it is written.
    answer: Option<Vec<ToolCall>>,
    /// The ids of the open step's `tool/call`s and `tool/result`s.
    called: Vec<String>,
    answered: Vec<String>,
}

#[derive(Debug)]
struct AttemptTail {
    number: u32,
    failure: Option<Failure>,
    /// The `llm/retry` after its failure, and its time.
    retry: Option<(LlmRetry, u64)>,
    started: bool,
}

impl Tail {
    fn fold(tail: &[Envelope]) -> Self {
        let mut out = Tail::default();
        for envelope in tail {
            match &envelope.event {
                Event::TurnStart(start) => out.turn = start.turn,
                Event::TurnResumed(_) => out.resumes += 1,
                Event::StepStart(step) => {
                    out.last_step = step.step;
                    out.step_open = true;
                    out.attempt = None;
                    out.answer = None;
                    out.called.clear();
                    out.answered.clear();
                }
                Event::StepEnd(_) => out.step_open = false,
                Event::RequestStart(request) => {
                    out.route = Some(request.provider.clone());
                    out.attempt = Some(AttemptTail {
                        number: request.attempt,
                        failure: None,
                        retry: None,
                        started: false,
                    });
                }
                Event::RequestError(error) => {
                    if let Some(attempt) =
                        out.attempt.as_mut().filter(|a| a.number == error.attempt)
                    {
                        attempt.failure = Some(error.failure.clone());
                    }
                }
                Event::LlmRetry(retry) => {
                    if let Some(attempt) = out.attempt.as_mut() {
                        attempt.retry = Some((retry.clone(), envelope.time));
                        attempt.started = false;
                    }
                }
                Event::LlmRetryStarted(started) => {
                    if let Some(attempt) = out.attempt.as_mut()
                        && attempt.retry.as_ref().is_some_and(|(r, _)| {
                            r.retry_id == started.retry_id && r.retry == started.retry
                        })
                    {
                        attempt.started = true;
                    }
                }
                Event::AssistantMessage(message) => {
                    out.answer = Some(message.tool_calls.clone().unwrap_or_default());
                }
                Event::ToolCall(call) => out.called.push(call.id.clone()),
                Event::ToolResult(result) => out.answered.push(result.id.clone()),
                _ => {}
            }
        }
        out
    }

    /// Where the open step continues.
    fn in_step(&self) -> Point {
        if let Some(calls) = &self.answer {
            if calls.is_empty() {
                return Point::Answered;
            }
            let runs = calls
                .iter()
                .map(|call| {
                    match (self.answered.contains(&call.id), self.called.contains(&call.id)) {
                        (true, _) => ToolRun::Answered,
                        (false, true) => ToolRun::Lost,
                        (false, false) => ToolRun::NotRun,
                    }
                })
                .collect();
            return Point::InStep(StepPoint::Tools { calls: calls.clone(), runs });
        }
        let step = match &self.attempt {
            None => StepPoint::Begin { attempt: 1 },
            Some(AttemptTail { number, failure: None, .. }) => StepPoint::Cut {
                attempt: *number,
                failure: Failure::internal(failure::TRANSPORT, INTERRUPTED_ATTEMPT),
            },
            Some(AttemptTail { number, failure: Some(failure), retry, started }) => match retry {
                Some(_) if *started => StepPoint::Begin { attempt: number + 1 },
                Some((retry, time)) => StepPoint::RetryWait {
                    attempt: number + 1,
                    due_ms: due(*time, retry.delay_ms),
                    started: LlmRetryStarted {
                        retry_id: retry.retry_id.clone(),
                        turn: retry.turn,
                        step: retry.step,
                        retry: retry.retry,
                    },
                },
                None => StepPoint::Offer { attempt: *number, failure: failure.clone() },
            },
        };
        Point::InStep(step)
    }
}

/// `time + delay_ms`, rounded up to the millisecond (a start at that time is never early).
fn due(time: u64, delay_ms: f64) -> u64 {
    let delay = if delay_ms.is_finite() { delay_ms.max(0.0) } else { 0.0 };
    time.saturating_add(delay.ceil() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{
        AssistantMessage, RequestError, RequestStart, RouteSwitched, StepRef, ToolCallEvent,
        ToolResult, TurnStart,
    };
    use serde_json::json;

    /// A tail built event by event, each a millisecond after the last.
    #[derive(Default)]
    struct T(Vec<Envelope>);

    impl T {
        fn push(mut self, event: Event) -> Self {
            let n = self.0.len() as u64;
            self.0.push(Envelope { seq: 10 + n, time: 1000 + n, event });
            self
        }
        fn turn() -> Self {
            T::default().push(Event::TurnStart(TurnStart { turn: 2 }))
        }
        fn step(self, step: u32) -> Self {
            self.push(Event::StepStart(StepRef { turn: 2, step }))
        }
        fn step_end(self, step: u32) -> Self {
            self.push(Event::StepEnd(StepRef { turn: 2, step }))
        }
        fn request(self, attempt: u32, provider: &str) -> Self {
            let step = self.step_now();
            self.push(Event::RequestStart(RequestStart {
                turn: 2,
                step,
                attempt,
                provider: provider.into(),
                model: "m".into(),
            }))
        }
        fn error(self, attempt: u32) -> Self {
            let step = self.step_now();
            self.push(Event::RequestError(RequestError {
                turn: 2,
                step,
                attempt,
                provider: "mock".into(),
                failure: server(),
            }))
        }
        fn retry(self, id: &str, retry: u64, delay_ms: f64) -> Self {
            let step = self.step_now();
            self.push(Event::LlmRetry(LlmRetry {
                retry_id: id.into(),
                turn: 2,
                step,
                provider: "mock".into(),
                plugin: "llm-retry".into(),
                mode: "normal".into(),
                policy_key: "k".into(),
                retry,
                max_retries: Some(2),
                delay_ms,
                failure: server(),
            }))
        }
        fn started(self, id: &str, retry: u64) -> Self {
            let step = self.step_now();
            self.push(Event::LlmRetryStarted(LlmRetryStarted {
                retry_id: id.into(),
                turn: 2,
                step,
                retry,
            }))
        }
        fn answer(self, calls: &[&str]) -> Self {
            let step = self.step_now();
            let tool_calls = (!calls.is_empty()).then(|| calls.iter().map(|id| call(id)).collect());
            self.push(Event::AssistantMessage(AssistantMessage {
                turn: 2,
                step,
                text: "ok".into(),
                tool_calls,
                usage: None,
            }))
        }
        fn tool_call(self, id: &str) -> Self {
            let step = self.step_now();
            self.push(Event::ToolCall(ToolCallEvent {
                turn: 2,
                step,
                id: id.into(),
                name: "echo".into(),
                arguments: json!({}),
            }))
        }
        fn tool_result(self, id: &str) -> Self {
            let step = self.step_now();
            self.push(Event::ToolResult(ToolResult {
                turn: 2,
                step,
                id: id.into(),
                output: "x".into(),
                is_error: false,
            }))
        }
        fn switched(self, to: &str) -> Self {
            let step = self.step_now();
            self.push(Event::RouteSwitched(RouteSwitched {
                turn: 2,
                step,
                from: "mock".into(),
                to: to.into(),
                code: "QUOTA".into(),
                reason: "eager".into(),
            }))
        }
        fn resumed(self) -> Self {
            let step = self.step_now();
            self.push(Event::TurnResumed(TurnResumed { turn: 2, step, pending: "loop".into() }))
        }
        fn step_now(&self) -> u32 {
            self.0
                .iter()
                .rev()
                .find_map(|e| match &e.event {
                    Event::StepStart(s) => Some(s.step),
                    _ => None,
                })
                .unwrap_or(0)
        }
    }

    fn server() -> Failure {
        Failure::new("SERVER", "down").unwrap()
    }
    fn call(id: &str) -> ToolCall {
        ToolCall { id: id.into(), name: "echo".into(), arguments: json!({}) }
    }
    fn in_step(point: StepPoint) -> Point {
        Point::InStep(point)
    }
    fn tools(ids: &[&str], runs: &[ToolRun]) -> Point {
        let calls = ids.iter().map(|id| call(id)).collect();
        in_step(StepPoint::Tools { calls, runs: runs.to_vec() })
    }
    fn cut(attempt: u32) -> Point {
        in_step(StepPoint::Cut {
            attempt,
            failure: Failure::internal(failure::TRANSPORT, INTERRUPTED_ATTEMPT),
        })
    }
    fn decide_on(tail: &T) -> Decision {
        decide(&tail.0, Resume::default(), Some("default"), |r| r != "gone")
    }

    #[test]
    fn the_tail_decides_where_the_turn_continues() {
        // (tail, step named, route, point, pending)
        let rows: Vec<(T, u32, &str, Point, &str)> = vec![
            // A pending retry wait: the rest of it, then the next attempt with the same chain.
            (
                T::turn().step(1).request(1, "mock").error(1).retry("r-1", 1, 20_000.0),
                1,
                "mock",
                in_step(StepPoint::RetryWait {
                    attempt: 2,
                    due_ms: 1004 + 20_000,
                    started: LlmRetryStarted { retry_id: "r-1".into(), turn: 2, step: 1, retry: 1 },
                }),
                "retry-wait",
            ),
            // A fractional delay is rounded up: never early.
            (
                T::turn().step(1).request(1, "mock").error(1).retry("r-1", 1, 0.5),
                1,
                "mock",
                in_step(StepPoint::RetryWait {
                    attempt: 2,
                    due_ms: 1005,
                    started: LlmRetryStarted { retry_id: "r-1".into(), turn: 2, step: 1, retry: 1 },
                }),
                "retry-wait",
            ),
            // A later attempt's wait: the chain's retry number and the attempt numbering go on.
            (
                T::turn()
                    .step(1)
                    .request(1, "mock")
                    .error(1)
                    .retry("r-1", 1, 10.0)
                    .started("r-1", 1)
                    .request(2, "mock")
                    .error(2)
                    .retry("r-1", 2, 10.0),
                1,
                "mock",
                in_step(StepPoint::RetryWait {
                    attempt: 3,
                    due_ms: 1008 + 10,
                    started: LlmRetryStarted { retry_id: "r-1".into(), turn: 2, step: 1, retry: 2 },
                }),
                "retry-wait",
            ),
            // The wait ended and its start is written: the next attempt.
            (
                T::turn()
                    .step(1)
                    .request(1, "mock")
                    .error(1)
                    .retry("r-1", 1, 10.0)
                    .started("r-1", 1),
                1,
                "mock",
                in_step(StepPoint::Begin { attempt: 2 }),
                "loop",
            ),
            // An attempt the crash cut, with or without chunks.
            (T::turn().step(1).request(1, "mock"), 1, "mock", cut(1), "attempt"),
            (
                T::turn()
                    .step(1)
                    .request(1, "mock")
                    .error(1)
                    .retry("r", 1, 1.0)
                    .started("r", 1)
                    .request(2, "mock"),
                1,
                "mock",
                cut(2),
                "attempt",
            ),
            // The waterfall was deciding: the same failure again.
            (
                T::turn().step(1).request(1, "mock").error(1),
                1,
                "mock",
                in_step(StepPoint::Offer { attempt: 1, failure: server() }),
                "waterfall",
            ),
            // A switch during the walk: the failure is offered again as the failed attempt's (the
            // step follows the switch if the waterfall retries).
            (
                T::turn().step(1).request(1, "mock").error(1).switched("backup"),
                1,
                "mock",
                in_step(StepPoint::Offer { attempt: 1, failure: server() }),
                "waterfall",
            ),
            // A tool that was running: its result is unknown, it is not run again.
            (
                T::turn().step(1).request(1, "mock").answer(&["c1", "c2"]).tool_call("c1"),
                1,
                "mock",
                tools(&["c1", "c2"], &[ToolRun::Lost, ToolRun::NotRun]),
                "tool",
            ),
            (
                T::turn()
                    .step(1)
                    .request(1, "mock")
                    .answer(&["c1", "c2"])
                    .tool_call("c1")
                    .tool_result("c1")
                    .tool_call("c2"),
                1,
                "mock",
                tools(&["c1", "c2"], &[ToolRun::Answered, ToolRun::Lost]),
                "tool",
            ),
            // Every call logged before any result: each one without its result is unknown.
            (
                T::turn()
                    .step(1)
                    .request(1, "mock")
                    .answer(&["c1", "c2", "c3"])
                    .tool_call("c1")
                    .tool_call("c2")
                    .tool_call("c3")
                    .tool_result("c1"),
                1,
                "mock",
                tools(&["c1", "c2", "c3"], &[ToolRun::Answered, ToolRun::Lost, ToolRun::Lost]),
                "tool",
            ),
            // A call never logged never ran: it runs now.
            (
                T::turn()
                    .step(1)
                    .request(1, "mock")
                    .answer(&["c1", "c2"])
                    .tool_call("c1")
                    .tool_result("c1"),
                1,
                "mock",
                tools(&["c1", "c2"], &[ToolRun::Answered, ToolRun::NotRun]),
                "loop",
            ),
            (
                T::turn()
                    .step(1)
                    .request(1, "mock")
                    .answer(&["c1"])
                    .tool_call("c1")
                    .tool_result("c1"),
                1,
                "mock",
                tools(&["c1"], &[ToolRun::Answered]),
                "loop",
            ),
            // Answered without tools: the turn completes.
            (T::turn().step(1).request(1, "mock").answer(&[]), 1, "mock", Point::Answered, "loop"),
            // Between steps, and before the first.
            (
                T::turn()
                    .step(1)
                    .request(1, "mock")
                    .answer(&["c1"])
                    .tool_call("c1")
                    .tool_result("c1")
                    .step_end(1),
                1,
                "mock",
                Point::AfterStep { after: 1 },
                "loop",
            ),
            (T::turn(), 0, "default", Point::AfterStep { after: 0 }, "loop"),
            // A step/start without its request/start (a batch cut in two).
            (T::turn().step(1), 1, "default", in_step(StepPoint::Begin { attempt: 1 }), "loop"),
            // A second step after a switch: it continues on the switched route.
            (
                T::turn()
                    .step(1)
                    .request(1, "mock")
                    .error(1)
                    .switched("backup")
                    .request(2, "backup")
                    .answer(&["c1"])
                    .tool_call("c1")
                    .tool_result("c1")
                    .step_end(1)
                    .step(2),
                2,
                "backup",
                in_step(StepPoint::Begin { attempt: 1 }),
                "loop",
            ),
        ];
        for (tail, step, route, point, pending) in rows {
            let kinds: Vec<&str> = tail.0.iter().map(Envelope::kind).collect();
            let plan = match decide_on(&tail) {
                Decision::Resume(plan) => plan,
                other => panic!("{kinds:?}: {other:?}"),
            };
            assert_eq!(plan.turn, 2, "{kinds:?}");
            assert_eq!(plan.step, step, "{kinds:?}");
            assert_eq!(plan.route, route, "{kinds:?}");
            assert_eq!(plan.point, point, "{kinds:?}");
            assert_eq!(plan.pending(), pending, "{kinds:?}");
            assert_eq!(
                plan.resumed(),
                Event::TurnResumed(TurnResumed { turn: 2, step, pending: pending.into() })
            );
        }
    }

    #[test]
    fn some_turns_are_interrupted_as_before() {
        let cut = T::turn().step(1).request(1, "mock");
        let at = |resume| decide(&cut.0, resume, Some("default"), |_| true);
        assert_eq!(at(Resume::Never), Decision::Interrupt(NotResumed::Off));
        assert!(matches!(at(Resume::max_resumes(1)), Decision::Resume(_)));
        assert_eq!(
            decide(&cut.0, Resume::max_resumes(0), None, |_| true),
            Decision::Interrupt(NotResumed::TooMany(0))
        );

        // Resumed three times already: the fourth reopen interrupts it (by default).
        let mut tail = T::turn().step(1);
        for attempt in 1..=3 {
            tail = tail
                .request(attempt, "mock")
                .resumed()
                .error(attempt)
                .retry("r", attempt.into(), 1.0)
                .started("r", attempt.into());
            let decision = decide_on(&tail);
            if attempt < 3 {
                assert!(matches!(decision, Decision::Resume(_)), "{attempt}: {decision:?}");
            } else {
                assert_eq!(decision, Decision::Interrupt(NotResumed::TooMany(3)));
            }
        }

        // Its route is gone, or it names none and no fallback exists.
        let gone = T::turn().step(1).request(1, "gone");
        assert_eq!(
            decide_on(&gone),
            Decision::Interrupt(NotResumed::RouteGone(Some("gone".into())))
        );
        assert_eq!(
            decide(&T::turn().0, Resume::default(), None, |_| true),
            Decision::Interrupt(NotResumed::RouteGone(None))
        );
        assert_eq!(
            decide(&T::turn().0, Resume::default(), Some("gone"), |r| r != "gone"),
            Decision::Interrupt(NotResumed::RouteGone(Some("gone".into())))
        );
    }

    #[test]
    fn the_tail_is_cut_at_the_open_turns_start() {
        let earlier = T::turn().step(1).answer(&[]).step_end(1);
        let mut events = earlier.0.clone();
        events.push(Envelope {
            seq: 50,
            time: 2000,
            event: Event::TurnStart(TurnStart { turn: 3 }),
        });
        assert_eq!(open_tail(&events).len(), 1);
        assert_eq!(open_tail(&events)[0].seq, 50);
        assert!(open_tail(&[]).is_empty());
    }
}
