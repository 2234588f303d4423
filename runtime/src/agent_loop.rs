//! The agent loop's decisions, as pure functions: what a step's end means for its turn, what a
//! successful attempt writes, when a manual retry applies.
//!
//! The actors (`session`, `turn`, `step`) only move messages, append events and wait; every
//! "what next" they face is decided here and table-tested below.
//!
//! A turn runs steps until one ends without tool calls (`completed`), a failure nobody recovers
//! ends it (`error`), it is cancelled (`aborted`), or a step that ran tools was the last one the
//! step limit allows (`max-steps`).

use crate::event::{AssistantMessage, CancelCause, TurnEndReason};
use crate::failure::Failure;
use crate::provider::Completion;

/// The code of a failure in the runtime's own machinery (a request that could not be built, a
/// log that refused an append, an actor that crashed). Not offered to the waterfall.
pub(crate) const RUNTIME_ERROR: &str = "RUNTIME_ERROR";

/// A failure of the runtime's own machinery (code [`RUNTIME_ERROR`]; not offered to the
/// waterfall).
pub(crate) fn runtime_failure(message: impl Into<String>) -> Failure {
    Failure::internal(RUNTIME_ERROR, message)
}

/// The default per-turn step limit.
pub const DEFAULT_MAX_STEPS: u32 = 32;

/// How a step ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum StepOutcome {
    /// The model answered without tool calls.
    Completed,
    /// The model called tools and every call got its result: the turn goes on.
    ToolsRan,
    /// A failure ended the step: nobody recovered it, a tool failed, or the runtime itself did.
    /// (A cancelled step ends with whatever it reached; its turn's cause decides.)
    Failed(Failure),
}

/// What the turn does after a step.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TurnDecision {
    /// Run this step next.
    NextStep(u32),
    /// End the turn.
    End(TurnEndReason),
}

/// What a step's outcome means for its turn. `cause`: why the turn was cancelled, if it was.
pub(crate) fn after_step(
    outcome: &StepOutcome,
    step: u32,
    max_steps: u32,
    cause: Option<&CancelCause>,
) -> TurnDecision {
    if let Some(cause) = cause {
        // Rule 1: a cancelled turn ends aborted, whatever the step concluded.
        return TurnDecision::End(TurnEndReason::Aborted { cause: cause.clone() });
    }
    match outcome {
        StepOutcome::Completed => TurnDecision::End(TurnEndReason::Completed),
        StepOutcome::ToolsRan if step >= max_steps => TurnDecision::End(TurnEndReason::MaxSteps),
        StepOutcome::ToolsRan => TurnDecision::NextStep(step + 1),
        StepOutcome::Failed(failure) => {
            TurnDecision::End(TurnEndReason::Error { failure: failure.clone() })
        }
    }
}

/// The `assistant/message` of a successful attempt: its text is the concatenation of *that
/// attempt's* chunks, never of an earlier failed one.
pub(crate) fn assistant_message(
    turn: u32,
    step: u32,
    text: String,
    completion: &Completion,
) -> AssistantMessage {
    AssistantMessage {
        turn,
        step,
        text,
        tool_calls: (!completion.tool_calls.is_empty()).then(|| completion.tool_calls.clone()),
        usage: completion.usage,
    }
}

/// Why a manual retry was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RetryRefused {
    /// The session has had no turn yet.
    #[error("nothing to retry: the session has had no turn")]
    NoTurn,
    /// The last turn completed.
    #[error("nothing to retry: turn {0} completed")]
    Completed(u32),
    /// A turn is running or queued.
    #[error("a turn is running or queued; retry applies to the last turn once it ended")]
    Busy,
}

