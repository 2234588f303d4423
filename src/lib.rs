//! rein: an actor-based agent runtime whose model-request failures flow through an ordered
//! waterfall of supervised retry plugins. This crate re-exports the family.
//!
//! - [`providers`]: the OpenAI-compatible streaming adapter (DeepSeek preset) and the simulated
//!   provider.
//! - [`scenario`]: scenario runs with the shipped plugins and the invariant checker.
//! - [`html`]: HTML views of session logs: turn-tail panels and the `rein report` page.
//! - [`stress`]: the engine of `rein stress` (many agents under faults, cancellations and plugin
//!   chaos, every guarantee checked after), also run by the system benchmark.

pub use rein_invariant as invariant;
pub use rein_plugins as plugins;
pub use rein_providers as providers;
pub use rein_runtime as runtime;

pub mod html;
pub mod scenario;
pub mod stress;
