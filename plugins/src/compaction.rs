//! `compaction`: the recovery of a context overflow.
//!
//! When a request fails with `CONTEXT_WINDOW_EXCEEDED`, retrying it unchanged would fail again:
//! the history must shrink first. `compaction` drops the oldest part of the model-visible
//! history — keeping the latest user message and the newest `keepRecentMessages` messages,
//! never splitting a tool call from its result — by appending `context/compacted` (the seqs it
//! drops), which the history fold applies, and answers `Retry`; the next attempt is built from
//! the shrunk history. When the history cannot shrink, or the turn's budget of
//! `maxOverflowRetries` compactions is spent, it answers `Next`. It writes no `llm/retry` and
//! never waits. Its default place is between `llm-retry` and `auto-retry` (which never retries
//! this code: it is in the hard floor).
//!
//! # Layout
//!
//! Pure core (no tokio, no ractor):
//! - [`settings`]: [`CompactionSettings`] — defaults, bounds, the lenient configuration file,
//!   the strict run-time patch.
//! - [`shrink`]: the cut rule — which model-visible events to drop ([`shrink::cut`]).
//! - [`decision`]: code, budget, cut → `Next` or a compaction to write.
//!
//! Shell:
//! - [`plugin`]: [`Compaction`], the runtime [`Plugin`](rein_runtime::plugin::Plugin): reads the
//!   history, decides, appends `context/compacted`; [`factory`] builds it from a configuration
//!   value, leniently.

pub mod decision;
pub mod plugin;
pub mod settings;
pub mod shrink;

pub use decision::{Decision, Declined};
pub use plugin::{Compaction, factory};
pub use settings::CompactionSettings;
pub use shrink::Cut;

/// The name the plugin is registered under.
pub const NAME: &str = "compaction";
