//! The request-error waterfall's rules, as pure functions (table-tested below). The walk that
//! applies them to the plugin actors is `plugin_host::walk`.
//!
//! - [`offered`]: whether a failure reaches the chain at all (not when the turn is cancelled, not
//!   `SCRIPT_EXHAUSTED`).
//! - [`hop`]: what one plugin's answer means for the walk — `Retry`/`Stop` decide, `Next`
//!   continues (or takes the answer downstream already gave), a crash counts as `Next`, and a
//!   plugin disposed during its recovery answers `Stop` whatever it said (fail closed).
//! - [`END_OF_CHAIN`]: the end of the chain answers `Stop`.
//! - [`outcome`]: cancellation beats everything.
//!
//! The names: a plugin gives a [`Verdict`] (or crashes: [`Answered`]); the rest of the chain —
//! and the chain as a whole — gives a [`DownstreamAnswer`]; one hop either decides that answer or
//! continues ([`Hop`]); the failing step gets a [`Resolution`].

use crate::failure::{self, Failure};
use crate::plugin::{DownstreamAnswer, Verdict};

/// What one plugin gave for a failure: its verdict, or a crash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answered {
    /// The plugin answered.
    Verdict(Verdict),
    /// The recovery panicked (counts as `Next`); its supervisor restarted the plugin
    /// (`restarts` in the window) or removed it.
    Crashed {
        /// The panic's message.
        error: String,
        /// Restarts within the intensity window.
        restarts: u32,
    },
}

/// What one hop means for the walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hop {
    /// The chain's answer is decided.
    Decided(DownstreamAnswer),
    /// Ask the next plugin.
    Continue,
}

/// The waterfall's outcome for the failed attempt, as its step acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resolution {
    /// Run a new attempt in the same step.
    Retry,
    /// End the step and the turn with the failure.
    Stop,
    /// The turn was cancelled: it ends `aborted`.
    Aborted,
}

/// The end of the chain answers `Stop`.
pub(crate) const END_OF_CHAIN: DownstreamAnswer = DownstreamAnswer::Stop;

/// Whether a failure is offered to the waterfall: not when the turn is cancelled (it ends
/// `aborted`), and not `SCRIPT_EXHAUSTED` (no policy may retry a finished script).
pub(crate) fn offered(failure: &Failure, cancelled: bool) -> bool {
    !cancelled && failure.code() != failure::SCRIPT_EXHAUSTED
}

/// What one plugin's answer means. `disposed`: the plugin left the chain during its recovery.
/// `downstream`: what the rest of the chain answered, if the plugin consulted it.
pub(crate) fn hop(answer: &Answered, disposed: bool, downstream: Option<DownstreamAnswer>) -> Hop {
    if disposed {
        return Hop::Decided(DownstreamAnswer::Stop);
    }
    match answer {
        Answered::Verdict(Verdict::Retry) => Hop::Decided(DownstreamAnswer::Retry),
        Answered::Verdict(Verdict::Stop) => Hop::Decided(DownstreamAnswer::Stop),
        Answered::Verdict(Verdict::Next) | Answered::Crashed { .. } => match downstream {
            // "Next" is whatever the rest of the chain answers — it already did.
            Some(DownstreamAnswer::Retry) => Hop::Decided(DownstreamAnswer::Retry),
            Some(DownstreamAnswer::Stop | DownstreamAnswer::Crashed) => {
                Hop::Decided(DownstreamAnswer::Stop)
            }
            None => Hop::Continue,
        },
    }
}

/// Whatever the chain answered, a cancelled turn ends `aborted`; a walk that could not finish
/// (`Crashed`: the runtime is shutting down) recovers nothing.
pub(crate) fn outcome(answer: DownstreamAnswer, cancelled: bool) -> Resolution {
    match (cancelled, answer) {
        (true, _) => Resolution::Aborted,
        (false, DownstreamAnswer::Retry) => Resolution::Retry,
        (false, DownstreamAnswer::Stop | DownstreamAnswer::Crashed) => Resolution::Stop,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DownstreamAnswer as D;
    use Verdict::{Next, Retry, Stop};

    fn crashed() -> Answered {
        Answered::Crashed { error: "boom".into(), restarts: 1 }
    }

    #[test]
    fn a_hop_decides_or_continues() {
        let v = Answered::Verdict;
        let retry = Hop::Decided(D::Retry);
        let stop = Hop::Decided(D::Stop);
        let cases: Vec<(Answered, bool, Option<D>, Hop)> = vec![
            // Plain verdicts.
            (v(Retry), false, None, retry),
            (v(Stop), false, None, stop),
            (v(Next), false, None, Hop::Continue),
            // A crash counts as Next.
            (crashed(), false, None, Hop::Continue),
            // Downstream spoke first: Next is its answer, the chain is not walked twice.
            (v(Next), false, Some(D::Retry), retry),
            (v(Next), false, Some(D::Stop), stop),
            (v(Next), false, Some(D::Crashed), stop),
            (crashed(), false, Some(D::Retry), retry),
            (crashed(), false, Some(D::Stop), stop),
            // A plugin may overrule what downstream said.
            (v(Retry), false, Some(D::Stop), retry),
            (v(Stop), false, Some(D::Retry), stop),
            // Disposed during its recovery: Stop, whatever it answered (fail closed).
            (v(Retry), true, None, stop),
            (v(Next), true, None, stop),
            (v(Next), true, Some(D::Retry), stop),
            (crashed(), true, None, stop),
        ];
        for (answer, disposed, downstream, expected) in cases {
            assert_eq!(
                hop(&answer, disposed, downstream),
                expected,
                "{answer:?} {disposed} {downstream:?}"
            );
        }
    }

    #[test]
    fn cancellation_beats_every_answer() {
        let cases = [
            (D::Retry, false, Resolution::Retry),
            (D::Stop, false, Resolution::Stop),
            (D::Crashed, false, Resolution::Stop),
            (D::Retry, true, Resolution::Aborted),
            (D::Stop, true, Resolution::Aborted),
            (D::Crashed, true, Resolution::Aborted),
        ];
        for (answer, cancelled, expected) in cases {
            assert_eq!(outcome(answer, cancelled), expected, "{answer:?} {cancelled}");
        }
        assert_eq!(END_OF_CHAIN, D::Stop);
    }

    #[test]
    fn what_reaches_the_chain() {
        let server = Failure::new("SERVER", "down").unwrap();
        let exhausted = Failure::new(failure::SCRIPT_EXHAUSTED, "no more script").unwrap();
        let aborted = Failure::aborted();
        assert!(offered(&server, false));
        assert!(!offered(&server, true), "a cancelled turn ends aborted");
        assert!(!offered(&exhausted, false), "a finished script is never retried");
        assert!(offered(&aborted, false), "an adapter's own ABORTED is a failure like any");
    }
}
