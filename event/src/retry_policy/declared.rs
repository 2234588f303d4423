//! Reading a declared policy from JSON, strictly (`docs/runtime-semantics.md`, "Policies").
//!
//! A route declares `{mode, maxRetries?, retryableCodes?, backoff?: {initialDelayMs?,
//! maxDelayMs?, jitterRatio?}}`; omitted fields take the defaults. The field readers are public
//! so that other formats holding the same fields (the `llm-retry` plugin's flat configuration)
//! apply exactly the same rules and report errors the same way.
//!
//! # Why strict
//!
//! A retry policy is read once, at configuration time, and then silently shapes every failure
//! of a route. A typo (`maxRetires`) or an out-of-range value that fell back to a default would
//! change behaviour without a trace, so every unknown key and invalid value is an error naming
//! its field path — the opposite of `auto-retry`'s lenient configuration file, whose
//! fallbacks each leave a warning.
//!
//! # Why integral floats count as integers
//!
//! JSON does not distinguish `2` from `2.0` (JavaScript, where the original executor lives,
//! cannot), so `maxRetries: 2.0` is accepted as 2; `1.5`, negative numbers and numbers beyond
//! 2^53 − 1 (which a JavaScript reader could not hold exactly) are rejected.

use serde_json::{Map, Value};

use super::error::join;
use super::{
    Backoff, Blame, DEFAULT_INITIAL_DELAY_MS, DEFAULT_JITTER_RATIO, DEFAULT_MAX_DELAY_MS,
    DEFAULT_MAX_RETRIES, INITIAL_DELAY_MS, JITTER_RATIO, MAX_DELAY_MS_KEY, MAX_SAFE_INTEGER,
    PolicyError, PolicyErrorKind, RetryPolicy, RetryableCodes,
};
use crate::json_number;

const MODE: &str = "mode";
const MAX_RETRIES: &str = "maxRetries";
const RETRYABLE_CODES: &str = "retryableCodes";
const BACKOFF: &str = "backoff";
const POLICY_KEYS: &[&str] = &[MODE, MAX_RETRIES, RETRYABLE_CODES, BACKOFF];
const BACKOFF_KEYS: &[&str] = &[INITIAL_DELAY_MS, MAX_DELAY_MS_KEY, JITTER_RATIO];

impl RetryPolicy {
    /// Reads a route's declared policy (`value`, found at `path`, e.g.
    /// `providers.mock.retryPolicy`). Omitted fields take the defaults; every error names the
    /// full field path (`providers.mock.retryPolicy.backoff.jitterRatio: must be within [0, 1],
    /// got 1.1`).
    pub fn from_declared(value: &Value, path: &str) -> Result<Self, PolicyError> {
        let map = object(value, path)?;
        reject_unknown_keys(map, POLICY_KEYS, path)?;
        let mode = map
            .get(MODE)
            .ok_or_else(|| PolicyError::new(join(path, MODE), PolicyErrorKind::Missing))?;
        let backoff = match map.get(BACKOFF) {
            None => Backoff::default(),
            Some(value) => {
                let at = join(path, BACKOFF);
                let fields = object(value, &at)?;
                reject_unknown_keys(fields, BACKOFF_KEYS, &at)?;
                Backoff::from_declared_fields(fields, &at)?
            }
        };
        match mode.as_str() {
            Some("normal") => {
                let max_retries = match map.get(MAX_RETRIES) {
                    None => DEFAULT_MAX_RETRIES,
                    Some(v) => max_retries_from_declared(v, &join(path, MAX_RETRIES))?,
                };
                let retryable_codes = match map.get(RETRYABLE_CODES) {
                    None => RetryableCodes::default(),
                    Some(v) => RetryableCodes::from_declared(v, &join(path, RETRYABLE_CODES))?,
                };
                Ok(RetryPolicy::Normal { max_retries, retryable_codes, backoff })
            }
            Some("always") => {
                for key in [MAX_RETRIES, RETRYABLE_CODES] {
                    if map.contains_key(key) {
                        return Err(PolicyError::new(
                            join(path, key),
                            PolicyErrorKind::NotApplicableInAlways,
                        ));
                    }
                }
                Ok(RetryPolicy::Always { backoff })
            }
            _ => Err(PolicyError::new(join(path, MODE), PolicyErrorKind::Mode(describe(mode)))),
        }
    }

