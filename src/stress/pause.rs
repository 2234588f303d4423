//! `pause`: the tool a stress run offers when its answers call tools (`--tool-rate`). A call
//! waits `--tool-ms` (ended early by the turn's cancellation) and answers `paused N ms`: a tool
//! with a duration, so a crash of the process can land while a tool runs.

use std::time::Duration;

use serde_json::Value;

use crate::runtime::BoxFuture;
use crate::runtime::provider::ToolSpec;
use crate::runtime::tool::{Tool, ToolOutcome};
use tokio_util::sync::CancellationToken;

/// The tool's name.
pub(crate) const NAME: &str = "pause";

/// Waits its duration, then answers.
pub(crate) struct Pause {
    takes: Duration,
}

impl Pause {
    /// A `pause` whose calls take `takes`.
    pub(crate) fn new(takes: Duration) -> Self {
        Self { takes }
    }
}

impl Tool for Pause {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(NAME, "Waits a moment, then says how long it waited.")
    }

    fn call(
        &self,
        _arguments: Value,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, ToolOutcome> {
        let takes = self.takes;
        Box::pin(async move {
            tokio::select! {
                () = tokio::time::sleep(takes) => {}
                () = cancel.cancelled() => return ToolOutcome::Error("pause: cancelled".to_owned()),
            }
            ToolOutcome::Output(format!("paused {} ms", takes.as_millis()))
        })
    }
}
