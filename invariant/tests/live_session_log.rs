//! The live validator installed on a real session log: a violating append is rejected, writes
//! nothing and changes nothing; the next valid append goes through.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::sync::Arc;
use std::time::Duration;

use rein_invariant::LiveValidator;
use rein_runtime::clock::VirtualClock;
use rein_runtime::event::{
    Event, LlmRetry, LlmRetryStarted, RequestError, RequestStart, RouteSwitched, StepRef, TurnEnd,
    TurnEndReason, TurnStart, UserMessage,
};
use rein_runtime::session_log::{AppendError, SessionLog};
use rein_runtime::store::SessionStore;
use rein_runtime::store::memory::MemoryStore;
use rein_testkit::generate;
use rein_testkit::history::{OFFICIAL_KEY, failure};

fn retry(id: &str, n: u64) -> Event {
    Event::LlmRetry(LlmRetry {
        retry_id: id.into(),
        turn: 1,
        step: 1,
        provider: "mock".into(),
        plugin: "llm-retry".into(),
        mode: "normal".into(),
        policy_key: OFFICIAL_KEY.into(),
        retry: n,
        max_retries: Some(2),
        delay_ms: 500.0,
        failure: failure("SERVER"),
    })
}

fn started(id: &str, n: u64) -> Event {
    Event::LlmRetryStarted(LlmRetryStarted { retry_id: id.into(), turn: 1, step: 1, retry: n })
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

fn error(attempt: u32) -> Event {
    Event::RequestError(RequestError {
        turn: 1,
        step: 1,
        attempt,
        provider: "mock".into(),
        failure: failure("SERVER"),
    })
}

/// A log with the validator installed, after `events` were appended.
async fn open(store: &Arc<MemoryStore>, events: Vec<Event>) -> SessionLog {
    let (log, _) =
        SessionLog::open(store.clone(), Arc::new(VirtualClock::start()), "s1").await.unwrap();
    log.add_validator(Box::new(LiveValidator::new())).await.unwrap();
    if !events.is_empty() {
        log.append(events).await.unwrap();
    }
    log
}

fn rejection(result: Result<Vec<rein_runtime::event::Envelope>, AppendError>) -> (u64, String) {
    match result {
        Err(AppendError::Rejected(r)) => (r.seq, r.rule),
        other => panic!("expected a rejection, got {other:?}"),
    }
}

fn failed_attempt() -> Vec<Event> {
    vec![
        Event::UserMessage(UserMessage { text: "hi".into() }),
        Event::TurnStart(TurnStart { turn: 1 }),
        Event::StepStart(StepRef { turn: 1, step: 1 }),
        request(1),
        error(1),
    ]
}

#[tokio::test(start_paused = true)]
async fn a_violating_append_is_rejected_and_writes_nothing() {
    let store = Arc::new(MemoryStore::new());
    let log = open(&store, failed_attempt()).await;
    let mut committed = log.subscribe().await.unwrap();
    let before = store.events("s1");
    assert_eq!(before.len(), 6, "session/start + the failed attempt");

    // A chain cannot start at retry 2.
    let (seq, rule) = rejection(log.append(vec![retry("id-a", 2)]).await);
    assert_eq!((seq, rule.as_str()), (6, "retry-continues-chain"));
    assert_eq!(store.events("s1"), before, "nothing written");
    assert_eq!(log.retry_chains().await.unwrap(), Default::default(), "nothing folded");

    // The rejection changed nothing: retry 1 takes the same seq and is accepted.
    let written = log.append(vec![retry("id-a", 1)]).await.unwrap();
    assert_eq!(written[0].seq, 6);
    assert_eq!(committed.recv().await.unwrap(), written[0], "only the accepted append is seen");

    // Starting before the delay elapsed is rejected; after it, accepted.
    let (seq, rule) = rejection(log.append(vec![started("id-a", 1)]).await);
    assert_eq!((seq, rule.as_str()), (7, "retry-started-after-delay"));
    tokio::time::advance(Duration::from_millis(500)).await;
    log.append(vec![started("id-a", 1), request(2)]).await.unwrap();

    // A batch is judged as a whole: its valid first event is not written either.
    let end = vec![
        Event::StepEnd(StepRef { turn: 1, step: 1 }),
        Event::TurnEnd(TurnEnd { turn: 2, reason: TurnEndReason::Completed }),
    ];
    let (seq, rule) = rejection(log.append(end).await);
    assert_eq!((seq, rule.as_str()), (10, "turn-end-matches-turn"));
    assert_eq!(store.events("s1").len(), 9, "neither event of the batch was written");

    log.close().await;
}

fn switched(from: &str, to: &str) -> Event {
    Event::RouteSwitched(RouteSwitched {
        turn: 1,
        step: 1,
        from: from.into(),
        to: to.into(),
        code: "SERVER".into(),
        reason: "exhausted".into(),
    })
}

fn request_on(attempt: u32, provider: &str) -> Event {
    Event::RequestStart(RequestStart {
        turn: 1,
        step: 1,
        attempt,
        provider: provider.into(),
        model: "m".into(),
    })
}

#[tokio::test(start_paused = true)]
async fn a_route_switch_is_judged_live_and_binds_the_next_attempt() {
    let store = Arc::new(MemoryStore::new());
    let log = open(&store, failed_attempt()).await;
    let before = store.events("s1");

    // The failed attempt was on `mock`: a switch from another route is refused.
    let (seq, rule) = rejection(log.append(vec![switched("other", "backup")]).await);
    assert_eq!((seq, rule.as_str()), (6, "route-switched-from-current-route"));
    assert_eq!(store.events("s1"), before, "nothing written");
    assert_eq!(log.step_routes().await.unwrap().switched_to(), None, "nothing folded");

    log.append(vec![switched("mock", "backup")]).await.unwrap();
    let (_, rule) = rejection(log.append(vec![switched("mock", "elsewhere")]).await);
    assert_eq!(rule, "route-switched-once-per-attempt");
    // The next attempt must go where the switch said.
    let (seq, rule) = rejection(log.append(vec![request_on(2, "mock")]).await);
    assert_eq!((seq, rule.as_str()), (7, "request-follows-route-switch"));
    log.append(vec![request_on(2, "backup")]).await.unwrap();
    assert_eq!(log.step_routes().await.unwrap().used(), ["mock", "backup"]);
    log.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_validator_installed_on_a_log_with_history_judges_against_it() {
    let store = Arc::new(MemoryStore::new());
    let mut events = failed_attempt();
    events.extend([retry("id-a", 1)]);
    let first = open(&store, events).await;
    first.close().await;

    // Reopened: the validator replays the history (its commit), so it knows chain id-a is at 1.
    let log = open(&store, vec![]).await;
    tokio::time::advance(Duration::from_millis(500)).await;
    let (_, rule) = rejection(log.append(vec![started("id-b", 1)]).await);
    assert_eq!(rule, "retry-started-pairs-retry");
    // The reopen repaired the open turn (turn/end interrupted), so nothing of turn 1 may follow.
    let (_, rule) = rejection(log.append(vec![started("id-a", 1)]).await);
    assert_eq!(rule, "retry-started-same-step");
    let written = log.append(vec![Event::TurnStart(TurnStart { turn: 2 })]).await.unwrap();
    assert_eq!(written[0].kind(), "turn/start");
    assert!(store.load("s1").await.unwrap().is_some());
    log.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_log_cut_anywhere_and_reopened_is_repaired_into_a_valid_finished_log() {
    for seed in 0u8..6 {
        let full = generate::generate(&[seed, 1, 3, seed.wrapping_mul(5), 2, 0, 4]);
        for cut in 1..=full.len() {
            let store = Arc::new(MemoryStore::new());
            store.append("s1", &full[..cut]).await.unwrap();
            let (log, _) = SessionLog::open(store.clone(), Arc::new(VirtualClock::start()), "s1")
                .await
                .unwrap();
            log.close().await;
            let repaired = store.events("s1");
            let violations = rein_invariant::check_finished_log(&repaired);
            assert!(violations.is_empty(), "seed {seed}, cut {cut}: {violations:#?}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_resumed_turn_is_judged_against_what_the_crashed_process_wrote() {
    use rein_runtime::event::TurnResumed;
    use rein_runtime::session_log::OpenOptions;

    // The first process scheduled retry 1 (500 ms) and died during the wait.
    let store = Arc::new(MemoryStore::new());
    let log = open(&store, failed_attempt()).await;
    log.append(vec![retry("id-a", 1)]).await.unwrap();
    log.close().await;

    // The next one keeps the turn open and replays the log into its validator.
    let options = OpenOptions::new().keep_open_turn().validator(Box::new(LiveValidator::new()));
    let (log, report) =
        SessionLog::open_with(store.clone(), Arc::new(VirtualClock::start()), "s1", options)
            .await
            .unwrap();
    assert_eq!(report.open_turn, Some(1));
    let resumed = |turn, pending: &str| {
        Event::TurnResumed(TurnResumed { turn, step: 1, pending: pending.into() })
    };
    let (seq, rule) = rejection(log.append(vec![resumed(2, "retry-wait")]).await);
    assert_eq!((seq, rule.as_str()), (7, "turn-resumed-in-open-turn"));
    let (_, rule) = rejection(log.append(vec![resumed(1, "napping")]).await);
    assert_eq!(rule, "turn-resumed-pending-known");
    log.append(vec![resumed(1, "retry-wait")]).await.unwrap();
    // The wait's timing rule holds across the restart: not before the deadline.
    let (_, rule) = rejection(log.append(vec![started("id-a", 1)]).await);
    assert_eq!(rule, "retry-started-after-delay");
    tokio::time::advance(Duration::from_millis(500)).await;
    log.append(vec![started("id-a", 1), request(2)]).await.unwrap();
    log.close().await;
}
