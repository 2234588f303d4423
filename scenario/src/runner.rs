//! Runs a [`Scenario`] on virtual time and returns its [`Report`].
//!
//! [`ScenarioRunner::run`] builds a current-thread tokio runtime with a paused clock, a
//! [`VirtualClock`] (event times are virtual ms from 0), a [`MemoryStore`], one
//! [`ScriptedProvider`] per route (none for a route declared `"adapter": false`), the plugins
//! from the [`PluginRegistry`] (in file order), the tools from the [`ToolRegistry`], a
//! [`RejectAppends`] validator when the file has a `reject` list, and one jitter source — the
//! file's `random` samples, then the RNG of its `seed` — that every plugin draws from (it also
//! hands out the retry ids, from a second stream of the `seed`, so two runs write the same
//! log). It then follows the [`Agenda`]: turns one after another, actions at their `atMs`. When
//! nothing is left it reads the log back, has the injected checker judge it, and folds it into
//! the report.
//!
//! Before anything runs it also checks what only built plugins can tell: their names (what the
//! chain, `plugin/crashed` and the actions know them by — the `use` name, unless the plugin's
//! configuration gives another, as `scripted` allows) are distinct, every `dispose` and
//! `configure` action names one of them, and every route a plugin names (`fallback`'s `routes`)
//! is a declared provider with an adapter.
//!
//! # Why a paused current-thread runtime
//!
//! With the clock paused, tokio advances time only when every task is idle, straight to the next
//! timer: a 2000 ms backoff costs no real time, and two runs of one file interleave their tasks
//! identically, so they write the same log. Nothing in a run may wait on real I/O (that would let
//! the clock jump while a thread works), hence the in-memory store; `--log` writes the log after
//! the run.
//!
//! # Why a watchdog, and why far actions are jumped to
//!
//! A `stall` that nothing cancels would never end, and a paused runtime with no timer left would
//! park forever. No timer of the runtime is set further ahead than [`MAX_MS`] (the bound of
//! latencies and retry delays), so after [`STALL_MS`] of virtual time without progress (no event
//! of the running turn, no turn ending, no action run) nothing can happen on its own any more.
//! Then, if an action is still ahead — an action's `atMs` may be any non-negative integer — the
//! run advances the clock straight to it (tokio's timer wheel would take real time to walk to a
//! deadline centuries away); if none is, a running turn is stalled: the run stops there, the
//! runtime is shut down (the turn ends `aborted` with cause `disposed`, as for any shutdown) and
//! a note says so. On virtual time this costs nothing.
//!
//! Before anything runs, the plugins are built from their configurations; a lenient reader's
//! fallbacks come back as [`RunOutcome::warnings`], each under `plugins[i].config`.
//!
//! # Why the checker is injected
//!
//! The invariant rules live in `rein-invariant`, which depends on this crate; so the runner takes
//! the checker as a function, and the `rein` binary passes the real one.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::agenda::{Agenda, Move};
use super::format::{Action, ActionKind, InvalidScenario, MAX_MS, Scenario};
use super::registry::{PluginRegistry, ToolRegistry};
use super::reject::RejectAppends;
use super::report::{self, ConfigErrorRow, Report};
use crate::scripted::ScriptedProvider;
use rein_runtime::clock::{Clock, VirtualClock};
use rein_runtime::event::{CancelCause, Envelope};
use rein_runtime::plugin::{BuiltPlugin, ConfigError};
use rein_runtime::plural::count;
use rein_runtime::random::Samples;
use rein_runtime::runtime::{Route, Runtime};
use rein_runtime::session::{Prompt, Session, SessionError};
use rein_runtime::session::{TurnHandle, TurnOutcome};
use rein_runtime::store::memory::MemoryStore;
use rein_runtime::tool::Tool;
use rein_runtime::validator::Rejection;

/// The id of a scenario's session.
pub const SESSION: &str = "scenario";

/// The model name scripted routes report in `request/start`.
pub const MODEL: &str = "scripted";

/// Virtual time without any event after which a running turn counts as stalled (2^31 ms, just
/// above the longest wait a scenario can ask for).
pub const STALL_MS: u64 = MAX_MS + 1;

