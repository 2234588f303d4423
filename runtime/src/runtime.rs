//! [`Runtime`]: the API people build agents with, and the supervisor at the root of the actors.
//!
//! ```text
//! Runtime (root supervisor)
//! ├── PluginHost ── one actor per plugin, in chain order
//! └── ProviderActor per route ── one task per in-flight attempt
//! SessionActor per awake session (leased from the directory, not linked under the root)
//! ├── SessionLogActor (linked): the only writer of the session's log
//! └── TurnActor (linked, one per running turn)
//!     └── StepActor (linked, one per running step)
//! ```
//!
//! [`RuntimeBuilder`] collects the store, clock, provider routes (each with an optional declared
//! retry policy), plugins in chain order, tools, the per-turn step limit, the plugins' restart
//! intensity, the jitter source, live validators and the idle grace period;
//! [`RuntimeBuilder::build`] spawns the root, the provider actors and the plugin host. Sessions
//! are spawned on demand and hibernate when idle.
//!
//! # Why shutdown goes sessions → plugins → providers
//!
//! [`Runtime::shutdown`] first closes the session directory (no session wakes any more) and
//! tells every awake session to shut down: each stops its running turn with cause `disposed` —
//! the stop cascades through the links to the step, whose token every outside wait races — and
//! once its turn reported, writes `turn/end {aborted: disposed}` and `agent/idle`, closes its log
//! and stops. Only when every session is gone are the plugins disposed (had they gone first, a
//! turn parked in a plugin's wait would have seen the plugin's disposal — fail closed, `Stop` —
//! rather than its own cancellation) and the provider actors stopped; last the root. Every task
//! the runtime spawned is tracked by its [`Census`], and `shutdown` returns only when none is
//! left.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, SupervisionEvent};
use serde_json::Value;
use tokio::sync::OnceCell;

pub use crate::agent_loop::DEFAULT_MAX_STEPS;
use crate::census::{ActorKind, Alive, Census};
use crate::clock::{Clock, WallClock};
pub use crate::context::ValidatorFactory;
use crate::context::{ServedRoute, Shared};
use crate::event::ConfigChanged;
use crate::fault::Faults;
use crate::pending::{NotResumed, Resumed};
use crate::plugin::{
    BuiltPlugin, ConfigError, ConfigOutcome, IntoPlugin, Plugin, PluginSettings, PluginWarning,
    Settings,
};
use crate::plugin_host::PluginHost;
use crate::plugin_host::plugin_msg::{CrashNotice, PluginMsg};
pub use crate::plugin_host::{
    CrashDecision, DisposeError, PluginChain, RegisterError, RestartIntensity, RestartWindow,
};
use crate::provider::actor::ProviderActor;
use crate::provider::message::ProviderMsg;
use crate::provider::{Adapter, Generation};
use crate::random::{Jitter, SeededJitter};
use crate::resume::Resume;
use crate::retry_policy::RetryPolicy;
use crate::route_health::cell::HealthCell;
use crate::route_health::{HealthSettings, HealthSnapshot};
use crate::route_settings::RouteSettings;
use crate::saved_settings;
use crate::session::message::{ClientMsg, SessionMsg};
use crate::session::{Placement, Sessions};
use crate::session::{Session, SessionError};
use crate::store::memory::MemoryStore;
use crate::store::{SessionStore, SettingsRecord, StoreError};
use crate::tool::{Tool, Toolbox};
use crate::validator::Validator;

/// Why a runtime could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// Two routes share a name.
    #[error("routes[{index}]: a route named {name:?} is already registered")]
    DuplicateRoute {
        /// The later one's position.
        index: usize,
        /// The name.
        name: String,
    },
    /// The default route names no registered route.
    #[error("default_route: no route named {0:?} is registered")]
    UnknownDefaultRoute(String),
    /// The step limit is 0.
    #[error("max_steps: must be at least 1")]
    ZeroSteps,
    /// A plugin's settings name a route the runtime does not serve
    /// ([`Plugin::known_routes`]).
    #[error("plugin {plugin}: {error}")]
    PluginRoutes {
        /// The plugin.
        plugin: String,
        /// Its refusal, naming the field.
        error: ConfigError,
    },
    /// The plugin host could not start (two plugins share a name, …).
    #[error(transparent)]
    Plugins(#[from] crate::plugin_host::HostError),
    /// An actor could not be spawned.
    #[error("could not start the runtime: {0}")]
    Spawn(String),
    /// The store could not be read for the plugins' saved settings (a database that is down,
    /// a directory that cannot be listed); a record that cannot be read is only a warning.
    #[error("reading the saved plugin settings: {0}")]
    SavedSettings(crate::store::StoreError),
}

