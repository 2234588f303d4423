//! Behaviour of the session log through its public handle, on `MemoryStore` and small
//! store doubles (a memory store with faults switched on — failing or held appends, a torn tail —
//! and one whose loads fail).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use crate::clock::VirtualClock;
use crate::event::{
    AgentIdle, LOG_FORMAT, LlmRetry, RequestError, RequestStart, SessionStart, StepRef, TurnEnd,
    TurnEndReason, TurnStart, UserMessage,
};
use crate::failure::Failure;
use crate::future::BoxFuture;
use crate::store::faulty::FaultyStore;
use crate::store::memory::MemoryStore;
use crate::store::{Claim, Durability, Loaded, TornTail};

// ---------------------------------------------------------------- events

pub(super) fn user(text: &str) -> Event {
    Event::UserMessage(UserMessage { text: text.into() })
}
pub(super) fn turn(turn: u32) -> Event {
    Event::TurnStart(TurnStart { turn })
}
pub(super) fn step(turn: u32, step: u32) -> Event {
    Event::StepStart(StepRef { turn, step })
}
pub(super) fn step_end(turn: u32, step: u32) -> Event {
    Event::StepEnd(StepRef { turn, step })
}
pub(super) fn request(turn: u32, step: u32, attempt: u32) -> Event {
    Event::RequestStart(RequestStart {
        turn,
        step,
        attempt,
        provider: "mock".into(),
        model: "m".into(),
    })
}
pub(super) fn request_error(turn: u32, step: u32, attempt: u32) -> Event {
    Event::RequestError(RequestError {
        turn,
        step,
        attempt,
        provider: "mock".into(),
        failure: Failure::new("SERVER", "down").unwrap(),
    })
}
const KEY: &str = r#"["normal",2,["SERVER"],500,10000,0]"#;
fn retry(turn: u32, step: u32, n: u64) -> Event {
    Event::LlmRetry(LlmRetry {
        retry_id: "id-1".into(),
        turn,
        step,
        provider: "mock".into(),
        plugin: "llm-retry".into(),
        mode: "normal".into(),
        policy_key: KEY.into(),
        retry: n,
        max_retries: Some(2),
        delay_ms: 500.0,
        failure: Failure::new("SERVER", "down").unwrap(),
    })
}
pub(super) fn turn_end(turn: u32, reason: TurnEndReason) -> Event {
    Event::TurnEnd(TurnEnd { turn, reason })
}
pub(super) fn idle() -> Event {
    Event::AgentIdle(AgentIdle {})
}
pub(super) fn session_start(session: &str) -> Event {
    Event::SessionStart(SessionStart { session: session.into(), format: LOG_FORMAT })
}
fn kinds(events: &[Envelope]) -> Vec<&'static str> {
    events.iter().map(Envelope::kind).collect()
}
fn stamped(events: Vec<Event>, from: u64, time: u64) -> Vec<Envelope> {
    events.into_iter().zip(from..).map(|(event, seq)| Envelope { seq, time, event }).collect()
}

// ---------------------------------------------------------------- doubles

/// A clock the test sets by hand (it may go backwards).
#[derive(Debug, Default)]
struct ManualClock(AtomicU64);

impl ManualClock {
    fn set(&self, ms: u64) {
        self.0.store(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// A `Disk` store whose appends a test can hold.
fn gated() -> FaultyStore {
    FaultyStore::new(MemoryStore::new()).disk()
}

/// A store whose every load reports a torn tail.
fn torn_store() -> FaultyStore {
    FaultyStore::new(MemoryStore::new()).torn(torn_tail())
}

fn torn_tail() -> TornTail {
    TornTail { line: 4, bytes: 17, kept_in: Some("logs/s1.jsonl.torn".into()) }
}

/// A store whose every load answers the same (a corrupt line, a damaged log) and that only
/// records whether anything was appended: a log that cannot be opened must not be repaired.
struct UnopenableStore {
    loaded: fn() -> Result<Option<Loaded>, StoreError>,
    appended: AtomicBool,
}

impl UnopenableStore {
    fn new(loaded: fn() -> Result<Option<Loaded>, StoreError>) -> Self {
        Self { loaded, appended: AtomicBool::new(false) }
    }
}

impl SessionStore for UnopenableStore {
    fn durability(&self) -> Durability {
        Durability::Os
    }
    fn append<'a>(
        &'a self,
        _: &'a str,
        _: &'a [Envelope],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.appended.store(true, Ordering::SeqCst);
        Box::pin(async { Ok(()) })
    }
    fn claim<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Claim, StoreError>> {
        Box::pin(async { Ok(Claim::new(())) })
    }
    fn load<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Option<Loaded>, StoreError>> {
        let loaded = (self.loaded)();
        Box::pin(async move { loaded })
    }
    fn sessions(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        Box::pin(async { Ok(vec!["s1".to_owned()]) })
    }
}

/// What a [`Recording`] validator was asked, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Call {
    Check(Vec<u64>),
    Commit(Vec<u64>),
}

/// A validator that records its calls, rejects batches holding a `reject` event kind, and counts
/// the events committed to it.
struct Recording {
    calls: Arc<Mutex<Vec<Call>>>,
    reject: &'static str,
    committed: u64,
}

impl Recording {
    fn new(reject: &'static str) -> (Self, Arc<Mutex<Vec<Call>>>) {
        let calls = Arc::new(Mutex::new(Vec::new()));
        (Self { calls: Arc::clone(&calls), reject, committed: 0 }, calls)
    }
}

impl Validator for Recording {
    fn name(&self) -> &str {
        "recording"
    }
    fn check(&self, batch: &[Envelope]) -> Result<(), Rejection> {
        self.calls.lock().unwrap().push(Call::Check(batch.iter().map(|e| e.seq).collect()));
        // The batch continues what was committed: the validator's view is never ahead.
        assert_eq!(batch[0].seq, self.committed, "checked against committed state");
        match batch.iter().find(|e| e.kind() == self.reject) {
            Some(e) => Err(Rejection {
                seq: e.seq,
                kind: e.kind().into(),
                rule: "no-such-kind".into(),
                message: "refused".into(),
            }),
            None => Ok(()),
        }
    }
    fn commit(&mut self, batch: &[Envelope]) {
        self.calls.lock().unwrap().push(Call::Commit(batch.iter().map(|e| e.seq).collect()));
        self.committed += batch.len() as u64;
    }
}

/// Counts the events it folds, by kind.
struct Count(&'static str, &'static str);

impl Projection for Count {
    type State = u64;
    fn key(&self) -> &'static str {
        self.0
    }
    fn fold(&self, state: &mut u64, event: &Envelope) {
        if event.kind() == self.1 {
            *state += 1;
        }
    }
}

