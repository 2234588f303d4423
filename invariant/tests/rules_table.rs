//! A table of valid and invalid histories: every rule of the session-log contract has at least one
//! history that breaks it and nothing else.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::collections::BTreeSet;

use rein_event::event::{
    CancelCause, Envelope, Event, LlmRetry, LlmRetryStarted, RequestError, RequestStart,
    RouteSwitched, SessionStart, StepRef, ToolResult, TurnEnd, TurnEndReason, TurnStart,
};
use rein_invariant::{Rule, check_finished_log, check_log, parse_line};
use rein_testkit::history;
use rein_testkit::history::{History, Retry, failure};

/// A prefix every retry case shares: turn 1, step 1, attempt 1 on `mock` failed with `code`.
fn failed(code: &str) -> History {
    let mut h = History::new();
    h.user().turn().step().request("mock").chunk().wait(1).error(code);
    h
}

/// A chain of official retries 1..=n on `mock` in turn 1 step 1, each started and retried.
fn official_chain(n: u64) -> History {
    let mut h = failed("SERVER");
    for retry in 1..=n {
        h.retried(Retry::official("id-a", retry)).request("mock").error("SERVER");
    }
    h
}

struct Case {
    name: &'static str,
    log: Vec<Envelope>,
    /// Checked as a finished log (a turn left open is a violation).
    finished: bool,
    expected: &'static [Rule],
}

fn case(name: &'static str, h: &mut History, expected: &'static [Rule]) -> Case {
    Case { name, log: h.build(), finished: false, expected }
}

fn finished(name: &'static str, h: &mut History, expected: &'static [Rule]) -> Case {
    Case { name, log: h.build(), finished: true, expected }
}

