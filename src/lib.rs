//! rein: an actor-based agent runtime whose model-request failures flow through an ordered
//! waterfall of supervised retry plugins. This crate re-exports the family.
//!
//! - [`providers`]: the OpenAI-compatible streaming adapter (DeepSeek preset) and the simulated
//!   provider.
//! - [`scenario`]: scenario runs with the shipped plugins and the invariant checker.
//! - [`html`]: HTML views of session logs: turn-tail panels and the `rein report` page.
//! - [`show`]: the terminal text of turn-tail panels (`rein show`, `rein chat`).
//! - [`prelude`]: everything an agent program needs, in one import.
//!
//! The programs in `examples/` (`hello`, `flaky_provider`, `tool_agent`, `swarm`,
//! `cancel_storm`, `custom_plugin`) are written against the prelude; each file's header says what
//! it shows and how to run it.

pub use rein_invariant as invariant;
pub use rein_plugins as plugins;
pub use rein_providers as providers;
pub use rein_runtime as runtime;

pub mod html;
pub mod scenario;
pub mod show;

/// Everything an agent program needs, in one import: `use rein::prelude::*;` — the runtime's
/// prelude (runtime, routes, sessions, stores, the `Adapter`, `Plugin` and `Tool` traits), the
/// default chain's plugins, the providers, the `echo` tool and the cancellation token a tool or a
/// plugin watches.
pub mod prelude {
    pub use rein_plugins::DEFAULT_CHAIN;
    pub use rein_plugins::auto_retry::AutoRetry;
    pub use rein_plugins::compaction::Compaction;
    pub use rein_plugins::llm_retry::LlmRetry;
    pub use rein_providers::{OpenAiCompatible, OpenAiConfig, Preset, Simulated, SimulatedConfig};
    pub use rein_runtime::prelude::*;
    pub use rein_runtime::tool::echo::EchoTool;
    pub use tokio_util::sync::CancellationToken;
}
