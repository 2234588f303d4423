//! [`HealthSettings`]: a route's retry budget and circuit breaker, valid by construction.
//!
//! Every field has the default of `docs/runtime-semantics.md` ("Route health"). The setters check
//! their value and name the field when they refuse it; [`HealthSettings::from_value`] reads a
//! configuration value strictly (an unknown key or an invalid value is an error naming the field
//! path, `routes.NAME.health.failureRatio: must be within [0, 1], got 2`).

use serde_json::Value;

use crate::json_number;

/// The default `maxTokens`: the retry budget's capacity.
pub const DEFAULT_MAX_TOKENS: f64 = 10.0;
/// The default `tokenRatio`: what a successful attempt gives back.
pub const DEFAULT_TOKEN_RATIO: f64 = 0.1;
/// The default `windowMs`: how far back the breaker counts failures.
pub const DEFAULT_WINDOW_MS: u64 = 10_000;
/// The default `failureRatio`: the share of failed attempts that opens the breaker.
pub const DEFAULT_FAILURE_RATIO: f64 = 0.5;
/// The default `minAttempts`: the fewest attempts in the window the breaker judges.
pub const DEFAULT_MIN_ATTEMPTS: u32 = 20;
/// The default `openMs`: how long an open breaker fails attempts at once.
pub const DEFAULT_OPEN_MS: u64 = 30_000;
/// The default `probes`: the attempts a half-open breaker lets through.
pub const DEFAULT_PROBES: u32 = 1;

/// The largest `maxTokens` (gRPC's limit for its retry throttling).
pub const MAX_TOKENS_LIMIT: f64 = 1000.0;
/// The largest `windowMs` and `openMs` (the longest timer).
pub const MAX_MS: u64 = 2_147_483_647;

/// The keys of the configuration form, in order.
pub const KEYS: [&str; 7] =
    ["maxTokens", "tokenRatio", "windowMs", "failureRatio", "minAttempts", "openMs", "probes"];

/// A route's health settings. See the module docs.
///
/// ```
/// use rein_runtime::route_health::HealthSettings;
///
/// let settings = HealthSettings::default().with_open_ms(5_000)?.with_min_attempts(10)?;
/// assert_eq!((settings.open_ms(), settings.min_attempts(), settings.max_tokens()), (5_000, 10, 10.0));
/// let error = HealthSettings::from_value(&serde_json::json!({"failureRatio": 2}), "routes.main.health")
///     .unwrap_err();
/// assert_eq!(error.to_string(), "routes.main.health.failureRatio: must be within [0, 1], got 2");
/// # Ok::<(), rein_runtime::route_health::HealthError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct HealthSettings {
    max_tokens: f64,
    token_ratio: f64,
    window_ms: u64,
    failure_ratio: f64,
    min_attempts: u32,
    open_ms: u64,
    probes: u32,
}

impl Default for HealthSettings {
    fn default() -> Self {
        Self {
            max_tokens: DEFAULT_MAX_TOKENS,
            token_ratio: DEFAULT_TOKEN_RATIO,
            window_ms: DEFAULT_WINDOW_MS,
            failure_ratio: DEFAULT_FAILURE_RATIO,
            min_attempts: DEFAULT_MIN_ATTEMPTS,
            open_ms: DEFAULT_OPEN_MS,
            probes: DEFAULT_PROBES,
        }
    }
}

/// A setting refused: the field path and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{reason}", if path.is_empty() { String::new() } else { format!("{path}: ") })]
pub struct HealthError {
    /// The field path (`maxTokens`; `routes.main.health.maxTokens` once placed).
    pub path: String,
    /// What is wrong with it.
    pub reason: String,
}

impl HealthError {
    fn new(field: &str, reason: impl Into<String>) -> Self {
        Self { path: field.to_owned(), reason: reason.into() }
    }

    /// The same error with its path under `prefix` (`routes.main.health`).
    #[must_use]
    pub fn within(mut self, prefix: &str) -> Self {
        if !prefix.is_empty() {
            self.path = if self.path.is_empty() {
                prefix.to_owned()
            } else {
                format!("{prefix}.{}", self.path)
            };
        }
        self
    }
}

/// `value` written as a JSON number (integers without `.0`).
fn shown(value: f64) -> String {
    json_number::number(value).to_string()
}

fn ratio(field: &str, value: f64, low_open: bool) -> Result<f64, HealthError> {
    let within =
        value.is_finite() && value <= 1.0 && (if low_open { value > 0.0 } else { value >= 0.0 });
    if within {
        Ok(value)
    } else {
        let range = if low_open { "(0, 1]" } else { "[0, 1]" };
        Err(HealthError::new(field, format!("must be within {range}, got {}", shown(value))))
    }
}

