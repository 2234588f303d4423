//! `fallback` with two OpenAI-compatible routes, each against a real HTTP server on 127.0.0.1, on
//! paused time: the primary answers 429 with quota wording (the adapter reads the body and says
//! `QUOTA`), the turn moves to the fallback server — another model — and completes there. Ends
//! with the invariant check of the log.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use rein_plugins::FALLBACK_FIRST;
use rein_providers::{OpenAiCompatible, OpenAiConfig};
use rein_runtime::clock::VirtualClock;
use rein_runtime::event::{Event, TurnEndReason};
use rein_runtime::plugin::BuiltPlugin;
use rein_runtime::runtime::{Route, Runtime};
use rein_runtime::store::memory::MemoryStore;
use rein_testkit::log::{assert_invariants, kinds, requests, retries, turn_ends_at};
use rein_testkit::server::{Server, answer, status_reply};
use serde_json::{Value, json};
use tokio::time::Instant;

const KEY: &str = "sk-fallback-test";

/// An OpenAI-compatible route named `name` at `server`, asking `model`.
fn route(name: &str, server: &Server, model: &str) -> Route {
    let config = OpenAiConfig::deepseek()
        .with_base_url(&server.base_url())
        .unwrap()
        .with_api_key(KEY)
        .unwrap()
        .with_model(model);
    Route::new(name, Arc::new(OpenAiCompatible::new(config).unwrap())).model(model)
}

fn plugin(name: &str, config: Value) -> BuiltPlugin {
    let (_, factory) = rein_plugins::ALL.iter().find(|(known, _)| *known == name).unwrap();
    factory(&config).unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_primary_out_of_quota_hands_the_turn_to_the_fallback_server_which_answers() {
    let quota = r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota"}}"#;
    let primary = Server::start(vec![status_reply(429, &[], quota)]).await;
    let secondary = Server::start(vec![answer(&["from ", "the fallback"])]).await;
    let store = MemoryStore::new();
    let configs =
        [json!({"routes": ["secondary"]}), json!({"jitterRatio": 0}), json!({}), json!({})];
    let mut builder = Runtime::builder()
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .route(route("primary", &primary, "big-model"))
        .route(route("secondary", &secondary, "small-model"));
    for (name, config) in FALLBACK_FIRST.iter().zip(configs) {
        builder = builder.plugin(plugin(name, config));
    }
    let runtime = builder.build().await.unwrap();
    assert_eq!(runtime.plugins(), FALLBACK_FIRST);
    let session = runtime.session("s").await.unwrap();
    let begun = Instant::now();
    let outcome = session.ask("hello").await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    assert_eq!(begun.elapsed(), Duration::ZERO, "a quota is not waited on");

    let (asked_primary, asked_secondary) = (primary.seen(), secondary.seen());
    assert_eq!((asked_primary.len(), asked_secondary.len()), (1, 1));
    assert_eq!(asked_primary[0].json()["model"], "big-model");
    assert_eq!(asked_secondary[0].json()["model"], "small-model");
    assert_eq!(
        asked_secondary[0].json()["messages"],
        asked_primary[0].json()["messages"],
        "the same conversation"
    );

    runtime.shutdown().await;
    let events = store.events("s");
    assert_invariants(&events);
    let switched: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::RouteSwitched(s) => Some((s.from.clone(), s.to.clone(), s.code.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(switched, [("primary".into(), "secondary".into(), "QUOTA".into())]);
    let routes: Vec<(String, String)> =
        requests(&events).into_iter().map(|(_, r)| (r.provider, r.model)).collect();
    assert_eq!(
        routes,
        [("primary".into(), "big-model".into()), ("secondary".into(), "small-model".into())]
    );
    assert!(retries(&events).is_empty());
    assert_eq!(turn_ends_at(&events).len(), 1);
    assert!(kinds(&events).contains(&"assistant/message"));
    let answer = events.iter().find_map(|e| match &e.event {
        Event::AssistantMessage(m) => Some(m.text.clone()),
        _ => None,
    });
    assert_eq!(answer.as_deref(), Some("from the fallback"));
}
