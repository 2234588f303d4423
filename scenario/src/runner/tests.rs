//! End-to-end runs through the real runtime, with small test plugins (the real ones live in
//! `rein-plugins`, which this crate cannot import). Each `run` builds its own paused runtime.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::json;

use super::*;
use rein_runtime::BoxFuture;
use rein_runtime::event::{Event, TurnEndReason};
use rein_runtime::failure::SCRIPT_EXHAUSTED;
use rein_runtime::plugin::{
    ConfigOutcome, Plugin, PluginSettings, Recovery, Settings, Staged, Verdict,
};

/// Waits `delay_ms` (racing the turn's cancel and its own disposal), then answers `Retry`;
/// `Stop` when cancelled or disposed. Writes nothing. Its settings are `{"delayMs": n}`.
struct WaitThenRetry {
    name: String,
    delay_ms: AtomicU64,
    revision: AtomicU64,
    lock: Mutex<()>,
}

impl WaitThenRetry {
    fn factory(name: &'static str) -> impl Fn(&Value) -> Result<Arc<dyn Plugin>, ConfigError> {
        move |config: &Value| {
            let mut delay_ms = 0;
            for (key, value) in config.as_object().into_iter().flatten() {
                match (key.as_str(), value.as_u64()) {
                    ("delayMs", Some(ms)) => delay_ms = ms,
                    ("delayMs", None) => {
                        return Err(ConfigError::Invalid {
                            path: "delayMs".into(),
                            message: format!("must be a non-negative integer, got {value}"),
                        });
                    }
                    _ => {
                        return Err(ConfigError::Invalid {
                            path: key.clone(),
                            message: "unknown key (expected delayMs)".into(),
                        });
                    }
                }
            }
            Ok(Arc::new(WaitThenRetry {
                name: name.into(),
                delay_ms: AtomicU64::new(delay_ms),
                revision: AtomicU64::new(0),
                lock: Mutex::new(()),
            }) as Arc<dyn Plugin>)
        }
    }
}

impl Plugin for WaitThenRetry {
    fn name(&self) -> &str {
        &self.name
    }

    fn recover(self: Arc<Self>, recovery: Recovery) -> BoxFuture<'static, Verdict> {
        let delay = Duration::from_millis(self.delay_ms.load(Ordering::SeqCst));
        Box::pin(async move {
            tokio::select! {
                () = tokio::time::sleep(delay) => Verdict::Retry,
                () = recovery.payload.cancel.cancelled() => Verdict::Stop,
                () = recovery.disposed.cancelled() => Verdict::Stop,
            }
        })
    }

    fn settings(&self) -> Option<&dyn Settings> {
        Some(self)
    }
}

/// Its one setting, `delayMs`, behind a revision fence (written by hand).
impl Settings for WaitThenRetry {
    fn shown(&self) -> PluginSettings {
        let revision = self.revision.load(Ordering::SeqCst);
        let settings = serde_json::json!({"delayMs": self.delay_ms.load(Ordering::SeqCst)});
        PluginSettings { revision, settings, read_only: false }
    }

    fn stage(&self, patch: &Value, base_revision: u64) -> Result<Staged, ConfigError> {
        let current = self.revision.load(Ordering::SeqCst);
        if base_revision != current {
            return Err(ConfigError::StaleRevision { based_on: base_revision, current });
        }
        let Some(ms) = patch.get("delayMs").and_then(Value::as_u64) else {
            return Err(ConfigError::Invalid {
                path: "delayMs".into(),
                message: format!("must be a non-negative integer, got {patch}"),
            });
        };
        let shown = serde_json::json!({"delayMs": ms});
        Ok(Staged::new(base_revision, vec!["delayMs".into()], shown, ms))
    }

    fn commit(&self, staged: Staged) -> Result<ConfigOutcome, ConfigError> {
        let _guard = self.lock.lock().unwrap();
        let base = staged.base_revision();
        let current = self.revision.load(Ordering::SeqCst);
        if base != current {
            return Err(ConfigError::StaleRevision { based_on: base, current });
        }
        let (ms, changed) = staged.into_value::<u64>().map_err(|_| ConfigError::Foreign)?;
        self.delay_ms.store(ms, Ordering::SeqCst);
        self.revision.store(current + 1, Ordering::SeqCst);
        Ok(ConfigOutcome { revision: current + 1, changed })
    }

