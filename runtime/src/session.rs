//! Sessions: the [`Session`] handle people hold, and the actor behind it while it is awake.
//!
//! - `phase`: the session actor's phase (a turn runs, between turns, idle, hibernating) and its
//!   pure decisions: what it does next after every message, how a turn's end is closed.
//! - `message`: the session actor's messages (what a handle asks, through the directory).
//! - `closing`: a cancelled turn's closing batch in flight through the log, which answers the
//!   cancel's caller itself once it is durable.
//! - `directory`: which sessions are awake (have an actor), and the hand-off that lets one
//!   hibernate without losing a message.
//! - `turn_handle`: what a prompt returns — the turn's events and its outcome.
//! - `answer`: the turn's answer as it streams ([`TurnHandle::answer`]): text, a reset when an
//!   attempt that streamed fails, the text of each step that answered.
//! - `actor`: [`SessionActor`](self) — owns the session's log actor while awake, queues
//!   prompts, runs one turn actor at a time, closes each turn, hibernates after its idle grace.
//!
//! # Why sessions hibernate
//!
//! A session that has been idle for the runtime's grace period holds no actors (a hibernated
//! session costs a few dozen bytes): its log is closed and its session actor stopped; everything
//! it knows is in its durable log. A [`Session`] is only a name and a runtime, so it stays valid across hibernation: the
//! next call wakes a fresh actor, which reopens the log (repairing a turn a crash left open) and
//! folds its projections again.

use std::sync::Arc;

use tokio::sync::oneshot;

pub use crate::agent_loop::RetryRefused;
use crate::context::Shared;
use crate::event::{CancelCause, Envelope};
use crate::provider::Generation;
use crate::session_log::LogError;

pub(crate) mod actor;
mod answer;
mod closing;
pub(crate) mod directory;

mod last_route;
pub(crate) mod message;
mod phase;
pub(crate) mod placement;
mod rewake;
pub(crate) mod turn_handle;

pub use answer::{Answer, AnswerDelta, AnswerStream, Answered};
pub use placement::Placement;
pub use turn_handle::{TurnHandle, TurnOutcome};

use message::ClientMsg;

/// What a session was asked to do.
///
/// ```
/// use rein_runtime::prelude::*;
/// # use rein_runtime::provider::GenerationError;
///
/// let plain: Prompt = "hello".into(); // on the runtime's default route
/// assert_eq!(plain.route, None);
/// let routed = Prompt::new("hello").on("backup");
/// assert_eq!(routed.route.as_deref(), Some("backup"));
/// let warm = Prompt::new("a poem").generation(Generation::new().with_temperature(1.2)?);
/// assert_eq!(warm.generation.temperature(), Some(1.2));
/// # Ok::<(), GenerationError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    /// The user's message.
    pub text: String,
    /// The provider route to use (the runtime's default route when `None`).
    pub route: Option<String>,
    /// Generation settings for this turn's requests, over the route's field by field (none by
    /// default). Not durable: see "Generation settings" in `docs/runtime-semantics.md`.
    pub generation: Generation,
}

impl Prompt {
    /// A prompt on the default route.
    pub fn new(text: impl Into<String>) -> Self {
        Self { text: text.into(), route: None, generation: Generation::default() }
    }

    /// The same prompt on the route named `route`.
    pub fn on(mut self, route: impl Into<String>) -> Self {
        self.route = Some(route.into());
        self
    }

    /// The same prompt with `generation` for its turn's requests (each field set wins over the
    /// route's).
    pub fn generation(mut self, generation: Generation) -> Self {
        self.generation = generation;
        self
    }
}

impl From<&str> for Prompt {
    fn from(text: &str) -> Self {
        Self::new(text)
    }
}

impl From<String> for Prompt {
    fn from(text: String) -> Self {
        Self::new(text)
    }
}