/// Judges a finished log: the violations of the session-log contract (empty when it holds).
pub type LogCheck = Arc<dyn Fn(&[Envelope]) -> Vec<Rejection> + Send + Sync>;

/// Why a scenario could not be run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The scenario names something that does not exist or configures it wrongly (exit 2).
    #[error(transparent)]
    Invalid(#[from] InvalidScenario),
    /// The runtime failed (exit 1).
    #[error("internal fault: {0}")]
    Internal(String),
}

/// What a run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// The `--json` report.
    pub report: Report,
    /// The session log.
    pub events: Vec<Envelope>,
    /// Things a person should know that the report has no place for (an action that did not
    /// apply, a stalled turn), in the order they happened.
    pub notes: Vec<String>,
    /// The fallbacks the plugins' lenient configuration readers took, each naming its field
    /// under `plugins[i].config` (`plugins[2].config.extraRetries: -1 is negative; using the
    /// default 3`), in plugin order.
    pub warnings: Vec<String>,
}

/// Runs scenarios with a set of plugins, tools and an invariant checker.
#[derive(Clone)]
pub struct ScenarioRunner {
    plugins: PluginRegistry,
    tools: ToolRegistry,
    checker: LogCheck,
}

impl std::fmt::Debug for ScenarioRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScenarioRunner")
            .field("plugins", &self.plugins)
            .field("tools", &self.tools)
            .finish_non_exhaustive()
    }
}

impl Default for ScenarioRunner {
    fn default() -> Self {
        Self::new()
    }
}

impl ScenarioRunner {
    /// A runner with no plugins, the default tools (`echo`) and a checker that finds nothing
    /// (pass the real one with [`ScenarioRunner::checker`]).
    pub fn new() -> Self {
        Self {
            plugins: PluginRegistry::new(),
            tools: ToolRegistry::default(),
            checker: Arc::new(|_| Vec::new()),
        }
    }

    /// The plugins scenarios may `use`.
    #[must_use]
    pub fn plugins(mut self, plugins: PluginRegistry) -> Self {
        self.plugins = plugins;
        self
    }

    /// The tools scenarios may list.
    #[must_use]
    pub fn tools(mut self, tools: ToolRegistry) -> Self {
        self.tools = tools;
        self
    }

    /// The invariant checker that judges each finished log.
    #[must_use]
    pub fn checker(
        mut self,
        checker: impl Fn(&[Envelope]) -> Vec<Rejection> + Send + Sync + 'static,
    ) -> Self {
        self.checker = Arc::new(checker);
        self
    }

