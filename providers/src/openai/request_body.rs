//! The `/chat/completions` request body of one attempt, as bytes.
//!
//! Built only from the request's model, model-visible history, tools and generation settings,
//! never from the attempt number, so a retried attempt sends a byte-identical body. Determinism
//! comes from typed structs (fields serialize in declaration order) and from `serde_json`'s
//! sorted maps for the values inside (tool arguments, schemas).
//!
//! Generation settings: the system prompt is a `{"role":"system","content":…}` message first;
//! `temperature` as given; the output token limit as `max_tokens` or `max_completion_tokens`
//! ([`MaxTokensField`]). An unset setting is not sent (the server's default).
//!
//! Mapping of the history:
//! - `user` → `{"role":"user","content":text}`;
//! - `assistant` → `{"role":"assistant","content":text}` plus `tool_calls` (each
//!   `{"id","type":"function","function":{"name","arguments"}}` with the arguments as a JSON
//!   string); `content` is `null` when the text is empty and there are tool calls;
//! - `tool` → `{"role":"tool","tool_call_id":id,"content":output}` (the output verbatim, error or
//!   not: the wire format has no error flag).

use rein_runtime::provider::{Message, Request, ToolSpec};
use serde::Serialize;
use serde_json::Value;

use super::config::MaxTokensField;

/// The body of one attempt; the output token limit goes out in `max_tokens_field`.
pub fn build(request: &Request, max_tokens_field: MaxTokensField) -> Vec<u8> {
    let generation = &request.generation;
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(prompt) = generation.system_prompt() {
        messages.push(WireMessage::System { content: prompt });
    }
    messages.extend(request.messages.iter().map(wire_message));
    let limit = generation.max_tokens();
    let body = Body {
        model: &request.model,
        messages,
        tools: request.tools.iter().map(wire_tool).collect(),
        temperature: generation.temperature(),
        max_tokens: limit.filter(|_| max_tokens_field == MaxTokensField::MaxTokens),
        max_completion_tokens: limit
            .filter(|_| max_tokens_field == MaxTokensField::MaxCompletionTokens),
        stream: true,
        stream_options: StreamOptions { include_usage: true },
    };
    // Serializing typed structs of strings and `Value`s into a Vec cannot fail.
    serde_json::to_vec(&body).unwrap_or_default()
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    stream: bool,
    stream_options: StreamOptions,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

#[derive(Serialize)]
struct WireCall<'a> {
    id: &'a str,
    r#type: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    arguments: String,
}

#[derive(Serialize)]
struct WireTool<'a> {
    r#type: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

fn wire_message(message: &Message) -> WireMessage<'_> {
    match message {
        Message::User { text } => WireMessage::User { content: text },
        Message::Assistant { text, tool_calls } => WireMessage::Assistant {
            content: if text.is_empty() && !tool_calls.is_empty() { None } else { Some(text) },
            tool_calls: tool_calls
                .iter()
                .map(|call| WireCall {
                    id: &call.id,
                    r#type: "function",
                    function: WireFunctionCall {
                        name: &call.name,
                        arguments: call.arguments.to_string(),
                    },
                })
                .collect(),
        },
        Message::Tool { id, output, .. } => WireMessage::Tool { tool_call_id: id, content: output },
    }
}

fn wire_tool(tool: &ToolSpec) -> WireTool<'_> {
    WireTool {
        r#type: "function",
        function: WireFunction {
            name: &tool.name,
            description: &tool.description,
            parameters: &tool.parameters,
        },
    }
}

#[cfg(test)]
mod tests {
    use rein_runtime::event::ToolCall;
    use rein_runtime::provider::Generation;
    use serde_json::json;

    use super::*;

    fn request(messages: Vec<Message>, tools: Vec<ToolSpec>) -> Request {
        Request {
            session: "s".into(),
            turn: 1,
            step: 2,
            attempt: 1,
            provider: "deepseek".into(),
            model: "deepseek-chat".into(),
            messages: messages.into(),
            tools,
            generation: Default::default(),
        }
    }

    fn body(request: &Request, system: Option<&str>) -> String {
        let mut request = request.clone();
        if let Some(system) = system {
            request.generation = Generation::new().with_system_prompt(system).unwrap();
        }
        String::from_utf8(build(&request, MaxTokensField::MaxTokens)).unwrap()
    }

