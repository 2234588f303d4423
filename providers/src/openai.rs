//! [`OpenAiCompatible`]: the adapter for any OpenAI-compatible `/chat/completions`, streaming
//! (DeepSeek is the first preset). Only wiring: the body, the stream, the assembly and the
//! classification are the pure modules of this crate.
//!
//! One call is one attempt: `POST {base}/chat/completions` with `stream: true`, then the SSE
//! stream is read until `[DONE]`, each content delta going to the chunk sink as it arrives.
//! Failures (see "Providers" in `docs/runtime-semantics.md`):
//! - no key → `MISSING_CREDENTIAL`, without a request (unless the configuration is keyless: then
//!   the request goes out with no `Authorization` header);
//! - a refused or reset connection → `TRANSPORT`; the connect timeout → `TIMEOUT`;
//! - an HTTP error → [`classify::http_failure`];
//! - after a 2xx: silence longer than the watchdog (before the headers too) → `TIMEOUT`; a read
//!   that fails → `TRANSPORT`; a clean end without `[DONE]` → `STREAM_CLOSED`; an in-stream
//!   error, a malformed chunk, an empty answer → what [`Assembler`] says.
//!
//! Cancellation is dropping the future: that drops the response and its body, and the HTTP
//! client closes a connection whose body was not read to the end. There is no total timeout.
//! The key goes out only as a sensitive `Authorization` header (it replaces the `Basic` one the
//! HTTP client makes of a base URL's user information). Whatever the server sends back leaves
//! the adapter through its [`Scrubber`] only: [`Adapter::call`] gives the attempt a
//! [`ScrubbedSink`] instead of the runtime's sink, and scrubs the answer or the failure it ends
//! with, so no secret the server echoes reaches a log, a terminal, a report or a span.

use std::fmt;
use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use rein_runtime::BoxFuture;
use rein_runtime::failure::{self, Failure};
use rein_runtime::provider::{Adapter, ChunkSink, Completion, Request};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use tracing::Instrument;

use crate::assembly::{Assembled, Assembler};
use crate::classify::{self, typed};
use crate::config::{OpenAiConfig, Preset, ProviderConfigError};
use crate::request_body;
use crate::response_headers;
use crate::scrub::{ScrubbedSink, Scrubber};
use crate::sse::{self, Frame, SseError};
use crate::telemetry;

/// The most of an error body read to classify it.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// An OpenAI-compatible streaming adapter. Cheap to clone (one shared HTTP client, so
/// connections are pooled across calls); its `Debug` redacts the key.
#[derive(Clone)]
pub struct OpenAiCompatible {
    inner: Arc<Inner>,
}

struct Inner {
    config: OpenAiConfig,
    endpoint: String,
    client: reqwest::Client,
    scrubber: Scrubber,
}

impl fmt::Debug for OpenAiCompatible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiCompatible").field("config", &self.inner.config).finish()
    }
}

impl OpenAiCompatible {
    /// An adapter for `config` (builds its HTTP client: rustls, the configured connect timeout,
    /// no total timeout; and its scrubber, of the key, the base URL's password and the `Basic`
    /// credential the client makes of them).
    pub fn new(config: OpenAiConfig) -> Result<Self, ProviderConfigError> {
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout())
            .tcp_nodelay(true)
            .build()
            .map_err(|e| ProviderConfigError::Client(classify::error_chain(&e)))?;
        let endpoint = config.endpoint();
        let basic = basic_credential(&client, &endpoint);
        let scrubber = Scrubber::new(config.secrets().into_iter().chain(basic));
        Ok(Self { inner: Arc::new(Inner { config, endpoint, client, scrubber }) })
    }

    /// An adapter for `preset`, configured from the process environment
    /// ([`OpenAiConfig::from_env`]).
    pub fn from_env(preset: Preset) -> Result<Self, ProviderConfigError> {
        Self::new(OpenAiConfig::from_env(preset)?)
    }

    /// Its configuration.
    pub fn config(&self) -> &OpenAiConfig {
        &self.inner.config
    }
}

