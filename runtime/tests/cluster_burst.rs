//! Many requests forwarded at once (SPEC §12): a node that serves sessions takes the commands
//! that wait together in one statement, and runs each session's in the order they were sent —
//! a burst of prompts through a node that serves none of the sessions all run, once each, in
//! order. (How fast a burst is served is measured by the system benchmark's `nodes` group.)
//!
//! Without PostgreSQL the test says how to install it and passes, except with `CI=true`.

#![cfg(feature = "postgres")]
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use rein_invariant::check_finished_log;
use rein_runtime::cluster::{Node, NodeOptions};
use rein_runtime::event::{Event, TurnEndReason};
use rein_runtime::prelude::*;
use rein_testkit::PgCluster;
use rein_testkit::scripted::{self, Scripted};

/// A node of 8 partitions on `url`, answering at once.
async fn node(url: &str, id: &str) -> (Node, Runtime) {
    let mut options = NodeOptions::new(id);
    options.partitions = Some(8);
    options.lease = Duration::from_millis(600);
    let node = Node::join(url, options).await.unwrap();
    let runtime = Runtime::builder()
        .store(node.store())
        .placement(node.placement())
        .route(Route::new("main", Scripted::always(scripted::reply(&["ok"]))).model("m"))
        .build()
        .await
        .unwrap();
    node.start(&runtime).await.unwrap();
    (node, runtime)
}

/// Waits (on the node's events, up to 20 s) until `done` says its partitions are right.
async fn until(node: &Node, what: &str, done: impl Fn(&BTreeSet<u32>) -> bool) {
    let mut events = node.events();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !done(&node.held()) {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if tokio::time::timeout(left, events.recv()).await.is_err() {
            panic!("{}: {what} never happened; holds {:?}", node.id(), node.held());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_forwarded_prompts_runs_every_prompt_once_in_the_order_sent() {
    let Some(cluster) = PgCluster::start() else { return };
    let url = cluster.create_database("burst");
    let (a, runtime_a) = node(&url, "a").await;
    until(&a, "a holds every partition", |held| held.len() == 8).await;
    let (b, runtime_b) = node(&url, "b").await;
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
