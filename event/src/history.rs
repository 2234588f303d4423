//! The model-visible history: the fold that turns a session log into the messages a request is
//! built from (`docs/runtime-semantics.md`, "Events").
//!
//! Only `user/message`, `assistant/message`, `tool/call`, `tool/result` and `context/compacted`
//! enter it. Chunks (also those of the successful attempt: its text arrives once more, whole, in
//! `assistant/message`), retry events and diagnostics never do, so a retried request is built
//! from exactly the history the failed one was.
//!
//! # Why the fold keeps event seqs
//!
//! Compaction drops model-visible events by `seq` (`context/compacted.removed`), so the folded
//! state is the list of visible events with their seqs ([`History::visible`]), and
//! [`History::messages`] derives the provider's view from it.
//!
//! # Why tool calls come from `tool/call`
//!
//! `assistant/message.toolCalls` and the `tool/call` events that follow it say the same thing.
//! The messages take the calls from the `tool/call` events, attached to the assistant message of
//! the same turn and step (results of earlier calls may come in between — the step runs each
//! call before writing the next): then a compaction that drops a call (always with its result) drops it
//! from the model's view too, and the two can never disagree.
//!
//! # Why a turn's end answers its unanswered calls
//!
//! A turn cancelled (or failed, or interrupted by a crash) while a tool ran ends with a
//! `tool/call` that has no `tool/result`. Every chat API refuses a history in which an
//! assistant's tool call is not followed by its result, so the session's next request would fail
//! for good. At `turn/end` the messages therefore get, for each call of the turn still
//! unanswered, an error result ([`UNANSWERED`]). It exists only in the messages: the log is
//! never rewritten, and nothing new is appended.

use crate::event::{Envelope, Event, ToolCall};
use crate::message::{Message, Messages};
use crate::projection::Projection;

/// The registration key of [`HistoryProjection`].
pub const HISTORY: &str = "history";

/// The output of the error result a request carries for a tool call whose turn ended before
/// the call had a result (see the module docs).
pub const UNANSWERED: &str = "no result: the turn ended before this tool call finished";

/// One model-visible event, as folded.
#[derive(Debug, Clone, PartialEq)]
pub enum Visible {
    /// A `user/message`.
    User {
        /// Its text.
        text: String,
    },
    /// An `assistant/message` (its tool calls come from the `tool/call` events).
    Assistant {
        /// The turn.
        turn: u32,
        /// The step.
        step: u32,
        /// The text.
        text: String,
    },
    /// A `tool/call`.
    ToolCall {
        /// The turn.
        turn: u32,
        /// The step.
        step: u32,
        /// The call.
        call: ToolCall,
    },
    /// A `tool/result`.
    ToolResult {
        /// The call id it answers.
        id: String,
        /// The output.
        output: String,
        /// Whether the tool failed.
        is_error: bool,
    },
}

/// A model-visible event and the `seq` it has in the log.
#[derive(Debug, Clone, PartialEq)]
pub struct VisibleEvent {
    /// Its position in the log.
    pub seq: u64,
    /// What it says.
    pub visible: Visible,
}

/// The folded model-visible history of a session: the visible events, and the messages a
/// request carries, both kept current event by event.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    visible: Vec<VisibleEvent>,
    messages: Messages,
    /// Where the assistant message of the latest (turn, step) is in `messages` — the message its
    /// tool calls join, also when results of earlier calls of that step came in between.
    open: Option<(u32, u32, usize)>,
    /// The turn of the latest `context/compacted` and how many that turn wrote.
    compacted: Option<(u32, u32)>,
    /// The tool calls of the open turn that have no result yet: `(turn, call id)`.
    unanswered: Vec<(u32, String)>,
    /// The calls a `turn/end` left unanswered: `(seq of the turn/end, call id)`, in log order,
    /// so that a compaction's rebuild puts their error results back where they were.
    closed: Vec<(u64, String)>,
}

