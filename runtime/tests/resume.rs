//! Resume after a crash (`docs/runtime-semantics.md`, "Resume after a crash"): a log a killed
//! process left — written straight to a store, as it left it — is opened by a fresh runtime,
//! which continues the open turn from its tail: the rest of a retry wait (virtual time), the cut
//! attempt recorded failed and offered, the failure the waterfall was deciding offered again, a
//! tool that was running answered "outcome unknown" and never run again, or the loop. Every
//! resumed log passes the invariant checker; `Resume::Never`, `maxResumes` and a gone route
//! close the turn `interrupted` as before; a cancel during a resumed wait aborts it.

// Helpers outside `#[test]` functions unwrap too: a failing set-up is a failing test.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use rein_runtime::BoxFuture;
use rein_runtime::clock::{Clock, VirtualClock};
use rein_runtime::event::*;
use rein_runtime::failure::Failure;
use rein_runtime::plugin::Verdict;
use rein_runtime::provider::{Adapter, Message, ToolSpec};
use rein_runtime::resume::Resume;
use rein_runtime::retry_policy::RetryPolicy;
use rein_runtime::runtime::{Route, Runtime, RuntimeBuilder};
use rein_runtime::session::Session;
use rein_runtime::store::SessionStore;
use rein_runtime::store::memory::MemoryStore;
use rein_runtime::tool::{Tool, ToolOutcome};
use rein_testkit::generate::generate;
use rein_testkit::log::{self, assert_valid, kinds, turn_ends};
use rein_testkit::plugins::{TestPlugin, Trace};
use rein_testkit::scripted::{Scripted, call, fail_streamed, reply};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// A crash's tail: `(time, event)`s.
type Tail = Vec<(u64, Event)>;

/// The delay every scheduled retry of these tests waits.
const DELAY_MS: u64 = 20_000;

/// The virtual clock, `offset` ms later: the restarted process's clock has moved on since the
/// log was written.
struct Later(VirtualClock, u64);

impl Clock for Later {
    fn now_ms(&self) -> u64 {
        self.1 + self.0.now_ms()
    }
}

/// A tool that counts its runs.
#[derive(Default)]
struct Counting(AtomicUsize);

impl Tool for Counting {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("count", "counts its runs")
    }
    fn call(&self, _: Value, _: CancellationToken) -> BoxFuture<'static, ToolOutcome> {
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        Box::pin(async move { ToolOutcome::Output(format!("run {n}")) })
    }
}

/// A retry plugin that continues its chain from the log (`retry_chains()`, as the official
/// plugins do): `llm/retry` (retry = the chain's last + 1, its retryId kept), a wait of
/// [`DELAY_MS`], `llm/retry-started`, `Retry`.
fn chain_retrier(trace: &Trace) -> Arc<TestPlugin> {
    TestPlugin::new("chain", trace, |recovery, _| {
        Box::pin(async move {
            let p = &recovery.payload;
            let policy = p.retry_policy.clone().unwrap();
            let key = policy.policy_key();
            let chains = p.log.retry_chains().await.unwrap();
            let (retry_id, retry) = match chains.get(&p.provider, &key) {
                Some(chain) => (chain.retry_id.clone(), chain.retry + 1),
                None => (format!("r-{}-{}", p.turn, p.step), 1),
            };
            if policy.max_retries().is_some_and(|max| retry > max) {
                return Verdict::Stop;
            }
            let scheduled =
                Event::LlmRetry(scheduled(&retry_id, p.turn, p.step, retry, &p.failure));
            if p.log.append(vec![scheduled]).await.is_err() {
                return Verdict::Stop;
            }
            if recovery.wait(Duration::from_millis(DELAY_MS)).await.is_err() {
                return Verdict::Stop;
            }
            let started = Event::LlmRetryStarted(LlmRetryStarted {
                retry_id,
                turn: p.turn,
                step: p.step,
                retry,
            });
            if p.log.append(vec![started]).await.is_err() {
                return Verdict::Stop;
            }
            Verdict::Retry
        })
    })
}