/// A provider route to register with [`RuntimeBuilder::route`]: a name, the adapter serving it,
/// the model it asks for (empty by default), its generation settings (none by default: the
/// provider's defaults; a prompt's own settings win field by field) and its declared retry
/// policy (none by default: the runtime's default route policy applies).
///
/// ```
/// # use std::sync::Arc;
/// # use rein_runtime::prelude::*;
/// # use rein_runtime::provider::Adapter;
/// # use rein_runtime::runtime::RuntimeBuilder;
/// # fn routes(adapter: Arc<dyn Adapter>) -> Result<RuntimeBuilder, Box<dyn std::error::Error>> {
/// let policy = RetryPolicy::from_declared(&serde_json::json!({"mode": "always"}), "policy")?;
/// let builder = Runtime::builder()
///     .route(Route::new("primary", Arc::clone(&adapter)).model("model-1"))
///     .route(Route::new("patient", Arc::clone(&adapter)).model("model-1").retry_policy(policy));
/// let brief = Generation::new().with_system_prompt("Answer in one sentence.")?.with_max_tokens(256)?;
/// let builder = builder.route(Route::new("brief", adapter).model("model-1").generation(brief));
/// # Ok(builder)
/// # }
/// ```
#[derive(Clone)]
pub struct Route {
    name: String,
    adapter: Arc<dyn Adapter>,
    model: String,
    generation: Generation,
    policy: Option<RetryPolicy>,
    health: Option<HealthSettings>,
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Route")
            .field("name", &self.name)
            .field("model", &self.model)
            .field("generation", &self.generation)
            .field("policy", &self.policy)
            .field("health", &self.health)
            .finish_non_exhaustive()
    }
}

impl Route {
    /// A route named `name`, served by `adapter`.
    pub fn new(name: impl Into<String>, adapter: Arc<dyn Adapter>) -> Self {
        Self {
            name: name.into(),
            adapter,
            model: String::new(),
            generation: Generation::default(),
            policy: None,
            health: None,
        }
    }

    /// The model its requests ask for.
    #[must_use]
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// Its generation settings: a system prompt, a temperature, an output token limit, sent with
    /// every request on it (a prompt's own settings win field by field).
    #[must_use]
    pub fn generation(mut self, generation: Generation) -> Self {
        self.generation = generation;
        self
    }

    /// Its declared retry policy (it wins over the runtime's default route policy); `None`
    /// leaves the default.
    #[must_use]
    pub fn retry_policy(mut self, policy: impl Into<Option<RetryPolicy>>) -> Self {
        self.policy = policy.into();
        self
    }

    /// Its route health: a retry budget and a circuit breaker shared by every session on it
    /// (see [`crate::route_health`]); `None` (the default) turns it off — every attempt goes
    /// through and no retry is throttled.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use rein_runtime::prelude::*;
    /// # use rein_runtime::provider::Adapter;
    /// use rein_runtime::route_health::HealthSettings;
    /// # fn route(adapter: Arc<dyn Adapter>) -> Result<Route, Box<dyn std::error::Error>> {
    /// let route = Route::new("main", adapter).health(HealthSettings::default().with_open_ms(5_000)?);
    /// # Ok(route)
    /// # }
    /// ```
    #[must_use]
    pub fn health(mut self, settings: impl Into<Option<HealthSettings>>) -> Self {
        self.health = settings.into();
        self
    }
}

/// Builds a [`Runtime`].
pub struct RuntimeBuilder {
    store: Option<Arc<dyn SessionStore>>,
    clock: Option<Arc<dyn Clock>>,
    routes: Vec<Route>,
    default_route: Option<String>,
    plugins: Vec<Arc<dyn Plugin>>,
    warnings: Vec<PluginWarning>,
    tools: Toolbox,
    max_steps: u32,
    intensity: RestartIntensity,
    jitter: Option<Arc<dyn Jitter>>,
    default_policy: Option<RetryPolicy>,
    validators: Vec<ValidatorFactory>,
    idle_grace: Duration,
    faults: Faults,
    resume: Resume,
    placement: Option<Placement>,
}

/// How long an idle session stays awake by default before it hibernates.
pub const DEFAULT_IDLE_GRACE: Duration = Duration::from_secs(5);

/// How many sessions [`Runtime::resume_pending`] opens at once.
const RESUME_OPENS_AT_ONCE: usize = 32;

impl std::fmt::Debug for RuntimeBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let routes: Vec<&str> = self.routes.iter().map(|r| r.name.as_str()).collect();
        let plugins: Vec<&str> = self.plugins.iter().map(|p| p.name()).collect();
        f.debug_struct("RuntimeBuilder")
            .field("routes", &routes)
            .field("plugins", &plugins)
            .field("tools", &self.tools)
            .field("max_steps", &self.max_steps)
            .finish_non_exhaustive()
    }
}

impl Default for RuntimeBuilder {
    fn default() -> Self {
        Self {
            store: None,
            clock: None,
            routes: Vec::new(),
            default_route: None,
            plugins: Vec::new(),
            warnings: Vec::new(),
            tools: Toolbox::new(),
            max_steps: DEFAULT_MAX_STEPS,
            intensity: RestartIntensity::default(),
            jitter: None,
            default_policy: None,
            validators: Vec::new(),
            idle_grace: DEFAULT_IDLE_GRACE,
            faults: Faults::none(),
            resume: Resume::default(),
            placement: None,
        }
    }
}