impl Adapter for OpenAiCompatible {
    fn call(
        &self,
        request: Request,
        chunks: ChunkSink,
    ) -> BoxFuture<'static, Result<Completion, Failure>> {
        let inner = Arc::clone(&self.inner);
        let span = telemetry::attempt_span(inner.config.name(), &request);
        let record = span.clone();
        Box::pin(
            async move {
                let mut sink = ScrubbedSink::new(chunks, &inner.scrubber);
                let outcome = inner.attempt(&request, &mut sink).await;
                sink.finish();
                let outcome = match outcome {
                    Ok(answer) => Ok(inner.scrubber.assembled(answer)),
                    Err(failure) => Err(inner.scrubber.failure(failure)),
                };
                telemetry::record(&record, &outcome);
                outcome.map(|answer| answer.completion)
            }
            .instrument(span),
        )
    }
}

impl Inner {
    fn label(&self) -> &str {
        self.config.label()
    }

    async fn attempt(
        &self,
        request: &Request,
        chunks: &mut ScrubbedSink,
    ) -> Result<Assembled, Failure> {
        let mut headers = HeaderMap::new();
        match self.config.api_key() {
            Some(key) => {
                let mut auth = HeaderValue::from_str(&key.bearer()).map_err(|_| {
                    typed(
                        failure::INVALID_CREDENTIAL,
                        format!("the {} API key cannot be sent in a header", self.label()),
                    )
                })?;
                auth.set_sensitive(true);
                headers.insert(AUTHORIZATION, auth);
            }
            None if self.config.keyless() => {}
            None => return Err(self.missing_key()),
        }
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        let body = request_body::build(request, self.config.system_prompt());
        let idle = self.config.idle_timeout();
        // `headers` replaces, so the key's Authorization replaces a Basic one from the URL.
        let send = self.client.post(&self.endpoint).headers(headers).body(body).send();
        let response = match tokio::time::timeout(idle, send).await {
            Err(_) => return Err(classify::dead_air(self.label(), idle)),
            Ok(Err(error)) => return Err(self.request_error(&error)),
            Ok(Ok(response)) => response,
        };
        let status = response.status().as_u16();
        telemetry::record_status(&tracing::Span::current(), status);
        let headers = response.headers().clone();
        if !response.status().is_success() {
            let body = read_text(response, idle, ERROR_BODY_LIMIT).await;
            return Err(classify::http_failure(
                self.label(),
                status,
                &headers,
                &body,
                SystemTime::now(),
            ));
        }
        let answer = if is_event_stream(&headers) {
            self.stream(response, chunks, idle).await
        } else {
            Err(self.not_a_stream(response, &headers, idle).await)
        };
        answer.map_err(|failure| match response_headers::request_id(&headers) {
            Some(id) => failure.clone().with_request_id(id).unwrap_or(failure),
            None => failure,
        })
    }

    /// Reads the event stream to `[DONE]`, streaming content deltas into `chunks`.
    async fn stream(
        &self,
        response: reqwest::Response,
        chunks: &mut ScrubbedSink,
        idle: Duration,
    ) -> Result<Assembled, Failure> {
        let label = self.label();
        let mut frames = pin!(sse::frames(response.bytes_stream(), idle));
        let mut assembler = Assembler::new(label);
        while let Some(frame) = frames.next().await {
            match frame {
                Ok(Frame::Data(data)) => {
                    if let Some(delta) = assembler.feed(&data)? {
                        chunks.send(&delta);
                    }
                }
                Ok(Frame::Done) => return assembler.finish(),
                Err(SseError::Idle(silence)) => return Err(classify::dead_air(label, silence)),
                Err(SseError::Transport(detail)) => {
                    return Err(classify::transport(label, &detail));
                }
                Err(SseError::Malformed(detail)) => {
                    return Err(classify::malformed(label, &detail));
                }
            }
        }
        Err(classify::stream_closed(label))
    }

