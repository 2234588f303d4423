//! The simulated provider through the full runtime with `llm-retry`, on paused time: a seeded
//! session meets its faults and recovers, replays exactly, and a stall lasts until cancelled or
//! until its watchdog. Every test ends with the invariant check of its log.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use rein_plugins::llm_retry;
use rein_providers::{Simulated, SimulatedConfig};
use rein_runtime::clock::VirtualClock;
use rein_runtime::event::{CancelCause, Envelope, Event, TurnEndReason};
use rein_runtime::runtime::{Route, Runtime};
use rein_runtime::store::memory::MemoryStore;
use rein_testkit::log::{assert_invariants, kinds, requests, retries, started};
use serde_json::{Value, json};

/// Runs `prompts` one turn after another on a fresh runtime with `config`; answers the log and
/// each turn's end.
async fn run(config: SimulatedConfig, prompts: &[&str]) -> (Vec<Envelope>, Vec<TurnEndReason>) {
    let store = MemoryStore::new();
    let simulated = Simulated::new(config).unwrap();
    let model = simulated.model().to_owned();
    let runtime = Runtime::builder()
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .plugin(llm_retry::factory(&json!({"jitterRatio": 0})).unwrap())
        .route(Route::new("simulated", Arc::new(simulated)).model(model))
        .build()
        .await
        .unwrap();
    let session = runtime.session("s").await.unwrap();
    let mut ends = vec![];
    for prompt in prompts {
        ends.push(session.prompt(*prompt).unwrap().await.unwrap().reason);
    }
    runtime.shutdown().await;
    assert_eq!((runtime.census().actors(), runtime.census().tasks()), (0, 0));
    let events = store.events("s");
    assert_invariants(&events);
    (events, ends)
}

const PROMPTS: [&str; 12] = [
    "hello",
    "what is a retry?",
    "and a backoff?",
    "why a seed?",
    "tell me about chunks",
    "what happens on a 429?",
    "and on a 503?",
    "can a stream stall?",
    "what does the log hold?",
    "how do I use a real model?",
    "is this deterministic?",
    "thanks",
];

#[tokio::test(start_paused = true)]
async fn a_seeded_session_meets_realistic_faults_and_recovers() {
    let config = SimulatedConfig {
        seed: 7,
        stall_rate: 0.05,
        idle_timeout: Some(Duration::from_secs(30)),
        ..SimulatedConfig::default()
    };
    let (events, ends) = run(config.clone(), &PROMPTS).await;

    let retried: BTreeSet<String> =
        retries(&events).iter().map(|(_, r)| r.failure.code().to_owned()).collect();
    assert!(retried.len() >= 2, "several kinds of fault were met and retried: {retried:?}");
    assert!(
        retried
            .iter()
            .all(|c| ["RATE_LIMIT", "SERVER", "TRANSPORT", "TIMEOUT"].contains(&c.as_str()))
    );
    // A rate limit waits exactly the simulated server's Retry-After.
    for (_, retry) in retries(&events) {
        if let Some(after) = retry.failure.provider_retry_after_ms() {
            assert_eq!(retry.delay_ms, after);
            assert!(config.retry_after_ms.contains(&(after as u64)));
        }
    }
    assert!(ends.iter().filter(|r| **r == TurnEndReason::Completed).count() >= 10, "{ends:?}");

    // Each answer is the successful attempt's words only, and it is about the prompt.
    let mut answered = 0;
    for (i, event) in events.iter().enumerate() {
        let Event::AssistantMessage(message) = &event.event else { continue };
        let attempt = requests(&events[..i]).last().unwrap().1.attempt;
        let words: String = events[..i]
            .iter()
            .filter_map(|e| match &e.event {
                Event::AssistantChunk(c) if c.turn == message.turn && c.attempt == attempt => {
                    Some(c.text.as_str())
                }
                _ => None,
            })
            .collect();
        assert_eq!(message.text, words);
        let prompt = PROMPTS[message.turn as usize - 1];
        assert!(message.text.contains(&format!("“{prompt}”")), "{}", message.text);
        assert!(message.usage.is_some());
        answered += 1;
    }
    assert!(answered >= 10);
}

/// The log with its random parts (retry ids) masked.
fn comparable(events: &[Envelope]) -> Vec<Value> {
    events
        .iter()
        .map(|e| {
            let mut value = serde_json::to_value(e).unwrap();
            if let Some(id) = value["data"].get_mut("retryId") {
                *id = json!("masked");
            }
            value
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn the_same_seed_replays_the_same_session() {
    let config = SimulatedConfig { seed: 11, ..SimulatedConfig::default() };
    let (one, _) = run(config.clone(), &PROMPTS[..6]).await;
    let (two, _) = run(config, &PROMPTS[..6]).await;
    assert_eq!(comparable(&one), comparable(&two));
    let (other, _) =
        run(SimulatedConfig { seed: 12, ..SimulatedConfig::default() }, &PROMPTS[..6]).await;
    assert_ne!(comparable(&one), comparable(&other));
}

#[tokio::test(start_paused = true)]
async fn a_stall_lasts_until_the_turn_is_cancelled() {
    let store = MemoryStore::new();
    let config =
        SimulatedConfig { stall_rate: 1.0, idle_timeout: None, ..SimulatedConfig::faultless(3) };
    let simulated = Simulated::new(config).unwrap();
    let runtime = Runtime::builder()
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .plugin(llm_retry::factory(&json!({})).unwrap())
        .route(Route::new("simulated", Arc::new(simulated)).model("simulated-1"))
        .build()
        .await
        .unwrap();
    let session = runtime.session("s").await.unwrap();
    let mut turn = session.prompt("hello").unwrap();
    // A day of virtual time passes: the stall never answers.
    tokio::time::sleep(Duration::from_secs(86_400)).await;
    assert!(session.cancel(CancelCause::User).await.unwrap(), "the turn was still running");
    while turn.next_event().await.is_some() {}
    assert_eq!(
        turn.outcome().await.unwrap().reason,
        TurnEndReason::Aborted { cause: CancelCause::User }
    );
    runtime.shutdown().await;
    let events = store.events("s");
    assert_invariants(&events);
    assert!(!kinds(&events).contains(&"request/error"));
}

#[tokio::test(start_paused = true)]
async fn a_stall_with_a_watchdog_times_out_and_is_retried() {
    let config = SimulatedConfig {
        stall_rate: 1.0,
        idle_timeout: Some(Duration::from_secs(30)),
        ..SimulatedConfig::faultless(3)
    };
    let (events, ends) = run(config, &["hello"]).await;
    // Every attempt stalls: two retries, then the budget ends in the last TIMEOUT.
    let [TurnEndReason::Error { failure }] = ends.as_slice() else { panic!("{ends:?}") };
    assert_eq!((failure.code(), failure.message()), ("TIMEOUT", "Simulated sent nothing for 30 s"));
    assert_eq!(retries(&events).len(), 2);
    assert_eq!(started(&events).len(), 2);
}