fn millis(field: &str, value: u64) -> Result<u64, HealthError> {
    if (1..=MAX_MS).contains(&value) {
        Ok(value)
    } else {
        Err(HealthError::new(field, format!("must be an integer from 1 to {MAX_MS}, got {value}")))
    }
}

fn at_least_one(field: &str, value: u32) -> Result<u32, HealthError> {
    if value >= 1 { Ok(value) } else { Err(HealthError::new(field, "must be at least 1, got 0")) }
}

impl HealthSettings {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// The retry budget's capacity, in tokens (a failed attempt takes 1): finite, > 0,
    /// ≤ [`MAX_TOKENS_LIMIT`]; precision beyond a thousandth is dropped.
    pub fn with_max_tokens(mut self, tokens: f64) -> Result<Self, HealthError> {
        if !(tokens.is_finite() && (0.001..=MAX_TOKENS_LIMIT).contains(&tokens)) {
            return Err(HealthError::new(
                "maxTokens",
                format!(
                    "must be a number from 0.001 to {}, got {}",
                    shown(MAX_TOKENS_LIMIT),
                    shown(tokens)
                ),
            ));
        }
        self.max_tokens = tokens;
        Ok(self)
    }

    /// What each successful attempt gives back to the budget: within (0, 1], at least a
    /// thousandth.
    pub fn with_token_ratio(mut self, ratio_value: f64) -> Result<Self, HealthError> {
        let value = ratio("tokenRatio", ratio_value, true)?;
        if value < 0.001 {
            return Err(HealthError::new(
                "tokenRatio",
                format!("must be at least 0.001, got {}", shown(value)),
            ));
        }
        self.token_ratio = value;
        Ok(self)
    }

    /// How far back the breaker counts attempts, in ms: 1..=[`MAX_MS`].
    pub fn with_window_ms(mut self, ms: u64) -> Result<Self, HealthError> {
        self.window_ms = millis("windowMs", ms)?;
        Ok(self)
    }

    /// The share of failed attempts in the window that opens the breaker: within [0, 1] (0: any
    /// failure, once `minAttempts` were made).
    pub fn with_failure_ratio(mut self, value: f64) -> Result<Self, HealthError> {
        self.failure_ratio = ratio("failureRatio", value, false)?;
        Ok(self)
    }

    /// The fewest attempts in the window the breaker judges: at least 1.
    pub fn with_min_attempts(mut self, attempts: u32) -> Result<Self, HealthError> {
        self.min_attempts = at_least_one("minAttempts", attempts)?;
        Ok(self)
    }

    /// How long an open breaker fails attempts at once, in ms: 1..=[`MAX_MS`].
    pub fn with_open_ms(mut self, ms: u64) -> Result<Self, HealthError> {
        self.open_ms = millis("openMs", ms)?;
        Ok(self)
    }

    /// The attempts a half-open breaker lets through: at least 1.
    pub fn with_probes(mut self, probes: u32) -> Result<Self, HealthError> {
        self.probes = at_least_one("probes", probes)?;
        Ok(self)
    }

    /// `maxTokens`.
    pub fn max_tokens(&self) -> f64 {
        self.max_tokens
    }
    /// `tokenRatio`.
    pub fn token_ratio(&self) -> f64 {
        self.token_ratio
    }
    /// `windowMs`.
    pub fn window_ms(&self) -> u64 {
        self.window_ms
    }
    /// `failureRatio`.
    pub fn failure_ratio(&self) -> f64 {
        self.failure_ratio
    }
    /// `minAttempts`.
    pub fn min_attempts(&self) -> u32 {
        self.min_attempts
    }
    /// `openMs`.
    pub fn open_ms(&self) -> u64 {
        self.open_ms
    }
    /// `probes`.
    pub fn probes(&self) -> u32 {
        self.probes
    }

    /// The settings a configuration value describes, read strictly: an object of the keys in
    /// [`KEYS`] (each optional: an omitted key is its default); `null` is the defaults. An
    /// unknown key, a value of the wrong type or out of range is an error whose path is under
    /// `path` (`routes.main.health.openMs`).
    pub fn from_value(value: &Value, path: &str) -> Result<Self, HealthError> {
        let object = match value {
            Value::Null => return Ok(Self::default()),
            Value::Object(object) => object,
            other => {
                return Err(
                    HealthError::new("", format!("must be an object, got {other}")).within(path)
                );
            }
        };
        let mut settings = Self::default();
        for (key, field) in object {
            settings = settings.with_field(key, field).map_err(|e| e.within(path))?;
        }
        Ok(settings)
    }