    #[test]
    fn the_history_maps_to_the_wire_format() {
        let call = ToolCall {
            id: "call_1".into(),
            name: "echo".into(),
            arguments: json!({"z": 1, "a": [true, null]}),
        };
        let cases = [
            (
                vec![Message::User { text: "hi".into() }],
                vec![],
                None,
                r#"{"model":"deepseek-chat","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}"#,
            ),
            (
                vec![
                    Message::User { text: "hi".into() },
                    Message::Assistant { text: String::new(), tool_calls: vec![call.clone()] },
                    Message::Tool { id: "call_1".into(), output: "out".into(), is_error: true },
                    Message::Assistant { text: "done".into(), tool_calls: vec![] },
                ],
                vec![ToolSpec::new("echo", "Echoes.")],
                Some("Be brief."),
                concat!(
                    r#"{"model":"deepseek-chat","messages":["#,
                    r#"{"role":"system","content":"Be brief."},"#,
                    r#"{"role":"user","content":"hi"},"#,
                    r#"{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"echo","arguments":"{\"a\":[true,null],\"z\":1}"}}]},"#,
                    r#"{"role":"tool","tool_call_id":"call_1","content":"out"},"#,
                    r#"{"role":"assistant","content":"done"}],"#,
                    r#""tools":[{"type":"function","function":{"name":"echo","description":"Echoes.","parameters":{"type":"object"}}}],"#,
                    r#""stream":true,"stream_options":{"include_usage":true}}"#,
                ),
            ),
            (
                vec![Message::Assistant { text: "so".into(), tool_calls: vec![call] }],
                vec![],
                None,
                r#"{"model":"deepseek-chat","messages":[{"role":"assistant","content":"so","tool_calls":[{"id":"call_1","type":"function","function":{"name":"echo","arguments":"{\"a\":[true,null],\"z\":1}"}}]}],"stream":true,"stream_options":{"include_usage":true}}"#,
            ),
            (
                vec![Message::Assistant { text: String::new(), tool_calls: vec![] }],
                vec![],
                None,
                r#"{"model":"deepseek-chat","messages":[{"role":"assistant","content":""}],"stream":true,"stream_options":{"include_usage":true}}"#,
            ),
        ];
        for (messages, tools, system, expected) in cases {
            assert_eq!(body(&request(messages, tools), system), expected);
        }
    }

    #[test]
    fn attempts_of_a_step_send_identical_bytes() {
        let schema = json!({"type": "object", "properties": {"b": {}, "a": {}}, "required": ["b"]});
        let mut first = request(
            vec![Message::User { text: "é \"quoted\" \n".into() }],
            vec![ToolSpec::new("t", "d").with_parameters(schema)],
        );
        first.generation = Generation::new().with_system_prompt("sys").unwrap();
        first.generation = first.generation.with_temperature(0.3).unwrap();
        let one = build(&first, MaxTokensField::MaxTokens);
        first.attempt = 7;
        assert_eq!(
            build(&first, MaxTokensField::MaxTokens),
            one,
            "the attempt number is not in the body"
        );
        let reparsed: Request =
            serde_json::from_str(&serde_json::to_string(&first).unwrap()).unwrap();
        assert_eq!(
            build(&reparsed, MaxTokensField::MaxTokens),
            one,
            "a request rebuilt from the log sends the same bytes"
        );
    }

    #[test]
    fn generation_settings_map_to_their_fields_and_unset_ones_are_not_sent() {
        let hi = vec![Message::User { text: "hi".into() }];
        let full = Generation::new().with_system_prompt("Be brief.").unwrap();
        let full = full.with_temperature(0.25).unwrap().with_max_tokens(300).unwrap();
        let cases = [
            (
                Generation::new(),
                MaxTokensField::MaxCompletionTokens,
                r#"{"model":"deepseek-chat","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}"#,
            ),
            (
                full.clone(),
                MaxTokensField::MaxTokens,
                r#"{"model":"deepseek-chat","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}],"temperature":0.25,"max_tokens":300,"stream":true,"stream_options":{"include_usage":true}}"#,
            ),
            (
                full,
                MaxTokensField::MaxCompletionTokens,
                r#"{"model":"deepseek-chat","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}],"temperature":0.25,"max_completion_tokens":300,"stream":true,"stream_options":{"include_usage":true}}"#,
            ),
            (
                Generation::new().with_temperature(0.0).unwrap(),
                MaxTokensField::MaxTokens,
                r#"{"model":"deepseek-chat","messages":[{"role":"user","content":"hi"}],"temperature":0.0,"stream":true,"stream_options":{"include_usage":true}}"#,
            ),
        ];
        for (generation, field, expected) in cases {
            let mut request = request(hi.clone(), vec![]);
            request.generation = generation;
            assert_eq!(String::from_utf8(build(&request, field)).unwrap(), expected);
        }
    }
}
