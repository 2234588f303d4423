//! [`Assembler`]: folds the `data` payloads of a `/chat/completions` stream into one answer
//! ([`Assembled`]).
//!
//! Pure: one payload in, the content delta to stream (if any) out; at `[DONE]`, the assembled
//! answer or a typed failure. What it reads of each chunk (unknown fields are ignored, `null`
//! counts as absent):
//! - `choices[index 0].delta.content`: the answer text, streamed as raw chunks;
//! - `choices[0].delta.reasoning_content`: a reasoning model's thoughts, kept apart — never
//!   streamed as answer text (chunks become the model-visible `assistant/message`) and never sent
//!   back (DeepSeek refuses it in a request);
//! - `choices[0].delta.tool_calls[]`: partial calls keyed by `index`; `id` and `function.name`
//!   replace (some servers repeat them on every delta), `function.arguments` fragments are
//!   concatenated. A delta without `index` continues the latest call, or opens the next one
//!   when it brings a new `id`;
//! - `usage` (the last chunk, thanks to `stream_options.include_usage`);
//! - `error`: an in-stream error, classified like an HTTP error body.
//!
//! At the end, each call's arguments are parsed as JSON (empty arguments are `{}`): malformed
//! JSON, a call without an id or without a name is `PROVIDER_ERROR`; an answer with no text
//! (only whitespace) and no tool call is `EMPTY_RESPONSE`.

use std::collections::BTreeMap;

use rein_runtime::event::{ToolCall, Usage};
use rein_runtime::failure::{self, Failure};
use rein_runtime::provider::Completion;
use serde::Deserialize;
use serde_json::Value;

use crate::answer::Assembled;
use crate::classify::{self, typed};

/// One streamed answer being assembled.
#[derive(Debug)]
pub struct Assembler {
    label: String,
    text: String,
    reasoning: String,
    calls: BTreeMap<u32, PartialCall>,
    latest: Option<u32>,
    usage: Option<Usage>,
    finish_reason: Option<String>,
    response_model: Option<String>,
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

#[derive(Deserialize)]
struct Chunk {
    model: Option<String>,
    choices: Option<Vec<Choice>>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    index: Option<u32>,
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    content: Option<String>,
    reasoning_content: Option<String>,
    tool_calls: Option<Vec<CallDelta>>,
}

#[derive(Deserialize)]
struct CallDelta {
    index: Option<u32>,
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
}

impl Assembler {
    /// An empty answer from provider `label` (how failures name it).
    pub fn new(label: impl Into<String>) -> Self {
        Self {
            label: label.into(),
            text: String::new(),
            reasoning: String::new(),
            calls: BTreeMap::new(),
            latest: None,
            usage: None,
            finish_reason: None,
            response_model: None,
        }
    }

