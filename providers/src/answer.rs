//! [`Assembled`]: a finished streamed answer, as every adapter's stream assembles it — what the
//! scrubber cleans, the telemetry span records, and the runtime gets (its [`Completion`]).

use rein_runtime::provider::Completion;

/// A finished answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Assembled {
    /// The answer text (the concatenation of the streamed text deltas).
    pub text: String,
    /// The reasoning text (empty for models that do not reason aloud): never streamed as answer
    /// text, never sent back.
    pub reasoning: String,
    /// The tool calls and the usage, as the runtime takes them.
    pub completion: Completion,
    /// Why the model stopped (`stop`, `length`, `tool_calls`, `end_turn`, `tool_use`…), if it
    /// said.
    pub finish_reason: Option<String>,
    /// The model that answered, if the stream named it.
    pub response_model: Option<String>,
}