    fn restore(&self, settings: &Value, revision: u64) -> Result<(), ConfigError> {
        let staged = self.stage(settings, self.revision.load(Ordering::SeqCst))?;
        let (ms, _) = staged.into_value::<u64>().map_err(|_| ConfigError::Foreign)?;
        self.delay_ms.store(ms, Ordering::SeqCst);
        self.revision.store(revision, Ordering::SeqCst);
        Ok(())
    }
}

/// Waits `sample × 1000` ms, drawing the sample from the runtime's jitter source, then retries.
struct SampleDelay;

impl Plugin for SampleDelay {
    fn name(&self) -> &str {
        "sample-delay"
    }

    fn recover(self: Arc<Self>, recovery: Recovery) -> BoxFuture<'static, Verdict> {
        let delay = Duration::from_secs_f64(recovery.jitter.sample());
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            Verdict::Retry
        })
    }
}

/// Names routes in its configuration (`{"routes": [...]}`), like `fallback`; refuses, when the
/// runtime says which routes it serves, a name it does not. Answers `Next`.
struct NamesRoutes(Vec<String>);

impl Plugin for NamesRoutes {
    fn name(&self) -> &str {
        "names-routes"
    }

    fn recover(self: Arc<Self>, _: Recovery) -> BoxFuture<'static, Verdict> {
        Box::pin(async { Verdict::Next })
    }

    fn known_routes(&self, routes: &[String]) -> Result<(), ConfigError> {
        match self.0.iter().position(|r| !routes.contains(r)) {
            None => Ok(()),
            Some(i) => Err(ConfigError::Invalid {
                path: format!("routes[{i}]"),
                message: format!("no route named {:?} is served", self.0[i]),
            }),
        }
    }
}

fn runner() -> ScenarioRunner {
    let mut plugins = PluginRegistry::new();
    plugins.register_lenient("lenient", |config: &Value| {
        // Takes any configuration; says what it ignored.
        let warnings = config
            .as_object()
            .into_iter()
            .flatten()
            .map(|(key, _)| rein_runtime::plugin::ConfigWarning {
                path: key.clone(),
                message: "unknown key; ignored".into(),
            })
            .collect();
        let plugin = WaitThenRetry::factory("lenient")(&json!({}))?;
        Ok(BuiltPlugin { warnings, ..BuiltPlugin::strict(plugin) })
    });
    plugins.register("sample-delay", |_: &Value| Ok(Arc::new(SampleDelay) as Arc<dyn Plugin>));
    plugins.register("wait-then-retry", WaitThenRetry::factory("wait-then-retry"));
    plugins.register("misnamed", WaitThenRetry::factory("other-name"));
    plugins.register("names-routes", |config: &Value| {
        let routes = config["routes"].as_array().into_iter().flatten();
        let routes = routes.filter_map(Value::as_str).map(str::to_owned).collect();
        Ok(Arc::new(NamesRoutes(routes)) as Arc<dyn Plugin>)
    });
    ScenarioRunner::new().plugins(plugins)
}

fn run(doc: Value) -> RunOutcome {
    let scenario = Scenario::from_value(doc).expect("valid scenario");
    runner().run(&scenario).expect("the scenario runs")
}

fn invalid(doc: Value) -> InvalidScenario {
    let scenario = Scenario::from_value(doc).expect("valid file");
    match runner().run(&scenario) {
        Err(RunError::Invalid(e)) => e,
        other => panic!("expected an invalid scenario, got {other:?}"),
    }
}

fn reasons(outcome: &RunOutcome) -> Vec<(u32, TurnEndReason)> {
    outcome.report.turns.iter().map(|t| (t.turn, t.reason.clone())).collect()
}

fn requests(outcome: &RunOutcome) -> Vec<(u64, u32, u32, u32)> {
    outcome.report.requests.iter().map(|r| (r.at_ms, r.turn, r.step, r.attempt)).collect()
}

fn error(code: &str, message: &str) -> TurnEndReason {
    TurnEndReason::Error { failure: rein_runtime::failure::Failure::new(code, message).unwrap() }
}

fn kinds(outcome: &RunOutcome) -> Vec<&'static str> {
    outcome.events.iter().map(Envelope::kind).collect()
}

