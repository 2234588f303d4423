//! rein-invariant: the rules of the session-log contract (`docs/runtime-semantics.md`, "Invariants
//! and `rein check`") as pure functions, an offline checker, and a live validator.
//!
//! # Layout
//!
//! Pure core first:
//! - [`rules`]: the catalogue ([`Rule`], one stable kebab-case name per rule) and the rule code,
//!   one file per family: sessions (nesting and numbering), requests, retries, routes (route
//!   switches).
//! - `state`: the fold the rules read — open turn and step, the current attempt, retry chains
//!   and retry-id ownership.
//! - [`violation`]: a broken rule as data ([`Violation`]).
//! - [`checker`]: [`Checker`] folds a log event by event; [`check_log`], [`check_finished_log`].
//! - [`schema`]: one line of text to an event, or the rule the line breaks.
//!
//! Shell:
//! - [`live`]: [`LiveValidator`], the runtime's `Validator` hook around a [`Checker`].
//!
//! No tokio, no actors and no I/O: callers read the logs (the `rein check` CLI, the session-log
//! actor) and hand events in.
//!
//! # Quick start
//!
//! Check a live runtime's appends as they happen, and its finished log afterwards:
//!
//! ```
//! use std::sync::Arc;
//!
//! use rein_invariant::{LiveValidator, Rule, check_finished_log, check_log};
//! use rein_runtime::prelude::*;
//! use rein_runtime::provider::prelude::*;
//!
//! /// Answers every request with "ok".
//! struct Answers;
//!
//! impl Adapter for Answers {
//!     fn call(&self, _: Request, chunks: ChunkSink) -> BoxFuture<'static, Result<Completion, Failure>> {
//!         let _ = chunks.send("ok".into());
//!         Box::pin(async { Ok(Completion::default()) })
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = Runtime::builder()
//!     .route(Route::new("main", Arc::new(Answers)).model("m-1"))
//!     // Every append is checked before it commits; one that breaks a rule is refused.
//!     .validator(|| Box::new(LiveValidator::new()))
//!     .build()
//!     .await?;
//! let session = runtime.session("s").await?;
//! session.ask("hi").await?;
//! let events = session.events().await?;
//! runtime.shutdown().await;
//! assert!(check_finished_log(&events).is_empty());
//!
//! // A log cut after its `turn/start` is still a valid running log, not a finished one.
//! let cut = &events[..3];
//! assert_eq!(cut[2].kind(), "turn/start");
//! assert!(check_log(cut).is_empty());
//! let open = check_finished_log(cut);
//! assert_eq!(open.len(), 1);
//! assert_eq!(open[0].rule, Rule::TurnLeftOpen);
//! # Ok(())
//! # }
//! ```

mod catalogue;
pub mod checker;
pub mod live;
pub mod rules;
pub mod schema;
mod state;
pub mod violation;

pub use checker::{Checker, check_finished_log, check_log};
pub use live::LiveValidator;
pub use rules::{Family, Rule};
pub use schema::{LineError, parse_line};
pub use violation::Violation;