impl RuntimeBuilder {
    /// A builder with the defaults: a [`MemoryStore`], the wall clock, no routes, plugins or
    /// tools, [`DEFAULT_MAX_STEPS`] steps per turn, 3 plugin restarts in 5 s, jitter from a
    /// seeded RNG seeded from entropy.
    pub fn new() -> Self {
        Self::default()
    }

    /// Where session logs live.
    pub fn store(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Where event times come from (a [`VirtualClock`](crate::clock::VirtualClock) in tests).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Adds a provider route (see [`Route`]).
    pub fn route(mut self, route: Route) -> Self {
        self.routes.push(route);
        self
    }

    /// The route a [`Prompt`](crate::session::Prompt) without one uses (default: the first
    /// route added).
    pub fn default_route(mut self, name: impl Into<String>) -> Self {
        self.default_route = Some(name.into());
        self
    }

    /// Adds a plugin at the end of the chain: the chain's order is the order of registration
    /// (the first added is the outermost, offered each failure first). Takes any plugin — a
    /// value, an `Arc` of one (to keep a handle), a [`Configured`](crate::plugin::Configured)
    /// plugin read from its configuration (its warnings are kept: see
    /// [`Runtime::config_warnings`]) or `llm-retry`'s configuration, whose policy becomes the
    /// runtime's default route policy unless one is set already.
    pub fn plugin(mut self, plugin: impl IntoPlugin) -> Self {
        let BuiltPlugin { plugin, warnings, default_route_policy } = plugin.into_plugin();
        if self.default_policy.is_none() {
            self.default_policy = default_route_policy;
        }
        let name = plugin.name();
        self.warnings.extend(
            warnings.into_iter().map(|warning| PluginWarning { plugin: name.to_owned(), warning }),
        );
        self.plugins.push(plugin);
        self
    }

    /// Offers a tool to the model.
    pub fn tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.add(tool);
        self
    }

    /// The per-turn step limit (a turn whose last allowed step still called tools ends
    /// `max-steps`).
    pub fn max_steps(mut self, steps: u32) -> Self {
        self.max_steps = steps;
        self
    }

    /// How often a plugin may crash before it leaves the chain.
    pub fn restart_intensity(mut self, intensity: RestartIntensity) -> Self {
        self.intensity = intensity;
        self
    }

    /// The jitter source every plugin draws from.
    pub fn jitter(mut self, jitter: Arc<dyn Jitter>) -> Self {
        self.jitter = Some(jitter);
        self
    }

    /// The runtime's default route policy: the effective policy of a route without a declared
    /// one. When unset, the first plugin added with [`RuntimeBuilder::plugin`] whose
    /// configuration sets one (`llm-retry`'s) sets it; else the defaults.
    pub fn default_route_policy(mut self, policy: RetryPolicy) -> Self {
        self.default_policy = Some(policy);
        self
    }

    /// Installs a validator on every session log (a fresh one per session).
    pub fn validator(
        mut self,
        factory: impl Fn() -> Box<dyn Validator> + Send + Sync + 'static,
    ) -> Self {
        self.validators.push(Arc::new(factory));
        self
    }

    /// How long a session stays awake after it became idle (nothing runs, nothing is queued)
    /// before it hibernates — closes its log and stops its actors, keeping under 1 KiB. A prompt
    /// within the grace period finds the session awake. Default [`DEFAULT_IDLE_GRACE`]; zero
    /// hibernates at once.
    pub fn idle_grace(mut self, grace: Duration) -> Self {
        self.idle_grace = grace;
        self
    }

    /// Whether a session reopened with a turn a crash left open continues that turn (the
    /// default, at most [`Resume::DEFAULT_MAX_RESUMES`] times per turn) or closes it
    /// `interrupted` ([`Resume::Never`]). See [`crate::resume`].
    pub fn resume(mut self, resume: Resume) -> Self {
        self.resume = resume;
        self
    }

    /// Where its sessions are served, for a node of a cluster that shares its store with other
    /// nodes (SPEC §12): a request for a session another node serves is forwarded there. Made by
    /// the node (`cluster::Node::placement`, cargo feature `postgres`); without it, every
    /// session is served here.
    pub fn placement(mut self, placement: Placement) -> Self {
        self.placement = Some(placement);
        self
    }

    /// Crashes to inject into the runtime's own step and turn actors, to test their supervision
    /// (see [`Faults`]). Never set outside tests.
    pub fn faults(mut self, faults: Faults) -> Self {
        self.faults = faults;
        self
    }

