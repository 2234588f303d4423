//! The actor shape of a session: session, log, turn and step actors in a supervision tree; every
//! way a turn ends writes its exact closing events; a killed session ends every wait of its turn;
//! a disposed plugin's `dispose` runs once, after its waits; and the idle grace period. (A long
//! session's turns costing what its first ones did is `long_session.rs`.)

// Helpers outside `#[test]` functions unwrap too: a failing set-up is a failing test.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rein_runtime::BoxFuture;
use rein_runtime::census::ActorKind::{self, *};
use rein_runtime::event::{CancelCause, Envelope, TurnEndReason};
use rein_runtime::fault::Faults;
use rein_runtime::plugin::{Plugin, Recovery, Verdict};
use rein_runtime::resume::Resume;
use rein_runtime::runtime::{Route, Runtime, RuntimeBuilder};
use rein_runtime::store::memory::MemoryStore;
use rein_runtime::store::{Loaded, SessionStore, StoreError};
use rein_testkit::log::{assert_valid, kinds, turn_ends};
use rein_testkit::plugins::{TestPlugin, Trace};
use rein_testkit::scripted::{Scripted, fail_streamed, reply};
use rein_testkit::{plugins, runtime};
use tokio::time::Instant;

const HOUR: Duration = Duration::from_secs(3600);

fn builder(
    store: &MemoryStore,
    adapter: Arc<dyn rein_runtime::provider::Adapter>,
) -> RuntimeBuilder {
    runtime::builder(store, adapter, "m")
}

/// The kinds of the events after the last `request/start` or `request/error`: how the turn
/// closed.
fn closing(events: &[Envelope]) -> Vec<&'static str> {
    let last = events
        .iter()
        .rposition(|e| matches!(e.kind(), "request/start" | "request/error" | "assistant/message"))
        .unwrap();
    kinds(&events[last + 1..])
}