impl History {
    /// The model-visible events that remain (compacted ones removed), in log order.
    pub fn visible(&self) -> &[VisibleEvent] {
        &self.visible
    }

    /// How many model-visible events remain.
    pub fn len(&self) -> usize {
        self.visible.len()
    }

    /// Whether nothing model-visible remains.
    pub fn is_empty(&self) -> bool {
        self.visible.is_empty()
    }

    /// How many `context/compacted` events name `turn` (a compaction plugin's per-turn budget,
    /// read from the log so it survives a restart).
    pub fn compactions_in_turn(&self, turn: u32) -> u32 {
        match self.compacted {
            Some((t, count)) if t == turn => count,
            _ => 0,
        }
    }

    /// The messages a request carries: users, assistants (with the calls that followed them in
    /// the same turn and step), tool results. A constant-time clone (see [`Messages`]).
    pub fn messages(&self) -> Messages {
        self.messages.clone()
    }

    /// Adds one visible event's message to `messages`.
    fn push_message(
        messages: &mut Messages,
        open: &mut Option<(u32, u32, usize)>,
        visible: &Visible,
    ) {
        match visible {
            Visible::User { text } => {
                *open = None;
                messages.push(Message::User { text: text.clone() });
            }
            Visible::Assistant { turn, step, text } => {
                *open = Some((*turn, *step, messages.len()));
                messages.push(Message::Assistant { text: text.clone(), tool_calls: Vec::new() });
            }
            Visible::ToolCall { turn, step, call } => {
                let joined = match *open {
                    Some((t, s, index)) if (t, s) == (*turn, *step) => {
                        match messages.get_mut(index) {
                            Some(Message::Assistant { tool_calls, .. }) => {
                                tool_calls.push(call.clone());
                                true
                            }
                            _ => false,
                        }
                    }
                    _ => false,
                };
                if !joined {
                    *open = Some((*turn, *step, messages.len()));
                    messages.push(Message::Assistant {
                        text: String::new(),
                        tool_calls: vec![call.clone()],
                    });
                }
            }
            Visible::ToolResult { id, output, is_error } => {
                messages.push(Message::Tool {
                    id: id.clone(),
                    output: output.clone(),
                    is_error: *is_error,
                });
            }
        }
    }

    /// Folds one event (the pure fold behind [`HistoryProjection`]).
    pub fn fold(&mut self, event: &Envelope) {
        let visible = match &event.event {
            Event::UserMessage(m) => Visible::User { text: m.text.clone() },
            Event::AssistantMessage(m) => {
                Visible::Assistant { turn: m.turn, step: m.step, text: m.text.clone() }
            }
            Event::ToolCall(c) => Visible::ToolCall {
                turn: c.turn,
                step: c.step,
                call: ToolCall {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                },
            },
            Event::ToolResult(r) => Visible::ToolResult {
                id: r.id.clone(),
                output: r.output.clone(),
                is_error: r.is_error,
            },
            Event::TurnEnd(end) => {
                let (ended, open): (Vec<_>, Vec<_>) = std::mem::take(&mut self.unanswered)
                    .into_iter()
                    .partition(|(t, _)| *t == end.turn);
                self.unanswered = open;
                for (_, id) in ended {
                    Self::push_unanswered(&mut self.messages, &mut self.open, &id);
                    self.closed.push((event.seq, id));
                }
                return;
            }
            Event::ContextCompacted(c) => {
                self.visible.retain(|v| !c.removed.contains(&v.seq));
                let calls: std::collections::HashSet<&str> = self
                    .visible
                    .iter()
                    .filter_map(|v| match &v.visible {
                        Visible::ToolCall { call, .. } => Some(call.id.as_str()),
                        _ => None,
                    })
                    .collect();
                self.closed.retain(|(_, id)| calls.contains(id.as_str()));
                // Rare: the messages are rebuilt from what remains.
                self.messages = Messages::new();
                self.open = None;
                let mut closed = self.closed.iter().peekable();
                for entry in &self.visible {
                    while let Some((_, id)) = closed.next_if(|(seq, _)| *seq < entry.seq) {
                        Self::push_unanswered(&mut self.messages, &mut self.open, id);
                    }
                    Self::push_message(&mut self.messages, &mut self.open, &entry.visible);
                }
                for (_, id) in closed {
                    Self::push_unanswered(&mut self.messages, &mut self.open, id);
                }
                let count = self.compactions_in_turn(c.turn).saturating_add(1);
                self.compacted = Some((c.turn, count));
                return;
            }
            _ => return,
        };
        match &visible {
            Visible::ToolCall { turn, call, .. } => self.unanswered.push((*turn, call.id.clone())),
            Visible::ToolResult { id, .. } => self.unanswered.retain(|(_, open)| open != id),
            _ => {}
        }
        Self::push_message(&mut self.messages, &mut self.open, &visible);
        self.visible.push(VisibleEvent { seq: event.seq, visible });
    }

