//! Generation settings end to end: a route's settings reach every attempt of every step, a
//! prompt's win field by field, a route switch takes the new route's settings under the
//! prompt's, a manual retry runs on the route's alone, and nothing of them is in the log. Every
//! test ends by checking its log.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use rein_runtime::clock::VirtualClock;
use rein_runtime::event::{Envelope, TurnEndReason};
use rein_runtime::plugin::{Plugin, Verdict};
use rein_runtime::provider::{Generation, Request};
use rein_runtime::runtime::{Route, Runtime};
use rein_runtime::session::{Prompt, Session};
use rein_runtime::store::memory::MemoryStore;
use rein_runtime::tool::echo::EchoTool;
use rein_testkit::log;
use rein_testkit::log::assert_valid;
use rein_testkit::plugins::{TestPlugin, Trace};
use rein_testkit::scripted::{Scripted, call, fail_streamed, reply};
use serde_json::json;

/// Each request's (provider, system prompt, temperature, max tokens).
type Seen = (String, Option<String>, Option<f64>, Option<u32>);

fn settings(requests: &[Request]) -> Vec<Seen> {
    requests
        .iter()
        .map(|r| {
            let g = &r.generation;
            (
                r.provider.clone(),
                g.system_prompt().map(str::to_owned),
                g.temperature(),
                g.max_tokens(),
            )
        })
        .collect()
}

fn seen(
    provider: &str,
    system: Option<&str>,
    temperature: Option<f64>,
    tokens: Option<u32>,
) -> Seen {
    (provider.to_owned(), system.map(str::to_owned), temperature, tokens)
}

/// A runtime over `store` with two routes on `adapter` — `mock` (system prompt "Be brief.", 256
/// tokens) and `backup` (system prompt "Bref.", temperature 0.3) — the `echo` tool, the live
/// invariant checker and `plugins` in chain order; and its session `s`.
async fn start(
    store: &MemoryStore,
    adapter: &Arc<Scripted>,
    plugins: Vec<Arc<dyn Plugin>>,
) -> (Runtime, Session) {
    let mock = Generation::new().with_system_prompt("Be brief.").unwrap();
    let backup = Generation::new().with_system_prompt("Bref.").unwrap();
    let mut builder = Runtime::builder()
        .validator(log::live_invariant)
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .route(
            Route::new("mock", adapter.clone())
                .model("m")
                .generation(mock.with_max_tokens(256).unwrap()),
        )
        .route(
            Route::new("backup", adapter.clone())
                .model("b")
                .generation(backup.with_temperature(0.3).unwrap()),
        )
        .default_route("mock")
        .tool(Arc::new(EchoTool));
    for plugin in plugins {
        builder = builder.plugin(plugin);
    }
    let runtime = builder.build().await.unwrap();
    let session = runtime.session("s").await.unwrap();
    (runtime, session)
}

/// Shuts down, then checks the log (and that no setting reached it).
async fn finish(runtime: Runtime, store: &MemoryStore) -> Vec<Envelope> {
    runtime.shutdown().await;
    let events = store.events("s");
    assert_valid(&events);
    let log = serde_json::to_string(&events).unwrap();
    for setting in ["Be brief", "Bref", "Be poetic"] {
        assert!(!log.contains(setting), "settings are not logged: {setting}");
    }
    events
}

#[tokio::test(start_paused = true)]
async fn route_settings_reach_every_attempt_and_a_prompts_win_field_by_field() {
    let store = MemoryStore::new();
    let adapter = Scripted::new(vec![
        call(&[], &[("c1", "echo", json!({"text": "x"}))]),
        reply(&["first"]),
        reply(&["second"]),
    ]);
    let (runtime, session) = start(&store, &adapter, vec![]).await;

    // Two steps (a tool call, then the answer) on the route's settings.
    assert_eq!(session.ask("one").await.unwrap().reason, TurnEndReason::Completed);
    // The prompt's system prompt and temperature win; the route's token limit stays.
    let own = Generation::new().with_system_prompt("Be poetic.").unwrap();
    let prompt = Prompt::new("two").generation(own.with_temperature(1.5).unwrap());
    assert_eq!(session.ask(prompt).await.unwrap().reason, TurnEndReason::Completed);

    assert_eq!(
        settings(&adapter.requests()),
        [
            seen("mock", Some("Be brief."), None, Some(256)),
            seen("mock", Some("Be brief."), None, Some(256)),
            seen("mock", Some("Be poetic."), Some(1.5), Some(256)),
        ]
    );
    finish(runtime, &store).await;
}

#[tokio::test(start_paused = true)]
async fn a_switched_step_takes_the_new_routes_settings_under_the_prompts() {
    let store = MemoryStore::new();
    let adapter = Scripted::new(vec![fail_streamed("QUOTA", &[]), reply(&["from backup"])]);
    let trace = Trace::default();
    let switch = TestPlugin::new("switch", &trace, |recovery, _| {
        Box::pin(async move {
            recovery.switch_route("backup", "eager").await.unwrap();
            Verdict::Retry
        })
    });
    let (runtime, session) = start(&store, &adapter, vec![switch]).await;
    let prompt = Prompt::new("hi").generation(Generation::new().with_temperature(0.9).unwrap());
    assert_eq!(session.ask(prompt).await.unwrap().reason, TurnEndReason::Completed);
    assert_eq!(
        settings(&adapter.requests()),
        [
            seen("mock", Some("Be brief."), Some(0.9), Some(256)),
            seen("backup", Some("Bref."), Some(0.9), None)
        ]
    );
    finish(runtime, &store).await;
}

#[tokio::test(start_paused = true)]
async fn a_manual_retry_runs_on_the_routes_settings_alone() {
    let store = MemoryStore::new();
    let adapter = Scripted::new(vec![fail_streamed("SERVER", &["half"]), reply(&["whole"])]);
    let (runtime, session) = start(&store, &adapter, vec![]).await;
    let prompt = Prompt::new("hi").generation(Generation::new().with_temperature(0.9).unwrap());
    let outcome = session.ask(prompt).await.unwrap();
    assert!(matches!(outcome.reason, TurnEndReason::Error { .. }), "{outcome:?}");
    let retried = session.retry().await.unwrap().await.unwrap();
    assert_eq!(retried.reason, TurnEndReason::Completed);
    assert_eq!(
        settings(&adapter.requests()),
        [
            seen("mock", Some("Be brief."), Some(0.9), Some(256)),
            seen("mock", Some("Be brief."), None, Some(256))
        ]
    );
    finish(runtime, &store).await;
}
