//! The Anthropic Messages adapter against a real HTTP server on 127.0.0.1 that speaks the
//! documented stream, one attempt at a time: what it sends, what it streams, and the failure
//! every way of going wrong becomes — the key never in any of it. Time runs paused.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use rein_providers::{Anthropic, AnthropicConfig};
use rein_runtime::event::{ToolCall, Usage};
use rein_runtime::failure::Failure;
use rein_runtime::provider::{
    Adapter, ChunkSink, Completion, Generation, Message, Request, ToolSpec,
};
use rein_testkit::messages;
use rein_testkit::messages::{
    answer, block_stop, error, error_event, message_delta, message_start, message_stop, ping, text,
    text_block, text_parts, tool_answer,
};
use rein_testkit::server::{Part, Reply, Server, status_reply, with_headers};
use serde_json::json;
use tokio::time::Instant;

const KEY: &str = "sk-ant-api03-test-0123456789";

fn adapter_at(base_url: &str) -> Anthropic {
    let config = AnthropicConfig::new().with_base_url(base_url).unwrap().with_api_key(KEY).unwrap();
    Anthropic::new(config).unwrap()
}

fn request() -> Request {
    Request {
        session: "s".into(),
        turn: 1,
        step: 1,
        attempt: 1,
        provider: "anthropic".into(),
        model: "claude-haiku-4-5".into(),
        messages: vec![Message::User { text: "hello".into() }].into(),
        tools: vec![],
        generation: Generation::default(),
    }
}

/// One attempt of `request`: the chunks it streamed and its outcome.
async fn call_request(
    adapter: &Anthropic,
    request: Request,
) -> (Vec<String>, Result<Completion, Failure>) {
    let (tx, mut rx) = ChunkSink::channel();
    let outcome = adapter.call(request, tx).await;
    let mut chunks = vec![];
    while let Ok(chunk) = rx.try_recv() {
        chunks.push(chunk);
    }
    (chunks, outcome)
}

/// One attempt against a server playing `script`.
async fn call_with(script: Vec<Reply>) -> (Server, Vec<String>, Result<Completion, Failure>) {
    let server = Server::start(script).await;
    let (chunks, outcome) = call_request(&adapter_at(&server.base_url()), request()).await;
    (server, chunks, outcome)
}

#[tokio::test(start_paused = true)]
async fn a_streamed_answer_arrives_chunk_by_chunk_with_its_usage() {
    let (server, chunks, outcome) = call_with(vec![answer(&["Hel", "lo", "!"])]).await;
    assert_eq!(chunks, ["Hel", "lo", "!"]);
    assert_eq!(
        outcome.unwrap(),
        Completion {
            tool_calls: vec![],
            usage: Some(Usage { input_tokens: 25, output_tokens: 3 })
        }
    );
    let [seen] = server.seen().try_into().unwrap();
    assert_eq!(seen.path, "/v1/messages");
    let header = |name: &str| seen.headers.get(name).map(|v| v.to_str().unwrap().to_owned());
    assert_eq!(header("x-api-key").as_deref(), Some(KEY));
    assert_eq!(header("anthropic-version").as_deref(), Some("2023-06-01"));
    assert_eq!(header("content-type").as_deref(), Some("application/json"));
    assert_eq!(header("accept").as_deref(), Some("text/event-stream"));
    assert_eq!(header("authorization"), None, "the key travels in x-api-key only");
    assert_eq!(
        seen.json(),
        json!({"model": "claude-haiku-4-5", "max_tokens": 4096,
               "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
               "stream": true})
    );
}

#[tokio::test(start_paused = true)]
async fn tool_use_blocks_become_tool_calls() {
    let reply = tool_answer("Let me echo.", "toolu_01A", "echo", &json!({"text": "hi there"}));
    let (_server, chunks, outcome) = call_with(vec![reply]).await;
    assert_eq!(chunks, ["Let me echo."]);
    assert_eq!(
        outcome.unwrap().tool_calls,
        [ToolCall {
            id: "toolu_01A".into(),
            name: "echo".into(),
            arguments: json!({"text": "hi there"})
        }]
    );
}

