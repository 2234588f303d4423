//! The HTTP shell every streaming adapter shares. One attempt is one `POST` of a JSON body whose
//! answer is a server-sent event stream; what differs between adapters — the credential header,
//! the body, the events, the classification of an error — is their [`Wire`], and the rest is
//! here, once:
//!
//! - the client: rustls, HTTP/1.1, the configured connect timeout, no total timeout, and a
//!   scrubber of the configuration's secrets plus the `Basic` credential the client makes of a
//!   base URL's user information ([`Http::new`]);
//! - the attempt ([`call`]): its `chat` span, the [`ScrubbedSink`] it streams through, the
//!   response under the dead-air watchdog (which also covers the wait for the headers), the
//!   status, an error body (at most [`ERROR_BODY_LIMIT`]), the content type, the stream read to
//!   its end marker, the request id added to a failure after a 2xx, and the answer or failure
//!   scrubbed before it leaves;
//! - the failures of the shell itself: the connect timeout → `TIMEOUT`, a refused or reset
//!   connection → `TRANSPORT`, silence → `TIMEOUT`, a failed read → `TRANSPORT`, bytes that are
//!   not an event stream → `PROVIDER_ERROR`, a clean end before the end marker → what the
//!   decoder says (`STREAM_CLOSED`).
//!
//! Cancellation is dropping the future: that drops the response and its body, and the client
//! closes a connection whose body was not read to the end.

use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use rein_runtime::BoxFuture;
use rein_runtime::failure::{self, Failure};
use rein_runtime::provider::{ChunkSink, Completion, Request};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::Value;
use tracing::Instrument;

use crate::answer::Assembled;
use crate::classify::{self, typed};
use crate::config::ProviderConfigError;
use crate::scrub::{ScrubbedSink, Scrubber};
pub(crate) use crate::sse::Fed;
use crate::sse::{self, Frame, SseError};
use crate::telemetry;

/// The most of an error body read to classify it.
pub(crate) const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// One adapter's HTTP client, endpoint and scrubber, and how it names its provider.
pub(crate) struct Http {
    name: String,
    label: String,
    endpoint: String,
    client: reqwest::Client,
    scrubber: Scrubber,
    connect_timeout: Duration,
    idle_timeout: Duration,
}

impl Http {
    /// The shell of provider `name` (its `gen_ai.provider.name`), named `label` in messages,
    /// posting to `endpoint`; its scrubber takes out `secrets` and the `Basic` credential the
    /// client makes of the endpoint's user information.
    pub(crate) fn new(
        name: &str,
        label: &str,
        endpoint: String,
        secrets: Vec<String>,
        connect_timeout: Duration,
        idle_timeout: Duration,
    ) -> Result<Self, ProviderConfigError> {
        let client = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            .tcp_nodelay(true)
            .build()
            .map_err(|e| ProviderConfigError::Client(classify::error_chain(&e)))?;
        let basic = basic_credential(&client, &endpoint);
        let scrubber = Scrubber::new(secrets.into_iter().chain(basic));
        Ok(Self {
            name: name.to_owned(),
            label: label.to_owned(),
            endpoint,
            client,
            scrubber,
            connect_timeout,
            idle_timeout,
        })
    }

    /// How messages name the provider (`DeepSeek`, `Anthropic`).
    pub(crate) fn label(&self) -> &str {
        &self.label
    }
}

/// What one adapter's wire format decides; see the module docs.
pub(crate) trait Wire: Send + Sync + 'static {
    /// Reads one response's event stream.
    type Decoder: Decoder + Send;

    /// The shell.
    fn http(&self) -> &Http;

    /// The headers (the credential among them, marked sensitive) and the body of an attempt; a
    /// failure ends it before anything is sent (no key).
    fn prepare(&self, request: &Request) -> Result<(HeaderMap, Vec<u8>), Failure>;

    /// A decoder for one stream.
    fn decoder(&self) -> Self::Decoder;

    /// The failure of an HTTP error response.
    fn http_failure(
        &self,
        status: u16,
        headers: &HeaderMap,
        body: &str,
        now: SystemTime,
    ) -> Failure;

    /// The failure a 2xx JSON body that is not an event stream holds, if it holds an error.
    fn body_error(&self, body: &Value) -> Option<Failure>;

    /// The provider's request id in a response's headers.
    fn request_id(&self, headers: &HeaderMap) -> Option<String>;
}

/// Folds one stream's frames into an answer.
pub(crate) trait Decoder {
    /// Folds one frame.
    fn feed(&mut self, frame: Frame) -> Result<Fed, Failure>;

    /// The finished answer, after [`Fed::End`].
    fn finish(self) -> Result<Assembled, Failure>;

    /// The failure of a stream that ended cleanly before its end marker.
    fn closed(&self) -> Failure;
}

/// One attempt of `wire`: see the module docs.
pub(crate) fn call<W: Wire>(
    wire: &Arc<W>,
    request: Request,
    chunks: ChunkSink,
) -> BoxFuture<'static, Result<Completion, Failure>> {
    let wire = Arc::clone(wire);
    let span = telemetry::attempt_span(&wire.http().name, &request);
    let record = span.clone();
    Box::pin(
        async move {
            let scrubber = &wire.http().scrubber;
            let mut sink = ScrubbedSink::new(chunks, scrubber);
            let outcome = attempt(&*wire, &request, &mut sink).await;
            sink.finish();
            let outcome = match outcome {
                Ok(answer) => Ok(scrubber.assembled(answer)),
                Err(failure) => Err(scrubber.failure(failure)),
            };
            telemetry::record(&record, &outcome);
            outcome.map(|answer| answer.completion)
        }
        .instrument(span),
    )
}

