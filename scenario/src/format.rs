//! The scenario file format (`docs/runtime-semantics.md`, "Scenario files"): serde types, and the
//! strict validation that turns a file into a [`Scenario`].
//!
//! Parsing happens in two passes. The first is serde over private `Raw*` types that deny unknown
//! fields, tracked by `serde_path_to_error`, so a type error or a typo names its place
//! (`providers[0].script[2].fail.statsu: unknown field`). The second checks the rules serde
//! cannot express (ranges, non-empty strings, references between sections) and builds the
//! validated types; every error it raises carries the same kind of JSON path.
//!
//! What this module does not know is which plugins and tools exist: the runner resolves
//! `plugins[i].use`, `plugins[i].config` and `tools[i]` against its registries, checks that the
//! plugins it built have distinct names and that every `dispose`/`configure` action names one of
//! them, and reports its errors with the paths this module records ([`PluginUse::path`],
//! [`Action::path`], …), so a scenario is rejected, whole, before anything runs.
//!
//! # rein's extensions of the scenario format
//!
//! A few optional fields make the waterfall's failure modes expressible; a file without them
//! reads exactly as the format says, and the report keeps its shape:
//!
//! - `providers[i].model` (default `"scripted"`, [`crate::runner::MODEL`]): the model the route
//!   asks, as its `request/start` names it — so a file can fall back to another model of the
//!   same provider and the log shows which one answered.
//! - `providers[i].adapter` (default `true`): `false` declares a route no adapter serves. It
//!   takes no `script` and no `retryPolicy`; the runner registers no route for it, so a turn on
//!   it fails with `NO_ADAPTER` and a waterfall payload without a policy, as for any route the
//!   runtime does not know. `turns[i].provider` must still name a declared provider, so a typo
//!   stays an invalid file rather than becoming an adapterless route.
//! - `reject`: event types whose appends the session log refuses (fault injection, through
//!   [`super::reject::RejectAppends`]). Only the types written for plugins ([`REJECTABLE`]) may
//!   be listed: refusing the runtime's own lifecycle (`turn/start`, `session/start`…) would make
//!   the run an internal fault instead of showing what a plugin does with a refusal.
//! - `actions[i].revision` (`configure` only): the revision the patch is based on, instead of the
//!   plugin's current one — a stale settings page, or two pages saving from one revision.
//! - `{"do": "crash", "plugin": NAME}`: the plugin's actor fails as a panicking recovery would
//!   and its supervisor restarts it (fault injection: a plugin's state must live in the log).
//!
//! A tool call may leave out its `id`: the scripted provider gives it `call_<turn>_<step>_<n>`
//! when it plays the reply. An action's `atMs` may be any non-negative integer.
//!
//! # Why a reply's `text` and `chunks` must agree
//!
//! A reply's text is by definition what its chunks concatenate to (`assistant/message` is built
//! only from the streamed chunks). A file giving both with different contents is contradictory,
//! and silently preferring one would make the report disagree with the file; so it is invalid. A
//! reply with only `text` streams it as one chunk.

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use serde::Deserialize;
use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::{Number, Value};

use crate::reject::REJECTABLE;
use crate::scripted::{Scripted, ScriptedFail, ScriptedReply};
use rein_event::event::{Event, ToolCall, Usage};
use rein_event::failure::{Failure, FailureError};
use rein_event::retry_policy::RetryPolicy;

/// The largest `latencyMs` accepted (the largest timer delay browsers and the retry policies
/// accept, about 24.8 days). An action's `atMs` may be any non-negative integer.
pub const MAX_MS: u64 = 2_147_483_647;

/// A scenario file that is not valid. `path` is the JSON path of the offending field (`.` for the
/// whole document).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
#[non_exhaustive]
pub struct InvalidScenario {
    /// Where: `providers[0].script[2].fail.status`.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl InvalidScenario {
    /// An error at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self { path: path.into(), message: message.into() }
    }
}

