//! Heap accounting for the runtime: bytes live per turn parked in a plugin's wait, and per idle
//! (hibernated) session, counted by the global allocator of the binary that includes this file
//! (`stats_alloc`). Shared by the regression test `tests/heap.rs` and the report
//! `examples/heap.rs`.
//!
//! The logs live in a [`JsonlStore`] (files, one cached open file), so what is counted is the
//! runtime's own memory, not the events a [`MemoryStore`](rein_runtime::store::memory::MemoryStore)
//! would keep in the heap: the budgets (`docs/architecture.md`, "Benchmark") are about the runtime,
//! and a durable store keeps its logs out of the heap.

use std::alloc::System;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rein_runtime::BoxFuture;
use rein_runtime::event::TurnEndReason;
use rein_runtime::failure::Failure;
use rein_runtime::plugin::{Plugin, Recovery, Verdict};
use rein_runtime::provider::{Adapter, ChunkSink, Completion, Message, Request};
use rein_runtime::runtime::{Route, Runtime};
use rein_runtime::session::Session;
use rein_runtime::session::TurnHandle;
use rein_runtime::store::Durability;
use rein_runtime::store::jsonl::JsonlStore;
use stats_alloc::StatsAlloc;
use tokio::sync::Notify;

/// The allocator the including binary installs.
pub type Counting = StatsAlloc<System>;

/// Bytes live on the heap right now.
pub fn live(alloc: &Counting) -> i64 {
    let stats = alloc.stats();
    stats.bytes_allocated as i64 - stats.bytes_deallocated as i64
}

/// Fails every attempt whose last user message is `"fail"`; answers the others at once.
struct FailOnRequest;

impl Adapter for FailOnRequest {
    fn call(
        &self,
        request: Request,
        _: ChunkSink,
    ) -> BoxFuture<'static, Result<Completion, Failure>> {
        let fail =
            matches!(request.messages.last(), Some(Message::User { text }) if text == "fail");
        Box::pin(async move {
            if fail {
                Err(Failure::new("SERVER", "overloaded").unwrap())
            } else {
                Ok(Completion::default())
            }
        })
    }
}

/// A retry plugin that parks every recovery in an hour-long wait (the retry's backoff), raced by
/// the turn's cancellation and the plugin's disposal, and counts the recoveries parked.
#[derive(Default)]
struct Parking {
    parked: AtomicUsize,
    changed: Notify,
}

impl Parking {
    async fn until_parked(&self, n: usize) {
        loop {
            let changed = self.changed.notified();
            if self.parked.load(Ordering::SeqCst) == n {
                return;
            }
            changed.await;
        }
    }
}

impl Plugin for Parking {
    fn name(&self) -> &str {
        "parking"
    }

    fn recover(self: Arc<Self>, recovery: Recovery) -> BoxFuture<'static, Verdict> {
        Box::pin(async move {
            self.parked.fetch_add(1, Ordering::SeqCst);
            self.changed.notify_waiters();
            let verdict = tokio::select! {
                () = recovery.payload.cancel.cancelled() => Verdict::Stop,
                () = recovery.disposed.cancelled() => Verdict::Stop,
                () = tokio::time::sleep(Duration::from_secs(3600)) => Verdict::Retry,
            };
            self.parked.fetch_sub(1, Ordering::SeqCst);
            self.changed.notify_waiters();
            verdict
        })
    }
}

/// A runtime over a JSONL store in a temporary directory, with the parking plugin.
pub struct Rig {
    /// The runtime.
    pub runtime: Runtime,
    plugin: Arc<Parking>,
    _dir: tempfile::TempDir,
}