/// Every event's seq, folded.
struct Seqs;

impl Projection for Seqs {
    type State = Vec<u64>;
    fn key(&self) -> &'static str {
        "seqs"
    }
    fn fold(&self, state: &mut Vec<u64>, event: &Envelope) {
        state.push(event.seq);
    }
}

fn fold<P: Projection>(projection: &P, log: &[Envelope]) -> P::State {
    let mut state = P::State::default();
    for event in log {
        projection.fold(&mut state, event);
    }
    state
}

async fn open_memory(store: &MemoryStore, session: &str) -> (SessionLog, OpenReport) {
    open_on(Arc::new(store.clone()), session).await
}

/// Opens `session` on `store` with a fresh virtual clock and no supervisor.
async fn open_on(store: Arc<dyn SessionStore>, session: &str) -> (SessionLog, OpenReport) {
    SessionLog::open(store, Arc::new(VirtualClock::start()), session).await.unwrap()
}

/// Opens `s1` on `store` with `options`, a fresh virtual clock and no supervisor.
async fn open_s1_with(
    store: Arc<dyn SessionStore>,
    options: OpenOptions,
) -> Result<(SessionLog, OpenReport), LogError> {
    SessionLog::open_with(store, Arc::new(VirtualClock::start()), "s1", options).await
}

/// Appends `events` on a task of its own, so the test can watch it wait.
fn spawn_append(
    log: &SessionLog,
    events: Vec<Event>,
) -> tokio::task::JoinHandle<Result<Vec<Envelope>, AppendError>> {
    let log = log.clone();
    tokio::spawn(async move { log.append(events).await })
}

// ---------------------------------------------------------------- open

#[tokio::test(start_paused = true)]
async fn a_new_log_starts_with_session_start() {
    let store = MemoryStore::new();
    let clock = Arc::new(VirtualClock::start());
    tokio::time::advance(Duration::from_millis(5)).await;
    let (log, report) = SessionLog::open(Arc::new(store.clone()), clock, "s1").await.unwrap();
    assert_eq!(
        report,
        OpenReport {
            created: true,
            torn: None,
            interrupted_turn: None,
            open_turn: None,
            events: 1
        }
    );
    assert_eq!(store.events("s1"), stamped(vec![session_start("s1")], 0, 5));
    assert_eq!(log.session(), "s1");
    assert_eq!(log.events().await.unwrap(), store.events("s1"));
    log.close().await;
}

