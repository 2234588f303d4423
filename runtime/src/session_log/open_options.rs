//! [`OpenOptions`]: the projections and validators a session log starts with.
//!
//! # Why register them before the log is read
//!
//! [`SessionLog::register`](super::SessionLog::register) and
//! [`SessionLog::add_validator`](super::SessionLog::add_validator) on an open log read the whole
//! history back from the store (the actor keeps no events). A session that wakes from
//! hibernation needs its history and last-route projections and the runtime's validators every
//! time, so registering them one by one after opening read its log three times or more per
//! wake-up — a cost that grows with the log. Brought to
//! [`SessionLog::open_with`](super::SessionLog::open_with), they are folded in the same pass as
//! the built-in projections, over the log the open loads anyway: one read per wake-up.

use crate::projection::Projection;
use crate::validator::Validator;

use super::registry::{self, ErasedProjection};

/// What [`SessionLog::open_with`](super::SessionLog::open_with) installs before it folds the
/// loaded log: projections (each registered under its key, as by
/// [`SessionLog::register`](super::SessionLog::register)) and validators (each replayed the
/// loaded log, as by [`SessionLog::add_validator`](super::SessionLog::add_validator)). They also
/// see the repair the open appends.
#[derive(Default)]
pub struct OpenOptions {
    pub(super) projections: Vec<Box<dyn ErasedProjection>>,
    pub(super) validators: Vec<Box<dyn Validator>>,
    pub(super) keep_open_turn: bool,
}

impl std::fmt::Debug for OpenOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenOptions")
            .field("projections", &self.projections.iter().map(|p| p.key()).collect::<Vec<_>>())
            .field("validators", &self.validators.iter().map(|v| v.name()).collect::<Vec<_>>())
            .field("keep_open_turn", &self.keep_open_turn)
            .finish()
    }
}

impl OpenOptions {
    /// Nothing beyond the built-in projections (what [`SessionLog::open`](super::SessionLog::open)
    /// opens with).
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `projection` too. A key taken (by a built-in or an earlier projection) fails
    /// the open with [`LogError::DuplicateProjection`](super::LogError::DuplicateProjection).
    pub fn projection<P: Projection>(mut self, projection: P) -> Self {
        self.projections.push(registry::erase(projection));
        self
    }

    /// Installs `validator` too; it checks every append after the open.
    pub fn validator(mut self, validator: Box<dyn Validator>) -> Self {
        self.validators.push(validator);
        self
    }

    /// Leaves a turn a crash left open as it is, for the opener to resume (or close) it: the
    /// open writes no `step/end`, `turn/end {kind:"interrupted"}` or `agent/idle` for it, and
    /// reports it in [`OpenReport::open_turn`](super::OpenReport::open_turn). What a closed log
    /// lacks (an `agent/idle` after its last `turn/end`) is still written.
    pub fn keep_open_turn(mut self) -> Self {
        self.keep_open_turn = true;
        self
    }
}