fn valid_cases() -> Vec<Case> {
    vec![
        case("an empty log", &mut History::empty(), &[]),
        finished(
            "a throttled retry, then a switch to another route that answers",
            failed("SERVER")
                .throttled("llm-retry")
                .throttled("auto-retry")
                .switched("backup", "exhausted")
                .answer("backup")
                .completed()
                .idle(),
            &[],
        ),
        finished(
            "a throttled retry ends the turn with its failure",
            failed("SERVER")
                .throttled("llm-retry")
                .step_end()
                .turn_end(TurnEndReason::Error { failure: failure("SERVER") })
                .idle(),
            &[],
        ),
        finished("only session/start", &mut History::new(), &[]),
        finished(
            "one completed turn",
            History::new()
                .user()
                .turn()
                .step()
                .request("mock")
                .chunk()
                .chunk()
                .message(&[])
                .step_end()
                .completed()
                .idle(),
            &[],
        ),
        finished(
            "tool calls then a final answer",
            History::new()
                .user()
                .turn()
                .step()
                .request("mock")
                .message(&["c1", "c2"])
                .tool_call("c1")
                .tool_call("c2")
                .tool_result("c1")
                .tool_result("c2")
                .step_end()
                .step()
                .answer("mock")
                .completed(),
            &[],
        ),
        finished(
            "two official retries then success",
            official_chain(1).retried(Retry::official("id-a", 2)).answer_in_step().completed(),
            &[],
        ),
        finished(
            "auto-retry takes over when the official budget is spent",
            official_chain(2)
                .retried(Retry::auto("id-b", 1))
                .request("mock")
                .error("SERVER")
                .retried(Retry::auto("id-b", 2))
                .answer_in_step()
                .completed(),
            &[],
        ),
        finished(
            "always mode retries without a budget",
            &mut {
                let mut h = failed("AUTH");
                for n in 1..=5 {
                    h.retried(Retry::always("id-c", n)).request("mock").error("AUTH");
                }
                h.step_end().turn_end(TurnEndReason::Error { failure: failure("AUTH") });
                h
            },
            &[],
        ),
        finished(
            "always mode takes over after an aborted auto-retry wait",
            failed("SERVER")
                .retry(Retry::auto("id-b", 1))
                .wait(300)
                .config_changed()
                .retried(Retry::always("id-c", 1))
                .answer_in_step()
                .completed(),
            &[],
        ),
        finished(
            "a turn cancelled during a retry wait",
            failed("RATE_LIMIT")
                .retry(Retry::official("id-a", 1))
                .wait(10)
                .step_end()
                .turn_end(TurnEndReason::Aborted { cause: CancelCause::User })
                .idle(),
            &[],
        ),
        finished(
            "compaction retries without llm/retry",
            failed("CONTEXT_WINDOW_EXCEEDED").compacted().answer_in_step().completed(),
            &[],
        ),
        finished(
            "each turn has its own chain and ids",
            official_chain(1)
                .answer_in_step()
                .completed()
                .idle()
                .user()
                .turn()
                .step()
                .request("mock")
                .error("SERVER")
                .retried(Retry::official("id-z", 1))
                .answer_in_step()
                .completed(),
            &[],
        ),
        finished(
            "two providers in one step have two chains",
            failed("SERVER")
                .retried(Retry::official("id-a", 1))
                .request("deepseek")
                .error("SERVER")
                .retried(Retry::official("id-d", 1))
                .request("mock")
                .error("SERVER")
                .retried(Retry::official("id-a", 2))
                .answer_in_step()
                .completed(),
            &[],
        ),
        finished(
            "a fractional delay starts at the floor of time + delay",
            failed("SERVER")
                .retried(Retry::official("id-a", 1).delay(500.7))
                .answer_in_step()
                .completed(),
            &[],
        ),
        finished(
            "a changed policy is a new chain",
            failed("SERVER")
                .retried(Retry::official("id-a", 1))
                .request("mock")
                .error("SERVER")
                .retried(Retry::always("id-b", 1))
                .answer_in_step()
                .completed(),
            &[],
        ),
        case(
            "a running session's open turn",
            History::new().user().turn().step().request("mock"),
            &[],
        ),
        finished(
            "a turn aborted before its first step",
            History::new()
                .user()
                .turn()
                .turn_end(TurnEndReason::Aborted { cause: CancelCause::Parent }),
            &[],
        ),
        finished(
            "diagnostics anywhere",
            History::new()
                .crashed()
                .config_changed()
                .user()
                .turn()
                .crashed()
                .step()
                .config_changed()
                .answer("mock")
                .crashed()
                .completed()
                .config_changed(),
            &[],
        ),
        finished(
            "auto-retry retries an opt-in code",
            failed("QUOTA").retried(Retry::auto("id-b", 1)).answer_in_step().completed(),
            &[],
        ),
        finished(
            "the hard floor binds auto-retry only",
            failed("NO_ADAPTER").retried(Retry::always("id-c", 1)).answer_in_step().completed(),
            &[],
        ),
        finished(
            "a zero delay may start at once",
            failed("SERVER")
                .retried(Retry::official("id-a", 1).delay(0.0))
                .answer_in_step()
                .completed(),
            &[],
        ),
        finished(
            "the step limit ends a turn",
            History::new()
                .user()
                .turn()
                .step()
                .request("mock")
                .message(&["c"])
                .tool_call("c")
                .tool_result("c")
                .step_end()
                .turn_end(TurnEndReason::MaxSteps),
            &[],
        ),
        finished(
            "an eager switch, then the fallback route answers",
            failed("QUOTA")
                .switched("backup", "eager")
                .request("backup")
                .chunk()
                .message(&[])
                .step_end()
                .completed(),
            &[],
        ),
        finished(
            "a switch after the official budget is spent; the new route's chain starts at 1",
            official_chain(2)
                .switched("backup", "exhausted")
                .request("backup")
                .error("SERVER")
                .retried(Retry::official("id-b", 1))
                .answer_in_step()
                .completed(),
            &[],
        ),
        finished(
            "two fallbacks in one step, one switch per failed attempt",
            failed("QUOTA")
                .switched("b1", "eager")
                .request("b1")
                .error("QUOTA")
                .switched("b2", "eager")
                .answer("b2")
                .completed(),
            &[],
        ),
        finished(
            "a switch written downstream, then an upstream plugin's own retry",
            failed("SERVER")
                .switched("backup", "exhausted")
                .retried(Retry::official("id-a", 1))
                .answer("backup")
                .completed(),
            &[],
        ),
        finished(
            "a switch the chain's answer did not follow: the turn ends",
            failed("QUOTA")
                .switched("backup", "eager")
                .step_end()
                .turn_end(TurnEndReason::Error { failure: failure("QUOTA") }),
            &[],
        ),
        finished(
            "the turn's next step stays on the fallback route",
            failed("QUOTA")
                .switched("backup", "eager")
                .request("backup")
                .message(&["c1"])
                .tool_call("c1")
                .tool_result("c1")
                .step_end()
                .step()
                .answer("backup")
                .completed(),
            &[],
        ),
        finished(
            "a retry wait a crash cut, resumed: the retry starts at its deadline",
            failed("SERVER")
                .retry(Retry::official("id-a", 1))
                .wait(200)
                .resumed("retry-wait")
                .wait(300)
                .started("id-a", 1)
                .answer("mock")
                .completed(),
            &[],
        ),
        finished(
            "an attempt a crash cut, resumed: recorded failed and retried",
            History::new()
                .user()
                .turn()
                .step()
                .request("mock")
                .chunk()
                .resumed("attempt")
                .error("TRANSPORT")
                .retried(Retry::official("id-a", 1))
                .answer("mock")
                .completed(),
            &[],
        ),
        finished(
            "a turn resumed between steps, twice",
            History::new()
                .user()
                .turn()
                .step()
                .request("mock")
                .message(&["c1"])
                .tool_call("c1")
                .tool_result("c1")
                .step_end()
                .resumed("loop")
                .resumed("loop")
                .step()
                .answer("mock")
                .completed(),
            &[],
        ),
        finished(
            "a turn resumed before its first step",
            History::new().user().turn().resumed("loop").step().answer("mock").completed(),
            &[],
        ),
    ]
}

