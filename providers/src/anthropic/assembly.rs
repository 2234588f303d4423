//! [`Assembler`]: folds the events of a Messages stream into one answer ([`Assembled`]).
//!
//! Pure: one event's `data` in, the text to stream (if any) out; at `message_stop`, the answer
//! or a typed failure. Each event's `type` is in its data (the SSE `event:` line says the same
//! and is not read). What each event does:
//!
//! - `message_start`: the model that answers, the input usage (`input_tokens` plus the cache's
//!   `cache_creation_input_tokens` and `cache_read_input_tokens`: every token of the prompt). It
//!   comes first: any content before it is not the protocol. Only one.
//! - `content_block_start {index, content_block}`: opens block `index` — `text` (its initial
//!   text streamed, if any), `tool_use {id, name, input}`, `thinking`, or another kind, whose
//!   deltas are ignored (server tools, redacted thinking). An index opened twice is malformed.
//! - `content_block_delta {index, delta}`: `text_delta` streams its text; `input_json_delta`
//!   appends its `partial_json` to the tool call's input; `thinking_delta` goes to the
//!   reasoning, never streamed (like DeepSeek's reasoning); other delta kinds (`signature_delta`,
//!   `citations_delta`) are ignored. A delta for a block that never started, or of the wrong kind
//!   (text for a tool call), is malformed.
//! - `content_block_stop`: nothing to do (the block's content is what its deltas said).
//! - `message_delta {delta: {stop_reason}, usage}`: the stop reason; the usage's counts, which
//!   are cumulative, replace the earlier ones.
//! - `message_stop`: the end marker ([`Fed::End`]).
//! - `ping`, and event types this adapter does not know: nothing (the API may add types).
//! - `error {error}`: the in-stream error, classified ([`classify::stream_error`]).
//!
//! At the end, each tool call's input is parsed as JSON (no delta: the start block's `input`,
//! else `{}`): malformed JSON, or a call without an id or a name, is `PROVIDER_ERROR` (naming the
//! stop reason, `max_tokens` cuts a call short); text that is empty or only whitespace and no
//! tool call is `EMPTY_RESPONSE`, naming the stop reason.

use std::collections::BTreeMap;

use rein_runtime::event::{ToolCall, Usage};
use rein_runtime::failure::{self, Failure};
use rein_runtime::provider::Completion;
use serde::Deserialize;
use serde_json::Value;

use super::classify;
use crate::answer::Assembled;
use crate::classify::{malformed, typed};
use crate::http::{Decoder, Fed};
use crate::sse::Frame;

/// One streamed message being assembled.
#[derive(Debug)]
pub struct Assembler {
    label: String,
    started: bool,
    blocks: BTreeMap<u64, Block>,
    text: String,
    reasoning: String,
    usage: Counts,
    stop_reason: Option<String>,
    model: Option<String>,
}

/// A content block, as far as it arrived.
#[derive(Debug)]
enum Block {
    Text,
    ToolUse { id: String, name: String, input: Option<Value>, json: String },
    Thinking,
    Other,
}

/// The usage counts as the stream reported them (each the latest value seen).
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    input: Option<u64>,
    cache_creation: Option<u64>,
    cache_read: Option<u64>,
    output: Option<u64>,
}

impl Counts {
    fn update(&mut self, usage: &WireUsage) {
        let replace = |old: &mut Option<u64>, new: Option<u64>| {
            if new.is_some() {
                *old = new;
            }
        };
        replace(&mut self.input, usage.input_tokens);
        replace(&mut self.cache_creation, usage.cache_creation_input_tokens);
        replace(&mut self.cache_read, usage.cache_read_input_tokens);
        replace(&mut self.output, usage.output_tokens);
    }

