//! [`Faults`]: crashes to inject into the runtime's own actors, to exercise their supervision.
//!
//! A step or a turn actor panics only through a bug of the runtime itself: nothing a plugin, an
//! adapter or a tool does can make it (their panics are caught where they run). So the paths
//! that handle such a crash — the turn closing a crashed step, the session closing a crashed
//! turn — would go untested without a way to provoke one. A [`Faults`] given to
//! [`RuntimeBuilder::faults`](crate::runtime::RuntimeBuilder::faults) names where to panic; the
//! default injects nothing, and the checks cost a comparison per step.

/// Where the runtime's own actors panic on purpose (tests, stress runs). Default: nowhere.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Faults {
    step: Option<(u32, u32)>,
    turn: Option<u32>,
}

impl Faults {
    /// No faults.
    pub fn none() -> Self {
        Self::default()
    }

    /// The step actor of step `step` of turn `turn` (of every session) panics on the first
    /// message it handles (its `step/start` and `request/start` are written by then).
    #[must_use]
    pub fn panic_step(mut self, turn: u32, step: u32) -> Self {
        self.step = Some((turn, step));
        self
    }

    /// The turn actor of turn `turn` (of every session) panics when its first step ends.
    #[must_use]
    pub fn panic_turn(mut self, turn: u32) -> Self {
        self.turn = Some(turn);
        self
    }

    /// Panics if step `step` of turn `turn` is to crash.
    pub(crate) fn at_step(&self, turn: u32, step: u32) {
        if self.step == Some((turn, step)) {
            panic!("injected fault: step {step} of turn {turn}");
        }
    }

    /// Panics if turn `turn` is to crash.
    pub(crate) fn at_turn(&self, turn: u32) {
        if self.turn == Some(turn) {
            panic!("injected fault: turn {turn}");
        }
    }
}