fn retry_event(h: &History, f: impl FnOnce(&mut LlmRetry)) -> Event {
    let mut r = LlmRetry {
        retry_id: "id-a".into(),
        turn: h.turn,
        step: h.step,
        provider: h.provider.clone(),
        plugin: "llm-retry".into(),
        mode: "normal".into(),
        policy_key: history::OFFICIAL_KEY.into(),
        retry: 1,
        max_retries: Some(2),
        delay_ms: 500.0,
        failure: failure("SERVER"),
    };
    f(&mut r);
    Event::LlmRetry(r)
}

fn set_retry(h: &mut History, f: impl FnOnce(&mut LlmRetry)) -> &mut History {
    h.edit(|e| match &mut e.event {
        Event::LlmRetry(r) => f(r),
        other => panic!("not a retry: {other:?}"),
    })
}

fn switch_event(h: &History, f: impl FnOnce(&mut RouteSwitched)) -> Event {
    let mut s = RouteSwitched {
        turn: h.turn,
        step: h.step,
        from: h.provider.clone(),
        to: "backup".into(),
        code: "QUOTA".into(),
        reason: "eager".into(),
    };
    f(&mut s);
    Event::RouteSwitched(s)
}

fn invalid_cases() -> Vec<Case> {
    use Rule::*;
    vec![
        // Sessions.
        case("a gap in seq", History::new().user().edit(|e| e.seq = 2).turn(), &[SeqContiguous]),
        case("a log not starting at seq 0", History::new().edit(|e| e.seq = 1), &[SeqContiguous]),
        case("a repeated seq", History::new().user().user().edit(|e| e.seq = 1), &[SeqContiguous]),
        case("a log starting without session/start", History::empty().user(), &[SessionStartFirst]),
        case(
            "a second session/start",
            History::new()
                .user()
                .push(Event::SessionStart(SessionStart { session: "s1".into(), format: 1 })),
            &[SessionStartFirst],
        ),
        case(
            "an unknown log format",
            History::empty()
                .push(Event::SessionStart(SessionStart { session: "s1".into(), format: 2 })),
            &[LogFormatKnown],
        ),
        case(
            "a first turn numbered 2",
            History::new().push(Event::TurnStart(TurnStart { turn: 2 })),
            &[TurnNumberedInOrder],
        ),
        case(
            "a turn number repeated",
            History::new().turn().completed().push(Event::TurnStart(TurnStart { turn: 1 })),
            &[TurnNumberedInOrder],
        ),
        case("a turn inside a turn", History::new().turn().turn(), &[TurnsDoNotNest]),
        case(
            "a turn/end without a turn",
            History::new().turn().completed().completed(),
            &[TurnEndMatchesTurn],
        ),
        case(
            "a turn/end of another turn",
            History::new()
                .turn()
                .push(Event::TurnEnd(TurnEnd { turn: 2, reason: TurnEndReason::Completed })),
            &[TurnEndMatchesTurn],
        ),
        finished(
            "a finished log with an open turn",
            History::new().user().turn().step().answer_in_step_start(),
            &[TurnLeftOpen],
        ),
        case(
            "a step outside any turn",
            History::new().push(Event::StepStart(StepRef { turn: 1, step: 1 })),
            &[StepInOpenTurn],
        ),
        case(
            "a step naming another turn",
            History::new().turn().push(Event::StepStart(StepRef { turn: 2, step: 1 })),
            &[StepInOpenTurn],
        ),
        case(
            "a first step numbered 2",
            History::new().turn().push(Event::StepStart(StepRef { turn: 1, step: 2 })),
            &[StepNumberedInOrder],
        ),
        case("a step inside a step", History::new().turn().step().step(), &[StepsDoNotNest]),
        case(
            "a step/end of another step",
            History::new().turn().step().push(Event::StepEnd(StepRef { turn: 1, step: 2 })),
            &[StepEndMatchesStep],
        ),
        case(
            "a step/end without a step",
            History::new().turn().step().step_end().step_end(),
            &[StepEndMatchesStep],
        ),
        case(
            "a turn/end with its step open",
            History::new().turn().step().completed(),
            &[StepClosedBeforeTurnEnd],
        ),
        case(
            "a request outside any step",
            History::new().turn().step().step_end().request("mock"),
            &[RequestInOpenStep],
        ),
        case(
            "a request naming another step",
            History::new().turn().step().push(Event::RequestStart(RequestStart {
                turn: 1,
                step: 2,
                attempt: 1,
                provider: "mock".into(),
                model: "m".into(),
            })),
            &[RequestInOpenStep],
        ),
        case(
            "a first attempt numbered 2",
            History::new().turn().step().request("mock").edit(|e| {
                if let Event::RequestStart(r) = &mut e.event {
                    r.attempt = 2;
                }
            }),
            &[AttemptNumberedInOrder],
        ),
        case(
            "an attempt number repeated",
            History::new().turn().step().request("mock").error("SERVER").request("mock").edit(
                |e| {
                    if let Event::RequestStart(r) = &mut e.event {
                        r.attempt = 1;
                    }
                },
            ),
            &[AttemptNumberedInOrder],
        ),
        case(
            "a message after its step ended",
            History::new().turn().step().request("mock").step_end().message(&[]),
            &[EventInOpenStep],
        ),
        case(
            "a tool result naming another step",
            History::new().turn().step().push(Event::ToolResult(ToolResult {
                turn: 1,
                step: 2,
                id: "c".into(),
                output: "o".into(),
                is_error: false,
            })),
            &[EventInOpenStep],
        ),
        case("a compaction outside a step", History::new().turn().compacted(), &[EventInOpenStep]),
        case("agent/idle inside a turn", History::new().turn().idle(), &[IdleOutsideTurn]),
        // Requests.
        case(
            "an error of an attempt that is not the current one",
            History::new().turn().step().request("mock").request("mock").push(Event::RequestError(
                RequestError {
                    turn: 1,
                    step: 1,
                    attempt: 1,
                    provider: "mock".into(),
                    failure: failure("SERVER"),
                },
            )),
            &[RequestErrorCurrentAttempt],
        ),
        case(
            "an error before any request",
            History::new().turn().step().error("SERVER"),
            &[RequestErrorCurrentAttempt],
        ),
        case(
            "an error naming another provider",
            History::new().turn().step().request("mock").push(Event::RequestError(RequestError {
                turn: 1,
                step: 1,
                attempt: 1,
                provider: "deepseek".into(),
                failure: failure("SERVER"),
            })),
            &[RequestErrorProvider],
        ),
        case("an attempt failing twice", failed("SERVER").error("SERVER"), &[RequestErrorOnce]),
        case(
            "a chunk of another attempt",
            History::new().turn().step().request("mock").chunk().edit(|e| {
                if let Event::AssistantChunk(c) = &mut e.event {
                    c.attempt = 2;
                }
            }),
            &[ChunkCurrentAttempt],
        ),
        case(
            "a chunk before any request",
            History::new().turn().step().chunk(),
            &[ChunkCurrentAttempt],
        ),
        // Retries: fields.
        case(
            "an empty plugin",
            set_retry(failed("SERVER").retry(Retry::official("id-a", 1)), |r| r.plugin.clear()),
            &[RetryFieldsNonEmpty],
        ),
        case(
            "an empty retryId and policyKey",
            set_retry(failed("SERVER").retry(Retry::official("", 1)), |r| r.policy_key.clear()),
            &[RetryFieldsNonEmpty],
        ),
        case(
            "retry 0",
            failed("SERVER").retry(Retry::official("id-a", 0)),
            &[RetryNumberValid, RetryContinuesChain],
        ),
        case(
            "an unknown mode",
            set_retry(failed("SERVER").retry(Retry::official("id-a", 1)), |r| {
                r.mode = "sometimes".into()
            }),
            &[RetryModeKnown],
        ),
        case(
            "normal mode without maxRetries",
            set_retry(failed("SERVER").retry(Retry::official("id-a", 1)), |r| r.max_retries = None),
            &[RetryMaxRetriesValid],
        ),
        case(
            "normal mode with maxRetries 0",
            set_retry(failed("SERVER").retry(Retry::official("id-a", 1)), |r| {
                r.max_retries = Some(0)
            }),
            &[RetryMaxRetriesValid],
        ),
        case(
            "a retry over its budget",
            official_chain(2).retry(Retry::official("id-a", 3)),
            &[RetryWithinMaxRetries],
        ),
        case(
            "always mode with maxRetries",
            set_retry(failed("SERVER").retry(Retry::always("id-a", 1)), |r| {
                r.max_retries = Some(5)
            }),
            &[RetryAlwaysNoMaxRetries],
        ),
        case(
            "a negative delay",
            failed("SERVER").retry(Retry::official("id-a", 1).delay(-1.0)),
            &[RetryDelayValid],
        ),
        case(
            "a delay beyond 2147483647",
            failed("SERVER").retry(Retry::official("id-a", 1).delay(2_147_483_648.0)),
            &[RetryDelayValid],
        ),
        // Retries: placement.
        case(
            "a retry naming another step",
            &mut {
                let mut h = failed("SERVER");
                let event = retry_event(&h, |r| r.step = 2);
                h.push(event);
                h
            },
            &[RetryInOpenStep],
        ),
        case(
            "a retry after its step ended",
            &mut {
                let mut h = failed("SERVER");
                h.step_end();
                let event = retry_event(&h, |_| {});
                h.push(event);
                h
            },
            &[RetryInOpenStep],
        ),
        case(
            "a retry for another provider",
            set_retry(failed("SERVER").retry(Retry::official("id-a", 1)), |r| {
                r.provider = "deepseek".into()
            }),
            &[RetryProviderMatchesRequest],
        ),
        case(
            "a retry without a request/error",
            History::new().turn().step().request("mock").retry(Retry::official("id-a", 1)),
            &[RetryAfterRequestError],
        ),
        case(
            "a retry before any request",
            History::new().turn().step().retry(Retry::official("id-a", 1)),
            &[RetryAfterRequestError],
        ),
        case(
            "two retries started for one failure",
            failed("SERVER").retried(Retry::official("id-a", 1)).retry(Retry::auto("id-b", 1)),
            &[RetryAfterRequestError],
        ),
        // Retries: chains.
        case(
            "a chain starting at retry 2",
            failed("SERVER").retry(Retry::official("id-a", 2)),
            &[RetryContinuesChain],
        ),
        case(
            "a retry number repeated",
            official_chain(1).retry(Retry::official("id-a", 1)),
            &[RetryContinuesChain],
        ),
        case(
            "a chain changing its retryId",
            official_chain(1).retry(Retry::official("id-x", 2)),
            &[RetryIdContinuesChain],
        ),
        case(
            "a retryId reused by another chain",
            official_chain(1)
                .answer_in_step()
                .step()
                .request("mock")
                .error("SERVER")
                .retry(Retry::official("id-a", 1)),
            &[RetryIdOwnedByOneChain],
        ),
        case(
            "a retryId reused in a later turn",
            official_chain(1)
                .answer_in_step()
                .completed()
                .turn()
                .step()
                .request("mock")
                .error("SERVER")
                .retry(Retry::official("id-a", 1)),
            &[RetryIdOwnedByOneChain],
        ),
        case(
            "auto-retry retrying a hard-floor code",
            failed("AUTH").retry(Retry::auto("id-b", 1)),
            &[AutoRetryHardFloor],
        ),
        case(
            "auto-retry retrying ABORTED",
            failed("ABORTED").retry(Retry::auto("id-b", 1)),
            &[AutoRetryHardFloor],
        ),
        // Retries: starts.
        case(
            "a start without a retry",
            failed("SERVER").started("id-a", 1),
            &[RetryStartedPairsRetry],
        ),
        case(
            "a start of another retry number",
            failed("SERVER").retry(Retry::official("id-a", 1)).wait(500).started("id-a", 2),
            &[RetryStartedPairsRetry],
        ),
        case(
            "a start of an older retry of the chain",
            official_chain(1).retry(Retry::official("id-a", 2)).wait(500).started("id-a", 1),
            &[RetryStartedPairsRetry],
        ),
        case(
            "a start naming another step",
            failed("SERVER").retry(Retry::official("id-a", 1)).wait(500).push(
                Event::LlmRetryStarted(LlmRetryStarted {
                    retry_id: "id-a".into(),
                    turn: 1,
                    step: 2,
                    retry: 1,
                }),
            ),
            &[RetryStartedSameStep],
        ),
        case(
            "a start after its step ended",
            failed("SERVER")
                .retry(Retry::official("id-a", 1))
                .wait(500)
                .step_end()
                .started("id-a", 1),
            &[RetryStartedSameStep],
        ),
        case(
            "a start after the next attempt began",
            failed("SERVER")
                .retry(Retry::official("id-a", 1))
                .wait(500)
                .request("mock")
                .started("id-a", 1),
            &[RetryStartedBeforeNextAttempt],
        ),
        case(
            "a start repeated",
            failed("SERVER").retried(Retry::official("id-a", 1)).started("id-a", 1),
            &[RetryStartedOnce],
        ),
        case(
            "a start before its delay elapsed",
            failed("SERVER").retry(Retry::official("id-a", 1)).wait(499).started("id-a", 1),
            &[RetryStartedAfterDelay],
        ),
        case(
            "a start before the floor of a fractional delay",
            failed("SERVER").retry(Retry::official("id-a", 1).delay(1.9)).started("id-a", 1),
            &[RetryStartedAfterDelay],
        ),
        // Routes.
        case(
            "a switch with an empty reason and code",
            &mut {
                let mut h = failed("QUOTA");
                let event = switch_event(&h, |s| {
                    s.reason = String::new();
                    s.code = String::new();
                });
                h.push(event);
                h
            },
            &[RouteSwitchedFieldsNonEmpty],
        ),
        case(
            "a switch to the route it leaves",
            failed("QUOTA").switched("mock", "eager"),
            &[RouteSwitchedToAnotherRoute],
        ),
        case(
            "a switch outside the open step",
            &mut {
                let mut h = failed("QUOTA");
                let event = switch_event(&h, |s| s.step = 2);
                h.push(event);
                h
            },
            &[RouteSwitchedInOpenStep],
        ),
        case(
            "a switch before the attempt failed",
            History::new().user().turn().step().request("mock").switched("backup", "eager"),
            &[RouteSwitchedAfterRequestError],
        ),
        case(
            "a switch naming another route as from",
            &mut {
                let mut h = failed("QUOTA");
                let event = switch_event(&h, |s| s.from = "other".into());
                h.push(event);
                h
            },
            &[RouteSwitchedFromCurrentRoute],
        ),
        case(
            "two switches for one failed attempt",
            failed("QUOTA").switched("b1", "eager").switched("b2", "eager"),
            &[RouteSwitchedOncePerAttempt],
        ),
        case(
            "the next attempt on another route than the switch named",
            failed("QUOTA").switched("backup", "eager").request("mock"),
            &[RequestFollowsRouteSwitch],
        ),
        case(
            "a resume with no turn open",
            History::new().user().turn().step().answer("mock").completed().resumed("loop"),
            &[TurnResumedInOpenTurn],
        ),
        case(
            "a resume naming another turn",
            &mut {
                let mut h = History::new();
                h.user().turn().step().request("mock").resumed("attempt");
                h.edit(|e| {
                    if let Event::TurnResumed(r) = &mut e.event {
                        r.turn = 2;
                    }
                });
                h
            },
            &[TurnResumedInOpenTurn],
        ),
        case(
            "a resume naming another step than the open one",
            &mut {
                let mut h = History::new();
                h.user().turn().step().request("mock").resumed("attempt");
                h.edit(|e| {
                    if let Event::TurnResumed(r) = &mut e.event {
                        r.step = 2;
                    }
                });
                h
            },
            &[TurnResumedNamesStep],
        ),
        case(
            "a resume with an unknown pending tag",
            History::new().user().turn().step().request("mock").resumed("sleeping"),
            &[TurnResumedPendingKnown],
        ),
        case(
            "a throttle with empty fields",
            &mut {
                let mut h = failed("SERVER");
                h.throttled("llm-retry").edit(|e| {
                    if let Event::RetryThrottled(t) = &mut e.event {
                        t.plugin.clear();
                        t.code.clear();
                    }
                });
                h
            },
            &[RetryThrottledFieldsNonEmpty],
        ),
        case(
            "a throttle outside the open step",
            &mut {
                let mut h = failed("SERVER");
                h.throttled("llm-retry").edit(|e| {
                    if let Event::RetryThrottled(t) = &mut e.event {
                        t.step = 2;
                    }
                });
                h
            },
            &[RetryThrottledInOpenStep],
        ),
        case(
            "a throttle before the attempt failed",
            History::new().user().turn().step().request("mock").throttled("llm-retry"),
            &[RetryThrottledAfterRequestError],
        ),
        case(
            "a throttle naming another route",
            &mut {
                let mut h = failed("SERVER");
                h.throttled("llm-retry").edit(|e| {
                    if let Event::RetryThrottled(t) = &mut e.event {
                        t.provider = "other".into();
                    }
                });
                h
            },
            &[RetryThrottledProvider],
        ),
        case(
            "a retry of CIRCUIT_OPEN on the same route",
            failed("CIRCUIT_OPEN").retry(Retry::official("id-a", 1)),
            &[CircuitOpenNeverRetried],
        ),
        case(
            "a resumed retry started before its deadline",
            failed("SERVER")
                .retry(Retry::official("id-a", 1))
                .wait(200)
                .resumed("retry-wait")
                .started("id-a", 1),
            &[RetryStartedAfterDelay],
        ),
    ]
}

