//! The one trait plugins implement, and what a recovery hands them.
//!
//! A [`Plugin`] is a policy registered on the runtime; the plugins that recover failed requests
//! form the request-error waterfall in registration order (`docs/runtime-semantics.md`, "Waterfall
//! and plugins"). When an attempt fails, the runtime offers each plugin in turn a [`Recovery`]: the
//! failure and its context ([`RequestErrorPayload`]), a [`Downstream`] handle on the rest of the
//! chain, the plugin's own `disposed` token and the runtime's [`Jitter`] source. The plugin answers
//! a [`Verdict`].
//!
//! The runtime never imports a plugin: `rein-plugins` (llm-retry, auto-retry, compaction) and
//! any user plugin implement this trait, and the runtime knows them only as `Arc<dyn Plugin>`.
//!
//! # Why a recovery that waits is a task
//!
//! One plugin actor serves every session at once, and a recovery may wait for
//! seconds (a backoff) or for the rest of the chain (downstream speaks first). So
//! [`Plugin::recover`] returns a `'static` future. The plugin's actor polls it once: a recovery
//! that answers without waiting is answered right there (a waterfall hop then costs one actor
//! round trip), and one that waits continues as a tracked task of its own while the actor returns
//! to its mailbox: a thousand sessions parked in one plugin's wait cost a thousand small tasks,
//! not a queue. What a recovery does before its first `.await` therefore runs on the plugin's
//! actor — keep it short. The task is also the unit of supervision: a recovery that panics (in
//! `recover`, its first poll or later) is caught, counts as `Next` for that one failure, and fails
//! the plugin actor, which its supervisor restarts — the other sessions' recoveries, which are
//! their own tasks, keep running.
//!
//! # Why downstream is a handle, not a return value
//!
//! "Downstream speaks first" means a plugin must be able to learn the rest of the
//! chain's answer *before* deciding. [`Downstream::ask`] walks the rest of the chain from inside
//! the recovery task and returns its answer; the handle remembers it, so a plugin that asked and
//! then answers [`Verdict::Next`] gets exactly that answer and the chain is not walked twice. A
//! plugin that never asks and answers `Next` lets the runtime continue down the chain itself.
//!
//! # Why disposal is a token, then a hook
//!
//! Disposing a plugin stops its actor; its recoveries still in flight must end at once and fail
//! closed. `disposed` is cancelled first thing, so every wait that races it returns;
//! [`Downstream::ask`] never consults the chain for a disposed plugin, aborts a consultation in
//! progress, and the runtime overrides whatever a disposed plugin answers with `Stop`. Once
//! every recovery settled, the plugin's own [`Plugin::dispose`] runs — once — and the chain lets
//! go of the plugin.

//!
//! # Why settings are part of the trait
//!
//! A settings page or a CLI talks to the runtime, not to a plugin's type: it reads a plugin's
//! settings with their revision ([`Plugin::settings`]), checks a patch without applying it
//! ([`Plugin::check_settings`]) so it can block a save and name the field, and applies it under
//! the revision fence ([`Plugin::configure`]), so of two pages saving from one revision exactly one
//! wins. Each has a default (no settings, unsupported), so a plugin without settings writes
//! nothing; a plugin whose settings cannot change at run time says so with
//! [`ConfigError::ReadOnly`] rather than accepting a patch it would not apply.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::BoxFuture;
use crate::event::{Event, RouteSwitched};
use crate::failure::Failure;
use crate::random::Jitter;
use crate::retry_policy::RetryPolicy;
use crate::session_log::{AppendError, SessionLog};

/// A plugin's answer to a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Rerun the request as a new attempt in the same step: on the same route, or on the route
    /// a `route/switched` written for this failure names ([`Recovery::switch_route`]).
    Retry,
    /// Delegate: the answer is whatever the rest of the chain answers.
    Next,
    /// End the chain here with no recovery: the turn ends with the failure.
    Stop,
}

/// What the rest of the chain answered when a plugin consulted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DownstreamAnswer {
    /// Some plugin downstream will rerun the request (it has already waited, if it waits).
    Retry,
    /// Nobody downstream recovers the failure (the end of the chain answers `Stop`).
    Stop,
    /// The consultation could not reach an answer: the runtime was shutting down, or the
    /// consultation itself failed. (A downstream *plugin* that panics does not make the whole
    /// consultation crash: its answer counts as `Next` and the walk goes on.)
    Crashed,
}

