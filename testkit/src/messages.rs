//! The Anthropic Messages stream as the documented API sends it, for the scripted server: each
//! event an `event: <type>` line and its JSON `data`, answers made of them, and error bodies.

use serde_json::{Value, json};

use crate::server::{Part, Reply, status_reply};

/// One event: `event: <type>` and its data.
pub fn event(data: Value) -> Part {
    let name = data["type"].as_str().unwrap().to_owned();
    Part::Event(name, data.to_string())
}

/// `message_start`, naming the model and the input tokens.
pub fn message_start(model: &str, input_tokens: u64) -> Part {
    event(json!({"type": "message_start", "message": {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
        "content": [], "model": model, "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1}}}))
}

/// `content_block_start` of a text block.
pub fn text_block(index: u64) -> Part {
    event(json!({"type": "content_block_start", "index": index,
        "content_block": {"type": "text", "text": ""}}))
}

/// A `text_delta`.
pub fn text(index: u64, text: &str) -> Part {
    event(json!({"type": "content_block_delta", "index": index,
        "delta": {"type": "text_delta", "text": text}}))
}

/// `content_block_start` of a `tool_use` block.
pub fn tool_use(index: u64, id: &str, name: &str) -> Part {
    event(json!({"type": "content_block_start", "index": index,
        "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}))
}

/// An `input_json_delta`.
pub fn input_json(index: u64, partial: &str) -> Part {
    event(json!({"type": "content_block_delta", "index": index,
        "delta": {"type": "input_json_delta", "partial_json": partial}}))
}

/// `content_block_stop`.
pub fn block_stop(index: u64) -> Part {
    event(json!({"type": "content_block_stop", "index": index}))
}

/// `message_delta` with a stop reason and the output tokens.
pub fn message_delta(stop_reason: &str, output_tokens: u64) -> Part {
    event(json!({"type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": null},
        "usage": {"output_tokens": output_tokens}}))
}

/// `message_stop`: the end marker.
pub fn message_stop() -> Part {
    event(json!({"type": "message_stop"}))
}

/// `ping`.
pub fn ping() -> Part {
    event(json!({"type": "ping"}))
}

/// An in-stream `error` event.
pub fn error_event(error_type: &str, message: &str) -> Part {
    event(json!({"type": "error", "error": {"type": error_type, "message": message}}))
}

/// The events of a text answer streamed in `pieces`, up to (not including) `message_stop`.
pub fn text_parts(pieces: &[&str]) -> Vec<Part> {
    let mut parts = vec![message_start("claude-haiku-4-5-20251001", 25), text_block(0), ping()];
    parts.extend(pieces.iter().map(|p| text(0, p)));
    parts.push(block_stop(0));
    parts.push(message_delta("end_turn", pieces.len() as u64));
    parts
}

/// A complete streamed text answer.
pub fn answer(pieces: &[&str]) -> Reply {
    let mut parts = text_parts(pieces);
    parts.push(message_stop());
    Reply::Sse(parts)
}

/// A complete answer that says `said` and calls tool `name` (id `id`) with `input` (its JSON
/// split in two deltas).
pub fn tool_answer(said: &str, id: &str, name: &str, input: &Value) -> Reply {
    let json = input.to_string();
    let (a, b) = json.split_at(json.len() / 2);
    Reply::Sse(vec![
        message_start("claude-haiku-4-5-20251001", 30),
        text_block(0),
        text(0, said),
        block_stop(0),
        tool_use(1, id, name),
        input_json(1, ""),
        input_json(1, a),
        input_json(1, b),
        block_stop(1),
        message_delta("tool_use", 20),
        message_stop(),
    ])
}

/// An Anthropic error body.
pub fn error_body(error_type: &str, message: &str) -> String {
    json!({"type": "error", "error": {"type": error_type, "message": message},
           "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"})
    .to_string()
}

/// A status reply with headers and an Anthropic error body.
pub fn error(status: u16, headers: &[(&str, &str)], error_type: &str, message: &str) -> Reply {
    status_reply(status, headers, &error_body(error_type, message))
}
