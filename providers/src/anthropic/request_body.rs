//! The `/v1/messages` request body of one attempt, as bytes.
//!
//! Built only from the request's model, model-visible history, tools and generation settings,
//! never from the attempt number, so a retried attempt sends a byte-identical body (typed
//! structs serialize in declaration order; `serde_json`'s maps are sorted).
//!
//! - `model`; `max_tokens` (required by the API): the request's limit, else
//!   [`DEFAULT_MAX_TOKENS`](super::config::DEFAULT_MAX_TOKENS); `system`: the system prompt, a
//!   top-level field (the API has no system role); `temperature` only when set; `stream: true`.
//! - `tools`, only when some are offered: `{name, description, input_schema}`.
//! - The history, in Anthropic's shape: a user message is a `text` block in a `user` message;
//!   an assistant message is a `text` block (when its text is not blank) then one `tool_use`
//!   block per call (`{id, name, input}`), in an `assistant` message; a tool result is a
//!   `tool_result` block (`{tool_use_id, content, is_error}`, `is_error` only when true) in a
//!   `user` message. Consecutive messages of one role are merged into one, as the API requires
//!   (the results of a step's calls go back together, and a user message that follows them
//!   joins them). Blank text is never sent (the API refuses empty text blocks); a message left
//!   with no block is dropped.
//! - A tool call id is sent with every character outside `[A-Za-z0-9_-]` as `_` (the API's
//!   pattern), in the call and in its result alike: a call made on another provider's route
//!   (`--fallback`) may carry an id Anthropic would refuse.

use std::borrow::Cow;

use rein_runtime::provider::{Message, Request, ToolSpec};
use serde::Serialize;
use serde_json::Value;

/// The body of one attempt; `default_max_tokens` when the request sets no limit.
pub fn build(request: &Request, default_max_tokens: u32) -> Vec<u8> {
    let generation = &request.generation;
    let body = Body {
        model: &request.model,
        max_tokens: generation.max_tokens().unwrap_or(default_max_tokens),
        system: generation.system_prompt(),
        messages: messages(&request.messages),
        tools: request.tools.iter().map(wire_tool).collect(),
        temperature: generation.temperature(),
        stream: true,
    };
    // Serializing typed structs of strings and `Value`s into a Vec cannot fail.
    serde_json::to_vec(&body).unwrap_or_default()
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<&'a str>,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    stream: bool,
}

#[derive(Debug, Serialize)]
struct WireMessage<'a> {
    role: Role,
    content: Vec<Block<'a>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Role {
    User,
    Assistant,
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: &'a str,
    },
    ToolUse {
        id: Cow<'a, str>,
        name: &'a str,
        input: &'a Value,
    },
    ToolResult {
        tool_use_id: Cow<'a, str>,
        content: &'a str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
}

/// The history as Anthropic's messages: each message's blocks, merged by role (see the module
/// docs).
fn messages(history: &[Message]) -> Vec<WireMessage<'_>> {
    let mut out: Vec<WireMessage<'_>> = Vec::with_capacity(history.len());
    for message in history {
        let (role, blocks) = blocks(message);
        if blocks.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => out.push(WireMessage { role, content: blocks }),
        }
    }
    out
}

/// One history message's role and blocks.
fn blocks(message: &Message) -> (Role, Vec<Block<'_>>) {
    match message {
        Message::User { text: said } => (Role::User, text(said).into_iter().collect()),
        Message::Assistant { text: said, tool_calls } => {
            let calls = tool_calls.iter().map(|call| Block::ToolUse {
                id: tool_id(&call.id),
                name: &call.name,
                input: &call.arguments,
            });
            (Role::Assistant, text(said).into_iter().chain(calls).collect())
        }
        Message::Tool { id, output, is_error } => (
            Role::User,
            vec![Block::ToolResult {
                tool_use_id: tool_id(id),
                content: output,
                is_error: *is_error,
            }],
        ),
    }
}

/// A text block, unless the text is blank.
fn text(text: &str) -> Option<Block<'_>> {
    (!text.trim().is_empty()).then_some(Block::Text { text })
}

/// A tool call id as the API accepts it: `[A-Za-z0-9_-]`, anything else `_` (an empty id is `_`).
fn tool_id(id: &str) -> Cow<'_, str> {
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if !id.is_empty() && id.chars().all(valid) {
        return Cow::Borrowed(id);
    }
    if id.is_empty() {
        return Cow::Borrowed("_");
    }
    Cow::Owned(id.chars().map(|c| if valid(c) { c } else { '_' }).collect())
}

fn wire_tool(tool: &ToolSpec) -> WireTool<'_> {
    WireTool { name: &tool.name, description: &tool.description, input_schema: &tool.parameters }
}

#[cfg(test)]
mod tests {
    use rein_runtime::event::ToolCall;
    use rein_runtime::provider::Generation;
    use serde_json::json;

    use super::*;

    fn request(messages: Vec<Message>, tools: Vec<ToolSpec>, generation: Generation) -> Request {
        Request {
            session: "s".into(),
            turn: 1,
            step: 2,
            attempt: 1,
            provider: "anthropic".into(),
            model: "claude-haiku-4-5".into(),
            messages: messages.into(),
            tools,
            generation,
        }
    }

    fn body(request: &Request) -> Value {
        serde_json::from_slice(&build(request, 4096)).unwrap()
    }