trait HistoryExt {
    /// A successful attempt that ends the current step.
    fn answer_in_step(&mut self) -> &mut Self;
    /// Leaves the turn open mid-step.
    fn answer_in_step_start(&mut self) -> &mut Self;
}

impl HistoryExt for History {
    fn answer_in_step(&mut self) -> &mut Self {
        let provider = self.provider.clone();
        self.request(&provider).chunk().message(&[]).step_end()
    }

    fn answer_in_step_start(&mut self) -> &mut Self {
        self.request("mock").chunk()
    }
}

fn rules_of(case: &Case) -> BTreeSet<Rule> {
    let violations =
        if case.finished { check_finished_log(&case.log) } else { check_log(&case.log) };
    for v in &violations {
        assert!(
            case.log.iter().any(|e| e.seq == v.seq && e.kind() == v.kind),
            "{}: {v} names no event of the log",
            case.name
        );
        assert!(v.to_string().ends_with(&format!("[{}]", v.rule)), "{v}");
        assert!(v.to_string().contains(&format!("seq {}", v.seq)), "{v}");
    }
    violations.iter().map(|v| v.rule).collect()
}

#[test]
fn valid_histories_break_no_rule() {
    let cases = valid_cases();
    assert!(cases.len() >= 20);
    for case in cases {
        let violations =
            if case.finished { check_finished_log(&case.log) } else { check_log(&case.log) };
        assert!(violations.is_empty(), "{}: {violations:#?}", case.name);
    }
}