    /// Runs `scenario` on its own paused current-thread runtime. Must not be called from inside
    /// a tokio runtime (use [`ScenarioRunner::run_here`] there).
    pub fn run(&self, scenario: &Scenario) -> Result<RunOutcome, RunError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .map_err(|e| RunError::Internal(format!("cannot start a tokio runtime: {e}")))?;
        rt.block_on(self.run_here(scenario))
    }

    /// Runs `scenario` on the current tokio runtime, which should be a current-thread runtime
    /// with its clock paused (`#[tokio::test(start_paused = true)]`) for the run to be
    /// deterministic and instant.
    pub async fn run_here(&self, scenario: &Scenario) -> Result<RunOutcome, RunError> {
        let (plugins, warnings) = self.instantiate_plugins(scenario)?;
        Self::check_actions(scenario, &plugins)?;
        Self::check_routes(scenario, &plugins)?;
        let tools = self.resolve_tools(scenario)?;
        let jitter = Samples::new(scenario.random.iter().copied(), scenario.seed).map_err(|e| {
            let message = e.to_string();
            let message = message.split_once(": ").map_or(message.as_str(), |(_, m)| m);
            InvalidScenario::new("random", message)
        })?;

        let clock = Arc::new(VirtualClock::start());
        let start = Instant::now();
        let store = MemoryStore::new();
        let mut builder = Runtime::builder()
            .store(Arc::new(store.clone()))
            .clock(clock.clone())
            .jitter(Arc::new(jitter));
        // A route no adapter serves is simply not registered: the runtime then fails its
        // attempts with `NO_ADAPTER` and offers them with no policy, as for any unknown route.
        for route in scenario.providers.iter().filter(|r| r.adapter) {
            let adapter = ScriptedProvider::new(route.script.iter().cloned());
            builder = builder.route(
                Route::new(&route.id, Arc::new(adapter))
                    .model(route.model.as_deref().unwrap_or(MODEL))
                    .retry_policy(route.retry_policy.clone()),
            );
        }
        if !scenario.reject.is_empty() {
            let reject = RejectAppends::new(scenario.reject.iter().cloned());
            builder = builder.validator(move || Box::new(reject.clone()));
        }
        for plugin in plugins {
            builder = builder.plugin(plugin);
        }
        for tool in tools {
            builder = builder.tool(tool);
        }
        let runtime = builder.build().await.map_err(|e| internal("building the runtime", e))?;

        let mut drive = Drive {
            runtime: &runtime,
            clock: &clock,
            start,
            config_errors: Vec::new(),
            notes: Vec::new(),
        };
        let driven = drive.run(scenario).await;
        let end_ms = clock.now_ms();
        runtime.shutdown().await;
        driven?;

        let events = store.events(SESSION);
        let violations = (self.checker)(&events);
        let report = report::build(&events, drive.config_errors, violations, end_ms);
        Ok(RunOutcome { report, events, notes: drive.notes, warnings })
    }

    /// The plugins, built from their configurations, and the warnings of the lenient readers.
    fn instantiate_plugins(&self, scenario: &Scenario) -> Result<Instantiated, RunError> {
        let mut plugins = Vec::with_capacity(scenario.plugins.len());
        let mut warnings = Vec::new();
        for used in &scenario.plugins {
            let Some(built) = self.plugins.build(&used.name, &used.config) else {
                return Err(InvalidScenario::new(
                    format!("{}.use", used.path),
                    format!(
                        "unknown plugin {:?}; registered: {}",
                        used.name,
                        names(&self.plugins.names())
                    ),
                )
                .into());
            };
            let built = built.map_err(|e| config_error(&used.path, e))?;
            let base = format!("{}.config", used.path);
            warnings.extend(built.warnings.iter().map(|w| {
                if w.path.is_empty() {
                    format!("{base}: {}", w.message)
                } else {
                    format!("{base}.{}: {}", w.path, w.message)
                }
            }));
            let name = built.plugin.name();
            if name.is_empty() {
                return Err(RunError::Internal(format!(
                    "the factory registered as {:?} built a plugin with an empty name",
                    used.name
                )));
            }
            if let Some(first) = plugins.iter().position(|p: &BuiltPlugin| p.plugin.name() == name)
            {
                return Err(InvalidScenario::new(
                    used.path.clone(),
                    format!(
                        "the plugin name {name:?} is already registered by {}",
                        scenario.plugins[first].path
                    ),
                )
                .into());
            }
            plugins.push(built);
        }
        Ok((plugins, warnings))
    }

    /// Every `dispose`/`configure` action names one of the plugins built (by the name it was
    /// built with, which is its `use` name unless its configuration gives another).
    fn check_actions(scenario: &Scenario, plugins: &[BuiltPlugin]) -> Result<(), RunError> {
        for action in &scenario.actions {
            let (ActionKind::Dispose { plugin }
            | ActionKind::Configure { plugin, .. }
            | ActionKind::Crash { plugin }) = &action.kind
            else {
                continue;
            };
            if !plugins.iter().any(|p| p.plugin.name() == plugin) {
                let built: Vec<&str> = plugins.iter().map(|p| p.plugin.name()).collect();
                return Err(InvalidScenario::new(
                    format!("{}.plugin", action.path),
                    format!("unknown plugin {plugin:?}; registered: {}", names(&built)),
                )
                .into());
            }
        }
        Ok(())
    }

    /// Every route a plugin's configuration names (`fallback`'s `routes`) is one the run serves:
    /// a declared provider with an adapter. Refused at `plugins[i].config.<field>`.
    fn check_routes(scenario: &Scenario, plugins: &[BuiltPlugin]) -> Result<(), RunError> {
        let served: Vec<String> =
            scenario.providers.iter().filter(|p| p.adapter).map(|p| p.id.clone()).collect();
        for (used, built) in scenario.plugins.iter().zip(plugins) {
            built.plugin.known_routes(&served).map_err(|e| config_error(&used.path, e))?;
        }
        Ok(())
    }

    fn resolve_tools(&self, scenario: &Scenario) -> Result<Vec<Arc<dyn Tool>>, RunError> {
        scenario
            .tools
            .iter()
            .enumerate()
            .map(|(i, name)| {
                self.tools.get(name).cloned().ok_or_else(|| {
                    InvalidScenario::new(
                        format!("tools[{i}]"),
                        format!(
                            "unknown tool {name:?}; registered: {}",
                            names(&self.tools.names())
                        ),
                    )
                    .into()
                })
            })
            .collect()
    }
}