    fn with_field(self, key: &str, value: &Value) -> Result<Self, HealthError> {
        let number = || {
            value
                .as_f64()
                .ok_or_else(|| HealthError::new(key, format!("must be a number, got {value}")))
        };
        let integer = || {
            value.as_u64().ok_or_else(|| {
                HealthError::new(key, format!("must be a non-negative integer, got {value}"))
            })
        };
        let small = |n: u64| {
            u32::try_from(n).map_err(|_| {
                HealthError::new(key, format!("must be at most {}, got {n}", u32::MAX))
            })
        };
        match key {
            "maxTokens" => self.with_max_tokens(number()?),
            "tokenRatio" => self.with_token_ratio(number()?),
            "windowMs" => self.with_window_ms(integer()?),
            "failureRatio" => self.with_failure_ratio(number()?),
            "minAttempts" => self.with_min_attempts(small(integer()?)?),
            "openMs" => self.with_open_ms(integer()?),
            "probes" => self.with_probes(small(integer()?)?),
            _ => Err(HealthError::new(
                key,
                format!("unknown key (expected one of {})", KEYS.join(", ")),
            )),
        }
    }

    /// These settings with `patch` applied: an object of some of the keys in [`KEYS`], each read
    /// as [`Self::from_value`] reads it (an unknown key or an invalid value is an error naming
    /// it), with the keys whose value changes, in [`KEYS`] order. What a run-time change stages.
    pub fn patched(&self, patch: &Value) -> Result<(Self, Vec<String>), HealthError> {
        let Value::Object(object) = patch else {
            return Err(HealthError::new("", format!("a patch must be an object, got {patch}")));
        };
        let mut settings = self.clone();
        for (key, field) in object {
            settings = settings.with_field(key, field)?;
        }
        let (before, after) = (self.to_value(), settings.to_value());
        let changed =
            KEYS.iter().filter(|key| before[**key] != after[**key]).map(|key| (*key).to_owned());
        Ok((settings.clone(), changed.collect()))
    }

