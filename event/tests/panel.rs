//! Turn-tail panels over hand-built logs: which turns get one, the summary line, and every line
//! with its origin, budget, wait and failure — recovered, exhausted, cancelled and mixed-plugin
//! turns, and logs a crash or a bug left behind. Real logs from scenario runs are covered by the
//! `rein show` tests of the root crate.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use proptest::prelude::*;
use rein_event::event::{CancelCause, Envelope, Event, TurnEndReason};
use rein_event::failure::Failure;
use rein_event::panel::{AttemptEnd, Ending, Line, Origin, TurnPanel, panels};
use rein_testkit::generate::generate;
use rein_testkit::history::{History, Retry};

/// A failure with everything a provider can say.
fn full(code: &str, message: &str, status: u16, request: &str) -> Failure {
    Failure::new(code, message)
        .unwrap()
        .with_status(status)
        .unwrap()
        .with_request_id(request)
        .unwrap()
}

/// One line of a panel as a short, comparable string.
fn show(line: &Line) -> String {
    match line {
        Line::Attempt(a) => {
            let budget = a.origin.retry().map(|r| format!(" {} wait {}", r.budget(), r.wait()));
            let outcome = match &a.outcome {
                AttemptEnd::Failed(f) => format!(
                    "failed {} {:?} {:?} {:?}",
                    f.code(),
                    f.status(),
                    f.request_id(),
                    f.message()
                ),
                other => other.kind().to_owned(),
            };
            let streamed =
                if a.streamed.is_empty() { String::new() } else { format!(" [{}]", a.streamed) };
            let resumed = if a.resumed { " (resumed)" } else { "" };
            format!(
                "{}{} {}·{}#{} {} {outcome}{streamed}{resumed}",
                a.origin.label(),
                budget.unwrap_or_default(),
                a.turn,
                a.step,
                a.attempt,
                a.provider
            )
        }
        Line::NotStarted(r) => {
            format!("not started: {} {} wait {} ({})", r.plugin, r.budget(), r.wait(), r.code)
        }
        Line::Waiting(r) => {
            format!("waiting: {} {} wait {} ({})", r.plugin, r.budget(), r.wait(), r.code)
        }
        Line::RouteSwitched(r) => {
            format!("switched {} -> {} {} {}", r.from, r.to, r.code, r.reason)
        }
        Line::Compacted(c) => format!("compacted -{} kept {}", c.removed.len(), c.kept),
        Line::PluginCrashed(p) => format!("crashed {} {:?}", p.plugin, p.error),
        Line::ConfigChanged(c) => format!("config {} {:?}", c.plugin, c.changed),
        Line::TurnFailed(f) => format!("turn failed {} {:?}", f.code(), f.message()),
        other => format!("{other:?}"),
    }
}

fn lines(panel: &TurnPanel) -> Vec<String> {
    panel.lines.iter().map(show).collect()
}

fn only(log: &[Envelope]) -> TurnPanel {
    let mut all = panels(log);
    assert_eq!(all.len(), 1, "{all:#?}");
    all.remove(0)
}

#[test]
fn a_recovered_turn_shows_each_attempt_with_who_started_it() {
    let mut h = History::new();
    h.user().turn().step().request("mock").chunk();
    h.fail(full("RATE_LIMIT", "slow down", 429, "r-1"))
        .retried(Retry::official("a", 1))
        .request("mock")
        .chunk()
        .message(&[])
        .step_end()
        .completed();
    let panel = only(&h.build());
    assert_eq!(panel.summary(), "Retried 1 time this turn · recovered");
    assert_eq!(panel.ending, Ending::Recovered);
    assert_eq!(
        lines(&panel),
        [
            r#"harness 1·1#1 mock failed RATE_LIMIT Some(429) Some("r-1") "slow down" [par]"#,
            "llm-retry attempt 1/2 wait 500 ms 1·1#2 mock answered [par]",
        ]
    );
}

