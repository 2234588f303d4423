//! Resume after a crash: a session reopened with a turn its log left open continues that turn
//! from where the log says it stood, instead of closing it `interrupted`.
//!
//! - [`Resume`]: the runtime's setting (`RuntimeBuilder::resume`): [`Resume::Never`] keeps the
//!   repair (`turn/end {kind:"interrupted"}`), the default resumes a turn at most
//!   [`Resume::DEFAULT_MAX_RESUMES`] times.
//! - `plan`: the decision, a pure function of the open turn's tail (`plan::decide`): what was
//!   pending, and where the turn, its step and its attempt continue.
//!
//! The session actor wires it: it opens its log leaving the open turn as it is
//! (`OpenOptions::keep_open_turn`), reads the turn's tail, and either closes the turn
//! `interrupted` or appends `turn/resumed` and starts a turn actor at the decided point (see
//! `session::actor`, `turn`, `step`).

pub(crate) mod plan;

/// Whether a runtime continues the turns a crash left open when it reopens their sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Resume {
    /// Never: a turn a crash left open is closed `interrupted` on reopen.
    Never,
    /// Resume a turn a crash left open, unless it was already resumed `max_resumes` times (its
    /// `turn/resumed` events): a turn that kills its process every time must not loop forever.
    On {
        /// How many times one turn may be resumed.
        max_resumes: u32,
    },
}

impl Resume {
    /// How many times a turn is resumed by default.
    pub const DEFAULT_MAX_RESUMES: u32 = 3;

    /// Resume, at most `max_resumes` times per turn.
    pub fn max_resumes(max_resumes: u32) -> Self {
        Resume::On { max_resumes }
    }

    /// Whether turns are resumed at all.
    pub fn is_on(self) -> bool {
        matches!(self, Resume::On { .. })
    }
}

impl Default for Resume {
    /// Resume, at most [`Resume::DEFAULT_MAX_RESUMES`] times per turn.
    fn default() -> Self {
        Resume::On { max_resumes: Self::DEFAULT_MAX_RESUMES }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resuming_is_on_by_default_three_times() {
        assert_eq!(Resume::default(), Resume::On { max_resumes: 3 });
        assert!(Resume::default().is_on());
        assert!(!Resume::Never.is_on());
        assert_eq!(Resume::max_resumes(1), Resume::On { max_resumes: 1 });
    }
}
