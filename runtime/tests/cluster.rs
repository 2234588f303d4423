//! Several nodes in one process, on one throwaway PostgreSQL (SPEC §12): the partitions shared
//! out and handed over when a node joins, a prompt and a cancel sent to a node that does not
//! serve the session, a burst of forwarded prompts run once each and in order, a fenced append
//! refused without a write. Processes killed for real are in
//! the repository's `tests/nodes.rs` (the `rein node` binary).
//!
//! Without PostgreSQL the tests say how to install it and pass, except with `CI=true`.

#![cfg(feature = "postgres")]
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use rein_invariant::check_finished_log;
use rein_runtime::cluster::{Node, NodeOptions};
use rein_runtime::event::{CancelCause, Event, TurnEndReason};
use rein_runtime::prelude::*;
use rein_runtime::store::StoreError;
use rein_runtime::store::postgres::PostgresStore;
use rein_runtime::store::postgres::fence::{Fence, Held};
use rein_testkit::PgCluster;
use rein_testkit::scripted::{self, Scripted};

fn options(node: &str) -> NodeOptions {
    let mut options = NodeOptions::new(node);
    options.partitions = Some(8);
    options.lease = Duration::from_millis(600);
    options.command_timeout = Duration::from_secs(10);
    options
}

/// A node and its runtime, on `url`, answering with `adapter`.
async fn node(url: &str, id: &str, adapter: Arc<Scripted>) -> (Node, Runtime) {
    let node = Node::join(url, options(id)).await.unwrap();
    let runtime = Runtime::builder()
        .store(node.store())
        .placement(node.placement())
        .route(Route::new("main", adapter).model("m"))
        .build()
        .await
        .unwrap();
    node.start(&runtime).await.unwrap();
    (node, runtime)
}

/// Waits (on the node's events, up to 20 s) until `done` says the node's partitions are right.
async fn until(node: &Node, what: &str, done: impl Fn(&BTreeSet<u32>) -> bool) {
    let mut events = node.events();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !done(&node.held()) {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match tokio::time::timeout(left, events.recv()).await {
            Ok(_) => {}
            Err(_) => panic!("{}: {what} never happened; holds {:?}", node.id(), node.held()),
        }
    }
}