impl Rig {
    /// A fresh runtime over a fresh directory.
    pub async fn new() -> Self {
        // In memory where the machine has a tmpfs (faster), else wherever temporary files go.
        let shm = std::path::Path::new("/dev/shm");
        let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() };
        let dir = dir.unwrap();
        let store = JsonlStore::open(dir.path(), Durability::Os).unwrap().with_max_open_files(1);
        let plugin = Arc::new(Parking::default());
        let runtime = Runtime::builder()
            .store(Arc::new(store))
            .route(Route::new("mock", Arc::new(FailOnRequest)).model("m"))
            .plugin(Arc::clone(&plugin) as Arc<dyn Plugin>)
            .idle_grace(Duration::ZERO)
            .build()
            .await
            .unwrap();
        Self { runtime, plugin, _dir: dir }
    }

    /// Lets every task that can run finish what it is doing (nothing here waits on time).
    pub async fn settle(&self) {
        for _ in 0..256 {
            tokio::task::yield_now().await;
        }
    }

    /// Waits until only the runtime's own actors (root children: host, plugin, provider) are
    /// left, i.e. every session hibernated and its actors' states were dropped.
    pub async fn until_hibernated(&self, actors: usize) {
        for _ in 0..1_000_000 {
            if self.runtime.census().actors() == actors && self.runtime.awake_sessions() == 0 {
                self.settle().await;
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("sessions did not hibernate: {:?}", self.runtime.census());
    }

    /// `n` sessions, each with one turn parked in the plugin's wait.
    pub async fn park(&self, prefix: &str, n: usize) -> (Vec<Session>, Vec<TurnHandle>) {
        let mut sessions = Vec::with_capacity(n);
        let mut turns = Vec::with_capacity(n);
        for i in 0..n {
            let session = self.runtime.session(&format!("{prefix}{i}")).await.unwrap();
            turns.push(session.prompt("fail").unwrap());
            sessions.push(session);
        }
        self.plugin.until_parked(n).await;
        self.settle().await;
        (sessions, turns)
    }

    /// Cancels the parked turns and checks each ended aborted.
    pub async fn release(&self, sessions: &[Session], turns: Vec<TurnHandle>) {
        for session in sessions {
            assert!(session.cancel(rein_runtime::event::CancelCause::User).await.unwrap());
        }
        for turn in turns {
            let outcome = turn.outcome().await.unwrap();
            assert!(matches!(outcome.reason, TurnEndReason::Aborted { .. }), "{outcome:?}");
        }
        self.plugin.until_parked(0).await;
    }

    /// `n` sessions that ran one completed turn each and hibernated.
    pub async fn idle(&self, prefix: &str, n: usize, actors: usize) -> Vec<Session> {
        let mut sessions = Vec::with_capacity(n);
        let mut turns = Vec::with_capacity(n);
        for i in 0..n {
            let session = self.runtime.session(&format!("{prefix}{i}")).await.unwrap();
            turns.push(session.prompt("ok").unwrap());
            sessions.push(session);
        }
        for turn in turns {
            assert_eq!(turn.outcome().await.unwrap().reason, TurnEndReason::Completed);
        }
        self.until_hibernated(actors).await;
        sessions
    }
}

/// What one measurement found.
#[derive(Debug, Clone, Copy)]
pub struct Figures {
    /// Bytes live per parked turn (session, log, turn, step, the plugin's wait, the handles).
    pub parked_turn: f64,
    /// Bytes live per idle, hibernated session (the `Session` handle included).
    pub idle_session: f64,
}

/// Measures `n` parked turns, then `n` idle sessions, in one runtime.
pub async fn measure(alloc: &Counting, n: usize) -> Figures {
    let rig = Rig::new().await;
    let actors = rig.runtime.census().actors();

    // Warm up: every lazy initialization (tracing call sites, the blocking pool, tables that
    // grow once) happens before the first reading.
    let (sessions, turns) = rig.park("warm", 8).await;
    rig.release(&sessions, turns).await;
    drop(sessions);
    rig.until_hibernated(actors).await;
    let warm = rig.idle("warm-idle", 8, actors).await;
    drop(warm);
    rig.settle().await;

    let before = live(alloc);
    let (sessions, turns) = rig.park("p", n).await;
    let parked = live(alloc) - before;
    rig.release(&sessions, turns).await;
    drop(sessions);
    rig.until_hibernated(actors).await;

    let before = live(alloc);
    let sessions = rig.idle("i", n, actors).await;
    let idle = live(alloc) - before;
    drop(sessions);

    rig.runtime.shutdown().await;
    Figures { parked_turn: parked as f64 / n as f64, idle_session: idle as f64 / n as f64 }
}

/// An actor that does nothing: what ractor itself costs per actor.
struct Bare;

/// Messages bare actors have handled, in all.
static HANDLED: AtomicUsize = AtomicUsize::new(0);

/// Resolves once bare actors have handled `n` messages in all. (On a runtime with thousands of
/// ready tasks a fixed number of yields may return before every actor ran: the bytes an actor
/// allocates as it starts its loop would not be counted.)
async fn handled(n: usize) {
    while HANDLED.load(Ordering::SeqCst) < n {
        tokio::task::yield_now().await;
    }
}

impl ractor::Actor for Bare {
    type Msg = ();
    type State = ();
    type Arguments = ();

    async fn pre_start(
        &self,
        _: ractor::ActorRef<()>,
        (): (),
    ) -> Result<(), ractor::ActorProcessingErr> {
        Ok(())
    }

    async fn handle(
        &self,
        _: ractor::ActorRef<()>,
        (): (),
        (): &mut (),
    ) -> Result<(), ractor::ActorProcessingErr> {
        HANDLED.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// Bytes live per bare actor tree of a parked turn — a session actor with a log actor and a turn
/// actor linked under it, a step actor linked under the turn, each having handled one message —
/// and one task sleeping for the retry's wait while racing a cancellation token: what the shape
/// of a parked turn costs with no rein code in it.
pub async fn bare_tree(alloc: &Counting, n: usize) -> f64 {
    let token = tokio_util::sync::CancellationToken::new();
    let mut trees = Vec::with_capacity(n);
    let mut sleepers = Vec::with_capacity(n);
    let sent = HANDLED.load(Ordering::SeqCst) + 4 * n;
    let before = live(alloc);
    for _ in 0..n {
        let (session, _) = ractor::Actor::spawn(None, Bare, ()).await.unwrap();
        let (log, _) =
            ractor::Actor::spawn_linked(None, Bare, (), session.get_cell()).await.unwrap();
        let (turn, _) =
            ractor::Actor::spawn_linked(None, Bare, (), session.get_cell()).await.unwrap();
        let (step, _) = ractor::Actor::spawn_linked(None, Bare, (), turn.get_cell()).await.unwrap();
        for actor in [&session, &log, &turn, &step] {
            actor.send_message(()).unwrap();
        }
        let wait = token.child_token();
        sleepers.push(tokio::spawn(async move {
            tokio::select! {
                () = wait.cancelled() => {}
                () = tokio::time::sleep(Duration::from_secs(3600)) => {}
            }
        }));
        trees.push([step.get_cell(), turn.get_cell(), log.get_cell(), session.get_cell()]);
    }
    handled(sent).await;
    for _ in 0..256 {
        tokio::task::yield_now().await;
    }
    let bytes = live(alloc) - before;
    token.cancel();
    // Stopping a session takes its tree down (a bare supervisor stops when a child exits, and
    // kills its children when it stops); wait until every actor of it is gone.
    for [.., session] in &trees {
        session.stop(None);
    }
    for tree in &trees {
        for actor in tree {
            actor.wait(None).await.unwrap();
        }
    }
    for sleeper in sleepers {
        sleeper.await.unwrap();
    }
    settled().await;
    bytes as f64 / n as f64
}

/// Bytes live per bare ractor actor, linked under a parent, that handled one message.
pub async fn bare_actor(alloc: &Counting, n: usize) -> f64 {
    let (parent, _) = ractor::Actor::spawn(None, Bare, ()).await.unwrap();
    let mut actors = Vec::with_capacity(n);
    let sent = HANDLED.load(Ordering::SeqCst) + n;
    let before = live(alloc);
    for _ in 0..n {
        let (actor, _) =
            ractor::Actor::spawn_linked(None, Bare, (), parent.get_cell()).await.unwrap();
        actor.send_message(()).unwrap();
        actors.push(actor);
    }
    handled(sent).await;
    for _ in 0..256 {
        tokio::task::yield_now().await;
    }
    let bytes = live(alloc) - before;
    // The parent kills its children when it stops; wait until every one of them is gone.
    parent.stop(None);
    for actor in actors.iter().map(ractor::ActorRef::get_cell).chain([parent.get_cell()]) {
        actor.wait(None).await.unwrap();
    }
    settled().await;
    bytes as f64 / n as f64
}

/// Lets the tasks of the actors just stopped finish and free what they hold, so that a
/// measurement that follows does not count their frees as its own.
async fn settled() {
    for _ in 0..256 {
        tokio::task::yield_now().await;
    }
}