    /// Adds the error result of a call its turn left unanswered.
    fn push_unanswered(messages: &mut Messages, open: &mut Option<(u32, u32, usize)>, id: &str) {
        let result = Visible::ToolResult {
            id: id.to_owned(),
            output: UNANSWERED.to_owned(),
            is_error: true,
        };
        Self::push_message(messages, open, &result);
    }

    /// Folds a whole log.
    pub fn from_events<'a>(events: impl IntoIterator<Item = &'a Envelope>) -> Self {
        let mut history = Self::default();
        for event in events {
            history.fold(event);
        }
        history
    }
}

/// The model-visible history as a session-log projection, registered under [`HISTORY`].
#[derive(Debug, Clone, Copy, Default)]
pub struct HistoryProjection;

impl Projection for HistoryProjection {
    type State = History;

    fn key(&self) -> &'static str {
        HISTORY
    }

    fn fold(&self, state: &mut History, event: &Envelope) {
        state.fold(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::*;
    use crate::failure::Failure;
    use serde_json::json;

    fn log(events: Vec<Event>) -> Vec<Envelope> {
        events
            .into_iter()
            .enumerate()
            .map(|(seq, event)| Envelope { seq: seq as u64, time: 0, event })
            .collect()
    }

    fn call(id: &str) -> ToolCall {
        ToolCall { id: id.into(), name: "echo".into(), arguments: json!({"text": id}) }
    }

    fn user(text: &str) -> Event {
        Event::UserMessage(UserMessage { text: text.into() })
    }

    fn assistant(turn: u32, step: u32, text: &str, calls: &[&str]) -> Event {
        Event::AssistantMessage(AssistantMessage {
            turn,
            step,
            text: text.into(),
            tool_calls: (!calls.is_empty()).then(|| calls.iter().map(|c| call(c)).collect()),
            usage: None,
        })
    }

    fn tool_call(turn: u32, step: u32, id: &str) -> Event {
        let c = call(id);
        Event::ToolCall(ToolCallEvent {
            turn,
            step,
            id: c.id,
            name: c.name,
            arguments: c.arguments,
        })
    }

    fn tool_result(turn: u32, step: u32, id: &str) -> Event {
        Event::ToolResult(ToolResult {
            turn,
            step,
            id: id.into(),
            output: format!("out {id}"),
            is_error: false,
        })
    }

    fn end(turn: u32) -> Event {
        Event::TurnEnd(TurnEnd {
            turn,
            reason: TurnEndReason::Aborted { cause: CancelCause::User },
        })
    }

    fn unanswered(id: &str) -> Message {
        Message::Tool { id: id.into(), output: UNANSWERED.into(), is_error: true }
    }

    fn noise() -> Vec<Event> {
        vec![
            Event::RequestStart(RequestStart {
                turn: 1,
                step: 1,
                attempt: 1,
                provider: "p".into(),
                model: "m".into(),
            }),
            Event::AssistantChunk(AssistantChunk {
                turn: 1,
                step: 1,
                attempt: 1,
                text: "junk".into(),
            }),
            Event::RequestError(RequestError {
                turn: 1,
                step: 1,
                attempt: 1,
                provider: "p".into(),
                failure: Failure::new("SERVER", "down").unwrap(),
            }),
            Event::PluginCrashed(PluginCrashed {
                plugin: "x".into(),
                error: "e".into(),
                restarts: 1,
            }),
            Event::AgentIdle(AgentIdle {}),
        ]
    }

    #[test]
    fn the_fold_keeps_only_model_visible_events_and_joins_calls_to_their_message() {
        let cases: Vec<(&str, Vec<Event>, Vec<Message>)> = vec![
            ("empty", vec![], vec![]),
            ("noise only", noise(), vec![]),
            (
                "user then answer, with failed chunks in between",
                [vec![user("hi")], noise(), vec![assistant(1, 1, "hello", &[])]].concat(),
                vec![
                    Message::User { text: "hi".into() },
                    Message::Assistant { text: "hello".into(), tool_calls: vec![] },
                ],
            ),
            (
                "tool calls join the assistant message of their step",
                vec![
                    user("hi"),
                    assistant(1, 1, "", &["a", "b"]),
                    tool_call(1, 1, "a"),
                    tool_result(1, 1, "a"),
                    tool_call(1, 1, "b"),
                    tool_result(1, 1, "b"),
                    assistant(1, 2, "done", &[]),
                ],
                vec![
                    Message::User { text: "hi".into() },
                    Message::Assistant { text: "".into(), tool_calls: vec![call("a"), call("b")] },
                    Message::Tool { id: "a".into(), output: "out a".into(), is_error: false },
                    Message::Tool { id: "b".into(), output: "out b".into(), is_error: false },
                    Message::Assistant { text: "done".into(), tool_calls: vec![] },
                ],
            ),
            (
                "a call of a later step starts its own message",
                vec![
                    assistant(1, 1, "t", &["a"]),
                    tool_call(1, 1, "a"),
                    tool_result(1, 1, "a"),
                    tool_call(1, 2, "b"),
                ],
                vec![
                    Message::Assistant { text: "t".into(), tool_calls: vec![call("a")] },
                    Message::Tool { id: "a".into(), output: "out a".into(), is_error: false },
                    Message::Assistant { text: "".into(), tool_calls: vec![call("b")] },
                ],
            ),
            (
                "calls made back to back join one message",
                vec![
                    assistant(1, 1, "t", &["a", "b"]),
                    tool_call(1, 1, "a"),
                    tool_call(1, 1, "b"),
                    tool_result(1, 1, "a"),
                ],
                vec![
                    Message::Assistant { text: "t".into(), tool_calls: vec![call("a"), call("b")] },
                    Message::Tool { id: "a".into(), output: "out a".into(), is_error: false },
                ],
            ),
            (
                "a call whose message was compacted away stands alone",
                vec![
                    user("u"),
                    assistant(1, 1, "t", &["a"]),
                    tool_call(1, 1, "a"),
                    tool_result(1, 1, "a"),
                    Event::ContextCompacted(ContextCompacted {
                        turn: 2,
                        step: 1,
                        removed: vec![1],
                        kept: 3,
                    }),
                ],
                vec![
                    Message::User { text: "u".into() },
                    Message::Assistant { text: "".into(), tool_calls: vec![call("a")] },
                    Message::Tool { id: "a".into(), output: "out a".into(), is_error: false },
                ],
            ),
            (
                "compaction drops exactly the removed seqs",
                vec![
                    user("one"),
                    assistant(1, 1, "r1", &[]),
                    user("two"),
                    Event::ContextCompacted(ContextCompacted {
                        turn: 2,
                        step: 1,
                        removed: vec![0, 1, 99],
                        kept: 1,
                    }),
                    assistant(2, 1, "r2", &[]),
                ],
                vec![
                    Message::User { text: "two".into() },
                    Message::Assistant { text: "r2".into(), tool_calls: vec![] },
                ],
            ),
            (
                "a turn that ended while a tool ran answers its unanswered calls, before the next turn",
                vec![
                    user("u"),
                    assistant(1, 1, "t", &["a", "b"]),
                    tool_call(1, 1, "a"),
                    tool_result(1, 1, "a"),
                    tool_call(1, 1, "b"),
                    end(1),
                    user("again"),
                ],
                vec![
                    Message::User { text: "u".into() },
                    Message::Assistant { text: "t".into(), tool_calls: vec![call("a"), call("b")] },
                    Message::Tool { id: "a".into(), output: "out a".into(), is_error: false },
                    unanswered("b"),
                    Message::User { text: "again".into() },
                ],
            ),
            (
                "an open turn's unanswered call waits for its result",
                vec![user("u"), assistant(1, 1, "t", &["a"]), tool_call(1, 1, "a")],
                vec![
                    Message::User { text: "u".into() },
                    Message::Assistant { text: "t".into(), tool_calls: vec![call("a")] },
                ],
            ),
            (
                "a compaction keeps an unanswered call's error result in its place",
                vec![
                    user("one"),
                    assistant(1, 1, "r1", &[]),
                    user("two"),
                    tool_call(2, 1, "a"),
                    end(2),
                    user("three"),
                    Event::ContextCompacted(ContextCompacted {
                        turn: 3,
                        step: 1,
                        removed: vec![0, 1],
                        kept: 3,
                    }),
                ],
                vec![
                    Message::User { text: "two".into() },
                    Message::Assistant { text: "".into(), tool_calls: vec![call("a")] },
                    unanswered("a"),
                    Message::User { text: "three".into() },
                ],
            ),
            (
                "a compaction that drops the unanswered call drops its error result",
                vec![
                    user("one"),
                    tool_call(1, 1, "a"),
                    end(1),
                    user("two"),
                    Event::ContextCompacted(ContextCompacted {
                        turn: 2,
                        step: 1,
                        removed: vec![0, 1],
                        kept: 1,
                    }),
                ],
                vec![Message::User { text: "two".into() }],
            ),
        ];
        for (name, events, expected) in cases {
            let history = History::from_events(&log(events));
            assert_eq!(history.messages(), expected, "{name}");
        }
    }

    #[test]
    fn compactions_are_counted_per_turn() {
        let compacted = |turn: u32| {
            Event::ContextCompacted(ContextCompacted { turn, step: 1, removed: vec![], kept: 0 })
        };
        let history = |events: Vec<Event>| History::from_events(&log(events));
        let cases: Vec<(Vec<Event>, [u32; 3])> = vec![
            (vec![], [0, 0, 0]),
            (vec![user("a"), compacted(1)], [1, 0, 0]),
            (vec![compacted(1), compacted(1)], [2, 0, 0]),
            (vec![compacted(1), compacted(2)], [0, 1, 0]),
            (vec![compacted(1), compacted(2), compacted(2), user("b")], [0, 2, 0]),
        ];
        for (events, counts) in cases {
            let h = history(events);
            let got = [1, 2, 3].map(|turn| h.compactions_in_turn(turn));
            assert_eq!(got, counts);
        }
    }

    #[test]
    fn the_visible_events_keep_their_seqs() {
        let events = log(vec![user("a"), Event::AgentIdle(AgentIdle {}), user("b")]);
        let history = History::from_events(&events);
        let seqs: Vec<u64> = history.visible().iter().map(|v| v.seq).collect();
        assert_eq!(seqs, [0, 2]);
        assert_eq!(history.len(), 2);
    }

    #[test]
    fn the_projection_folds_like_the_history() {
        let events = log(vec![user("a"), assistant(1, 1, "b", &[])]);
        let mut state = History::default();
        for e in &events {
            HistoryProjection.fold(&mut state, e);
        }
        assert_eq!(state, History::from_events(&events));
        assert_eq!(HistoryProjection.key(), "history");
    }
}