    /// The declaration [`from_declared`](Self::from_declared) reads back as this policy, with
    /// every field written out.
    pub fn to_declared(&self) -> Value {
        let b = self.backoff();
        let mut map = Map::new();
        map.insert(MODE.into(), Value::from(self.mode()));
        if let RetryPolicy::Normal { max_retries, retryable_codes, .. } = self {
            map.insert(MAX_RETRIES.into(), Value::from(*max_retries));
            map.insert(RETRYABLE_CODES.into(), Value::from(retryable_codes.as_slice().to_vec()));
        }
        let mut backoff = Map::new();
        for (key, n) in [
            (INITIAL_DELAY_MS, b.initial_delay_ms),
            (MAX_DELAY_MS_KEY, b.max_delay_ms),
            (JITTER_RATIO, b.jitter_ratio),
        ] {
            backoff.insert(key.into(), Value::Number(json_number::number(n)));
        }
        map.insert(BACKOFF.into(), Value::Object(backoff));
        Value::Object(map)
    }
}

impl Backoff {
    /// Reads `initialDelayMs`, `maxDelayMs` and `jitterRatio` from `fields` (the object at
    /// `path`), each defaulted when absent. Other keys are the caller's business (see
    /// [`reject_unknown_keys`]). An initial delay above the maximum is reported on the field the
    /// declaration wrote: `maxDelayMs` when only it was given, else `initialDelayMs`.
    pub fn from_declared_fields(
        fields: &Map<String, Value>,
        path: &str,
    ) -> Result<Self, PolicyError> {
        let number =
            |key: &str, default: f64, kind: fn(String) -> PolicyErrorKind| match fields.get(key) {
                None => Ok(default),
                Some(value) => value
                    .as_f64()
                    .ok_or_else(|| PolicyError::new(join(path, key), kind(describe(value)))),
            };
        let initial = number(INITIAL_DELAY_MS, DEFAULT_INITIAL_DELAY_MS, PolicyErrorKind::Delay)?;
        let max = number(MAX_DELAY_MS_KEY, DEFAULT_MAX_DELAY_MS, PolicyErrorKind::Delay)?;
        let jitter = number(JITTER_RATIO, DEFAULT_JITTER_RATIO, PolicyErrorKind::JitterRatio)?;
        let blame =
            if fields.contains_key(MAX_DELAY_MS_KEY) && !fields.contains_key(INITIAL_DELAY_MS) {
                Blame::Max
            } else {
                Blame::Initial
            };
        Backoff::checked(initial, max, jitter, blame).map_err(|e| e.within(path))
    }
}

impl RetryableCodes {
    /// Reads a declared list of codes (the value at `path`). Errors name the element
    /// (`retryableCodes[2]: duplicate code "SERVER" (first at index 0)`).
    pub fn from_declared(value: &Value, path: &str) -> Result<Self, PolicyError> {
        let Value::Array(items) = value else {
            return Err(PolicyError::new(path, PolicyErrorKind::CodesNotAList(describe(value))));
        };
        let mut codes = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let Value::String(code) = item else {
                return Err(PolicyError::new(
                    format!("{path}[{i}]"),
                    PolicyErrorKind::CodeNotAString(describe(item)),
                ));
            };
            codes.push(code.clone());
        }
        RetryableCodes::new(codes).map_err(|e| e.within(path))
    }
}

/// Reads a declared retry budget (the value at `path`): a non-negative integer no larger than
/// 2^53 − 1 (`2.0` counts as 2; `-1`, `1.5` and `9007199254740992` are rejected).
pub fn max_retries_from_declared(value: &Value, path: &str) -> Result<u64, PolicyError> {
    let err = || PolicyError::new(path, PolicyErrorKind::MaxRetries(describe(value)));
    let Value::Number(n) = value else { return Err(err()) };
    let integer = match (n.as_u64(), n.as_f64()) {
        (Some(u), _) => Some(u),
        (None, Some(f)) if f.is_finite() && f.fract() == 0.0 && f >= 0.0 => {
            // Range-checked below; the cast of an integral non-negative float saturates.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let u = f as u64;
            Some(u)
        }
        _ => None,
    };
    integer.filter(|u| *u <= MAX_SAFE_INTEGER).ok_or_else(err)
}