    /// A 2xx answer that is not an event stream: an error object if it holds one, else
    /// malformed.
    async fn not_a_stream(
        &self,
        response: reqwest::Response,
        headers: &HeaderMap,
        idle: Duration,
    ) -> Failure {
        let body = read_text(response, idle, ERROR_BODY_LIMIT).await;
        let error = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("error").cloned())
            .filter(|e| !e.is_null());
        match error {
            Some(error) => classify::stream_error(self.label(), &error),
            None => {
                let kind = headers
                    .get(CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("(none)")
                    .to_owned();
                let detail = format!("a 2xx answer of content type {kind}, not an event stream");
                classify::malformed(self.label(), &detail)
            }
        }
    }

    /// The failure of a request that got no response: `TIMEOUT` for the connect timeout,
    /// `TRANSPORT` otherwise.
    fn request_error(&self, error: &reqwest::Error) -> Failure {
        let detail = classify::error_chain(error);
        if error.is_timeout() {
            let limit = self.config.connect_timeout().as_secs_f64();
            let message =
                format!("{} connection timed out after {limit} s: {detail}", self.label());
            typed(failure::TIMEOUT, message)
        } else {
            classify::transport(self.label(), &detail)
        }
    }

    fn missing_key(&self) -> Failure {
        let source = match self.config.key_var() {
            Some(var) => format!(" (set {var})"),
            None => String::new(),
        };
        typed(failure::MISSING_CREDENTIAL, format!("no {} API key{source}", self.label()))
    }
}

/// The credential of the `Basic` header the HTTP client makes of the endpoint's user
/// information (a secret a server could echo), if it makes one.
fn basic_credential(client: &reqwest::Client, endpoint: &str) -> Option<String> {
    let request = client.post(endpoint).build().ok()?;
    let value = request.headers().get(AUTHORIZATION)?.to_str().ok()?;
    value.strip_prefix("Basic ").map(str::to_owned)
}

/// Whether the response says it is an event stream (no content type counts as one).
fn is_event_stream(headers: &HeaderMap) -> bool {
    match headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) {
        Some(kind) => kind.trim_start().to_ascii_lowercase().starts_with("text/event-stream"),
        None => true,
    }
}

/// Up to `limit` bytes of a body as text (lossy), each read watched by `idle`; what was read
/// before an error or a silence.
async fn read_text(response: reqwest::Response, idle: Duration, limit: usize) -> String {
    let mut body = Vec::new();
    let mut bytes = pin!(response.bytes_stream());
    while body.len() < limit {
        match tokio::time::timeout(idle, bytes.next()).await {
            Ok(Some(Ok(chunk))) => body.extend_from_slice(&chunk),
            Ok(Some(Err(_)) | None) | Err(_) => break,
        }
    }
    body.truncate(limit);
    String::from_utf8_lossy(&body).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        let cases = [
            (Some("text/event-stream"), true),
            (Some("text/event-stream; charset=utf-8"), true),
            (Some("Text/Event-Stream"), true),
            (Some("application/json"), false),
            (None, true),
        ];
        for (kind, stream) in cases {
            let mut headers = HeaderMap::new();
            if let Some(kind) = kind {
                headers.insert(CONTENT_TYPE, HeaderValue::from_static(kind));
            }
            assert_eq!(is_event_stream(&headers), stream, "{kind:?}");
        }
    }

    #[test]
    fn debug_never_shows_the_key() {
        let config = OpenAiConfig::deepseek().with_api_key("sk-hidden").unwrap();
        let adapter = OpenAiCompatible::new(config).unwrap();
        let debug = format!("{adapter:?}");
        assert!(!debug.contains("sk-hidden") && debug.contains("[redacted]"), "{debug}");
    }
}
