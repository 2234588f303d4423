//! rein-runtime: the event vocabulary, the durable session log and its stores, the actors of an
//! agent (session, turn, step, provider, plugin host) and the request-error waterfall.
//!
//! # Layout
//!
//! Pure core first:
//! - [`failure`]: `Failure` (always valid) and the known codes.
//! - [`event`]: the typed events and the log envelope.
//! - [`json_number`]: canonical JSON numbers (`500`, not `500.0`).
//! - [`clock`]: the injected clock (wall or virtual).
//! - [`random`]: injected jitter samples (an explicit sequence, then a seeded RNG).
//! - [`retry_policy`]: a route's retry policy (normal/always, backoff curve), its strict
//!   declaration format, the effective-policy resolution and the canonical `policyKey`.
//! - [`projection`]: the `Projection` trait (pure folds of a log).
//! - [`validator`]: the `Validator` trait (checks run before an append commits).
//! - [`provider`]: the request/completion types and the `Adapter` trait.
//! - [`scripted`]: the scripted provider (test double and scenario provider).
//!
//! Shells:
//! - [`store`]: the `SessionStore` trait and its memory, JSONL and SQLite stores.
//! - [`session_log`]: the session-log actor (the only writer of a log), its projections (retry
//!   chains, open turn), validators hook and the repair on reopen.

pub mod agent_loop;
pub mod cancel;
pub mod census;
pub mod clock;
pub mod crash;
pub mod event;
pub mod failure;
pub mod history;
pub mod json_number;
pub mod plugin;
pub mod plugin_host;
pub mod projection;
pub mod provider;
pub mod random;
pub mod retry_policy;
pub mod runtime;
pub mod scenario;
pub mod scripted;
pub mod session;
pub mod session_log;
mod step;
pub mod store;
pub mod tool;
mod turn;
pub mod turn_handle;
pub mod validator;
pub mod waterfall;
