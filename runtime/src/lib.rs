//! rein-runtime: the event vocabulary, the durable session log and its stores, the actors of an
//! agent (session, turn, step, provider, plugin host) and the request-error waterfall.
//!
//! # Layout
//!
//! Pure core first:
//! - [`failure`]: `Failure` (always valid) and the known codes.
//! - [`event`]: the typed events and the log envelope.
//! - [`json_number`]: canonical JSON numbers (`500`, not `500.0`).
//! - [`clock`]: the injected clock (wall or virtual).
//! - [`random`]: injected jitter samples (an explicit sequence, then a seeded RNG).
//! - [`retry_policy`]: a route's retry policy (normal/always, backoff curve), its strict
//!   declaration format, the effective-policy resolution and the canonical `policyKey`.
//! - [`projection`]: the `Projection` trait (pure folds of a log).
//! - [`validator`]: the `Validator` trait (checks run before an append commits).
//! - [`provider`]: the request/completion types and the `Adapter` trait.
//! - [`history`]: the model-visible history fold (what a request is built from).
//! - [`transcript`]: the conversation of a log, turn by turn, as a person reads it.
//! - [`panel`]: turn-tail panels — each turn that retried or failed, every attempt with its
//!   origin, wait and the provider's failure verbatim.
//! - [`plugin`]: the one trait plugins implement, `Verdict`, the recovery payload, `Downstream`.
//! - [`waterfall`]: the chain-walk rules (order, `Next`/`Stop`/`Retry`, crash = `Next`, end of
//!   chain = `Stop`, cancellation beats everything) and the driver that walks the chain.
//! - [`agent_loop`]: what a step's end means for its turn, what a success writes, when a
//!   manual retry applies.
//! - [`plugin_host::intensity`]: the restart rule (3 restarts in 5 s).
//! - [`cancel`]: cancellation scopes that remember their cause.
//! - [`tool`]: the `Tool` trait, the toolbox, the `echo` tool.
//! - [`crash`]: caught panics as text.
//! - `first_poll`: run work once where it starts; spawn a task only for work that waits.
//!
//! Shells:
//! - [`store`]: the `SessionStore` trait and its memory, JSONL and SQLite stores.
//! - [`session_log`]: the session-log actor (the only writer of a log), its projections (retry
//!   chains, open turn), validators hook, the turn guard and the repair on reopen.
//! - [`runtime`]: the `Runtime` builder and handle, the root supervisor.
//! - [`session`]: the `Session` handle, what a prompt returns (`TurnHandle`), the session actor,
//!   hibernation.
//! - `turn`, `step`: the turn actor (linked under its session) and the step actor (linked under
//!   its turn) — the agent loop's wiring.
//! - [`fault`]: step and turn panics injected on purpose, to test their supervision.
//! - [`provider::actor`]: one actor per provider route, one task per attempt.
//! - [`plugin_host`]: the supervisor of the plugin actors.
//! - [`census`]: live actors (by kind) and tasks, so shutdown can prove it left none.
//!
//! # Quick start
//!
//! Everything an agent needs is in the prelude. An adapter that fails its first attempt, a
//! plugin that retries once, a tool-less agent:
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU32, Ordering};
//!
//! use rein_runtime::prelude::*;
//!
//! /// Streams "hello" — except on its first call, which fails after a partial chunk.
//! #[derive(Default)]
//! struct Flaky(AtomicU32);
//!
//! impl Adapter for Flaky {
//!     fn call(&self, _: Request, chunks: ChunkSink) -> BoxFuture<'static, Result<Completion, Failure>> {
//!         let first = self.0.fetch_add(1, Ordering::SeqCst) == 0;
//!         Box::pin(async move {
//!             if first {
//!                 let _ = chunks.send("hel".into());
//!                 return Err(Failure::new("SERVER", "busy").expect("a valid failure"));
//!             }
//!             for chunk in ["hel", "lo"] {
//!                 let _ = chunks.send(chunk.into());
//!             }
//!             Ok(Completion::default())
//!         })
//!     }
//! }
//!
//! /// Retries a step's first failed attempt; delegates everything else.
//! struct RetryOnce;
//!
//! impl Plugin for RetryOnce {
//!     fn name(&self) -> &str {
//!         "retry-once"
//!     }
//!     fn recover(self: Arc<Self>, recovery: Recovery) -> BoxFuture<'static, Verdict> {
//!         let first = recovery.payload.attempt == 1;
//!         Box::pin(async move { if first { Verdict::Retry } else { Verdict::Next } })
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = Runtime::builder()
//!     .route(Route::new("flaky", Arc::new(Flaky::default())).model("flaky-1"))
//!     .plugin(Arc::new(RetryOnce))
//!     .build()
//!     .await?;
//! let session = runtime.session("demo").await?;
//!
//! let mut turn = session.prompt("hi")?; // a stream of the turn's events…
//! let mut kinds = Vec::new();
//! while let Some(event) = turn.next_event().await {
//!     kinds.push(event.kind());
//! }
//! let outcome = turn.await?; // …and, awaited, how it ended
//! assert_eq!(outcome.reason, TurnEndReason::Completed);
//! assert_eq!(kinds, [
//!     "user/message", "turn/start", "step/start",
//!     "request/start", "assistant/chunk", "request/error",            // attempt 1 fails…
//!     "request/start", "assistant/chunk", "assistant/chunk",          // …retry-once retries
//!     "assistant/message", "step/end", "turn/end",
//! ]);
//!
//! // The answer is built from the successful attempt's chunks only.
//! let events = session.events().await?;
//! assert!(events.iter().any(|e| matches!(&e.event, Event::AssistantMessage(m) if m.text == "hello")));
//!
//! // A caller that only wants the outcome asks.
//! assert_eq!(session.ask("again").await?.turn, 2);
//!
//! runtime.shutdown().await; // no actor, no task left
//! assert_eq!((runtime.census().actors(), runtime.census().tasks()), (0, 0));
//! # Ok(())
//! # }
//! ```

