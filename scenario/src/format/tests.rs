use super::*;
use serde_json::json;

/// A valid scenario using every field of the base format, plus tool calls and usage.
fn base() -> Value {
    json!({
        "seed": 7,
        "random": [0.5, 0, 1],
        "plugins": [
            {"use": "llm-retry", "config": {"maxTransientRetries": 2, "jitterRatio": 0}},
            {"use": "auto-retry"}
        ],
        "providers": [{
            "id": "mock",
            "retryPolicy": {"mode": "always"},
            "script": [
                {"fail": {"code": "RATE_LIMIT", "message": "busy", "status": 429,
                          "retryAfterMs": 2000, "requestId": "r-1", "chunks": ["par", "tial"],
                          "latencyMs": 0}},
                {"reply": {"text": "done", "chunks": ["do", "ne"],
                           "toolCalls": [{"id": "c1", "name": "echo", "arguments": {"text": "hi"}}],
                           "latencyMs": 5, "usage": {"inputTokens": 1, "outputTokens": 2}}},
                {"stall": {}}
            ]
        }],
        "tools": ["echo"],
        "turns": [{"prompt": "hello", "provider": "mock"}],
        "actions": [
            {"atMs": 700, "do": "cancel"},
            {"atMs": 700, "do": "dispose", "plugin": "auto-retry"},
            {"atMs": 100, "do": "configure", "plugin": "auto-retry", "config": {"enabled": false}},
            {"atMs": 1000, "do": "retry"}
        ]
    })
}

/// `base()` with the value at a JSON pointer replaced (or removed, with `None`).
fn edit(pointer: &str, value: Option<Value>) -> Value {
    let mut doc = base();
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let target = doc.pointer_mut(parent).unwrap_or_else(|| panic!("no {parent}"));
    match (target, value) {
        (Value::Object(map), Some(v)) => {
            map.insert(key.to_owned(), v);
        }
        (Value::Object(map), None) => {
            map.remove(key).unwrap_or_else(|| panic!("no {pointer}"));
        }
        (Value::Array(items), Some(v)) => {
            let index = key.parse::<usize>().unwrap();
            if index == items.len() {
                items.push(v);
            } else {
                items[index] = v;
            }
        }
        (Value::Array(items), None) => {
            items.remove(key.parse::<usize>().unwrap());
        }
        _ => panic!("{parent} is not a container"),
    }
    doc
}

fn set(pointer: &str, value: Value) -> Value {
    edit(pointer, Some(value))
}

fn remove(pointer: &str) -> Value {
    edit(pointer, None)
}

const FAIL: &str = "/providers/0/script/0/fail";
const REPLY: &str = "/providers/0/script/1/reply";

