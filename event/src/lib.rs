//! rein-event: the vocabulary of rein — what a session log says and the pure views of it. No
//! async runtime, no actors, no storage: a program that reads, checks or renders logs depends on
//! this crate alone (`rein-invariant` does), and the engine (`rein-runtime`) re-exports every
//! module at its old path (`rein_runtime::event`, `rein_runtime::failure`, …).
//!
//! # Layout
//!
//! - [`event`]: the typed events of a session log ([`event::Envelope`], [`event::Event`]) and
//!   their counters; [`failure`]: the failures that end attempts.
//! - [`retry_policy`]: a route's retry policy, its [`retry_policy::Backoff`] curve and its
//!   declaration format; [`policy_key`]: a policy's key, written byte for byte as the
//!   JavaScript seed harness writes it.
//! - [`message`]: the model-visible history a request carries.
//! - [`projection`] (pure folds of a log), [`history`] (what the model sees), [`transcript`]
//!   (what a person reads), [`panel`] (turn-tail panels: every attempt of a turn that retried or
//!   failed), [`validator`] (the check-then-commit hook a log runs before an append).
//! - [`json_number`] (numbers as JavaScript writes them), [`plural`] (counts in words: `1 time`,
//!   `2 times`), [`quote`] (a value from a file, cut for a message).

pub mod event;
pub mod failure;
pub mod history;
pub mod json_number;
pub mod message;
pub mod panel;
pub mod plural;
pub mod policy_key;
pub mod projection;
pub mod quote;
pub mod retry_policy;
pub mod transcript;
pub mod validator;