/// A boxed, sendable future: what the runtime's traits (stores, adapters, plugins, tools) return.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

#[cfg(test)]
extern crate self as rein_runtime;

pub mod agent_loop;
pub mod cancel;
pub mod census;
pub mod clock;
mod context;
pub mod crash;
pub mod event;
pub mod failure;
pub mod fault;
mod first_poll;
pub mod history;
pub mod json_number;
pub mod panel;
pub mod plugin;
pub mod plugin_host;
pub mod projection;
pub mod provider;
pub mod random;
pub mod retry_policy;
pub mod runtime;
pub mod session;
pub mod session_log;
mod step;
pub mod store;
pub mod tool;
pub mod transcript;
mod turn;
pub mod validator;
pub mod waterfall;

/// Everything an agent author needs, in one import: `use rein_runtime::prelude::*;`.
pub mod prelude {
    pub use crate::BoxFuture;
    pub use crate::clock::{Clock, VirtualClock, WallClock};
    pub use crate::event::{CancelCause, Envelope, Event, ToolCall, TurnEndReason, Usage};
    pub use crate::failure::Failure;
    pub use crate::plugin::{
        BuiltPlugin, ConfigError, ConfigOutcome, ConfigWarning, DownstreamAnswer, Interrupted,
        Plugin, PluginSettings, Recovery, RequestErrorPayload, Verdict,
    };
    pub use crate::provider::{
        Adapter, ChunkSink, Completion, Message, Messages, Request, SinkClosed, ToolSpec,
    };
    pub use crate::retry_policy::RetryPolicy;
    pub use crate::runtime::{Route, Runtime, RuntimeBuilder};
    pub use crate::session::{Prompt, Session, SessionError, TurnHandle, TurnOutcome};
    #[cfg(feature = "sqlite")]
    pub use crate::store::sqlite::SqliteStore;
    pub use crate::store::{Durability, SessionStore, jsonl::JsonlStore, memory::MemoryStore};
    pub use crate::tool::{Tool, ToolOutcome};
}
