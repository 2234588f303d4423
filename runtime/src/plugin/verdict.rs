//! [`Verdict`]: a plugin's answer to a failed attempt.

/// A plugin's answer to a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Rerun the request as a new attempt in the same step: on the same route, or on the route
    /// a `route/switched` written for this failure names ([`Recovery::switch_route`](super::Recovery::switch_route)).
    Retry,
    /// Delegate: the answer is whatever the rest of the chain answers.
    Next,
    /// End the chain here with no recovery: the turn ends with the failure.
    Stop,
}