/// A session id that partition `partition` of 8 holds.
fn session_in(partition: u32) -> String {
    (0..)
        .map(|i| format!("s-{i}"))
        .find(|s| Fence::new("x", 8).partition_of(s) == partition)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joining_node_gets_its_share_and_requests_reach_the_session_wherever_it_is_served() {
    let Some(cluster) = PgCluster::start() else { return };
    let url = cluster.create_database("nodes");
    let answers = Scripted::always(scripted::reply(&["hi", " there"]));
    let (a, runtime_a) = node(&url, "a", Arc::clone(&answers)).await;
    until(&a, "a alone holds every partition", |held| held.len() == 8).await;
    let (b, runtime_b) = node(&url, "b", Arc::clone(&answers)).await;
    until(&b, "b takes its share", |held| held.len() == 4).await;
    until(&a, "a gave half back", |held| held.len() == 4).await;
    assert!(a.held().is_disjoint(&b.held()), "{:?} {:?}", a.held(), b.held());

    // A session b serves, prompted and read through a.
    let partition = *b.held().iter().next().unwrap();
    let id = session_in(partition);
    assert!(b.serves(&id) && !a.serves(&id));
    let session = runtime_a.session(&id).await.unwrap();
    let mut turn = session.prompt("hello").unwrap();
    let mut streamed = String::new();
    let mut kinds = Vec::new();
    while let Some(event) = turn.next().await {
        kinds.push(event.kind().to_owned());
        if let Event::AssistantChunk(chunk) = &event.event {
            streamed.push_str(&chunk.text);
        }
    }
    assert_eq!(streamed, "hi there", "{kinds:?}");
    assert_eq!(turn.await.unwrap().reason, TurnEndReason::Completed);
    assert!(runtime_b.awake_sessions() >= 1, "b ran it");
    assert_eq!(runtime_a.awake_sessions(), 0, "a ran nothing");
    let events = session.events().await.unwrap();
    assert_eq!(events.last().map(Envelope::kind), Some("agent/idle"));
    let violations = check_finished_log(&events);
    assert!(violations.is_empty(), "{violations:?}");

    a.drain().await;
    b.drain().await;
    runtime_a.shutdown().await;
    runtime_b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_sent_to_a_node_that_does_not_serve_the_session_ends_its_turn() {
    let Some(cluster) = PgCluster::start() else { return };
    let url = cluster.create_database("cancel");
    let silent = Scripted::always(scripted::stall(&["thinking"]));
    let (a, runtime_a) = node(&url, "a", Arc::clone(&silent)).await;
    until(&a, "a holds everything", |held| held.len() == 8).await;
    let (b, runtime_b) = node(&url, "b", Arc::clone(&silent)).await;
    until(&b, "b takes its share", |held| held.len() == 4).await;
    until(&a, "a gave half back", |held| held.len() == 4).await;
    let id = session_in(*a.held().iter().next().unwrap());

    // Prompted on a (its server), cancelled through b.
    let on_a = runtime_a.session(&id).await.unwrap();
    let mut turn = on_a.prompt("wait for me").unwrap();
    loop {
        let event = turn.next().await.expect("the turn streams");
        if event.kind() == "assistant/chunk" {
            break;
        }
    }
    let on_b = runtime_b.session(&id).await.unwrap();
    let sent = std::time::Instant::now();
    assert!(on_b.cancel(CancelCause::User).await.unwrap(), "a turn was running");
    let outcome = turn.await.unwrap();
    let latency = sent.elapsed();
    assert_eq!(outcome.reason, TurnEndReason::Aborted { cause: CancelCause::User });
    assert!(latency < Duration::from_secs(2), "{latency:?}");
    assert!(!on_b.cancel(CancelCause::User).await.unwrap(), "nothing runs any more");

    // And the other way round: prompted through b, cancelled on a.
    let mut turn = on_b.prompt("again").unwrap();
    loop {
        let event = turn.next().await.expect("the turn streams through b");
        if event.kind() == "assistant/chunk" {
            break;
        }
    }
    assert!(on_a.cancel(CancelCause::User).await.unwrap());
    assert_eq!(turn.await.unwrap().reason, TurnEndReason::Aborted { cause: CancelCause::User });
    let events = on_b.events().await.unwrap();
    let violations = check_finished_log(&events);
    assert!(violations.is_empty(), "{violations:?}");

    a.drain().await;
    b.drain().await;
    runtime_a.shutdown().await;
    runtime_b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_under_a_stale_epoch_is_refused_even_when_it_reaches_the_database_first() {
    let Some(cluster) = PgCluster::start() else { return };
    let url = cluster.create_database("fence");
    // The cluster's tables and partitions, by a node that then leaves.
    let first = Node::join(&url, options("first")).await.unwrap();
    drop(first);
    let fence = Fence::new("a", 8);
    let store = PostgresStore::open_node(
        rein_runtime::store::postgres::Target::parse(&url).unwrap(),
        Durability::Disk,
        Arc::clone(&fence),
    )
    .await
    .unwrap();
    let id = session_in(3);
    let raw = raw(&url).await;
    raw.execute("UPDATE partitions SET node = 'a', epoch = 5, expires_at = now() + interval '1 hour' WHERE partition = 3", &[])
        .await
        .unwrap();
    fence.hold(&[Held { partition: 3, epoch: 5 }]);
    let claim = store.claim(&id).await.unwrap();
    let event =
        |seq| Envelope { seq, time: 0, event: Event::AgentIdle(rein_runtime::event::AgentIdle {}) };
    store.append(&id, &[event(0)]).await.unwrap();
    // Another node takes the partition over while `a` is paused.
    raw.execute("UPDATE partitions SET node = 'b', epoch = 6 WHERE partition = 3", &[])
        .await
        .unwrap();
    let refused = store.append(&id, &[event(1)]).await.unwrap_err();
    assert!(matches!(refused, StoreError::Fenced { partition: 3, epoch: 5, .. }), "{refused}");
    assert!(!fence.holds_session(&id), "the fence forgot the partition");
    let rows: i64 = raw.query_one("SELECT count(*) FROM events", &[]).await.unwrap().get(0);
    assert_eq!(rows, 1, "nothing of the refused append was written");
    drop(claim);
    // A claim now is refused: the partition is not held.
    assert!(matches!(store.claim(&id).await, Err(StoreError::NotOwned { partition: 3, .. })));
    // A store opened alone on a cluster's database writes none of its sessions.
    let alone = PostgresStore::open(&url, Durability::Disk).await.unwrap();
    let refused = alone.claim(&id).await.unwrap_err();
    assert!(matches!(refused, StoreError::Clustered { .. }), "{refused}");
    assert!(refused.to_string().contains("its sessions are written by its nodes only"));
}

async fn raw(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    client
}

/// Many requests forwarded at once: a node that serves sessions takes the commands that wait
/// together in one statement and runs each session's in the order they were sent — a burst of
/// prompts through a node that serves none of the sessions all run, once each, in order. (How
/// fast a burst is served is measured by the system benchmark's `nodes` group.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_forwarded_prompts_runs_every_prompt_once_in_the_order_sent() {
    let Some(cluster) = PgCluster::start() else { return };
    let url = cluster.create_database("burst");
    let (a, runtime_a) = node(&url, "a", Scripted::always(scripted::reply(&["ok"]))).await;
    until(&a, "a holds every partition", |held| held.len() == 8).await;
    let (b, runtime_b) = node(&url, "b", Scripted::always(scripted::reply(&["ok"]))).await;
    until(&b, "b takes its share", |held| held.len() == 4).await;
    until(&a, "a gave half back", |held| held.len() == 4).await;

    // 24 sessions b serves, each sent 3 prompts through a at once: 72 commands arrive together.
    let ids: Vec<String> =
        (0..).map(|i| format!("burst-{i}")).filter(|s| b.serves(s)).take(24).collect();
    let mut sessions = Vec::new();
    for id in &ids {
        sessions.push(runtime_a.session(id).await.unwrap());
    }
    let mut turns = Vec::new();
    for session in &sessions {
        for n in 1..=3 {
            turns.push((
                session.id().to_owned(),
                n,
                session.prompt(format!("prompt {n}")).unwrap(),
            ));
        }
    }
    for (id, n, turn) in turns {
        let outcome = turn.await.unwrap();
        assert_eq!((outcome.turn, &outcome.reason), (n, &TurnEndReason::Completed), "{id}");
    }
    assert_eq!(runtime_a.awake_sessions(), 0, "a ran nothing");
    for session in &sessions {
        let events = session.events().await.unwrap();
        let asked: Vec<&str> = events
            .iter()
            .filter_map(|e| match &e.event {
                Event::UserMessage(m) => Some(m.text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(asked, ["prompt 1", "prompt 2", "prompt 3"], "{}", session.id());
        let violations = check_finished_log(&events);
        assert!(violations.is_empty(), "{}: {violations:?}", session.id());
    }

    a.drain().await;
    b.drain().await;
    runtime_a.shutdown().await;
    runtime_b.shutdown().await;
}
