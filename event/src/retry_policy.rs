//! The retry policy of a provider route, as the runtime carries it (`docs/runtime-semantics.md`,
//! "Policies").
//!
//! A [`RetryPolicy`] is `normal` (a budget of `max_retries` for the listed codes) or `always`
//! (every code, no budget); both share a [`Backoff`] curve. The waterfall payload
//! carries the route's *effective* policy ([`RetryPolicy::effective`]): the route's declared
//! policy, else the one the `llm-retry` plugin was configured with, else
//! [`RetryPolicy::default`]. Chains of retries are keyed by [`RetryPolicy::policy_key`].
//!
//! # Why the type lives in the runtime
//!
//! The runtime resolves the effective policy and hands it to every plugin, and the runtime never
//! imports a plugin. So the policy is runtime vocabulary, like [`Failure`](crate::failure::Failure);
//! `llm-retry` decides with it and `auto-retry` reads the official curve from it, neither reaches
//! into the other.
//!
//! # Why valid by construction
//!
//! A [`Backoff`] and a [`RetryableCodes`] can only be built through checked constructors (or
//! [`RetryPolicy::from_declared`], which uses them), so every reader — the decisions, the
//! `policyKey`, the invariant-facing `llm/retry` fields — may rely on a policy's bounds without
//! re-checking: delays are finite, positive and fit a timer, the jitter ratio is in `[0, 1]`, the
//! code list is non-empty and duplicate-free. `max_retries` is a plain integer; declarations are
//! held to JavaScript's safe-integer range so that the log stays exact in every reader.

mod declared;
mod error;

pub use declared::{max_retries_from_declared, object, reject_unknown_keys};
pub use error::{PolicyError, PolicyErrorKind, join as field_path};

use crate::failure;
use crate::json_number;
use crate::policy_key::{self, Part};

/// The largest delay a timer may be asked for, in milliseconds (2^31 − 1).
pub const MAX_DELAY_MS: f64 = 2_147_483_647.0;

/// The largest integer every JSON reader holds exactly (2^53 − 1); the bound of `maxRetries`.
pub const MAX_SAFE_INTEGER: u64 = 9_007_199_254_740_991;

/// The default `maxRetries`.
pub const DEFAULT_MAX_RETRIES: u64 = 2;
/// The default `initialDelayMs`.
pub const DEFAULT_INITIAL_DELAY_MS: f64 = 500.0;
/// The default `maxDelayMs`.
pub const DEFAULT_MAX_DELAY_MS: f64 = 10_000.0;
/// The default `jitterRatio`.
pub const DEFAULT_JITTER_RATIO: f64 = 0.1;
/// The default `retryableCodes`.
pub const DEFAULT_RETRYABLE_CODES: &[&str] =
    &[failure::RATE_LIMIT, failure::SERVER, failure::TIMEOUT, failure::TRANSPORT];

/// A route's retry policy.
///
/// A route declares one in the format of a configuration file; every error names its field:
///
/// ```
/// use rein_event::retry_policy::RetryPolicy;
/// use serde_json::json;
///
/// let declared = json!({"mode": "normal", "maxRetries": 5, "backoff": {"initialDelayMs": 200}});
/// let policy = RetryPolicy::from_declared(&declared, "retryPolicy")?;
/// assert_eq!((policy.mode(), policy.max_retries()), ("normal", Some(5)));
/// assert!(policy.retries_code("RATE_LIMIT") && !policy.retries_code("AUTH"));
///
/// let wrong = json!({"mode": "normal", "backoff": {"jitterRatio": 1.5}});
/// let error = RetryPolicy::from_declared(&wrong, "retryPolicy").unwrap_err();
/// assert!(error.to_string().starts_with("retryPolicy.backoff.jitterRatio:"), "{error}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum RetryPolicy {
    /// Retry the listed codes, at most `max_retries` times per chain.
    Normal {
        /// The chain's budget (0 = never retry).
        max_retries: u64,
        /// The codes worth retrying.
        retryable_codes: RetryableCodes,
        /// The delay curve.
        backoff: Backoff,
    },
    /// Retry every code, without a budget, after asking downstream first.
    Always {
        /// The delay curve.
        backoff: Backoff,
    },
}

