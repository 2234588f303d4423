//! The conversation of a session log, turn by turn, as a person reads it.
//!
//! [`transcript`] folds a log into [`Transcript`]: each turn's user message, the assistant's
//! answers, its tool calls and results and the compactions, in log order, and how the turn
//! ended. Unlike the model-visible history (`history`), nothing is dropped: a compaction is
//! shown where it happened, not applied. Failed attempts, retries and diagnostics are not part of
//! it; the turn's [`panel`](crate::panel) holds them.
//!
//! A `user/message` belongs to the next turn that starts (the runtime writes a prompt's message
//! before its `turn/start`; a manual retry starts a turn without one). Messages after the last
//! `turn/start` that no turn took up are [`Transcript::queued`].

use serde_json::Value;

use crate::event::{Envelope, Event, TurnEndReason};

/// The conversation of one log.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Transcript {
    /// The session id (`session/start`), when the log has one.
    pub session: Option<String>,
    /// The turns, in order.
    pub turns: Vec<TurnTranscript>,
    /// User messages no turn has taken up yet.
    pub queued: Vec<String>,
}

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnTranscript {
    /// The turn.
    pub turn: u32,
    /// What was said and done, in log order.
    pub entries: Vec<Entry>,
    /// How it ended; `None` while the log ends before it does.
    pub ending: Option<TurnEndReason>,
}

/// One entry of a turn.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Entry {
    /// The user's message.
    User {
        /// What the user said.
        text: String,
    },
    /// The assistant's answer in a step (its tool calls follow as [`Entry::ToolCall`]s).
    Assistant {
        /// The step.
        step: u32,
        /// The text (may be empty when the step only calls tools).
        text: String,
    },
    /// A tool call.
    ToolCall {
        /// The step.
        step: u32,
        /// The call id.
        id: String,
        /// The tool.
        name: String,
        /// The arguments, as the model wrote them.
        arguments: Value,
    },
    /// A tool's result.
    ToolResult {
        /// The step.
        step: u32,
        /// The call id it answers.
        id: String,
        /// The output.
        output: String,
        /// Whether the tool failed.
        is_error: bool,
    },
    /// Compaction dropped `removed` model-visible events, keeping `kept`.
    Compacted {
        /// The step.
        step: u32,
        /// How many events were dropped.
        removed: usize,
        /// How many remain.
        kept: u64,
    },
}

/// The conversation of `log`.
pub fn transcript(log: &[Envelope]) -> Transcript {
    let mut out = Transcript::default();
    let mut open: Option<usize> = None;
    for envelope in log {
        match &envelope.event {
            Event::SessionStart(s) => out.session = Some(s.session.clone()),
            Event::UserMessage(m) => out.queued.push(m.text.clone()),
            Event::TurnStart(t) => {
                let entries =
                    out.queued.drain(..).map(|text| Entry::User { text }).collect::<Vec<_>>();
                out.turns.push(TurnTranscript { turn: t.turn, entries, ending: None });
                open = Some(out.turns.len() - 1);
            }
            Event::TurnEnd(end) => {
                if let Some(turn) = open.take().and_then(|i| out.turns.get_mut(i)) {
                    turn.ending = Some(end.reason.clone());
                }
            }
            event => {
                let Some(turn) = open.and_then(|i| out.turns.get_mut(i)) else { continue };
                if let Some(entry) = entry(event) {
                    turn.entries.push(entry);
                }
            }
        }
    }
    out
}

/// The entry an event inside a turn makes, if any.
fn entry(event: &Event) -> Option<Entry> {
    Some(match event {
        Event::AssistantMessage(m) => Entry::Assistant { step: m.step, text: m.text.clone() },
        Event::ToolCall(c) => Entry::ToolCall {
            step: c.step,
            id: c.id.clone(),
            name: c.name.clone(),
            arguments: c.arguments.clone(),
        },
        Event::ToolResult(r) => Entry::ToolResult {
            step: r.step,
            id: r.id.clone(),
            output: r.output.clone(),
            is_error: r.is_error,
        },
        Event::ContextCompacted(c) => {
            Entry::Compacted { step: c.step, removed: c.removed.len(), kept: c.kept }
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{
        AssistantMessage, CancelCause, SessionStart, ToolCallEvent, ToolResult, TurnEnd, TurnStart,
        UserMessage,
    };

    fn log(events: Vec<Event>) -> Vec<Envelope> {
        events
            .into_iter()
            .enumerate()
            .map(|(seq, event)| Envelope { seq: seq as u64, time: 0, event })
            .collect()
    }

    fn user(text: &str) -> Event {
        Event::UserMessage(UserMessage { text: text.into() })
    }

    fn end(turn: u32, reason: TurnEndReason) -> Event {
        Event::TurnEnd(TurnEnd { turn, reason })
    }

    #[test]
    fn user_messages_go_to_the_next_turn_and_the_rest_in_log_order() {
        let events = log(vec![
            Event::SessionStart(SessionStart { session: "s1".into(), format: 1 }),
            user("hello"),
            Event::TurnStart(TurnStart { turn: 1 }),
            Event::AssistantMessage(AssistantMessage {
                turn: 1,
                step: 1,
                text: String::new(),
                tool_calls: None,
                usage: None,
            }),
            Event::ToolCall(ToolCallEvent {
                turn: 1,
                step: 1,
                id: "c1".into(),
                name: "echo".into(),
                arguments: serde_json::json!({"text": "hi"}),
            }),
            Event::ToolResult(ToolResult {
                turn: 1,
                step: 1,
                id: "c1".into(),
                output: "hi".into(),
                is_error: true,
            }),
            end(1, TurnEndReason::Completed),
            // A manual retry: a turn without a user message.
            Event::TurnStart(TurnStart { turn: 2 }),
            user("queued while turn 2 runs"),
            end(2, TurnEndReason::Aborted { cause: CancelCause::User }),
            Event::TurnStart(TurnStart { turn: 3 }),
            user("never taken up"),
        ]);
        let t = transcript(&events);
        assert_eq!(t.session.as_deref(), Some("s1"));
        assert_eq!(t.turns.len(), 3);
        assert_eq!(
            t.turns[0].entries,
            [
                Entry::User { text: "hello".into() },
                Entry::Assistant { step: 1, text: String::new() },
                Entry::ToolCall {
                    step: 1,
                    id: "c1".into(),
                    name: "echo".into(),
                    arguments: serde_json::json!({"text": "hi"}),
                },
                Entry::ToolResult { step: 1, id: "c1".into(), output: "hi".into(), is_error: true },
            ]
        );
        assert_eq!(t.turns[0].ending, Some(TurnEndReason::Completed));
        assert_eq!(t.turns[1].entries, []);
        assert_eq!(t.turns[2].entries, [Entry::User { text: "queued while turn 2 runs".into() }]);
        assert_eq!(t.turns[2].ending, None, "the log ends before turn 3 does");
        assert_eq!(t.queued, ["never taken up"]);
    }
}
