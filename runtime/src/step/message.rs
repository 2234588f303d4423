//! The messages of a step actor: what its attempt, its chunks, the waterfall and its tool calls
//! report back (each a task or another actor that holds the step's address).

use crate::event::LlmRetryStarted;
use crate::provider::message::AttemptResult;
use crate::tool::ToolOutcome;
use crate::waterfall::Resolution;

/// A message to a step actor.
pub(crate) enum StepMsg {
    /// Chunks of attempt `attempt` are waiting in its [`PendingChunks`](super::chunks::PendingChunks).
    Chunks { attempt: u32 },
    /// Attempt `attempt` ended.
    AttemptDone { attempt: u32, result: AttemptResult },
    /// The waterfall answered the failure of attempt `attempt`.
    Resolved { attempt: u32, resolution: Resolution },
    /// The rest of a resumed retry's wait, after attempt `attempt`, elapsed: append `started`.
    Waited { attempt: u32, started: LlmRetryStarted },
    /// Tool call `index` of the successful attempt ended.
    ToolDone { index: usize, result: ToolOutcome },
}
