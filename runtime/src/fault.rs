//! [`Faults`]: crashes to inject into the runtime's own actors, to exercise their supervision.
//!
//! A step or a turn actor panics only through a bug of the runtime itself: nothing a plugin, an
//! adapter or a tool does can make it (their panics are caught where they run). So the paths
//! that handle such a crash — the turn closing a crashed step, the session closing a crashed
//! turn — would go untested without a way to provoke one. A [`Faults`] given to
//! [`RuntimeBuilder::faults`](crate::runtime::RuntimeBuilder::faults) names where to panic; the
//! default injects nothing, and the checks cost a comparison per step. One fault is a delay, not
//! a crash ([`Faults::slow_turn_end`]): it holds a race open that only another worker thread's
//! timing would otherwise open, so a test can reproduce it.

use std::time::Duration;

/// Where the runtime's own actors panic (or stall) on purpose (tests, stress runs). Default:
/// nowhere.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Faults {
    step: Option<(u32, u32)>,
    turn: Option<u32>,
    slow_turn_end: Option<(u32, Duration)>,
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

    /// The turn actor of turn `turn` (of every session) takes `delay` to stop once it ended on
    /// its own (its last step completed or failed): its end is decided, but its session learns
    /// of it only after the delay. On a multi-threaded runtime the turn's thread can be that
    /// slow at random; this makes the moment reproducible (a cancel arriving after the turn
    /// decided, before its `turn/end` is written).
    #[must_use]
    pub fn slow_turn_end(mut self, turn: u32, delay: Duration) -> Self {
        self.slow_turn_end = Some((turn, delay));
        self
    }

    /// Waits, if turn `turn` is to be slow to stop.
    pub(crate) async fn at_turn_end(&self, turn: u32) {
        if let Some((slow, delay)) = self.slow_turn_end
            && slow == turn
        {
            tokio::time::sleep(delay).await;
        }
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
