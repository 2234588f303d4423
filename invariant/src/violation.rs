//! A broken rule, as data: which event, which rule, and what a person needs to know.

use std::borrow::Cow;
use std::fmt;

use rein_event::event::Envelope;
use rein_event::quote;
use rein_event::validator::Rejection;

use crate::catalogue::Rule;

/// One broken rule.
///
/// Displayed as `llm/retry seq 7: retry 3 must equal 2 in chain [mock, …] [retry-continues-chain]`:
/// the offending event's type and `seq`, the message, and the rule's name.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Violation {
    /// The `seq` of the offending event.
    pub seq: u64,
    /// Its `family/name` type.
    pub kind: String,
    /// The rule it breaks.
    pub rule: Rule,
    /// What is wrong, in words.
    pub message: String,
}

impl Violation {
    /// A violation of `rule` by `event`. The message quotes values from the log, so it is cut
    /// to a readable length ([`quote::message`]).
    pub fn new(event: &Envelope, rule: Rule, message: impl Into<String>) -> Self {
        Self::at(event.seq, event.kind(), rule, message)
    }

    /// A violation of `rule` by the event with `seq` and `kind` (the message cut like
    /// [`Violation::new`]'s).
    pub fn at(seq: u64, kind: impl Into<String>, rule: Rule, message: impl Into<String>) -> Self {
        let message = message.into();
        let message = match quote::message(&message) {
            Cow::Borrowed(_) => message,
            Cow::Owned(cut) => cut,
        };
        Self { seq, kind: kind.into(), rule, message }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} seq {}: {} [{}]", self.kind, self.seq, self.message, self.rule)
    }
}

impl std::error::Error for Violation {}

impl From<Violation> for Rejection {
    fn from(v: Violation) -> Self {
        Rejection { seq: v.seq, kind: v.kind, rule: v.rule.name().to_owned(), message: v.message }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_type_seq_message_and_rule_like_a_rejection() {
        let v = Violation::at(
            7,
            "llm/retry",
            Rule::RetryContinuesChain,
            "retry 3 must equal 2 in chain [mock, x]",
        );
        let text = v.to_string();
        assert_eq!(
            text,
            "llm/retry seq 7: retry 3 must equal 2 in chain [mock, x] [retry-continues-chain]"
        );
        assert_eq!(Rejection::from(v).to_string(), text);
    }

    #[test]
    fn a_message_quoting_a_long_value_is_cut() {
        let id = "i".repeat(100_000);
        let v =
            Violation::at(7, "llm/retry", Rule::RetryIdOwnedByOneChain, format!("retryId {id:?}"));
        assert!(v.message.len() < 500, "{}", v.message.len());
        assert!(v.message.starts_with("retryId \"iiii") && v.message.ends_with("iii\""));
    }
}
