//! A failed write never breaks the log: for every append a session makes — its `session/start`,
//! a turn's opening events, a step's start, chunks, a failed attempt, a plugin's `llm/retry` and
//! `llm/retry-started`, the answer, a tool's call and result, a step's end, the closing batch —
//! the store fails exactly that one append (as a full disk fails the batch that does not fit and
//! takes the next, smaller one), and the session must stop there: the turn and the prompt queued
//! behind it fail naming the store's error, nothing is written after the failed append but the
//! repair a fresh session makes (as after a crash), and the session then works again.

// Helpers outside `#[test]` functions unwrap too: a failing set-up is a failing test.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use rein_runtime::clock::VirtualClock;
use rein_runtime::event::*;
use rein_runtime::plugin::Verdict;
use rein_runtime::resume::Resume;
use rein_runtime::runtime::{Route, Runtime};
use rein_runtime::session::{Session, SessionError, TurnOutcome};
use rein_runtime::store::faulty::FaultyStore;
use rein_runtime::store::memory::MemoryStore;
use rein_runtime::tool::echo::EchoTool;
use rein_testkit::log;
use rein_testkit::log::assert_valid;
use rein_testkit::plugins::{TestPlugin, Trace, first_retry};
use rein_testkit::scripted::{Scripted, call, fail_streamed, reply};

/// Writes `llm/retry` and `llm/retry-started` for the failure it is offered, then retries; a
/// refused append makes it stop.
fn retrier(trace: &Trace) -> Arc<TestPlugin> {
    TestPlugin::new("retrier", trace, |recovery, _| {
        Box::pin(async move {
            let p = &recovery.payload;
            let [scheduled, started] = first_retry(p, "retrier");
            if p.log.append(vec![scheduled]).await.is_err()
                || p.log.append(vec![started]).await.is_err()
            {
                return Verdict::Stop;
            }
            Verdict::Retry
        })
    })
}

/// What one run saw: the outcomes of the two prompts sent back to back, and of a third sent
/// once the session was quiet again.
struct Run {
    opened: Result<(), SessionError>,
    first: Result<TurnOutcome, SessionError>,
    queued: Result<TurnOutcome, SessionError>,
    after: TurnOutcome,
    events: Vec<Envelope>,
    /// The appends the store was asked for before the third prompt.
    appends: u64,
}

/// The workload, on a store that fails its append number `failing` (none when `None`): turn 1
/// fails its first attempt after a chunk, is retried by `retrier`, calls `echo`, and answers in
/// its second step; a second prompt waits behind it; a third comes once the session is quiet.
async fn run(failing: Option<u64>) -> Run {
    let store = Arc::new(FaultyStore::new(MemoryStore::new()));
    if let Some(n) = failing {
        store.fail_append(n);
    }
    let mut script = vec![
        fail_streamed("SERVER", &["par"]),
        call(&["calling"], &[("c1", "echo", serde_json::json!({"text": "x"}))]),
        reply(&["done", "!"]),
    ];
    script.extend((0..10).map(|_| reply(&["again"])));
    let runtime = Runtime::builder()
        .validator(log::live_invariant)
        .store(store.clone())
        .clock(Arc::new(VirtualClock::start()))
        .route(Route::new("mock", Scripted::new(script)).model("m"))
        .tool(Arc::new(EchoTool))
        .plugin(retrier(&Trace::default()))
        // The repair of a turn the failure left open, as after a crash (resumed instead: the
        // crash tests of tests/resume.rs).
        .resume(Resume::Never)
        .build()
        .await
        .unwrap();
    let opened = runtime.session("s").await.map(drop);
    let session: Session = runtime.session("s").await.unwrap();
    let first = session.prompt("one").unwrap();
    let queued = session.prompt("two").unwrap();
    let (first, queued) = (first.outcome().await, queued.outcome().await);
    // Whatever woke to repair the log settles (virtual time jumps ahead).
    tokio::time::sleep(Duration::from_secs(60)).await;
    let appends = store.appends();
    let after = session.ask("three").await.unwrap();
    runtime.shutdown().await;
    assert_eq!((runtime.census().actors(), runtime.census().tasks()), (0, 0));
    let events = store.inner().events("s");
    Run { opened, first, queued, after, events, appends }
}