/// The failure offered to the waterfall and its context.
#[derive(Debug, Clone)]
pub struct RequestErrorPayload {
    /// The session.
    pub session: Arc<str>,
    /// The turn.
    pub turn: u32,
    /// The step.
    pub step: u32,
    /// The failed attempt.
    pub attempt: u32,
    /// The provider route that served (or was asked to serve) the attempt.
    pub provider: String,
    /// What went wrong.
    pub failure: Failure,
    /// The route's effective retry policy; `None` when no adapter served the
    /// attempt (`NO_ADAPTER`).
    pub retry_policy: Option<RetryPolicy>,
    /// The turn's cancellation signal (inside a downstream consultation: a child of it, also
    /// cancelled when the consulting plugin is disposed). A plugin must watch it in every wait
    /// and write nothing once it is cancelled.
    pub cancel: CancellationToken,
    /// The session's log: read projections (`retry_chains()`), append `llm/retry`.
    pub log: SessionLog,
}

/// Everything one recovery gets.
pub struct Recovery {
    /// The failure and its context, shared by every plugin of the walk (read it through the
    /// `Arc`; clone the parts a recovery keeps).
    pub payload: Arc<RequestErrorPayload>,
    /// The rest of the chain.
    pub downstream: Downstream,
    /// Cancelled when the plugin is disposed (or leaves the chain after too many crashes).
    pub disposed: CancellationToken,
    /// The runtime's jitter source (an explicit sample sequence in scenarios).
    pub jitter: Arc<dyn Jitter>,
}

/// Why a recovery's wait ended before its delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Interrupted {
    /// The turn was cancelled.
    Cancelled,
    /// The plugin was disposed (or left the chain after too many crashes).
    Disposed,
    /// The plugin's own signal fired (given to [`Recovery::wait_or`]).
    Also,
}

/// Why [`Recovery::switch_route`] wrote nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SwitchError {
    /// The turn was cancelled or the plugin disposed first.
    #[error("the recovery was interrupted ({0:?}): no route switch")]
    Interrupted(Interrupted),
    /// The session log refused `route/switched` (a live invariant, a closed log).
    #[error(transparent)]
    Rejected(#[from] AppendError),
}

impl Recovery {
    /// Moves the failing step to route `to`: appends `route/switched {turn, step, from, to,
    /// code, reason}` — `from` the failed attempt's route, `code` its failure's — and returns
    /// once the log acknowledged it. Answer [`Verdict::Retry`] next: the step's next attempt goes
    /// to `to` (its provider and model) over the same history, and the step and its turn's later
    /// steps stay there. The switch is read from the log, so a plugin that consulted this one
    /// downstream and passes its `Retry` on needs to know nothing about it. Nothing is written
    /// once the turn is cancelled or the plugin disposed.
    pub async fn switch_route(&self, to: &str, reason: &str) -> Result<(), SwitchError> {
        if let Some(interrupted) = self.interrupted() {
            return Err(SwitchError::Interrupted(interrupted));
        }
        let p = &self.payload;
        let switch = RouteSwitched {
            turn: p.turn,
            step: p.step,
            from: p.provider.clone(),
            to: to.to_owned(),
            code: p.failure.code().to_owned(),
            reason: reason.to_owned(),
        };
        p.log.append(vec![Event::RouteSwitched(switch)]).await?;
        Ok(())
    }

    /// Which of the turn's cancellation and the plugin's disposal has fired, if any — the
    /// turn's first, as it decides how the turn ends. A recovery checks it before it writes.
    pub fn interrupted(&self) -> Option<Interrupted> {
        if self.payload.cancel.is_cancelled() {
            Some(Interrupted::Cancelled)
        } else if self.disposed.is_cancelled() {
            Some(Interrupted::Disposed)
        } else {
            None
        }
    }

    /// Waits `delay` (a backoff), unless the turn is cancelled or the plugin disposed first:
    /// either ends the wait at once. A recovery waits through here, so it cannot forget either.
    pub async fn wait(&self, delay: Duration) -> Result<(), Interrupted> {
        self.wait_or(delay, &CancellationToken::new()).await
    }

