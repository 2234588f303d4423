//! rein-runtime: the engine — the durable session log and its stores, the actors of an agent
//! (session, turn, step, provider, plugin host) and the request-error waterfall. The vocabulary
//! (events, failures, retry policies, the pure views of a log) lives in `rein-event`, which has
//! no async runtime; this crate re-exports each of its modules at the same path
//! (`rein_runtime::event` is `rein_event::event`).
//!
//! # Layout
//!
//! What an agent program uses (most of it through the [`prelude`]):
//! - [`runtime`]: the `Runtime` builder and handle (routes, plugins, tools, stores), the root
//!   supervisor; [`session`]: the `Session` handle and what a prompt returns (`TurnHandle`).
//! - [`provider`]: the request/completion types and the `Adapter` trait a model speaks through.
//! - [`plugin`]: the one trait retry plugins implement, `Verdict`, the `Recovery` a plugin gets
//!   (its failure, a way to wait that a cancellation or a disposal ends, the rest of the chain).
//! - [`tool`]: the `Tool` trait and the `echo` tool.
//! - [`store`]: the `SessionStore` trait and its memory, JSONL and SQLite (feature `sqlite`,
//!   on by default) stores.
//! - [`event`], [`failure`]: the typed events of a session log and the failures that end
//!   attempts; [`retry_policy`]: a route's retry policy and its declaration format.
//! - [`clock`], [`random`]: the injected clock (wall or virtual) and jitter samples.
//! - [`resume`]: `Resume`, whether a reopened session continues the turn a crash left open.
//! - [`route_health`]: a route's retry budget and circuit breaker (`Route::health`), and the
//!   snapshots plugins decide from.
//!
//! What tools over logs use: [`history`] (what the model sees), [`transcript`] (what a person
//! reads), [`panel`] (turn-tail panels: every attempt of a turn that retried or failed),
//! [`projection`] (pure folds), [`validator`] (checks run before an append commits),
//! [`session_log`] (the log actor's projections: retry chains, the open turn), [`census`] (live
//! actors by kind and tasks), [`fault`] (panics injected on purpose, to test supervision),
//! [`cancel`] (cancellation causes), [`json_number`] and [`policy_key`] (numbers and keys written
//! byte for byte as the JavaScript seed harness writes them), [`plural`] (counts in words:
//! `1 time`, `2 times`), [`file`](mod@file) (regular files only, read within a limit: what every
//! reader of a log or a scenario file opens through), [`quote`] (a value from a file, cut for a
//! message).
//!
//! Inside (not public): the waterfall's pure rules (`waterfall`) and its walk over the plugin
//! actors (`plugin_host::walk`), the plugin host and its restart rule (`plugin_host`), the
//! turn's pure decisions (`agent_loop`), what a reopen does with a crash's open turn
//! (`resume::plan`), the turn, step and provider actors (`turn`, `step`,
//! `provider::actor`), the session actor and its phase with its pure decisions (`session::actor`,
//! `session::phase`). `docs/architecture.md` in the repository maps them.
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
//! use rein_runtime::plugin::prelude::*;
//! use rein_runtime::provider::prelude::*;
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

pub use future::BoxFuture;

#[cfg(test)]
extern crate self as rein_runtime;

pub(crate) mod agent_loop;
pub mod cancel;
pub mod census;
pub mod clock;
#[cfg(feature = "postgres")]
pub mod cluster;
mod context;
pub(crate) mod crash;
pub use rein_event::event;
pub use rein_event::failure;
pub mod fault;
pub mod file;
mod first_poll;
mod future;
pub use rein_event::history;
pub use rein_event::json_number;
pub use rein_event::panel;
pub mod pending;
pub mod plugin;
pub(crate) mod plugin_host;
pub use rein_event::plural;
pub use rein_event::policy_key;
pub use rein_event::projection;
pub mod provider;
pub use rein_event::quote;
pub mod random;
pub mod resume;
pub use rein_event::retry_policy;
pub mod route_health;
mod route_settings;
pub mod runtime;
mod saved_settings;
pub mod session;
pub mod session_log;
mod step;
pub mod store;
pub mod tool;
pub use rein_event::transcript;
mod turn;
pub use rein_event::validator;
pub(crate) mod waterfall;

/// What an agent program uses, in one import: `use rein_runtime::prelude::*;` — the runtime and
/// its routes, sessions and what a turn returns, the events of a session's log, the clocks and
/// the stores. Writing a plugin, a tool or an adapter has its own prelude where that trait lives:
/// [`plugin::prelude`], [`tool::prelude`], [`provider::prelude`].
pub mod prelude {
    pub use crate::clock::{Clock, VirtualClock, WallClock};
    pub use crate::event::{CancelCause, Envelope, Event, TurnEndReason};
    pub use crate::failure::Failure;
    pub use crate::provider::Generation;
    pub use crate::resume::Resume;
    pub use crate::retry_policy::RetryPolicy;
    pub use crate::runtime::{Route, Runtime};
    pub use crate::session::{AnswerDelta, Prompt, Session, SessionError, TurnHandle, TurnOutcome};
    #[cfg(feature = "sqlite")]
    pub use crate::store::sqlite::SqliteStore;
    pub use crate::store::{Durability, SessionStore, jsonl::JsonlStore, memory::MemoryStore};
}