    fn usage(self) -> Option<Usage> {
        let input = [self.input, self.cache_creation, self.cache_read];
        if input.iter().all(Option::is_none) && self.output.is_none() {
            return None;
        }
        Some(Usage {
            input_tokens: input.iter().flatten().fold(0u64, |sum, n| sum.saturating_add(*n)),
            output_tokens: self.output.unwrap_or(0),
        })
    }
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: u64,
        content_block: StartBlock,
    },
    ContentBlockDelta {
        index: u64,
        delta: BlockDelta,
    },
    ContentBlockStop {},
    MessageDelta {
        delta: MessageDeltaBody,
        usage: Option<WireUsage>,
    },
    MessageStop {},
    Ping {},
    Error {
        error: Value,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct StartMessage {
    model: Option<String>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StartBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        #[serde(default)]
        id: String,
        #[serde(default)]
        name: String,
        input: Option<Value>,
    },
    Thinking {},
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct MessageDeltaBody {
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    output_tokens: Option<u64>,
}

impl Assembler {
    /// An empty message from provider `label` (how failures name it).
    pub fn new(label: impl Into<String>) -> Self {
        Self {
            label: label.into(),
            started: false,
            blocks: BTreeMap::new(),
            text: String::new(),
            reasoning: String::new(),
            usage: Counts::default(),
            stop_reason: None,
            model: None,
        }
    }

    /// Folds one event's `data`: the text to stream, nothing, or the end.
    pub fn feed(&mut self, data: &str) -> Result<Fed, Failure> {
        let event: Event = serde_json::from_str(data)
            .map_err(|e| self.malformed(&format!("stream event is not a Messages event ({e})")))?;
        match event {
            Event::Error { error } => Err(classify::stream_error(&self.label, &error)),
            Event::Ping {} | Event::Unknown => Ok(Fed::Nothing),
            Event::MessageStart { message } => {
                if self.started {
                    return Err(self.malformed("a second message_start"));
                }
                self.started = true;
                self.model = message.model.filter(|m| !m.is_empty());
                if let Some(usage) = &message.usage {
                    self.usage.update(usage);
                }
                Ok(Fed::Nothing)
            }
            _ if !self.started => {
                let kind = serde_json::from_str::<Value>(data)
                    .ok()
                    .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_owned))
                    .unwrap_or_default();
                Err(self.malformed(&format!("{kind} before message_start")))
            }
            Event::ContentBlockStart { index, content_block } => self.start(index, content_block),
            Event::ContentBlockDelta { index, delta } => self.delta(index, delta),
            Event::ContentBlockStop {} => Ok(Fed::Nothing),
            Event::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.stop_reason.filter(|r| !r.is_empty()) {
                    self.stop_reason = Some(reason);
                }
                if let Some(usage) = &usage {
                    self.usage.update(usage);
                }
                Ok(Fed::Nothing)
            }
            Event::MessageStop {} => Ok(Fed::End),
        }
    }

    fn start(&mut self, index: u64, block: StartBlock) -> Result<Fed, Failure> {
        if self.blocks.contains_key(&index) {
            return Err(self.malformed(&format!("content block #{index} started twice")));
        }
        let (block, text) = match block {
            StartBlock::Text { text } => (Block::Text, text),
            StartBlock::ToolUse { id, name, input } => {
                (Block::ToolUse { id, name, input, json: String::new() }, String::new())
            }
            StartBlock::Thinking {} => (Block::Thinking, String::new()),
            StartBlock::Other => (Block::Other, String::new()),
        };
        self.blocks.insert(index, block);
        Ok(self.stream(text))
    }

    fn delta(&mut self, index: u64, delta: BlockDelta) -> Result<Fed, Failure> {
        let Some(block) = self.blocks.get_mut(&index) else {
            return Err(
                self.malformed(&format!("a delta for content block #{index}, which never started"))
            );
        };
        match (block, delta) {
            (Block::Text, BlockDelta::TextDelta { text }) => Ok(self.stream(text)),
            (Block::ToolUse { json, .. }, BlockDelta::InputJsonDelta { partial_json }) => {
                json.push_str(&partial_json);
                Ok(Fed::Nothing)
            }
            (Block::Thinking, BlockDelta::ThinkingDelta { thinking }) => {
                self.reasoning.push_str(&thinking);
                Ok(Fed::Nothing)
            }
            (Block::Other, _) | (_, BlockDelta::Other) => Ok(Fed::Nothing),
            (block, delta) => {
                let (block, delta) = (block.kind(), delta.kind());
                Err(self.malformed(&format!("a {delta} for {block} block #{index}")))
            }
        }
    }

    /// Streams `text` (nothing when empty) and keeps it.
    fn stream(&mut self, text: String) -> Fed {
        if text.is_empty() {
            return Fed::Nothing;
        }
        self.text.push_str(&text);
        Fed::Text(text)
    }

    fn malformed(&self, detail: &str) -> Failure {
        malformed(&self.label, detail)
    }

    /// The answer so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The finished answer, at `message_stop`.
    pub fn finish(self) -> Result<Assembled, Failure> {
        let label = &self.label;
        let why = match &self.stop_reason {
            Some(reason) => format!(" (stop_reason: {reason})"),
            None => String::new(),
        };
        let mut tool_calls = Vec::new();
        for (index, block) in self.blocks {
            let Block::ToolUse { id, name, input, json } = block else { continue };
            if id.is_empty() {
                return Err(malformed(label, &format!("tool call #{index} has no id")));
            }
            if name.is_empty() {
                return Err(malformed(label, &format!("tool call #{index} ({id}) has no name")));
            }
            let arguments = if json.trim().is_empty() {
                input.unwrap_or_else(|| Value::Object(serde_json::Map::new()))
            } else {
                serde_json::from_str(&json).map_err(|e| {
                    let detail =
                        format!("the input of tool call `{name}` ({id}) is not JSON ({e}){why}");
                    malformed(label, &detail)
                })?
            };
            tool_calls.push(ToolCall { id, name, arguments });
        }
        if self.text.trim().is_empty() && tool_calls.is_empty() {
            let message = format!("{label} answered with no content and no tool calls{why}");
            return Err(typed(failure::EMPTY_RESPONSE, message));
        }
        Ok(Assembled {
            text: self.text,
            reasoning: self.reasoning,
            completion: Completion { tool_calls, usage: self.usage.usage() },
            finish_reason: self.stop_reason,
            response_model: self.model,
        })
    }
}