    /// Spawns the root, the provider actors and the plugin host.
    pub async fn build(self) -> Result<Runtime, BuildError> {
        for (index, route) in self.routes.iter().enumerate() {
            if self.routes[..index].iter().any(|r| r.name == route.name) {
                return Err(BuildError::DuplicateRoute { index, name: route.name.clone() });
            }
        }
        if let Some(name) = &self.default_route
            && !self.routes.iter().any(|r| &r.name == name)
        {
            return Err(BuildError::UnknownDefaultRoute(name.clone()));
        }
        if self.max_steps == 0 {
            return Err(BuildError::ZeroSteps);
        }
        let route_names: Vec<String> = self.routes.iter().map(|r| r.name.clone()).collect();
        for plugin in &self.plugins {
            plugin.known_routes(&route_names).map_err(|error| BuildError::PluginRoutes {
                plugin: plugin.name().to_owned(),
                error,
            })?;
        }
        let census = Census::new();
        let root = RootActor { census: census.clone() };
        let (root, _) =
            Actor::spawn(None, root, ()).await.map_err(|e| BuildError::Spawn(e.to_string()))?;

        let clock = self.clock.unwrap_or_else(|| Arc::new(WallClock));
        let mut routes = HashMap::new();
        let mut providers = Vec::new();
        for spec in &self.routes {
            let health = spec
                .health
                .clone()
                .map(|settings| Arc::new(HealthCell::new(settings, Arc::clone(&clock))));
            let actor = ProviderActor::new(
                spec.name.clone(),
                Arc::clone(&spec.adapter),
                health.clone(),
                census.clone(),
            );
            let spawned = Actor::spawn_linked(None, actor, (), root.get_cell()).await;
            let (actor, _) = match spawned {
                Ok(spawned) => spawned,
                Err(error) => {
                    stop_all(&providers, &root).await;
                    return Err(BuildError::Spawn(error.to_string()));
                }
            };
            providers.push(actor.clone());
            let route = ServedRoute {
                name: spec.name.clone(),
                model: spec.model.clone(),
                generation: spec.generation.clone(),
                policy: spec.policy.clone(),
                health,
                actor,
            };
            routes.insert(spec.name.clone(), Arc::new(route));
        }
        let default_policy = self.default_policy;
        let jitter = self.jitter.unwrap_or_else(|| Arc::new(SeededJitter::from_entropy()));
        let host = PluginHost::spawn(
            self.plugins,
            self.intensity,
            jitter,
            census.clone(),
            Some(root.get_cell()),
        )
        .await;
        let host = match host {
            Ok(host) => host,
            Err(error) => {
                stop_all(&providers, &root).await;
                return Err(error.into());
            }
        };
        let store: Arc<dyn SessionStore> =
            self.store.unwrap_or_else(|| Arc::new(MemoryStore::new()));
        let saved = match store.load_settings().await {
            Ok(saved) => saved,
            Err(error) => {
                host.stop().await;
                stop_all(&providers, &root).await;
                return Err(BuildError::SavedSettings(error));
            }
        };
        let cells = route_cells(&routes);
        let restored = saved_settings::restore(host.chain(), &cells, saved);
        let mut warnings = self.warnings;
        warnings.extend(restored.warnings);
        let shared = Shared {
            store,
            clock,
            default_route: self
                .default_route
                .or_else(|| self.routes.first().map(|r| r.name.clone())),
            routes,
            chain: Arc::clone(host.chain()),
            tools: self.tools,
            max_steps: self.max_steps,
            default_policy,
            validators: self.validators,
            census,
            idle_grace: self.idle_grace,
            faults: self.faults,
            resume: self.resume,
        };
        let sessions = Arc::new(Sessions::new(Arc::new(shared), self.placement));
        for PluginWarning { plugin, warning } in &warnings {
            tracing::warn!(%plugin, path = %warning.path, "plugin configuration: {}", warning.message);
        }
        let saved_revisions = restored.revisions;
        let inner = Arc::new(Inner {
            sessions,
            host,
            providers,
            root,
            warnings,
            saved_revisions,
            down: OnceCell::new(),
        });
        let guard = Arc::new(DropGuard(Arc::clone(&inner)));
        Ok(Runtime { inner, _guard: guard })
    }
}

/// The health settings of every route that has route health, by record name.
fn route_cells(
    routes: &HashMap<String, Arc<ServedRoute>>,
) -> std::collections::BTreeMap<String, RouteSettings> {
    routes
        .values()
        .filter_map(|route| {
            Some((route_health_key(&route.name), RouteSettings(Arc::clone(route.health.as_ref()?))))
        })
        .collect()
}

async fn stop_all(providers: &[ActorRef<ProviderMsg>], root: &ActorRef<()>) {
    for provider in providers {
        let _ = provider.stop_and_wait(None, None).await;
    }
    let _ = root.stop_and_wait(None, None).await;
}

struct Inner {
    sessions: Arc<Sessions>,
    host: PluginHost,
    /// The fallbacks the plugins' configuration readers took, in registration order, then the
    /// saved settings records not taken.
    warnings: Vec<PluginWarning>,
    /// The revision each plugin was restored at from the store, at build.
    saved_revisions: std::collections::BTreeMap<String, u64>,
    providers: Vec<ActorRef<ProviderMsg>>,
    root: ActorRef<()>,
    down: OnceCell<()>,
}

