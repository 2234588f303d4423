//! rein-providers: the model providers of rein — streaming adapters for any OpenAI-compatible
//! `/chat/completions` (DeepSeek is the first preset; feature `openai`) and for the Anthropic
//! Messages API (feature `anthropic`), the classification of their failures, and a simulated
//! provider with a seeded fault model (always compiled). A crate of its own so the runtime
//! stays free of HTTP.
//!
//! # Layout
//!
//! Shared pure core:
//! - [`secret`]: [`ApiKey`], a credential that never prints.
//! - [`scrub`]: [`Scrubber`], the one place a server's strings lose the secrets it could echo.
//! - [`config`]: what every configuration shares — [`ProviderConfigError`], the timeouts, the
//!   checked [`BaseUrl`] (printed without its user information), the environment's variables.
//! - [`sse`]: bytes → SSE `data` payloads, under the dead-air watchdog.
//! - [`answer`]: [`Assembled`], a finished answer (text, reasoning, tool calls, usage).
//! - [`response_headers`]: request id and `Retry-After` from a response's headers.
//! - [`classify`]: status, headers and error body → the failure's code and fields (the shared
//!   HTTP table and wording rules).
//!
//! Adapters, each a wire format over one shared HTTP shell (`http`: the client, the attempt,
//! the watchdog, the scrubbed sink, the stream loop):
//! - [`openai`]: [`OpenAiCompatible`] — its [`Preset`]s and [`OpenAiConfig`], its request body,
//!   its chunk [`Assembler`].
//! - [`anthropic`]: [`Anthropic`] — its [`AnthropicConfig`], its request body, its event
//!   assembler, its error classification.
//! - [`simulated`]: [`Simulated`], the embedded provider that fails on purpose.
//! - `telemetry`: one `tracing` span per attempt with OpenTelemetry GenAI field names.
//!
//! # Quick start
//!
//! A route on Anthropic when `ANTHROPIC_API_KEY` is set, else on DeepSeek when
//! `DEEPSEEK_API_KEY` is, else on the simulated provider:
//!
//! ```no_run
//! # #[cfg(all(feature = "openai", feature = "anthropic"))]
//! # mod doc {
//! use std::sync::Arc;
//!
//! use rein_providers::{Anthropic, AnthropicConfig, OpenAiCompatible, OpenAiConfig, Preset};
//! use rein_providers::{Simulated, SimulatedConfig};
//! use rein_runtime::prelude::*;
//! use rein_runtime::plugin::prelude::*;
//! use rein_runtime::provider::prelude::*;
//!
//! # pub async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let claude = AnthropicConfig::from_env()?;
//! let deepseek = OpenAiConfig::from_env(Preset::DEEPSEEK)?;
//! let (name, adapter, model): (&str, Arc<dyn Adapter>, String) = if claude.has_api_key() {
//!     let model = claude.model().to_owned();
//!     ("anthropic", Arc::new(Anthropic::new(claude)?), model)
//! } else if deepseek.has_api_key() {
//!     let model = deepseek.model().to_owned();
//!     ("deepseek", Arc::new(OpenAiCompatible::new(deepseek)?), model)
//! } else {
//!     let simulated = Simulated::new(SimulatedConfig::default())?;
//!     let model = simulated.model().to_owned();
//!     ("simulated", Arc::new(simulated), model)
//! };
//! // A system prompt and a token limit for every request on the route.
//! let brief = Generation::new().with_system_prompt("Be brief.")?.with_max_tokens(256)?;
//! let runtime = Runtime::builder()
//!     .route(Route::new(name, adapter).model(model).generation(brief))
//!     .plugin(rein_plugins::llm_retry::factory(&serde_json::Value::Null)?)
//!     .build()
//!     .await?;
//! let session = runtime.session("demo").await?;
//! let outcome = session.prompt("hello")?.await?;
//! println!("{:?}", outcome.reason);
//! runtime.shutdown().await;
//! # Ok(())
//! # }
//! # }
//! # fn main() {}
//! ```

// Without an adapter, the shell the adapters share (the HTTP attempt, the environment reading)
// has no user: the crate is then the simulated provider and the pure core.
#![cfg_attr(not(any(feature = "openai", feature = "anthropic")), allow(dead_code))]

pub mod answer;
#[cfg(feature = "anthropic")]
pub mod anthropic;
pub mod classify;
pub mod config;
#[cfg(any(feature = "openai", feature = "anthropic"))]
mod http;
#[cfg(feature = "openai")]
pub mod openai;
pub mod response_headers;
pub mod scrub;
pub mod secret;
pub mod simulated;
#[cfg(any(feature = "openai", feature = "anthropic"))]
pub mod sse;
mod telemetry;

pub use answer::Assembled;
#[cfg(feature = "anthropic")]
pub use anthropic::{Anthropic, config::AnthropicConfig};
pub use config::{BaseUrl, ProviderConfigError};
#[cfg(feature = "openai")]
pub use openai::{
    OpenAiCompatible,
    assembly::Assembler,
    config::{MaxTokensField, OpenAiConfig, Preset},
};
pub use scrub::Scrubber;
pub use secret::ApiKey;
pub use simulated::{Simulated, SimulatedConfig};