impl Block {
    fn kind(&self) -> &'static str {
        match self {
            Block::Text => "text",
            Block::ToolUse { .. } => "tool_use",
            Block::Thinking => "thinking",
            Block::Other => "other",
        }
    }
}

impl BlockDelta {
    fn kind(&self) -> &'static str {
        match self {
            BlockDelta::TextDelta { .. } => "text_delta",
            BlockDelta::InputJsonDelta { .. } => "input_json_delta",
            BlockDelta::ThinkingDelta { .. } => "thinking_delta",
            BlockDelta::Other => "other delta",
        }
    }
}

impl Decoder for Assembler {
    fn feed(&mut self, frame: Frame) -> Result<Fed, Failure> {
        match frame {
            Frame::Data(data) => Assembler::feed(self, &data),
            // Not a Messages event: the stream is not the protocol.
            Frame::Done => Err(self.malformed("a [DONE] sentinel (an OpenAI-compatible stream?)")),
        }
    }

    fn finish(self) -> Result<Assembled, Failure> {
        Assembler::finish(self)
    }

    fn closed(&self) -> Failure {
        crate::classify::stream_closed(&self.label, "message_stop")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn start(model: &str, input: u64) -> Value {
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "content": [], "model": model, "stop_reason": null,
            "usage": {"input_tokens": input, "output_tokens": 1}}})
    }

    fn text_block(index: u64) -> Value {
        json!({"type": "content_block_start", "index": index,
               "content_block": {"type": "text", "text": ""}})
    }

    fn text(index: u64, text: &str) -> Value {
        json!({"type": "content_block_delta", "index": index,
               "delta": {"type": "text_delta", "text": text}})
    }

    fn tool_block(index: u64, id: &str, name: &str) -> Value {
        json!({"type": "content_block_start", "index": index,
               "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}})
    }

    fn json_delta(index: u64, partial: &str) -> Value {
        json!({"type": "content_block_delta", "index": index,
               "delta": {"type": "input_json_delta", "partial_json": partial}})
    }

    fn stop(index: u64) -> Value {
        json!({"type": "content_block_stop", "index": index})
    }

    fn message_delta(reason: &str, output: u64) -> Value {
        json!({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": null},
               "usage": {"output_tokens": output}})
    }

    fn message_stop() -> Value {
        json!({"type": "message_stop"})
    }

    /// Feeds every event: the streamed texts, whether the end marker came, and the outcome.
    fn run(events: &[Value]) -> (Vec<String>, Result<Assembled, Failure>) {
        let mut assembler = Assembler::new("Anthropic");
        let mut texts = vec![];
        for event in events {
            match assembler.feed(&event.to_string()) {
                Ok(Fed::Text(text)) => texts.push(text),
                Ok(Fed::Nothing) => {}
                Ok(Fed::End) => return (texts, assembler.finish()),
                Err(failure) => return (texts, Err(failure)),
            }
        }
        (texts, Err(Decoder::closed(&assembler)))
    }

    #[test]
    fn a_text_answer_streams_with_its_usage_model_and_stop_reason() {
        let (texts, outcome) = run(&[
            start("claude-haiku-4-5-20251001", 25),
            text_block(0),
            json!({"type": "ping"}),
            text(0, "Hel"),
            text(0, ""),
            text(0, "lo"),
            stop(0),
            json!({"type": "some_future_event", "x": 1}),
            message_delta("end_turn", 15),
            message_stop(),
        ]);
        assert_eq!(texts, ["Hel", "lo"]);
        let answer = outcome.unwrap();
        assert_eq!(answer.text, "Hello");
        assert_eq!(answer.completion.usage, Some(Usage { input_tokens: 25, output_tokens: 15 }));
        assert_eq!(answer.finish_reason.as_deref(), Some("end_turn"));
        assert_eq!(answer.response_model.as_deref(), Some("claude-haiku-4-5-20251001"));
    }

    #[test]
    fn tool_use_blocks_assemble_their_input_from_json_deltas() {
        let (texts, outcome) = run(&[
            start("m", 10),
            text_block(0),
            text(0, "Let me check."),
            stop(0),
            tool_block(1, "toolu_a", "echo"),
            json_delta(1, ""),
            json_delta(1, "{\"text\": "),
            json_delta(1, "\"hi\"}"),
            stop(1),
            tool_block(2, "toolu_b", "now"),
            stop(2),
            message_delta("tool_use", 40),
            message_stop(),
        ]);
        assert_eq!(texts, ["Let me check."]);
        let answer = outcome.unwrap();
        assert_eq!(
            answer.completion.tool_calls,
            [
                ToolCall {
                    id: "toolu_a".into(),
                    name: "echo".into(),
                    arguments: json!({"text": "hi"})
                },
                ToolCall { id: "toolu_b".into(), name: "now".into(), arguments: json!({}) },
            ]
        );
        assert_eq!(answer.finish_reason.as_deref(), Some("tool_use"));
    }

    #[test]
    fn thinking_is_reasoning_never_streamed_and_unknown_blocks_are_ignored() {
        let (texts, outcome) = run(&[
            start("m", 1),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Hmm."}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQB"}}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "xx"}}),
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}}),
            json_delta(2, "{\"query\": \"x\"}"),
            json!({"type": "content_block_start", "index": 3, "content_block": {"type": "text", "text": "Hi"}}),
            text(3, "!"),
            message_delta("end_turn", 3),
            message_stop(),
        ]);
        assert_eq!(texts, ["Hi", "!"], "a start block's own text streams too");
        let answer = outcome.unwrap();
        assert_eq!((answer.text.as_str(), answer.reasoning.as_str()), ("Hi!", "Hmm."));
        assert!(answer.completion.tool_calls.is_empty(), "a server tool is not ours to run");
    }

    #[test]
    fn usage_adds_the_cache_and_later_counts_replace_earlier_ones() {
        let start = json!({"type": "message_start", "message": {"model": "m", "usage": {
            "input_tokens": 5, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 2000,
            "output_tokens": 1}}});
        let (_, outcome) = run(&[
            start,
            text_block(0),
            text(0, "ok"),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                   "usage": {"output_tokens": 9, "input_tokens": 6}}),
            message_stop(),
        ]);
        assert_eq!(
            outcome.unwrap().completion.usage,
            Some(Usage { input_tokens: 2106, output_tokens: 9 })
        );
        let (_, outcome) = run(&[
            json!({"type": "message_start", "message": {}}),
            text_block(0),
            text(0, "ok"),
            message_stop(),
        ]);
        assert_eq!(outcome.unwrap().completion.usage, None, "no counts, no usage");
    }

    #[test]
    fn what_is_not_the_protocol_is_a_typed_failure() {
        let cases: Vec<(Vec<Value>, &str, &str)> = vec![
            (
                vec![start("m", 1), text_block(0), text(0, "cut")],
                "STREAM_CLOSED",
                "Anthropic closed the stream before message_stop",
            ),
            (
                vec![text_block(0)],
                "PROVIDER_ERROR",
                "Anthropic sent a malformed response: content_block_start before message_start",
            ),
            (
                vec![json!({"choices": [{"delta": {"content": "hi"}}]})],
                "PROVIDER_ERROR",
                "Anthropic sent a malformed response: stream event is not a Messages event (missing field `type` at line 1 column 40)",
            ),
            (
                vec![start("m", 1), start("m", 1)],
                "PROVIDER_ERROR",
                "Anthropic sent a malformed response: a second message_start",
            ),
            (
                vec![start("m", 1), text(4, "x")],
                "PROVIDER_ERROR",
                "Anthropic sent a malformed response: a delta for content block #4, which never started",
            ),
            (
                vec![start("m", 1), text_block(0), text_block(0)],
                "PROVIDER_ERROR",
                "Anthropic sent a malformed response: content block #0 started twice",
            ),
            (
                vec![start("m", 1), text_block(0), json_delta(0, "{")],
                "PROVIDER_ERROR",
                "Anthropic sent a malformed response: a input_json_delta for text block #0",
            ),
            (
                vec![
                    json!({"type": "content_block_delta", "delta": {"type": "text_delta", "text": "x"}}),
                ],
                "PROVIDER_ERROR",
                "",
            ),
            (
                vec![
                    start("m", 1),
                    tool_block(0, "toolu_1", "echo"),
                    json_delta(0, "{\"text\": \"unfinish"),
                    message_delta("max_tokens", 4096),
                    message_stop(),
                ],
                "PROVIDER_ERROR",
                "Anthropic sent a malformed response: the input of tool call `echo` (toolu_1) is not JSON (EOF while parsing a string at line 1 column 18) (stop_reason: max_tokens)",
            ),
            (
                vec![start("m", 1), tool_block(0, "", "echo"), message_stop()],
                "PROVIDER_ERROR",
                "Anthropic sent a malformed response: tool call #0 has no id",
            ),
            (
                vec![start("m", 1), message_delta("max_tokens", 0), message_stop()],
                "EMPTY_RESPONSE",
                "Anthropic answered with no content and no tool calls (stop_reason: max_tokens)",
            ),
            (
                vec![start("m", 1), text_block(0), text(0, " \n"), message_stop()],
                "EMPTY_RESPONSE",
                "Anthropic answered with no content and no tool calls",
            ),
            (
                vec![
                    start("m", 1),
                    text_block(0),
                    text(0, "half"),
                    json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
                ],
                "SERVER",
                "Overloaded",
            ),
            (
                vec![
                    json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}),
                ],
                "RATE_LIMIT",
                "slow down",
            ),
        ];
        for (events, code, message) in cases {
            let shown = format!("{events:?}");
            let failure = run(&events).1.unwrap_err();
            assert_eq!(failure.code(), code, "{shown}: {}", failure.message());
            if !message.is_empty() {
                assert_eq!(failure.message(), message, "{shown}");
            }
        }
        let mut assembler = Assembler::new("Anthropic");
        let failure = Decoder::feed(&mut assembler, Frame::Done).unwrap_err();
        assert_eq!(failure.code(), "PROVIDER_ERROR");
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_event_sequences_never_panic(events in proptest::collection::vec(event(), 0..16)) {
            let mut assembler = Assembler::new("P");
            for event in &events {
                let _ = assembler.feed(&event.to_string());
            }
            let _ = assembler.finish();
        }
    }

    /// Messages-shaped events with arbitrary indexes, kinds and contents.
    fn event() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let kinds = prop::sample::select(vec![
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
            "ping",
            "error",
            "other",
        ]);
        let blocks = prop::sample::select(vec!["text", "tool_use", "thinking", "image", ""]);
        let deltas = prop::sample::select(vec![
            "text_delta",
            "input_json_delta",
            "thinking_delta",
            "signature_delta",
        ]);
        (kinds, 0u64..4, blocks, deltas, any::<Option<String>>(), any::<Option<u64>>()).prop_map(
            |(kind, index, block, delta, text, count)| {
                json!({"type": kind, "index": index,
                    "message": {"model": text, "usage": {"input_tokens": count, "output_tokens": count}},
                    "content_block": {"type": block, "text": text, "id": text, "name": text, "input": count},
                    "delta": {"type": delta, "text": text, "partial_json": text, "thinking": text, "stop_reason": text},
                    "usage": {"output_tokens": count},
                    "error": {"type": text, "message": text}})
            },
        )
    }
}