/// A running agent runtime. Cheap to clone; [`Runtime::shutdown`] stops it for every clone.
///
/// Call [`Runtime::shutdown`] and await it: it ends the turns in flight (`aborted`, cause
/// `disposed`, with their closing events), closes every log, stops every actor and waits for
/// every task. Dropping the last clone without it starts the same shutdown in a background task
/// on the current tokio runtime, which nobody awaits: if the program ends first (its tokio
/// runtime stops), turns in flight are left without their closing events — the next open of
/// their sessions repairs them as `interrupted` — and nothing reports what the shutdown met.
/// Outside a tokio runtime nothing is started (the actors ended with their runtime).
///
/// ```
/// use std::sync::Arc;
/// use rein_runtime::prelude::*;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = MemoryStore::new();
/// let runtime = Runtime::builder().store(Arc::new(store.clone())).build().await?;
/// let session = runtime.session("s1").await?; // created: its log starts with session/start
/// assert_eq!(store.events("s1")[0].kind(), "session/start");
/// drop(session);
///
/// runtime.shutdown().await;
/// assert_eq!((runtime.census().actors(), runtime.census().tasks()), (0, 0));
/// assert!(runtime.session("s2").await.is_err(), "a stopped runtime opens no session");
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
    _guard: Arc<DropGuard>,
}

/// Held by every clone of a [`Runtime`] (and nothing else): dropped with the last one, it starts
/// the shutdown the program did not ask for.
struct DropGuard(Arc<Inner>);

