//! [`Anthropic`]: the adapter for the Anthropic Messages API, streaming. Only wiring: the
//! configuration ([`config`]), the body ([`request_body`]), the assembly of the events
//! ([`assembly`]) and the classification ([`classify`]) are pure modules; the HTTP shell is the
//! one every adapter shares (`crate::http`), so the watchdog, the scrubber, the base URL's
//! checks and the telemetry are the OpenAI-compatible adapter's.
//!
//! One call is one attempt: `POST {base}/v1/messages` with `stream: true`, the key in a
//! sensitive `x-api-key` header and `anthropic-version: 2023-06-01`; then the event stream is
//! read until `message_stop`, each text delta going to the chunk sink as it arrives. Failures
//! (see "Providers" in `docs/runtime-semantics.md`):
//! - no key → `MISSING_CREDENTIAL` (naming `ANTHROPIC_API_KEY`), without a request;
//! - a refused or reset connection → `TRANSPORT`; the connect timeout → `TIMEOUT`;
//! - an HTTP error → [`classify::http_failure`] (`overloaded_error` and 529 → `SERVER`,
//!   `rate_limit_error` → `RATE_LIMIT` with `retry-after`, …);
//! - after a 2xx: silence longer than the watchdog → `TIMEOUT`; a read that fails →
//!   `TRANSPORT`; a clean end without `message_stop` → `STREAM_CLOSED`; an in-stream `error`
//!   event, an event that is not the protocol, an empty answer → what [`Assembler`] says.

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use rein_runtime::BoxFuture;
use rein_runtime::failure::Failure;
use rein_runtime::provider::{Adapter, ChunkSink, Completion, Request};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use crate::config::ProviderConfigError;
use crate::http::{self, Http, Wire};

pub mod assembly;
pub mod classify;
pub mod config;
pub mod request_body;

use assembly::Assembler;
use config::{API_VERSION, AnthropicConfig, DEFAULT_MAX_TOKENS};

/// The Anthropic Messages adapter. Cheap to clone (one shared HTTP client, so connections are
/// pooled across calls); its `Debug` redacts the key.
#[derive(Clone)]
pub struct Anthropic {
    inner: Arc<Inner>,
}

struct Inner {
    config: AnthropicConfig,
    http: Http,
}

impl fmt::Debug for Anthropic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Anthropic").field("config", &self.inner.config).finish()
    }
}

impl Anthropic {
    /// An adapter for `config` (builds its HTTP client and its scrubber, of the key, the base
    /// URL's password and the `Basic` credential the client makes of them).
    pub fn new(config: AnthropicConfig) -> Result<Self, ProviderConfigError> {
        let http = Http::new(
            config.name(),
            config.label(),
            config.endpoint(),
            config.secrets(),
            config.connect_timeout(),
            config.idle_timeout(),
        )?;
        Ok(Self { inner: Arc::new(Inner { config, http }) })
    }

    /// An adapter configured from the process environment ([`AnthropicConfig::from_env`]).
    pub fn from_env() -> Result<Self, ProviderConfigError> {
        Self::new(AnthropicConfig::from_env()?)
    }

    /// Its configuration.
    pub fn config(&self) -> &AnthropicConfig {
        &self.inner.config
    }
}

impl Adapter for Anthropic {
    fn call(
        &self,
        request: Request,
        chunks: ChunkSink,
    ) -> BoxFuture<'static, Result<Completion, Failure>> {
        http::call(&self.inner, request, chunks)
    }
}

impl Wire for Inner {
    type Decoder = Assembler;

    fn http(&self) -> &Http {
        &self.http
    }

    fn prepare(&self, request: &Request) -> Result<(HeaderMap, Vec<u8>), Failure> {
        let label = self.http.label();
        let Some(key) = self.config.api_key() else {
            return Err(http::missing_key(label, self.config.key_var()));
        };
        let mut headers = HeaderMap::new();
        headers.insert(HeaderName::from_static("x-api-key"), http::sensitive(key.secret(), label)?);
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        );
        Ok((headers, request_body::build(request, DEFAULT_MAX_TOKENS)))
    }

    fn decoder(&self) -> Assembler {
        Assembler::new(self.http.label())
    }

    fn http_failure(
        &self,
        status: u16,
        headers: &HeaderMap,
        body: &str,
        now: SystemTime,
    ) -> Failure {
        classify::http_failure(self.http.label(), status, headers, body, now)
    }

    fn body_error(&self, body: &Value) -> Option<Failure> {
        let error = body.get("error").filter(|e| !e.is_null())?;
        Some(classify::stream_error(self.http.label(), error))
    }

    fn request_id(&self, headers: &HeaderMap) -> Option<String> {
        classify::request_id(headers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_key() {
        let config = AnthropicConfig::new().with_api_key("sk-ant-hidden").unwrap();
        let adapter = Anthropic::new(config).unwrap();
        let debug = format!("{adapter:?}");
        assert!(!debug.contains("sk-ant-hidden") && debug.contains("[redacted]"), "{debug}");
    }
}
