//! The OpenAI-compatible adapter against a real HTTP server on 127.0.0.1, one attempt at a time:
//! what it sends, what it streams, and the failure every way of going wrong becomes. Time runs
//! paused: the watchdog's 300 s pass in no real time.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, SystemTime};

use rein_providers::{OpenAiCompatible, OpenAiConfig};
use rein_runtime::event::{ToolCall, Usage};
use rein_runtime::failure::Failure;
use rein_runtime::provider::{Adapter, ChunkSink, Completion, Message, Request, ToolSpec};
use rein_testkit::server::{
    Part, Reply, Server, answer, delta, done, free_addr, status_reply, usage, with_headers,
};
use serde_json::json;
use tokio::time::Instant;

const KEY: &str = "sk-test-0123456789";

fn adapter_at(base_url: &str) -> OpenAiCompatible {
    let config =
        OpenAiConfig::deepseek().with_base_url(base_url).unwrap().with_api_key(KEY).unwrap();
    OpenAiCompatible::new(config).unwrap()
}

fn request() -> Request {
    Request {
        session: "s".into(),
        turn: 1,
        step: 1,
        attempt: 1,
        provider: "deepseek".into(),
        model: "deepseek-chat".into(),
        messages: vec![Message::User { text: "hello".into() }].into(),
        tools: vec![],
        generation: Default::default(),
    }
}

/// One attempt: the chunks it streamed and its outcome.
async fn call(adapter: &OpenAiCompatible) -> (Vec<String>, Result<Completion, Failure>) {
    let (tx, mut rx) = ChunkSink::channel();
    let outcome = adapter.call(request(), tx).await;
    let mut chunks = vec![];
    while let Ok(chunk) = rx.try_recv() {
        chunks.push(chunk);
    }
    (chunks, outcome)
}

/// One attempt against a server playing `script`.
async fn call_with(script: Vec<Reply>) -> (Server, Vec<String>, Result<Completion, Failure>) {
    let server = Server::start(script).await;
    let (chunks, outcome) = call(&adapter_at(&server.base_url())).await;
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
            usage: Some(Usage { input_tokens: 10, output_tokens: 3 })
        }
    );
    let [seen] = server.seen().try_into().unwrap();
    let header = |name: &str| seen.headers.get(name).unwrap().to_str().unwrap().to_owned();
    assert_eq!(header("authorization"), format!("Bearer {KEY}"));
    assert_eq!(header("content-type"), "application/json");
    assert_eq!(header("accept"), "text/event-stream");
    assert_eq!(
        seen.json(),
        json!({"model": "deepseek-chat", "messages": [{"role": "user", "content": "hello"}],
               "stream": true, "stream_options": {"include_usage": true}})
    );
}

#[tokio::test(start_paused = true)]
async fn tool_call_deltas_assemble_into_calls_and_reasoning_is_not_answer_text() {
    let call_delta = |index: u32, id: Option<&str>, name: Option<&str>, args: &str| {
        let mut call = json!({"index": index, "function": {"arguments": args}});
        if let Some(id) = id {
            call["id"] = json!(id);
        }
        if let Some(name) = name {
            call["function"]["name"] = json!(name);
        }
        Part::Data(json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}).to_string())
    };
    let script = vec![Reply::Sse(vec![
        Part::Data(
            json!({"choices": [{"index": 0, "delta": {"reasoning_content": "Let me echo."}}]})
                .to_string(),
        ),
        delta("On it."),
        call_delta(0, Some("call_a"), Some("echo"), "{\"te"),
        call_delta(1, Some("call_b"), Some("echo"), "{}"),
        call_delta(0, None, None, "xt\": \"hi\"}"),
        Part::Data(
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
                .to_string(),
        ),
        usage(5, 7),
        done(),
    ])];
    let (_server, chunks, outcome) = call_with(script).await;
    assert_eq!(chunks, ["On it."], "reasoning is never streamed as answer text");
    assert_eq!(
        outcome.unwrap().tool_calls,
        [
            ToolCall { id: "call_a".into(), name: "echo".into(), arguments: json!({"text": "hi"}) },
            ToolCall { id: "call_b".into(), name: "echo".into(), arguments: json!({}) },
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn the_history_and_tools_are_sent_in_the_wire_format() {
    let server = Server::start(vec![answer(&["ok"])]).await;
    let mut request = request();
    request.messages.push(Message::Assistant {
        text: String::new(),
        tool_calls: vec![ToolCall {
            id: "c1".into(),
            name: "echo".into(),
            arguments: json!({"text": "x"}),
        }],
    });
    request.messages.push(Message::Tool { id: "c1".into(), output: "x".into(), is_error: false });
    request.tools.push(
        ToolSpec::new("echo", "Echoes.")
            .with_parameters(json!({"type": "object", "required": ["text"]})),
    );
    let (tx, _rx) = ChunkSink::channel();
    adapter_at(&server.base_url()).call(request, tx).await.unwrap();
    let body = server.seen()[0].json();
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "echo", "arguments": "{\"text\":\"x\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "x"},
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {"name": "echo", "description": "Echoes.",
                "parameters": {"type": "object", "required": ["text"]}}}])
    );
}

