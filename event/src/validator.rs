//! Validators: checks a session log runs on every append before committing it.
//!
//! # Why check-then-commit
//!
//! A validator that rejects an append must leave no trace: nothing is written and its own state
//! is as if the append never happened. So [`Validator::check`] only reads its state (it may clone
//! it to fold the candidate batch), and [`Validator::commit`] is called only after the store
//! acknowledged the batch. A batch (for example `step/end` + `turn/end`) is checked as a whole, in
//! order.

use crate::event::Envelope;

/// Why an append was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} seq {seq}: {message} [{rule}]")]
pub struct Rejection {
    /// The `seq` of the offending event.
    pub seq: u64,
    /// Its `family/name` type.
    pub kind: String,
    /// The rule's name (for example `retry-number-continues-chain`).
    pub rule: String,
    /// What a person needs to know.
    pub message: String,
}

/// A check run against each append of a session log.
pub trait Validator: Send + 'static {
    /// A name for diagnostics.
    fn name(&self) -> &str;

    /// Checks `batch` (sequenced, not yet written) against everything committed so far.
    /// Must not change the validator's state.
    fn check(&self, batch: &[Envelope]) -> Result<(), Rejection>;

    /// Records a batch the store acknowledged (also used to replay an existing log when the
    /// validator is installed on a session that already has history).
    fn commit(&mut self, batch: &[Envelope]);
}