#[tokio::test(start_paused = true)]
async fn an_invalid_session_id_is_refused_and_nothing_written() {
    let store = MemoryStore::new();
    let clock = Arc::new(VirtualClock::start());
    let err = SessionLog::open(Arc::new(store.clone()), clock, "../etc").await.unwrap_err();
    assert!(matches!(err, LogError::Store(StoreError::InvalidSessionId(_))), "{err}");
    assert!(store.sessions().await.unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_corrupt_log_fails_to_open_naming_file_and_line_and_writes_nothing() {
    let store = Arc::new(UnopenableStore::new(|| {
        let message = "expected value".into();
        Err(StoreError::Corrupt { path: "logs/s1.jsonl".into(), line: 3, message })
    }));
    let clock = Arc::new(VirtualClock::start());
    let err = SessionLog::open(store.clone(), clock, "s1").await.unwrap_err();
    assert!(err.to_string().contains("logs/s1.jsonl:3"), "{err}");
    assert!(!store.appended.load(Ordering::SeqCst), "nothing is repaired in a corrupt log");
}

#[tokio::test(start_paused = true)]
async fn a_log_with_a_seq_gap_fails_to_open_and_writes_nothing() {
    // A gap in the seqs: the stores refuse to write one, so this stands for a log damaged
    // outside rein.
    let store = Arc::new(UnopenableStore::new(|| {
        let mut events = stamped(vec![session_start("s1"), user("hi"), turn(1)], 0, 0);
        events[2].seq = 5;
        Ok(Some(Loaded { events, torn: None }))
    }));
    let clock = Arc::new(VirtualClock::start());
    let err = SessionLog::open(store.clone(), clock, "s1").await.unwrap_err();
    assert!(
        matches!(&err, LogError::NotContiguous { session, expected: 2, found: 5 } if session == "s1"),
        "{err}"
    );
    assert!(!store.appended.load(Ordering::SeqCst), "nothing is repaired in a gapped log");
}

#[tokio::test(start_paused = true)]
async fn reopening_a_closed_log_appends_nothing() {
    let closed = vec![
        vec![session_start("s1")],
        vec![session_start("s1"), user("hi")],
        vec![
            session_start("s1"),
            user("hi"),
            turn(1),
            step(1, 1),
            request(1, 1, 1),
            step_end(1, 1),
            turn_end(1, TurnEndReason::Completed),
            idle(),
        ],
    ];
    for events in closed {
        let store = MemoryStore::new();
        let before = stamped(events, 0, 7);
        store.append("s1", &before).await.unwrap();
        let (log, report) = open_memory(&store, "s1").await;
        assert_eq!(store.events("s1"), before, "{:?}", kinds(&before));
        assert_eq!(
            report,
            OpenReport {
                created: false,
                torn: None,
                interrupted_turn: None,
                open_turn: None,
                events: before.len() as u64
            }
        );
        log.close().await;
    }
}

#[tokio::test(start_paused = true)]
async fn reopening_closes_an_open_turn_and_projections_equal_a_fresh_fold() {
    let prefix = vec![session_start("s1"), user("hi"), turn(1), step(1, 1), request(1, 1, 1)];
    // (log a crash left, the repair expected)
    let table: Vec<(Vec<Event>, Vec<Event>)> = vec![
        (
            [prefix.clone(), vec![request_error(1, 1, 1), retry(1, 1, 1)]].concat(),
            vec![step_end(1, 1), turn_end(1, TurnEndReason::Interrupted), idle()],
        ),
        (
            [prefix.clone(), vec![step_end(1, 1)]].concat(),
            vec![turn_end(1, TurnEndReason::Interrupted), idle()],
        ),
        (
            vec![session_start("s1"), user("hi"), turn(1)],
            vec![turn_end(1, TurnEndReason::Interrupted), idle()],
        ),
        (
            [prefix.clone(), vec![step_end(1, 1), turn_end(1, TurnEndReason::Completed)]].concat(),
            vec![idle()],
        ),
    ];
    for (crashed, repair) in table {
        let store = MemoryStore::new();
        let before = stamped(crashed, 0, 40);
        store.append("s1", &before).await.unwrap();
        let open_turn_before = fold(&OpenTurnProjection, &before);

        let clock = Arc::new(VirtualClock::start()); // reads 0: behind the log's 40
        let (log, report) = SessionLog::open(Arc::new(store.clone()), clock, "s1").await.unwrap();

        let after = store.events("s1");
        let n = before.len() as u64;
        assert_eq!(after[..before.len()], before[..], "the crashed log is kept as it was");
        assert_eq!(after[before.len()..], stamped(repair.clone(), n, 40)[..], "exact repair");
        assert_eq!(
            report,
            OpenReport {
                created: false,
                torn: None,
                interrupted_turn: open_turn_before.turn,
                open_turn: None,
                events: after.len() as u64,
            }
        );

        assert_eq!(log.open_turn().await.unwrap(), fold(&OpenTurnProjection, &after));
        assert_eq!(log.retry_chains().await.unwrap(), fold(&RetryChainProjection, &after));
        let open = log.open_turn().await.unwrap();
        assert!(!open.is_open());
        assert_eq!(open.last_turn, 1);
        assert!(log.retry_chains().await.unwrap().is_empty(), "the turn/end reset the chains");

        // The next append continues the repaired log.
        let next = log.append(vec![user("again")]).await.unwrap();
        assert_eq!(next[0].seq, after.len() as u64);

        // A second reopen finds a closed log.
        log.close().await;
        let (log, report) = open_memory(&store, "s1").await;
        assert_eq!(report.interrupted_turn, None);
        assert_eq!(store.events("s1").len(), after.len() + 1);
        log.close().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_torn_tail_is_reported_and_the_rest_of_the_log_repaired() {
    let store = Arc::new(torn_store());
    let crashed = stamped(vec![session_start("s1"), user("hi"), turn(1)], 0, 0);
    store.inner().append("s1", &crashed).await.unwrap();
    let (log, report) = open_on(store.clone(), "s1").await;
    assert_eq!(
        report,
        OpenReport {
            created: false,
            torn: Some(torn_tail()),
            interrupted_turn: Some(1),
            open_turn: None,
            events: 5
        }
    );
    assert_eq!(
        kinds(&store.inner().events("s1")[3..]),
        ["turn/end", "agent/idle"],
        "the cut line's turn is closed like any open turn"
    );
    log.close().await;

    // A log whose only line was torn is new.
    let store = Arc::new(torn_store());
    let (log, report) = open_on(store.clone(), "s2").await;
    assert!(report.created && report.torn.is_some());
    assert_eq!(store.inner().events("s2"), stamped(vec![session_start("s2")], 0, 0));
    log.close().await;
}

#[tokio::test(start_paused = true)]
async fn reopening_keeps_an_open_steps_retry_chain_until_the_repair_resets_it() {
    // Before the repair, the fold of the crashed log holds the chain; the repair's `step/end`
    // does not reset it, its `turn/end` does. Checked against the pure projection.
    let crashed = stamped(
        vec![
            session_start("s1"),
            user("hi"),
            turn(1),
            step(1, 1),
            request(1, 1, 1),
            request_error(1, 1, 1),
            retry(1, 1, 1),
        ],
        0,
        0,
    );
    let chains = fold(&RetryChainProjection, &crashed);
    assert_eq!(chains.get("mock", KEY).map(|c| c.retry), Some(1));
    let store = MemoryStore::new();
    store.append("s1", &crashed).await.unwrap();
    let (log, _) = open_memory(&store, "s1").await;
    assert!(log.retry_chains().await.unwrap().is_empty());
    log.close().await;
}

// ---------------------------------------------------------------- append

#[tokio::test(start_paused = true)]
async fn seqs_are_contiguous_and_times_come_from_the_injected_clock() {
    let store = MemoryStore::new();
    let (log, _) = open_memory(&store, "s1").await; // session/start at 0 ms
    tokio::time::advance(Duration::from_millis(250)).await;
    let a = log.append(vec![user("hi"), turn(1)]).await.unwrap();
    tokio::time::advance(Duration::from_millis(500)).await;
    let b = log.append(vec![step(1, 1)]).await.unwrap();
    let c = log.append(vec![request(1, 1, 1), request_error(1, 1, 1)]).await.unwrap();

    assert_eq!(a, stamped(vec![user("hi"), turn(1)], 1, 250));
    assert_eq!(b, stamped(vec![step(1, 1)], 3, 750));
    assert_eq!(c, stamped(vec![request(1, 1, 1), request_error(1, 1, 1)], 4, 750));
    let all = store.events("s1");
    assert_eq!(all.iter().map(|e| e.seq).collect::<Vec<_>>(), (0..6).collect::<Vec<_>>());
    assert_eq!(all[1..], [a, b, c].concat()[..], "the reply is what the store holds");
    assert!(log.append(vec![]).await.unwrap().is_empty(), "an empty batch writes nothing");
    assert_eq!(store.events("s1").len(), 6);
    log.close().await;
}

#[tokio::test]
async fn times_never_go_backwards_even_when_the_clock_does() {
    let store = MemoryStore::new();
    let clock = Arc::new(ManualClock::default());
    clock.set(1_000);
    let (log, _) = SessionLog::open(Arc::new(store.clone()), clock.clone(), "s1").await.unwrap();
    clock.set(400);
    assert_eq!(log.append(vec![user("a")]).await.unwrap()[0].time, 1_000);
    clock.set(1_200);
    assert_eq!(log.append(vec![user("b")]).await.unwrap()[0].time, 1_200);
    log.close().await;

    // The floor survives a reopen: it is the log's last time.
    clock.set(10);
    let (log, _) = SessionLog::open(Arc::new(store.clone()), clock.clone(), "s1").await.unwrap();
    assert_eq!(log.append(vec![user("c")]).await.unwrap()[0].time, 1_200);
    log.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_rejected_append_writes_nothing_folds_nothing_and_keeps_the_seq() {
    let store = MemoryStore::new();
    let (log, _) = open_memory(&store, "s1").await;
    log.append(vec![user("hi"), turn(1), step(1, 1), request(1, 1, 1), request_error(1, 1, 1)])
        .await
        .unwrap();
    log.append(vec![retry(1, 1, 1)]).await.unwrap();
    log.register(Count("requests", "request/start")).await.unwrap();
    let (validator, _) = Recording::new("step/start");
    log.add_validator(Box::new(validator)).await.unwrap();
    let mut events = log.subscribe().await.unwrap();

    let stored = store.events("s1");
    let chains = log.retry_chains().await.unwrap();
    let open = log.open_turn().await.unwrap();

    // The rejected batch would have reset the chains, closed the step and counted a request.
    let err = log.append(vec![request(1, 1, 2), step_end(1, 1), step(1, 2)]).await.unwrap_err();
    match err {
        AppendError::Rejected(rejection) => {
            assert_eq!((rejection.seq, rejection.kind.as_str()), (9, "step/start"));
        }
        other => panic!("expected a rejection, got {other}"),
    }
    assert_eq!(store.events("s1"), stored, "nothing written");
    assert_eq!(log.retry_chains().await.unwrap(), chains, "nothing folded");
    assert_eq!(log.open_turn().await.unwrap(), open, "nothing folded");
    assert_eq!(log.read::<Count>("requests").await.unwrap(), 1, "nothing folded");
    assert!(events.try_recv().is_err(), "nothing notified");

    let next = log.append(vec![request(1, 1, 2)]).await.unwrap();
    assert_eq!(next[0].seq, 7, "the next append takes the rejected batch's seq");
    assert_eq!(events.recv().await.unwrap(), next[0]);
    assert_eq!(log.read::<Count>("requests").await.unwrap(), 2);
    log.close().await;
}

#[tokio::test(start_paused = true)]
async fn validators_check_whole_batches_and_commit_only_what_the_store_acknowledged() {
    let store = Arc::new(FaultyStore::new(MemoryStore::new()));
    let (log, _) = open_on(store.clone(), "s1").await;
    log.append(vec![user("hi")]).await.unwrap();

    let (validator, calls) = Recording::new("agent/idle");
    log.add_validator(Box::new(validator)).await.unwrap();
    assert_eq!(*calls.lock().unwrap(), [Call::Commit(vec![0, 1])], "the log is replayed first");

    log.append(vec![turn(1), step(1, 1)]).await.unwrap();
    assert!(matches!(
        log.append(vec![step_end(1, 1), idle()]).await,
        Err(AppendError::Rejected(_))
    ));
    log.append(vec![step_end(1, 1), turn_end(1, TurnEndReason::Completed)]).await.unwrap();
    store.fail_appends(true);
    assert!(matches!(log.append(vec![idle()]).await, Err(AppendError::Rejected(_))));
    assert!(matches!(log.append(vec![user("again")]).await, Err(AppendError::Store(_))));

    assert_eq!(
        *calls.lock().unwrap(),
        [
            Call::Commit(vec![0, 1]),
            Call::Check(vec![2, 3]),
            Call::Commit(vec![2, 3]),
            Call::Check(vec![4, 5]), // rejected: no commit
            Call::Check(vec![4, 5]),
            Call::Commit(vec![4, 5]),
            Call::Check(vec![6]), // rejected: the store is not asked
            Call::Check(vec![6]), // the store failed: no commit
        ]
    );
    log.close().await;
}

#[tokio::test(start_paused = true)]
async fn every_validator_must_accept_a_batch() {
    let store = MemoryStore::new();
    let (log, _) = open_memory(&store, "s1").await;
    let (lenient, lenient_calls) = Recording::new("nothing/rejected");
    let (strict, _) = Recording::new("turn/start");
    log.add_validator(Box::new(lenient)).await.unwrap();
    log.add_validator(Box::new(strict)).await.unwrap();
    assert!(matches!(log.append(vec![turn(1)]).await, Err(AppendError::Rejected(_))));
    assert_eq!(
        *lenient_calls.lock().unwrap(),
        [Call::Commit(vec![0]), Call::Check(vec![1])],
        "a batch another validator rejects is not committed to this one"
    );
    assert_eq!(store.events("s1").len(), 1);
    log.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_store_failure_returns_the_error_folds_nothing_and_ends_the_log() {
    let store = Arc::new(FaultyStore::new(MemoryStore::new()));
    let (log, _) = open_on(store.clone(), "s1").await;
    log.append(vec![user("hi"), turn(1), step(1, 1)]).await.unwrap();
    let mut events = log.subscribe().await.unwrap();
    let open = log.open_turn().await.unwrap();
    // Queued behind the append that fails: it never reaches the store.
    let gate = store.hold_next();
    let failing = spawn_append(&log, vec![step_end(1, 1), turn_end(1, TurnEndReason::Completed)]);
    let behind = spawn_append(&log, vec![step_end(1, 1)]);
    let read = tokio::spawn({
        let log = log.clone();
        async move { log.open_turn().await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    store.fail_appends(true);
    gate.send(()).unwrap();

    match failing.await.unwrap() {
        Err(AppendError::Store(StoreError::Io { path, source })) => {
            assert_eq!(
                (path.as_str(), source.kind()),
                ("s1.jsonl", std::io::ErrorKind::StorageFull)
            );
        }
        other => panic!("expected a store error, got {other:?}"),
    }
    store.fail_appends(false);
    // A smaller batch would fit now: it must not be written after the one that failed.
    assert!(matches!(behind.await.unwrap(), Err(AppendError::Closed)));
    assert!(matches!(read.await.unwrap(), Err(LogError::Closed)));
    assert!(matches!(log.append(vec![step_end(1, 1)]).await, Err(AppendError::Closed)));
    assert_eq!(store.inner().events("s1").len(), 4, "the log ends at its last acknowledged append");
    assert_eq!(store.appends(), 3, "nothing was asked of the store after the failure");
    assert!(events.recv().await.is_none(), "nothing notified, and the subscription ended");
    assert!(!log.is_open());
    let why = log.failure().unwrap();
    assert!(why.starts_with("the store failed an append: s1.jsonl: no space left"), "{why}");

    // The next open repairs it as after a crash, from the state the failure left.
    let (reopened, report) = open_on(store.clone(), "s1").await;
    assert_eq!(report.interrupted_turn, Some(1));
    assert_eq!(open.turn, Some(1));
    assert_eq!(kinds(&store.inner().events("s1")[4..]), ["step/end", "turn/end", "agent/idle"]);
    reopened.close().await;
}

#[tokio::test(start_paused = true)]
async fn an_append_returns_only_after_the_store_acknowledged_it() {
    let store = Arc::new(gated());
    let (log, _) = open_on(store.clone(), "s1").await;
    let mut events = log.subscribe().await.unwrap();

    let gate = store.hold_next();
    let pending = spawn_append(&log, vec![user("hi")]);
    // Let everything else run (paused time jumps ahead): only the gate holds the append.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(!pending.is_finished(), "the append waits for the store's ack");
    assert_eq!(store.inner().events("s1").len(), 1);
    assert!(events.try_recv().is_err(), "nothing is committed before the ack");

    gate.send(()).unwrap();
    let written = pending.await.unwrap().unwrap();
    assert_eq!(written, stamped(vec![user("hi")], 1, 0));
    assert_eq!(store.inner().events("s1")[1..], written[..]);
    assert_eq!(events.recv().await.unwrap(), written[0]);
    log.close().await;
}

#[tokio::test(start_paused = true)]
async fn appends_of_one_session_are_serialized_behind_the_store_ack() {
    let store = Arc::new(gated());
    let (log, _) = open_on(store.clone(), "s1").await;
    let first_gate = store.hold_next();
    let first = spawn_append(&log, vec![user("first")]);
    tokio::time::sleep(Duration::from_millis(1)).await;
    let second = spawn_append(&log, vec![user("second")]);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!first.is_finished() && !second.is_finished());
    first_gate.send(()).unwrap();
    let first = first.await.unwrap().unwrap();
    let second = second.await.unwrap().unwrap();
    assert_eq!((first[0].seq, second[0].seq), (1, 2));
    assert_eq!(
        kinds(&store.inner().events("s1")),
        ["session/start", "user/message", "user/message"]
    );
    log.close().await;
}

// ---------------------------------------------------------------- subscribers

#[tokio::test(start_paused = true)]
async fn subscribers_receive_committed_events_in_order_from_their_subscription_on() {
    let store = MemoryStore::new();
    let (log, _) = open_memory(&store, "s1").await;
    log.append(vec![user("before")]).await.unwrap();
    let mut a = log.subscribe().await.unwrap();
    let first = log.append(vec![turn(1), step(1, 1)]).await.unwrap();
    let mut b = log.subscribe().await.unwrap();
    let dropped = log.subscribe().await.unwrap();
    drop(dropped);
    let second = log.append(vec![request(1, 1, 1)]).await.unwrap();
    log.close().await;

    let mut got_a = Vec::new();
    while let Some(event) = a.recv().await {
        got_a.push(event);
    }
    let mut got_b = Vec::new();
    while let Some(event) = b.recv().await {
        got_b.push(event);
    }
    assert_eq!(got_a, [first, second.clone()].concat(), "ends when the log closes");
    assert_eq!(got_b, second);
}

// ---------------------------------------------------------------- projections

#[tokio::test(start_paused = true)]
async fn a_projection_registered_late_folds_the_whole_history() {
    let store = MemoryStore::new();
    let (log, _) = open_memory(&store, "s1").await;
    log.append(vec![user("hi"), turn(1), step(1, 1), request(1, 1, 1)]).await.unwrap();
    log.append(vec![request_error(1, 1, 1), retry(1, 1, 1)]).await.unwrap();
    log.register(Seqs).await.unwrap();
    log.register(Count("steps", "step/start")).await.unwrap();
    assert_eq!(log.read::<Seqs>("seqs").await.unwrap(), (0..7).collect::<Vec<_>>());
    assert_eq!(log.read::<Count>("steps").await.unwrap(), 1);

    log.append(vec![step_end(1, 1), step(1, 2)]).await.unwrap();
    assert_eq!(log.read::<Seqs>("seqs").await.unwrap(), (0..9).collect::<Vec<_>>());
    assert_eq!(log.read::<Count>("steps").await.unwrap(), 2);
    let all = log.events().await.unwrap();
    assert_eq!(log.read::<Seqs>("seqs").await.unwrap(), fold(&Seqs, &all));
    log.close().await;
}

/// A [`MemoryStore`] that counts its loads and the events it read back (loads and reads from a
/// `seq`).
#[derive(Default)]
struct CountingStore {
    inner: MemoryStore,
    loads: AtomicU64,
    read: AtomicU64,
}

impl SessionStore for CountingStore {
    fn durability(&self) -> Durability {
        Durability::Os
    }
    fn append<'a>(
        &'a self,
        session: &'a str,
        events: &'a [Envelope],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.append(session, events)
    }
    fn claim<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Claim, StoreError>> {
        self.inner.claim(session)
    }
    fn load<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Option<Loaded>, StoreError>> {
        Box::pin(async move {
            self.loads.fetch_add(1, Ordering::SeqCst);
            let loaded = self.inner.load(session).await?;
            let n = loaded.as_ref().map_or(0, |l| l.events.len() as u64);
            self.read.fetch_add(n, Ordering::SeqCst);
            Ok(loaded)
        })
    }
    fn load_from<'a>(
        &'a self,
        session: &'a str,
        seq: u64,
    ) -> BoxFuture<'a, Result<Vec<Envelope>, StoreError>> {
        Box::pin(async move {
            let events = self.inner.load_from(session, seq).await?;
            self.read.fetch_add(events.len() as u64, Ordering::SeqCst);
            Ok(events)
        })
    }
    fn sessions(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        self.inner.sessions()
    }
}

#[tokio::test(start_paused = true)]
async fn a_subscription_from_a_recent_seq_reads_back_only_the_events_from_there() {
    let store = Arc::new(CountingStore::default());
    let (log, _) = open_on(store.clone(), "s1").await;
    for n in 0..500 {
        log.append(vec![user(&format!("message {n}"))]).await.unwrap();
    }
    let read_before = store.read.load(Ordering::SeqCst);
    // Seqs 0..=500 are committed; a reader behind by three events catches up.
    let (committed, mut live) = log.subscribe_from(498).await.unwrap();
    assert_eq!(committed.iter().map(|e| e.seq).collect::<Vec<_>>(), [498, 499, 500]);
    assert_eq!(store.read.load(Ordering::SeqCst) - read_before, 3, "three events read back");
    log.append(vec![idle()]).await.unwrap();
    assert_eq!(live.recv().await.map(|e| e.seq), Some(501), "then every later one, live");
    // A reader that is not behind reads nothing.
    let (committed, _) = log.subscribe_from(502).await.unwrap();
    assert!(committed.is_empty());
    assert_eq!(store.read.load(Ordering::SeqCst) - read_before, 3);
    log.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_subscription_from_a_seq_the_store_does_not_hold_as_written_is_reported() {
    let store = MemoryStore::new();
    let (log, _) = open_memory(&store, "s1").await;
    log.append(vec![user("hi")]).await.unwrap();
    store.append("s1", &stamped(vec![user("intruder")], 2, 0)).await.unwrap();
    let err = log.subscribe_from(1).await.unwrap_err();
    assert!(matches!(err, LogError::Diverged { written: 2, stored: 3, .. }), "{err}");
    log.close().await;
}

#[tokio::test(start_paused = true)]
async fn opening_with_projections_and_validators_reads_the_log_once_and_they_see_the_repair() {
    let store = Arc::new(CountingStore::default());
    let crashed = vec![session_start("s1"), user("hi"), turn(1), step(1, 1), request(1, 1, 1)];
    store.inner.append("s1", &stamped(crashed, 0, 40)).await.unwrap();
    let (validator, calls) = Recording::new("tool/call");
    let options = OpenOptions::new()
        .projection(Seqs)
        .projection(Count("ends", "turn/end"))
        .validator(Box::new(validator));
    let (log, report) = open_s1_with(store.clone(), options).await.unwrap();
    assert_eq!(store.loads.load(Ordering::SeqCst), 1, "one read of the log");
    assert_eq!(report.interrupted_turn, Some(1));
    // The repair (step/end, turn/end, agent/idle: seqs 5..8) reached both, as it would have
    // reached them registered after the open.
    let all = store.inner.events("s1");
    assert_eq!(log.read::<Seqs>("seqs").await.unwrap(), fold(&Seqs, &all));
    assert_eq!(log.read::<Count>("ends").await.unwrap(), 1);
    assert_eq!(
        *calls.lock().unwrap(),
        vec![Call::Commit(vec![0, 1, 2, 3, 4]), Call::Commit(vec![5, 6, 7])]
    );
    // The validator checks later appends; a rejected one is not folded.
    log.append(vec![user("again")]).await.unwrap();
    assert_eq!(log.read::<Seqs>("seqs").await.unwrap(), (0..9).collect::<Vec<_>>());
    assert_eq!(calls.lock().unwrap().len(), 4, "checked, then committed");
    assert_eq!(store.loads.load(Ordering::SeqCst), 1, "reads are answered from memory");
    log.close().await;
}

#[tokio::test(start_paused = true)]
async fn opening_with_a_taken_projection_key_fails_and_writes_nothing() {
    let store = MemoryStore::new();
    let options = OpenOptions::new().projection(Seqs).projection(Count("seqs", "turn/end"));
    let err = open_s1_with(Arc::new(store.clone()), options).await.unwrap_err();
    assert!(matches!(err, LogError::DuplicateProjection("seqs")), "{err}");
    let options = OpenOptions::new().projection(Count("open-turn", "turn/end"));
    let err = open_s1_with(Arc::new(store.clone()), options).await.unwrap_err();
    assert!(matches!(err, LogError::DuplicateProjection("open-turn")), "{err}");
    assert!(store.events("s1").is_empty(), "not even session/start");
}

#[tokio::test(start_paused = true)]
async fn a_view_sees_the_current_state_and_a_wrong_key_or_type_is_an_error() {
    let store = MemoryStore::new();
    let (log, _) = open_memory(&store, "s1").await;
    log.register(Seqs).await.unwrap();
    log.append(vec![user("hi"), turn(1)]).await.unwrap();
    assert_eq!(log.view::<Seqs, _>("seqs", |seqs| seqs.len()).await.unwrap(), 3);
    assert_eq!(log.view::<Seqs, _>("seqs", |seqs| seqs.last().copied()).await.unwrap(), Some(2));
    let err = log.view::<Seqs, _>("nope", |seqs| seqs.len()).await.unwrap_err();
    assert!(matches!(err, LogError::UnknownProjection("nope")), "{err}");
    let err = log.view::<Count, _>("seqs", |n| *n).await.unwrap_err();
    assert!(matches!(err, LogError::ProjectionType { key: "seqs", .. }), "{err}");
    log.close().await;
}

#[tokio::test(start_paused = true)]
async fn registering_a_taken_key_or_reading_a_wrong_one_is_an_error() {
    let store = MemoryStore::new();
    let (log, _) = open_memory(&store, "s1").await;
    log.register(Count("n", "turn/start")).await.unwrap();
    assert!(matches!(
        log.register(Count("n", "agent/idle")).await,
        Err(LogError::DuplicateProjection("n"))
    ));
    assert!(matches!(
        log.register(Count(RetryChainProjection::KEY, "agent/idle")).await,
        Err(LogError::DuplicateProjection("retry-chains"))
    ));
    assert!(matches!(log.read::<Seqs>("nope").await, Err(LogError::UnknownProjection("nope"))));
    assert!(matches!(log.read::<Seqs>("n").await, Err(LogError::ProjectionType { key: "n", .. })));
    log.close().await;
}

#[tokio::test(start_paused = true)]
async fn the_retry_chain_projection_follows_appends() {
    let store = MemoryStore::new();
    let (log, _) = open_memory(&store, "s1").await;
    log.append(vec![user("hi"), turn(1), step(1, 1), request(1, 1, 1), request_error(1, 1, 1)])
        .await
        .unwrap();
    log.append(vec![retry(1, 1, 1)]).await.unwrap();
    log.append(vec![request(1, 1, 2), request_error(1, 1, 2), retry(1, 1, 2)]).await.unwrap();
    let chains = log.retry_chains().await.unwrap();
    assert_eq!(
        chains.get("mock", KEY),
        Some(&Chain { turn: 1, step: 1, retry: 2, retry_id: "id-1".into() })
    );
    let open = log.open_turn().await.unwrap();
    assert_eq!((open.turn, open.step, open.last_attempt), (Some(1), Some(1), 2));
    log.append(vec![step_end(1, 1), step(1, 2)]).await.unwrap();
    assert!(log.retry_chains().await.unwrap().is_empty());
    log.close().await;
}

// ---------------------------------------------------------------- lifecycle

#[tokio::test(start_paused = true)]
async fn a_closed_log_answers_closed() {
    let store = MemoryStore::new();
    let (log, _) = open_memory(&store, "s1").await;
    let other = log.clone();
    log.close().await;
    assert!(matches!(other.append(vec![user("late")]).await, Err(AppendError::Closed)));
    assert!(matches!(other.subscribe().await, Err(LogError::Closed)));
    assert!(matches!(other.open_turn().await, Err(LogError::Closed)));
    assert!(matches!(other.events().await, Err(LogError::Closed)));
    assert_eq!(store.events("s1").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn closing_lets_the_append_in_flight_finish_and_fails_the_queued_ones() {
    let store = Arc::new(gated());
    let (log, _) = open_on(store.clone(), "s1").await;
    let gate = store.hold_next();
    let in_flight = spawn_append(&log, vec![user("in flight")]);
    tokio::time::sleep(Duration::from_millis(1)).await;
    let queued = spawn_append(&log, vec![user("queued")]);
    tokio::time::sleep(Duration::from_millis(1)).await;
    let closing = tokio::spawn(log.close());
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert!(!closing.is_finished(), "close waits for the append in flight");
    gate.send(()).unwrap();
    closing.await.unwrap();
    assert_eq!(in_flight.await.unwrap().unwrap()[0].seq, 1);
    assert!(matches!(queued.await.unwrap(), Err(AppendError::Closed)));
    assert_eq!(kinds(&store.inner().events("s1")), ["session/start", "user/message"]);
}

#[tokio::test(start_paused = true)]
async fn the_store_holding_events_this_log_did_not_write_is_reported() {
    let store = MemoryStore::new();
    let (log, _) = open_memory(&store, "s1").await;
    store.append("s1", &stamped(vec![user("intruder")], 1, 0)).await.unwrap();
    let err = log.events().await.unwrap_err();
    assert!(matches!(err, LogError::Diverged { written: 1, stored: 2, .. }), "{err}");
    assert!(matches!(
        log.register(Seqs).await,
        Err(LogError::Diverged { written: 1, stored: 2, .. })
    ));
    log.close().await;
}

#[tokio::test(start_paused = true)]
async fn an_opener_that_resumes_keeps_the_open_turn_as_it_is() {
    let store = MemoryStore::new();
    let crashed = stamped(vec![session_start("s1"), user("hi"), turn(1), step(1, 1)], 0, 0);
    store.append("s1", &crashed).await.unwrap();
    let (log, report) =
        open_s1_with(Arc::new(store.clone()), OpenOptions::new().keep_open_turn()).await.unwrap();
    assert_eq!((report.interrupted_turn, report.open_turn), (None, Some(1)));
    assert_eq!(store.events("s1"), crashed, "nothing is written for the kept turn");
    let open = log.open_turn().await.unwrap();
    assert_eq!((open.turn, open.step), (Some(1), Some(1)));
    log.close().await;

    // A closed log still gets what it lacks (agent/idle after its last turn/end), and reports no
    // open turn.
    let store = MemoryStore::new();
    let ended = stamped(
        vec![session_start("s1"), user("hi"), turn(1), turn_end(1, TurnEndReason::Completed)],
        0,
        0,
    );
    store.append("s1", &ended).await.unwrap();
    let (log, report) =
        open_s1_with(Arc::new(store.clone()), OpenOptions::new().keep_open_turn()).await.unwrap();
    assert_eq!((report.interrupted_turn, report.open_turn), (None, None));
    assert_eq!(kinds(&store.events("s1")[4..]), ["agent/idle"]);
    log.close().await;
}