fn turns_started(events: &[Envelope]) -> Vec<u32> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Event::TurnStart(t) => Some(t.turn),
            _ => None,
        })
        .collect()
}

/// The user messages of a log, in order.
fn prompts(events: &[Envelope]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Event::UserMessage(m) => Some(m.text.as_str()),
            _ => None,
        })
        .collect()
}

fn log_failed(outcome: &Result<TurnOutcome, SessionError>) -> bool {
    matches!(outcome, Err(SessionError::LogFailed { session, message })
        if session == "s" && message.contains("no space left on device (fault injected"))
}

#[tokio::test(start_paused = true)]
async fn a_failed_append_at_any_site_stops_the_session_there_and_its_next_open_repairs_it() {
    let clean = run(None).await;
    assert!(clean.opened.is_ok());
    assert_eq!(clean.first.as_ref().unwrap().reason, TurnEndReason::Completed);
    assert_eq!(clean.queued.as_ref().unwrap().turn, 2);
    assert_eq!(clean.after.turn, 3);
    assert_valid(&clean.events);
    let kinds: std::collections::BTreeSet<&str> = clean.events.iter().map(|e| e.kind()).collect();
    for site in [
        "session/start",
        "user/message",
        "turn/start",
        "step/start",
        "request/start",
        "assistant/chunk",
        "request/error",
        "llm/retry",
        "llm/retry-started",
        "assistant/message",
        "tool/call",
        "tool/result",
        "step/end",
        "turn/end",
        "agent/idle",
    ] {
        assert!(kinds.contains(site), "the workload appends {site}");
    }

    assert!(clean.appends >= 12, "{} appends", clean.appends);
    for failing in 0..clean.appends {
        let run = run(Some(failing)).await;
        let at = format!("append {failing} failed");
        assert_valid(&run.events);
        if failing == 0 {
            // The new log's `session/start`: the open fails, and the next call opens it.
            assert!(matches!(run.opened, Err(SessionError::Open { .. })), "{at}");
            assert_eq!(turns_started(&run.events), [1, 2, 3], "{at}");
            continue;
        }
        assert!(run.opened.is_ok(), "{at}");
        match (&run.first, &run.queued) {
            // Turn 1's appends: it fails, and the prompt queued behind it never starts.
            (first, queued) if log_failed(first) => {
                assert!(log_failed(queued), "{at}: the queued prompt ran: {queued:?}");
                let ends: Vec<&TurnEnd> = run
                    .events
                    .iter()
                    .filter_map(|e| match &e.event {
                        Event::TurnEnd(end) => Some(end),
                        _ => None,
                    })
                    .collect();
                let started = turns_started(&run.events);
                if prompts(&run.events) == ["one", "three"] {
                    // It had started: the fresh session's repair closed it.
                    assert_eq!(ends[0].turn, 1, "{at}");
                    assert_eq!(ends[0].reason, TurnEndReason::Interrupted, "{at}");
                    assert_eq!(started, [1, 2], "{at}: the third prompt is turn 2");
                } else {
                    // Its opening events were the append that failed: nothing of it was written.
                    assert_eq!(prompts(&run.events), ["three"], "{at}");
                    assert_eq!(started, [1], "{at}: the third prompt is turn 1");
                }
            }
            // Turn 2's appends (turn 1 was closed durably first).
            (Ok(first), queued) => {
                assert_eq!(first.reason, TurnEndReason::Completed, "{at}");
                assert!(log_failed(queued), "{at}: {queued:?}");
                let written = prompts(&run.events);
                assert!(written == ["one", "two", "three"] || written == ["one", "three"], "{at}");
            }
            (first, queued) => panic!("{at}: {first:?} then {queued:?}"),
        }
        assert_eq!(run.after.reason, TurnEndReason::Completed, "{at}: the session works again");
        let started = turns_started(&run.events);
        let contiguous: Vec<u32> = (1..=started.len() as u32).collect();
        assert_eq!(started, contiguous, "{at}: each turn number once");
    }
}