#[test]
fn every_invalid_field_is_reported_at_its_path() {
    let fail = |k: &str| format!("{FAIL}/{k}");
    let reply = |k: &str| format!("{REPLY}/{k}");
    let cases: Vec<(Value, &str, &str)> = vec![
        // the top level
        (set("/seed", json!(-1)), "seed", "non-negative integer"),
        (set("/seed", json!(1.5)), "seed", "non-negative integer"),
        (set("/seed", json!("7")), "seed", "invalid type"),
        (set("/random/1", json!(1.5)), "random[1]", "within [0, 1]"),
        (set("/random/0", json!(-0.1)), "random[0]", "within [0, 1]"),
        (set("/random/2", json!("x")), "random[2]", "invalid type"),
        (set("/random", json!(0.5)), "random", "invalid type"),
        (set("/sead", json!(7)), "sead", "unknown field"),
        (remove("/providers"), "providers", "required field is missing"),
        (set("/providers", json!([])), "providers", "at least one provider"),
        (remove("/turns"), "turns", "required field is missing"),
        (set("/turns", json!([])), "turns", "at least one turn"),
        // plugins
        (set("/plugins/0/use", json!("")), "plugins[0].use", "non-empty"),
        (
            set("/plugins/0/config", json!(5)),
            "plugins[0].config",
            "must be an object, got a number",
        ),
        (set("/plugins/0/config", json!([])), "plugins[0].config", "an array"),
        (set("/plugins/1", json!(["auto-retry", {}])), "plugins[1]", "expected an object"),
        (set("/turns/0", json!(["hello", "mock"])), "turns[0]", "expected an object"),
        (
            set(&reply("usage"), json!([1, 2])),
            "providers[0].script[1].reply.usage",
            "expected an object",
        ),
        (
            set("/providers/0/script/2", json!({"stall": {}, "reply": {"text": "x"}})),
            "providers[0].script[2]",
            "",
        ),
        (set("/plugins/1/name", json!("x")), "plugins[1].name", "unknown field"),
        (remove("/plugins/0/use"), "plugins[0].use", "required field is missing"),
        // providers
        (set("/providers/0/id", json!("")), "providers[0].id", "non-empty"),
        (
            set("/providers/1", json!({"id": "mock", "script": []})),
            "providers[1].id",
            "already declared by providers[0]",
        ),
        (remove("/providers/0/script"), "providers[0].script", "required field is missing"),
        // providers: rein's `adapter` extension
        (set("/providers/0/adapter", json!("no")), "providers[0].adapter", "expected a boolean"),
        (
            set("/providers/1", json!({"id": "ghost", "adapter": false, "script": []})),
            "providers[1].script",
            "not allowed: \"adapter\": false declares that no adapter serves this route",
        ),
        (
            set(
                "/providers/1",
                json!({"id": "ghost", "adapter": false, "retryPolicy": {"mode": "always"}}),
            ),
            "providers[1].retryPolicy",
            "its attempts carry no policy",
        ),
        (
            set("/providers/1", json!({"id": "ghost", "adapter": true})),
            "providers[1].script",
            "required field is missing",
        ),
        (set("/providers/1", json!({"adapter": false})), "providers[1].id", "required field"),
        (set("/providers/0/modle", json!("m")), "providers[0].modle", "unknown field"),
        (
            set("/providers/1", json!({"id": "ghost", "adapter": false, "model": "m"})),
            "providers[1].model",
            "no model is asked",
        ),
        (
            set(
                "/providers/0/retryPolicy",
                json!({"mode": "always", "backoff": {"jitterRatio": 1.1}}),
            ),
            "providers[0].retryPolicy.backoff.jitterRatio",
            "[0, 1]",
        ),
        (
            set("/providers/0/retryPolicy", json!({"mode": "normal", "maxRetires": 2})),
            "providers[0].retryPolicy.maxRetires",
            "unknown key",
        ),
        (
            set("/providers/0/retryPolicy", json!({"mode": "sometimes"})),
            "providers[0].retryPolicy.mode",
            "sometimes",
        ),
        (set("/providers/0/retryPolicy", json!([])), "providers[0].retryPolicy", ""),
        (
            set("/providers/0/script/2", json!({"fial": {}})),
            "providers[0].script[2]",
            "unknown variant `fial`",
        ),
        (
            set("/providers/0/script/2", json!("stall")),
            "providers[0].script[2].stall",
            "an object with one key",
        ),
        (
            set("/providers/0/script/2/stall", json!({"latencyMs": 1})),
            "providers[0].script[2].stall.latencyMs",
            "unknown field",
        ),
        // fail
        (
            set(&fail("status"), json!(600)),
            "providers[0].script[0].fail.status",
            "100..=599, got 600",
        ),
        (set(&fail("status"), json!(99)), "providers[0].script[0].fail.status", "got 99"),
        (set(&fail("status"), json!(429.5)), "providers[0].script[0].fail.status", "got 429.5"),
        (set(&fail("status"), json!("429")), "providers[0].script[0].fail.status", "invalid type"),
        (set(&fail("retryAfterMs"), json!(0)), "providers[0].script[0].fail.retryAfterMs", "> 0"),
        (set(&fail("retryAfterMs"), json!(-5)), "providers[0].script[0].fail.retryAfterMs", "> 0"),
        (set(&fail("requestId"), json!("")), "providers[0].script[0].fail.requestId", "non-empty"),
        (set(&fail("message"), json!("")), "providers[0].script[0].fail.message", "non-empty"),
        (set(&fail("code"), json!("")), "providers[0].script[0].fail.code", "non-empty"),
        (remove(&fail("code")), "providers[0].script[0].fail.code", "required field is missing"),
        (remove(&fail("message")), "providers[0].script[0].fail.message", "required field"),
        (set(&fail("statsu"), json!(429)), "providers[0].script[0].fail.statsu", "unknown field"),
        (set(&fail("latencyMs"), json!(-1)), "providers[0].script[0].fail.latencyMs", "got -1"),
        (set(&fail("latencyMs"), json!(1.5)), "providers[0].script[0].fail.latencyMs", "got 1.5"),
        (
            set(&fail("latencyMs"), json!(2_147_483_648_u64)),
            "providers[0].script[0].fail.latencyMs",
            "0..=2147483647",
        ),
        (set(&fail("chunks"), json!([1])), "providers[0].script[0].fail.chunks[0]", "invalid type"),
        // reply
        (
            set(&reply("chunks"), json!(["do", "n"])),
            "providers[0].script[1].reply.chunks",
            "the chunks make \"don\" but text is \"done\"",
        ),
        (remove(&reply("text")), "providers[0].script[1].reply.text", "required field is missing"),
        (
            set(&reply("toolCalls"), json!([{"id": "", "name": "echo"}])),
            "providers[0].script[1].reply.toolCalls[0].id",
            "non-empty",
        ),
        (
            set(&reply("toolCalls"), json!([{"id": "c1", "name": ""}])),
            "providers[0].script[1].reply.toolCalls[0].name",
            "non-empty",
        ),
        (
            set(
                &reply("toolCalls"),
                json!([{"id": "c1", "name": "echo"}, {"id": "c1", "name": "echo"}]),
            ),
            "providers[0].script[1].reply.toolCalls[1].id",
            "used twice",
        ),
        (
            set(&reply("toolCalls"), json!([{"id": "c1", "name": "echo", "args": {}}])),
            "providers[0].script[1].reply.toolCalls[0].args",
            "unknown field",
        ),
        (
            set(&reply("usage"), json!({"inputTokens": 1, "outputTokens": 2, "total": 3})),
            "providers[0].script[1].reply.usage.total",
            "unknown field",
        ),
        (
            set(&reply("usage"), json!({"inputTokens": -1, "outputTokens": 2})),
            "providers[0].script[1].reply.usage.inputTokens",
            "invalid value",
        ),
        (set(&reply("latencyMs"), json!(0.5)), "providers[0].script[1].reply.latencyMs", "got 0.5"),
        // tools
        (set("/tools/0", json!("")), "tools[0]", "non-empty"),
        (set("/tools", json!(["echo", "echo"])), "tools[1]", "already listed at tools[0]"),
        // turns
        (set("/turns/0/provider", json!("nope")), "turns[0].provider", "declared: \"mock\""),
        (remove("/turns/0/prompt"), "turns[0].prompt", "required field is missing"),
        (remove("/turns/0/provider"), "turns[0].provider", "required field is missing"),
        // actions
        (set("/actions/0/do", json!("pause")), "actions[0].do", "unknown action \"pause\""),
        (set("/actions/0/atMs", json!(-1)), "actions[0].atMs", "got -1"),
        (set("/actions/0/atMs", json!(1.5)), "actions[0].atMs", "got 1.5"),
        (remove("/actions/0/atMs"), "actions[0].atMs", "required field is missing"),
        (remove("/actions/0/do"), "actions[0].do", "required field is missing"),
        (
            set("/actions/0/plugin", json!("auto-retry")),
            "actions[0].plugin",
            "not allowed for \"cancel\"",
        ),
        (remove("/actions/1/plugin"), "actions[1].plugin", "required for \"dispose\""),
        (set("/actions/1/plugin", json!("")), "actions[1].plugin", "non-empty"),
        (set("/actions/1/config", json!({})), "actions[1].config", "not allowed for \"dispose\""),
        (remove("/actions/2/config"), "actions[2].config", "required for \"configure\""),
        (remove("/actions/2/plugin"), "actions[2].plugin", "required for \"configure\""),
        (set("/actions/3/config", json!({})), "actions[3].config", "not allowed for \"retry\""),
        (set("/actions/3/when", json!(1)), "actions[3].when", "unknown field"),
        (set("/actions/3/revision", json!(1)), "actions[3].revision", "not allowed for \"retry\""),
        (set("/actions/2/revision", json!(-1)), "actions[2].revision", "got -1"),
        (set("/actions/2/revision", json!("1")), "actions[2].revision", "invalid type"),
        (set("/actions/0/do", json!("crash")), "actions[0].plugin", "required for \"crash\""),
        // rein's `model` extension
        (set("/providers/0/model", json!("")), "providers[0].model", "must be a non-empty string"),
        (set("/providers/0/model", json!(3)), "providers[0].model", "invalid type"),
        // rein's `reject` extension
        (set("/reject", json!("llm/retry")), "reject", "invalid type"),
        (set("/reject", json!([7])), "reject[0]", "invalid type"),
        (
            set("/reject", json!(["llm/retry", "llm/retyr"])),
            "reject[1]",
            "unknown event type \"llm/retyr\"; rejectable: \"llm/retry\", \"llm/retry-started\", \
             \"route/switched\", \"context/compacted\", \"plugin/crashed\", \"config/changed\"",
        ),
        (
            set("/reject", json!(["turn/start"])),
            "reject[0]",
            "\"turn/start\" is written by the runtime's own machinery and cannot be rejected",
        ),
        (set("/reject", json!(["session/start"])), "reject[0]", "cannot be rejected"),
        (set("/reject", json!([""])), "reject[0]", "unknown event type \"\""),
        (
            set("/reject", json!(["llm/retry", "llm/retry"])),
            "reject[1]",
            "\"llm/retry\" is already listed at reject[0]",
        ),
    ];
    let mut wrong = Vec::new();
    for (doc, path, fragment) in cases {
        let text = doc.to_string();
        let Err(err) = Scenario::from_json(&text) else {
            wrong.push(format!("{path}: accepted"));
            continue;
        };
        if err.path != path || !err.message.contains(fragment) {
            wrong.push(format!("{path} / {fragment:?}: got {err}"));
            continue;
        }
        assert!(err.to_string().starts_with(&format!("{path}: ")));
        // The same verdict for a document already parsed.
        assert_eq!(Scenario::from_value(doc).unwrap_err().path, err.path);
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn malformed_documents_are_reported_at_the_root_with_a_position() {
    for (text, fragment) in [
        ("", "EOF while parsing"),
        ("{\"seed\": 1", "EOF while parsing"),
        ("[]", "invalid type: sequence, expected an object"),
        ("[7, [], [], [], [], [], []]", "expected an object"),
        (&format!("{} {{}}", base()), "trailing characters"),
    ] {
        let err = Scenario::from_json(text).expect_err(text);
        assert_eq!(err.path, ".", "{text}: {err}");
        assert!(err.message.contains(fragment), "{text}: {err}");
    }
    let err = Scenario::from_json("{\n  \"seed\": 1,\n  \"turns\": [}").unwrap_err();
    assert_eq!(err.path, "turns[0]", "as far as the parser got");
    assert!(err.message.contains("line 3"), "{err}");
}

#[test]
fn the_example_parses_to_the_validated_scenario() {
    let scenario = Scenario::from_value(base()).unwrap();
    assert_eq!(scenario.seed, 7);
    assert_eq!(scenario.random, [0.5, 0.0, 1.0]);
    let plugins: Vec<(&str, &Value, &str)> =
        scenario.plugins.iter().map(|p| (p.name.as_str(), &p.config, p.path.as_str())).collect();
    assert_eq!(
        plugins,
        [
            ("llm-retry", &json!({"maxTransientRetries": 2, "jitterRatio": 0}), "plugins[0]"),
            ("auto-retry", &json!({}), "plugins[1]"),
        ]
    );
    let mock = scenario.provider("mock").unwrap();
    assert_eq!(
        mock.retry_policy.as_ref().map(RetryPolicy::policy_key).as_deref(),
        Some(r#"["always",500,10000,0.1]"#)
    );
    assert_eq!(mock.path, "providers[0]");
    let failure = Failure::new("RATE_LIMIT", "busy")
        .unwrap()
        .with_status(429)
        .unwrap()
        .with_retry_after_ms(2000.0)
        .unwrap()
        .with_request_id("r-1")
        .unwrap();
    assert_eq!(
        mock.script,
        [
            Scripted::Fail(ScriptedFail::new(failure).with_chunks(["par", "tial"])),
            Scripted::Reply(
                ScriptedReply::chunks(["do", "ne"])
                    .with_tool_calls(vec![ToolCall {
                        id: "c1".into(),
                        name: "echo".into(),
                        arguments: json!({"text": "hi"}),
                    }])
                    .with_usage(Usage { input_tokens: 1, output_tokens: 2 })
                    .with_latency(Duration::from_millis(5))
            ),
            Scripted::Stall,
        ]
    );
    assert_eq!(scenario.tools, ["echo"]);
    assert_eq!(scenario.turns, [TurnPlan { prompt: "hello".into(), provider: "mock".into() }]);
    let actions: Vec<(u64, &ActionKind, &str)> =
        scenario.actions.iter().map(|a| (a.at_ms, &a.kind, a.path.as_str())).collect();
    assert_eq!(
        actions,
        [
            (
                100,
                &ActionKind::Configure {
                    plugin: "auto-retry".into(),
                    patch: json!({"enabled": false}),
                    revision: None,
                },
                "actions[2]"
            ),
            (700, &ActionKind::Cancel, "actions[0]"),
            (700, &ActionKind::Dispose { plugin: "auto-retry".into() }, "actions[1]"),
            (1000, &ActionKind::Retry, "actions[3]"),
        ],
        "sorted by time; ties keep file order"
    );
}

#[test]
fn omitted_optional_fields_take_their_defaults() {
    let doc = json!({
        "providers": [{"id": "p", "script": [
            {"reply": {"text": "hi"}},
            {"reply": {"text": ""}},
            {"fail": {"code": "SERVER", "message": "down"}}
        ]}],
        "turns": [{"prompt": "", "provider": "p"}]
    });
    let scenario = Scenario::from_value(doc).unwrap();
    assert_eq!(scenario.seed, 0);
    assert!(scenario.random.is_empty() && scenario.plugins.is_empty());
    assert!(scenario.tools.is_empty() && scenario.actions.is_empty());
    let p = scenario.provider("p").unwrap();
    assert_eq!(p.retry_policy, None);
    assert_eq!(
        p.script,
        [
            Scripted::reply("hi"),
            Scripted::Reply(ScriptedReply::default()),
            Scripted::fail(Failure::new("SERVER", "down").unwrap()),
        ],
        "a text-only reply streams its text as one chunk; an empty one streams nothing"
    );
    let Scripted::Reply(reply) = &p.script[0] else { panic!() };
    assert_eq!(reply.chunks, ["hi"]);
}

#[test]
fn tool_call_arguments_default_to_an_empty_object() {
    let doc = set(&format!("{REPLY}/toolCalls"), json!([{"id": "c1", "name": "echo"}]));
    let scenario = Scenario::from_value(doc).unwrap();
    let Scripted::Reply(reply) = &scenario.providers[0].script[1] else { panic!() };
    assert_eq!(reply.tool_calls[0].arguments, json!({}));
}

#[test]
fn plugin_names_and_action_references_are_left_to_the_runner() {
    // Two entries may `use` the same factory (the names their plugins are built with decide),
    // and an action may name a plugin the file cannot see (a name given in a configuration).
    let mut doc = set("/plugins/1/use", json!("llm-retry"));
    doc["actions"][1]["plugin"] = json!("named-in-a-config");
    let scenario = Scenario::from_value(doc).unwrap();
    assert_eq!(scenario.plugins[1].name, "llm-retry");
    assert_eq!(
        scenario.actions[2].kind,
        ActionKind::Dispose { plugin: "named-in-a-config".into() }
    );
}

#[test]
fn a_route_may_name_the_model_it_asks() {
    let doc = json!({
        "providers": [
            {"id": "main", "model": "big-1", "script": [{"reply": {"text": "hi"}}]},
            {"id": "mock", "script": [{"reply": {"text": "hi"}}]}
        ],
        "turns": [{"prompt": "hello", "provider": "main"}]
    });
    let scenario = Scenario::from_value(doc).unwrap();
    assert_eq!(scenario.provider("main").unwrap().model.as_deref(), Some("big-1"));
    assert_eq!(scenario.provider("mock").unwrap().model, None, "the runner's default");
}

#[test]
fn a_route_may_declare_that_no_adapter_serves_it() {
    let doc = json!({
        "providers": [
            {"id": "ghost", "adapter": false},
            {"id": "mock", "adapter": true, "script": [{"reply": {"text": "hi"}}]}
        ],
        "turns": [{"prompt": "hello", "provider": "ghost"}]
    });
    let scenario = Scenario::from_value(doc).unwrap();
    let ghost = scenario.provider("ghost").unwrap();
    assert!(!ghost.adapter);
    assert_eq!((ghost.retry_policy.as_ref(), ghost.script.len()), (None, 0));
    assert!(scenario.provider("mock").unwrap().adapter);
    assert!(Scenario::from_value(base()).unwrap().providers[0].adapter, "the default");
    // A typo in a turn's provider is still an invalid file, not an adapterless route.
    let doc = json!({
        "providers": [{"id": "ghost", "adapter": false}],
        "turns": [{"prompt": "hello", "provider": "gohst"}]
    });
    let err = Scenario::from_value(doc).unwrap_err();
    assert_eq!(
        err.to_string(),
        "turns[0].provider: unknown provider \"gohst\"; declared: \"ghost\""
    );
}

#[test]
fn reject_lists_plugin_event_types_in_file_order() {
    let scenario =
        Scenario::from_value(set("/reject", json!(["llm/retry-started", "llm/retry"]))).unwrap();
    assert_eq!(scenario.reject, ["llm/retry-started", "llm/retry"]);
    assert!(Scenario::from_value(base()).unwrap().reject.is_empty(), "absent: nothing rejected");
    for kind in crate::reject::REJECTABLE {
        assert!(Scenario::from_value(set("/reject", json!([kind]))).is_ok(), "{kind}");
    }
}

#[test]
fn a_tool_call_may_leave_its_id_to_the_scripted_provider() {
    let doc =
        set(&format!("{REPLY}/toolCalls"), json!([{"name": "echo"}, {"id": "c2", "name": "echo"}]));
    let scenario = Scenario::from_value(doc).unwrap();
    let Scripted::Reply(reply) = &scenario.providers[0].script[1] else { panic!("a reply") };
    let ids: Vec<&str> = reply.tool_calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["", "c2"], "an empty id is the provider's to assign");
}

#[test]
fn an_action_may_come_at_any_non_negative_time() {
    for at_ms in [0, MAX_MS + 1, u64::MAX] {
        let scenario = Scenario::from_value(set("/actions/0/atMs", json!(at_ms))).unwrap();
        assert!(scenario.actions.iter().any(|a| a.at_ms == at_ms && a.kind == ActionKind::Cancel));
    }
}

#[test]
fn rein_extends_actions_with_a_crash_and_a_configure_revision() {
    let doc = set("/actions/4", json!({"atMs": 5, "do": "crash", "plugin": "auto-retry"}));
    let mut doc = doc;
    doc["actions"][2]["revision"] = json!(3);
    let scenario = Scenario::from_value(doc).unwrap();
    let kinds: Vec<&ActionKind> = scenario.actions.iter().map(|a| &a.kind).collect();
    assert_eq!(kinds[0], &ActionKind::Crash { plugin: "auto-retry".into() });
    assert_eq!(
        kinds[1],
        &ActionKind::Configure {
            plugin: "auto-retry".into(),
            patch: json!({"enabled": false}),
            revision: Some(3),
        }
    );
}

/// The example file of `docs/runtime-semantics.md` ("Scenario files") is a valid scenario that
/// uses every field of the base format.
#[test]
fn the_documented_example_is_a_valid_scenario() {
    let doc = include_str!("../../../docs/runtime-semantics.md");
    let section = &doc[doc.find("\n## Scenario files\n").expect("the section")..];
    let start = section.find("```json\n").expect("its example") + "```json\n".len();
    let end = start + section[start..].find("```").expect("the end of the example");
    let scenario = Scenario::from_json(&section[start..end]).expect("a valid scenario");
    assert_eq!((scenario.seed, scenario.random.len()), (7, 2));
    let names: Vec<&str> = scenario.plugins.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["llm-retry", "compaction", "auto-retry"]);
    let mock = scenario.provider("mock").expect("the mock route");
    assert!(mock.retry_policy.is_some());
    assert_eq!(mock.script.len(), 4);
    assert_eq!((scenario.tools.len(), scenario.turns.len(), scenario.actions.len()), (1, 2, 3));
}