    /// The settings as a configuration value (every key, numbers written without a trailing
    /// `.0`), the form [`Self::from_value`] reads.
    pub fn to_value(&self) -> Value {
        let number = |value: f64| Value::Number(json_number::number(value));
        serde_json::json!({
            "maxTokens": number(self.max_tokens),
            "tokenRatio": number(self.token_ratio),
            "windowMs": self.window_ms,
            "failureRatio": number(self.failure_ratio),
            "minAttempts": self.min_attempts,
            "openMs": self.open_ms,
            "probes": self.probes,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_defaults_are_the_documented_ones() {
        let s = HealthSettings::default();
        assert_eq!((s.max_tokens(), s.token_ratio()), (10.0, 0.1));
        assert_eq!((s.window_ms(), s.failure_ratio(), s.min_attempts()), (10_000, 0.5, 20));
        assert_eq!((s.open_ms(), s.probes()), (30_000, 1));
        assert_eq!(
            s.to_value(),
            json!({"maxTokens": 10, "tokenRatio": 0.1, "windowMs": 10000, "failureRatio": 0.5,
                   "minAttempts": 20, "openMs": 30000, "probes": 1})
        );
        assert_eq!(HealthSettings::from_value(&s.to_value(), "").unwrap(), s, "round trip");
        assert_eq!(HealthSettings::from_value(&Value::Null, "x").unwrap(), s);
    }

    #[test]
    fn values_are_read_strictly_and_errors_name_the_field() {
        let p = "routes.main.health";
        /// A value read, and the key and value it keeps, or the error it gives.
        type Case = (Value, Result<(&'static str, Value), &'static str>);
        let cases: Vec<Case> = vec![
            (json!({"openMs": 5000}), Ok(("openMs", json!(5000)))),
            (json!({"failureRatio": 0}), Ok(("failureRatio", json!(0)))),
            (json!({"failureRatio": 1}), Ok(("failureRatio", json!(1)))),
            (json!({"maxTokens": 0.5}), Ok(("maxTokens", json!(0.5)))),
            (json!({"tokenRatio": 1}), Ok(("tokenRatio", json!(1)))),
            (json!({"probes": 3}), Ok(("probes", json!(3)))),
            (
                json!({"failureRatio": 2}),
                Err("routes.main.health.failureRatio: must be within [0, 1], got 2"),
            ),
            (
                json!({"failureRatio": -0.5}),
                Err("routes.main.health.failureRatio: must be within [0, 1], got -0.5"),
            ),
            (
                json!({"tokenRatio": 0}),
                Err("routes.main.health.tokenRatio: must be within (0, 1], got 0"),
            ),
            (
                json!({"tokenRatio": 0.0001}),
                Err("routes.main.health.tokenRatio: must be at least 0.001, got 0.0001"),
            ),
            (
                json!({"maxTokens": 0}),
                Err("routes.main.health.maxTokens: must be a number from 0.001 to 1000, got 0"),
            ),
            (
                json!({"maxTokens": 1001}),
                Err("routes.main.health.maxTokens: must be a number from 0.001 to 1000, got 1001"),
            ),
            (
                json!({"maxTokens": "ten"}),
                Err(r#"routes.main.health.maxTokens: must be a number, got "ten""#),
            ),
            (
                json!({"windowMs": 0}),
                Err("routes.main.health.windowMs: must be an integer from 1 to 2147483647, got 0"),
            ),
            (
                json!({"openMs": 2147483648u64}),
                Err(
                    "routes.main.health.openMs: must be an integer from 1 to 2147483647, got 2147483648",
                ),
            ),
            (
                json!({"openMs": 1.5}),
                Err("routes.main.health.openMs: must be a non-negative integer, got 1.5"),
            ),
            (
                json!({"minAttempts": 0}),
                Err("routes.main.health.minAttempts: must be at least 1, got 0"),
            ),
            (
                json!({"probes": -1}),
                Err("routes.main.health.probes: must be a non-negative integer, got -1"),
            ),
            (
                json!({"probes": 4294967296u64}),
                Err("routes.main.health.probes: must be at most 4294967295, got 4294967296"),
            ),
            (
                json!({"openMS": 5}),
                Err(
                    "routes.main.health.openMS: unknown key (expected one of maxTokens, tokenRatio, \
                     windowMs, failureRatio, minAttempts, openMs, probes)",
                ),
            ),
            (json!(3), Err("routes.main.health: must be an object, got 3")),
        ];
        for (value, expected) in cases {
            let read = HealthSettings::from_value(&value, p);
            match expected {
                Ok((key, shown)) => {
                    let read = read.unwrap_or_else(|e| panic!("{value}: {e}"));
                    assert_eq!(read.to_value()[key], shown, "{value}");
                }
                Err(message) => {
                    assert_eq!(read.unwrap_err().to_string(), message, "{value}");
                }
            }
        }
    }

    #[test]
    fn setters_name_their_field() {
        let error = HealthSettings::new().with_failure_ratio(f64::NAN).unwrap_err();
        assert_eq!(error.path, "failureRatio");
        assert_eq!(error.within("routes.a.health").path, "routes.a.health.failureRatio");
        assert_eq!(HealthSettings::new().with_probes(0).unwrap_err().path, "probes");
        assert_eq!(HealthSettings::new().with_open_ms(0).unwrap_err().path, "openMs");
        assert_eq!(HealthSettings::new().with_window_ms(0).unwrap_err().path, "windowMs");
        assert_eq!(HealthSettings::new().with_min_attempts(0).unwrap_err().path, "minAttempts");
        assert_eq!(
            HealthSettings::new().with_max_tokens(f64::INFINITY).unwrap_err().path,
            "maxTokens"
        );
        assert_eq!(HealthSettings::new().with_token_ratio(2.0).unwrap_err().path, "tokenRatio");
    }

    #[test]
    fn a_patch_changes_some_keys_and_names_them() {
        let base = HealthSettings::default();
        let cases: [(Value, Result<Vec<&str>, &str>); 6] = [
            (json!({}), Ok(vec![])),
            (json!({"openMs": 30000}), Ok(vec![])),
            (json!({"probes": 3, "openMs": 5000}), Ok(vec!["openMs", "probes"])),
            (json!({"failureRatio": 2}), Err("failureRatio: must be within [0, 1], got 2")),
            (
                json!({"size": 1}),
                Err(
                    "size: unknown key (expected one of maxTokens, tokenRatio, windowMs, failureRatio, minAttempts, openMs, probes)",
                ),
            ),
            (json!([1]), Err("a patch must be an object, got [1]")),
        ];
        for (patch, want) in cases {
            let got = base.patched(&patch);
            match (got, want) {
                (Ok((settings, changed)), Ok(want)) => {
                    assert_eq!(changed, want, "{patch}");
                    assert_eq!(
                        HealthSettings::from_value(&settings.to_value(), "").unwrap(),
                        settings
                    );
                }
                (Err(e), Err(want)) => assert_eq!(e.to_string(), want, "{patch}"),
                (got, want) => panic!("{patch}: got {got:?}, want {want:?}"),
            }
        }
        let (patched, _) = base.patched(&json!({"probes": 3})).unwrap();
        assert_eq!((patched.probes(), patched.open_ms()), (3, DEFAULT_OPEN_MS));
    }
}
