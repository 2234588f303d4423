//! The walk end to end: a real plugin host, real plugin actors, a real session log; test
//! plugins that retry, delegate, stop, ask downstream first, crash or wait.

mod plugins;

use std::sync::Arc;
use std::time::Duration;

use super::run;
use crate::census::Census;
use crate::clock::VirtualClock;
use crate::event::{Event, PluginCrashed};
use crate::failure::Failure;
use crate::plugin::{Plugin, RequestErrorPayload, Verdict};
use crate::plugin_host::{PluginHost, RestartIntensity};
use crate::random::SeededJitter;
use crate::retry_policy::RetryPolicy;
use crate::session_log::SessionLog;
use crate::store::memory::MemoryStore;
use crate::waterfall::Resolution;
use plugins::{TestPlugin, Trace};
use tokio_util::sync::CancellationToken;

use Verdict::{Next, Retry, Stop};

async fn open_log(store: &MemoryStore, id: &str) -> SessionLog {
    let clock = Arc::new(VirtualClock::start());
    SessionLog::open(Arc::new(store.clone()), clock, id).await.unwrap().0
}

fn payload(log: &SessionLog, cancel: &CancellationToken) -> RequestErrorPayload {
    RequestErrorPayload {
        session: log.session().into(),
        turn: 1,
        step: 1,
        attempt: 1,
        provider: "mock".into(),
        failure: Failure::new("SERVER", "down").unwrap(),
        retry_policy: Some(RetryPolicy::default()),
        health: Default::default(),
        cancel: cancel.clone(),
        log: log.clone(),
    }
}

async fn host(plugins: Vec<Arc<dyn Plugin>>, census: &Census) -> PluginHost {
    PluginHost::spawn(
        plugins,
        RestartIntensity::default(),
        Arc::new(SeededJitter::new(0)),
        census.clone(),
        None,
    )
    .await
    .unwrap()
}

fn spawn_run(
    host: &PluginHost,
    payload: RequestErrorPayload,
) -> tokio::task::JoinHandle<Resolution> {
    let chain = Arc::clone(host.chain());
    tokio::spawn(async move { run(&chain, payload).await })
}

/// Runs one failure through a fresh host over `plugins`; returns the outcome and the trace.
async fn once(plugins: Vec<Arc<dyn Plugin>>) -> Resolution {
    let census = Census::new();
    let host = host(plugins, &census).await;
    let store = MemoryStore::new();
    let log = open_log(&store, "s").await;
    let outcome = run(host.chain(), payload(&log, &CancellationToken::new())).await;
    host.stop().await;
    log.close().await;
    assert_eq!(census.actors(), 0, "the host stopped every plugin actor");
    assert_eq!(census.tasks(), 0, "no recovery task outlives the host");
    outcome
}

