//! A session's life: queued turns, hibernation and waking, reopening after a crash, manual
//! retry, and a runtime shutdown that leaves no actor and no task.

// Helpers outside `#[test]` functions unwrap too: a failing set-up is a failing test.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use rein_runtime::clock::VirtualClock;
use rein_runtime::event::*;
use rein_runtime::plugin::Verdict;
use rein_runtime::provider::{Adapter, Message};
use rein_runtime::resume::Resume;
use rein_runtime::runtime::{Route, Runtime, RuntimeBuilder};
use rein_runtime::session::RetryRefused;
use rein_runtime::session::SessionError;
use rein_runtime::store::SessionStore;
use rein_runtime::store::faulty::FaultyStore;
use rein_runtime::store::memory::MemoryStore;
use rein_testkit::log::{assert_valid, kinds, turn_ends};
use rein_testkit::plugins::{TestPlugin, Trace};
use rein_testkit::scripted::{Scripted, after, call, fail_streamed, reply, stall};
use rein_testkit::{log, runtime};
use serde_json::json;

fn builder(store: &MemoryStore, adapter: Arc<dyn Adapter>) -> RuntimeBuilder {
    runtime::builder(store, adapter, "m")
}

#[tokio::test(start_paused = true)]
async fn prompts_queue_behind_the_running_turn_and_idle_follows_the_last() {
    let store = MemoryStore::new();
    let adapter = Scripted::new(vec![after(100, reply(&["one"])), reply(&["two"])]);
    let (runtime, session) = runtime::start(builder(&store, adapter.clone())).await;
    let first = session.prompt("first").unwrap();
    let second = session.prompt("second").unwrap();
    assert_eq!(first.await.unwrap().turn, 1);
    assert_eq!(second.await.unwrap().turn, 2);

    // The second request saw the whole first turn, and not before it ended.
    let seen = adapter.requests();
    assert_eq!(
        seen[1].messages,
        [
            Message::User { text: "first".into() },
            Message::Assistant { text: "one".into(), tool_calls: vec![] },
            Message::User { text: "second".into() },
        ]
    );
    runtime.shutdown().await;
    let events = store.events("s");
    assert_valid(&events);
    assert_eq!(
        events.iter().filter(|e| e.kind() == "agent/idle").count(),
        1,
        "idle once, at the end"
    );
    assert_eq!(turn_ends(&events), [TurnEndReason::Completed, TurnEndReason::Completed]);
}