#[test]
fn a_happy_path_with_a_tool_call_runs_on_virtual_time() {
    let outcome = run(json!({
        "providers": [{"id": "mock", "script": [
            {"reply": {"text": "calling", "toolCalls": [
                {"id": "c1", "name": "echo", "arguments": {"text": "hi"}}], "latencyMs": 120}},
            {"reply": {"text": "done", "chunks": ["do", "ne"], "latencyMs": 80}}
        ]}],
        "tools": ["echo"],
        "turns": [{"prompt": "hello", "provider": "mock"}]
    }));
    assert_eq!(reasons(&outcome), [(1, TurnEndReason::Completed)]);
    assert_eq!(requests(&outcome), [(0, 1, 1, 1), (120, 1, 2, 1)]);
    assert_eq!(
        serde_json::to_value(&outcome.report.messages).unwrap(),
        json!([
            {"role": "user", "text": "hello"},
            {"role": "assistant", "text": "calling",
             "toolCalls": [{"id": "c1", "name": "echo", "arguments": {"text": "hi"}}]},
            {"role": "tool", "id": "c1", "output": "hi", "isError": false},
            {"role": "assistant", "text": "done"}
        ])
    );
    assert_eq!(outcome.report.end_ms, 200);
    assert_eq!(outcome.report.events, outcome.events.len() as u64);
    assert_eq!(outcome.events.last().map(|e| e.time), Some(200));
    assert!(outcome.notes.is_empty(), "{:?}", outcome.notes);
    assert!(outcome.report.invariant.ok);
    let first = &outcome.events[0];
    assert!(matches!(&first.event, Event::SessionStart(s) if s.session == SESSION), "{first:?}");
    assert!(outcome.events.iter().all(|e| match &e.event {
        Event::RequestStart(r) => r.model == MODEL && r.provider == "mock",
        _ => true,
    }));
}

#[test]
fn turns_start_one_after_another() {
    let outcome = run(json!({
        "providers": [
            {"id": "a", "script": [{"reply": {"text": "one", "latencyMs": 100}}]},
            {"id": "b", "script": [{"reply": {"text": "two", "latencyMs": 50}}]}
        ],
        "turns": [{"prompt": "first", "provider": "a"}, {"prompt": "second", "provider": "b"}]
    }));
    assert_eq!(requests(&outcome), [(0, 1, 1, 1), (100, 2, 1, 1)]);
    let providers: Vec<&str> =
        outcome.report.requests.iter().map(|r| r.provider.as_str()).collect();
    assert_eq!(providers, ["a", "b"], "each turn on its own route");
    assert_eq!(reasons(&outcome), [(1, TurnEndReason::Completed), (2, TurnEndReason::Completed)]);
    assert_eq!(outcome.report.end_ms, 150);
}

#[test]
fn a_recovered_failure_keeps_its_chunks_out_of_the_history() {
    let outcome = run(json!({
        "plugins": [{"use": "wait-then-retry", "config": {"delayMs": 300}}],
        "providers": [{"id": "mock", "script": [
            {"fail": {"code": "SERVER", "message": "down", "chunks": ["par", "tial"],
                      "latencyMs": 10}},
            {"reply": {"text": "done"}}
        ]}],
        "turns": [{"prompt": "hello", "provider": "mock"}]
    }));
    assert_eq!(requests(&outcome), [(0, 1, 1, 1), (310, 1, 1, 2)]);
    assert_eq!(reasons(&outcome), [(1, TurnEndReason::Completed)]);
    assert_eq!(
        serde_json::to_value(&outcome.report.messages).unwrap(),
        json!([{"role": "user", "text": "hello"}, {"role": "assistant", "text": "done"}])
    );
    assert!(kinds(&outcome).contains(&"assistant/chunk"), "failed chunks are logged");
}

#[test]
fn an_exhausted_script_ends_the_turn_without_the_waterfall() {
    let outcome = run(json!({
        "plugins": [{"use": "wait-then-retry"}],
        "providers": [{"id": "mock", "script": []}],
        "turns": [{"prompt": "hello", "provider": "mock"}]
    }));
    assert_eq!(requests(&outcome), [(0, 1, 1, 1)], "the retrying plugin was never asked");
    let reasons = reasons(&outcome);
    let [(1, TurnEndReason::Error { failure })] = reasons.as_slice() else {
        panic!("{reasons:?}");
    };
    assert_eq!(failure.code(), SCRIPT_EXHAUSTED);
}