#[tokio::test(start_paused = true)]
async fn the_history_tools_and_generation_settings_go_in_anthropics_shape() {
    let server = Server::start(vec![answer(&["ok"])]).await;
    let mut request = request();
    request.messages.push(Message::Assistant {
        text: String::new(),
        tool_calls: vec![ToolCall {
            id: "toolu_1".into(),
            name: "echo".into(),
            arguments: json!({"text": "x"}),
        }],
    });
    request.messages.push(Message::Tool {
        id: "toolu_1".into(),
        output: "x".into(),
        is_error: false,
    });
    request.tools.push(
        ToolSpec::new("echo", "Echoes.")
            .with_parameters(json!({"type": "object", "required": ["text"]})),
    );
    let settings = Generation::new().with_system_prompt("Be brief.").unwrap();
    request.generation = settings.with_temperature(0.2).unwrap().with_max_tokens(64).unwrap();
    call_request(&adapter_at(&server.base_url()), request).await.1.unwrap();
    assert_eq!(
        server.seen()[0].json(),
        json!({
            "model": "claude-haiku-4-5",
            "max_tokens": 64,
            "system": "Be brief.",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "hello"}]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {"text": "x"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}]},
            ],
            "tools": [{"name": "echo", "description": "Echoes.",
                       "input_schema": {"type": "object", "required": ["text"]}}],
            "temperature": 0.2,
            "stream": true,
        })
    );
}

/// Every HTTP error as the failure it becomes, through the real server:
/// (status, headers, error type, message) → (code, providerRetryAfterMs, requestId).
#[tokio::test(start_paused = true)]
async fn http_errors_are_classified_with_their_fields() {
    type Row = (
        u16,
        &'static [(&'static str, &'static str)],
        &'static str,
        &'static str,
        &'static str,
        Option<f64>,
        &'static str,
    );
    let body_id = "req_011CSHoEeqs5C35K2UUqR7Fy";
    let rows: Vec<Row> = vec![
        (529, &[], "overloaded_error", "Overloaded", "SERVER", None, body_id),
        (
            529,
            &[("request-id", "req_529")],
            "overloaded_error",
            "Overloaded",
            "SERVER",
            None,
            "req_529",
        ),
        (
            429,
            &[("retry-after", "12")],
            "rate_limit_error",
            "Number of request tokens has exceeded your per-minute rate limit",
            "RATE_LIMIT",
            Some(12_000.0),
            body_id,
        ),
        (
            429,
            &[],
            "rate_limit_error",
            "You have reached your API usage limits: your organization has crossed its monthly API usage threshold",
            "QUOTA",
            None,
            body_id,
        ),
        (
            400,
            &[],
            "invalid_request_error",
            "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.",
            "QUOTA",
            None,
            body_id,
        ),
        (401, &[], "authentication_error", "invalid x-api-key", "AUTH", None, body_id),
        (
            403,
            &[],
            "permission_error",
            "Your API key does not have permission to use the specified resource.",
            "AUTH",
            None,
            body_id,
        ),
        (
            400,
            &[],
            "invalid_request_error",
            "prompt is too long: 215342 tokens > 200000 maximum",
            "CONTEXT_WINDOW_EXCEEDED",
            None,
            body_id,
        ),
        (
            400,
            &[],
            "invalid_request_error",
            "messages.0.content: Field required",
            "INVALID_REQUEST",
            None,
            body_id,
        ),
        (404, &[], "not_found_error", "model: claude-nope", "INVALID_MODEL", None, body_id),
        (
            500,
            &[("retry-after", "1")],
            "api_error",
            "Internal server error",
            "SERVER",
            Some(1000.0),
            body_id,
        ),
        (408, &[], "timeout_error", "Request timed out", "TIMEOUT", None, body_id),
        (409, &[], "conflict_error", "Conflict", "SERVER", None, body_id),
    ];
    let script = rows
        .iter()
        .map(|(status, headers, kind, message, ..)| error(*status, headers, kind, message))
        .collect();
    let server = Server::start(script).await;
    let adapter = adapter_at(&server.base_url());
    for (status, headers, _, message, code, after, id) in rows {
        let (chunks, outcome) = call_request(&adapter, request()).await;
        let failure = outcome.unwrap_err();
        let row = format!("{status} {headers:?} {message}");
        assert!(chunks.is_empty(), "{row}");
        assert_eq!((failure.code(), failure.message()), (code, message), "{row}");
        assert_eq!(failure.status(), Some(status), "{row}");
        assert_eq!(failure.provider_retry_after_ms(), after, "{row}");
        assert_eq!(failure.request_id(), Some(id), "{row}");
    }
    let (_server, _, outcome) =
        call_with(vec![status_reply(502, &[], "<html>Bad Gateway</html>")]).await;
    let failure = outcome.unwrap_err();
    assert_eq!(
        (failure.code(), failure.message(), failure.request_id()),
        ("SERVER", "Anthropic API error (HTTP 502)", None),
        "a proxy's page, not Anthropic's body"
    );
}