/// A validated scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// The seed of the RNG that continues after `random` is used up (default 0).
    pub seed: u64,
    /// Jitter samples, each in [0, 1], consumed in order by every plugin.
    pub random: Vec<f64>,
    /// The plugins, in registration order. The names they are built with must be unique; only
    /// the runner, which builds them, can check that.
    pub plugins: Vec<PluginUse>,
    /// The provider routes (ids are unique; at least one).
    pub providers: Vec<ProviderScript>,
    /// The tools offered, by name (unique).
    pub tools: Vec<String>,
    /// The turns, each started when the previous one ended (at least one).
    pub turns: Vec<TurnPlan>,
    /// The actions, sorted by `at_ms`; actions at the same time keep their file order.
    pub actions: Vec<Action>,
    /// rein's extension: the event types whose appends the session log refuses (fault
    /// injection), each one of [`REJECTABLE`], unique, in file order.
    pub reject: Vec<String>,
}

/// `plugins[i]`.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginUse {
    /// Its registry name (`use`).
    pub name: String,
    /// Its configuration, read as that plugin's configuration file (an object; `{}` when absent).
    pub config: Value,
    /// Its JSON path, `plugins[i]`.
    pub path: String,
}

/// `providers[i]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderScript {
    /// The route's id.
    pub id: String,
    /// The model the route asks (rein's extension; `None`: the runner's default,
    /// [`crate::runner::MODEL`]).
    pub model: Option<String>,
    /// Whether an adapter serves the route (rein's extension, `"adapter": false`: no adapter
    /// does, so every attempt on it fails with `NO_ADAPTER` and the waterfall payload carries no
    /// policy). When false, `retry_policy` is `None` and `script` is empty.
    pub adapter: bool,
    /// The route's declared retry policy, if any.
    pub retry_policy: Option<RetryPolicy>,
    /// One entry per attempt.
    pub script: Vec<Scripted>,
    /// Its JSON path, `providers[i]`.
    pub path: String,
}

/// `turns[i]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnPlan {
    /// The user's message.
    pub prompt: String,
    /// The provider route that serves the turn (one of `providers[].id`).
    pub provider: String,
}

/// `actions[i]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Action {
    /// When, in virtual milliseconds from the start.
    pub at_ms: u64,
    /// What.
    pub kind: ActionKind,
    /// Its JSON path in the file, `actions[i]`.
    pub path: String,
}

/// What an action does.
#[derive(Debug, Clone, PartialEq)]
pub enum ActionKind {
    /// Cancel the running turn (cause `user`).
    Cancel,
    /// Dispose a plugin.
    Dispose {
        /// Its name (the runner checks it names one of the scenario's plugins).
        plugin: String,
    },
    /// Update a plugin's settings through the run-time update path, based on its current revision
    /// (or on `revision`, rein's extension, to provoke a stale one).
    Configure {
        /// Its name (the runner checks it names one of the scenario's plugins).
        plugin: String,
        /// The patch, as written; the plugin judges it (errors go to the report's `configErrors`).
        patch: Value,
        /// The revision the patch is based on; `None`: the plugin's current revision, as a
        /// settings page that just read it would send.
        revision: Option<u64>,
    },
    /// Retry the last failed turn.
    Retry,
    /// rein's extension: crash the plugin's actor (fault injection); its supervisor restarts it.
    Crash {
        /// Its name (the runner checks it names one of the scenario's plugins).
        plugin: String,
    },
}

impl Scenario {
    /// Parses and validates a scenario file's text.
    pub fn from_json(text: &str) -> Result<Self, InvalidScenario> {
        let mut de = serde_json::Deserializer::from_str(text);
        let Obj(raw): Obj<RawScenario> =
            serde_path_to_error::deserialize(&mut de).map_err(serde_error)?;
        de.end().map_err(|e| InvalidScenario::new(".", e.to_string()))?;
        raw.validate()
    }

    /// Validates a scenario already parsed as JSON.
    pub fn from_value(value: Value) -> Result<Self, InvalidScenario> {
        let Obj(raw): Obj<RawScenario> =
            serde_path_to_error::deserialize(value).map_err(serde_error)?;
        raw.validate()
    }

    /// The provider route with this id.
    pub fn provider(&self, id: &str) -> Option<&ProviderScript> {
        self.providers.iter().find(|p| p.id == id)
    }
}

