//! rein-providers: the model providers of rein — an adapter for any OpenAI-compatible
//! `/chat/completions` stream (DeepSeek is the first preset), the classification of its
//! failures, and a simulated provider with a seeded fault model. A crate of its own so the
//! runtime stays free of HTTP.
//!
//! # Layout
//!
//! Pure core first:
//! - [`secret`]: [`ApiKey`], a credential that never prints.
//! - [`scrub`]: [`Scrubber`], the one place a server's strings lose the secrets it could echo.
//! - [`config`]: [`Preset`]s (DeepSeek, OpenAI), [`OpenAiConfig`] from code or the environment,
//!   its [`BaseUrl`] (checked, printed without its user information).
//! - [`request_body`]: the deterministic request body of an attempt.
//! - [`sse`]: bytes → SSE `data` payloads, under the dead-air watchdog.
//! - [`assembly`]: [`Assembler`], stream chunks → text, reasoning, tool calls and usage.
//! - [`response_headers`]: request id and `Retry-After` from a response's headers.
//! - [`classify`]: status, headers and error body → the failure's code and fields.
//!
//! Shells:
//! - [`openai`]: [`OpenAiCompatible`], the streaming adapter over `reqwest` (rustls).
//! - [`simulated`]: [`Simulated`], the embedded provider that fails on purpose.
//! - `telemetry`: one `tracing` span per attempt with OpenTelemetry GenAI field names.
//!
//! # Quick start
//!
//! A route on DeepSeek when `DEEPSEEK_API_KEY` is set, else on the simulated provider:
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use rein_providers::{OpenAiCompatible, OpenAiConfig, Preset, Simulated, SimulatedConfig};
//! use rein_runtime::prelude::*;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = OpenAiConfig::from_env(Preset::DEEPSEEK)?;
//! let (name, adapter, model): (&str, Arc<dyn Adapter>, String) = if config.has_api_key() {
//!     let model = config.model().to_owned();
//!     ("deepseek", Arc::new(OpenAiCompatible::new(config)?), model)
//! } else {
//!     let simulated = Simulated::new(SimulatedConfig::default())?;
//!     let model = simulated.model().to_owned();
//!     ("simulated", Arc::new(simulated), model)
//! };
//! let runtime = Runtime::builder()
//!     .route(Route::new(name, adapter).model(model))
//!     .built(rein_plugins::llm_retry::factory(&serde_json::Value::Null)?)
//!     .build()
//!     .await?;
//! let session = runtime.session("demo").await?;
//! let outcome = session.prompt("hello")?.await?;
//! println!("{:?}", outcome.reason);
//! runtime.shutdown().await;
//! # Ok(())
//! # }
//! ```

pub mod assembly;
pub mod classify;
pub mod config;
pub mod openai;
pub mod request_body;
pub mod response_headers;
pub mod scrub;
pub mod secret;
pub mod simulated;
pub mod sse;
mod telemetry;

pub use assembly::{Assembled, Assembler};
pub use config::{BaseUrl, OpenAiConfig, Preset, ProviderConfigError};
pub use openai::OpenAiCompatible;
pub use scrub::Scrubber;
pub use secret::ApiKey;
pub use simulated::{Simulated, SimulatedConfig};