async fn attempt<W: Wire>(
    wire: &W,
    request: &Request,
    chunks: &mut ScrubbedSink,
) -> Result<Assembled, Failure> {
    let http = wire.http();
    let (mut headers, body) = wire.prepare(request)?;
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
    let idle = http.idle_timeout;
    // `headers` replaces, so a key's Authorization replaces a Basic one from the URL.
    let send = http.client.post(&http.endpoint).headers(headers).body(body).send();
    let response = match tokio::time::timeout(idle, send).await {
        Err(_) => return Err(classify::dead_air(&http.label, idle)),
        Ok(Err(error)) => return Err(request_error(http, &error)),
        Ok(Ok(response)) => response,
    };
    let status = response.status().as_u16();
    telemetry::record_status(&tracing::Span::current(), status);
    let headers = response.headers().clone();
    if !response.status().is_success() {
        let body = read_text(response, idle, ERROR_BODY_LIMIT).await;
        return Err(wire.http_failure(status, &headers, &body, SystemTime::now()));
    }
    let answer = if is_event_stream(&headers) {
        stream(http, response, wire.decoder(), chunks).await
    } else {
        Err(not_a_stream(wire, response, &headers).await)
    };
    answer.map_err(|failure| match wire.request_id(&headers) {
        Some(id) => failure.clone().with_request_id(id).unwrap_or(failure),
        None => failure,
    })
}

/// Reads the event stream to its end marker, streaming answer text into `chunks`.
async fn stream<D: Decoder>(
    http: &Http,
    response: reqwest::Response,
    mut decoder: D,
    chunks: &mut ScrubbedSink,
) -> Result<Assembled, Failure> {
    let label = &http.label;
    let mut frames = pin!(sse::frames(response.bytes_stream(), http.idle_timeout));
    while let Some(frame) = frames.next().await {
        match frame {
            Ok(frame) => match decoder.feed(frame)? {
                Fed::Nothing => {}
                Fed::Text(text) => chunks.send(&text),
                Fed::End => return decoder.finish(),
            },
            Err(SseError::Idle(silence)) => return Err(classify::dead_air(label, silence)),
            Err(SseError::Transport(detail)) => return Err(classify::transport(label, &detail)),
            Err(SseError::Malformed(detail)) => return Err(classify::malformed(label, &detail)),
        }
    }
    Err(decoder.closed())
}

/// A 2xx answer that is not an event stream: the error its JSON body holds, if any, else
/// malformed (naming the content type).
async fn not_a_stream<W: Wire>(
    wire: &W,
    response: reqwest::Response,
    headers: &HeaderMap,
) -> Failure {
    let http = wire.http();
    let body = read_text(response, http.idle_timeout, ERROR_BODY_LIMIT).await;
    let error = serde_json::from_str::<Value>(&body).ok().and_then(|v| wire.body_error(&v));
    error.unwrap_or_else(|| {
        let kind = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("(none)");
        let detail = format!("a 2xx answer of content type {kind}, not an event stream");
        classify::malformed(&http.label, &detail)
    })
}

/// The failure of a request that got no response: `TIMEOUT` for the connect timeout,
/// `TRANSPORT` otherwise.
fn request_error(http: &Http, error: &reqwest::Error) -> Failure {
    let detail = classify::error_chain(error);
    if error.is_timeout() {
        let limit = http.connect_timeout.as_secs_f64();
        let message = format!("{} connection timed out after {limit} s: {detail}", http.label);
        typed(failure::TIMEOUT, message)
    } else {
        classify::transport(&http.label, &detail)
    }
}

/// `value` (a credential) as a sensitive header value (the HTTP client redacts it too), or
/// `INVALID_CREDENTIAL` when it cannot be one.
pub(crate) fn sensitive(value: &str, label: &str) -> Result<HeaderValue, Failure> {
    let mut header = HeaderValue::from_str(value).map_err(|_| {
        typed(
            failure::INVALID_CREDENTIAL,
            format!("the {label} API key cannot be sent in a header"),
        )
    })?;
    header.set_sensitive(true);
    Ok(header)
}

/// `MISSING_CREDENTIAL`: no key, naming the variable to set when there is one.
pub(crate) fn missing_key(label: &str, var: Option<&str>) -> Failure {
    let source = match var {
        Some(var) => format!(" (set {var})"),
        None => String::new(),
    };
    typed(failure::MISSING_CREDENTIAL, format!("no {label} API key{source}"))
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
    fn credential_failures_never_quote_the_key() {
        let refused = sensitive("sk-\nsecret", "Anthropic").unwrap_err();
        assert_eq!(
            (refused.code(), refused.message()),
            ("INVALID_CREDENTIAL", "the Anthropic API key cannot be sent in a header")
        );
        assert!(sensitive("sk-ok", "P").unwrap().is_sensitive());
        let cases = [
            (Some("ANTHROPIC_API_KEY"), "no Anthropic API key (set ANTHROPIC_API_KEY)"),
            (None, "no Anthropic API key"),
        ];
        for (var, message) in cases {
            let failure = missing_key("Anthropic", var);
            assert_eq!((failure.code(), failure.message()), ("MISSING_CREDENTIAL", message));
        }
    }
}