/// Turns a serde error into a path error. A missing field is reported at the field's own path
/// (`providers[0].script: required field is missing`), not at its parent's. Malformed JSON is
/// reported as far as serde got (often the root, `.`); its message
/// carries the line and column.
fn serde_error(err: serde_path_to_error::Error<serde_json::Error>) -> InvalidScenario {
    // In malformed JSON the path ends in `?` segments (serde could not tell where it was); keep
    // what it knew.
    let path = err.path().to_string();
    let path = match path.find('?') {
        Some(cut) => path[..cut].trim_end_matches('.').to_owned(),
        None => path,
    };
    let path = if path.is_empty() { ".".to_owned() } else { path };
    let message = err.inner().to_string();
    if message.starts_with("invalid type: unit variant") {
        return InvalidScenario::new(
            path,
            "a script entry is an object with one key: {\"reply\": {…}}, {\"fail\": {…}} or \
             {\"stall\": {}}",
        );
    }
    if let Some(field) = message.strip_prefix("missing field `").and_then(|m| m.split('`').next()) {
        let path = if path == "." { field.to_owned() } else { format!("{path}.{field}") };
        return InvalidScenario::new(path, "required field is missing");
    }
    InvalidScenario::new(path, message)
}

// ---- the wire form ---------------------------------------------------------------------------