#[test]
fn each_invalid_history_breaks_exactly_its_rules() {
    for case in invalid_cases() {
        let got = rules_of(&case);
        let expected: BTreeSet<Rule> = case.expected.iter().copied().collect();
        assert_eq!(got, expected, "{}: {:#?}", case.name, check_log(&case.log));
    }
}

/// Lines that are not events, with the one rule each breaks (built from valid events).
fn line_cases() -> Vec<(&'static str, String, Rule)> {
    let retry = {
        let h = failed("SERVER");
        let mut h2 = h.clone();
        h2.retry(Retry::official("id-a", 1));
        serde_json::to_value(h2.events.last().unwrap()).unwrap()
    };
    let with = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut v = retry.clone();
        f(&mut v);
        v.to_string()
    };
    vec![
        ("a line cut in half", retry.to_string()[..40].to_owned(), Rule::CorruptLine),
        ("an unknown event type", with(&|v| v["type"] = "nope/nope".into()), Rule::EventSchema),
        (
            "a missing field",
            with(&|v| {
                v["data"].as_object_mut().unwrap().remove("step");
            }),
            Rule::EventSchema,
        ),
        (
            "a retry's invalid failure",
            with(&|v| v["data"]["failure"]["status"] = 600.into()),
            Rule::RetryFailureValid,
        ),
        (
            "a retry's empty failure message",
            with(&|v| v["data"]["failure"]["message"] = "".into()),
            Rule::RetryFailureValid,
        ),
        ("a negative retry", with(&|v| v["data"]["retry"] = (-1).into()), Rule::RetryNumberValid),
        ("a fractional retry", with(&|v| v["data"]["retry"] = 1.5.into()), Rule::RetryNumberValid),
    ]
}