/// Every HTTP error, with and without delay headers, as the failure it becomes:
/// (status, headers, body) → (code, message, providerRetryAfterMs, requestId).
#[tokio::test(start_paused = true)]
async fn http_errors_are_classified_with_their_fields() {
    type Row = (
        u16,
        &'static [(&'static str, &'static str)],
        &'static str,
        &'static str,
        &'static str,
        Option<f64>,
        Option<&'static str>,
    );
    let busy = r#"{"error":{"message":"Server busy","type":"server_error"}}"#;
    let rows: Vec<Row> = vec![
        (
            401,
            &[],
            r#"{"error":{"message":"Authentication Fails"}}"#,
            "AUTH",
            "Authentication Fails",
            None,
            None,
        ),
        (
            403,
            &[("x-request-id", "r-403")],
            "",
            "AUTH",
            "DeepSeek API error (HTTP 403)",
            None,
            Some("r-403"),
        ),
        (
            402,
            &[],
            r#"{"error":{"message":"Insufficient Balance"}}"#,
            "QUOTA",
            "Insufficient Balance",
            None,
            None,
        ),
        (413, &[], "too large", "INVALID_REQUEST", "DeepSeek API error (HTTP 413)", None, None),
        (
            400,
            &[],
            r#"{"error":{"message":"This model's maximum context length is 65536 tokens."}}"#,
            "CONTEXT_WINDOW_EXCEEDED",
            "This model's maximum context length is 65536 tokens.",
            None,
            None,
        ),
        (
            400,
            &[],
            r#"{"error":{"message":"Invalid temperature"}}"#,
            "INVALID_REQUEST",
            "Invalid temperature",
            None,
            None,
        ),
        (
            422,
            &[],
            r#"{"error":{"message":"Invalid Parameters"}}"#,
            "INVALID_REQUEST",
            "Invalid Parameters",
            None,
            None,
        ),
        (
            429,
            &[],
            r#"{"error":{"message":"Rate limit reached"}}"#,
            "RATE_LIMIT",
            "Rate limit reached",
            None,
            None,
        ),
        (
            429,
            &[("retry-after", "3")],
            r#"{"error":{"message":"Rate limit reached"}}"#,
            "RATE_LIMIT",
            "Rate limit reached",
            Some(3000.0),
            None,
        ),
        (
            429,
            &[("retry-after-ms", "1250"), ("retry-after", "3")],
            "",
            "RATE_LIMIT",
            "DeepSeek API error (HTTP 429)",
            Some(1250.0),
            None,
        ),
        (
            429,
            &[("retry-after", "0")],
            "",
            "RATE_LIMIT",
            "DeepSeek API error (HTTP 429)",
            None,
            None,
        ),
        (
            429,
            &[("x-deepseek-request-id", "ds-1")],
            r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota"}}"#,
            "QUOTA",
            "You exceeded your current quota, please check your plan and billing details.",
            None,
            Some("ds-1"),
        ),
        (500, &[], busy, "SERVER", "Server busy", None, None),
        (
            502,
            &[],
            "<html>bad gateway</html>",
            "SERVER",
            "DeepSeek API error (HTTP 502)",
            None,
            None,
        ),
        (
            503,
            &[("retry-after", "2"), ("x-request-id", "r-503")],
            busy,
            "SERVER",
            "Server busy",
            Some(2000.0),
            Some("r-503"),
        ),
        (404, &[], r#"{"error":{"message":"Not Found"}}"#, "HTTP_404", "Not Found", None, None),
        (
            408,
            &[("x-request-id", "r-408")],
            r#"{"error":{"message":"Request timed out upstream"}}"#,
            "TIMEOUT",
            "Request timed out upstream",
            None,
            Some("r-408"),
        ),
        (409, &[], "", "SERVER", "DeepSeek API error (HTTP 409)", None, None),
        (410, &[], "", "HTTP_410", "DeepSeek API error (HTTP 410)", None, None),
    ];
    let script = rows
        .iter()
        .map(|(status, headers, body, ..)| status_reply(*status, headers, body))
        .collect();
    let server = Server::start(script).await;
    let adapter = adapter_at(&server.base_url());
    for (status, headers, body, code, message, after, id) in rows {
        let (chunks, outcome) = call(&adapter).await;
        let failure = outcome.unwrap_err();
        let row = format!("{status} {headers:?} {body}");
        assert!(chunks.is_empty(), "{row}");
        assert_eq!((failure.code(), failure.message()), (code, message), "{row}");
        assert_eq!(failure.status(), Some(status), "{row}");
        assert_eq!(failure.provider_retry_after_ms(), after, "{row}");
        assert_eq!(failure.request_id(), id, "{row}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_http_date_becomes_a_delay_from_now() {
    let at = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(120));
    let (_server, _, outcome) =
        call_with(vec![status_reply(429, &[("retry-after", &at)], "")]).await;
    let failure = outcome.unwrap_err();
    let after = failure.provider_retry_after_ms().unwrap();
    // HTTP dates have whole seconds: the delay is within the second before 120 s.
    assert!((118_000.0..=120_000.0).contains(&after), "{after}");
    let past = httpdate::fmt_http_date(SystemTime::now() - Duration::from_secs(5));
    let (_server, _, outcome) =
        call_with(vec![status_reply(503, &[("retry-after", &past)], "")]).await;
    assert_eq!(outcome.unwrap_err().provider_retry_after_ms(), None, "a past date is no delay");
}

#[tokio::test(start_paused = true)]
async fn a_refused_connection_is_transport() {
    let addr = free_addr().await;
    let (chunks, outcome) = call(&adapter_at(&format!("http://{addr}"))).await;
    let failure = outcome.unwrap_err();
    assert_eq!(failure.code(), "TRANSPORT");
    assert!(failure.message().starts_with("DeepSeek connection failed: "), "{}", failure.message());
    assert_eq!(failure.status(), None);
    assert!(chunks.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_connection_dropped_mid_stream_is_transport_after_its_chunks() {
    let script = vec![Reply::Sse(vec![delta("par"), delta("tial"), Part::Drop])];
    let (_server, chunks, outcome) = call_with(script).await;
    assert_eq!(chunks, ["par", "tial"]);
    let failure = outcome.unwrap_err();
    assert_eq!(failure.code(), "TRANSPORT", "{}", failure.message());
    assert_eq!(failure.request_id(), Some("req-stream"), "the stream's request id is kept");
}

#[tokio::test(start_paused = true)]
async fn a_clean_end_without_done_is_stream_closed() {
    let script = vec![Reply::Sse(vec![delta("almost"), usage(1, 1)])];
    let (_server, chunks, outcome) = call_with(script).await;
    assert_eq!(chunks, ["almost"]);
    let failure = outcome.unwrap_err();
    assert_eq!(
        (failure.code(), failure.message()),
        ("STREAM_CLOSED", "DeepSeek closed the stream before [DONE]")
    );
}

#[tokio::test(start_paused = true)]
async fn a_stalled_stream_is_a_timeout_after_the_watchdog() {
    let start = Instant::now();
    let script = vec![Reply::Sse(vec![delta("thinking"), Part::Stall])];
    let (_server, chunks, outcome) = call_with(script).await;
    assert_eq!(chunks, ["thinking"]);
    let failure = outcome.unwrap_err();
    assert_eq!((failure.code(), failure.message()), ("TIMEOUT", "DeepSeek sent nothing for 300 s"));
    assert_eq!(start.elapsed(), Duration::from_secs(300));
}

#[tokio::test(start_paused = true)]
async fn silence_before_the_headers_is_a_timeout_too() {
    let start = Instant::now();
    let server =
        Server::start(vec![Reply::Delay(Duration::from_secs(3600), Box::new(answer(&["late"])))])
            .await;
    let config = OpenAiConfig::deepseek()
        .with_base_url(&server.base_url())
        .unwrap()
        .with_api_key(KEY)
        .unwrap()
        .with_idle_timeout(Duration::from_secs(30));
    let (_, outcome) = call(&OpenAiCompatible::new(config).unwrap()).await;
    assert_eq!(outcome.unwrap_err().code(), "TIMEOUT");
    assert_eq!(start.elapsed(), Duration::from_secs(30), "the configured watchdog");
}

#[tokio::test(start_paused = true)]
async fn keep_alive_comments_keep_a_slow_stream_alive() {
    let start = Instant::now();
    // 20 minutes of keep-alives 200 s apart (each gap under the 300 s watchdog), then the answer.
    let mut parts = vec![Part::Comment];
    for _ in 0..6 {
        parts.push(Part::Sleep(Duration::from_secs(200)));
        parts.push(Part::Comment);
    }
    parts.extend([delta("worth"), delta(" the wait"), usage(1, 2), done()]);
    let (_server, chunks, outcome) = call_with(vec![Reply::Sse(parts)]).await;
    assert_eq!(chunks, ["worth", " the wait"]);
    assert!(outcome.is_ok(), "{outcome:?}");
    assert_eq!(start.elapsed(), Duration::from_secs(1200), "no total timeout");
}

#[tokio::test(start_paused = true)]
async fn in_stream_errors_empty_answers_and_bad_arguments_are_typed() {
    let in_stream = |error: serde_json::Value| {
        Reply::Sse(vec![delta("so far"), Part::Data(json!({"error": error}).to_string()), done()])
    };
    let bad_args = Reply::Sse(vec![
        Part::Data(json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "c", "function": {"name": "echo", "arguments": "{\"text\": tru"}}]}}]}).to_string()),
        done(),
    ]);
    let cases = vec![
        (
            in_stream(json!({"message": "Rate limit reached", "code": 429})),
            "RATE_LIMIT",
            "Rate limit reached",
        ),
        (
            in_stream(json!({"message": "overloaded", "type": "server_error"})),
            "SERVER",
            "overloaded",
        ),
        (
            Reply::Sse(vec![usage(3, 0), done()]),
            "EMPTY_RESPONSE",
            "DeepSeek answered with no content and no tool calls",
        ),
        (bad_args, "PROVIDER_ERROR", ""),
        (Reply::Sse(vec![Part::Raw("data: {oops\n\n".into()), done()]), "PROVIDER_ERROR", ""),
        (
            status_reply(
                200,
                &[("content-type", "application/json")],
                r#"{"error":{"message":"quota exceeded"}}"#,
            ),
            "QUOTA",
            "quota exceeded",
        ),
        (
            status_reply(200, &[("content-type", "text/html")], "<html>captive portal</html>"),
            "PROVIDER_ERROR",
            "DeepSeek sent a malformed response: a 2xx answer of content type text/html, not an event stream",
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
    let config = OpenAiConfig::deepseek().with_base_url(&server.base_url()).unwrap();
    let (_, outcome) = call(&OpenAiCompatible::new(config).unwrap()).await;
    let failure = outcome.unwrap_err();
    assert_eq!(
        (failure.code(), failure.message()),
        ("MISSING_CREDENTIAL", "no DeepSeek API key (set DEEPSEEK_API_KEY)")
    );
    assert!(server.seen().is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_key_never_leaks_into_a_failure_or_a_debug_output() {
    let (_server, _, outcome) = call_with(vec![Reply::EchoAuth]).await;
    let failure = outcome.unwrap_err();
    assert_eq!(failure.code(), "AUTH");
    assert_eq!(failure.message(), "Incorrect API key provided: [redacted]");
    let everything = format!("{failure:?} {}", serde_json::to_string(&failure).unwrap());
    assert!(!everything.contains(KEY), "{everything}");
    let adapter = adapter_at("http://127.0.0.1:9");
    assert!(!format!("{adapter:?} {:?}", adapter.config()).contains(KEY));
}

/// The key a server was sent, from its `Authorization: Bearer KEY` header.
fn echoed(auth: &str) -> String {
    auth.trim_start_matches("Bearer ").to_owned()
}

#[tokio::test(start_paused = true)]
async fn a_key_echoed_in_a_header_a_body_a_stream_or_an_in_stream_error_is_scrubbed() {
    // An error whose request id and message both echo the credential.
    let (_server, chunks, outcome) = call_with(vec![Reply::FromAuth(|auth| {
        let body = json!({"error": {"message": format!("bad key {}", echoed(auth))}});
        status_reply(503, &[("x-request-id", auth)], &body.to_string())
    })])
    .await;
    let failure = outcome.unwrap_err();
    assert_eq!(
        (failure.code(), failure.message(), failure.request_id()),
        ("SERVER", "bad key [redacted]", Some("Bearer [redacted]"))
    );
    assert!(chunks.is_empty());

    // An answer that streams the key cut in three, and puts it in a tool call.
    let (_server, chunks, outcome) = call_with(vec![Reply::FromAuth(|auth| {
        let key = echoed(auth);
        let (a, rest) = key.split_at(4);
        let (b, c) = rest.split_at(5);
        let call = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0,
            "id": format!("call-{key}"), "function": {"name": "echo",
            "arguments": json!({"text": key.clone()}).to_string()}}]}}]});
        with_headers(
            &[("x-request-id", auth)],
            Reply::Sse(vec![
                delta(&format!("your key is {a}")),
                delta(b),
                delta(&format!("{c}, isn't it?")),
                Part::Data(call.to_string()),
                done(),
            ]),
        )
    })])
    .await;
    assert_eq!(chunks.concat(), "your key is [redacted], isn't it?");
    assert!(chunks.iter().all(|c| !c.contains(&KEY[..4])), "no piece of the key: {chunks:?}");
    let completion = outcome.unwrap();
    assert_eq!(
        completion.tool_calls,
        [ToolCall {
            id: "call-[redacted]".into(),
            name: "echo".into(),
            arguments: json!({"text": "[redacted]"})
        }]
    );

    // An in-stream error event that echoes it, under an echoed request id.
    let (_server, chunks, outcome) = call_with(vec![Reply::FromAuth(|auth| {
        let error = json!({"error": {"message": format!("overloaded, {auth}"), "code": 503}});
        with_headers(
            &[("x-request-id", auth)],
            Reply::Sse(vec![delta("partial "), Part::Data(error.to_string())]),
        )
    })])
    .await;
    let failure = outcome.unwrap_err();
    assert_eq!(
        (failure.code(), failure.message(), failure.request_id()),
        ("SERVER", "overloaded, Bearer [redacted]", Some("Bearer [redacted]"))
    );
    assert_eq!(chunks, ["partial "]);

    // A stream cut while the key was half sent: the tail held back goes out at the end, never
    // more of the key than the server sent.
    let (_server, chunks, outcome) = call_with(vec![Reply::FromAuth(|auth| {
        let key = echoed(auth);
        Reply::Sse(vec![delta(&format!("a {key} b {}", &key[..6])), Part::Drop])
    })])
    .await;
    assert_eq!(outcome.unwrap_err().code(), "TRANSPORT");
    assert_eq!(chunks.concat(), format!("a [redacted] b {}", &KEY[..6]));
}

