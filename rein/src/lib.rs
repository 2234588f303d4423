//! rein: an actor-based agent runtime whose model-request failures flow through an ordered
//! waterfall of supervised retry plugins. This crate (package `rein-agent`, library `rein`) is
//! what an agent program depends on; it re-exports the family:
//!
//! - [`event`]: the vocabulary (events, failures, retry policies, the pure views of a log),
//!   crate `rein-event`; [`runtime`]: the engine (actors, the session log, stores, the
//!   waterfall), crate `rein-runtime`.
//! - [`plugins`]: the shipped retry plugins; [`invariant`]: the session-log contract's rules.
//! - [`providers`]: the simulated provider, and with the features `openai` and `anthropic` the
//!   OpenAI-compatible streaming adapter (DeepSeek preset) and the Anthropic adapter.
//! - [`show`]: the terminal text of turn-tail panels (`rein show`, `rein chat`).
//! - [`prelude`]: everything an agent program needs, in one import.
//!
//! No web server, no command line, no HTTP client unless a provider feature asks for one: the
//! `rein` binary, its console, HTML report and stress engine are the package `rein-cli`.
//!
//! # Features
//!
//! - `sqlite` (default): the SQLite store (`SqliteStore`, bundled SQLite).
//! - `openai`: `OpenAiCompatible` (DeepSeek, OpenAI, any `/chat/completions` server).
//! - `anthropic`: `Anthropic` (the Messages API).
//!
//! The virtual clock (`VirtualClock`) runs on tokio's clock: a program that wants it to pause
//! and jump (as the tests and scenarios do) enables tokio's `test-util` feature itself.
//!
//! # Quick start
//!
//! One import, the default chain, the embedded simulated provider with its faults (rate limits,
//! 5xx, dropped streams, stalls), and what a person reads afterwards — on tokio's paused clock,
//! so the waits pass at once:
//!
//! ```
//! use std::sync::Arc;
//!
//! use rein::prelude::*;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let model = Simulated::new(SimulatedConfig { seed: 7, ..SimulatedConfig::default() })?;
//! let runtime = Runtime::builder()
//!     .clock(Arc::new(VirtualClock::start()))
//!     .route(Route::new("sim", Arc::new(model)).model("simulated-1"))
//!     .plugin(LlmRetry::default()) // its configuration: the routes' default policy
//!     .plugin(Compaction::default())
//!     .plugin(AutoRetry::default())
//!     .build()
//!     .await?;
//! assert_eq!(runtime.plugins(), DEFAULT_CHAIN);
//!
//! let session = runtime.session("s").await?;
//! for prompt in ["hello", "how are you?", "tell me a story", "bye"] {
//!     let outcome = session.ask(prompt).await?;
//!     println!("turn {}: {:?}", outcome.turn, outcome.reason);
//! }
//! let log = session.events().await?;
//! runtime.shutdown().await;
//!
//! assert!(rein::invariant::check_finished_log(&log).is_empty()); // the log keeps its contract
//! let panels = rein::runtime::panel::panels(&log); // every turn that retried or failed…
//! assert!(!panels.is_empty(), "seed 7 meets faults");
//! print!("{}", rein::show::render("s", &log, true)); // …as `rein show` prints them
//! # Ok(())
//! # }
//! ```
//!
//! The programs in `examples/` (`hello`, `flaky_provider`, `tool_agent`, `swarm`,
//! `cancel_storm`, `custom_plugin`) are written against the prelude; each file's header says what
//! it shows and how to run it.

pub use rein_event as event;
pub use rein_invariant as invariant;
pub use rein_plugins as plugins;
pub use rein_providers as providers;
pub use rein_runtime as runtime;

pub mod show;

/// What an agent program uses, in one import: `use rein::prelude::*;` — the runtime's prelude
/// (runtime, routes, sessions, what a turn returns, events, clocks, stores), the shipped plugins
/// and the default chain, the providers and the `echo` tool. A plugin author imports
/// [`plugin::prelude`], a tool author [`tool::prelude`], an adapter author [`provider::prelude`].
pub mod prelude {
    pub use rein_plugins::DEFAULT_CHAIN;
    pub use rein_plugins::auto_retry::AutoRetry;
    pub use rein_plugins::compaction::Compaction;
    pub use rein_plugins::fallback::Fallback;
    pub use rein_plugins::llm_retry::LlmRetry;
    #[cfg(feature = "anthropic")]
    pub use rein_providers::{Anthropic, AnthropicConfig};
    #[cfg(feature = "openai")]
    pub use rein_providers::{OpenAiCompatible, OpenAiConfig, Preset};
    pub use rein_providers::{Simulated, SimulatedConfig};
    pub use rein_runtime::prelude::*;
    pub use rein_runtime::tool::echo::EchoTool;
}

/// Writing a plugin.
pub mod plugin {
    /// What a plugin author uses, in one import: `use rein::plugin::prelude::*;` — the runtime's
    /// plugin prelude (the `Plugin` trait, recoveries, verdicts, the settings seam, the
    /// configured form) and `rein-plugins`' settings kit: [`Revisioned`](rein_plugins::settings::Revisioned)
    /// (the one implementation of the settings seam), the [`Patchable`](rein_plugins::settings::Patchable)
    /// trait a settings type implements, the strict patch readers and the lenient file reader.
    pub mod prelude {
        pub use rein_plugins::settings::{
            FieldError, FileReader, Patchable, Patched, Revisioned, Warning, patch,
        };
        pub use rein_runtime::plugin::prelude::*;
    }
}

/// Writing a tool.
pub mod tool {
    /// What a tool author uses, in one import: `use rein::tool::prelude::*;`.
    pub mod prelude {
        pub use rein_runtime::tool::prelude::*;
    }
}

/// Writing a provider adapter.
pub mod provider {
    /// What an adapter author uses, in one import: `use rein::provider::prelude::*;`.
    pub mod prelude {
        pub use rein_runtime::provider::prelude::*;
    }
}