#[test]
fn a_cancel_action_aborts_a_stalled_turn_at_its_time() {
    let outcome = run(json!({
        "providers": [{"id": "mock", "script": [{"stall": {}}]}],
        "turns": [{"prompt": "hello", "provider": "mock"}],
        "actions": [{"atMs": 700, "do": "cancel"}]
    }));
    assert_eq!(reasons(&outcome), [(1, TurnEndReason::Aborted { cause: CancelCause::User })]);
    let end = outcome.events.iter().find(|e| e.kind() == "turn/end").unwrap();
    assert_eq!(end.time, 700);
    assert_eq!(outcome.report.end_ms, 700);
    assert!(outcome.notes.is_empty(), "{:?}", outcome.notes);
}

#[test]
fn a_stall_nothing_cancels_ends_the_run_by_shutdown_with_a_note() {
    let outcome = run(json!({
        "providers": [{"id": "mock", "script": [{"stall": {}}, {"reply": {"text": "never"}}]}],
        "turns": [{"prompt": "hello", "provider": "mock"}, {"prompt": "again", "provider": "mock"}]
    }));
    assert_eq!(reasons(&outcome), [(1, TurnEndReason::Aborted { cause: CancelCause::Disposed })]);
    assert_eq!(outcome.report.end_ms, STALL_MS);
    assert_eq!(outcome.notes.len(), 1, "{:?}", outcome.notes);
    assert!(outcome.notes[0].contains("stall"), "{:?}", outcome.notes);
    assert!(outcome.notes[0].contains("1 planned turn did not run"), "{:?}", outcome.notes);
}

#[test]
fn a_retry_action_reruns_the_failed_turn_over_the_same_history() {
    let outcome = run(json!({
        "providers": [{"id": "mock", "script": [
            {"fail": {"code": "SERVER", "message": "down"}},
            {"reply": {"text": "done"}}
        ]}],
        "turns": [{"prompt": "hello", "provider": "mock"}],
        "actions": [{"atMs": 1000, "do": "retry"}]
    }));
    assert_eq!(reasons(&outcome), [(1, error("SERVER", "down")), (2, TurnEndReason::Completed)]);
    assert_eq!(requests(&outcome), [(0, 1, 1, 1), (1000, 2, 1, 1)]);
    assert_eq!(
        serde_json::to_value(&outcome.report.messages).unwrap(),
        json!([{"role": "user", "text": "hello"}, {"role": "assistant", "text": "done"}]),
        "no second user message"
    );
}

#[test]
fn a_retry_due_while_a_turn_runs_applies_when_it_ends() {
    let outcome = run(json!({
        "providers": [{"id": "mock", "script": [
            {"fail": {"code": "SERVER", "message": "down", "latencyMs": 100}},
            {"reply": {"text": "done"}}
        ]}],
        "turns": [{"prompt": "hello", "provider": "mock"}],
        "actions": [{"atMs": 50, "do": "retry"}]
    }));
    assert_eq!(requests(&outcome), [(0, 1, 1, 1), (100, 2, 1, 1)]);
    assert_eq!(reasons(&outcome)[1], (2, TurnEndReason::Completed));
    assert!(outcome.notes.is_empty(), "{:?}", outcome.notes);
}

#[test]
fn actions_that_do_not_apply_leave_notes() {
    let outcome = run(json!({
        "plugins": [{"use": "wait-then-retry"}],
        "providers": [{"id": "mock", "script": [{"reply": {"text": "done"}}]}],
        "turns": [{"prompt": "hello", "provider": "mock"}],
        "actions": [
            {"atMs": 10, "do": "cancel"},
            {"atMs": 20, "do": "retry"},
            {"atMs": 30, "do": "dispose", "plugin": "wait-then-retry"},
            {"atMs": 40, "do": "dispose", "plugin": "wait-then-retry"}
        ]
    }));
    assert_eq!(reasons(&outcome), [(1, TurnEndReason::Completed)]);
    assert_eq!(outcome.notes.len(), 3, "{:?}", outcome.notes);
    assert!(outcome.notes[0].starts_with("actions[0] at 10 ms: cancel found no running turn"));
    assert!(outcome.notes[1].starts_with("actions[1] at 20 ms: retry did not apply"));
    assert!(outcome.notes[1].contains("turn 1 completed"), "{:?}", outcome.notes);
    assert!(outcome.notes[2].starts_with("actions[3] at 40 ms: dispose"), "{:?}", outcome.notes);
    assert_eq!(outcome.report.end_ms, 40);
}