    /// [`Recovery::wait`], also ended when `also` is cancelled (a plugin's own signal: a switch
    /// to disabled, say). When the delay and a signal are ready together, the signal wins.
    pub async fn wait_or(
        &self,
        delay: Duration,
        also: &CancellationToken,
    ) -> Result<(), Interrupted> {
        tokio::select! {
            biased;
            () = self.payload.cancel.cancelled() => return Err(Interrupted::Cancelled),
            () = self.disposed.cancelled() => return Err(Interrupted::Disposed),
            () = also.cancelled() => return Err(Interrupted::Also),
            () = tokio::time::sleep(delay) => {}
        }
        match self.interrupted() {
            Some(interrupted) => Err(interrupted),
            None if also.is_cancelled() => Err(Interrupted::Also),
            None => Ok(()),
        }
    }
}

impl std::fmt::Debug for Recovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recovery")
            .field("payload", &self.payload)
            .field("downstream", &self.downstream)
            .field("disposed", &self.disposed.is_cancelled())
            .finish_non_exhaustive()
    }
}

/// Walks the rest of the chain under the given cancellation scope (a closure: for testing a
/// plugin alone, see [`Downstream::answering`]).
pub type RestOfChain =
    Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, DownstreamAnswer> + Send>;

/// The rest of the chain after a plugin, as its [`Downstream`] walks it: the runtime's own walk
/// implements it, so this module depends on no driver of the chain. It also holds the answer
/// (one allocation per offer for the handle and the answer the runtime reads back).
pub(crate) trait DownstreamWalk: Send + Sync {
    /// The token the consultation's scope is a child of (the turn's), and the asking plugin's
    /// `disposed` token — read from the walk when asked, not copied into every handle.
    fn tokens(&self) -> (CancellationToken, CancellationToken);

    /// Walks the rest of the chain under the consultation's cancellation `scope` (called at most
    /// once per handle).
    fn walk(&self, scope: CancellationToken) -> BoxFuture<'static, DownstreamAnswer>;

    /// Where the consultation's answer is kept once given.
    fn answer(&self) -> &OnceLock<DownstreamAnswer>;
}

/// A given closure as the rest of the chain (a plugin tested alone). Behind a mutex only so the
/// handle is `Sync` (a recovery holding it may be borrowed across an await).
struct Given {
    rest: std::sync::Mutex<Option<RestOfChain>>,
    cancel: CancellationToken,
    disposed: CancellationToken,
    answer: OnceLock<DownstreamAnswer>,
}

impl DownstreamWalk for Given {
    fn tokens(&self) -> (CancellationToken, CancellationToken) {
        (self.cancel.clone(), self.disposed.clone())
    }

    fn walk(&self, scope: CancellationToken) -> BoxFuture<'static, DownstreamAnswer> {
        let rest = self.rest.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        match rest {
            Some(rest) => rest(scope),
            None => Box::pin(async { DownstreamAnswer::Crashed }),
        }
    }

    fn answer(&self) -> &OnceLock<DownstreamAnswer> {
        &self.answer
    }
}

/// A plugin's handle on the rest of the chain (downstream of it).
pub struct Downstream {
    rest: Arc<dyn DownstreamWalk>,
    /// Whether `ask` started the walk (it is walked at most once).
    walked: bool,
}

impl std::fmt::Debug for Downstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Downstream").field("answer", &self.answered()).finish_non_exhaustive()
    }
}

/// Where the runtime reads whether (and what) a plugin's downstream answered.
#[derive(Clone)]
pub(crate) struct AskedDownstream(Arc<dyn DownstreamWalk>);

impl std::fmt::Debug for AskedDownstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("AskedDownstream").field(&self.answer()).finish()
    }
}

impl AskedDownstream {
    /// The answer, if the plugin consulted downstream.
    pub(crate) fn answer(&self) -> Option<DownstreamAnswer> {
        self.0.answer().get().copied()
    }
}

impl Downstream {
    /// A handle whose `ask` runs `rest` under a child of `cancel`, aborted when `disposed` is
    /// cancelled. Returns the handle and where the runtime reads the answer back.
    pub(crate) fn new(
        rest: RestOfChain,
        cancel: CancellationToken,
        disposed: CancellationToken,
    ) -> (Self, AskedDownstream) {
        let rest = std::sync::Mutex::new(Some(rest));
        Self::chain(Arc::new(Given { rest, cancel, disposed, answer: OnceLock::new() }))
    }