    fn user(text: &str) -> Message {
        Message::User { text: text.into() }
    }

    fn assistant(text: &str, calls: &[(&str, Value)]) -> Message {
        let tool_calls = calls
            .iter()
            .map(|(id, arguments)| ToolCall {
                id: (*id).into(),
                name: "echo".into(),
                arguments: arguments.clone(),
            })
            .collect();
        Message::Assistant { text: text.into(), tool_calls }
    }

    fn result(id: &str, output: &str, is_error: bool) -> Message {
        Message::Tool { id: id.into(), output: output.into(), is_error }
    }

    #[test]
    fn the_whole_body_in_its_field_order() {
        let settings = Generation::new().with_system_prompt("Be brief.").unwrap();
        let settings = settings.with_temperature(0.5).unwrap().with_max_tokens(300).unwrap();
        let request = request(vec![user("hi")], vec![ToolSpec::new("echo", "Echoes.")], settings);
        assert_eq!(
            String::from_utf8(build(&request, 4096)).unwrap(),
            concat!(
                r#"{"model":"claude-haiku-4-5","max_tokens":300,"system":"Be brief.","#,
                r#""messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"#,
                r#""tools":[{"name":"echo","description":"Echoes.","input_schema":{"type":"object"}}],"#,
                r#""temperature":0.5,"stream":true}"#,
            )
        );
        let bare = super::tests::request(vec![user("hi")], vec![], Generation::new());
        assert_eq!(
            String::from_utf8(build(&bare, 4096)).unwrap(),
            r#"{"model":"claude-haiku-4-5","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"stream":true}"#,
            "no system, no tools, no temperature; the default token limit"
        );
    }

    #[test]
    fn the_history_maps_to_blocks_and_same_role_messages_merge() {
        let cases: Vec<(Vec<Message>, Value)> = vec![
            // A step with two calls: their results go back in one user message.
            (
                vec![
                    user("hi"),
                    assistant(
                        "Let me look.",
                        &[("toolu_1", json!({"text": "a"})), ("toolu_2", json!({}))],
                    ),
                    result("toolu_1", "a", false),
                    result("toolu_2", "no such file", true),
                    assistant("Done.", &[]),
                ],
                json!([
                    {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                    {"role": "assistant", "content": [
                        {"type": "text", "text": "Let me look."},
                        {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {"text": "a"}},
                        {"type": "tool_use", "id": "toolu_2", "name": "echo", "input": {}}]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"},
                        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "no such file", "is_error": true}]},
                    {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
                ]),
            ),
            // A turn that ended after its tool results, then a new prompt: one user message,
            // the results first. Blank text is not sent.
            (
                vec![
                    user("one"),
                    assistant(" \n", &[("c", json!({"x": 1}))]),
                    result("c", "ok", false),
                    user("two"),
                ],
                json!([
                    {"role": "user", "content": [{"type": "text", "text": "one"}]},
                    {"role": "assistant", "content": [
                        {"type": "tool_use", "id": "c", "name": "echo", "input": {"x": 1}}]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "c", "content": "ok"},
                        {"type": "text", "text": "two"}]},
                ]),
            ),
            // An empty assistant message is dropped, and the user messages around it merge.
            (
                vec![user("a"), assistant("", &[]), user("b")],
                json!([{"role": "user", "content": [
                    {"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]),
            ),
            // Ids from another provider are made valid, the same way in the call and its result.
            (
                vec![
                    user("q"),
                    assistant("", &[("call.9:x/y", json!({}))]),
                    result("call.9:x/y", "", false),
                ],
                json!([
                    {"role": "user", "content": [{"type": "text", "text": "q"}]},
                    {"role": "assistant", "content": [
                        {"type": "tool_use", "id": "call_9_x_y", "name": "echo", "input": {}}]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "call_9_x_y", "content": ""}]},
                ]),
            ),
        ];
        for (history, expected) in cases {
            let shown = format!("{history:?}");
            let request = request(history, vec![], Generation::new());
            assert_eq!(body(&request)["messages"], expected, "{shown}");
        }
    }

    #[test]
    fn tool_ids_keep_the_apis_pattern() {
        let cases = [
            ("toolu_01A-b", "toolu_01A-b"),
            ("call_0_8d1c", "call_0_8d1c"),
            ("a.b c", "a_b_c"),
            ("é", "_"),
            ("", "_"),
        ];
        for (id, wire) in cases {
            assert_eq!(tool_id(id), wire, "{id:?}");
        }
        assert!(matches!(tool_id("ok_1"), Cow::Borrowed(_)), "no copy when valid");
    }

    #[test]
    fn attempts_of_a_step_send_identical_bytes() {
        let schema = json!({"type": "object", "properties": {"b": {}, "a": {}}});
        let mut first = request(
            vec![user("é \"quoted\" \n"), assistant("", &[("c", json!({"z": 1, "a": 2}))])],
            vec![ToolSpec::new("t", "d").with_parameters(schema)],
            Generation::new().with_temperature(0.1).unwrap(),
        );
        let one = build(&first, 4096);
        first.attempt = 7;
        assert_eq!(build(&first, 4096), one, "the attempt number is not in the body");
        let reparsed: Request =
            serde_json::from_str(&serde_json::to_string(&first).unwrap()).unwrap();
        assert_eq!(build(&reparsed, 4096), one, "a request rebuilt sends the same bytes");
    }
}