impl Default for RetryPolicy {
    /// normal, 2 retries of `RATE_LIMIT`, `SERVER`, `TIMEOUT`, `TRANSPORT`, 500 → 10000 ms, 10 %
    /// jitter.
    fn default() -> Self {
        RetryPolicy::Normal {
            max_retries: DEFAULT_MAX_RETRIES,
            retryable_codes: RetryableCodes::default(),
            backoff: Backoff::default(),
        }
    }
}

impl RetryPolicy {
    /// The effective policy of a route: its declared policy, else the policy the
    /// `llm-retry` plugin was configured with, else the defaults.
    pub fn effective(declared: Option<&RetryPolicy>, configured: Option<&RetryPolicy>) -> Self {
        declared.or(configured).cloned().unwrap_or_default()
    }

    /// `"normal"` or `"always"`, as written in `llm/retry.mode`.
    pub fn mode(&self) -> &'static str {
        match self {
            RetryPolicy::Normal { .. } => "normal",
            RetryPolicy::Always { .. } => "always",
        }
    }

    /// The delay curve.
    pub fn backoff(&self) -> &Backoff {
        match self {
            RetryPolicy::Normal { backoff, .. } | RetryPolicy::Always { backoff } => backoff,
        }
    }

    /// The budget, in normal mode (`llm/retry.maxRetries`); `None` in always mode.
    pub fn max_retries(&self) -> Option<u64> {
        match self {
            RetryPolicy::Normal { max_retries, .. } => Some(*max_retries),
            RetryPolicy::Always { .. } => None,
        }
    }

    /// Whether a failure with `code` may be retried: listed in normal mode, any in always mode.
    pub fn retries_code(&self, code: &str) -> bool {
        match self {
            RetryPolicy::Normal { retryable_codes, .. } => retryable_codes.contains(code),
            RetryPolicy::Always { .. } => true,
        }
    }

    /// The canonical key of the policy (`docs/runtime-semantics.md`, "Retry chains"): a compact
    /// JSON array, byte for byte what the JavaScript seed harness writes ([`policy_key`]):
    /// numbers as `JSON.stringify` writes them, codes sorted by UTF-16 code units. Two policies
    /// have the same key exactly when they retry the same way, so a changed field starts a new
    /// chain.
    ///
    /// `["normal",2,["RATE_LIMIT","SERVER"],500,10000,0]`, `["always",500,10000,0.1]`.
    pub fn policy_key(&self) -> String {
        let b = self.backoff();
        let mut key = vec![Part::Text(self.mode())];
        if let RetryPolicy::Normal { max_retries, retryable_codes, .. } = self {
            key.push(Part::Whole(*max_retries));
            key.push(Part::Codes(retryable_codes.as_slice().iter().map(String::as_str).collect()));
        }
        key.extend([b.initial_delay_ms, b.max_delay_ms, b.jitter_ratio].map(Part::Number));
        policy_key::write(&key)
    }
}

/// The delay curve of a policy (`docs/runtime-semantics.md`, "Backoff"). Valid by construction:
/// both delays are finite, `> 0`, `≤ 2147483647` and `initial ≤ max`; the jitter ratio is finite
/// and in `[0, 1]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    initial_delay_ms: f64,
    max_delay_ms: f64,
    jitter_ratio: f64,
}

impl Default for Backoff {
    /// 500 → 10000 ms with 10 % jitter.
    fn default() -> Self {
        Backoff {
            initial_delay_ms: DEFAULT_INITIAL_DELAY_MS,
            max_delay_ms: DEFAULT_MAX_DELAY_MS,
            jitter_ratio: DEFAULT_JITTER_RATIO,
        }
    }
}

/// Which field an `initial > max` error is reported on.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Blame {
    Initial,
    Max,
}

impl Backoff {
    /// A checked curve. Errors name the field (`initialDelayMs`, `maxDelayMs`, `jitterRatio`);
    /// an initial delay above the maximum is reported on `initialDelayMs`.
    pub fn new(
        initial_delay_ms: f64,
        max_delay_ms: f64,
        jitter_ratio: f64,
    ) -> Result<Self, PolicyError> {
        Self::checked(initial_delay_ms, max_delay_ms, jitter_ratio, Blame::Initial)
    }