/// The `llm/retry` the chain retrier writes (the route's default policy).
fn scheduled(retry_id: &str, turn: u32, step: u32, retry: u64, failure: &Failure) -> LlmRetry {
    let policy = RetryPolicy::default();
    LlmRetry {
        retry_id: retry_id.into(),
        turn,
        step,
        provider: "mock".into(),
        plugin: "chain".into(),
        mode: policy.mode().into(),
        policy_key: policy.policy_key(),
        retry,
        max_retries: policy.max_retries(),
        delay_ms: DELAY_MS as f64,
        failure: failure.clone(),
    }
}

fn server() -> Failure {
    Failure::new("SERVER", "SERVER happened").unwrap()
}

/// What a crashed process left: `session/start`, `user/message "hello"`, `turn/start 1`, then
/// `events`, each `(time, event)`.
async fn crashed(store: &MemoryStore, events: Tail) -> Vec<Envelope> {
    let mut all = vec![
        (0, Event::SessionStart(SessionStart { session: "s".into(), format: LOG_FORMAT })),
        (0, Event::UserMessage(UserMessage { text: "hello".into() })),
        (0, Event::TurnStart(TurnStart { turn: 1 })),
    ];
    all.extend(events);
    let envelopes: Vec<Envelope> = all
        .into_iter()
        .enumerate()
        .map(|(seq, (time, event))| Envelope { seq: seq as u64, time, event })
        .collect();
    store.append("s", &envelopes).await.unwrap();
    envelopes
}

fn step_start() -> Event {
    Event::StepStart(StepRef { turn: 1, step: 1 })
}
fn request(attempt: u32) -> Event {
    Event::RequestStart(RequestStart {
        turn: 1,
        step: 1,
        attempt,
        provider: "mock".into(),
        model: "m".into(),
    })
}
fn chunk(attempt: u32, text: &str) -> Event {
    Event::AssistantChunk(AssistantChunk { turn: 1, step: 1, attempt, text: text.into() })
}
fn error(attempt: u32) -> Event {
    Event::RequestError(RequestError {
        turn: 1,
        step: 1,
        attempt,
        provider: "mock".into(),
        failure: server(),
    })
}
fn count_call(id: &str) -> ToolCall {
    ToolCall { id: id.into(), name: "count".into(), arguments: json!({}) }
}

/// A runtime over `store` whose clock reads `now` (ms) as it starts, with `adapter` on `mock`,
/// the counting tool and the chain retrier.
fn builder(
    store: &MemoryStore,
    adapter: Arc<dyn Adapter>,
    now: u64,
    tool: &Arc<Counting>,
) -> RuntimeBuilder {
    Runtime::builder()
        .validator(log::live_invariant)
        .store(Arc::new(store.clone()))
        .clock(Arc::new(Later(VirtualClock::start(), now)))
        .route(Route::new("mock", adapter).model("m"))
        .tool(Arc::clone(tool) as Arc<dyn Tool>)
        .plugin(chain_retrier(&Trace::default()))
}

/// Opens session `s` (which resumes its open turn) and waits until its log is idle again.
async fn reopen(builder: RuntimeBuilder, store: &MemoryStore) -> (Runtime, Session, Vec<Envelope>) {
    let runtime = builder.build().await.unwrap();
    let session = runtime.session("s").await.unwrap();
    let events = settle(store).await;
    (runtime, session, events)
}

