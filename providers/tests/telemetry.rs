//! What the providers report through `tracing`: one `chat` span per attempt with OpenTelemetry
//! GenAI field names. A test binary of its own: tracing caches each callsite's interest
//! process-wide, so a capturing subscriber on one test thread must not race tests that have none.

#![allow(clippy::unwrap_used)]

use rein_providers::{OpenAiCompatible, OpenAiConfig, Simulated, SimulatedConfig};
use rein_runtime::provider::{Adapter, ChunkSink, Message, Request};
use rein_testkit::server::{Server, answer, status_reply};
use rein_testkit::spans;

fn request(attempt: u32) -> Request {
    Request {
        session: "s-1".into(),
        turn: 2,
        step: 1,
        attempt,
        provider: "deepseek".into(),
        model: "deepseek-chat".into(),
        messages: vec![Message::User { text: "hi".into() }].into(),
        tools: vec![],
        generation: Default::default(),
    }
}

#[tokio::test(start_paused = true)]
async fn each_attempt_is_a_chat_span_with_gen_ai_fields() {
    let (spans, _guard) = spans::Spans::capture("chat");
    let server = Server::start(vec![
        status_reply(429, &[], r#"{"error":{"message":"slow down"}}"#),
        answer(&["hel", "lo"]),
    ])
    .await;
    let config = OpenAiConfig::deepseek()
        .with_base_url(&server.base_url())
        .unwrap()
        .with_api_key("sk-span-secret")
        .unwrap();
    let adapter = OpenAiCompatible::new(config).unwrap();
    for attempt in [1, 2] {
        let (tx, _rx) = ChunkSink::channel();
        let _ = adapter.call(request(attempt), tx).await;
    }
    let simulated = Simulated::new(SimulatedConfig::faultless(1)).unwrap();
    let (tx, _rx) = ChunkSink::channel();
    simulated.call(request(1), tx).await.unwrap();

    let spans = spans.fields();
    assert_eq!(spans.len(), 3, "{spans:?}");
    let field = |i: usize, name: &str| spans[i].get(name).map(String::as_str);
    for i in 0..3 {
        assert_eq!(field(i, "gen_ai.operation.name"), Some("chat"));
        assert_eq!(field(i, "gen_ai.request.model"), Some("deepseek-chat"));
        assert_eq!((field(i, "session.id"), field(i, "turn")), (Some("s-1"), Some("2")));
    }
    assert_eq!(field(0, "gen_ai.provider.name"), Some("deepseek"));
    assert_eq!(
        (field(0, "attempt"), field(0, "error.type"), field(0, "http.response.status_code")),
        (Some("1"), Some("RATE_LIMIT"), Some("429"))
    );
    assert_eq!(field(0, "gen_ai.usage.input_tokens"), None, "a failed attempt reports no usage");
    assert_eq!(
        (field(1, "attempt"), field(1, "error.type"), field(1, "http.response.status_code")),
        (Some("2"), None, Some("200"))
    );
    assert_eq!(
        (field(1, "gen_ai.usage.input_tokens"), field(1, "gen_ai.usage.output_tokens")),
        (Some("10"), Some("2"))
    );
    assert_eq!(field(1, "gen_ai.response.model"), Some("deepseek-chat"));
    assert_eq!(field(2, "gen_ai.provider.name"), Some("simulated"));
    assert!(field(2, "gen_ai.usage.output_tokens").is_some());
    let everything = format!("{spans:?}");
    assert!(!everything.contains("sk-span-secret"), "no span holds the key");
}