#[test]
fn the_attempt_after_a_restart_is_marked_resumed() {
    // A crash during the retry wait: the reopened session resumed the turn, started the retry.
    let mut h = History::new();
    h.user().turn().step().request("mock");
    h.fail(full("SERVER", "down", 503, "r-1"))
        .retry(Retry::official("a", 1))
        .resumed("retry-wait")
        .started("a", 1)
        .request("mock")
        .chunk()
        .message(&[])
        .step_end()
        .completed();
    let panel = only(&h.build());
    assert_eq!(panel.summary(), "Retried 1 time this turn · recovered");
    let resumed: Vec<bool> = panel.attempts().map(|a| a.resumed).collect();
    assert_eq!(resumed, [false, true], "only the attempt that followed the restart");
    assert_eq!(
        lines(&panel)[1],
        "llm-retry attempt 1/2 wait 500 ms 1·1#2 mock answered [par] (resumed)"
    );

    // A turn resumed without any failure (a tool's outcome was lost) still gets its panel.
    let mut h = History::new();
    h.user().turn().step().request("mock").chunk().message(&["echo"]).tool_call("c1");
    h.resumed("tool").tool_result("c1").step_end().step().answer("mock").completed();
    let panel = only(&h.build());
    assert_eq!(panel.summary(), "Not retried · recovered");
    assert!(panel.attempts().last().unwrap().resumed);
}

#[test]
fn an_exhausted_turn_ends_with_the_last_failure_verbatim() {
    let mut h = History::new();
    h.user().turn().step().request("mock");
    h.fail(full("SERVER", "busy one", 503, "r-1")).retried(Retry::official("a", 1));
    h.request("mock");
    h.fail(Failure::new("TIMEOUT", "busy two").unwrap())
        .retried(Retry::official("a", 2).delay(1000.0));
    h.request("mock");
    let last = full("SERVER", "  busy\nthree <b>&</b>  ", 503, "r-3");
    h.fail(last.clone()).step_end().turn_end(TurnEndReason::Error { failure: last });
    let panel = only(&h.build());
    assert_eq!(panel.summary(), "Retried 2 times this turn · finally failed with SERVER");
    assert_eq!(
        lines(&panel),
        [
            r#"harness 1·1#1 mock failed SERVER Some(503) Some("r-1") "busy one""#,
            r#"llm-retry attempt 1/2 wait 500 ms 1·1#2 mock failed TIMEOUT None None "busy two""#,
            r#"llm-retry attempt 2/2 wait 1000 ms 1·1#3 mock failed SERVER Some(503) Some("r-3") "  busy\nthree <b>&</b>  ""#,
        ],
        "no extra line: the turn's failure is the last attempt's"
    );
}

#[test]
fn cancelled_turns_keep_the_retry_whose_wait_was_cut_short() {
    // Cancelled during the first retry's wait: the retry was scheduled, its wait cut short.
    let mut h = History::new();
    h.user().turn().step().request("mock");
    h.fail(Failure::new("SERVER", "down").unwrap())
        .retry(Retry::official("a", 1).delay(10000.0))
        .wait(100)
        .step_end()
        .turn_end(TurnEndReason::Aborted { cause: CancelCause::User });
    let panel = only(&h.build());
    assert_eq!(panel.summary(), "Retried 1 time this turn · cancelled during the wait");
    assert_eq!((panel.retries, panel.retried()), (0, 1), "no attempt after the first");
    assert_eq!(
        lines(&panel),
        [
            r#"harness 1·1#1 mock failed SERVER None None "down""#,
            "not started: llm-retry attempt 1/2 wait 10000 ms (SERVER)",
        ]
    );

    // Cancelled while the retried attempt ran.
    let mut h = History::new();
    h.user().turn().step().request("mock");
    h.fail(Failure::new("SERVER", "down").unwrap())
        .retried(Retry::official("a", 1))
        .request("mock")
        .chunk()
        .step_end()
        .turn_end(TurnEndReason::Aborted { cause: CancelCause::Disposed });
    let panel = only(&h.build());
    assert_eq!(panel.summary(), "Retried 1 time this turn · cancelled: disposed");
    assert_eq!(
        lines(&panel)[1],
        "llm-retry attempt 1/2 wait 500 ms 1·1#2 mock cancelled [par]",
        "what it streamed before the cancel is kept"
    );
}