    pub(crate) fn checked(
        initial_delay_ms: f64,
        max_delay_ms: f64,
        jitter_ratio: f64,
        blame: Blame,
    ) -> Result<Self, PolicyError> {
        check_delay(initial_delay_ms).map_err(|k| PolicyError::new(INITIAL_DELAY_MS, k))?;
        check_delay(max_delay_ms).map_err(|k| PolicyError::new(MAX_DELAY_MS_KEY, k))?;
        if initial_delay_ms > max_delay_ms {
            let path = match blame {
                Blame::Initial => INITIAL_DELAY_MS,
                Blame::Max => MAX_DELAY_MS_KEY,
            };
            return Err(PolicyError::new(
                path,
                PolicyErrorKind::InitialAboveMax {
                    initial: json_number::format(initial_delay_ms),
                    max: json_number::format(max_delay_ms),
                },
            ));
        }
        if !(jitter_ratio.is_finite() && (0.0..=1.0).contains(&jitter_ratio)) {
            return Err(PolicyError::new(
                JITTER_RATIO,
                PolicyErrorKind::JitterRatio(describe_f64(jitter_ratio)),
            ));
        }
        Ok(Backoff { initial_delay_ms, max_delay_ms, jitter_ratio })
    }

    /// The delay of retry 1 before jitter, in milliseconds.
    pub fn initial_delay_ms(&self) -> f64 {
        self.initial_delay_ms
    }

    /// The cap of every delay, in milliseconds (also the cap of a provider-suggested delay).
    pub fn max_delay_ms(&self) -> f64 {
        self.max_delay_ms
    }

    /// The symmetric jitter ratio, in `[0, 1]`.
    pub fn jitter_ratio(&self) -> f64 {
        self.jitter_ratio
    }
}

/// The codes a normal-mode policy retries. Valid by construction: non-empty, no duplicates, no
/// empty string. Keeps the declared order (the `policyKey` sorts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryableCodes(Vec<String>);

impl Default for RetryableCodes {
    /// `RATE_LIMIT`, `SERVER`, `TIMEOUT`, `TRANSPORT`.
    fn default() -> Self {
        RetryableCodes(DEFAULT_RETRYABLE_CODES.iter().map(|c| (*c).to_owned()).collect())
    }
}

impl RetryableCodes {
    /// A checked list. Errors name the element (`[2]`), so a reader can prefix the field.
    pub fn new<I, S>(codes: I) -> Result<Self, PolicyError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let codes: Vec<String> = codes.into_iter().map(Into::into).collect();
        if codes.is_empty() {
            return Err(PolicyError::new("", PolicyErrorKind::NoCodes));
        }
        for (i, code) in codes.iter().enumerate() {
            if code.is_empty() {
                return Err(PolicyError::new(format!("[{i}]"), PolicyErrorKind::EmptyCode));
            }
            if let Some(first) = codes[..i].iter().position(|c| c == code) {
                return Err(PolicyError::new(
                    format!("[{i}]"),
                    PolicyErrorKind::DuplicateCode { code: code.clone(), first },
                ));
            }
        }
        Ok(RetryableCodes(codes))
    }

    /// Whether `code` is listed (exact, case-sensitive: codes are identifiers).
    pub fn contains(&self, code: &str) -> bool {
        self.0.iter().any(|c| c == code)
    }

    /// The codes in declared order.
    pub fn as_slice(&self) -> &[String] {
        &self.0
    }

    /// The codes sorted (the `policyKey` order: JavaScript's, by UTF-16 code units).
    pub fn sorted(&self) -> Vec<String> {
        let mut codes = self.0.clone();
        policy_key::sort_codes(&mut codes);
        codes
    }
}

const INITIAL_DELAY_MS: &str = "initialDelayMs";
const MAX_DELAY_MS_KEY: &str = "maxDelayMs";
const JITTER_RATIO: &str = "jitterRatio";

fn check_delay(ms: f64) -> Result<(), PolicyErrorKind> {
    if ms.is_finite() && ms > 0.0 && ms <= MAX_DELAY_MS {
        Ok(())
    } else {
        Err(PolicyErrorKind::Delay(describe_f64(ms)))
    }
}