#[tokio::test(start_paused = true)]
async fn an_in_stream_error_event_fails_the_attempt_after_its_chunks() {
    let mut parts = text_parts(&["half ", "an answer"]);
    parts.truncate(5); // message_start, the block, a ping, the two texts
    parts.push(error_event("overloaded_error", "Overloaded"));
    let reply = with_headers(&[("request-id", "req_stream_1")], Reply::Sse(parts));
    let (_server, chunks, outcome) = call_with(vec![reply]).await;
    assert_eq!(chunks, ["half ", "an answer"]);
    let failure = outcome.unwrap_err();
    assert_eq!(
        (failure.code(), failure.message(), failure.status(), failure.request_id()),
        ("SERVER", "Overloaded", None, Some("req_stream_1")),
        "request-id is read before x-request-id"
    );
}

#[tokio::test(start_paused = true)]
async fn a_stream_that_stops_without_message_stop_is_stream_closed_and_a_cut_one_transport() {
    let (_server, chunks, outcome) =
        call_with(vec![Reply::Sse(text_parts(&["almost ", "there"]))]).await;
    assert_eq!(chunks, ["almost ", "there"]);
    let failure = outcome.unwrap_err();
    assert_eq!(
        (failure.code(), failure.message()),
        ("STREAM_CLOSED", "Anthropic closed the stream before message_stop")
    );
    let mut parts = text_parts(&["par", "tial"]);
    parts.truncate(5);
    parts.push(Part::Drop);
    let (_server, chunks, outcome) = call_with(vec![Reply::Sse(parts)]).await;
    assert_eq!(chunks, ["par", "tial"]);
    assert_eq!(outcome.unwrap_err().code(), "TRANSPORT");
}

