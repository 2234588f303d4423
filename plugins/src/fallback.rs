//! `fallback`: route failover — when a route keeps failing on a rate limit, a quota or an
//! outage, the turn finishes on another provider or model instead of failing.
//!
//! Registered first (`fallback`, `llm-retry`, `compaction`, `auto-retry`), it lets the rest of
//! the chain retry the failing route first, and switches the step to the first of its `routes`
//! the step has not asked yet when the rest of the chain gives up. A quota (`eagerCodes`) or a
//! provider delay longer than `maxWaitMs` switches at once: minutes of backoff on a route that
//! will not recover soon help nobody. A route that failed with `RATE_LIMIT` or `QUOTA` cools
//! down for every session of the runtime and is not chosen meanwhile.
//!
//! A switch is a `route/switched {turn, step, from, to, code, reason}` event followed by the
//! plain `Retry`: the step reads the switch from its log and sends the next attempt — same
//! history — to the new route's provider and model, where the retry chains start fresh (they are
//! keyed by provider). See `docs/runtime-semantics.md`, "fallback".
//!
//! # Layout
//!
//! Pure core (no tokio, no ractor):
//! - [`settings`]: [`FallbackSettings`] — defaults, bounds, the strict configuration file and
//!   run-time patch.
//! - [`decision`]: switch now, ask downstream first, or decline; the route picked; how long a
//!   failure cools its route down, and the cooldown table.
//!
//! Shell:
//! - [`plugin`]: [`Fallback`], the runtime [`Plugin`](rein_runtime::plugin::Plugin): settings
//!   behind a [`Revisioned`](crate::settings::Revisioned) fence, the cooldowns of the runtime,
//!   the switch; [`factory`] builds it from a configuration value, strictly.

pub mod decision;
pub mod plugin;
pub mod settings;

pub use decision::{Decision, Declined, Reason, Switch};
pub use plugin::{Fallback, factory};
pub use settings::FallbackSettings;

/// The name the plugin is registered under (scenarios, the CLI, the panel's `fallback` origin).
pub const NAME: &str = "fallback";