#[test]
fn configure_goes_through_the_run_time_path_and_refusals_are_config_errors() {
    let outcome = run(json!({
        "plugins": [{"use": "wait-then-retry", "config": {"delayMs": 1000}}],
        "providers": [{"id": "mock", "script": [
            {"fail": {"code": "SERVER", "message": "down", "latencyMs": 200}},
            {"reply": {"text": "done"}}
        ]}],
        "turns": [{"prompt": "hello", "provider": "mock"}],
        "actions": [
            {"atMs": 50, "do": "configure", "plugin": "wait-then-retry", "config": {"delayMs": 10}},
            {"atMs": 60, "do": "configure", "plugin": "wait-then-retry", "config": {"delayMs": "x"}},
            {"atMs": 500, "do": "dispose", "plugin": "wait-then-retry"},
            {"atMs": 600, "do": "configure", "plugin": "wait-then-retry", "config": {"delayMs": 1}}
        ]
    }));
    // The accepted patch applies to the recovery that follows: a 10 ms wait, not 1000.
    assert_eq!(requests(&outcome), [(0, 1, 1, 1), (210, 1, 1, 2)]);
    let changed: Vec<(u64, &Event)> = outcome
        .events
        .iter()
        .filter(|e| e.kind() == "config/changed")
        .map(|e| (e.time, &e.event))
        .collect();
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert_eq!(changed[0].0, 50);
    let Event::ConfigChanged(c) = changed[0].1 else { unreachable!() };
    assert_eq!(
        (c.plugin.as_str(), c.revision, c.changed.as_slice()),
        ("wait-then-retry", 1, &["delayMs".to_owned()][..])
    );
    let errors: Vec<(u64, &str, &str)> = outcome
        .report
        .config_errors
        .iter()
        .map(|e| (e.at_ms, e.plugin.as_str(), e.error.as_str()))
        .collect();
    assert_eq!(
        errors,
        [
            (
                60,
                "wait-then-retry",
                "delayMs: must be a non-negative integer, got {\"delayMs\":\"x\"}"
            ),
            (600, "wait-then-retry", "no plugin named wait-then-retry is in the chain"),
        ]
    );
}

#[test]
fn disposing_a_plugin_mid_wait_ends_the_turn_with_its_failure() {
    let outcome = run(json!({
        "plugins": [{"use": "wait-then-retry", "config": {"delayMs": 1000}}],
        "providers": [{"id": "mock", "script": [
            {"fail": {"code": "SERVER", "message": "down"}},
            {"reply": {"text": "never"}}
        ]}],
        "turns": [{"prompt": "hello", "provider": "mock"}],
        "actions": [{"atMs": 400, "do": "dispose", "plugin": "wait-then-retry"}]
    }));
    assert_eq!(requests(&outcome), [(0, 1, 1, 1)], "exactly one request");
    assert_eq!(reasons(&outcome), [(1, error("SERVER", "down"))]);
    let end = outcome.events.iter().find(|e| e.kind() == "turn/end").unwrap();
    assert_eq!(end.time, 400);
}

#[test]
fn names_the_registries_do_not_know_make_the_scenario_invalid() {
    let base = |plugins: Value, tools: Value| {
        json!({
            "plugins": plugins,
            "tools": tools,
            "providers": [{"id": "mock", "script": []}],
            "turns": [{"prompt": "hi", "provider": "mock"}]
        })
    };
    let cases = [
        (
            base(json!([{"use": "wait-then-retry"}, {"use": "llm-retry"}]), json!([])),
            "plugins[1].use",
            "unknown plugin \"llm-retry\"; registered: \"lenient\", \"misnamed\", \"names-routes\", \"sample-delay\", \"wait-then-retry\"",
        ),
        (
            base(json!([{"use": "wait-then-retry", "config": {"delaysMs": 1}}]), json!([])),
            "plugins[0].config.delaysMs",
            "unknown key (expected delayMs)",
        ),
        (
            base(json!([{"use": "wait-then-retry", "config": {"delayMs": -1}}]), json!([])),
            "plugins[0].config.delayMs",
            "must be a non-negative integer, got -1",
        ),
        (
            base(json!([]), json!(["echo", "grep"])),
            "tools[1]",
            "unknown tool \"grep\"; registered: \"echo\"",
        ),
    ];
    for (doc, path, message) in cases {
        let err = invalid(doc);
        assert_eq!((err.path.as_str(), err.message.as_str()), (path, message));
    }
}