#[test]
fn a_mixed_turn_names_every_plugin_and_trace() {
    let mut h = History::new();
    h.user().turn().step().request("mock");
    h.fail(Failure::new("RATE_LIMIT", "one").unwrap()).retried(Retry::official("a", 1));
    h.request("mock");
    h.fail(Failure::new("RATE_LIMIT", "two").unwrap()).retried(Retry::official("a", 2));
    h.request("mock");
    h.fail(Failure::new("RATE_LIMIT", "three").unwrap())
        .crashed()
        .retried(Retry::auto("b", 1).delay(2000.0));
    h.request("mock");
    // auto-retry's next wait is cut short (switched off); always mode takes over.
    h.fail(Failure::new("PROVIDER_ERROR", "four").unwrap())
        .retry(Retry::auto("b", 2))
        .config_changed()
        .retried(Retry::always("c", 1).delay(0.5));
    h.request("mock");
    h.fail(Failure::new("QUOTA", "five").unwrap()).switched("backup", "eager");
    h.request("backup");
    h.fail(Failure::new("CONTEXT_WINDOW_EXCEEDED", "six").unwrap()).compacted();
    h.request("backup");
    h.fail(Failure::new("SERVER", "seven").unwrap());
    // A plugin that retried without writing anything.
    h.request("backup").message(&[]).step_end().completed();

    let panel = only(&h.build());
    assert_eq!(panel.summary(), "Retried 7 times this turn · recovered");
    assert_eq!(
        lines(&panel),
        [
            r#"harness 1·1#1 mock failed RATE_LIMIT None None "one""#,
            r#"llm-retry attempt 1/2 wait 500 ms 1·1#2 mock failed RATE_LIMIT None None "two""#,
            r#"llm-retry attempt 2/2 wait 500 ms 1·1#3 mock failed RATE_LIMIT None None "three""#,
            r#"crashed auto-retry "boom""#,
            r#"auto-retry attempt 1/3 wait 2000 ms 1·1#4 mock failed PROVIDER_ERROR None None "four""#,
            r#"config auto-retry ["enabled"]"#,
            "not started: auto-retry attempt 2/3 wait 1000 ms (PROVIDER_ERROR)",
            r#"llm-retry attempt 1/∞ wait 0.5 ms 1·1#5 mock failed QUOTA None None "five""#,
            "switched mock -> backup QUOTA eager",
            r#"fallback 1·1#6 backup failed CONTEXT_WINDOW_EXCEEDED None None "six""#,
            "compacted -1 kept 2",
            r#"compaction 1·1#7 backup failed SERVER None None "seven""#,
            "unrecorded 1·1#8 backup answered",
        ]
    );
    let origins: Vec<&str> = panel.attempts().map(|a| a.origin.label()).collect();
    assert_eq!(
        origins,
        [
            "harness",
            "llm-retry",
            "llm-retry",
            "auto-retry",
            "llm-retry",
            "fallback",
            "compaction",
            "unrecorded"
        ]
    );
}

#[test]
fn only_turns_that_retried_or_failed_get_a_panel() {
    let mut h = History::new();
    // Turn 1: clean, with a tool step.
    h.user().turn().step().request("mock").message(&["c"]).tool_call("c").tool_result("c");
    h.step_end().step().answer("mock").completed().idle();
    // Turn 2: cancelled while streaming, nothing failed.
    h.user().turn().step().request("mock").chunk().step_end();
    h.turn_end(TurnEndReason::Aborted { cause: CancelCause::User }).idle();
    // Turn 3: fails without retry.
    h.user().turn().step().request("mock");
    let auth = full("AUTH", "who are you", 401, "r-9");
    h.fail(auth.clone()).step_end().turn_end(TurnEndReason::Error { failure: auth });
    h.idle();
    // Turn 4: the second step retries once and recovers.
    h.user().turn().step().request("mock").message(&["d"]).tool_call("d").tool_result("d");
    h.step_end().step().request("mock");
    h.fail(Failure::new("SERVER", "x").unwrap()).retried(Retry::official("z", 1));
    h.answer("mock").completed();

    let all = panels(&h.build());
    let summaries: Vec<(u32, String)> = all.iter().map(|p| (p.turn, p.summary())).collect();
    assert_eq!(
        summaries,
        [
            (3, "Not retried · failed with AUTH".to_owned()),
            (4, "Retried 1 time this turn · recovered".to_owned()),
        ]
    );
    assert_eq!(
        lines(&all[1]),
        [
            "harness 4·1#1 mock answered",
            r#"harness 4·2#1 mock failed SERVER None None "x""#,
            "llm-retry attempt 1/2 wait 500 ms 4·2#2 mock answered [par]",
        ],
        "every attempt of the turn, the clean step's too"
    );
}