    /// A handle on the runtime's chain after a plugin: nothing is walked until the plugin asks;
    /// `ask` walks it under a child of the turn's token, aborted when the asking plugin is
    /// disposed. Returns the handle and where the runtime reads the answer back.
    pub(crate) fn chain(rest: Arc<dyn DownstreamWalk>) -> (Self, AskedDownstream) {
        let asked = AskedDownstream(Arc::clone(&rest));
        (Self { rest, walked: false }, asked)
    }

    /// A handle on a chain that answers `answer` when asked (for testing a plugin alone).
    pub fn answering(answer: DownstreamAnswer) -> Self {
        let rest: RestOfChain = Box::new(move |_| Box::pin(async move { answer }));
        Self::new(rest, CancellationToken::new(), CancellationToken::new()).0
    }

    /// A handle on the end of the chain: asking it answers `Stop`.
    pub fn end() -> Self {
        Self::answering(DownstreamAnswer::Stop)
    }

    /// Consults the rest of the chain and returns its answer; asking again returns the same
    /// answer without walking the chain again.
    ///
    /// A disposed plugin never consults: it gets `Stop` (fail closed). If the plugin is disposed
    /// while the consultation runs, the consultation's cancellation scope is cancelled (the
    /// plugins downstream see `payload.cancel` cancelled and give up their waits), `ask` waits
    /// until it settled and answers `Stop`.
    pub async fn ask(&mut self) -> DownstreamAnswer {
        let cell = self.rest.answer();
        if let Some(answer) = cell.get() {
            return *answer;
        }
        if std::mem::replace(&mut self.walked, true) {
            // A walk started before and was dropped unfinished: fail closed.
            return *cell.get_or_init(|| DownstreamAnswer::Stop);
        }
        let (cancel, disposed) = self.rest.tokens();
        let answer = if disposed.is_cancelled() {
            DownstreamAnswer::Stop
        } else {
            let scope = cancel.child_token();
            let mut walk = self.rest.walk(scope.clone());
            tokio::select! {
                biased;
                answer = &mut walk => answer,
                () = disposed.cancelled() => {
                    scope.cancel();
                    let _settled = walk.await;
                    DownstreamAnswer::Stop
                }
            }
        };
        *self.rest.answer().get_or_init(|| answer)
    }

    /// Whether [`Downstream::ask`] was called and answered.
    pub fn answered(&self) -> Option<DownstreamAnswer> {
        self.rest.answer().get().copied()
    }
}

/// A run-time settings change a plugin accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigOutcome {
    /// The new revision.
    pub revision: u64,
    /// The names of the fields that changed (written in `config/changed`).
    pub changed: Vec<String>,
}

/// A plugin's settings as a settings page or a CLI reads them ([`Plugin::settings`]): the values
/// with the keys a patch uses, the revision a patch must name, and whether patches are accepted
/// at all.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginSettings {
    /// The revision the next patch must be based on (0 for the settings the plugin was built
    /// with).
    pub revision: u64,
    /// The settings, as a JSON object with the keys of the plugin's configuration and patches.
    pub settings: Value,
    /// Whether run-time patches are refused ([`ConfigError::ReadOnly`]): a page shows the
    /// values without a form.
    pub read_only: bool,
}

/// A fallback taken while reading a plugin's configuration file leniently: the value used
/// instead of the one written, and why. Nothing was refused; a program shows it where a person
/// reads it (`rein scenario run` prints it on stderr).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    /// The field, relative to the configuration object (`extraRetries`, `retryableCodes[2]`;
    /// empty for the object itself).
    pub path: String,
    /// What was done (`-1 is negative; using the default 3`).
    pub message: String,
}

impl std::fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// A plugin built from its configuration file, and the fallbacks the reader took (empty for a
/// strict reader, which refuses instead), in field order.
#[derive(Clone)]
pub struct BuiltPlugin {
    /// The plugin.
    pub plugin: Arc<dyn Plugin>,
    /// The fallbacks its configuration reader took.
    pub warnings: Vec<ConfigWarning>,
    /// The runtime's default route policy this configuration sets, if any: `llm-retry`'s
    /// configuration is the policy of every route that declares none
    /// ([`RuntimeBuilder::built`](crate::runtime::RuntimeBuilder::built) applies it).
    pub default_route_policy: Option<RetryPolicy>,
}

impl BuiltPlugin {
    /// A plugin whose configuration was read strictly: no fallback taken.
    pub fn strict(plugin: Arc<dyn Plugin>) -> Self {
        Self { plugin, warnings: Vec::new(), default_route_policy: None }
    }