impl Drop for DropGuard {
    fn drop(&mut self) {
        if self.0.down.initialized() {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let inner = Arc::clone(&self.0);
        handle.spawn(async move {
            tracing::debug!(
                "the last Runtime handle was dropped without shutdown(): shutting down"
            );
            inner.down.get_or_init(|| shut_down(&inner)).await;
        });
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("routes", &self.inner.sessions.shared.routes.keys().collect::<Vec<_>>())
            .field("plugins", &self.inner.sessions.shared.chain)
            .field("census", &self.inner.sessions.shared.census)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// A [`RuntimeBuilder`].
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::new()
    }

    /// The session `id`: created (its log gets `session/start`) or reopened (a turn a crash left
    /// open is closed `interrupted`). Fails when the id is not a safe name or the log cannot be
    /// read (a corrupt line names its file and line).
    pub async fn session(&self, id: &str) -> Result<Session, SessionError> {
        let session = Session::new(Arc::clone(&self.inner.sessions), Arc::from(id));
        session.open().await?;
        Ok(session)
    }

    /// Finds every session of the store with an open turn — from the store's per-session heads
    /// ([`SessionStore::heads`]), without reading whole logs — and opens each one, which resumes
    /// its turn (a pending retry wait waits only what is left). Returns what it found: each
    /// session with its open turn and the wake-up time of its pending wait, and the sessions it
    /// could not open (a head that cannot be read, a log that fails to open), which are reported,
    /// not fatal. Fails only when the store cannot list its heads at all.
    pub async fn resume_pending(&self) -> Result<Resumed, StoreError> {
        self.resume_pending_of(|_| true).await
    }

    /// [`Runtime::resume_pending`] for the sessions whose id `wanted` accepts only: the others
    /// are neither opened nor reported (a program that serves some of a store's sessions leaves
    /// the rest alone).
    pub async fn resume_pending_of(
        &self,
        wanted: impl Fn(&str) -> bool,
    ) -> Result<Resumed, StoreError> {
        let mut heads = self.inner.sessions.shared.store.pending_heads().await?;
        heads.retain(|head| wanted(&head.session));
        let (mut open, mut failed) = crate::pending::pending(&heads);
        // The most urgent first — what is due now (a cut attempt, a wait that ended while the
        // process was down), then the waits by their wake-up — and several opens at once: each
        // open reads a log, and one after another the last of 200 overdue waits started 200 ms
        // late.
        open.sort_by_key(|turn| turn.wake_at.unwrap_or(0));
        let opens = futures::stream::iter(open).map(|turn| async move {
            let opened = self.session(&turn.session).await;
            (turn, opened)
        });
        let mut opened: Vec<_> = opens.buffered(RESUME_OPENS_AT_ONCE).collect().await;
        opened.sort_by(|(a, _), (b, _)| a.session.cmp(&b.session));
        let mut resumed = Vec::with_capacity(opened.len());
        for (turn, result) in opened {
            match result {
                Ok(_) => resumed.push(turn),
                Err(e) => failed.push(NotResumed { session: turn.session, error: e.to_string() }),
            }
        }
        failed.sort_by(|a, b| a.session.cmp(&b.session));
        Ok(Resumed { resumed, failed })
    }

    /// A handle on session `id` that does not open it (the first request does).
    pub(crate) fn local_session(&self, id: &str) -> Session {
        Session::new(Arc::clone(&self.inner.sessions), Arc::from(id))
    }

    /// Stops the awake sessions `wanted` accepts at once, writing nothing, and resolves once
    /// they are gone (see `Directory::evict`): for sessions another node serves from now on.
    pub(crate) async fn evict(&self, wanted: &(dyn Fn(&str) -> bool + Sync)) -> usize {
        self.inner.sessions.directory.evict(wanted).await
    }

    /// Puts in force the saved settings records newer than those in force (another node of a
    /// cluster saved them), telling every awake session (`config/changed`).
    pub(crate) fn adopt_saved_settings(&self, stored: Vec<crate::store::StoredSettings>) {
        let shared = &self.inner.sessions.shared;
        let cells = route_cells(&shared.routes);
        for change in saved_settings::adopt(&shared.chain, &cells, stored) {
            self.inner.sessions.directory.broadcast(&|| ClientMsg::ConfigChanged(change.clone()));
        }
    }

    /// The fallbacks the configuration readers of the plugins given to the builder took, in
    /// registration and field order (each also logged at `warn` when the runtime was built):
    /// what a program shows a person, so that a typo in a configuration never silently runs a
    /// default.
    pub fn config_warnings(&self) -> &[PluginWarning] {
        &self.inner.warnings
    }

    /// Disposes the plugin named `name`: it leaves the chain for every later failure, its waits
    /// abort (those recoveries answer `Stop`), and this resolves once its recoveries settled.
    pub async fn dispose_plugin(&self, name: &str) -> Result<(), DisposeError> {
        self.inner.host.dispose(name).await
    }

    /// Adds `plugin` at the end of the chain while the runtime runs (for example to bring back a
    /// plugin that was disposed, with fresh state). It is supervised like the plugins given to
    /// the builder, with a restart window of its own, and takes part in every failure offered
    /// after this resolves; a walk of the chain already under way does not see it. Its name must
    /// not be in the chain. It does not change the runtime's default route policy, which was
    /// settled when the runtime was built.
    pub async fn register_plugin(&self, plugin: Arc<dyn Plugin>) -> Result<(), RegisterError> {
        let routes: Vec<String> = self.inner.sessions.shared.routes.keys().cloned().collect();
        if let Err(error) = plugin.known_routes(&routes) {
            return Err(RegisterError::Routes { name: plugin.name().to_owned(), error });
        }
        self.inner.host.register(plugin).await
    }

    /// Applies a run-time settings patch to the plugin named `name` (based on `base_revision`):
    /// staged, saved durably to the runtime's store (a compare-and-set on the saved revision),
    /// then committed through the plugin's [`Settings`], and, when accepted, appends
    /// `config/changed` to every awake session's log. A save that fails refuses the patch
    /// ([`ConfigError::NotSaved`]) and changes nothing; one that finds a newer saved revision
    /// (another runtime on the same store) is [`ConfigError::StaleRevision`].
    pub async fn configure_plugin(
        &self,
        name: &str,
        patch: Value,
        base_revision: u64,
    ) -> Result<ConfigOutcome, ConfigError> {
        let plugin = self.plugin_in_chain(name)?;
        let settings = settings_of(name, plugin.as_ref())?;
        self.configure(name, settings, patch, base_revision).await
    }

    /// Stages `patch` on `settings` (saved under `name`), saves it, commits it and tells every
    /// awake session (see [`Runtime::configure_plugin`]).
    async fn configure(
        &self,
        name: &str,
        settings: &dyn Settings,
        patch: Value,
        base_revision: u64,
    ) -> Result<ConfigOutcome, ConfigError> {
        let staged = settings.stage(&patch, base_revision)?;
        let record = SettingsRecord {
            plugin: name.to_owned(),
            revision: staged.revision(),
            settings: staged.settings().clone(),
        };
        let store = &self.inner.sessions.shared.store;
        match store.save_settings(&record, staged.base_revision()).await {
            Ok(()) => {}
            Err(StoreError::SettingsConflict { found, .. }) => {
                let current = found.max(settings.revision());
                return Err(ConfigError::StaleRevision { based_on: base_revision, current });
            }
            Err(error) => {
                return Err(ConfigError::NotSaved {
                    plugin: name.to_owned(),
                    message: error.to_string(),
                });
            }
        }
        let changed = staged.changed().to_vec();
        let outcome = match settings.commit(staged) {
            Ok(outcome) => outcome,
            // Saved, but the fence moved in memory meanwhile (a restore): what the store holds
            // is the truth from now on.
            Err(_) => {
                settings.restore(&record.settings, record.revision)?;
                ConfigOutcome { revision: record.revision, changed }
            }
        };
        let change = ConfigChanged {
            plugin: name.to_owned(),
            revision: outcome.revision,
            changed: outcome.changed.clone(),
        };
        self.inner.sessions.directory.broadcast(&|| ClientMsg::ConfigChanged(change.clone()));
        Ok(outcome)
    }

    /// The routes with route health (their names, in order), whose settings
    /// [`Runtime::route_health_settings`] shows and [`Runtime::configure_route_health`] changes.
    pub fn health_routes(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .inner
            .sessions
            .shared
            .routes
            .values()
            .filter(|route| route.health.is_some())
            .map(|route| route.name.clone())
            .collect();
        names.sort();
        names
    }

    /// The health settings of the route named `route` and their revision, in the form
    /// [`HealthSettings::to_value`] writes ([`ConfigError::NoRouteHealth`] when no route of that
    /// name has route health).
    pub fn route_health_settings(&self, route: &str) -> Result<PluginSettings, ConfigError> {
        Ok(RouteSettings(self.health_cell(route)?).shown())
    }

    /// Applies a run-time patch (some of the keys of [`HealthSettings::from_value`]) to the health
    /// settings of the route named `route`, based on `base_revision`, exactly as
    /// [`Runtime::configure_plugin`] changes a plugin's: behind the revision fence, saved durably
    /// first (under [`route_health_key`]), then committed — the route keeps its state (an open
    /// breaker stays open until its deadline, the budget keeps its tokens) — and told to every
    /// awake session as `config/changed {plugin: "routes.NAME.health"}`.
    pub async fn configure_route_health(
        &self,
        route: &str,
        patch: Value,
        base_revision: u64,
    ) -> Result<ConfigOutcome, ConfigError> {
        let settings = RouteSettings(self.health_cell(route)?);
        self.configure(&route_health_key(route), &settings, patch, base_revision).await
    }

    fn health_cell(&self, route: &str) -> Result<Arc<HealthCell>, ConfigError> {
        let served = self.inner.sessions.shared.routes.get(route);
        served
            .and_then(|served| served.health.clone())
            .ok_or_else(|| ConfigError::NoRouteHealth(route.to_owned()))
    }

    /// The revision the plugin named `name` was restored at from the store when the runtime
    /// started (`None`: the store had no record for it, so it began at its built settings).
    pub fn saved_revision_at_start(&self, name: &str) -> Option<u64> {
        self.inner.saved_revisions.get(name).copied()
    }

    /// The current settings revision of the plugin named `name`, if it is in the chain (0 for a
    /// plugin without settings).
    pub fn plugin_revision(&self, name: &str) -> Option<u64> {
        let plugin = self.inner.sessions.shared.chain.plugin(name)?;
        Some(plugin.settings().map_or(0, Settings::revision))
    }

    /// The current settings of the plugin named `name` and their revision (what a settings page
    /// shows, and the revision its patch names). [`ConfigError::UnknownPlugin`] when it is not in
    /// the chain, [`ConfigError::Unsupported`] when it has no settings.
    pub fn plugin_settings(&self, name: &str) -> Result<PluginSettings, ConfigError> {
        let plugin = self.plugin_in_chain(name)?;
        Ok(settings_of(name, plugin.as_ref())?.shown())
    }

    /// Checks a run-time patch for the plugin named `name` as [`Runtime::configure_plugin`] would
    /// (it is staged: revision fence, then every field) without applying it: the fields it would
    /// change, or the error that would refuse it, naming the field. Nothing is written anywhere.
    pub fn check_plugin_settings(
        &self,
        name: &str,
        patch: &Value,
        base_revision: u64,
    ) -> Result<Vec<String>, ConfigError> {
        let plugin = self.plugin_in_chain(name)?;
        let staged = settings_of(name, plugin.as_ref())?.stage(patch, base_revision)?;
        Ok(staged.changed().to_vec())
    }

    /// Puts back the settings of the plugin named `name` at `revision`, in the form
    /// [`Runtime::plugin_settings`] shows them (as a durable record holds them): read strictly,
    /// with no revision fence, and no `config/changed` written — nothing changed from the
    /// record's point of view.
    pub fn restore_plugin_settings(
        &self,
        name: &str,
        settings: &Value,
        revision: u64,
    ) -> Result<(), ConfigError> {
        let plugin = self.plugin_in_chain(name)?;
        settings_of(name, plugin.as_ref())?.restore(settings, revision)
    }

    fn plugin_in_chain(&self, name: &str) -> Result<Arc<dyn Plugin>, ConfigError> {
        self.inner
            .sessions
            .shared
            .chain
            .plugin(name)
            .ok_or_else(|| ConfigError::UnknownPlugin(name.to_owned()))
    }

    /// Fault injection (tests, scenarios): fails the live actor of the plugin named `name` as a
    /// panicking recovery would. Its supervisor restarts it — the crash counts against the
    /// restart intensity, so past it the plugin leaves the chain — and its recoveries in flight
    /// keep running (they belong to the plugin's place in the chain, not to the actor). Nothing
    /// is written to any log: no session is involved. Returns the restarts within the intensity
    /// window after this crash.
    pub async fn crash_plugin(&self, name: &str) -> Result<u32, DisposeError> {
        let unknown = || DisposeError::UnknownPlugin(name.to_owned());
        let slot = self.inner.sessions.shared.chain.slot(name).ok_or_else(unknown)?;
        let actor = slot.current().ok_or_else(unknown)?;
        let (report, restarts) = tokio::sync::oneshot::channel();
        let error = format!("plugin {name} crashed on request (fault injection)");
        let notice = CrashNotice { error, report };
        actor.send_message(PluginMsg::RecoveryCrashed(notice)).map_err(|_| unknown())?;
        restarts.await.map_err(|_| unknown())
    }

    /// The names of the plugins in the chain, in order.
    pub fn plugins(&self) -> Vec<String> {
        self.inner.sessions.shared.chain.names()
    }

    /// The plugin chain (for diagnostics: incarnations, names).
    pub fn chain(&self) -> &Arc<PluginChain> {
        &self.inner.sessions.shared.chain
    }

    /// Live actors and tasks of this runtime.
    pub fn census(&self) -> &Census {
        &self.inner.sessions.shared.census
    }

    /// How many actors ractor's supervision tree holds under the runtime's root (the root
    /// included; 0 once it stopped), whether or not the [`Census`] counts them: what ractor
    /// itself still holds.
    pub fn supervision_tree(&self) -> usize {
        fn count(cell: &ActorCell) -> usize {
            1 + cell.get_children().iter().map(count).sum::<usize>()
        }
        let root = self.inner.root.get_cell();
        match root.get_status() {
            ractor::ActorStatus::Stopped => 0,
            _ => count(&root),
        }
    }

    /// The health of the route named `name` now (its breaker's state, its retry budget's tokens,
    /// until when it is open); `None` when no route has that name or its health is off.
    pub fn route_health(&self, name: &str) -> Option<HealthSnapshot> {
        let route = self.inner.sessions.shared.routes.get(name)?;
        route.health.as_ref().map(|cell| cell.snapshot())
    }

    /// The changes of the route named `name`'s breaker: a receiver whose value is the snapshot
    /// taken at the latest change of state (closed → open, half-open → closed, …; the passing
    /// of `openMs` is not a change: a snapshot taken later shows it half-open). `None` when no
    /// route has that name or its health is off.
    pub fn route_health_changes(
        &self,
        name: &str,
    ) -> Option<tokio::sync::watch::Receiver<HealthSnapshot>> {
        let route = self.inner.sessions.shared.routes.get(name)?;
        route.health.as_ref().map(|cell| cell.subscribe())
    }

    /// How many sessions are awake (hold actors) right now.
    pub fn awake_sessions(&self) -> usize {
        self.inner.sessions.directory.awake()
    }

    /// Shuts the runtime down: cancels every turn (`aborted {cause: disposed}`), lets every
    /// session write its closing events and stop, disposes the plugins, stops the provider
    /// actors and the root, and returns once no actor and no task of the runtime is left.
    /// Later calls (from any clone) wait for the first one.
    pub async fn shutdown(&self) {
        self.inner.down.get_or_init(|| shut_down(&self.inner)).await;
    }
}

/// Ends every turn, closes every log, stops every actor and waits for every task.
async fn shut_down(inner: &Inner) {
    // No new session wakes; every awake one stops its turn (`disposed`), writes the turn's
    // closing events and `agent/idle`, closes its log and stops.
    for session in inner.sessions.directory.close() {
        let _ = session.send_message(SessionMsg::Shutdown);
    }
    inner.sessions.directory.settled().await;
    inner.host.stop().await;
    for provider in &inner.providers {
        let _ = provider.stop_and_wait(None, None).await;
    }
    let _ = inner.root.stop_and_wait(None, None).await;
    inner.sessions.shared.census.tasks_settled().await;
}

/// The root supervisor: the parent of the plugin host and the provider actors. (Session actors
/// are not linked under it: see `session::directory`.)
struct RootActor {
    census: Census,
}

impl Actor for RootActor {
    type Msg = ();
    type State = Alive;
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<()>, (): ()) -> Result<Alive, ActorProcessingErr> {
        Ok(self.census.enter(ActorKind::Root))
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<()>,
        event: SupervisionEvent,
        _state: &mut Alive,
    ) -> Result<(), ActorProcessingErr> {
        if let SupervisionEvent::ActorFailed(who, error) = event {
            tracing::error!(actor = %who.get_id(), %error, "an actor of the runtime crashed");
        }
        Ok(())
    }
}

/// The settings of the plugin `name`, or [`ConfigError::Unsupported`] when it has none.
/// The name a route's health settings are saved and told under (`routes.main.health`): in
/// the store's settings records, in `config/changed`, in [`Runtime::saved_revision_at_start`].
pub fn route_health_key(route: &str) -> String {
    format!("routes.{route}.health")
}

fn settings_of<'p>(name: &str, plugin: &'p dyn Plugin) -> Result<&'p dyn Settings, ConfigError> {
    plugin.settings().ok_or_else(|| ConfigError::Unsupported(name.to_owned()))
}
