//! [`OpenAiCompatible`]: the adapter for any OpenAI-compatible `/chat/completions`, streaming
//! (DeepSeek is the first preset). Only wiring: the configuration ([`config`]), the body
//! ([`request_body`]), the assembly of the stream ([`assembly`]) and the classification
//! ([`crate::classify`]) are pure modules; the HTTP shell is the one every adapter shares
//! (`crate::http`).
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
//! The key goes out only as a sensitive `Authorization` header (it replaces the `Basic` one the
//! HTTP client makes of a base URL's user information). Whatever the server sends back leaves
//! the adapter through its scrubber only.

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use rein_runtime::BoxFuture;
use rein_runtime::failure::Failure;
use rein_runtime::provider::{Adapter, ChunkSink, Completion, Request};
use reqwest::header::{AUTHORIZATION, HeaderMap};
use serde_json::Value;

use crate::answer::Assembled;
use crate::classify;
use crate::config::ProviderConfigError;
use crate::http::{self, Decoder, Fed, Http, Wire};
use crate::response_headers;
use crate::sse::Frame;

pub mod assembly;
pub mod config;
pub mod request_body;

use assembly::Assembler;
use config::{OpenAiConfig, Preset};

/// An OpenAI-compatible streaming adapter. Cheap to clone (one shared HTTP client, so
/// connections are pooled across calls); its `Debug` redacts the key.
#[derive(Clone)]
pub struct OpenAiCompatible {
    inner: Arc<Inner>,
}

struct Inner {
    config: OpenAiConfig,
    http: Http,
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
        http::call(&self.inner, request, chunks)
    }
}

impl Wire for Inner {
    type Decoder = Assembler;

    fn http(&self) -> &Http {
        &self.http
    }

    fn prepare(&self, request: &Request) -> Result<(HeaderMap, Vec<u8>), Failure> {
        let mut headers = HeaderMap::new();
        match self.config.api_key() {
            Some(key) => {
                let bearer = format!("Bearer {}", key.secret());
                headers.insert(AUTHORIZATION, http::sensitive(&bearer, self.http.label())?);
            }
            None if self.config.keyless() => {}
            None => return Err(http::missing_key(self.http.label(), self.config.key_var())),
        }
        Ok((headers, request_body::build(request, self.config.max_tokens_field())))
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
        response_headers::request_id(headers)
    }
}

impl Decoder for Assembler {
    fn feed(&mut self, frame: Frame) -> Result<Fed, Failure> {
        match frame {
            Frame::Data(data) => Ok(match Assembler::feed(self, &data)? {
                Some(delta) => Fed::Text(delta),
                None => Fed::Nothing,
            }),
            Frame::Done => Ok(Fed::End),
        }
    }

    fn finish(self) -> Result<Assembled, Failure> {
        Assembler::finish(self)
    }

    fn closed(&self) -> Failure {
        classify::stream_closed(self.label(), "[DONE]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_key() {
        let config = OpenAiConfig::deepseek().with_api_key("sk-hidden").unwrap();
        let adapter = OpenAiCompatible::new(config).unwrap();
        let debug = format!("{adapter:?}");
        assert!(!debug.contains("sk-hidden") && debug.contains("[redacted]"), "{debug}");
    }
}