/// The log once its last event is `agent/idle` (virtual time jumps ahead while it is not).
async fn settle(store: &MemoryStore) -> Vec<Envelope> {
    for _ in 0..10_000 {
        let events = store.events("s");
        if events.last().is_some_and(|e| e.kind() == "agent/idle") {
            return events;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the session never settled: {:?}", kinds(&store.events("s")));
}

async fn finish(runtime: Runtime, store: &MemoryStore) -> Vec<Envelope> {
    runtime.shutdown().await;
    assert_eq!((runtime.census().actors(), runtime.census().tasks()), (0, 0));
    let events = store.events("s");
    assert_valid(&events);
    events
}

fn resumed(step: u32, pending: &str) -> Event {
    Event::TurnResumed(TurnResumed { turn: 1, step, pending: pending.into() })
}

#[tokio::test(start_paused = true)]
async fn a_pending_retry_wait_waits_only_what_is_left_then_continues_its_chain() {
    let store = MemoryStore::new();
    // Scheduled at 1000 for 20 s; the process died; it restarts at 5000: 16 s are left.
    let before = crashed(
        &store,
        vec![
            (0, step_start()),
            (0, request(1)),
            (0, chunk(1, "par")),
            (1000, error(1)),
            (1000, Event::LlmRetry(scheduled("r-1", 1, 1, 1, &server()))),
        ],
    )
    .await;
    let adapter = Scripted::new(vec![fail_streamed("SERVER", &["again"]), reply(&["do", "ne"])]);
    let tool = Arc::new(Counting::default());
    let (runtime, session, _) = reopen(builder(&store, adapter.clone(), 5000, &tool), &store).await;
    drop(session);
    let events = finish(runtime, &store).await;
    assert_eq!(events[..before.len()], before[..], "the crashed log is kept as it was");
    let after = &events[before.len()..];
    assert_eq!(after[0].event, resumed(1, "retry-wait"), "turn/resumed first");
    assert_eq!(
        kinds(after),
        [
            "turn/resumed",
            "llm/retry-started",
            "request/start",
            "assistant/chunk",
            "request/error",
            "llm/retry",
            "llm/retry-started",
            "request/start",
            "assistant/chunk",
            "assistant/chunk",
            "assistant/message",
            "step/end",
            "turn/end",
            "agent/idle",
        ]
    );
    // Only the rest of the wait: the retry starts at its deadline (1000 + 20000), not 20 s after
    // the restart.
    let Event::LlmRetryStarted(started) = &after[1].event else { unreachable!() };
    assert_eq!((started.retry_id.as_str(), started.retry), ("r-1", 1));
    assert_eq!(after[1].time, 21_000);
    assert_eq!(after[2].time, 21_000, "the next attempt starts at once");
    // The attempt numbering and the chain continue: attempt 2, then retry 2 of the same id.
    let Event::RequestStart(second) = &after[2].event else { unreachable!() };
    assert_eq!(second.attempt, 2);
    let Event::LlmRetry(retry) = &after[5].event else { unreachable!() };
    assert_eq!((retry.retry_id.as_str(), retry.retry), ("r-1", 2), "counts intact");
    let Event::RequestStart(third) = &after[7].event else { unreachable!() };
    assert_eq!(third.attempt, 3);
    assert_eq!(turn_ends(&events), [TurnEndReason::Completed]);
    // The model saw what it would have seen without the crash.
    for request in adapter.seen() {
        assert_eq!(request.request.messages, [Message::User { text: "hello".into() }]);
    }
    // The panel marks the attempt that followed the restart.
    let panel = &rein_runtime::panel::panels(&events)[0];
    let marks: Vec<bool> = panel.attempts().map(|a| a.resumed).collect();
    assert_eq!(marks, [false, true, false]);
}

#[tokio::test(start_paused = true)]
async fn the_resumed_turn_is_handed_out_once_with_its_events_from_turn_resumed_and_its_outcome() {
    let store = MemoryStore::new();
    let before = crashed(
        &store,
        vec![
            (0, step_start()),
            (0, request(1)),
            (1000, error(1)),
            (1000, Event::LlmRetry(scheduled("r-1", 1, 1, 1, &server()))),
        ],
    )
    .await;
    let adapter = Scripted::new(vec![reply(&["do", "ne"])]);
    let tool = Arc::new(Counting::default());
    let runtime = builder(&store, adapter, 5000, &tool).build().await.unwrap();
    let session = runtime.session("s").await.unwrap();
    let mut handle = session.resumed().await.unwrap().expect("the open turn was resumed");
    assert!(session.resumed().await.unwrap().is_none(), "handed out once");
    let mut streamed = Vec::new();
    while let Some(event) = handle.next_event().await {
        streamed.push(event);
    }
    assert_eq!(handle.turn(), Some(1));
    assert_eq!(streamed[0].seq, before.len() as u64, "from turn/resumed on");
    assert_eq!(streamed[0].event, resumed(1, "retry-wait"));
    assert_eq!(streamed.last().unwrap().kind(), "turn/end");
    let outcome = handle.outcome().await.unwrap();
    assert_eq!((outcome.turn, outcome.reason), (1, TurnEndReason::Completed));
    // A session that resumed nothing has nothing to hand out.
    let fresh = runtime.session("t").await.unwrap();
    assert!(fresh.resumed().await.unwrap().is_none());
    drop((session, fresh));
    let events = finish(runtime, &store).await;
    assert_eq!(&events[before.len()..before.len() + streamed.len()], &streamed[..]);
}

#[tokio::test(start_paused = true)]
async fn a_retry_whose_deadline_passed_while_the_process_was_down_starts_at_once() {
    let store = MemoryStore::new();
    crashed(
        &store,
        vec![
            (0, step_start()),
            (0, request(1)),
            (1000, error(1)),
            (1000, Event::LlmRetry(scheduled("r-1", 1, 1, 1, &server()))),
        ],
    )
    .await;
    let tool = Arc::new(Counting::default());
    let started_at = tokio::time::Instant::now();
    let adapter = Scripted::new(vec![reply(&["fine"])]);
    let (runtime, _session, events) = reopen(builder(&store, adapter, 90_000, &tool), &store).await;
    let started = events.iter().find(|e| e.kind() == "llm/retry-started").unwrap();
    assert_eq!(started.time, 90_000, "no wait: the deadline (21000) passed");
    assert!(started_at.elapsed() < Duration::from_secs(1), "{:?}", started_at.elapsed());
    finish(runtime, &store).await;
}

#[tokio::test(start_paused = true)]
async fn an_attempt_the_crash_cut_is_recorded_failed_and_offered_to_the_waterfall() {
    let store = MemoryStore::new();
    let before =
        crashed(&store, vec![(0, step_start()), (0, request(1)), (0, chunk(1, "hal"))]).await;
    let adapter = Scripted::new(vec![reply(&["whole"])]);
    let tool = Arc::new(Counting::default());
    let (runtime, _session, _) = reopen(builder(&store, adapter.clone(), 100, &tool), &store).await;
    let events = finish(runtime, &store).await;
    let after = &events[before.len()..];
    assert_eq!(after[0].event, resumed(1, "attempt"));
    let Event::RequestError(cut) = &after[1].event else { panic!("{:?}", kinds(after)) };
    assert_eq!(cut.attempt, 1);
    assert_eq!(cut.failure.code(), "TRANSPORT");
    assert_eq!(cut.failure.message(), "interrupted: the process stopped during this attempt");
    // The waterfall took it like any failure: a retry (a new chain), then attempt 2.
    assert_eq!(
        kinds(&after[2..]),
        [
            "llm/retry",
            "llm/retry-started",
            "request/start",
            "assistant/chunk",
            "assistant/message",
            "step/end",
            "turn/end",
            "agent/idle"
        ]
    );
    let Event::LlmRetry(retry) = &after[2].event else { unreachable!() };
    assert_eq!((retry.retry, retry.failure.code()), (1, "TRANSPORT"));
    assert!(
        matches!(&after[6].event, Event::AssistantMessage(m) if m.text == "whole"),
        "the cut attempt's chunk is not part of the answer"
    );
    assert_eq!(adapter.seen()[0].request.messages, [Message::User { text: "hello".into() }]);
    assert_eq!(turn_ends(&events), [TurnEndReason::Completed]);
}

#[tokio::test(start_paused = true)]
async fn without_a_plugin_to_retry_it_the_cut_attempt_fails_the_turn() {
    let store = MemoryStore::new();
    crashed(&store, vec![(0, step_start()), (0, request(1))]).await;
    let builder = Runtime::builder()
        .validator(log::live_invariant)
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .route(Route::new("mock", Scripted::new(vec![])).model("m"));
    let (runtime, _session, _) = reopen(builder, &store).await;
    let events = finish(runtime, &store).await;
    let ends = turn_ends(&events);
    let [TurnEndReason::Error { failure }] = &ends[..] else { panic!("{ends:?}") };
    assert_eq!(failure.code(), "TRANSPORT");
}

#[tokio::test(start_paused = true)]
async fn a_failure_the_waterfall_was_deciding_is_offered_again() {
    let store = MemoryStore::new();
    let before = crashed(&store, vec![(0, step_start()), (0, request(1)), (10, error(1))]).await;
    let trace = Trace::default();
    let asked = trace.clone();
    let plugin = TestPlugin::new("once", &trace, move |recovery, _| {
        let p = &recovery.payload;
        asked.push(format!("{} {} {}", p.attempt, p.provider, p.failure.code()));
        Box::pin(async { Verdict::Retry })
    });
    let builder = Runtime::builder()
        .validator(log::live_invariant)
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .route(Route::new("mock", Scripted::new(vec![reply(&["ok"])])).model("m"))
        .plugin(plugin);
    let (runtime, _session, _) = reopen(builder, &store).await;
    let events = finish(runtime, &store).await;
    let after = &events[before.len()..];
    assert_eq!(after[0].event, resumed(1, "waterfall"));
    assert!(trace.take().contains(&"1 mock SERVER".to_owned()), "the same failure, again");
    assert_eq!(
        kinds(&after[1..3]),
        ["request/start", "assistant/chunk"],
        "no second request/error"
    );
    let Event::RequestStart(next) = &after[1].event else { unreachable!() };
    assert_eq!(next.attempt, 2);
    assert_eq!(turn_ends(&events), [TurnEndReason::Completed]);
}

#[tokio::test(start_paused = true)]
async fn a_tool_that_was_running_gets_an_unknown_result_and_is_never_run_again() {
    let store = MemoryStore::new();
    let answer = AssistantMessage {
        turn: 1,
        step: 1,
        text: "calling".into(),
        tool_calls: Some(vec![count_call("c1"), count_call("c2")]),
        usage: None,
    };
    let before = crashed(
        &store,
        vec![
            (0, step_start()),
            (0, request(1)),
            (0, chunk(1, "calling")),
            (0, Event::AssistantMessage(answer)),
            (
                0,
                Event::ToolCall(ToolCallEvent {
                    turn: 1,
                    step: 1,
                    id: "c1".into(),
                    name: "count".into(),
                    arguments: json!({}),
                }),
            ),
        ],
    )
    .await;
    let adapter = Scripted::new(vec![reply(&["done"])]);
    let tool = Arc::new(Counting::default());
    let (runtime, _session, _) = reopen(builder(&store, adapter.clone(), 0, &tool), &store).await;
    let events = finish(runtime, &store).await;
    let after = &events[before.len()..];
    assert_eq!(after[0].event, resumed(1, "tool"));
    assert_eq!(
        after[1].event,
        Event::ToolResult(ToolResult {
            turn: 1,
            step: 1,
            id: "c1".into(),
            output: "outcome unknown: the process stopped while this tool ran".into(),
            is_error: true,
        })
    );
    // c1 is not run again; c2, which never started, runs once.
    assert_eq!(tool.0.load(Ordering::SeqCst), 1);
    assert_eq!(
        kinds(&after[1..]),
        [
            "tool/result",
            "tool/call",
            "tool/result",
            "step/end",
            "step/start",
            "request/start",
            "assistant/chunk",
            "assistant/message",
            "step/end",
            "turn/end",
            "agent/idle"
        ]
    );
    // Step 2's request holds the history as it would be, with the unknown outcome.
    let messages = &adapter.seen()[0].request.messages;
    assert_eq!(messages[0], Message::User { text: "hello".into() });
    assert_eq!(
        messages[2],
        Message::Tool {
            id: "c1".into(),
            output: "outcome unknown: the process stopped while this tool ran".into(),
            is_error: true
        }
    );
    assert_eq!(
        messages[3],
        Message::Tool { id: "c2".into(), output: "run 1".into(), is_error: false }
    );
    assert_eq!(turn_ends(&events), [TurnEndReason::Completed]);
}

#[tokio::test(start_paused = true)]
async fn anything_else_continues_the_loop() {
    // (the crash's tail, the steps the resumed turn runs)
    let answered = || {
        Event::AssistantMessage(AssistantMessage {
            turn: 1,
            step: 1,
            text: "all".into(),
            tool_calls: None,
            usage: None,
        })
    };
    let cases: Vec<(Tail, u32, Vec<&str>)> = vec![
        // Before the first step.
        (vec![], 0, vec!["step/start", "request/start", "assistant/chunk", "assistant/message"]),
        // A step/start whose request/start was not written.
        (vec![(0, step_start())], 1, vec!["request/start", "assistant/chunk", "assistant/message"]),
        // The answer is written: the turn completes.
        (vec![(0, step_start()), (0, request(1)), (0, answered())], 1, vec![]),
    ];
    for (tail, step, runs) in cases {
        let store = MemoryStore::new();
        let before = crashed(&store, tail).await;
        let adapter = Scripted::new(vec![reply(&["fine"])]);
        let tool = Arc::new(Counting::default());
        let (runtime, _session, _) = reopen(builder(&store, adapter, 0, &tool), &store).await;
        let events = finish(runtime, &store).await;
        let after = &events[before.len()..];
        assert_eq!(after[0].event, resumed(step, "loop"));
        let mut expected = vec!["turn/resumed"];
        expected.extend(runs);
        expected.extend(["step/end", "turn/end", "agent/idle"]);
        assert_eq!(kinds(after), expected);
        assert_eq!(turn_ends(&events), [TurnEndReason::Completed]);
    }
}

#[tokio::test(start_paused = true)]
async fn resumption_off_too_many_resumes_or_a_gone_route_interrupt_the_turn() {
    let again = |step| (0, resumed(step, "attempt"));
    let cut = || vec![(0, step_start()), (0, request(1))];
    let gone = Event::RequestStart(RequestStart {
        turn: 1,
        step: 1,
        attempt: 1,
        provider: "gone".into(),
        model: "m".into(),
    });
    let cases: Vec<(&str, Tail, Resume)> = vec![
        ("resumption off", cut(), Resume::Never),
        (
            "resumed 3 times already",
            [cut(), vec![again(1), again(1), again(1)]].concat(),
            Resume::default(),
        ),
        ("resumed once, at most once", [cut(), vec![again(1)]].concat(), Resume::max_resumes(1)),
        ("its route is gone", vec![(0, step_start()), (0, gone)], Resume::default()),
    ];
    for (name, tail, resume) in cases {
        let store = MemoryStore::new();
        let before = crashed(&store, tail).await;
        let tool = Arc::new(Counting::default());
        let adapter = Scripted::new(vec![reply(&["never"])]);
        let runtime =
            builder(&store, adapter.clone(), 0, &tool).resume(resume).build().await.unwrap();
        let _session = runtime.session("s").await.unwrap();
        let events = finish(runtime, &store).await;
        assert_eq!(
            kinds(&events[before.len()..]),
            ["step/end", "turn/end", "agent/idle"],
            "{name}: today's repair"
        );
        assert_eq!(turn_ends(&events), [TurnEndReason::Interrupted], "{name}");
        assert!(adapter.seen().is_empty(), "{name}: nothing ran");
    }
    // Below the limit, it resumes.
    let store = MemoryStore::new();
    crashed(&store, [cut(), vec![again(1), again(1)]].concat()).await;
    let tool = Arc::new(Counting::default());
    let (runtime, _session, events) =
        reopen(builder(&store, Scripted::new(vec![reply(&["ok"])]), 0, &tool), &store).await;
    let resumes = events.iter().filter(|e| e.kind() == "turn/resumed").count();
    assert_eq!(resumes, 3);
    finish(runtime, &store).await;
}

#[tokio::test(start_paused = true)]
async fn a_cancel_during_a_resumed_wait_aborts_it_like_a_live_one() {
    let store = MemoryStore::new();
    let before = crashed(
        &store,
        vec![
            (0, step_start()),
            (0, request(1)),
            (1000, error(1)),
            (1000, Event::LlmRetry(scheduled("r-1", 1, 1, 1, &server()))),
        ],
    )
    .await;
    let tool = Arc::new(Counting::default());
    let adapter = Scripted::new(vec![reply(&["never"])]);
    let runtime = builder(&store, adapter.clone(), 2000, &tool).build().await.unwrap();
    let session = runtime.session("s").await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let cancelled_at = tokio::time::Instant::now();
    assert!(session.cancel(CancelCause::User).await.unwrap(), "the cancel lands");
    let events = settle(&store).await;
    assert!(cancelled_at.elapsed() < Duration::from_millis(200), "{:?}", cancelled_at.elapsed());
    assert_eq!(
        kinds(&events[before.len()..]),
        ["turn/resumed", "step/end", "turn/end", "agent/idle"],
        "nothing after the cancel but the closing events"
    );
    assert_eq!(turn_ends(&events), [TurnEndReason::Aborted { cause: CancelCause::User }]);
    assert!(adapter.seen().is_empty());
    // The panel says the wait was cut short.
    let panel = &rein_runtime::panel::panels(&events)[0];
    assert_eq!(panel.summary(), "Retried 1 time this turn · cancelled during the wait");
    // The session takes the next prompt as usual.
    let next = session.ask("again").await.unwrap();
    assert_eq!((next.turn, next.reason), (2, TurnEndReason::Completed));
    finish(runtime, &store).await;
}

#[tokio::test(start_paused = true)]
async fn a_prompt_sent_while_the_resumed_turn_runs_waits_for_it() {
    let store = MemoryStore::new();
    crashed(
        &store,
        vec![
            (0, step_start()),
            (0, request(1)),
            (1000, error(1)),
            (1000, Event::LlmRetry(scheduled("r-1", 1, 1, 1, &server()))),
        ],
    )
    .await;
    let tool = Arc::new(Counting::default());
    let adapter = Scripted::new(vec![reply(&["first"]), reply(&["second"])]);
    let runtime = builder(&store, adapter, 0, &tool).build().await.unwrap();
    let session = runtime.session("s").await.unwrap();
    let next = session.ask("next").await.unwrap();
    assert_eq!((next.turn, next.reason), (2, TurnEndReason::Completed));
    let events = finish(runtime, &store).await;
    assert_eq!(turn_ends(&events), [TurnEndReason::Completed, TurnEndReason::Completed]);
}

/// Reopens a copy of `log` cut after its first `cut` events with a runtime that answers every
/// attempt, and returns the log it leaves.
async fn reopen_cut(log: &[Envelope], cut: usize) -> Vec<Envelope> {
    let store = MemoryStore::new();
    let last = log[..cut].last().map_or(0, |e| e.time);
    store.append("s", &log[..cut]).await.unwrap();
    let tool = Arc::new(Counting::default());
    let adapter = Scripted::always(reply(&["fine"]));
    let runtime = Runtime::builder()
        .validator(log::live_invariant)
        .store(Arc::new(store.clone()))
        .clock(Arc::new(Later(VirtualClock::start(), last)))
        .route(Route::new("mock", adapter.clone()).model("m"))
        .route(Route::new("backup", adapter).model("m"))
        .tool(Arc::new(rein_runtime::tool::echo::EchoTool))
        .tool(tool as Arc<dyn Tool>)
        .plugin(chain_retrier(&Trace::default()))
        .build()
        .await
        .unwrap();
    let _session = runtime.session("s").await.unwrap();
    // Until every turn is closed (its closing batch carries `agent/idle`).
    let count = |events: &[Envelope], kind| events.iter().filter(|e| e.kind() == kind).count();
    for _ in 0..10_000 {
        let events = store.events("s");
        if count(&events, "turn/start") == count(&events, "turn/end") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    runtime.shutdown().await;
    store.events("s")
}

fn paused() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// A log of turns cut at any event — whatever was in flight — and reopened: the log the
    /// resumed (or interrupted) turn leaves passes the checker as a finished log.
    #[test]
    fn a_log_cut_at_any_event_reopens_into_a_valid_log(
        choices in proptest::collection::vec(any::<u8>(), 0..64),
        at in any::<proptest::sample::Index>(),
    ) {
        let log = generate(&choices);
        let cut = 1 + at.index(log.len());
        let events = paused().block_on(reopen_cut(&log, cut));
        let violations = rein_invariant::check_finished_log(&events);
        prop_assert!(violations.is_empty(), "cut at {cut} of {:?}: {violations:#?}\n{:?}", kinds(&log), kinds(&events));
        prop_assert_eq!(&events[..cut], &log[..cut], "the crash's log is kept");
    }
}

#[tokio::test(start_paused = true)]
async fn a_real_turn_cut_at_every_event_reopens_into_a_valid_log() {
    // A turn the runtime ran: a failure, the chain's retry, a tool call, a second step.
    let store = MemoryStore::new();
    let tool = Arc::new(Counting::default());
    let adapter = Scripted::new(vec![
        fail_streamed("SERVER", &["x"]),
        call(&["c"], &[("c1", "count", json!({})), ("c2", "count", json!({}))]),
        reply(&["done"]),
    ]);
    let runtime = builder(&store, adapter, 0, &tool).build().await.unwrap();
    let session = runtime.session("s").await.unwrap();
    assert_eq!(session.ask("hello").await.unwrap().reason, TurnEndReason::Completed);
    let log = finish(runtime, &store).await;
    let runs = tool.0.load(Ordering::SeqCst);
    assert_eq!(runs, 2);
    let start = log.iter().position(|e| e.kind() == "turn/start").unwrap();
    for cut in start + 1..log.len() {
        let events = reopen_cut(&log, cut).await;
        let violations = rein_invariant::check_finished_log(&events);
        assert!(violations.is_empty(), "cut at {cut}: {violations:#?}\n{:?}", kinds(&events));
        assert_eq!(events[..cut], log[..cut]);
        // No tool call of the log runs twice: a logged call keeps its one result.
        for id in ["c1", "c2"] {
            let results = events
                .iter()
                .filter(|e| matches!(&e.event, Event::ToolResult(r) if r.id == id))
                .count();
            assert!(results <= 1, "cut at {cut}: {id} answered {results} times");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_killed_session_wakes_and_resumes_its_turn() {
    // The session actor dies during the chain retrier's wait: the log shows the retry pending,
    // the woken session resumes it.
    let store = MemoryStore::new();
    let tool = Arc::new(Counting::default());
    let adapter = Scripted::new(vec![fail_streamed("SERVER", &[]), reply(&["fine"])]);
    let runtime = builder(&store, adapter, 0, &tool).build().await.unwrap();
    let session = runtime.session("s").await.unwrap();
    let _turn = session.prompt("hello").unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(session.kill());
    let events = settle(&store).await;
    let resumed_at = events.iter().position(|e| e.kind() == "turn/resumed").unwrap();
    assert_eq!(events[resumed_at].event, resumed(1, "retry-wait"));
    let retry = events.iter().find(|e| e.kind() == "llm/retry").unwrap().time;
    let start = events.iter().find(|e| e.kind() == "llm/retry-started").unwrap().time;
    assert_eq!(start, retry + DELAY_MS, "the wait as scheduled, not restarted");
    assert_eq!(turn_ends(&events), [TurnEndReason::Completed]);
    finish(runtime, &store).await;
}
