//! The `llm-retry` plugin's configuration (`docs/runtime-semantics.md`, "Policies"), read strictly.
//!
//! The keys are those of the original `llm-retry` plugin this one re-creates:
//!
//! ```yaml
//! maxTransientRetries: 2        # = maxRetries
//! initialDelayMs: 500
//! maxDelayMs: 10000
//! jitterRatio: 0.1
//! retryableCodes: [RATE_LIMIT, SERVER, TIMEOUT, TRANSPORT]
//! ```
//!
//! It always describes a normal-mode policy (always mode is a route's choice), every key is
//! optional and defaults to the table, and it becomes the runtime's default route policy.
//!
//! # Why the runtime's field readers
//!
//! The rules are those of a route's declared policy, only the layout differs (flat,
//! `maxTransientRetries`). Reading each field with the same functions as
//! [`RetryPolicy::from_declared`] keeps one definition of "valid" and one wording of every error.

use rein_runtime::retry_policy::{
    self, Backoff, PolicyError, RetryPolicy, RetryableCodes, field_path, max_retries_from_declared,
};
use serde_json::Value;

const MAX_TRANSIENT_RETRIES: &str = "maxTransientRetries";
const RETRYABLE_CODES: &str = "retryableCodes";

/// The `llm-retry` configuration format (the original executor's keys).
#[derive(Debug, Clone, Copy)]
pub struct LlmRetryConfig;