#[tokio::test(start_paused = true)]
async fn plugins_answer_in_registration_order_and_the_first_decision_wins() {
    let t = Trace::default();
    type Case = (&'static str, Vec<Arc<dyn Plugin>>, Resolution, Vec<&'static str>);
    let cases: Vec<Case> = vec![
        ("empty chain: the end answers Stop", vec![], Resolution::Stop, vec![]),
        (
            "Next delegates until someone retries",
            vec![
                TestPlugin::answering("a", &t, Next),
                TestPlugin::answering("b", &t, Next),
                TestPlugin::answering("c", &t, Retry),
                TestPlugin::answering("d", &t, Stop),
            ],
            Resolution::Retry,
            vec!["a", "b", "c"],
        ),
        (
            "Stop ends the chain",
            vec![TestPlugin::answering("a", &t, Stop), TestPlugin::answering("b", &t, Retry)],
            Resolution::Stop,
            vec!["a"],
        ),
        (
            "everyone delegates: the end of the chain answers Stop",
            vec![TestPlugin::answering("a", &t, Next), TestPlugin::answering("b", &t, Next)],
            Resolution::Stop,
            vec!["a", "b"],
        ),
        (
            "downstream speaks first, and is not asked twice",
            vec![
                TestPlugin::downstream_first("a", &t, Next),
                TestPlugin::answering("b", &t, Retry),
            ],
            Resolution::Retry,
            vec!["a", "b"],
        ),
        (
            "a plugin overrules downstream's Stop",
            vec![
                TestPlugin::downstream_first("a", &t, Retry),
                TestPlugin::answering("b", &t, Stop),
            ],
            Resolution::Retry,
            vec!["a", "b"],
        ),
        (
            "downstream's Stop passes through a delegating asker",
            vec![
                TestPlugin::downstream_first("a", &t, Next),
                TestPlugin::answering("b", &t, Next),
                TestPlugin::answering("c", &t, Stop),
                TestPlugin::answering("d", &t, Retry),
            ],
            Resolution::Stop,
            vec!["a", "b", "c"],
        ),
        (
            "nested consultations",
            vec![
                TestPlugin::downstream_first("a", &t, Stop),
                TestPlugin::downstream_first("b", &t, Stop),
                TestPlugin::answering("c", &t, Retry),
            ],
            Resolution::Retry,
            vec!["a", "b", "c"],
        ),
        (
            "a crash counts as Next",
            vec![TestPlugin::crashing("a", &t), TestPlugin::answering("b", &t, Retry)],
            Resolution::Retry,
            vec!["a", "b"],
        ),
        (
            "a slow plugin is waited for",
            vec![
                TestPlugin::slow("a", &t, Duration::from_millis(500), Next),
                TestPlugin::slow("b", &t, Duration::from_millis(500), Retry),
            ],
            Resolution::Retry,
            vec!["a", "b"],
        ),
    ];
    for (name, plugins, expected, order) in cases {
        assert_eq!(once(plugins).await, expected, "{name}");
        assert_eq!(t.take(), order, "{name}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_crashing_plugin_is_restarted_and_leaves_the_chain_beyond_its_intensity() {
    let t = Trace::default();
    let census = Census::new();
    let crashing = TestPlugin::crashing("crashy", &t);
    let fallback = TestPlugin::answering("fallback", &t, Retry);
    let host = host(vec![crashing.clone(), fallback.clone()], &census).await;
    let store = MemoryStore::new();
    let log = open_log(&store, "s").await;

    let mut incarnations = vec![host.chain().incarnation("crashy").unwrap()];
    for _ in 0..4 {
        let outcome = run(host.chain(), payload(&log, &CancellationToken::new())).await;
        assert_eq!(outcome, Resolution::Retry, "the crash counts as Next; fallback retries");
        if let Some(id) = host.chain().incarnation("crashy") {
            incarnations.push(id);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    incarnations.dedup();
    assert_eq!(incarnations.len(), 4, "three restarts, each a fresh actor");
    assert_eq!(host.chain().names(), ["fallback"], "the fourth crash in 5 s removed it");

    // Later failures skip it.
    let outcome = run(host.chain(), payload(&log, &CancellationToken::new())).await;
    assert_eq!(outcome, Resolution::Retry);
    assert_eq!(crashing.calls(), 4);
    assert_eq!(fallback.calls(), 5);

    let crashes: Vec<PluginCrashed> = log
        .events()
        .await
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.event {
            Event::PluginCrashed(c) => Some(c),
            _ => None,
        })
        .collect();
    let restarts: Vec<u32> = crashes.iter().map(|c| c.restarts).collect();
    assert_eq!(restarts, [1, 2, 3, 3]);
    assert!(crashes.iter().all(|c| c.plugin == "crashy"));
    assert_eq!(crashes[0].error, "crash #1");

    host.stop().await;
    log.close().await;
    assert_eq!(census.actors(), 0);
    assert_eq!(census.tasks(), 0);
}

#[tokio::test(start_paused = true)]
async fn cancelling_during_a_wait_or_a_consultation_aborts_promptly() {
    let t = Trace::default();
    for consult in [false, true] {
        let census = Census::new();
        let plugins: Vec<Arc<dyn Plugin>> = if consult {
            vec![
                TestPlugin::downstream_first("asker", &t, Retry),
                TestPlugin::slow("waiter", &t, Duration::from_secs(3600), Retry),
            ]
        } else {
            vec![TestPlugin::slow("waiter", &t, Duration::from_secs(3600), Retry)]
        };
        let host = host(plugins, &census).await;
        let store = MemoryStore::new();
        let log = open_log(&store, "s").await;
        let cancel = CancellationToken::new();
        let running = spawn_run(&host, payload(&log, &cancel));
        tokio::time::sleep(Duration::from_secs(1)).await;
        let before = tokio::time::Instant::now();
        cancel.cancel();
        assert_eq!(running.await.unwrap(), Resolution::Aborted, "consult: {consult}");
        assert_eq!(before.elapsed(), Duration::ZERO, "promptly");
        host.stop().await;
        log.close().await;
        assert_eq!(census.tasks(), 0);
    }
}

#[tokio::test(start_paused = true)]
async fn disposing_a_plugin_aborts_its_waits_fails_closed_and_removes_it() {
    let t = Trace::default();
    for consult in [false, true] {
        let census = Census::new();
        // The disposed plugin either waits itself, or is consulting a waiting plugin.
        let plugins: Vec<Arc<dyn Plugin>> = if consult {
            vec![
                TestPlugin::downstream_first("disposed", &t, Retry),
                TestPlugin::slow("waiter", &t, Duration::from_secs(3600), Retry),
                TestPlugin::answering("last", &t, Retry),
            ]
        } else {
            vec![
                TestPlugin::slow("disposed", &t, Duration::from_secs(3600), Retry),
                TestPlugin::answering("last", &t, Retry),
            ]
        };
        let host = host(plugins, &census).await;
        let store = MemoryStore::new();
        let log = open_log(&store, "s").await;
        let cancel = CancellationToken::new();
        let running = spawn_run(&host, payload(&log, &cancel));
        tokio::time::sleep(Duration::from_secs(1)).await;
        t.take();

        let before = tokio::time::Instant::now();
        host.dispose("disposed").await.unwrap();
        assert_eq!(before.elapsed(), Duration::ZERO, "disposal completes promptly");
        assert!(running.is_finished(), "the recovery settled before disposal completed");
        assert_eq!(running.await.unwrap(), Resolution::Stop, "fail closed (consult: {consult})");
        assert!(!cancel.is_cancelled(), "the turn itself was not cancelled");
        assert_eq!(t.take(), Vec::<String>::new(), "nothing downstream was asked after disposal");

        // Gone for every later failure.
        assert!(!host.chain().names().contains(&"disposed".to_owned()));
        let outcome = run(host.chain(), payload(&log, &cancel)).await;
        assert_eq!(
            t.take().first().map(String::as_str),
            Some(if consult { "waiter" } else { "last" })
        );
        if !consult {
            assert_eq!(outcome, Resolution::Retry);
        }
        assert_eq!(
            host.dispose("disposed").await,
            Err(crate::plugin_host::DisposeError::UnknownPlugin("disposed".into()))
        );
        let _ = outcome;
        host.stop().await;
        log.close().await;
        assert_eq!(census.actors(), 0);
        assert_eq!(census.tasks(), 0);
    }
}

#[tokio::test(start_paused = true)]
async fn a_thousand_sessions_park_in_one_plugin_actor_without_blocking_it() {
    let t = Trace::default();
    let census = Census::new();
    let parking = TestPlugin::parking("parking", &t, Duration::from_secs(10), Retry);
    let host = host(vec![parking.clone()], &census).await;
    let plugin_actor = host.chain().incarnation("parking").unwrap();
    let store = MemoryStore::new();

    let mut logs = Vec::new();
    let mut running = Vec::new();
    for i in 0..1000 {
        let log = open_log(&store, &format!("s{i}")).await;
        running.push(spawn_run(&host, payload(&log, &CancellationToken::new())));
        logs.push(log);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(parking.parked(), 1000, "every session is parked in its wait");
    assert!(running.iter().all(|r| !r.is_finished()));
    assert_eq!(
        host.chain().incarnation("parking"),
        Some(plugin_actor),
        "one actor serves them all"
    );

    // The mailbox is free: a cancelled session gets its answer at once, while 1,000 still wait.
    let cancel = CancellationToken::new();
    let extra = spawn_run(&host, payload(&logs[0], &cancel));
    tokio::task::yield_now().await;
    cancel.cancel();
    assert_eq!(extra.await.unwrap(), Resolution::Aborted);
    assert_eq!(parking.parked(), 1000);

    tokio::time::sleep(Duration::from_secs(10)).await;
    for r in running {
        assert_eq!(r.await.unwrap(), Resolution::Retry);
    }
    host.stop().await;
    for log in logs {
        log.close().await;
    }
    assert_eq!(census.actors(), 0);
    assert_eq!(census.tasks(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_crash_in_one_session_does_not_disturb_the_waits_of_the_others() {
    let t = Trace::default();
    let census = Census::new();
    // Recovery 1 crashes; every later one waits 10 s and retries.
    let plugin = TestPlugin::new("mixed", &t, |r, n| {
        Box::pin(async move {
            if n == 11 {
                panic!("only this one");
            }
            plugins::wait(r, Duration::from_secs(10), Retry).await
        })
    });
    let host = host(vec![plugin], &census).await;
    let store = MemoryStore::new();
    let mut logs = Vec::new();
    let mut waiting = Vec::new();
    for i in 0..10 {
        let log = open_log(&store, &format!("s{i}")).await;
        waiting.push(spawn_run(&host, payload(&log, &CancellationToken::new())));
        logs.push(log);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = host.chain().incarnation("mixed").unwrap();
    let crashed = run(host.chain(), payload(&logs[0], &CancellationToken::new())).await;
    assert_eq!(crashed, Resolution::Stop, "the crash counts as Next; the end of the chain stops");
    assert_ne!(host.chain().incarnation("mixed").unwrap(), before, "restarted");

    tokio::time::sleep(Duration::from_secs(10)).await;
    for w in waiting {
        assert_eq!(w.await.unwrap(), Resolution::Retry, "the other sessions kept their waits");
    }
    host.stop().await;
    for log in logs {
        log.close().await;
    }
    assert_eq!(census.tasks(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_offer_lost_in_a_crashing_incarnations_mailbox_reaches_its_successor() {
    let t = Trace::default();
    let census = Census::new();
    let release = Arc::new(tokio::sync::Notify::new());
    let gate = Arc::clone(&release);
    // Recovery 1 waits for the gate, then panics; every later one retries at once.
    let plugin = TestPlugin::new("fragile", &t, move |_, n| {
        let gate = Arc::clone(&gate);
        Box::pin(async move {
            if n == 1 {
                gate.notified().await;
                panic!("first recovery");
            }
            Retry
        })
    });
    let host = host(vec![plugin.clone()], &census).await;
    let store = MemoryStore::new();
    let a = open_log(&store, "a").await;
    let b = open_log(&store, "b").await;
    let crashing = spawn_run(&host, payload(&a, &CancellationToken::new()));
    tokio::time::sleep(Duration::from_millis(10)).await;
    let first = host.chain().incarnation("fragile").unwrap();

    // In one tick: the panic's report and b's offer land in the same incarnation's mailbox,
    // the report first — so the incarnation fails with b's offer unread.
    release.notify_one();
    let lost = spawn_run(&host, payload(&b, &CancellationToken::new()));

    assert_eq!(crashing.await.unwrap(), Resolution::Stop, "a's crash counts as Next");
    assert_eq!(lost.await.unwrap(), Resolution::Retry, "b's offer was re-sent and answered");
    assert_ne!(host.chain().incarnation("fragile").unwrap(), first);
    assert_eq!(plugin.calls(), 2, "b's recovery ran exactly once");
    host.stop().await;
    a.close().await;
    b.close().await;
    assert_eq!(census.tasks(), 0);
}