/// Why a session operation failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The session's log could not be opened (a corrupt line names its file and line).
    #[error("session {session}: {source}")]
    Open {
        /// The session.
        session: String,
        /// Why.
        #[source]
        source: Arc<LogError>,
    },
    /// A turn's first events could not be written, so it never started.
    #[error("session {session}: the turn could not start: {message}")]
    NotStarted {
        /// The session.
        session: String,
        /// Why.
        message: String,
    },
    /// The session's log ended under it — the store failed an append (a full disk), or the log
    /// failed — so the turn could not be recorded: the session closed, and its next call reopens
    /// the log, which closes a turn left open `interrupted`, as after a crash. Queued prompts
    /// fail the same way.
    #[error(
        "session {session}: its log failed, so the session closed (the next call reopens and repairs it): {message}"
    )]
    LogFailed {
        /// The session.
        session: String,
        /// Why the log failed.
        message: String,
    },
    /// The prompt was queued behind another turn and was dropped before it started, because the
    /// session was cancelled or closed.
    #[error("the queued prompt was dropped before it started (cancelled: {cause:?})")]
    Dropped {
        /// Why.
        cause: CancelCause,
    },
    /// A manual retry does not apply now.
    #[error(transparent)]
    Retry(#[from] RetryRefused),
    /// A request for a session another node serves (SPEC §12) that could not be served there:
    /// no node answered in time (the database away, no node holding the session's partition),
    /// or the node that serves it refused it (its words).
    #[error("session {session}: {message}")]
    Remote {
        /// The session.
        session: String,
        /// What happened.
        message: String,
    },
    /// The runtime was shut down.
    #[error("the runtime is shut down")]
    ShutDown,
    /// The session's actor stopped before it answered.
    #[error("the session stopped before it answered")]
    Stopped,
}

/// The sessions of a runtime: what every session handle and session actor holds — the
/// runtime's shared configuration and the directory of awake sessions.
pub(crate) struct Sessions {
    pub(crate) shared: Arc<Shared>,
    pub(crate) directory: directory::Directory,
    /// Where sessions are served (`None`: all here).
    pub(crate) placement: Option<Placement>,
}

impl Sessions {
    pub(crate) fn new(shared: Arc<Shared>, placement: Option<Placement>) -> Self {
        Self { shared, directory: directory::Directory::new(actor::wake), placement }
    }

    /// Whether `session` is served here now.
    pub(crate) fn is_local(&self, session: &str) -> bool {
        self.placement.as_ref().is_none_or(|p| p.0.is_local(session))
    }
}

/// A session: one conversation with one durable log. Cheap to clone; valid while its runtime
/// runs, whether the session is awake or hibernating.
///
/// ```
/// use std::sync::Arc;
/// use rein_runtime::prelude::*;
/// use rein_runtime::provider::prelude::*;
///
/// /// Never answers: every attempt waits until it is cancelled.
/// struct Silent;
///
/// impl Adapter for Silent {
///     fn call(&self, _: Request, _: ChunkSink) -> BoxFuture<'static, Result<Completion, Failure>> {
///         Box::pin(std::future::pending())
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::builder()
///     .route(Route::new("silent", Arc::new(Silent)).model("m"))
///     .build()
///     .await?;
/// let session = runtime.session("s1").await?;
/// let turn = session.prompt("hello?")?;
/// assert!(session.cancel(CancelCause::User).await?, "a turn was running");
/// let outcome = turn.await?;
/// assert_eq!(outcome.reason, TurnEndReason::Aborted { cause: CancelCause::User });
/// assert!(!session.cancel(CancelCause::User).await?, "nothing runs now");
/// runtime.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Session {
    sessions: Arc<Sessions>,
    id: Arc<str>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("id", &self.id).finish_non_exhaustive()
    }
}