#[test]
fn a_route_a_plugin_names_must_be_served_and_a_route_may_name_its_model() {
    let doc = |routes: Value| {
        json!({
            "plugins": [{"use": "names-routes", "config": {"routes": routes}}],
            "providers": [
                {"id": "main", "model": "big-1", "script": [{"reply": {"text": "hi"}}]},
                {"id": "backup", "model": "small-1", "script": []},
                {"id": "ghost", "adapter": false}
            ],
            "turns": [{"prompt": "hi", "provider": "main"}]
        })
    };
    let err = invalid(doc(json!(["backup", "ghost"])));
    assert_eq!(
        (err.path.as_str(), err.message.as_str()),
        ("plugins[0].config.routes[1]", "no route named \"ghost\" is served"),
        "a route no adapter serves is not served"
    );
    let outcome = run(doc(json!(["backup"])));
    let models: Vec<(String, String)> = outcome
        .events
        .iter()
        .filter_map(|e| match &e.event {
            Event::RequestStart(r) => Some((r.provider.clone(), r.model.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(models, [("main".to_owned(), "big-1".to_owned())]);
}

#[test]
fn plugins_are_known_by_the_names_they_are_built_with() {
    let base = |plugins: Value, actions: Value| {
        json!({
            "plugins": plugins,
            "providers": [{"id": "mock", "script": []}],
            "turns": [{"prompt": "hi", "provider": "mock"}],
            "actions": actions
        })
    };
    // `misnamed` builds a plugin named `other-name`: actions find it by that name.
    let outcome = run(base(
        json!([{"use": "misnamed"}]),
        json!([{"atMs": 0, "do": "dispose", "plugin": "other-name"}]),
    ));
    assert_eq!(outcome.notes, Vec::<String>::new(), "the dispose applied");
    let cases = [
        (
            base(json!([{"use": "wait-then-retry"}, {"use": "wait-then-retry"}]), json!([])),
            "plugins[1]",
            "the plugin name \"wait-then-retry\" is already registered by plugins[0]",
        ),
        (
            base(
                json!([{"use": "misnamed"}]),
                json!([{"atMs": 0, "do": "configure", "plugin": "misnamed", "config": {}}]),
            ),
            "actions[0].plugin",
            "unknown plugin \"misnamed\"; registered: \"other-name\"",
        ),
        (
            base(json!([]), json!([{"atMs": 5, "do": "dispose", "plugin": "gone"}])),
            "actions[0].plugin",
            "unknown plugin \"gone\"; registered: none",
        ),
    ];
    for (doc, path, message) in cases {
        let err = invalid(doc);
        assert_eq!((err.path.as_str(), err.message.as_str()), (path, message));
    }
}

#[test]
fn the_injected_checker_judges_the_log() {
    let scenario = Scenario::from_value(json!({
        "providers": [{"id": "mock", "script": [{"reply": {"text": "ok"}}]}],
        "turns": [{"prompt": "hi", "provider": "mock"}]
    }))
    .unwrap();
    let seen = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&seen);
    let runner = ScenarioRunner::new().checker(move |events| {
        counter.store(events.len() as u64, Ordering::SeqCst);
        vec![Rejection {
            seq: 3,
            kind: "turn/start".into(),
            rule: "test-rule".into(),
            message: "judged".into(),
        }]
    });
    let outcome = runner.run(&scenario).unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), outcome.events.len() as u64, "it saw the whole log");
    assert!(!outcome.report.invariant.ok);
    assert_eq!(outcome.report.invariant.violations[0].rule, "test-rule");
}

#[test]
fn two_runs_of_one_scenario_write_the_same_log() {
    let doc = json!({
        "seed": 3,
        "plugins": [{"use": "wait-then-retry", "config": {"delayMs": 250}}],
        "providers": [{"id": "mock", "script": [
            {"fail": {"code": "SERVER", "message": "down", "chunks": ["a"], "latencyMs": 5}},
            {"fail": {"code": "RATE_LIMIT", "message": "slow", "latencyMs": 7}},
            {"reply": {"text": "done", "chunks": ["do", "ne"], "latencyMs": 11}}
        ]}],
        "turns": [{"prompt": "hello", "provider": "mock"}],
        "actions": [{"atMs": 100, "do": "configure", "plugin": "wait-then-retry",
                     "config": {"delayMs": 20}}]
    });
    let first = run(doc.clone());
    let second = run(doc);
    assert_eq!(first.events, second.events);
    assert_eq!(first.report, second.report);
}

#[test]
fn plugins_draw_the_random_samples_in_order_then_the_seeded_rng() {
    let with_seed = |seed: u64| {
        json!({
            "seed": seed,
            "random": [0.5, 0.25],
            "plugins": [{"use": "sample-delay"}],
            "providers": [{"id": "mock", "script": [
                {"fail": {"code": "SERVER", "message": "1"}},
                {"fail": {"code": "SERVER", "message": "2"}},
                {"fail": {"code": "SERVER", "message": "3"}},
                {"reply": {"text": "done"}}
            ]}],
            "turns": [{"prompt": "hello", "provider": "mock"}]
        })
    };
    let starts = |outcome: &RunOutcome| -> Vec<u64> {
        outcome.report.requests.iter().map(|r| r.at_ms).collect()
    };
    let seven = starts(&run(with_seed(7)));
    assert_eq!(&seven[..3], [0, 500, 750], "the explicit samples first, in order");
    assert!(seven[3] >= 750 && seven[3] < 1750, "then the RNG: {seven:?}");
    assert_eq!(starts(&run(with_seed(7))), seven, "a seed gives the same samples");
    assert_ne!(starts(&run(with_seed(8))), seven, "another seed, other samples");
}

#[tokio::test(start_paused = true)]
async fn run_here_drives_the_scenario_on_the_callers_paused_runtime() {
    let scenario = Scenario::from_value(json!({
        "providers": [{"id": "mock", "script": [{"reply": {"text": "ok", "latencyMs": 5000}}]}],
        "turns": [{"prompt": "hi", "provider": "mock"}]
    }))
    .unwrap();
    let outcome = ScenarioRunner::new().run_here(&scenario).await.unwrap();
    assert_eq!(outcome.report.end_ms, 5000);
    assert_eq!(reasons(&outcome), [(1, TurnEndReason::Completed)]);
}

#[test]
fn a_route_without_an_adapter_fails_with_no_adapter_like_an_unknown_route() {
    let outcome = run(json!({
        "providers": [
            {"id": "ghost", "adapter": false},
            {"id": "mock", "script": [{"reply": {"text": "served"}}]}
        ],
        "turns": [{"prompt": "hello", "provider": "ghost"}, {"prompt": "again", "provider": "mock"}]
    }));
    assert_eq!(
        reasons(&outcome),
        [
            (1, error(rein_runtime::failure::NO_ADAPTER, "no provider route named \"ghost\"")),
            (2, TurnEndReason::Completed)
        ]
    );
    let starts: Vec<(&str, &str)> = outcome
        .events
        .iter()
        .filter_map(|e| match &e.event {
            Event::RequestStart(r) => Some((r.provider.as_str(), r.model.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(starts, [("ghost", ""), ("mock", MODEL)], "no adapter, no model");
    assert!(outcome.report.invariant.ok);
}

#[test]
fn rejected_event_types_are_refused_by_the_log_and_the_run_goes_on() {
    let doc = |reject: Value| {
        json!({
            "plugins": [{"use": "wait-then-retry"}],
            "providers": [{"id": "mock", "script": [{"reply": {"text": "done", "latencyMs": 100}}]}],
            "turns": [{"prompt": "hello", "provider": "mock"}],
            "actions": [
                {"atMs": 50, "do": "configure", "plugin": "wait-then-retry", "config": {"delayMs": 1}}
            ],
            "reject": reject
        })
    };
    let accepted = run(doc(json!([])));
    assert!(kinds(&accepted).contains(&"config/changed"));
    let refused = run(doc(json!(["config/changed"])));
    assert!(!kinds(&refused).contains(&"config/changed"), "{:?}", kinds(&refused));
    assert_eq!(reasons(&refused), [(1, TurnEndReason::Completed)]);
    assert_eq!(refused.report.events + 1, accepted.report.events, "nothing else changed");
    assert!(refused.report.config_errors.is_empty(), "the plugin accepted the patch");
}

#[test]
fn the_warnings_of_lenient_configuration_readers_are_placed_under_the_plugin() {
    let outcome = run(json!({
        "plugins": [{"use": "wait-then-retry"}, {"use": "lenient", "config": {"b": 1, "a": 2}}],
        "providers": [{"id": "mock", "script": [{"reply": {"text": "done"}}]}],
        "turns": [{"prompt": "hello", "provider": "mock"}]
    }));
    assert_eq!(
        outcome.warnings,
        ["plugins[1].config.a: unknown key; ignored", "plugins[1].config.b: unknown key; ignored",]
    );
    assert!(outcome.notes.is_empty());
}

#[test]
fn an_action_far_beyond_every_timer_is_reached_at_once_and_on_time() {
    // After the turn ended, nothing but the action is left: the run goes straight to it.
    for at_ms in [STALL_MS + 5, 1 << 50, u64::MAX / 4, u64::MAX] {
        let outcome = run(json!({
            "providers": [{"id": "mock", "script": [
                {"fail": {"code": "SERVER", "message": "down"}},
                {"reply": {"text": "done"}}
            ]}],
            "turns": [{"prompt": "hello", "provider": "mock"}],
            "actions": [{"atMs": at_ms, "do": "retry"}]
        }));
        assert_eq!(requests(&outcome), [(0, 1, 1, 1), (at_ms, 2, 1, 1)], "{at_ms}");
        assert_eq!(outcome.report.end_ms, at_ms);
    }
    // A stalled turn waits for an action that can end it, however far.
    let at_ms = 3 * STALL_MS;
    let outcome = run(json!({
        "providers": [{"id": "mock", "script": [{"stall": {}}]}],
        "turns": [{"prompt": "hello", "provider": "mock"}],
        "actions": [{"atMs": at_ms, "do": "cancel"}]
    }));
    assert_eq!(reasons(&outcome), [(1, TurnEndReason::Aborted { cause: CancelCause::User })]);
    assert_eq!(outcome.report.end_ms, at_ms);
    assert!(outcome.notes.is_empty(), "{:?}", outcome.notes);
}

#[test]
fn a_configure_action_may_name_the_revision_it_is_based_on() {
    let outcome = run(json!({
        "plugins": [{"use": "wait-then-retry"}],
        "providers": [{"id": "mock", "script": [{"reply": {"text": "done"}}]}],
        "turns": [{"prompt": "hello", "provider": "mock"}],
        "actions": [
            {"atMs": 0, "do": "configure", "plugin": "wait-then-retry", "config": {"delayMs": 5},
             "revision": 0},
            {"atMs": 0, "do": "configure", "plugin": "wait-then-retry", "config": {"delayMs": 6},
             "revision": 0}
        ]
    }));
    let errors: Vec<&str> = outcome.report.config_errors.iter().map(|e| e.error.as_str()).collect();
    assert_eq!(errors, ["stale revision: the patch is based on revision 0, the settings are at 1"]);
}

#[test]
fn a_crash_action_restarts_the_plugin_and_it_keeps_serving() {
    let outcome = run(json!({
        "plugins": [{"use": "wait-then-retry", "config": {"delayMs": 100}}],
        "providers": [{"id": "mock", "script": [
            {"fail": {"code": "SERVER", "message": "one", "latencyMs": 200}},
            {"fail": {"code": "SERVER", "message": "two", "latencyMs": 200}},
            {"reply": {"text": "done"}}
        ]}],
        "turns": [{"prompt": "hello", "provider": "mock"}],
        "actions": [
            {"atMs": 100, "do": "crash", "plugin": "wait-then-retry"},
            {"atMs": 400, "do": "crash", "plugin": "wait-then-retry"}
        ]
    }));
    // Crashed before the first failure and during the wait of the first recovery (which goes
    // on: it belongs to the plugin's place in the chain, not to the actor).
    assert_eq!(requests(&outcome), [(0, 1, 1, 1), (300, 1, 1, 2), (600, 1, 1, 3)]);
    assert_eq!(reasons(&outcome), [(1, TurnEndReason::Completed)]);
    assert!(outcome.notes.is_empty(), "{:?}", outcome.notes);
    assert!(!kinds(&outcome).contains(&"plugin/crashed"), "no session was involved");
}
