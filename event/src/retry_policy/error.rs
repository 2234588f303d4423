//! Why a retry policy (or a plugin configuration describing one) is invalid.
//!
//! # Why a path plus a kind
//!
//! Every configuration error must name the field it is about (for example
//! `providers.mock.retryPolicy.backoff.jitterRatio: must be within [0, 1]`). The same rules are
//! read from different places — a route's `retryPolicy.backoff.initialDelayMs`, the `llm-retry`
//! plugin's flat `initialDelayMs`, a scenario's `plugins[0].config` — so the rule reports a
//! [`PolicyErrorKind`] and the reader that knows where the field lives supplies the path. Callers
//! that need to react to a specific rule match on the kind; people read the `Display` form.

use std::fmt;

/// An invalid retry policy: the field path and what is wrong with it. Displays as
/// `path: problem` (or just the problem when the path is empty).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PolicyError {
    /// The dotted path of the offending field, e.g. `providers.mock.retryPolicy.backoff.jitterRatio`.
    pub path: String,
    /// What is wrong with it.
    pub kind: PolicyErrorKind,
}

impl PolicyError {
    /// An error about the field at `path`.
    pub fn new(path: impl Into<String>, kind: PolicyErrorKind) -> Self {
        Self { path: path.into(), kind }
    }

    /// The same error, seen from an enclosing value at `prefix` (`prefix.path`).
    pub fn within(self, prefix: &str) -> Self {
        Self { path: join(prefix, &self.path), kind: self.kind }
    }
}

impl std::error::Error for PolicyError {}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.kind)
        } else {
            write!(f, "{}: {}", self.path, self.kind)
        }
    }
}

/// The rule a field broke.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyErrorKind {
    /// A key the format does not have (often a typo).
    #[error("unknown key (expected one of: {})", .expected.join(", "))]
    UnknownKey {
        /// The keys that are allowed there.
        expected: Vec<&'static str>,
    },
    /// A required key is absent.
    #[error("is required")]
    Missing,
    /// The value is not a JSON object.
    #[error("must be an object, got {0}")]
    NotAnObject(String),
    /// `mode` is neither `normal` nor `always`.
    #[error("must be \"normal\" or \"always\", got {0}")]
    Mode(String),
    /// A field of normal mode appeared in an always-mode policy.
    #[error("not applicable in always mode (always retries every code, without a budget)")]
    NotApplicableInAlways,
    /// `maxRetries` is not a non-negative safe integer.
    #[error("must be a non-negative integer ≤ 9007199254740991, got {0}")]
    MaxRetries(String),
    /// `retryableCodes` is not a list.
    #[error("must be a non-empty list of code strings, got {0}")]
    CodesNotAList(String),
    /// `retryableCodes` is an empty list.
    #[error("must be a non-empty list of code strings, got []")]
    NoCodes,
    /// A code is not a string.
    #[error("must be a code string, got {0}")]
    CodeNotAString(String),
    /// A code is the empty string.
    #[error("must be a non-empty code string")]
    EmptyCode,
    /// A code appears twice.
    #[error("duplicate code {code:?} (first at index {first})")]
    DuplicateCode {
        /// The repeated code.
        code: String,
        /// Where it first appeared.
        first: usize,
    },
    /// A delay is not a finite number in (0, 2147483647].
    #[error("must be a finite number > 0 and ≤ 2147483647, got {0}")]
    Delay(String),
    /// `initialDelayMs` is above `maxDelayMs`.
    #[error("initialDelayMs ({initial}) must be ≤ maxDelayMs ({max})")]
    InitialAboveMax {
        /// The initial delay, as written.
        initial: String,
        /// The maximum delay, as written.
        max: String,
    },
    /// `jitterRatio` is not a finite number in [0, 1].
    #[error("must be within [0, 1], got {0}")]
    JitterRatio(String),
}

/// The path of `key` inside the value at `prefix`: `prefix.key`, `prefix[2]` for an index key
/// (`[2]`), `key` when the prefix is empty and `prefix` when the key is.
pub fn join(prefix: &str, key: &str) -> String {
    match (prefix.is_empty(), key.is_empty()) {
        (true, _) => key.to_owned(),
        (false, true) => prefix.to_owned(),
        (false, false) if key.starts_with('[') => format!("{prefix}{key}"),
        (false, false) => format!("{prefix}.{key}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_join_like_a_person_writes_them() {
        let cases = [
            ("", "maxRetries", "maxRetries"),
            ("providers.mock.retryPolicy", "backoff", "providers.mock.retryPolicy.backoff"),
            ("retryableCodes", "[2]", "retryableCodes[2]"),
            ("plugins[0].config", "", "plugins[0].config"),
        ];
        for (prefix, key, joined) in cases {
            assert_eq!(join(prefix, key), joined);
        }
    }

    #[test]
    fn display_names_the_path_first() {
        let err = PolicyError::new("jitterRatio", PolicyErrorKind::JitterRatio("1.1".into()))
            .within("providers.mock.retryPolicy.backoff");
        assert_eq!(
            err.to_string(),
            "providers.mock.retryPolicy.backoff.jitterRatio: must be within [0, 1], got 1.1"
        );
        let bare = PolicyError::new("", PolicyErrorKind::NotAnObject("3".into()));
        assert_eq!(bare.to_string(), "must be an object, got 3");
    }
}