impl LlmRetryConfig {
    /// The keys the configuration may hold.
    pub const KEYS: &'static [&'static str] =
        &[MAX_TRANSIENT_RETRIES, "initialDelayMs", "maxDelayMs", "jitterRatio", RETRYABLE_CODES];

    /// Reads a configuration (`value`, found at `path`, e.g. `plugins[0].config`) as the normal
    /// policy it describes, with omitted keys from the defaults. `null` (no configuration) is the
    /// default policy. Unknown keys and invalid values are errors naming the field path
    /// (`plugins[0].config.maxTransientRetires: unknown key (…)`).
    pub fn parse(value: &Value, path: &str) -> Result<RetryPolicy, PolicyError> {
        if value.is_null() {
            return Ok(RetryPolicy::default());
        }
        let fields = retry_policy::object(value, path)?;
        retry_policy::reject_unknown_keys(fields, Self::KEYS, path)?;
        let max_retries = match fields.get(MAX_TRANSIENT_RETRIES) {
            None => retry_policy::DEFAULT_MAX_RETRIES,
            Some(v) => max_retries_from_declared(v, &field_path(path, MAX_TRANSIENT_RETRIES))?,
        };
        let retryable_codes = match fields.get(RETRYABLE_CODES) {
            None => RetryableCodes::default(),
            Some(v) => RetryableCodes::from_declared(v, &field_path(path, RETRYABLE_CODES))?,
        };
        let backoff = Backoff::from_declared_fields(fields, path)?;
        Ok(RetryPolicy::Normal { max_retries, retryable_codes, backoff })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const AT: &str = "plugins[0].config";

    fn parse(value: Value) -> Result<RetryPolicy, String> {
        LlmRetryConfig::parse(&value, AT).map_err(|e| e.to_string())
    }

    #[test]
    fn invalid_configurations_are_rejected_naming_the_field_path() {
        let p = AT;
        let keys = "expected one of: maxTransientRetries, initialDelayMs, maxDelayMs, jitterRatio, retryableCodes";
        let int = "must be a non-negative integer ≤ 9007199254740991";
        let delay = "must be a finite number > 0 and ≤ 2147483647";
        let cases = [
            (
                json!({"maxTransientRetires": 3}),
                format!("{p}.maxTransientRetires: unknown key ({keys})"),
            ),
            (json!({"maxRetries": 3}), format!("{p}.maxRetries: unknown key ({keys})")),
            (json!({"mode": "always"}), format!("{p}.mode: unknown key ({keys})")),
            (json!({"maxTransientRetries": -1}), format!("{p}.maxTransientRetries: {int}, got -1")),
            (
                json!({"maxTransientRetries": 1.5}),
                format!("{p}.maxTransientRetries: {int}, got 1.5"),
            ),
            (
                json!({"maxTransientRetries": 9007199254740992_u64}),
                format!("{p}.maxTransientRetries: {int}, got 9007199254740992"),
            ),
            (json!({"initialDelayMs": 0}), format!("{p}.initialDelayMs: {delay}, got 0")),
            (
                json!({"initialDelayMs": 2147483648_u64, "maxDelayMs": 2147483648_u64}),
                format!("{p}.initialDelayMs: {delay}, got 2147483648"),
            ),
            (
                json!({"maxDelayMs": 2147483648_u64}),
                format!("{p}.maxDelayMs: {delay}, got 2147483648"),
            ),
            (
                json!({"initialDelayMs": 20000}),
                format!("{p}.initialDelayMs: initialDelayMs (20000) must be ≤ maxDelayMs (10000)"),
            ),
            (
                json!({"maxDelayMs": 400}),
                format!("{p}.maxDelayMs: initialDelayMs (500) must be ≤ maxDelayMs (400)"),
            ),
            (
                json!({"jitterRatio": 1.1}),
                format!("{p}.jitterRatio: must be within [0, 1], got 1.1"),
            ),
            (
                json!({"retryableCodes": []}),
                format!("{p}.retryableCodes: must be a non-empty list of code strings, got []"),
            ),
            (
                json!({"retryableCodes": ["SERVER", "SERVER"]}),
                format!("{p}.retryableCodes[1]: duplicate code \"SERVER\" (first at index 0)"),
            ),
            (
                json!({"retryableCodes": [""]}),
                format!("{p}.retryableCodes[0]: must be a non-empty code string"),
            ),
            (
                json!({"retryableCodes": ["SERVER", {"code": "X"}]}),
                format!("{p}.retryableCodes[1]: must be a code string, got {{\"code\":\"X\"}}"),
            ),
            (json!([1, 2]), format!("{p}: must be an object, got [1,2]")),
        ];
        for (value, expected) in cases {
            assert_eq!(parse(value.clone()).unwrap_err(), expected, "{value}");
        }
    }

    #[test]
    fn valid_configurations_fill_the_defaults() {
        let normal = |max_retries, codes: &[&str], b: (f64, f64, f64)| RetryPolicy::Normal {
            max_retries,
            retryable_codes: RetryableCodes::new(codes.iter().copied()).unwrap(),
            backoff: Backoff::new(b.0, b.1, b.2).unwrap(),
        };
        let defaults = ["RATE_LIMIT", "SERVER", "TIMEOUT", "TRANSPORT"];
        let cases = [
            (json!({}), RetryPolicy::default()),
            (Value::Null, RetryPolicy::default()),
            (
                json!({"maxTransientRetries": 2, "jitterRatio": 0}),
                normal(2, &defaults, (500.0, 10000.0, 0.0)),
            ),
            (json!({"maxTransientRetries": 0}), normal(0, &defaults, (500.0, 10000.0, 0.1))),
            (
                json!({"maxTransientRetries": 5, "initialDelayMs": 100, "maxDelayMs": 100,
                       "jitterRatio": 1, "retryableCodes": ["HTTP_418", "SERVER"]}),
                normal(5, &["HTTP_418", "SERVER"], (100.0, 100.0, 1.0)),
            ),
            (
                json!({"maxTransientRetries": 2,"initialDelayMs": 500,"maxDelayMs": 10000,
                       "jitterRatio": 0.1,"retryableCodes": ["RATE_LIMIT","SERVER","TIMEOUT","TRANSPORT"]}),
                RetryPolicy::default(),
            ),
        ];
        for (value, expected) in cases {
            assert_eq!(LlmRetryConfig::parse(&value, AT), Ok(expected), "{value}");
        }
    }

    #[test]
    fn the_seed_configuration_has_the_default_policy_key() {
        let seed = json!({"maxTransientRetries": 2, "initialDelayMs": 500, "maxDelayMs": 10000,
                          "jitterRatio": 0.1, "retryableCodes": ["RATE_LIMIT", "SERVER", "TIMEOUT", "TRANSPORT"]});
        let policy = LlmRetryConfig::parse(&seed, "").unwrap();
        assert_eq!(
            policy.policy_key(),
            r#"["normal",2,["RATE_LIMIT","SERVER","TIMEOUT","TRANSPORT"],500,10000,0.1]"#
        );
    }
}