/// Whether `Session::retry()` applies: the last turn ended and did not complete (an error, an
/// abort, the step limit, or a crash's interruption), and nothing runs or waits.
pub(crate) fn retry_allowed(
    last: Option<(u32, &TurnEndReason)>,
    busy: bool,
) -> Result<(), RetryRefused> {
    if busy {
        return Err(RetryRefused::Busy);
    }
    match last {
        None => Err(RetryRefused::NoTurn),
        Some((turn, TurnEndReason::Completed)) => Err(RetryRefused::Completed(turn)),
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{ToolCall, Usage};
    use serde_json::json;

    fn server() -> Failure {
        Failure::new("SERVER", "down").unwrap()
    }

    #[test]
    fn a_step_outcome_decides_the_turn() {
        use TurnDecision::{End, NextStep};
        let user = CancelCause::User;
        let disposed = CancelCause::Disposed;
        let cases: Vec<(StepOutcome, u32, u32, Option<&CancelCause>, TurnDecision)> = vec![
            (StepOutcome::Completed, 1, 32, None, End(TurnEndReason::Completed)),
            (StepOutcome::ToolsRan, 1, 32, None, NextStep(2)),
            (StepOutcome::ToolsRan, 31, 32, None, NextStep(32)),
            (StepOutcome::ToolsRan, 32, 32, None, End(TurnEndReason::MaxSteps)),
            (StepOutcome::ToolsRan, 1, 1, None, End(TurnEndReason::MaxSteps)),
            (StepOutcome::Completed, 1, 1, None, End(TurnEndReason::Completed)),
            (
                StepOutcome::Failed(server()),
                3,
                32,
                None,
                End(TurnEndReason::Error { failure: server() }),
            ),
            (
                StepOutcome::ToolsRan,
                1,
                32,
                Some(&user),
                End(TurnEndReason::Aborted { cause: user.clone() }),
            ),
            (
                StepOutcome::ToolsRan,
                1,
                32,
                Some(&disposed),
                End(TurnEndReason::Aborted { cause: disposed.clone() }),
            ),
            // Cancellation beats whatever the step concluded.
            (
                StepOutcome::Completed,
                1,
                32,
                Some(&user),
                End(TurnEndReason::Aborted { cause: user.clone() }),
            ),
            (
                StepOutcome::Failed(server()),
                1,
                32,
                Some(&disposed),
                End(TurnEndReason::Aborted { cause: disposed.clone() }),
            ),
        ];
        for (outcome, step, max, cause, expected) in cases {
            assert_eq!(
                after_step(&outcome, step, max, cause),
                expected,
                "{outcome:?} {step}/{max}"
            );
        }
    }

    #[test]
    fn the_message_is_built_from_the_attempts_chunks() {
        let call = ToolCall { id: "c1".into(), name: "echo".into(), arguments: json!({}) };
        let usage = Usage { input_tokens: 1, output_tokens: 2 };
        let with_calls = Completion { tool_calls: vec![call.clone()], usage: Some(usage) };
        let message = assistant_message(2, 3, "done".into(), &with_calls);
        assert_eq!(message.text, "done");
        assert_eq!((message.turn, message.step), (2, 3));
        assert_eq!(message.tool_calls, Some(vec![call]));
        assert_eq!(message.usage, Some(usage));

        let plain = assistant_message(1, 1, String::new(), &Completion::default());
        assert_eq!(plain.text, "");
        assert_eq!(plain.tool_calls, None, "no toolCalls field when there are none");
    }

    #[test]
    fn a_manual_retry_applies_to_a_last_turn_that_did_not_complete() {
        let error = TurnEndReason::Error { failure: server() };
        let aborted = TurnEndReason::Aborted { cause: CancelCause::User };
        type Case<'a> = (Option<(u32, &'a TurnEndReason)>, bool, Result<(), RetryRefused>);
        let cases: Vec<Case> = vec![
            (None, false, Err(RetryRefused::NoTurn)),
            (Some((1, &TurnEndReason::Completed)), false, Err(RetryRefused::Completed(1))),
            (Some((2, &error)), false, Ok(())),
            (Some((2, &aborted)), false, Ok(())),
            (Some((2, &TurnEndReason::MaxSteps)), false, Ok(())),
            (Some((2, &TurnEndReason::Interrupted)), false, Ok(())),
            (Some((2, &error)), true, Err(RetryRefused::Busy)),
        ];
        for (last, busy, expected) in cases {
            assert_eq!(retry_allowed(last, busy), expected, "{last:?} busy={busy}");
        }
    }
}
