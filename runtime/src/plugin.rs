//! The one trait plugins implement, and what a recovery hands them.
//!
//! A [`Plugin`] is a policy registered on the runtime; the plugins that recover failed requests
//! form the request-error waterfall in registration order (`docs/runtime-semantics.md`, "Waterfall
//! and plugins"). When an attempt fails, the runtime offers each plugin in turn a [`Recovery`]: the
//! failure and its context ([`RequestErrorPayload`]), a [`Downstream`] handle on the rest of the
//! chain, the plugin's own `disposed` token and the runtime's [`Jitter`](crate::random::Jitter) source. The plugin answers
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
//! # Why settings are one object
//!
//! A settings page or a CLI talks to the runtime, not to a plugin's type: the runtime reaches a
//! plugin's settings through [`Plugin::settings`], one [`Settings`] object that shows them with
//! their revision, stages a patch (the revision fence and every field checked, nothing applied),
//! commits a staged patch, and restores recorded settings. A plugin without settings writes
//! nothing (the default is `None`); a plugin whose settings cannot change at run time returns a
//! [`ReadOnly`], which refuses every patch with [`ConfigError::ReadOnly`] rather than accepting
//! one it would not apply. `rein-plugins`' `Revisioned` is the one implementation the shipped
//! plugins share.

mod configured;
mod downstream;
mod read_only;
mod recovery;
mod settings;
mod verdict;

use std::sync::Arc;

use crate::future::BoxFuture;

pub use configured::{BuiltPlugin, ConfigWarning, Configured, IntoPlugin, PluginWarning};
pub(crate) use downstream::{AskedDownstream, DownstreamWalk};
pub use downstream::{Downstream, DownstreamAnswer, RestOfChain};
pub use read_only::ReadOnly;
pub use recovery::{Interrupted, Recovery, RequestErrorPayload, SwitchError};
pub use settings::{ConfigError, ConfigOutcome, PluginSettings, Settings, Staged};
pub use verdict::Verdict;

/// What a plugin author uses, in one import: `use rein_runtime::plugin::prelude::*;` — the
/// trait, what a recovery gets and answers, the settings seam, the configured form a plugin's
/// `from_config` returns, and the vocabulary a recovery decides with.
pub mod prelude {
    pub use super::{
        BuiltPlugin, ConfigError, ConfigOutcome, ConfigWarning, Configured, Downstream,
        DownstreamAnswer, Interrupted, IntoPlugin, Plugin, PluginSettings, ReadOnly, Recovery,
        RequestErrorPayload, Settings, Staged, SwitchError, Verdict,
    };
    pub use crate::failure::Failure;
    pub use crate::future::BoxFuture;
    pub use crate::retry_policy::RetryPolicy;
    pub use crate::session_log::SessionLog;
    pub use tokio_util::sync::CancellationToken;
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
/// use rein_runtime::plugin::prelude::*;
/// use rein_runtime::provider::prelude::*;
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

    /// Its run-time settings, for a settings page or a CLI to show, change and restore through
    /// the runtime (see [`Settings`]). Default: `None`, the plugin has no settings (a patch is
    /// refused with [`ConfigError::Unsupported`]).
    fn settings(&self) -> Option<&dyn Settings> {
        None
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