#[tokio::test(start_paused = true)]
async fn bodies_that_are_not_the_protocol_are_typed_failures() {
    let cases = vec![
        (
            Reply::Sse(vec![
                Part::Data(json!({"choices": [{"delta": {"content": "hi"}}]}).to_string()),
                Part::Raw("data: [DONE]\n\n".into()),
            ]),
            "PROVIDER_ERROR",
            "Anthropic sent a malformed response: stream event is not a Messages event (missing field `type` at line 1 column 40)",
        ),
        (
            Reply::Sse(vec![text_block(0), text(0, "x"), message_stop()]),
            "PROVIDER_ERROR",
            "Anthropic sent a malformed response: content_block_start before message_start",
        ),
        (Reply::Sse(vec![Part::Raw("data: {oops\n\n".into())]), "PROVIDER_ERROR", ""),
        (
            status_reply(
                200,
                &[("content-type", "application/json")],
                &messages::error_body("overloaded_error", "Overloaded"),
            ),
            "SERVER",
            "Overloaded",
        ),
        (
            status_reply(200, &[("content-type", "text/html")], "<html>captive portal</html>"),
            "PROVIDER_ERROR",
            "Anthropic sent a malformed response: a 2xx answer of content type text/html, not an event stream",
        ),
        (
            Reply::Sse(vec![message_start("m", 3), message_delta("max_tokens", 0), message_stop()]),
            "EMPTY_RESPONSE",
            "Anthropic answered with no content and no tool calls (stop_reason: max_tokens)",
        ),
    ];
    for (reply, code, message) in cases {
        let shown = format!("{reply:?}");
        let (_server, _, outcome) = call_with(vec![reply]).await;
        let failure = outcome.unwrap_err();
        assert_eq!(failure.code(), code, "{shown}: {}", failure.message());
        if !message.is_empty() {
            assert_eq!(failure.message(), message, "{shown}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn without_a_key_nothing_is_sent() {
    let server = Server::start(vec![answer(&["never"])]).await;
    let config = AnthropicConfig::from_lookup(|name| {
        (name == "ANTHROPIC_BASE_URL").then(|| "http://127.0.0.1:9".to_owned())
    })
    .unwrap()
    .with_base_url(&server.base_url())
    .unwrap();
    let (_, outcome) = call_request(&Anthropic::new(config).unwrap(), request()).await;
    let failure = outcome.unwrap_err();
    assert_eq!(
        (failure.code(), failure.message()),
        ("MISSING_CREDENTIAL", "no Anthropic API key (set ANTHROPIC_API_KEY)")
    );
    assert!(server.seen().is_empty());
}

#[tokio::test(start_paused = true)]
async fn silence_is_the_watchdogs_and_pings_are_life() {
    let start = Instant::now();
    let mut parts = text_parts(&["thinking"]);
    parts.truncate(4);
    parts.push(Part::Stall);
    let (_server, chunks, outcome) = call_with(vec![Reply::Sse(parts)]).await;
    assert_eq!(chunks, ["thinking"]);
    let failure = outcome.unwrap_err();
    assert_eq!(
        (failure.code(), failure.message()),
        ("TIMEOUT", "Anthropic sent nothing for 300 s")
    );
    assert_eq!(start.elapsed(), Duration::from_secs(300));

    // Ten minutes of pings 200 s apart, then the answer: no total timeout.
    let start = Instant::now();
    let mut parts = vec![message_start("m", 1)];
    for _ in 0..3 {
        parts.push(Part::Sleep(Duration::from_secs(200)));
        parts.push(ping());
    }
    parts.extend([
        text_block(0),
        text(0, "worth it"),
        block_stop(0),
        message_delta("end_turn", 2),
        message_stop(),
    ]);
    let (_server, chunks, outcome) = call_with(vec![Reply::Sse(parts)]).await;
    assert_eq!(chunks, ["worth it"]);
    assert!(outcome.is_ok(), "{outcome:?}");
    assert_eq!(start.elapsed(), Duration::from_secs(600));
}

/// The key a server was sent in `x-api-key`, echoed every way a server can: the same redaction
/// as the OpenAI-compatible adapter's, through the same scrubber.
#[tokio::test(start_paused = true)]
async fn a_key_echoed_in_a_header_a_body_a_stream_or_an_in_stream_error_is_scrubbed() {
    // An error whose request id and message both echo the key.
    let (_server, chunks, outcome) = call_with(vec![Reply::FromHeader("x-api-key", |key| {
        error(529, &[("request-id", key)], "overloaded_error", &format!("busy, {key}"))
    })])
    .await;
    let failure = outcome.unwrap_err();
    assert_eq!(
        (failure.code(), failure.message(), failure.request_id()),
        ("SERVER", "busy, [redacted]", Some("[redacted]"))
    );
    assert!(chunks.is_empty());

    // An answer that streams the key cut in three, and puts it in a tool call.
    let (_server, chunks, outcome) = call_with(vec![Reply::FromHeader("x-api-key", |key| {
        let (a, rest) = key.split_at(4);
        let (b, c) = rest.split_at(9);
        with_headers(
            &[("request-id", key)],
            Reply::Sse(vec![
                message_start("m", 1),
                text_block(0),
                text(0, &format!("your key is {a}")),
                text(0, b),
                text(0, &format!("{c}, isn't it?")),
                block_stop(0),
                messages::tool_use(1, &format!("toolu_{key}"), "echo"),
                messages::input_json(1, &json!({"text": key}).to_string()),
                block_stop(1),
                message_delta("tool_use", 9),
                message_stop(),
            ]),
        )
    })])
    .await;
    assert_eq!(chunks.concat(), "your key is [redacted], isn't it?");
    assert!(chunks.iter().all(|c| !c.contains(&KEY[..4])), "no piece of the key: {chunks:?}");
    assert_eq!(
        outcome.unwrap().tool_calls,
        [ToolCall {
            id: "toolu_[redacted]".into(),
            name: "echo".into(),
            arguments: json!({"text": "[redacted]"})
        }]
    );

    // An in-stream error event that echoes it, under an echoed request id.
    let (_server, chunks, outcome) = call_with(vec![Reply::FromHeader("x-api-key", |key| {
        let mut parts = text_parts(&["partial "]);
        parts.truncate(4);
        parts.push(error_event("api_error", &format!("internal error for {key}")));
        with_headers(&[("request-id", key)], Reply::Sse(parts))
    })])
    .await;
    let failure = outcome.unwrap_err();
    assert_eq!(
        (failure.code(), failure.message(), failure.request_id()),
        ("SERVER", "internal error for [redacted]", Some("[redacted]"))
    );
    assert_eq!(chunks, ["partial "]);
    let everything = format!("{failure:?} {}", serde_json::to_string(&failure).unwrap());
    assert!(!everything.contains(KEY), "{everything}");
    let adapter = adapter_at("http://127.0.0.1:9");
    assert!(!format!("{adapter:?} {:?}", adapter.config()).contains(KEY));
}

#[tokio::test(start_paused = true)]
async fn a_base_urls_user_information_goes_as_basic_auth_beside_the_key_and_never_leaks() {
    let server = Server::start(vec![Reply::FromAuth(|auth| {
        error(500, &[("request-id", auth)], "api_error", &format!("you sent {auth}"))
    })])
    .await;
    let url = format!("http://me:hunter2@{}", server.addr());
    let config = AnthropicConfig::new().with_base_url(&url).unwrap().with_api_key(KEY).unwrap();
    assert_eq!(config.base_url(), format!("http://[redacted]@{}", server.addr()));
    let (_, outcome) = call_request(&Anthropic::new(config).unwrap(), request()).await;
    let failure = outcome.unwrap_err();
    assert_eq!(failure.message(), "you sent Basic [redacted]");
    assert_eq!(failure.request_id(), Some("Basic [redacted]"));
    assert_eq!(server.seen()[0].headers["x-api-key"], KEY);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_call_closes_its_connection() {
    let mut parts = text_parts(&["streaming"]);
    parts.truncate(4);
    parts.push(Part::KeepAliveForever(Duration::from_secs(1)));
    let server = Server::start(vec![Reply::Sse(parts)]).await;
    let adapter = adapter_at(&server.base_url());
    let (tx, mut rx) = ChunkSink::channel();
    let mut call = adapter.call(request(), tx);
    tokio::select! {
        _ = &mut call => panic!("the stream never ends by itself"),
        first = rx.recv() => assert_eq!(first.as_deref(), Some("streaming")),
    }
    drop(call);
    tokio::time::timeout(Duration::from_secs(10), server.bodies_dropped(1)).await.unwrap();
}