#[tokio::test(start_paused = true)]
async fn a_turns_outcome_resolves_once_the_log_is_idle_unless_another_turn_follows() {
    let store = MemoryStore::new();
    let adapter = Scripted::new(vec![
        reply(&["one"]),
        after(100, reply(&["two"])),
        after(100, reply(&["3"])),
    ]);
    let (runtime, session) = runtime::start(builder(&store, adapter)).await;
    session.prompt("first").unwrap().await.unwrap();
    // Read straight from the store, not through the session: nothing waits for the log.
    assert_eq!(kinds(&store.events("s")).last(), Some(&"agent/idle"), "durable before the outcome");

    // A turn with another queued behind it resolves as the next one starts: no idle between.
    let second = session.prompt("second").unwrap();
    let third = session.prompt("third").unwrap();
    second.await.unwrap();
    let idles = |events: &[Envelope]| events.iter().filter(|e| e.kind() == "agent/idle").count();
    assert_eq!(idles(&store.events("s")), 1, "only the first turn's");
    third.await.unwrap();
    let events = store.events("s");
    assert_eq!(kinds(&events).last(), Some(&"agent/idle"));
    assert_eq!(idles(&events), 2);
    runtime.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn an_idle_session_holds_no_actors_and_the_next_prompt_wakes_it_from_its_log() {
    let store = MemoryStore::new();
    let adapter = Scripted::new(vec![reply(&["one"]), reply(&["two"])]);
    let runtime = builder(&store, adapter.clone())
        .plugin(TestPlugin::answering("p", &Trace::default(), Verdict::Next))
        .idle_grace(Duration::ZERO)
        .build()
        .await
        .unwrap();
    // Root, plugin host, one plugin, one provider.
    let baseline = 4;
    assert_eq!(runtime.census().actors(), baseline);

    let session = runtime.session("s").await.unwrap();
    assert!(!session.is_awake(), "opening alone leaves it hibernating");
    session.prompt("first").unwrap().await.unwrap();
    tokio::task::yield_now().await;
    assert!(!session.is_awake());
    assert_eq!(runtime.awake_sessions(), 0);
    assert_eq!(runtime.census().actors(), baseline, "no session actor left");
    assert_eq!(runtime.supervision_tree(), baseline, "and no log of it");
    assert_eq!(runtime.census().tasks(), 0, "and no turn task");

    let outcome = session.prompt("second").unwrap().await.unwrap();
    assert_eq!((outcome.turn, outcome.reason), (2, TurnEndReason::Completed));
    assert_eq!(adapter.requests()[1].messages.len(), 3, "the woken session folded its history");
    runtime.shutdown().await;
    assert_valid(&store.events("s"));
}

/// Writes a log a crash cut short in the middle of an attempt.
async fn crashed_log(store: &MemoryStore) {
    let events = vec![
        Event::SessionStart(SessionStart { session: "s".into(), format: LOG_FORMAT }),
        Event::UserMessage(UserMessage { text: "hello".into() }),
        Event::TurnStart(TurnStart { turn: 1 }),
        Event::StepStart(StepRef { turn: 1, step: 1 }),
        Event::RequestStart(RequestStart {
            turn: 1,
            step: 1,
            attempt: 1,
            provider: "mock".into(),
            model: "m".into(),
        }),
        Event::AssistantChunk(AssistantChunk { turn: 1, step: 1, attempt: 1, text: "half".into() }),
    ];
    let envelopes: Vec<Envelope> = events
        .into_iter()
        .enumerate()
        .map(|(seq, event)| Envelope { seq: seq as u64, time: seq as u64, event })
        .collect();
    store.append("s", &envelopes).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn reopening_after_a_crash_mid_turn_closes_it_interrupted_and_retry_resumes() {
    // With resumption off, the reopen repairs the open turn (resumption: tests/resume.rs).
    let store = MemoryStore::new();
    crashed_log(&store).await;
    let adapter = Scripted::new(vec![reply(&["whole"])]);
    let (runtime, session) =
        runtime::start(builder(&store, adapter.clone()).resume(Resume::Never)).await;
    let repaired = store.events("s");
    assert_eq!(kinds(&repaired[6..]), ["step/end", "turn/end", "agent/idle"]);
    assert_eq!(turn_ends(&repaired), [TurnEndReason::Interrupted]);

    let outcome = session.retry().await.unwrap().await.unwrap();
    assert_eq!((outcome.turn, outcome.reason), (2, TurnEndReason::Completed));
    assert_eq!(
        adapter.requests()[0].messages,
        [Message::User { text: "hello".into() }],
        "the interrupted attempt's chunk never reaches the request"
    );
    runtime.shutdown().await;
    let events = store.events("s");
    assert_valid(&events);
    let turn2 = log::from_kind(&events, "agent/idle");
    assert_eq!(
        kinds(turn2),
        [
            "agent/idle",
            "turn/start",
            "step/start",
            "request/start",
            "assistant/chunk",
            "assistant/message",
            "step/end",
            "turn/end",
            "agent/idle"
        ],
        "a retry writes no user message"
    );
}

#[tokio::test(start_paused = true)]
async fn a_manual_retry_reruns_a_failed_turn_over_the_same_history() {
    let store = MemoryStore::new();
    let adapter = Scripted::new(vec![fail_streamed("SERVER", &["x"]), reply(&["fine"])]);
    let (runtime, session) = runtime::start(builder(&store, adapter.clone())).await;
    match session.retry().await {
        Err(SessionError::Retry(RetryRefused::NoTurn)) => {}
        other => panic!("{other:?}"),
    }
    let failed = session.prompt("hello").unwrap().await.unwrap();
    assert!(matches!(failed.reason, TurnEndReason::Error { .. }));

    let retried = session.retry().await.unwrap().await.unwrap();
    assert_eq!((retried.turn, retried.reason), (2, TurnEndReason::Completed));
    let seen = adapter.requests();
    assert_eq!(seen[1].messages, seen[0].messages, "same durable history");
    assert_eq!((seen[1].turn, seen[1].attempt), (2, 1), "a new turn, fresh attempts");
    match session.retry().await {
        Err(SessionError::Retry(RetryRefused::Completed(2))) => {}
        other => panic!("{other:?}"),
    }
    runtime.shutdown().await;
    let events = store.events("s");
    assert_valid(&events);
    assert_eq!(events.iter().filter(|e| e.kind() == "user/message").count(), 1);
}

#[tokio::test(start_paused = true)]
async fn shutdown_aborts_every_turn_as_disposed_and_leaves_no_actor_and_no_task() {
    let store = MemoryStore::new();
    let t = Trace::default();
    let provider = Scripted::always(stall(&["..."]));
    let failing = Scripted::always(fail_streamed("SERVER", &[]));
    let runtime = Runtime::builder()
        .validator(log::live_invariant)
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .route(Route::new("stalling", provider).model("m"))
        .route(Route::new("failing", failing).model("m"))
        .plugin(TestPlugin::downstream_first("asking", &t, Verdict::Retry))
        .plugin(TestPlugin::slow("waiting", &t, Duration::from_secs(3600), Verdict::Retry))
        .build()
        .await
        .unwrap();
    let before = (runtime.census().actors(), runtime.census().tasks());
    assert_eq!(before, (6, 0), "root, host, two plugins, two providers");
    assert_eq!(runtime.supervision_tree(), 6);

    let mut turns = Vec::new();
    for i in 0..20 {
        let session = runtime.session(&format!("s{i}")).await.unwrap();
        let route = if i % 2 == 0 { "stalling" } else { "failing" };
        let prompt = rein_runtime::session::Prompt::new("hi").on(route);
        turns.push(session.prompt(prompt).unwrap());
    }
    let idle = runtime.session("idle").await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    use rein_runtime::census::ActorKind::*;
    assert_eq!(
        runtime.census().tree(),
        [
            (Root, 1),
            (PluginHost, 1),
            (Plugin, 2),
            (Provider, 2),
            (Session, 21),
            (SessionLog, 21),
            (Turn, 20),
            (Step, 20)
        ],
        "a session and its log per awake session (the idle one in its grace period), a turn and \
         a step per running turn"
    );
    assert_eq!(runtime.supervision_tree(), before.0, "sessions are not linked under the root");
    assert_eq!(
        runtime.census().tasks(),
        10 + 10 * 3 + 1,
        "a stalled attempt per stalling session; a walk and two recoveries per failing one; \
         the idle session's grace timer"
    );

    let started = tokio::time::Instant::now();
    runtime.shutdown().await;
    assert_eq!(started.elapsed(), Duration::ZERO, "nothing waited for a timer");
    assert_eq!(runtime.census().actors(), 0, "no actor outlives shutdown");
    assert_eq!(runtime.supervision_tree(), 0, "the root and all below it stopped");
    assert_eq!(runtime.census().tasks(), 0, "no task outlives shutdown");
    for turn in turns {
        let reason = turn.outcome().await.unwrap().reason;
        assert_eq!(reason, TurnEndReason::Aborted { cause: CancelCause::Disposed });
    }
    for i in 0..20 {
        assert_valid(&store.events(&format!("s{i}")));
    }
    assert!(matches!(idle.prompt("late"), Err(SessionError::ShutDown)));
    assert!(matches!(runtime.session("new").await, Err(SessionError::ShutDown)));
    runtime.shutdown().await; // idempotent
}

#[tokio::test(start_paused = true)]
async fn a_turn_whose_last_allowed_step_called_tools_ends_max_steps() {
    let store = MemoryStore::new();
    let adapter = Scripted::always(call(&[], &[("c", "echo", json!({"text": "again"}))]));
    let (runtime, session) = runtime::start(builder(&store, adapter).max_steps(2)).await;
    let outcome = session.prompt("loop").unwrap().await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::MaxSteps);
    runtime.shutdown().await;
    let events = store.events("s");
    assert_valid(&events);
    assert_eq!(events.iter().filter(|e| e.kind() == "step/start").count(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_jsonl_session_reopens_after_a_torn_write_and_a_corrupt_line_is_named() {
    use rein_runtime::store::Durability;
    use rein_runtime::store::jsonl::JsonlStore;
    use std::io::Write;

    let dir = tempfile::tempdir().unwrap();
    let open = || -> Arc<dyn SessionStore> {
        Arc::new(JsonlStore::open(dir.path(), Durability::Os).unwrap())
    };
    let build = |store: Arc<dyn SessionStore>, adapter: Arc<dyn Adapter>| {
        Runtime::builder()
            .validator(log::live_invariant)
            .store(store)
            .clock(Arc::new(VirtualClock::start()))
            .route(Route::new("mock", adapter).model("m"))
    };

    // A first process: one completed turn, then a crash mid-write of a second turn's line.
    let runtime = build(open(), Scripted::new(vec![reply(&["one"])])).build().await.unwrap();
    runtime.session("s").await.unwrap().prompt("first").unwrap().await.unwrap();
    runtime.shutdown().await;
    let path = dir.path().join("s.jsonl");
    let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    let next = std::fs::read_to_string(&path).unwrap().lines().count();
    write!(file, "{{\"seq\":{next},\"time\":9,\"type\":\"user/mess").unwrap();
    drop(file);

    // A second process: the torn line is cut, the session goes on.
    let adapter = Scripted::new(vec![reply(&["two"])]);
    let (runtime, session) = runtime::start(build(open(), adapter.clone())).await;
    let outcome = session.prompt("second").unwrap().await.unwrap();
    assert_eq!((outcome.turn, outcome.reason), (2, TurnEndReason::Completed));
    assert_eq!(adapter.requests()[0].messages.len(), 3, "the first turn's history survived");
    let events = session.events().await.unwrap();
    runtime.shutdown().await;
    assert_valid(&events);

    // A corrupt line in the middle: the session does not open, and the error names file:line.
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[2] = "{not json";
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let runtime = build(open(), Scripted::new(vec![])).build().await.unwrap();
    match runtime.session("s").await {
        Err(error) => assert!(error.to_string().contains("s.jsonl:3"), "{error}"),
        Ok(_) => panic!("a corrupt log opened"),
    }
    assert_eq!(std::fs::read_to_string(&path).unwrap(), lines.join("\n") + "\n", "untouched");
    runtime.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_session_actor_that_fails_mid_turn_cancels_its_turn_and_its_log_is_repaired_at_once() {
    let store = MemoryStore::new();
    let adapter = Scripted::new(vec![fail_streamed("SERVER", &[]), reply(&["two"])]);
    let woke = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = Arc::clone(&woke);
    // Its recovery stops the session's log — the session actor fails — then waits on the turn's
    // token: only the session's link to its turn can end that wait.
    let closing = TestPlugin::new("closing", &Trace::default(), move |recovery, _| {
        let flag = Arc::clone(&flag);
        Box::pin(async move {
            recovery.payload.log.clone().close().await;
            recovery.payload.cancel.cancelled().await;
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
            Verdict::Stop
        })
    });
    let runtime = builder(&store, adapter).plugin(closing).build().await.unwrap();
    let baseline = runtime.census().actors();
    let session = runtime.session("s").await.unwrap();

    let turn = session.prompt("one").unwrap();
    let outcome = turn.outcome().await;
    assert!(
        matches!(&outcome, Err(SessionError::LogFailed { session, .. }) if session == "s"),
        "{outcome:?}"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(woke.load(std::sync::atomic::Ordering::SeqCst), "the turn's token fired");
    // The failed session's lease woke a fresh one at once, whose reopened log closed the turn
    // the failure left open: no call was needed for that.
    let repaired = store.events("s");
    assert_eq!(kinds(&repaired[repaired.len() - 3..]), ["step/end", "turn/end", "agent/idle"]);
    assert_eq!(turn_ends(&repaired), [TurnEndReason::Interrupted]);
    assert!(session.is_awake(), "the repairing session is in its idle grace");
    assert_eq!(runtime.census().tasks(), 1, "its grace timer; the recovery and the walk ended");
    assert_eq!(runtime.census().actors(), baseline + 2, "a session and its log");

    let outcome = session.prompt("two").unwrap().await.unwrap();
    assert_eq!((outcome.turn, outcome.reason), (2, TurnEndReason::Completed));
    runtime.shutdown().await;
    let events = store.events("s");
    assert_valid(&events);
    assert_eq!(turn_ends(&events), [TurnEndReason::Interrupted, TurnEndReason::Completed]);
}

/// A validator with a bug: it panics on a user message that says "boom".
struct Buggy;

impl rein_runtime::validator::Validator for Buggy {
    fn name(&self) -> &str {
        "buggy"
    }
    fn check(&self, batch: &[Envelope]) -> Result<(), rein_runtime::validator::Rejection> {
        let boom = |e: &Envelope| matches!(&e.event, Event::UserMessage(m) if m.text == "boom");
        assert!(!batch.iter().any(boom), "the validator's bug");
        Ok(())
    }
    fn commit(&mut self, _: &[Envelope]) {}
}

#[tokio::test(start_paused = true)]
async fn a_panicking_validator_fails_the_log_not_the_runtime_and_the_next_prompt_reopens_it() {
    let store = MemoryStore::new();
    let adapter = Scripted::new(vec![reply(&["fine"])]);
    let (runtime, session) =
        runtime::start(builder(&store, adapter).validator(|| Box::new(Buggy))).await;

    // The panic stays in the log: the prompt is refused, nothing of it is written, the runtime
    // and its other actors live on, and the session's failed actor is replaced.
    let refused = session.prompt("boom").unwrap().outcome().await;
    assert!(matches!(refused, Err(SessionError::LogFailed { .. })), "{refused:?}");
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(!session.is_awake(), "the session whose log failed is gone");
    assert_eq!(kinds(&store.events("s")), ["session/start"]);

    let outcome = session.prompt("hello").unwrap().outcome().await.unwrap();
    assert_eq!((outcome.turn, outcome.reason), (1, TurnEndReason::Completed));
    runtime.shutdown().await;
    assert_eq!((runtime.census().actors(), runtime.census().tasks()), (0, 0));
    assert_valid(&store.events("s"));
}

#[tokio::test(start_paused = true)]
async fn a_turn_cut_by_a_store_that_went_away_is_resumed_once_it_is_back_without_a_call() {
    let store = MemoryStore::new();
    let faulty = Arc::new(FaultyStore::new(store.clone()));
    // The answer comes after a second: the store goes away while the attempt waits for it.
    let adapter = Scripted::new(vec![after(1_000, reply(&["late"])), reply(&["again"])]);
    let builder = builder(&store, adapter).store(Arc::clone(&faulty) as Arc<dyn SessionStore>);
    let (runtime, session) = runtime::start(builder).await;

    let turn = session.prompt("one").unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    faulty.unreachable(true);
    let outcome = turn.outcome().await;
    assert!(matches!(&outcome, Err(SessionError::LogFailed { .. })), "{outcome:?}");

    // While the store is away the session cannot reopen: the turn stays open in its log.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(turn_ends(&store.events("s")), [], "{:?}", kinds(&store.events("s")));

    // Back: the session is woken again (within the wait's 5 s cap) and its reopened log resumes
    // the turn, which ends — no call was made.
    faulty.unreachable(false);
    tokio::time::sleep(Duration::from_secs(6)).await;
    let events = store.events("s");
    assert_eq!(turn_ends(&events).len(), 1, "{:?}", kinds(&events));
    assert!(kinds(&events).contains(&"turn/resumed"), "{:?}", kinds(&events));
    runtime.shutdown().await;
    assert_eq!((runtime.census().actors(), runtime.census().tasks()), (0, 0));
    assert_valid(&store.events("s"));
}
