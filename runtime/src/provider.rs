//! The provider boundary: what a request holds, what an adapter answers.
//!
//! An [`Adapter`] turns one [`Request`] into one attempt: it streams raw text chunks into a
//! [`ChunkSink`] and then resolves to a [`Completion`] or a [`Failure`]. It never retries;
//! retries are the waterfall's. Cancellation is by dropping the future (the provider actor races
//! it against the step's cancellation token and reports `ABORTED`).
//!
//! # Why the history is shared, copy on write
//!
//! Every attempt carries the whole model-visible history ([`Messages`]), and a session's history
//! grows with every turn. Copied into each request, it would make turn 2,000 of a session cost
//! far more than turn 20 — in the runtime, before any provider saw it. [`Messages`] is shared: a
//! request takes the session's history with a constant-time clone. Appending to the session's
//! history copies it only if a request still holds the old one; by the time a step appends the
//! model's answer, its attempt has ended and the provider has dropped its request, so the
//! append is in place.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::event::{ToolCall, Usage};
use crate::failure::Failure;
use crate::future::BoxFuture;

pub(crate) mod actor;
mod generation;
pub(crate) mod message;

pub use generation::{Generation, GenerationError, MAX_TEMPERATURE};
pub use rein_event::message::{Message, Messages};

/// What an adapter author uses, in one import: `use rein_runtime::provider::prelude::*;`.
pub mod prelude {
    pub use super::{
        Adapter, ChunkSink, Completion, Generation, Message, Messages, Request, SinkClosed,
        ToolSpec,
    };
    pub use crate::event::{ToolCall, Usage};
    pub use crate::failure::Failure;
    pub use crate::future::BoxFuture;
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Its name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The JSON schema of its arguments, as offered to the model (default `{"type":"object"}`:
    /// any object).
    #[serde(default = "ToolSpec::any_object")]
    pub parameters: serde_json::Value,
}

impl ToolSpec {
    /// A tool whose arguments are any JSON object.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self { name: name.into(), description: description.into(), parameters: Self::any_object() }
    }

    /// The same tool with `parameters` as the JSON schema of its arguments.
    pub fn with_parameters(mut self, parameters: serde_json::Value) -> Self {
        self.parameters = parameters;
        self
    }

    /// The schema `{"type":"object"}`: any object.
    pub fn any_object() -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
}

/// One provider attempt's input. Two attempts of the same step have equal requests except for
/// `attempt`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    /// The session.
    pub session: String,
    /// The turn.
    pub turn: u32,
    /// The step.
    pub step: u32,
    /// The attempt, from 1.
    pub attempt: u32,
    /// The provider route.
    pub provider: String,
    /// The model.
    pub model: String,
    /// The model-visible history.
    pub messages: Messages,
    /// The tools offered.
    pub tools: Vec<ToolSpec>,
    /// The generation settings: the prompt's over the route's ([`Generation::or`]).
    #[serde(default, skip_serializing_if = "Generation::is_empty")]
    pub generation: Generation,
}

/// A successful attempt's outcome (its text is the concatenation of the streamed chunks).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Completion {
    /// Tool calls the model asked for.
    pub tool_calls: Vec<ToolCall>,
    /// Token usage, if reported.
    pub usage: Option<Usage>,
}

/// The chunk sink's receiving end is gone (the attempt's step ended): stop streaming.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the attempt's step no longer takes chunks")]
pub struct SinkClosed;

type Forward = dyn Fn(String) -> Result<(), SinkClosed> + Send + Sync;

/// Where an adapter streams an attempt's raw text chunks, in order. The runtime's sink forwards
/// each chunk to the attempt's step as a message; [`ChunkSink::channel`] makes one for testing
/// an adapter alone, [`ChunkSink::new`] one that hands each chunk to a function (what a program
/// that drives an adapter itself uses to take its chunks where they arrive).
#[derive(Clone)]
pub struct ChunkSink(Arc<Forward>);

impl std::fmt::Debug for ChunkSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChunkSink")
    }
}

impl ChunkSink {
    /// A sink that hands each chunk to `forward`, in the adapter's task, as it is sent; an
    /// error from `forward` is what [`ChunkSink::send`] answers.
    pub fn new(forward: impl Fn(String) -> Result<(), SinkClosed> + Send + Sync + 'static) -> Self {
        Self(Arc::new(forward))
    }

    /// A sink whose chunks arrive on the returned receiver.
    pub fn channel() -> (Self, tokio::sync::mpsc::UnboundedReceiver<String>) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        (Self::new(move |chunk| tx.send(chunk).map_err(|_| SinkClosed)), rx)
    }

    /// Streams one chunk; an error means nobody takes chunks any more (the attempt is over).
    pub fn send(&self, chunk: String) -> Result<(), SinkClosed> {
        (self.0)(chunk)
    }
}

/// A provider adapter: one call = one attempt.
///
/// An adapter that echoes the last user message word by word, failing its first attempt of
/// every step with a 503 (an error *is* an attempt's result: the waterfall decides what next):
///
/// ```
/// use std::sync::Arc;
/// use rein_runtime::prelude::*;
/// use rein_runtime::provider::prelude::*;
///
/// struct Echo;
///
/// impl Adapter for Echo {
///     fn call(&self, request: Request, chunks: ChunkSink) -> BoxFuture<'static, Result<Completion, Failure>> {
///         let last = request.messages.iter().rev().find_map(|m| match m {
///             Message::User { text } => Some(text.clone()),
///             _ => None,
///         });
///         Box::pin(async move {
///             if request.attempt == 1 {
///                 let failure = Failure::new("SERVER", "overloaded")
///                     .and_then(|f| f.with_status(503))
///                     .expect("a valid failure");
///                 return Err(failure);
///             }
///             for word in last.unwrap_or_default().split_inclusive(' ') {
///                 if chunks.send(word.to_owned()).is_err() {
///                     break; // the attempt is over (cancelled): stop streaming
///                 }
///             }
///             Ok(Completion::default())
///         })
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::builder()
///     .clock(Arc::new(VirtualClock::start()))
///     .route(Route::new("echo", Arc::new(Echo)).model("echo-1"))
///     .default_route_policy(RetryPolicy::default())
///     .build()
///     .await?;
/// let session = runtime.session("s1").await?;
/// // No plugin: nothing retries, the turn ends with the adapter's failure.
/// let outcome = session.ask("say it back").await?;
/// assert!(matches!(&outcome.reason, TurnEndReason::Error { failure } if failure.status() == Some(503)));
/// runtime.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub trait Adapter: Send + Sync + 'static {
    /// Runs one attempt, streaming chunks into `chunks` before resolving.
    ///
    /// The route's actor calls this and polls the future once in its handler: what the adapter
    /// does before its first `.await` runs on the route's mailbox, so it must not block there
    /// (do the network I/O behind an `.await`); the rest runs in a task of its own.
    fn call(
        &self,
        request: Request,
        chunks: ChunkSink,
    ) -> BoxFuture<'static, Result<Completion, Failure>>;
}