    /// A plugin whose configuration was read leniently, with the fallbacks its reader took.
    pub fn lenient<W: Into<ConfigWarning>>(
        plugin: Arc<dyn Plugin>,
        warnings: impl IntoIterator<Item = W>,
    ) -> Self {
        let warnings = warnings.into_iter().map(Into::into).collect();
        Self { plugin, warnings, default_route_policy: None }
    }
}

impl std::fmt::Debug for BuiltPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuiltPlugin")
            .field("plugin", &self.plugin.name())
            .field("warnings", &self.warnings)
            .field("default_route_policy", &self.default_route_policy)
            .finish()
    }
}

/// Why a run-time settings change was refused. Nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The plugin has no run-time settings.
    #[error("plugin {0} has no run-time settings")]
    Unsupported(String),
    /// No plugin of that name is registered (or it was disposed).
    #[error("no plugin named {0} is in the chain")]
    UnknownPlugin(String),
    /// The patch was based on an older revision than the current one.
    #[error(
        "stale revision: the patch is based on revision {based_on}, the settings are at {current}"
    )]
    StaleRevision {
        /// The revision the patch was based on.
        based_on: u64,
        /// The current revision.
        current: u64,
    },
    /// A field's value is invalid; `path` names it (`retryableCodes`, `extraRetries`…).
    #[error("{path}: {message}")]
    Invalid {
        /// The field.
        path: String,
        /// What is wrong with it.
        message: String,
    },
    /// The plugin's settings can be read but not changed at run time.
    #[error("the settings of plugin {plugin} are read-only at run time: {reason}")]
    ReadOnly {
        /// The plugin.
        plugin: String,
        /// Why, and what to do instead.
        reason: String,
    },
}

