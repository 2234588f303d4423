//! [`Counted`]: what one attempt's outcome tells about its route — the one classification both
//! the retry budget and the circuit breaker count with.
//!
//! A success is a success. A failure counts against the route unless it says nothing about the
//! route: a cancelled attempt (`ABORTED`: the user or a shutdown ended it), a request the
//! provider refused as the request's own fault (`INVALID_REQUEST`, `CONTEXT_WINDOW_EXCEEDED`,
//! `IMAGE_OFFLOAD_REQUIRED`: the route answered, and answered fast), and the runtime's own codes
//! (`SCRIPT_EXHAUSTED`, `CIRCUIT_OPEN`: no request reached a provider). Those are neutral: they
//! neither take a token nor give one back, and the breaker does not count them.

use crate::failure::{self, Failure};

/// What an attempt's outcome means for its route's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// The route served the attempt.
    Success,
    /// The route failed it.
    Failure,
    /// It says nothing about the route.
    Neutral,
}

/// The codes of failures that say nothing about their route (see the module docs).
pub const NEUTRAL_CODES: &[&str] = &[
    failure::ABORTED,
    failure::INVALID_REQUEST,
    failure::CONTEXT_WINDOW_EXCEEDED,
    failure::IMAGE_OFFLOAD_REQUIRED,
    failure::SCRIPT_EXHAUSTED,
    failure::CIRCUIT_OPEN,
];

/// What `outcome` (`Ok` for a success) counts as.
pub fn counted<T>(outcome: Result<T, &Failure>) -> Counted {
    match outcome {
        Ok(_) => Counted::Success,
        Err(failure) if NEUTRAL_CODES.contains(&failure.code()) => Counted::Neutral,
        Err(_) => Counted::Failure,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_count_for_or_against_the_route_or_not_at_all() {
        let cases = [
            ("SERVER", Counted::Failure),
            ("RATE_LIMIT", Counted::Failure),
            ("TIMEOUT", Counted::Failure),
            ("TRANSPORT", Counted::Failure),
            ("STREAM_CLOSED", Counted::Failure),
            ("AUTH", Counted::Failure),
            ("QUOTA", Counted::Failure),
            ("UNKNOWN", Counted::Failure),
            ("HTTP_418", Counted::Failure),
            ("ABORTED", Counted::Neutral),
            ("INVALID_REQUEST", Counted::Neutral),
            ("CONTEXT_WINDOW_EXCEEDED", Counted::Neutral),
            ("IMAGE_OFFLOAD_REQUIRED", Counted::Neutral),
            ("SCRIPT_EXHAUSTED", Counted::Neutral),
            ("CIRCUIT_OPEN", Counted::Neutral),
        ];
        for (code, expected) in cases {
            let failure = Failure::new(code, "x").unwrap();
            assert_eq!(counted::<()>(Err(&failure)), expected, "{code}");
        }
        assert_eq!(counted::<()>(Ok(())), Counted::Success);
    }
}