impl Session {
    pub(crate) fn new(sessions: Arc<Sessions>, id: Arc<str>) -> Self {
        Self { sessions, id }
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Sends the user's message. The turn starts now, or when the turns queued before it have
    /// ended; the handle streams its events (it is a [`futures::Stream`]) and, awaited, resolves
    /// to how the turn ended. Fails only when the runtime is shut down. On a node of a cluster, a
    /// session another node serves gets the prompt there, and the handle follows its turn there.
    pub fn prompt(&self, prompt: impl Into<Prompt>) -> Result<TurnHandle, SessionError> {
        let (sink, handle) = turn_handle::channel();
        match self.remote() {
            Some(router) => router.prompt(&self.id, prompt.into(), sink)?,
            None => self.send(ClientMsg::Prompt(prompt.into(), sink))?,
        }
        Ok(handle)
    }

    /// Sends the user's message and resolves to how its turn ended: `prompt` then `.await`, for a
    /// caller that does not read the turn's events.
    pub async fn ask(&self, prompt: impl Into<Prompt>) -> Result<TurnOutcome, SessionError> {
        self.prompt(prompt)?.await
    }

    /// Retries the last turn: a new turn over the same durable history (no new user message),
    /// on the route the last turn used, with fresh retry budgets. Applies when the last turn
    /// ended without completing (an error, an abort, the step limit, a crash) and nothing runs.
    pub async fn retry(&self) -> Result<TurnHandle, SessionError> {
        let (sink, handle) = turn_handle::channel();
        if let Some(router) = self.remote() {
            router.retry(&self.id, sink).await?;
            return Ok(handle);
        }
        let (reply, accepted) = oneshot::channel();
        self.send(ClientMsg::Retry(sink, reply))?;
        accepted.await.map_err(|_| SessionError::Stopped)??;
        Ok(handle)
    }

    /// Cancels the running turn (it ends `aborted` with `cause`) and drops the prompts queued
    /// behind it. Returns whether it cancelled a turn: true exactly when the running turn ends
    /// `aborted` (with `cause`, unless another cancellation came first); false when no turn ran,
    /// or the turn had already ended on its own (its last step completed or failed) and only its
    /// `turn/end` was still to be written — that end stands.
    pub async fn cancel(&self, cause: CancelCause) -> Result<bool, SessionError> {
        if let Some(router) = self.remote() {
            return router.cancel(&self.id, cause).await;
        }
        if !self.is_awake() {
            // Hibernating: nothing runs and nothing is queued; no need to wake it.
            return Ok(false);
        }
        let (reply, answer) = oneshot::channel();
        self.send(ClientMsg::Cancel(cause, reply))?;
        answer.await.map_err(|_| SessionError::Stopped)
    }

    /// Closes the session: cancels the running turn (cause `parent`), drops queued prompts, and
    /// resolves once the session is idle and hibernating. The log stays; a later call reopens it.
    pub async fn close(&self) -> Result<(), SessionError> {
        if let Some(router) = self.remote() {
            return router.close(&self.id).await;
        }
        if !self.is_awake() {
            return Ok(());
        }
        let (reply, done) = oneshot::channel();
        self.send(ClientMsg::Close(reply))?;
        done.await.map_err(|_| SessionError::Stopped)
    }

    /// The session's whole log, read back from the store.
    pub async fn events(&self) -> Result<Vec<Envelope>, SessionError> {
        if self.remote().is_some() {
            let loaded = self.sessions.shared.store.load(&self.id).await;
            let loaded = loaded.map_err(|e| SessionError::Open {
                session: self.id.to_string(),
                source: Arc::new(e.into()),
            })?;
            return Ok(loaded.map(|l| l.events).unwrap_or_default());
        }
        let (reply, events) = oneshot::channel();
        self.send(ClientMsg::Events(reply))?;
        events.await.map_err(|_| SessionError::Stopped)?
    }

    /// The turn a crash left open that this session resumed when it woke (its log read back on
    /// opening: SPEC §11), as a handle: its events from its `turn/resumed` on, and its outcome.
    /// Given once per wake — `None` when the session resumed nothing, after the handle was taken,
    /// or once the session hibernated. What `rein chat --session ID` shows before the next
    /// prompt.
    pub async fn resumed(&self) -> Result<Option<TurnHandle>, SessionError> {
        if self.remote().is_some() {
            // Resumed where it is served: that node's session has it.
            return Ok(None);
        }
        let (reply, handle) = oneshot::channel();
        self.send(ClientMsg::Resumed(reply))?;
        handle.await.map_err(|_| SessionError::Stopped)
    }

    /// Kills the session's actor, as a crash would (ractor's kill: no `post_stop` anywhere). Its
    /// turn and step actors and its log actor are killed with it through their links, every wait
    /// they started ends (their tokens fire as their states are dropped), and the session wakes
    /// again at once to close the interrupted turn in its log. For testing how an agent survives
    /// a crash; returns whether the session was awake.
    pub fn kill(&self) -> bool {
        self.sessions.directory.kill(&self.id)
    }

    /// Whether the session is awake (has actors) right now.
    pub fn is_awake(&self) -> bool {
        self.sessions.directory.is_awake(&self.id)
    }

    /// Wakes the session (opening its log, creating it if new) and lets it hibernate again.
    pub(crate) async fn open(&self) -> Result<(), SessionError> {
        if let Some(router) = self.remote() {
            return router.open(&self.id).await;
        }
        let (reply, opened) = oneshot::channel();
        self.send(ClientMsg::Open(reply))?;
        opened.await.map_err(|_| SessionError::Stopped)?
    }

    /// Where requests go when another node serves the session now (see `placement`).
    fn remote(&self) -> Option<&dyn placement::Router> {
        let placement = self.sessions.placement.as_ref()?;
        (!placement.0.is_local(&self.id)).then(|| &*placement.0)
    }

    fn send(&self, message: ClientMsg) -> Result<(), SessionError> {
        self.sessions.directory.send(&self.sessions, &self.id, message)
    }
}