#[test]
fn endings_without_a_provider_failure_are_still_told() {
    // A tool error ends the turn: no attempt failed, the turn did.
    let mut h = History::new();
    h.user().turn().step().request("mock");
    h.fail(Failure::new("SERVER", "x").unwrap()).retried(Retry::official("a", 1));
    h.request("mock").message(&["c"]).tool_call("c");
    let tool = Failure::new("TOOL_ERROR", "echo: boom").unwrap();
    h.step_end().turn_end(TurnEndReason::Error { failure: tool });
    // A crash left turn 2 open; reopening closed it.
    h.user().turn().step().request("mock");
    h.fail(Failure::new("SERVER", "y").unwrap()).retried(Retry::official("b", 1));
    h.request("mock").step_end().turn_end(TurnEndReason::Interrupted);
    // Turn 3 is still running at the end of the log, waiting for its retry.
    h.user().turn().step().request("mock");
    h.fail(Failure::new("SERVER", "z").unwrap()).retry(Retry::official("c", 1));

    let all = panels(&h.build());
    let summaries: Vec<String> = all.iter().map(TurnPanel::summary).collect();
    assert_eq!(
        summaries,
        [
            "Retried 1 time this turn · finally failed with TOOL_ERROR",
            "Retried 1 time this turn · interrupted: the process stopped during the turn",
            "Retried 1 time this turn · still running",
        ]
    );
    assert_eq!(lines(&all[0]).last().unwrap(), r#"turn failed TOOL_ERROR "echo: boom""#);
    assert_eq!(
        lines(&all[1]).last().unwrap(),
        "llm-retry attempt 1/2 wait 500 ms 2·1#2 mock interrupted"
    );
    assert_eq!(
        lines(&all[2]),
        [
            r#"harness 3·1#1 mock failed SERVER None None "z""#,
            "waiting: llm-retry attempt 1/2 wait 500 ms (SERVER)",
        ],
        "the log ends during the wait: the retry waits, it was not cut short"
    );
}

#[test]
fn a_broken_log_is_shown_as_far_as_it_goes() {
    let mut h = History::new();
    h.user().turn().step();
    // An error for an attempt that never started, then a turn/start inside the open turn.
    h.attempt = 4;
    h.fail(Failure::new("SERVER", "orphan").unwrap());
    h.turn();
    let all = panels(&h.build());
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].summary(), "Not retried · still running");
    assert_eq!(lines(&all[0]), [r#"unrecorded 1·1#4 mock failed SERVER None None "orphan""#]);
    assert!(panels(&[]).is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Over valid logs of every shape: every attempt of a turn with a panel is in it once, in log
    /// order; every turn with a failed attempt or a retry has one; "retried" counts the attempts
    /// that are not the first of their step.
    #[test]
    fn panels_account_for_every_attempt(choices in prop::collection::vec(any::<u8>(), 0..200)) {
        let log = generate(&choices);
        let all = panels(&log);
        let turns: Vec<u32> = all.iter().map(|p| p.turn).collect();
        let mut sorted = turns.clone();
        sorted.dedup();
        prop_assert_eq!(&turns, &sorted);
        for turn in 1..=log.iter().filter(|e| e.kind() == "turn/start").count() as u32 {
            let starts: Vec<(u32, u32)> = log.iter().filter_map(|e| match &e.event {
                Event::RequestStart(r) if r.turn == turn => Some((r.step, r.attempt)),
                _ => None,
            }).collect();
            let failed = log.iter().any(|e| matches!(&e.event, Event::RequestError(r) if r.turn == turn));
            let retried = starts.iter().filter(|(_, attempt)| *attempt > 1).count() as u32;
            match all.iter().find(|p| p.turn == turn) {
                Some(panel) => {
                    let attempts: Vec<(u32, u32)> =
                        panel.attempts().map(|a| (a.step, a.attempt)).collect();
                    prop_assert_eq!(attempts, starts);
                    prop_assert_eq!(panel.retries, retried);
                    for a in panel.attempts() {
                        prop_assert_eq!(a.origin == Origin::Harness, a.attempt == 1);
                    }
                }
                None => prop_assert!(!failed && retried == 0, "turn {} has no panel", turn),
            }
        }
    }
}