/// A number as a person would read it in an error (`Infinity`, `NaN`, `500`, `1.1`).
fn describe_f64(value: f64) -> String {
    if value.is_nan() {
        "NaN".to_owned()
    } else if value.is_infinite() {
        if value > 0.0 { "Infinity" } else { "-Infinity" }.to_owned()
    } else {
        json_number::format(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normal(max_retries: u64, codes: &[&str], b: (f64, f64, f64)) -> RetryPolicy {
        RetryPolicy::Normal {
            max_retries,
            retryable_codes: RetryableCodes::new(codes.iter().copied()).unwrap(),
            backoff: Backoff::new(b.0, b.1, b.2).unwrap(),
        }
    }

    #[test]
    fn defaults_are_the_spec_table() {
        let policy = RetryPolicy::default();
        assert_eq!(policy.mode(), "normal");
        assert_eq!(policy.max_retries(), Some(2));
        let b = policy.backoff();
        assert_eq!(
            (b.initial_delay_ms(), b.max_delay_ms(), b.jitter_ratio()),
            (500.0, 10000.0, 0.1)
        );
        let RetryPolicy::Normal { retryable_codes, .. } = &policy else { panic!("normal") };
        assert_eq!(retryable_codes.as_slice(), ["RATE_LIMIT", "SERVER", "TIMEOUT", "TRANSPORT"]);
        assert_eq!(
            policy.policy_key(),
            r#"["normal",2,["RATE_LIMIT","SERVER","TIMEOUT","TRANSPORT"],500,10000,0.1]"#
        );
    }

    #[test]
    fn policy_keys_are_canonical() {
        let always = |b: (f64, f64, f64)| RetryPolicy::Always {
            backoff: Backoff::new(b.0, b.1, b.2).unwrap(),
        };
        let cases = [
            (
                normal(2, &["SERVER", "RATE_LIMIT"], (500.0, 10000.0, 0.0)),
                r#"["normal",2,["RATE_LIMIT","SERVER"],500,10000,0]"#,
            ),
            (always((500.0, 10000.0, 0.1)), r#"["always",500,10000,0.1]"#),
            (always((1.0, 4.0, 0.1)), r#"["always",1,4,0.1]"#),
            (normal(0, &["X"], (0.5, 2147483647.0, 1.0)), r#"["normal",0,["X"],0.5,2147483647,1]"#),
            // Codes are JSON strings: quotes and backslashes are escaped, not spliced.
            (
                normal(1, &["A\"B", "a\\b"], (1.0, 1.0, 0.0)),
                r#"["normal",1,["A\"B","a\\b"],1,1,0]"#,
            ),
            // Byte for byte what JavaScript writes: numbers as JSON.stringify does, codes in
            // UTF-16 order (a character outside the BMP before U+E000).
            (
                normal(1, &["\u{E000}", "\u{1F600}", "A"], (0.000001, 0.0000015, 1e-7)),
                "[\"normal\",1,[\"A\",\"\u{1F600}\",\"\u{E000}\"],0.000001,0.0000015,1e-7]",
            ),
            (always((0.00001, 2147483647.0, 5e-324)), r#"["always",0.00001,2147483647,5e-324]"#),
            (
                always((0.1 + 0.2, 450.00000000000006, 0.0)),
                r#"["always",0.30000000000000004,450.00000000000006,0]"#,
            ),
        ];
        for (policy, key) in cases {
            assert_eq!(policy.policy_key(), key);
        }
    }

    #[test]
    fn every_field_changes_the_key_but_code_order_does_not() {
        let base = normal(2, &["SERVER", "RATE_LIMIT"], (500.0, 10000.0, 0.1));
        let reordered = normal(2, &["RATE_LIMIT", "SERVER"], (500.0, 10000.0, 0.1));
        assert_eq!(base.policy_key(), reordered.policy_key());
        let changed = [
            normal(3, &["SERVER", "RATE_LIMIT"], (500.0, 10000.0, 0.1)),
            normal(2, &["SERVER"], (500.0, 10000.0, 0.1)),
            normal(2, &["SERVER", "RATE_LIMIT"], (501.0, 10000.0, 0.1)),
            normal(2, &["SERVER", "RATE_LIMIT"], (500.0, 9999.0, 0.1)),
            normal(2, &["SERVER", "RATE_LIMIT"], (500.0, 10000.0, 0.2)),
            RetryPolicy::Always { backoff: Backoff::new(500.0, 10000.0, 0.1).unwrap() },
        ];
        for other in changed {
            assert_ne!(base.policy_key(), other.policy_key(), "{other:?}");
        }
    }

    #[test]
    fn the_backoff_constructor_enforces_the_bounds() {
        let cases = [
            (
                (0.0, 10.0, 0.0),
                "initialDelayMs: must be a finite number > 0 and ≤ 2147483647, got 0",
            ),
            ((-1.0, 10.0, 0.0), "initialDelayMs: must be a finite number > 0"),
            (
                (f64::NAN, 10.0, 0.0),
                "initialDelayMs: must be a finite number > 0 and ≤ 2147483647, got NaN",
            ),
            (
                (1.0, f64::INFINITY, 0.0),
                "maxDelayMs: must be a finite number > 0 and ≤ 2147483647, got Infinity",
            ),
            (
                (2147483648.0, 2147483648.0, 0.0),
                "initialDelayMs: must be a finite number > 0 and ≤ 2147483647, got 2147483648",
            ),
            (
                (1.0, 2147483647.5, 0.0),
                "maxDelayMs: must be a finite number > 0 and ≤ 2147483647, got 2147483647.5",
            ),
            ((20.0, 10.0, 0.0), "initialDelayMs: initialDelayMs (20) must be ≤ maxDelayMs (10)"),
            ((1.0, 10.0, 1.1), "jitterRatio: must be within [0, 1], got 1.1"),
            ((1.0, 10.0, -0.1), "jitterRatio: must be within [0, 1], got -0.1"),
            ((1.0, 10.0, f64::NAN), "jitterRatio: must be within [0, 1], got NaN"),
        ];
        for ((initial, max, jitter), expected) in cases {
            let err = Backoff::new(initial, max, jitter).unwrap_err().to_string();
            assert!(err.starts_with(expected), "{initial} {max} {jitter}: {err}");
        }
        let edge = Backoff::new(2147483647.0, 2147483647.0, 1.0).unwrap();
        assert_eq!(edge.max_delay_ms(), MAX_DELAY_MS);
        assert!(Backoff::new(f64::MIN_POSITIVE, f64::MIN_POSITIVE, 0.0).is_ok());
    }

    #[test]
    fn the_codes_constructor_enforces_the_rules() {
        let cases: [(&[&str], &str); 3] = [
            (&[], "must be a non-empty list of code strings, got []"),
            (&["SERVER", ""], "[1]: must be a non-empty code string"),
            (&["SERVER", "TIMEOUT", "SERVER"], "[2]: duplicate code \"SERVER\" (first at index 0)"),
        ];
        for (codes, expected) in cases {
            let err = RetryableCodes::new(codes.iter().copied()).unwrap_err();
            assert_eq!(err.to_string(), expected);
        }
        let codes = RetryableCodes::new(["TIMEOUT", "HTTP_418"]).unwrap();
        assert!(codes.contains("HTTP_418"));
        assert!(!codes.contains("timeout"));
        assert_eq!(codes.sorted(), ["HTTP_418", "TIMEOUT"]);
    }

    #[test]
    fn the_effective_policy_prefers_the_route_then_the_plugin_then_the_defaults() {
        let route = RetryPolicy::Always { backoff: Backoff::default() };
        let plugin = normal(5, &["SERVER"], (1.0, 2.0, 0.0));
        let cases = [
            (Some(&route), Some(&plugin), &route),
            (Some(&route), None, &route),
            (None, Some(&plugin), &plugin),
        ];
        for (declared, configured, expected) in cases {
            assert_eq!(&RetryPolicy::effective(declared, configured), expected);
        }
        assert_eq!(RetryPolicy::effective(None, None), RetryPolicy::default());
    }

    #[test]
    fn modes_decide_which_codes_are_retried() {
        let policy = normal(2, &["SERVER"], (1.0, 2.0, 0.0));
        assert!(policy.retries_code("SERVER"));
        assert!(!policy.retries_code("AUTH"));
        let always = RetryPolicy::Always { backoff: Backoff::default() };
        assert!(always.retries_code("AUTH"));
        assert_eq!(always.max_retries(), None);
        assert_eq!(always.mode(), "always");
    }
}