#[tokio::test(start_paused = true)]
async fn a_keyless_route_sends_no_authorization_header() {
    let server = Server::start(vec![answer(&["local ", "answer"])]).await;
    let config = OpenAiConfig::openai().with_base_url(&server.base_url()).unwrap();
    assert!(config.keyless());
    let (chunks, outcome) = call(&OpenAiCompatible::new(config).unwrap()).await;
    assert_eq!(chunks.concat(), "local answer");
    assert!(outcome.is_ok(), "{outcome:?}");
    let [seen] = server.seen().try_into().unwrap();
    assert_eq!(seen.headers.get("authorization"), None, "{:?}", seen.headers);
    assert_eq!(seen.headers["content-type"], "application/json");
}

#[tokio::test(start_paused = true)]
async fn a_base_urls_user_information_is_basic_auth_unless_a_key_replaces_it_and_never_leaks() {
    let echo = || {
        Reply::FromAuth(|auth| {
            let body = json!({"error": {"message": format!("you sent {auth}")}});
            status_reply(500, &[("x-request-id", auth)], &body.to_string())
        })
    };
    let server = Server::start(vec![echo(), echo()]).await;
    let url = format!("http://me:hunter2@{}", server.addr());

    // No key: the URL's user information goes as Basic auth (keyless otherwise).
    let config = OpenAiConfig::openai().with_base_url(&url).unwrap();
    assert_eq!(config.base_url(), format!("http://[redacted]@{}", server.addr()));
    let (_, outcome) = call(&OpenAiCompatible::new(config).unwrap()).await;
    let failure = outcome.unwrap_err();
    assert_eq!(failure.message(), "you sent Basic [redacted]");
    assert_eq!(failure.request_id(), Some("Basic [redacted]"));

    // A key: its Bearer header replaces the Basic one (one Authorization header, not two).
    let config = OpenAiConfig::openai().with_base_url(&url).unwrap().with_api_key(KEY).unwrap();
    let (_, outcome) = call(&OpenAiCompatible::new(config).unwrap()).await;
    assert_eq!(outcome.unwrap_err().message(), "you sent Bearer [redacted]");
    let seen = server.seen();
    assert!(seen[0].headers["authorization"].to_str().unwrap().starts_with("Basic "));
    let auth: Vec<_> = seen[1].headers.get_all("authorization").iter().collect();
    assert_eq!(auth, [format!("Bearer {KEY}").as_str()]);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_call_closes_its_connection() {
    let server = Server::start(vec![Reply::Sse(vec![
        delta("streaming"),
        Part::KeepAliveForever(Duration::from_secs(1)),
    ])])
    .await;
    let adapter = adapter_at(&server.base_url());
    let (tx, mut rx) = ChunkSink::channel();
    // Boxed, so that dropping it below drops the future itself.
    let mut call = adapter.call(request(), tx);
    tokio::select! {
        _ = &mut call => panic!("the stream never ends by itself"),
        first = rx.recv() => assert_eq!(first.as_deref(), Some("streaming")),
    }
    assert_eq!(server.dropped(), 0, "the stream is live");
    drop(call);
    // The server notices at its next keep-alive write: the connection is gone.
    tokio::time::timeout(Duration::from_secs(10), server.bodies_dropped(1)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_connection_that_cannot_open_in_time_is_a_timeout() {
    // A listener that never accepts, with its accept queue full: the next SYN is dropped, so
    // the adapter's connect hangs until the connect timeout.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut fillers = vec![];
    for _ in 0..2 {
        let connect = tokio::net::TcpStream::connect(addr);
        if let Ok(Ok(stream)) = tokio::time::timeout(Duration::from_millis(50), connect).await {
            fillers.push(stream);
        }
    }
    let start = Instant::now();
    let config = OpenAiConfig::deepseek()
        .with_base_url(&format!("http://{addr}"))
        .unwrap()
        .with_api_key(KEY)
        .unwrap()
        .with_connect_timeout(Duration::from_secs(7));
    let (_, outcome) = call(&OpenAiCompatible::new(config).unwrap()).await;
    let failure = outcome.unwrap_err();
    assert_eq!(failure.code(), "TIMEOUT", "{}", failure.message());
    assert!(
        failure.message().starts_with("DeepSeek connection timed out after 7 s"),
        "{}",
        failure.message()
    );
    assert_eq!(start.elapsed(), Duration::from_secs(7));
    drop((listener, fillers));
}