    /// Folds one `data` payload (not `[DONE]`); answers the content delta to stream, if any.
    pub fn feed(&mut self, data: &str) -> Result<Option<String>, Failure> {
        let chunk: Chunk = serde_json::from_str(data).map_err(|e| {
            classify::malformed(&self.label, &format!("stream event is not a chunk ({e})"))
        })?;
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            return Err(classify::stream_error(&self.label, &error));
        }
        if let Some(model) = chunk.model.filter(|m| !m.is_empty()) {
            self.response_model = Some(model);
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(Usage {
                input_tokens: usage.prompt_tokens.unwrap_or(0),
                output_tokens: usage.completion_tokens.unwrap_or(0),
            });
        }
        let mut content = String::new();
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
            }
            let Some(delta) = choice.delta else { continue };
            if let Some(text) = delta.content {
                content.push_str(&text);
            }
            if let Some(thought) = delta.reasoning_content {
                self.reasoning.push_str(&thought);
            }
            for call in delta.tool_calls.unwrap_or_default() {
                self.call_delta(call);
            }
        }
        self.text.push_str(&content);
        Ok((!content.is_empty()).then_some(content))
    }

    fn call_delta(&mut self, delta: CallDelta) {
        let id = delta.id.filter(|id| !id.is_empty());
        let index = match (delta.index, self.latest) {
            (Some(index), _) => index,
            (None, None) => 0,
            (None, Some(latest)) => {
                let opens_next = id.as_ref().is_some_and(|id| {
                    self.calls.get(&latest).is_some_and(|c| !c.id.is_empty() && c.id != *id)
                });
                if opens_next { latest.saturating_add(1) } else { latest }
            }
        };
        self.latest = Some(index);
        let call = self.calls.entry(index).or_default();
        if let Some(id) = id {
            call.id = id;
        }
        if let Some(function) = delta.function {
            if let Some(name) = function.name.filter(|n| !n.is_empty()) {
                call.name = name;
            }
            if let Some(arguments) = function.arguments {
                call.arguments.push_str(&arguments);
            }
        }
    }

    /// How failures name the provider.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The answer so far (what a stream that ended now would have said).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The finished answer, at `[DONE]`.
    pub fn finish(self) -> Result<Assembled, Failure> {
        let label = &self.label;
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        for (index, call) in self.calls {
            if call.id.is_empty() {
                return Err(classify::malformed(label, &format!("tool call #{index} has no id")));
            }
            if call.name.is_empty() {
                let detail = format!("tool call #{index} ({}) has no function name", call.id);
                return Err(classify::malformed(label, &detail));
            }
            let arguments = if call.arguments.trim().is_empty() {
                Value::Object(serde_json::Map::new())
            } else {
                serde_json::from_str(&call.arguments).map_err(|e| {
                    classify::malformed(
                        label,
                        &format!(
                            "the arguments of tool call `{}` ({}) are not JSON ({e})",
                            call.name, call.id
                        ),
                    )
                })?
            };
            tool_calls.push(ToolCall { id: call.id, name: call.name, arguments });
        }
        if self.text.trim().is_empty() && tool_calls.is_empty() {
            let why = match &self.finish_reason {
                Some(reason) => format!(" (finish_reason: {reason})"),
                None => String::new(),
            };
            let message = format!("{label} answered with no content and no tool calls{why}");
            return Err(typed(failure::EMPTY_RESPONSE, message));
        }
        Ok(Assembled {
            text: self.text,
            reasoning: self.reasoning,
            completion: Completion { tool_calls, usage: self.usage },
            finish_reason: self.finish_reason,
            response_model: self.response_model,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Feeds every payload; answers the streamed deltas and the outcome.
    fn run(payloads: &[Value]) -> (Vec<String>, Result<Assembled, Failure>) {
        let mut assembler = Assembler::new("DeepSeek");
        let mut deltas = vec![];
        for payload in payloads {
            match assembler.feed(&payload.to_string()) {
                Ok(Some(delta)) => deltas.push(delta),
                Ok(None) => {}
                Err(failure) => return (deltas, Err(failure)),
            }
        }
        (deltas, assembler.finish())
    }

    fn content(text: &str) -> Value {
        json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
    }

    fn call(index: Option<u32>, id: Option<&str>, name: Option<&str>, args: &str) -> Value {
        let mut call = json!({"function": {"arguments": args}});
        if let Some(index) = index {
            call["index"] = json!(index);
        }
        if let Some(id) = id {
            call["id"] = json!(id);
            call["type"] = json!("function");
        }
        if let Some(name) = name {
            call["function"]["name"] = json!(name);
        }
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
    }

    /// Each tool call as (id, name, arguments).
    type Calls = Vec<(String, String, Value)>;

    fn calls(outcome: &Result<Assembled, Failure>) -> Calls {
        outcome
            .as_ref()
            .unwrap()
            .completion
            .tool_calls
            .iter()
            .map(|c| (c.id.clone(), c.name.clone(), c.arguments.clone()))
            .collect()
    }

    #[test]
    fn content_streams_and_usage_and_reasoning_are_kept() {
        let (deltas, outcome) = run(&[
            json!({"model": "deepseek-reasoner", "choices": [{"index": 0, "delta": {"role": "assistant", "content": null, "reasoning_content": "Think"}}]}),
            json!({"choices": [{"index": 0, "delta": {"reasoning_content": "ing."}}], "usage": null}),
            content("Hel"),
            content(""),
            content("lo"),
            json!({"choices": [{"index": 1, "delta": {"content": "other choice"}}]}),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
            json!({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}}),
        ]);
        assert_eq!(deltas, ["Hel", "lo"]);
        let answer = outcome.unwrap();
        assert_eq!((answer.text.as_str(), answer.reasoning.as_str()), ("Hello", "Thinking."));
        assert_eq!(answer.completion.usage, Some(Usage { input_tokens: 12, output_tokens: 3 }));
        assert_eq!(answer.finish_reason.as_deref(), Some("stop"));
        assert_eq!(answer.response_model.as_deref(), Some("deepseek-reasoner"));
    }

    #[test]
    fn tool_calls_assemble_by_index() {
        let cases: Vec<(Vec<Value>, Calls)> = vec![
            // Interleaved fragments of two calls, keyed by index.
            (
                vec![
                    call(Some(0), Some("c0"), Some("echo"), ""),
                    call(Some(1), Some("c1"), Some("sum"), "{\"a\""),
                    call(Some(0), None, None, "{\"text\": "),
                    call(Some(1), None, None, ": 1}"),
                    call(Some(0), None, None, "\"hi\"}"),
                ],
                vec![
                    ("c0".into(), "echo".into(), json!({"text": "hi"})),
                    ("c1".into(), "sum".into(), json!({"a": 1})),
                ],
            ),
            // Repeated id and name on every delta replace, they do not concatenate.
            (
                vec![
                    call(Some(0), Some("c0"), Some("echo"), "{}"),
                    call(Some(0), Some("c0"), Some("echo"), ""),
                ],
                vec![("c0".into(), "echo".into(), json!({}))],
            ),
            // Empty arguments are an empty object.
            (
                vec![call(Some(0), Some("c0"), Some("now"), "  ")],
                vec![("c0".into(), "now".into(), json!({}))],
            ),
            // Without index: fragments continue the latest call; a new id opens the next.
            (
                vec![
                    call(None, Some("a"), Some("f"), "[1,"),
                    call(None, None, None, "2]"),
                    call(None, Some("b"), Some("g"), "3"),
                ],
                vec![("a".into(), "f".into(), json!([1, 2])), ("b".into(), "g".into(), json!(3))],
            ),
        ];
        for (payloads, expected) in cases {
            assert_eq!(calls(&run(&payloads).1), expected, "{payloads:?}");
        }
    }

    #[test]
    fn bad_answers_are_typed_failures() {
        let cases: Vec<(Vec<Value>, &str, &str)> = vec![
            (vec![], "EMPTY_RESPONSE", "DeepSeek answered with no content and no tool calls"),
            (
                vec![
                    content(" \n"),
                    json!({"choices": [{"delta": {}, "finish_reason": "length"}]}),
                ],
                "EMPTY_RESPONSE",
                "DeepSeek answered with no content and no tool calls (finish_reason: length)",
            ),
            (
                vec![json!({"choices": [{"delta": {"reasoning_content": "hmm"}}]})],
                "EMPTY_RESPONSE",
                "DeepSeek answered with no content and no tool calls",
            ),
            (
                vec![call(Some(0), Some("c0"), Some("echo"), "{\"text\": ")],
                "PROVIDER_ERROR",
                "DeepSeek sent a malformed response: the arguments of tool call `echo` (c0) are not JSON (EOF while parsing a value at line 1 column 9)",
            ),
            (
                vec![call(Some(0), None, Some("echo"), "{}")],
                "PROVIDER_ERROR",
                "DeepSeek sent a malformed response: tool call #0 has no id",
            ),
            (
                vec![call(Some(3), Some("c3"), None, "{}")],
                "PROVIDER_ERROR",
                "DeepSeek sent a malformed response: tool call #3 (c3) has no function name",
            ),
            (
                vec![
                    content("partial"),
                    json!({"error": {"message": "Server busy", "type": "server_error"}}),
                ],
                "SERVER",
                "Server busy",
            ),
            (vec![json!([1, 2])], "PROVIDER_ERROR", ""),
            (vec![json!("text")], "PROVIDER_ERROR", ""),
            (vec![json!({"choices": [{"delta": {"content": 5}}]})], "PROVIDER_ERROR", ""),
        ];
        for (payloads, code, message) in cases {
            let failure = run(&payloads).1.unwrap_err();
            assert_eq!(failure.code(), code, "{payloads:?}");
            if !message.is_empty() {
                assert_eq!(failure.message(), message);
            }
        }
    }

    #[test]
    fn a_payload_that_is_not_json_is_malformed() {
        let mut assembler = Assembler::new("DeepSeek");
        let failure = assembler.feed("{not json").unwrap_err();
        assert_eq!(failure.code(), "PROVIDER_ERROR");
        assert!(failure.message().starts_with("DeepSeek sent a malformed response: "));
    }
}