/// A struct that must be written as a JSON object. serde's derive also accepts an array of the
/// field values, positionally (`"usage": [1, 2]`); a strict format must not, and the error should
/// say "expected an object" rather than name a private type.
struct Obj<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjVisitor<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjVisitor<T> {
            type Value = T;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map))
            }
        }

        deserializer.deserialize_map(ObjVisitor(PhantomData)).map(Obj)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawScenario {
    #[serde(default)]
    seed: Option<Number>,
    #[serde(default)]
    random: Vec<Number>,
    #[serde(default)]
    plugins: Vec<Obj<RawPlugin>>,
    providers: Vec<Obj<RawProvider>>,
    #[serde(default)]
    tools: Vec<String>,
    turns: Vec<Obj<RawTurn>>,
    #[serde(default)]
    actions: Vec<Obj<RawAction>>,
    #[serde(default)]
    reject: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawPlugin {
    #[serde(rename = "use")]
    name: String,
    #[serde(default)]
    config: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawProvider {
    id: String,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    adapter: Option<bool>,
    #[serde(default)]
    retry_policy: Option<Value>,
    #[serde(default)]
    script: Option<Vec<RawEntry>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "lowercase")]
enum RawEntry {
    Reply(Obj<RawReply>),
    Fail(Obj<RawFail>),
    Stall(Obj<RawStall>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawReply {
    text: String,
    #[serde(default)]
    chunks: Option<Vec<String>>,
    #[serde(default)]
    tool_calls: Vec<Obj<RawToolCall>>,
    #[serde(default)]
    latency_ms: Option<Number>,
    #[serde(default)]
    usage: Option<Obj<RawUsage>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawToolCall {
    #[serde(default)]
    id: Option<String>,
    name: String,
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawUsage {
    input_tokens: u64,
    output_tokens: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawFail {
    code: String,
    message: String,
    #[serde(default)]
    status: Option<Number>,
    #[serde(default)]
    retry_after_ms: Option<Number>,
    #[serde(default)]
    request_id: Option<String>,
    #[serde(default)]
    chunks: Vec<String>,
    #[serde(default)]
    latency_ms: Option<Number>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStall {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawTurn {
    prompt: String,
    provider: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawAction {
    at_ms: Number,
    #[serde(rename = "do")]
    action: String,
    #[serde(default)]
    plugin: Option<String>,
    #[serde(default)]
    config: Option<Value>,
    #[serde(default)]
    revision: Option<Number>,
}

// ---- the second pass -------------------------------------------------------------------------

const ACTIONS: &str =
    "expected one of \"cancel\", \"dispose\", \"configure\", \"retry\", \"crash\"";

impl RawScenario {
    fn validate(self) -> Result<Scenario, InvalidScenario> {
        let seed = match self.seed {
            None => 0,
            Some(n) => {
                n.as_u64().ok_or_else(|| InvalidScenario::new("seed", non_negative_integer(&n)))?
            }
        };
        let random = self
            .random
            .iter()
            .enumerate()
            .map(|(i, n)| sample(n).map_err(|m| InvalidScenario::new(format!("random[{i}]"), m)))
            .collect::<Result<Vec<f64>, _>>()?;

        let mut plugins = Vec::with_capacity(self.plugins.len());
        for (i, Obj(raw)) in self.plugins.into_iter().enumerate() {
            let path = format!("plugins[{i}]");
            non_empty(&raw.name, || format!("{path}.use"))?;
            let config = match raw.config {
                None => Value::Object(serde_json::Map::new()),
                Some(config @ Value::Object(_)) => config,
                Some(other) => {
                    return Err(InvalidScenario::new(
                        format!("{path}.config"),
                        format!("must be an object, got {}", type_name(&other)),
                    ));
                }
            };
            plugins.push(PluginUse { name: raw.name, config, path });
        }

        if self.providers.is_empty() {
            return Err(InvalidScenario::new("providers", "must declare at least one provider"));
        }
        let mut providers: Vec<ProviderScript> = Vec::with_capacity(self.providers.len());
        for (i, Obj(raw)) in self.providers.into_iter().enumerate() {
            let path = format!("providers[{i}]");
            non_empty(&raw.id, || format!("{path}.id"))?;
            if let Some(first) = providers.iter().find(|p| p.id == raw.id) {
                return Err(InvalidScenario::new(
                    format!("{path}.id"),
                    format!("provider {:?} is already declared by {}", raw.id, first.path),
                ));
            }
            if let Some(model) = &raw.model {
                non_empty(model, || format!("{path}.model"))?;
            }
            let adapter = raw.adapter.unwrap_or(true);
            if !adapter {
                let no_adapter = "not allowed: \"adapter\": false declares that no adapter serves \
                                  this route";
                if raw.retry_policy.is_some() {
                    return Err(InvalidScenario::new(
                        format!("{path}.retryPolicy"),
                        format!("{no_adapter} (its attempts carry no policy)"),
                    ));
                }
                if raw.model.is_some() {
                    return Err(InvalidScenario::new(
                        format!("{path}.model"),
                        format!("{no_adapter} (no model is asked)"),
                    ));
                }
                if raw.script.is_some() {
                    return Err(InvalidScenario::new(
                        format!("{path}.script"),
                        format!("{no_adapter} (nothing plays a script)"),
                    ));
                }
            }
            let script = match raw.script {
                Some(script) => script,
                None if adapter => {
                    return Err(InvalidScenario::new(
                        format!("{path}.script"),
                        "required field is missing",
                    ));
                }
                None => Vec::new(),
            };
            let script = script
                .into_iter()
                .enumerate()
                .map(|(j, entry)| entry.validate(&format!("{path}.script[{j}]")))
                .collect::<Result<Vec<_>, _>>()?;
            let retry_policy = raw
                .retry_policy
                .map(|declared| {
                    RetryPolicy::from_declared(&declared, &format!("{path}.retryPolicy"))
                        .map_err(|e| InvalidScenario::new(e.path, e.kind.to_string()))
                })
                .transpose()?;
            providers.push(ProviderScript {
                id: raw.id,
                model: raw.model,
                adapter,
                retry_policy,
                script,
                path,
            });
        }

        for (i, tool) in self.tools.iter().enumerate() {
            non_empty(tool, || format!("tools[{i}]"))?;
            if let Some(first) = self.tools[..i].iter().position(|t| t == tool) {
                return Err(InvalidScenario::new(
                    format!("tools[{i}]"),
                    format!("tool {tool:?} is already listed at tools[{first}]"),
                ));
            }
        }

        if self.turns.is_empty() {
            return Err(InvalidScenario::new("turns", "must hold at least one turn"));
        }
        let mut turns = Vec::with_capacity(self.turns.len());
        for (i, Obj(raw)) in self.turns.into_iter().enumerate() {
            if !providers.iter().any(|p| p.id == raw.provider) {
                return Err(InvalidScenario::new(
                    format!("turns[{i}].provider"),
                    format!(
                        "unknown provider {:?}; declared: {}",
                        raw.provider,
                        list(providers.iter().map(|p| p.id.as_str()))
                    ),
                ));
            }
            turns.push(TurnPlan { prompt: raw.prompt, provider: raw.provider });
        }

        let mut actions = Vec::with_capacity(self.actions.len());
        for (i, Obj(raw)) in self.actions.into_iter().enumerate() {
            actions.push(raw.validate(&format!("actions[{i}]"))?);
        }
        // Stable: actions at the same time keep their file order.
        actions.sort_by_key(|a| a.at_ms);

        for (i, kind) in self.reject.iter().enumerate() {
            let path = format!("reject[{i}]");
            if !REJECTABLE.contains(&kind.as_str()) {
                let known = Event::KINDS.contains(&kind.as_str());
                let what = if known {
                    format!(
                        "{kind:?} is written by the runtime's own machinery and cannot be rejected"
                    )
                } else {
                    format!("unknown event type {kind:?}")
                };
                return Err(InvalidScenario::new(
                    path,
                    format!("{what}; rejectable: {}", list(REJECTABLE.iter().copied())),
                ));
            }
            if let Some(first) = self.reject[..i].iter().position(|k| k == kind) {
                return Err(InvalidScenario::new(
                    path,
                    format!("event type {kind:?} is already listed at reject[{first}]"),
                ));
            }
        }

        Ok(Scenario {
            seed,
            random,
            plugins,
            providers,
            tools: self.tools,
            turns,
            actions,
            reject: self.reject,
        })
    }
}

impl RawEntry {
    fn validate(self, path: &str) -> Result<Scripted, InvalidScenario> {
        match self {
            RawEntry::Reply(Obj(raw)) => {
                raw.validate(&format!("{path}.reply")).map(Scripted::Reply)
            }
            RawEntry::Fail(Obj(raw)) => raw.validate(&format!("{path}.fail")).map(Scripted::Fail),
            RawEntry::Stall(Obj(RawStall {})) => Ok(Scripted::Stall),
        }
    }
}

impl RawReply {
    fn validate(self, path: &str) -> Result<ScriptedReply, InvalidScenario> {
        let mut reply = match self.chunks {
            None => ScriptedReply::text(self.text),
            Some(chunks) => {
                let joined = chunks.concat();
                if joined != self.text {
                    return Err(InvalidScenario::new(
                        format!("{path}.chunks"),
                        format!(
                            "the chunks make {joined:?} but text is {:?}; they must agree",
                            self.text
                        ),
                    ));
                }
                ScriptedReply::chunks(chunks)
            }
        };
        let mut tool_calls: Vec<ToolCall> = Vec::with_capacity(self.tool_calls.len());
        for (k, Obj(call)) in self.tool_calls.into_iter().enumerate() {
            let call_path = format!("{path}.toolCalls[{k}]");
            // No id: the scripted provider gives the call a stable one when it plays the reply
            // (an empty id is its "assign one").
            let id = match call.id {
                None => String::new(),
                Some(id) => {
                    non_empty(&id, || format!("{call_path}.id"))?;
                    if tool_calls.iter().any(|c| c.id == id) {
                        return Err(InvalidScenario::new(
                            format!("{call_path}.id"),
                            format!("tool call id {id:?} is used twice in this reply"),
                        ));
                    }
                    id
                }
            };
            non_empty(&call.name, || format!("{call_path}.name"))?;
            let arguments = call.arguments.unwrap_or_else(|| Value::Object(Default::default()));
            tool_calls.push(ToolCall { id, name: call.name, arguments });
        }
        reply.tool_calls = tool_calls;
        reply.usage = self
            .usage
            .map(|Obj(u)| Usage { input_tokens: u.input_tokens, output_tokens: u.output_tokens });
        reply.latency = latency(self.latency_ms.as_ref(), path)?;
        Ok(reply)
    }
}

impl RawFail {
    fn validate(self, path: &str) -> Result<ScriptedFail, InvalidScenario> {
        let at = |e: FailureError| failure_error(path, e);
        let mut failure = Failure::new(self.code, self.message).map_err(at)?;
        if let Some(status) = self.status {
            let valid = status
                .as_u64()
                .and_then(|s| u16::try_from(s).ok())
                .ok_or_else(|| at(FailureError::Status(status.to_string())))?;
            failure = failure.with_status(valid).map_err(at)?;
        }
        if let Some(ms) = self.retry_after_ms {
            let value = ms.as_f64().ok_or_else(|| at(FailureError::RetryAfter(ms.to_string())))?;
            failure = failure.with_retry_after_ms(value).map_err(at)?;
        }
        if let Some(id) = self.request_id {
            failure = failure.with_request_id(id).map_err(at)?;
        }
        Ok(ScriptedFail::new(failure)
            .with_chunks(self.chunks)
            .with_latency(latency(self.latency_ms.as_ref(), path)?))
    }
}

impl RawAction {
    fn validate(self, path: &str) -> Result<Action, InvalidScenario> {
        let at_ms = self.at_ms.as_u64().ok_or_else(|| {
            InvalidScenario::new(
                format!("{path}.atMs"),
                format!(
                    "must be a non-negative integer number of milliseconds, got {}",
                    self.at_ms
                ),
            )
        })?;
        let forbid = |field: &str, present: bool| {
            if present {
                Err(InvalidScenario::new(
                    format!("{path}.{field}"),
                    format!("not allowed for {:?}", self.action),
                ))
            } else {
                Ok(())
            }
        };
        // Whether the name is one of the scenario's plugins is the runner's check: a plugin's
        // name is what its factory builds (`scripted` takes a `name`), unknown here.
        let plugin = || -> Result<String, InvalidScenario> {
            let name = self.plugin.clone().ok_or_else(|| {
                InvalidScenario::new(
                    format!("{path}.plugin"),
                    format!("required for {:?}", self.action),
                )
            })?;
            non_empty(&name, || format!("{path}.plugin"))?;
            Ok(name)
        };
        if self.action != "configure" {
            forbid("revision", self.revision.is_some())?;
        }
        let kind = match self.action.as_str() {
            "cancel" | "retry" => {
                forbid("plugin", self.plugin.is_some())?;
                forbid("config", self.config.is_some())?;
                if self.action == "cancel" { ActionKind::Cancel } else { ActionKind::Retry }
            }
            "dispose" | "crash" => {
                forbid("config", self.config.is_some())?;
                let plugin = plugin()?;
                if self.action == "dispose" {
                    ActionKind::Dispose { plugin }
                } else {
                    ActionKind::Crash { plugin }
                }
            }
            "configure" => {
                let plugin = plugin()?;
                let patch = self.config.clone().ok_or_else(|| {
                    InvalidScenario::new(format!("{path}.config"), "required for \"configure\"")
                })?;
                let revision = self
                    .revision
                    .as_ref()
                    .map(|n| {
                        n.as_u64().ok_or_else(|| {
                            InvalidScenario::new(
                                format!("{path}.revision"),
                                non_negative_integer(n),
                            )
                        })
                    })
                    .transpose()?;
                ActionKind::Configure { plugin, patch, revision }
            }
            other => {
                return Err(InvalidScenario::new(
                    format!("{path}.do"),
                    format!("unknown action {other:?}; {ACTIONS}"),
                ));
            }
        };
        Ok(Action { at_ms, kind, path: path.to_owned() })
    }
}

// ---- small rules -----------------------------------------------------------------------------

fn non_empty(value: &str, path: impl FnOnce() -> String) -> Result<(), InvalidScenario> {
    if value.is_empty() {
        Err(InvalidScenario::new(path(), "must be a non-empty string"))
    } else {
        Ok(())
    }
}

fn sample(n: &Number) -> Result<f64, String> {
    match n.as_f64() {
        Some(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("must be a number within [0, 1], got {n}")),
    }
}

fn latency(ms: Option<&Number>, path: &str) -> Result<Duration, InvalidScenario> {
    match ms {
        None => Ok(Duration::ZERO),
        Some(n) => n
            .as_u64()
            .filter(|ms| *ms <= MAX_MS)
            .map(Duration::from_millis)
            .ok_or_else(|| InvalidScenario::new(format!("{path}.latencyMs"), ms_range(n))),
    }
}

fn ms_range(n: &Number) -> String {
    format!("must be an integer number of milliseconds in 0..={MAX_MS}, got {n}")
}

fn non_negative_integer(n: &Number) -> String {
    format!("must be a non-negative integer, got {n}")
}

/// Places a failure rule's error at the scenario's field (`…fail.status`), keeping the rule's
/// own wording (the rules live in [`Failure`], once).
fn failure_error(path: &str, err: FailureError) -> InvalidScenario {
    let field = match err {
        FailureError::EmptyMessage => "message",
        FailureError::EmptyCode => "code",
        FailureError::Status(_) => "status",
        FailureError::RetryAfter(_) => "retryAfterMs",
        FailureError::EmptyRequestId => "requestId",
        // A rule added to `Failure` later: the error names its own field.
        _ => return InvalidScenario::new(path, err.to_string()),
    };
    let text = err.to_string();
    let message = text.split_once(": ").map_or(text.as_str(), |(_, m)| m);
    InvalidScenario::new(format!("{path}.{field}"), message)
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn list<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<String> = names.map(|n| format!("{n:?}")).collect();
    if names.is_empty() { "none".to_owned() } else { names.join(", ") }
}

#[cfg(test)]
mod tests;
