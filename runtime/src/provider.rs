//! The provider boundary: what a request holds, what an adapter answers.
//!
//! An [`Adapter`] turns one [`Request`] into one attempt: it streams raw text chunks and then
//! resolves to a [`Completion`] or a [`Failure`]. It never retries; retries are the waterfall's.
//! Cancellation is by dropping the future (the provider actor races it against the turn's
//! cancellation token and reports `ABORTED`).

use serde::{Deserialize, Serialize};

use crate::event::{ToolCall, Usage};
use crate::failure::Failure;
use crate::store::BoxFuture;

pub mod actor;

/// One entry of the model-visible history (SPEC §3), folded from the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "camelCase")]
pub enum Message {
    /// A `user/message`.
    User {
        /// Its text.
        text: String,
    },
    /// An `assistant/message`.
    Assistant {
        /// Its text.
        text: String,
        /// The tool calls it asked for.
        #[serde(default, skip_serializing_if = "Vec::is_empty", rename = "toolCalls")]
        tool_calls: Vec<ToolCall>,
    },
    /// A `tool/result`.
    Tool {
        /// The call it answers.
        id: String,
        /// The output.
        output: String,
        /// Whether the tool failed.
        #[serde(rename = "isError")]
        is_error: bool,
    },
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
    pub messages: Vec<Message>,
    /// The tools offered.
    pub tools: Vec<ToolSpec>,
}

/// A successful attempt's outcome (its text is the concatenation of the streamed chunks).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Completion {
    /// Tool calls the model asked for.
    pub tool_calls: Vec<ToolCall>,
    /// Token usage, if reported.
    pub usage: Option<Usage>,
}

/// Where an adapter streams raw text chunks.
pub type ChunkSink = tokio::sync::mpsc::UnboundedSender<String>;

/// A provider adapter: one call = one attempt.
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