/// The plugins of a scenario, in chain order, and their configuration warnings (each under its
/// `plugins[i].config`).
type Instantiated = (Vec<BuiltPlugin>, Vec<String>);

/// One run's driving state.
struct Drive<'a> {
    runtime: &'a Runtime,
    clock: &'a VirtualClock,
    start: Instant,
    config_errors: Vec<ConfigErrorRow>,
    notes: Vec<String>,
}

/// What the task following a turn reports.
enum News {
    /// The turn committed an event.
    Event,
    /// The turn ended.
    Ended(Result<TurnOutcome, SessionError>),
}

impl Drive<'_> {
    async fn run(&mut self, scenario: &Scenario) -> Result<(), RunError> {
        let session =
            self.runtime.session(SESSION).await.map_err(|e| internal("opening the session", e))?;
        let mut agenda = Agenda::new(scenario.turns.clone(), scenario.actions.clone());
        let (news_tx, mut news) = mpsc::unbounded_channel::<News>();
        let mut running = false;
        let mut last_progress = Instant::now();
        loop {
            match agenda.next(self.clock.now_ms(), running) {
                Move::Done => return Ok(()),
                Move::Act(action) => {
                    self.act(&session, &action).await;
                    last_progress = Instant::now();
                }
                Move::Retry(action) => match session.retry().await {
                    Ok(handle) => {
                        follow(handle, news_tx.clone());
                        running = true;
                        last_progress = Instant::now();
                    }
                    Err(SessionError::Retry(refused)) => {
                        self.note(&action, &format!("retry did not apply: {refused}"));
                    }
                    Err(e) => return Err(internal("retrying the last turn", e)),
                },
                Move::Prompt(turn) => {
                    let prompt = Prompt::new(turn.prompt).on(turn.provider);
                    let handle = session.prompt(prompt).map_err(|e| internal("prompting", e))?;
                    follow(handle, news_tx.clone());
                    running = true;
                    last_progress = Instant::now();
                }
                Move::Wait { until_ms } => {
                    let action_at = until_ms.map(|ms| self.instant(ms)).transpose()?;
                    // Every timer of the runtime is set at most MAX_MS ahead, so after STALL_MS
                    // without progress nothing but an action can happen any more.
                    let quiet_at = last_progress + Duration::from_millis(STALL_MS);
                    tokio::select! {
                        biased;
                        item = news.recv(), if running => match item {
                            Some(News::Event) => last_progress = Instant::now(),
                            Some(News::Ended(Ok(_))) => {
                                running = false;
                                last_progress = Instant::now();
                            }
                            Some(News::Ended(Err(e))) => return Err(internal("running a turn", e)),
                            None => return Err(RunError::Internal("the turn follower vanished".into())),
                        },
                        () = sleep_until(action_at) => {}
                        () = tokio::time::sleep_until(quiet_at), if action_at.is_some() => {
                            // Quiet until an action far ahead: go straight to it (waiting for
                            // the timer wheel would take real time for virtual centuries).
                            if let Some(at) = action_at {
                                tokio::time::advance(at.saturating_duration_since(Instant::now()))
                                    .await;
                            }
                        }
                        () = tokio::time::sleep_until(quiet_at), if running => {
                            self.notes.push(format!(
                                "at {} ms: the running turn wrote no event for {STALL_MS} ms of \
                                 virtual time (a stall nothing cancelled); the run stops here and \
                                 the runtime is shut down{}",
                                self.clock.now_ms(),
                                match agenda.unrun_turns() {
                                    0 => String::new(),
                                    n => format!(
                                        "; {} did not run",
                                        count(n, "planned turn", "planned turns")
                                    ),
                                }
                            ));
                            return Ok(());
                        }
                    }
                }
            }
        }
    }

    /// Runs one action (not `retry`, which the loop handles).
    async fn act(&mut self, session: &Session, action: &Action) {
        match &action.kind {
            ActionKind::Cancel => match session.cancel(CancelCause::User).await {
                Ok(true) => {}
                Ok(false) => self.note(action, "cancel found no running turn"),
                Err(e) => self.note(action, &format!("cancel failed: {e}")),
            },
            ActionKind::Dispose { plugin } => {
                if let Err(e) = self.runtime.dispose_plugin(plugin).await {
                    self.note(action, &format!("dispose {plugin:?} did not apply: {e}"));
                }
            }
            ActionKind::Configure { plugin, patch, revision } => {
                self.configure(plugin, patch.clone(), *revision).await;
            }
            ActionKind::Crash { plugin } => {
                if let Err(e) = self.runtime.crash_plugin(plugin).await {
                    self.note(action, &format!("crash {plugin:?} did not apply: {e}"));
                }
            }
            // The agenda hands retries to the loop as `Move::Retry`.
            ActionKind::Retry => {}
        }
    }

    /// The run-time update path, based on the plugin's current revision (or on `revision`, when
    /// the file names one); a refusal is a `configErrors` row.
    async fn configure(&mut self, plugin: &str, patch: Value, revision: Option<u64>) {
        let at_ms = self.clock.now_ms();
        let refused = match revision.or_else(|| self.runtime.plugin_revision(plugin)) {
            None => Some(ConfigError::UnknownPlugin(plugin.to_owned())),
            Some(revision) => self.runtime.configure_plugin(plugin, patch, revision).await.err(),
        };
        if let Some(e) = refused {
            self.config_errors.push(ConfigErrorRow {
                at_ms,
                plugin: plugin.to_owned(),
                error: e.to_string(),
            });
        }
    }

    /// The instant of virtual time `ms`.
    fn instant(&self, ms: u64) -> Result<Instant, RunError> {
        self.start.checked_add(Duration::from_millis(ms)).ok_or_else(|| {
            RunError::Internal(format!("atMs {ms} is beyond what this platform's clock can hold"))
        })
    }

    fn note(&mut self, action: &Action, what: &str) {
        self.notes.push(format!("{} at {} ms: {what}", action.path, self.clock.now_ms()));
    }
}

/// Follows a turn on its own task: one [`News::Event`] per committed event, then its outcome.
/// (A `TurnHandle` is not cancel-safe across `select!` arms; a channel is.)
fn follow(mut handle: TurnHandle, news: mpsc::UnboundedSender<News>) {
    tokio::spawn(async move {
        while handle.next_event().await.is_some() {
            let _ = news.send(News::Event);
        }
        let _ = news.send(News::Ended(handle.outcome().await));
    });
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// A plugin factory's refusal, placed under `plugins[i].config`.
fn config_error(plugin_path: &str, err: ConfigError) -> RunError {
    let base = format!("{plugin_path}.config");
    match err {
        ConfigError::Invalid { path, message } => {
            let path = if path.is_empty() { base } else { format!("{base}.{path}") };
            InvalidScenario::new(path, message).into()
        }
        other => InvalidScenario::new(base, other.to_string()).into(),
    }
}

fn internal(doing: &str, err: impl std::fmt::Display) -> RunError {
    RunError::Internal(format!("{doing}: {err}"))
}

fn names(names: &[&str]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", ")
    }
}

#[cfg(test)]
mod tests;