/// A policy plugin. Implemented by `rein-plugins` and by users; the runtime knows
/// plugins only through this trait.
///
/// A plugin that waits a minute, then retries the first failed attempt of a step, and leaves
/// every other failure to the rest of the chain:
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::time::Duration;
/// use rein_runtime::prelude::*;
///
/// struct AfterAMinute;
///
/// impl Plugin for AfterAMinute {
///     fn name(&self) -> &str {
///         "after-a-minute"
///     }
///     fn recover(self: Arc<Self>, recovery: Recovery) -> BoxFuture<'static, Verdict> {
///         Box::pin(async move {
///             if recovery.payload.attempt > 1 {
///                 return Verdict::Next; // the end of the chain answers Stop
///             }
///             // Ends early, with Err, if the turn is cancelled or the plugin disposed.
///             match recovery.wait(Duration::from_secs(60)).await {
///                 Ok(()) => Verdict::Retry,
///                 Err(_interrupted) => Verdict::Stop, // Interrupted::{Cancelled, Disposed}
///             }
///         })
///     }
/// }
///
/// /// Fails every attempt.
/// #[derive(Default)]
/// struct Down(AtomicU32);
///
/// impl Adapter for Down {
///     fn call(&self, _: Request, _: ChunkSink) -> BoxFuture<'static, Result<Completion, Failure>> {
///         self.0.fetch_add(1, Ordering::SeqCst);
///         Box::pin(async { Err(Failure::new("SERVER", "down").expect("a valid failure")) })
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let down = Arc::new(Down::default());
/// let runtime = Runtime::builder()
///     .clock(Arc::new(VirtualClock::start()))
///     .route(Route::new("down", down.clone()).model("m"))
///     .plugin(Arc::new(AfterAMinute))
///     .build()
///     .await?;
/// let session = runtime.session("s1").await?;
/// let started = tokio::time::Instant::now();
/// let outcome = session.ask("hi").await?;
/// assert!(matches!(outcome.reason, TurnEndReason::Error { failure } if failure.code() == "SERVER"));
/// assert_eq!(down.0.load(Ordering::SeqCst), 2, "one retry");
/// assert_eq!(started.elapsed(), Duration::from_secs(60), "after a minute (of paused time)");
/// runtime.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub trait Plugin: Send + Sync + 'static {
    /// Its name (unique in a runtime; `llm-retry`, `auto-retry`…).
    fn name(&self) -> &str;

    /// Answers one failed attempt. The plugin actor polls the returned future once: up to its
    /// first wait it runs on the actor (keep that part short: no blocking, no long computation);
    /// if it waits, it continues as a task of its own and never holds the actor's mailbox. Must
    /// watch `recovery.payload.cancel` and `recovery.disposed` in every wait, and write nothing
    /// once either is cancelled. A panic counts as [`Verdict::Next`] and restarts the plugin's
    /// actor.
    fn recover(self: Arc<Self>, recovery: Recovery) -> BoxFuture<'static, Verdict>;

    /// Applies a run-time settings patch based on `base_revision`. On success the
    /// runtime appends `config/changed` to every open session log. Default: unsupported.
    fn configure(&self, patch: Value, base_revision: u64) -> Result<ConfigOutcome, ConfigError> {
        let _ = (patch, base_revision);
        Err(ConfigError::Unsupported(self.name().to_owned()))
    }

    /// The current settings revision (the base a run-time patch names). Default 0.
    fn revision(&self) -> u64 {
        0
    }

    /// The current settings and their revision, for a settings page or a CLI. Default: `None`,
    /// the plugin has no settings to show.
    fn settings(&self) -> Option<PluginSettings> {
        None
    }

    /// Checks a run-time patch exactly as [`Plugin::configure`] would — the revision fence, then
    /// every field — without applying it: the names of the fields it would change, or the error
    /// that would refuse it (what a settings page calls to block a save and name the field).
    /// Default: unsupported.
    fn check_settings(
        &self,
        patch: &Value,
        base_revision: u64,
    ) -> Result<Vec<String>, ConfigError> {
        let _ = (patch, base_revision);
        Err(ConfigError::Unsupported(self.name().to_owned()))
    }

    /// Tells the plugin which provider routes the runtime serves, when it joins a runtime (built
    /// with it, or registered later). A plugin whose settings name routes (`fallback`) refuses a
    /// name no route has — the runtime then refuses to build, or to register it — with an error
    /// naming the field (`routes[1]`), and keeps the names to judge its later run-time patches
    /// by. Default: the plugin names no route.
    fn known_routes(&self, routes: &[String]) -> Result<(), ConfigError> {
        let _ = routes;
        Ok(())
    }

    /// Releases what the plugin holds. Runs once, when the plugin leaves the chain (disposed,
    /// removed after too many crashes, or the runtime shut down), after its waits were aborted
    /// and every recovery it was involved in settled; the chain drops the plugin afterwards.
    /// Default: nothing to release.
    fn dispose(self: Arc<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A recovery of a failure in a fresh log, with its own cancel and disposed tokens.
    async fn recovery() -> (Recovery, CancellationToken, CancellationToken) {
        let store = Arc::new(crate::store::memory::MemoryStore::new());
        let clock = Arc::new(crate::clock::VirtualClock::start());
        let (log, _) = SessionLog::open(store, clock, "s").await.unwrap();
        let (cancel, disposed) = (CancellationToken::new(), CancellationToken::new());
        let payload = RequestErrorPayload {
            session: Arc::from("s"),
            turn: 1,
            step: 1,
            attempt: 1,
            provider: "mock".into(),
            failure: Failure::new("SERVER", "down").unwrap(),
            retry_policy: None,
            cancel: cancel.clone(),
            log,
        };
        let recovery = Recovery {
            payload: Arc::new(payload),
            downstream: Downstream::end(),
            disposed: disposed.clone(),
            jitter: Arc::new(crate::random::SeededJitter::new(0)),
        };
        (recovery, cancel, disposed)
    }

    #[tokio::test(start_paused = true)]
    async fn a_recovery_waits_its_delay_unless_the_turn_or_the_plugin_goes_first() {
        type Fire = fn(&CancellationToken, &CancellationToken, &CancellationToken);
        let none: Fire = |_, _, _| {};
        let cancel: Fire = |c, _, _| c.cancel();
        let dispose: Fire = |_, d, _| d.cancel();
        let also: Fire = |_, _, a| a.cancel();
        let both: Fire = |c, d, _| {
            d.cancel();
            c.cancel();
        };
        let cases: [(&str, Fire, Result<(), Interrupted>, Duration); 5] = [
            ("nothing fires: the whole delay", none, Ok(()), Duration::from_secs(5)),
            ("the turn is cancelled", cancel, Err(Interrupted::Cancelled), Duration::from_secs(1)),
            ("the plugin is disposed", dispose, Err(Interrupted::Disposed), Duration::from_secs(1)),
            ("its own signal", also, Err(Interrupted::Also), Duration::from_secs(1)),
            (
                "cancelled and disposed: the turn first",
                both,
                Err(Interrupted::Cancelled),
                Duration::from_secs(1),
            ),
        ];
        for (case, fire, expected, lasted) in cases {
            let (recovery, cancel_token, disposed) = recovery().await;
            let signal = CancellationToken::new();
            let started = tokio::time::Instant::now();
            let waiting = async { recovery.wait_or(Duration::from_secs(5), &signal).await };
            let firing = async {
                tokio::time::sleep(Duration::from_secs(1)).await;
                fire(&cancel_token, &disposed, &signal);
            };
            let (waited, ()) = tokio::join!(waiting, firing);
            assert_eq!(waited, expected, "{case}");
            assert_eq!(started.elapsed(), lasted, "{case}: ended at once");
            assert_eq!(
                recovery.interrupted(),
                expected.err().filter(|i| *i != Interrupted::Also),
                "{case}"
            );
        }
        // A signal that fired already wins over a zero delay.
        let (recovery, cancel_token, _) = recovery().await;
        cancel_token.cancel();
        assert_eq!(recovery.wait(Duration::ZERO).await, Err(Interrupted::Cancelled));
    }

    fn counting(walks: Arc<AtomicUsize>, answer: DownstreamAnswer) -> RestOfChain {
        Box::new(move |_| {
            walks.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move { answer })
        })
    }

    #[tokio::test]
    async fn asking_twice_walks_once_and_remembers() {
        let walks = Arc::new(AtomicUsize::new(0));
        let (mut down, asked) = Downstream::new(
            counting(Arc::clone(&walks), DownstreamAnswer::Retry),
            CancellationToken::new(),
            CancellationToken::new(),
        );
        assert_eq!(asked.answer(), None);
        assert_eq!(down.ask().await, DownstreamAnswer::Retry);
        assert_eq!(down.ask().await, DownstreamAnswer::Retry);
        assert_eq!(walks.load(Ordering::SeqCst), 1);
        assert_eq!(asked.answer(), Some(DownstreamAnswer::Retry));
        assert_eq!(down.answered(), Some(DownstreamAnswer::Retry));
    }

    #[tokio::test]
    async fn a_disposed_plugin_never_consults_downstream() {
        let walks = Arc::new(AtomicUsize::new(0));
        let disposed = CancellationToken::new();
        disposed.cancel();
        let (mut down, asked) = Downstream::new(
            counting(Arc::clone(&walks), DownstreamAnswer::Retry),
            CancellationToken::new(),
            disposed,
        );
        assert_eq!(down.ask().await, DownstreamAnswer::Stop);
        assert_eq!(walks.load(Ordering::SeqCst), 0);
        assert_eq!(asked.answer(), Some(DownstreamAnswer::Stop));
    }

    #[tokio::test(start_paused = true)]
    async fn disposal_during_a_consultation_cancels_its_scope_and_waits_for_it() {
        let disposed = CancellationToken::new();
        let turn = CancellationToken::new();
        let settled = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&settled);
        // Downstream waits an hour unless its scope is cancelled, then answers Retry (which
        // the disposed asker must not pass on).
        let rest: RestOfChain = Box::new(move |scope: CancellationToken| {
            Box::pin(async move {
                tokio::select! {
                    () = scope.cancelled() => {}
                    () = tokio::time::sleep(Duration::from_secs(3600)) => {}
                }
                seen.fetch_add(1, Ordering::SeqCst);
                DownstreamAnswer::Retry
            })
        });
        let (mut down, _) = Downstream::new(rest, turn.clone(), disposed.clone());
        let asking = tokio::spawn(async move { down.ask().await });
        tokio::time::sleep(Duration::from_millis(10)).await;
        let before = tokio::time::Instant::now();
        disposed.cancel();
        assert_eq!(asking.await.unwrap(), DownstreamAnswer::Stop);
        assert_eq!(before.elapsed(), Duration::ZERO, "promptly");
        assert_eq!(settled.load(Ordering::SeqCst), 1, "the consultation settled first");
        assert!(!turn.is_cancelled(), "the turn itself is not cancelled");
    }

    #[tokio::test]
    async fn test_handles_answer_what_they_were_given() {
        assert_eq!(Downstream::end().ask().await, DownstreamAnswer::Stop);
        let mut crashed = Downstream::answering(DownstreamAnswer::Crashed);
        assert_eq!(crashed.ask().await, DownstreamAnswer::Crashed);
    }
}