#[test]
fn lines_that_are_not_events_name_their_rule() {
    for (name, line, rule) in line_cases() {
        let error = parse_line(&line).expect_err(name);
        assert_eq!(error.rule(), rule, "{name}: {error}");
    }
}

#[test]
fn every_rule_has_a_history_that_breaks_only_it() {
    let mut alone: BTreeSet<Rule> =
        invalid_cases().iter().filter(|c| c.expected.len() == 1).map(|c| c.expected[0]).collect();
    alone.extend(line_cases().into_iter().map(|(_, _, rule)| rule));
    let missing: Vec<&str> =
        Rule::ALL.iter().filter(|r| !alone.contains(r)).map(|r| r.name()).collect();
    assert!(missing.is_empty(), "rules without a history breaking only them: {missing:?}");
    assert!(valid_cases().len() + invalid_cases().len() >= 40);
}

#[test]
fn a_violation_reads_like_the_spec_example() {
    let log = official_chain(1).retry(Retry::official("id-a", 3)).build();
    let violations = check_log(&log);
    assert_eq!(violations.len(), 2, "{violations:#?}");
    let text = violations[0].to_string();
    assert_eq!(
        text,
        format!(
            "llm/retry seq {}: retry 3 must equal 2 in chain [mock, {}] [retry-continues-chain]",
            log.len() - 1,
            history::OFFICIAL_KEY
        )
    );
    assert_eq!(violations[1].rule, Rule::RetryWithinMaxRetries);
}

#[test]
fn a_checker_keeps_going_after_a_violation() {
    // Two independent faults, far apart: both are reported, nothing in between.
    let log = History::new()
        .turn()
        .turn()
        .step()
        .answer_in_step()
        .completed()
        .idle()
        .push(Event::TurnStart(TurnStart { turn: 4 }))
        .build();
    let rules: Vec<Rule> = check_log(&log).into_iter().map(|v| v.rule).collect();
    assert_eq!(rules, [Rule::TurnsDoNotNest, Rule::TurnNumberedInOrder]);
}