/// The runtime's own actors (root, host, plugins, providers) are not counted.
fn session_tree(runtime: &Runtime) -> Vec<(ActorKind, usize)> {
    runtime
        .census()
        .tree()
        .into_iter()
        .filter(|(kind, _)| matches!(kind, Session | SessionLog | Turn | Step))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_parked_turn_holds_a_session_log_turn_and_step_actor_and_shutdown_leaves_none() {
    let store = MemoryStore::new();
    let t = Trace::default();
    let runtime = builder(&store, Scripted::always(fail_streamed("SERVER", &[])))
        .plugin(TestPlugin::slow("backoff", &t, HOUR, Verdict::Retry))
        .build()
        .await
        .unwrap();
    let sessions: Vec<_> = futures_join(&runtime, 3).await;
    let mut turns = Vec::new();
    for session in &sessions {
        turns.push(session.prompt("hi").unwrap());
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(session_tree(&runtime), [(Session, 3), (SessionLog, 3), (Turn, 3), (Step, 3)]);
    assert_eq!(runtime.census().tasks(), 3 * 2, "per turn: the step's walk, the plugin's wait");

    runtime.shutdown().await;
    assert_eq!((runtime.census().actors(), runtime.census().tasks()), (0, 0));
    assert_eq!(runtime.supervision_tree(), 0);
    for (turn, session) in turns.into_iter().zip(&sessions) {
        let reason = turn.outcome().await.unwrap().reason;
        assert_eq!(reason, TurnEndReason::Aborted { cause: CancelCause::Disposed });
        let events = store.events(session.id());
        assert_valid(&events);
        assert_eq!(closing(&events), ["step/end", "turn/end", "agent/idle"]);
    }
}

#[tokio::test(start_paused = true)]
async fn dropping_the_last_runtime_handle_shuts_it_down_in_the_background() {
    let store = MemoryStore::new();
    let t = Trace::default();
    let runtime = builder(&store, Scripted::always(fail_streamed("SERVER", &[])))
        .plugin(TestPlugin::slow("backoff", &t, HOUR, Verdict::Retry))
        .build()
        .await
        .unwrap();
    let census = runtime.census().clone();
    let session = runtime.session("s").await.unwrap();
    let turn = session.prompt("hi").unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(census.actors_of(Turn), 1, "the turn is parked in the plugin's backoff");

    let clone = runtime.clone();
    drop(runtime);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(census.actors_of(Turn), 1, "a clone is left: nothing stops");
    drop(clone);

    let ended = tokio::time::timeout(Duration::from_secs(60), turn.outcome()).await;
    let reason = ended.expect("the dropped runtime ended the turn").unwrap().reason;
    assert_eq!(reason, TurnEndReason::Aborted { cause: CancelCause::Disposed });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!((census.actors(), census.tasks()), (0, 0), "{:?}", census.tree());
    assert!(session.prompt("again").is_err(), "the runtime is down");
    let events = store.events("s");
    assert_valid(&events);
    assert_eq!(closing(&events), ["step/end", "turn/end", "agent/idle"]);
}

async fn futures_join(runtime: &Runtime, n: usize) -> Vec<rein_runtime::session::Session> {
    let mut sessions = Vec::new();
    for i in 0..n {
        sessions.push(runtime.session(&format!("s{i}")).await.unwrap());
    }
    sessions
}

/// How a turn ends, and the exact events that close it.
#[derive(Debug, Clone, Copy)]
enum Ending {
    Completed,
    UserCancel,
    SessionKilled,
    StepPanic,
    TurnPanic,
    Shutdown,
}

#[tokio::test(start_paused = true)]
async fn every_way_a_turn_ends_writes_its_closing_events_in_order() {
    use Ending::*;
    for ending in [Completed, UserCancel, SessionKilled, StepPanic, TurnPanic, Shutdown] {
        let store = MemoryStore::new();
        let t = Trace::default();
        // The first attempt fails and waits in the plugin's backoff (an hour), except for the
        // endings that need the step to go on.
        let script = match ending {
            Completed | TurnPanic | StepPanic => vec![reply(&["fine"])],
            _ => vec![fail_streamed("SERVER", &[]), reply(&["after"])],
        };
        let faults = match ending {
            StepPanic => Faults::none().panic_step(1, 1),
            TurnPanic => Faults::none().panic_turn(1),
            _ => Faults::none(),
        };
        // A killed session's turn is closed by its reopened log, as after a crash, with
        // resumption off (a resumed one: tests/resume.rs).
        let runtime = builder(&store, Scripted::new(script))
            .plugin(TestPlugin::slow("backoff", &t, HOUR, Verdict::Retry))
            .faults(faults)
            .resume(Resume::Never)
            .build()
            .await
            .unwrap();
        let session = runtime.session("s").await.unwrap();
        let turn = session.prompt("hi").unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
        match ending {
            UserCancel => assert!(session.cancel(CancelCause::User).await.unwrap()),
            SessionKilled => assert!(session.kill()),
            Shutdown => runtime.shutdown().await,
            _ => {}
        }
        let outcome = turn.outcome().await;
        tokio::time::sleep(Duration::from_millis(10)).await;
        runtime.shutdown().await;
        let events = store.events("s");
        assert_valid(&events);
        let (reason, expected): (TurnEndReason, &[&str]) = match ending {
            Completed => (TurnEndReason::Completed, &["step/end", "turn/end", "agent/idle"]),
            UserCancel => (
                TurnEndReason::Aborted { cause: CancelCause::User },
                &["step/end", "turn/end", "agent/idle"],
            ),
            Shutdown => (
                TurnEndReason::Aborted { cause: CancelCause::Disposed },
                &["step/end", "turn/end", "agent/idle"],
            ),
            // Closed by the reopened log: what a crash leaves.
            SessionKilled => (TurnEndReason::Interrupted, &["step/end", "turn/end", "agent/idle"]),
            StepPanic | TurnPanic => {
                let ended = turn_ends(&events);
                let TurnEndReason::Error { failure } = &ended[0] else {
                    panic!("{ending:?}: {ended:?}")
                };
                assert_eq!(failure.code(), "RUNTIME_ERROR", "{ending:?}");
                let crashed =
                    if matches!(ending, StepPanic) { "step 1 crashed" } else { "turn 1 crashed" };
                assert!(failure.message().starts_with(crashed), "{ending:?}: {failure:?}");
                assert!(failure.message().contains("injected fault"), "{ending:?}: {failure:?}");
                (ended[0].clone(), &["step/end", "turn/end", "agent/idle"])
            }
        };
        assert_eq!(turn_ends(&events), std::slice::from_ref(&reason), "{ending:?}");
        assert_eq!(closing(&events), expected, "{ending:?}");
        match (ending, outcome) {
            // The killed session's handle was dropped with it.
            (SessionKilled, outcome) => assert!(outcome.is_err(), "{outcome:?}"),
            (_, outcome) => assert_eq!(outcome.unwrap().reason, reason, "{ending:?}"),
        }
        assert_eq!((runtime.census().actors(), runtime.census().tasks()), (0, 0), "{ending:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_killed_session_ends_a_turn_parked_in_a_plugins_backoff_within_one_tick() {
    let store = MemoryStore::new();
    let t = Trace::default();
    let plugin = TestPlugin::parking("backoff", &t, HOUR, Verdict::Retry);
    // Resumption off: the woken session closes the turn instead of offering its failure to the
    // plugin again (which would park it again).
    let runtime = builder(&store, Scripted::new(vec![fail_streamed("SERVER", &[])]))
        .plugin(Arc::clone(&plugin) as Arc<dyn Plugin>)
        .resume(Resume::Never)
        .build()
        .await
        .unwrap();
    let session = runtime.session("s").await.unwrap();
    let _turn = session.prompt("hi").unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(plugin.parked(), 1);

    let killed_at = Instant::now();
    assert!(session.kill());
    for _ in 0..64 {
        tokio::task::yield_now().await;
    }
    assert_eq!(plugin.parked(), 0, "the wait ended with its session");
    assert_eq!(killed_at.elapsed(), Duration::ZERO, "no virtual time passed");
    // The session woke again at once and its log closed the turn.
    assert_eq!(turn_ends(&store.events("s")), [TurnEndReason::Interrupted]);
    runtime.shutdown().await;
    assert_valid(&store.events("s"));
}

/// A plugin whose recoveries wait an hour (racing cancellation and disposal), and that records
/// when it was disposed and how many recoveries were still waiting then.
#[derive(Default)]
struct Disposable {
    waiting: AtomicUsize,
    disposed: Mutex<Vec<usize>>,
}

impl Plugin for Disposable {
    fn name(&self) -> &str {
        "disposable"
    }

    fn recover(self: Arc<Self>, recovery: Recovery) -> BoxFuture<'static, Verdict> {
        Box::pin(async move {
            self.waiting.fetch_add(1, Ordering::SeqCst);
            let verdict = plugins::wait(recovery, HOUR, Verdict::Retry).await;
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            verdict
        })
    }

    fn dispose(self: Arc<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let waiting = self.waiting.load(Ordering::SeqCst);
            self.disposed.lock().unwrap().push(waiting);
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_disposed_plugins_dispose_runs_once_after_its_waits_ended_and_the_chain_drops_it() {
    let store = MemoryStore::new();
    let plugin = Arc::new(Disposable::default());
    let runtime = builder(&store, Scripted::always(fail_streamed("SERVER", &[])))
        .plugin(Arc::clone(&plugin) as Arc<dyn Plugin>)
        .build()
        .await
        .unwrap();
    let sessions = futures_join(&runtime, 2).await;
    let mut turns = Vec::new();
    for session in &sessions {
        turns.push(session.prompt("hi").unwrap());
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(plugin.waiting.load(Ordering::SeqCst), 2);
    let held = Arc::strong_count(&plugin);

    runtime.dispose_plugin("disposable").await.unwrap();
    assert_eq!(*plugin.disposed.lock().unwrap(), [0], "once, after both waits ended");
    assert!(Arc::strong_count(&plugin) < held, "the chain let go of the plugin");
    for turn in turns {
        let reason = turn.outcome().await.unwrap().reason;
        assert!(matches!(reason, TurnEndReason::Error { .. }), "{reason:?}: fail closed");
    }
    assert!(runtime.dispose_plugin("disposable").await.is_err(), "it is gone");
    runtime.shutdown().await;
    assert_eq!(plugin.disposed.lock().unwrap().len(), 1, "shutdown does not dispose it again");
    assert_eq!(Arc::strong_count(&plugin), 1, "nothing of the runtime holds it");
    for session in &sessions {
        assert_valid(&store.events(session.id()));
    }
}

#[tokio::test(start_paused = true)]
async fn shutdown_disposes_every_plugin_once() {
    let store = MemoryStore::new();
    let plugin = Arc::new(Disposable::default());
    let runtime = builder(&store, Scripted::always(reply(&["ok"])))
        .plugin(Arc::clone(&plugin) as Arc<dyn Plugin>)
        .build()
        .await
        .unwrap();
    runtime.shutdown().await;
    runtime.shutdown().await;
    assert_eq!(*plugin.disposed.lock().unwrap(), [0]);
}

/// A memory store that counts the loads of session logs (one per session wake-up).
#[derive(Clone, Default)]
struct CountingStore {
    inner: MemoryStore,
    loads: Arc<AtomicUsize>,
}

impl SessionStore for CountingStore {
    fn durability(&self) -> rein_runtime::store::Durability {
        self.inner.durability()
    }
    fn append<'a>(
        &'a self,
        session: &'a str,
        events: &'a [Envelope],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.append(session, events)
    }
    fn claim<'a>(
        &'a self,
        session: &'a str,
    ) -> BoxFuture<'a, Result<rein_runtime::store::Claim, StoreError>> {
        self.inner.claim(session)
    }
    fn load<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Option<Loaded>, StoreError>> {
        self.loads.fetch_add(1, Ordering::SeqCst);
        self.inner.load(session)
    }
    fn sessions(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        self.inner.sessions()
    }
}

#[tokio::test(start_paused = true)]
async fn a_prompt_inside_the_idle_grace_finds_the_session_awake_and_after_it_the_session_hibernates()
 {
    let store = CountingStore::default();
    let runtime = Runtime::builder()
        .store(Arc::new(store.clone()))
        .clock(Arc::new(rein_runtime::clock::VirtualClock::start()))
        .route(Route::new("mock", Scripted::always(reply(&["ok"]))).model("m"))
        .idle_grace(Duration::from_secs(5))
        .build()
        .await
        .unwrap();
    let session = runtime.session("s").await.unwrap();
    assert_eq!(store.loads.load(Ordering::SeqCst), 1, "one wake-up opened the log");
    for _ in 0..3 {
        session.prompt("again").unwrap().await.unwrap();
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert!(session.is_awake());
    }
    assert_eq!(store.loads.load(Ordering::SeqCst), 1, "no prompt inside the grace woke a session");
    assert_eq!(session_tree(&runtime), [(Session, 1), (SessionLog, 1)]);

    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!session.is_awake(), "5 s after its last turn the session hibernated");
    assert!(session_tree(&runtime).is_empty(), "no session, log, turn or step actor left");
    assert_eq!(runtime.census().tasks(), 0, "nor its grace timer");
    session.prompt("later").unwrap().await.unwrap();
    assert_eq!(store.loads.load(Ordering::SeqCst), 2, "the next prompt woke it from its log");
    runtime.shutdown().await;
    assert_valid(&store.inner.events("s"));
}

#[tokio::test(start_paused = true)]
async fn a_zero_idle_grace_hibernates_at_once() {
    let store = MemoryStore::new();
    let runtime = builder(&store, Scripted::always(reply(&["ok"])))
        .idle_grace(Duration::ZERO)
        .build()
        .await
        .unwrap();
    let session = runtime.session("s").await.unwrap();
    session.prompt("hi").unwrap().await.unwrap();
    tokio::task::yield_now().await;
    assert!(!session.is_awake());
    runtime.shutdown().await;
    assert_valid(&store.events("s"));
}