/// The object at `path`, or an error naming `path`.
pub fn object<'a>(value: &'a Value, path: &str) -> Result<&'a Map<String, Value>, PolicyError> {
    value
        .as_object()
        .ok_or_else(|| PolicyError::new(path, PolicyErrorKind::NotAnObject(describe(value))))
}

/// Rejects the first key of `map` (the object at `path`) that is not in `expected`, naming it:
/// `providers.mock.retryPolicy.maxRetires: unknown key (expected one of: …)`.
pub fn reject_unknown_keys(
    map: &Map<String, Value>,
    expected: &[&'static str],
    path: &str,
) -> Result<(), PolicyError> {
    match map.keys().find(|key| !expected.contains(&key.as_str())) {
        None => Ok(()),
        Some(key) => Err(PolicyError::new(
            join(path, key),
            PolicyErrorKind::UnknownKey { expected: expected.to_vec() },
        )),
    }
}

/// A value as it was written, shortened for an error message.
fn describe(value: &Value) -> String {
    const LIMIT: usize = 60;
    let text = value.to_string();
    match text.char_indices().nth(LIMIT) {
        None => text,
        Some((cut, _)) => format!("{}…", &text[..cut]),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const AT: &str = "providers.mock.retryPolicy";

    fn parse(value: Value) -> Result<RetryPolicy, String> {
        RetryPolicy::from_declared(&value, AT).map_err(|e| e.to_string())
    }

    /// The validation table of a declared policy: each invalid declaration, the exact error.
    #[test]
    fn invalid_declarations_are_rejected_naming_the_field_path() {
        let p = AT;
        let cases = [
            (
                json!({"mode": "normal", "maxRetries": -1}),
                format!(
                    "{p}.maxRetries: must be a non-negative integer ≤ 9007199254740991, got -1"
                ),
            ),
            (
                json!({"mode": "normal", "maxRetries": 1.5}),
                format!(
                    "{p}.maxRetries: must be a non-negative integer ≤ 9007199254740991, got 1.5"
                ),
            ),
            (
                json!({"mode": "normal", "maxRetries": 9007199254740992_u64}),
                format!(
                    "{p}.maxRetries: must be a non-negative integer ≤ 9007199254740991, got 9007199254740992"
                ),
            ),
            (
                json!({"mode": "normal", "maxRetries": 9007199254740992.0}),
                format!(
                    "{p}.maxRetries: must be a non-negative integer ≤ 9007199254740991, got 9007199254740992.0"
                ),
            ),
            (
                json!({"mode": "normal", "maxRetries": "2"}),
                format!(
                    "{p}.maxRetries: must be a non-negative integer ≤ 9007199254740991, got \"2\""
                ),
            ),
            (
                json!({"mode": "normal", "maxRetries": null}),
                format!(
                    "{p}.maxRetries: must be a non-negative integer ≤ 9007199254740991, got null"
                ),
            ),
            (
                json!({"mode": "always", "backoff": {"initialDelayMs": 0}}),
                format!(
                    "{p}.backoff.initialDelayMs: must be a finite number > 0 and ≤ 2147483647, got 0"
                ),
            ),
            (
                json!({"mode": "always", "backoff": {"initialDelayMs": -5}}),
                format!(
                    "{p}.backoff.initialDelayMs: must be a finite number > 0 and ≤ 2147483647, got -5"
                ),
            ),
            (
                json!({"mode": "always", "backoff": {"initialDelayMs": 2147483648_u64, "maxDelayMs": 2147483648_u64}}),
                format!(
                    "{p}.backoff.initialDelayMs: must be a finite number > 0 and ≤ 2147483647, got 2147483648"
                ),
            ),
            (
                json!({"mode": "always", "backoff": {"maxDelayMs": 2147483648_u64}}),
                format!(
                    "{p}.backoff.maxDelayMs: must be a finite number > 0 and ≤ 2147483647, got 2147483648"
                ),
            ),
            (
                json!({"mode": "always", "backoff": {"maxDelayMs": 1e300}}),
                format!(
                    "{p}.backoff.maxDelayMs: must be a finite number > 0 and ≤ 2147483647, got 1e+300"
                ),
            ),
            (
                json!({"mode": "always", "backoff": {"maxDelayMs": "10s"}}),
                format!(
                    "{p}.backoff.maxDelayMs: must be a finite number > 0 and ≤ 2147483647, got \"10s\""
                ),
            ),
            (
                json!({"mode": "normal", "backoff": {"initialDelayMs": 2000, "maxDelayMs": 1000}}),
                format!(
                    "{p}.backoff.initialDelayMs: initialDelayMs (2000) must be ≤ maxDelayMs (1000)"
                ),
            ),
            (
                json!({"mode": "normal", "backoff": {"initialDelayMs": 20000}}),
                format!(
                    "{p}.backoff.initialDelayMs: initialDelayMs (20000) must be ≤ maxDelayMs (10000)"
                ),
            ),
            (
                json!({"mode": "normal", "backoff": {"maxDelayMs": 100}}),
                format!("{p}.backoff.maxDelayMs: initialDelayMs (500) must be ≤ maxDelayMs (100)"),
            ),
            (
                json!({"mode": "always", "backoff": {"jitterRatio": 1.1}}),
                format!("{p}.backoff.jitterRatio: must be within [0, 1], got 1.1"),
            ),
            (
                json!({"mode": "always", "backoff": {"jitterRatio": -0.5}}),
                format!("{p}.backoff.jitterRatio: must be within [0, 1], got -0.5"),
            ),
            (
                json!({"mode": "always", "backoff": {"jitterRatio": true}}),
                format!("{p}.backoff.jitterRatio: must be within [0, 1], got true"),
            ),
            (
                json!({"mode": "normal", "retryableCodes": []}),
                format!("{p}.retryableCodes: must be a non-empty list of code strings, got []"),
            ),
            (
                json!({"mode": "normal", "retryableCodes": ["SERVER", "TIMEOUT", "SERVER"]}),
                format!("{p}.retryableCodes[2]: duplicate code \"SERVER\" (first at index 0)"),
            ),
            (
                json!({"mode": "normal", "retryableCodes": ["SERVER", ""]}),
                format!("{p}.retryableCodes[1]: must be a non-empty code string"),
            ),
            (
                json!({"mode": "normal", "retryableCodes": ["SERVER", 429]}),
                format!("{p}.retryableCodes[1]: must be a code string, got 429"),
            ),
            (
                json!({"mode": "normal", "retryableCodes": "SERVER"}),
                format!(
                    "{p}.retryableCodes: must be a non-empty list of code strings, got \"SERVER\""
                ),
            ),
            (
                json!({"mode": "normal", "maxRetires": 3}),
                format!(
                    "{p}.maxRetires: unknown key (expected one of: mode, maxRetries, retryableCodes, backoff)"
                ),
            ),
            (
                json!({"mode": "normal", "backoff": {"initialDelay": 3}}),
                format!(
                    "{p}.backoff.initialDelay: unknown key (expected one of: initialDelayMs, maxDelayMs, jitterRatio)"
                ),
            ),
            (
                json!({"mode": "sometimes"}),
                format!("{p}.mode: must be \"normal\" or \"always\", got \"sometimes\""),
            ),
            (
                json!({"mode": "Normal"}),
                format!("{p}.mode: must be \"normal\" or \"always\", got \"Normal\""),
            ),
            (json!({"maxRetries": 2}), format!("{p}.mode: is required")),
            (
                json!({"mode": "always", "maxRetries": 2}),
                format!(
                    "{p}.maxRetries: not applicable in always mode (always retries every code, without a budget)"
                ),
            ),
            (
                json!({"mode": "always", "retryableCodes": ["SERVER"]}),
                format!(
                    "{p}.retryableCodes: not applicable in always mode (always retries every code, without a budget)"
                ),
            ),
            (
                json!({"mode": "always", "backoff": null}),
                format!("{p}.backoff: must be an object, got null"),
            ),
            (json!("always"), format!("{p}: must be an object, got \"always\"")),
        ];
        for (value, expected) in cases {
            assert_eq!(parse(value.clone()).unwrap_err(), expected, "{value}");
        }
    }

    #[test]
    fn valid_declarations_fill_the_defaults() {
        let backoff = |i, m, j| Backoff::new(i, m, j).unwrap();
        let codes = |c: &[&str]| RetryableCodes::new(c.iter().copied()).unwrap();
        let cases = [
            (json!({"mode": "normal"}), RetryPolicy::default()),
            (json!({"mode": "always"}), RetryPolicy::Always { backoff: Backoff::default() }),
            (
                json!({"mode": "normal", "maxRetries": 0}),
                RetryPolicy::Normal {
                    max_retries: 0,
                    retryable_codes: RetryableCodes::default(),
                    backoff: Backoff::default(),
                },
            ),
            (
                json!({"mode": "normal", "maxRetries": 5.0, "retryableCodes": ["HTTP_418"],
                       "backoff": {"jitterRatio": 0}}),
                RetryPolicy::Normal {
                    max_retries: 5,
                    retryable_codes: codes(&["HTTP_418"]),
                    backoff: backoff(500.0, 10000.0, 0.0),
                },
            ),
            (
                json!({"mode": "normal", "maxRetries": 9007199254740991_u64}),
                RetryPolicy::Normal {
                    max_retries: MAX_SAFE_INTEGER,
                    retryable_codes: RetryableCodes::default(),
                    backoff: Backoff::default(),
                },
            ),
            (
                json!({"mode": "always", "backoff": {"initialDelayMs": 1, "maxDelayMs": 4, "jitterRatio": 1}}),
                RetryPolicy::Always { backoff: backoff(1.0, 4.0, 1.0) },
            ),
            (
                json!({"mode": "always", "backoff": {"initialDelayMs": 2147483647, "maxDelayMs": 2147483647}}),
                RetryPolicy::Always { backoff: backoff(2147483647.0, 2147483647.0, 0.1) },
            ),
            (
                json!({"mode": "normal", "backoff": {"initialDelayMs": 0.5, "maxDelayMs": 0.5}}),
                RetryPolicy::Normal {
                    max_retries: 2,
                    retryable_codes: RetryableCodes::default(),
                    backoff: backoff(0.5, 0.5, 0.1),
                },
            ),
            (
                json!({"mode": "always", "backoff": {}}),
                RetryPolicy::Always { backoff: Backoff::default() },
            ),
        ];
        for (value, expected) in cases {
            assert_eq!(RetryPolicy::from_declared(&value, AT), Ok(expected), "{value}");
        }
    }

    #[test]
    fn a_policy_reads_back_from_its_declaration() {
        let policies = [
            RetryPolicy::default(),
            RetryPolicy::Always { backoff: Backoff::new(1.0, 4.0, 0.1).unwrap() },
            RetryPolicy::Normal {
                max_retries: 0,
                retryable_codes: RetryableCodes::new(["B", "A"]).unwrap(),
                backoff: Backoff::new(0.25, 2147483647.0, 1.0).unwrap(),
            },
        ];
        for policy in policies {
            let declared = policy.to_declared();
            assert_eq!(
                RetryPolicy::from_declared(&declared, "").as_ref(),
                Ok(&policy),
                "{declared}"
            );
        }
        assert_eq!(
            RetryPolicy::default().to_declared().to_string(),
            r#"{"backoff":{"initialDelayMs":500,"jitterRatio":0.1,"maxDelayMs":10000},"maxRetries":2,"mode":"normal","retryableCodes":["RATE_LIMIT","SERVER","TIMEOUT","TRANSPORT"]}"#
        );
    }

    #[test]
    fn an_empty_path_yields_bare_field_names() {
        let err = RetryPolicy::from_declared(
            &json!({"mode": "always", "backoff": {"jitterRatio": 2}}),
            "",
        )
        .unwrap_err();
        assert_eq!(err.path, "backoff.jitterRatio");
        assert!(matches!(err.kind, PolicyErrorKind::JitterRatio(_)));
    }

    #[test]
    fn long_values_are_shortened_in_errors() {
        let long = "X".repeat(200);
        let err = parse(json!({"mode": long})).unwrap_err();
        assert!(err.ends_with("…"), "{err}");
        assert!(err.len() < 150, "{err}");
    }
}
