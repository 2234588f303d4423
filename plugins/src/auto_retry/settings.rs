//! `auto-retry`'s settings: six fields, their defaults and bounds, and both ways they arrive.
//!
//! | key | type | default | bounds |
//! |---|---|---|---|
//! | `enabled` | bool | `true` | — |
//! | `extraRetries` | integer | 3 | 0..=10; 0 = inert |
//! | `initialDelayMs` | integer | 1000 | 0..=600000 |
//! | `maxDelayMs` | integer | 60000 | 0..=600000; also clamps a provider delay |
//! | `jitterRatio` | number | 0.2 | [0, 1] |
//! | `retryableCodes` | list of codes | the catalogue's "on by default" group | ≥ 1 code |
//!
//! - [`AutoRetrySettings::from_file`] reads a configuration file leniently (each fallback a
//!   [`Warning`], see [`crate::settings::file`]); a hard-floor code in `retryableCodes` is kept
//!   as written but warned about, since it has no effect.
//! - [`Patchable::patched`] reads a run-time patch strictly (see [`crate::settings::patch`]); a
//!   hard-floor code the settings did not already list is refused (a page that shows the
//!   configuration may send back one that was listed, unchanged).
//!   Wrap the settings in a [`Revisioned`](crate::settings::Revisioned) for the revision fence.
//!
//! There is no rule between fields: `maxDelayMs` is the ceiling of every delay, so an
//! `initialDelayMs` above it simply waits `maxDelayMs` each time.

use rein_runtime::json_number;
use rein_runtime::policy_key::{self, Part};
use serde::Serialize;
use serde_json::Value;

use super::catalogue::{self, DEFAULT_CODES};
use crate::settings::file::{FileReader, Warning, WarningKind};
use crate::settings::patch::{self, FieldError};
use crate::settings::{Patchable, Patched};

const ENABLED: &str = "enabled";
const EXTRA_RETRIES: &str = "extraRetries";
const INITIAL_DELAY_MS: &str = "initialDelayMs";
const MAX_DELAY_MS: &str = "maxDelayMs";
const JITTER_RATIO: &str = "jitterRatio";
const RETRYABLE_CODES: &str = "retryableCodes";

/// The default `extraRetries`.
pub const DEFAULT_EXTRA_RETRIES: u32 = 3;
/// The default `initialDelayMs`.
pub const DEFAULT_INITIAL_DELAY_MS: u32 = 1000;
/// The default `maxDelayMs`.
pub const DEFAULT_MAX_DELAY_MS: u32 = 60_000;
/// The default `jitterRatio`.
pub const DEFAULT_JITTER_RATIO: f64 = 0.2;
/// The largest `extraRetries`.
pub const MAX_EXTRA_RETRIES: u32 = 10;
/// The largest `initialDelayMs` and `maxDelayMs` (ten minutes).
pub const MAX_DELAY_BOUND_MS: u32 = 600_000;

/// `auto-retry`'s settings. Valid by construction: every field within its bounds, at least one
/// code, no code twice.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AutoRetrySettings {
    enabled: bool,
    extra_retries: u32,
    initial_delay_ms: u32,
    max_delay_ms: u32,
    #[serde(serialize_with = "json_number::serialize")]
    jitter_ratio: f64,
    retryable_codes: Vec<String>,
}

impl Default for AutoRetrySettings {
    fn default() -> Self {
        AutoRetrySettings {
            enabled: true,
            extra_retries: DEFAULT_EXTRA_RETRIES,
            initial_delay_ms: DEFAULT_INITIAL_DELAY_MS,
            max_delay_ms: DEFAULT_MAX_DELAY_MS,
            jitter_ratio: DEFAULT_JITTER_RATIO,
            retryable_codes: DEFAULT_CODES.iter().map(|c| (*c).to_owned()).collect(),
        }
    }
}

impl AutoRetrySettings {
    /// The keys, in the order `changed` lists them.
    pub const KEYS: &'static [&'static str] =
        &[ENABLED, EXTRA_RETRIES, INITIAL_DELAY_MS, MAX_DELAY_MS, JITTER_RATIO, RETRYABLE_CODES];

    /// Reads a configuration file's value (found at `path`, the prefix of every warning)
    /// leniently: the settings it describes, with every fallback as a [`Warning`]. `null` is the
    /// defaults, without a warning.
    pub fn from_file(value: &Value, path: &str) -> (Self, Vec<Warning>) {
        let mut file = FileReader::new(value, path, Self::KEYS);
        let settings = AutoRetrySettings {
            enabled: file.bool(ENABLED, true),
            extra_retries: file.integer(
                EXTRA_RETRIES,
                DEFAULT_EXTRA_RETRIES,
                0..=MAX_EXTRA_RETRIES,
            ),
            initial_delay_ms: file.integer(
                INITIAL_DELAY_MS,
                DEFAULT_INITIAL_DELAY_MS,
                0..=MAX_DELAY_BOUND_MS,
            ),
            max_delay_ms: file.integer(MAX_DELAY_MS, DEFAULT_MAX_DELAY_MS, 0..=MAX_DELAY_BOUND_MS),
            jitter_ratio: file.number(JITTER_RATIO, DEFAULT_JITTER_RATIO, 0.0..=1.0),
            retryable_codes: file.codes(RETRYABLE_CODES, &DEFAULT_CODES),
        };
        // Warned about at the index the file wrote them at.
        let written = value.get(RETRYABLE_CODES).and_then(Value::as_array);
        for (kept_at, code) in settings.retryable_codes.iter().enumerate() {
            if catalogue::is_hard_floor(code) {
                let i = written
                    .and_then(|list| list.iter().position(|c| c.as_str() == Some(code)))
                    .unwrap_or(kept_at);
                let kind = WarningKind::InertCode { code: code.clone(), reason: "hard floor" };
                file.warn(&format!("{RETRYABLE_CODES}[{i}]"), kind);
            }
        }
        (settings, file.finish())
    }

    /// Checks a run-time patch without applying it: the keys it would change, or the first
    /// invalid field (`extraRetries: must be an integer within 0..=10, got 11`).
    pub fn validate_patch(&self, patch: &Value) -> Result<Vec<&'static str>, FieldError> {
        self.patched(patch).map(|patched| patched.changed)
    }

    /// The master switch.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The retries on top of the official executor's budget, per chain (0 = inert).
    pub fn extra_retries(&self) -> u32 {
        self.extra_retries
    }

    /// The first delay of the own curve (used when the official executor never retried).
    pub fn initial_delay_ms(&self) -> u32 {
        self.initial_delay_ms
    }

    /// The ceiling of every delay, a provider's included.
    pub fn max_delay_ms(&self) -> u32 {
        self.max_delay_ms
    }

    /// The symmetric jitter of the own curve.
    pub fn jitter_ratio(&self) -> f64 {
        self.jitter_ratio
    }

    /// The allowlist, as written (hard-floor codes included, though they have no effect).
    pub fn retryable_codes(&self) -> &[String] {
        &self.retryable_codes
    }

    /// Whether the settings take over nothing at all (`enabled = false` or `extraRetries = 0`).
    pub fn is_inert(&self) -> bool {
        !self.enabled || self.extra_retries == 0
    }

    /// Whether `retryableCodes` lists `code` (the hard floor is not checked here).
    pub fn lists(&self, code: &str) -> bool {
        self.retryable_codes.iter().any(|c| c == code)
    }

    /// The `policyKey` of `auto-retry`'s chains:
    /// `["auto-retry",extraRetries,[sorted codes],initialDelayMs,maxDelayMs,jitterRatio]`,
    /// numbers and code order as JavaScript writes them (`0.2`, `1000`; `rein_runtime::policy_key`).
    /// `enabled` is not part of it: switching off
    /// and on again continues the same chain.
    pub fn policy_key(&self) -> String {
        policy_key::write(&[
            Part::Text(super::NAME),
            Part::Whole(u64::from(self.extra_retries)),
            Part::Codes(self.retryable_codes.iter().map(String::as_str).collect()),
            Part::Whole(u64::from(self.initial_delay_ms)),
            Part::Whole(u64::from(self.max_delay_ms)),
            Part::Number(self.jitter_ratio),
        ])
    }

    /// The settings as JSON, with the file's and a patch's keys (what a settings page shows).
    pub fn to_json(&self) -> Value {
        // Serializing plain fields cannot fail.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl Patchable for AutoRetrySettings {
    fn patched(&self, value: &Value) -> Result<Patched<Self>, FieldError> {
        let fields = patch::fields(value, Self::KEYS)?;
        let mut next = self.clone();
        if let Some(v) = fields.get(ENABLED) {
            next.enabled = patch::bool(v, ENABLED)?;
        }
        if let Some(v) = fields.get(EXTRA_RETRIES) {
            next.extra_retries = patch::integer(v, EXTRA_RETRIES, 0..=MAX_EXTRA_RETRIES)?;
        }
        if let Some(v) = fields.get(INITIAL_DELAY_MS) {
            next.initial_delay_ms = patch::integer(v, INITIAL_DELAY_MS, 0..=MAX_DELAY_BOUND_MS)?;
        }
        if let Some(v) = fields.get(MAX_DELAY_MS) {
            next.max_delay_ms = patch::integer(v, MAX_DELAY_MS, 0..=MAX_DELAY_BOUND_MS)?;
        }
        if let Some(v) = fields.get(JITTER_RATIO) {
            next.jitter_ratio = patch::number(v, JITTER_RATIO, 0.0..=1.0)?;
        }
        if let Some(v) = fields.get(RETRYABLE_CODES) {
            let codes = patch::codes(v, RETRYABLE_CODES)?;
            for (i, code) in codes.iter().enumerate() {
                if catalogue::is_hard_floor(code) && !self.lists(code) {
                    return Err(FieldError::new(
                        format!("{RETRYABLE_CODES}[{i}]"),
                        format_args!("{code} is never retried (hard floor) and cannot be added"),
                    ));
                }
            }
            // Reordering alone is not an edit: the order in force stays.
            if !patch::same_codes(&codes, &self.retryable_codes) {
                next.retryable_codes = codes;
            }
        }
        let changed = Self::KEYS
            .iter()
            .copied()
            .filter(|key| match *key {
                ENABLED => next.enabled != self.enabled,
                EXTRA_RETRIES => next.extra_retries != self.extra_retries,
                INITIAL_DELAY_MS => next.initial_delay_ms != self.initial_delay_ms,
                MAX_DELAY_MS => next.max_delay_ms != self.max_delay_ms,
                JITTER_RATIO => next.jitter_ratio != self.jitter_ratio,
                _ => next.retryable_codes != self.retryable_codes,
            })
            .collect();
        Ok(Patched { settings: next, changed })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The settings a patch leads to from the defaults (the test's way to build settings).
    fn with(patch: Value) -> AutoRetrySettings {
        AutoRetrySettings::default().patched(&patch).unwrap().settings
    }

    fn file(value: Value) -> (AutoRetrySettings, Vec<String>) {
        let (settings, warnings) = AutoRetrySettings::from_file(&value, "plugins[2].config");
        (settings, warnings.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn the_defaults_are_the_table() {
        let settings = AutoRetrySettings::default();
        assert_eq!(
            settings.to_json(),
            json!({
                "enabled": true, "extraRetries": 3, "initialDelayMs": 1000, "maxDelayMs": 60000,
                "jitterRatio": 0.2,
                "retryableCodes": ["EMPTY_RESPONSE", "RATE_LIMIT", "SERVER", "TIMEOUT", "TRANSPORT",
                                   "PROVIDER_ERROR", "PI_AI_ERROR", "STREAM_CLOSED"],
            })
        );
        assert_eq!(
            settings.policy_key(),
            r#"["auto-retry",3,["EMPTY_RESPONSE","PI_AI_ERROR","PROVIDER_ERROR","RATE_LIMIT","SERVER","STREAM_CLOSED","TIMEOUT","TRANSPORT"],1000,60000,0.2]"#
        );
        assert!(!settings.is_inert());
    }

    #[test]
    fn the_file_is_read_leniently_with_a_warning_per_fallback() {
        let p = "plugins[2].config";
        let defaults = AutoRetrySettings::default();
        let cases: Vec<(Value, AutoRetrySettings, Vec<String>)> = vec![
            (Value::Null, defaults.clone(), vec![]),
            (json!({}), defaults.clone(), vec![]),
            (
                json!({"enabled": false, "extraRetries": 0, "initialDelayMs": 0, "maxDelayMs": 0,
                       "jitterRatio": 0, "retryableCodes": ["QUOTA"]}),
                with(json!({"enabled": false, "extraRetries": 0, "initialDelayMs": 0,
                            "maxDelayMs": 0, "jitterRatio": 0, "retryableCodes": ["QUOTA"]})),
                vec![],
            ),
            // A negative number is the default, never 0.
            (
                json!({"extraRetries": -1, "initialDelayMs": -5, "maxDelayMs": -1, "jitterRatio": -0.1}),
                defaults.clone(),
                vec![
                    format!("{p}.extraRetries: -1 is negative; using the default 3"),
                    format!("{p}.initialDelayMs: -5 is negative; using the default 1000"),
                    format!("{p}.maxDelayMs: -1 is negative; using the default 60000"),
                    format!("{p}.jitterRatio: -0.1 is negative; using the default 0.2"),
                ],
            ),
            // Out of range: clamped.
            (
                json!({"extraRetries": 99, "initialDelayMs": 700000, "maxDelayMs": 1e9, "jitterRatio": 2}),
                with(json!({"extraRetries": 10, "initialDelayMs": 600000, "maxDelayMs": 600000,
                            "jitterRatio": 1})),
                vec![
                    format!("{p}.extraRetries: 99 is outside 0..=10; clamped to 10"),
                    format!("{p}.initialDelayMs: 700000 is outside 0..=600000; clamped to 600000"),
                    format!("{p}.maxDelayMs: 1000000000 is outside 0..=600000; clamped to 600000"),
                    format!("{p}.jitterRatio: 2 is outside [0, 1]; clamped to 1"),
                ],
            ),
            // Wrong types: the default.
            (
                json!({"enabled": "false", "extraRetries": "5", "retryableCodes": "SERVER"}),
                defaults.clone(),
                vec![
                    format!(
                        "{p}.enabled: must be a boolean, got \"false\"; using the default true"
                    ),
                    format!("{p}.extraRetries: must be an integer, got \"5\"; using the default 3"),
                    format!(
                        "{p}.retryableCodes: must be a list of codes, got \"SERVER\"; using the default \
                         EMPTY_RESPONSE, RATE_LIMIT, SERVER, TIMEOUT, TRANSPORT, PROVIDER_ERROR, PI_AI_ERROR, \
                         STREAM_CLOSED"
                    ),
                ],
            ),
            // An empty list is the default allowlist, not "retry nothing".
            (
                json!({"retryableCodes": []}),
                defaults.clone(),
                vec![format!(
                    "{p}.retryableCodes: lists no code; using the default list (EMPTY_RESPONSE, \
                     RATE_LIMIT, SERVER, TIMEOUT, TRANSPORT, PROVIDER_ERROR, PI_AI_ERROR, STREAM_CLOSED)"
                )],
            ),
            // Hard-floor codes are kept as written, with a warning that they do nothing.
            (
                json!({"retryableCodes": [3, "SERVER", "AUTH", "SERVER", "HTTP_418"]}),
                AutoRetrySettings::default().with_codes(&["SERVER", "AUTH", "HTTP_418"]),
                vec![
                    format!(
                        "{p}.retryableCodes[0]: must be a non-empty code string, got 3; ignored"
                    ),
                    format!(
                        "{p}.retryableCodes[3]: duplicate code \"SERVER\" (first at index 1); ignored"
                    ),
                    format!(
                        "{p}.retryableCodes[2]: AUTH is never retried (hard floor); listing it has no effect"
                    ),
                ],
            ),
            // Unknown keys.
            (
                json!({"extraRetires": 5}),
                defaults.clone(),
                vec![format!(
                    "{p}.extraRetires: unknown key (expected one of: enabled, extraRetries, \
                     initialDelayMs, maxDelayMs, jitterRatio, retryableCodes); ignored"
                )],
            ),
            (
                json!("on"),
                defaults,
                vec![format!("{p}: must be an object, got \"on\"; using the defaults")],
            ),
        ];
        for (value, expected, warnings) in cases {
            assert_eq!(file(value.clone()), (expected, warnings), "{value}");
        }
    }

    impl AutoRetrySettings {
        /// The same settings listing exactly `codes` (bypasses the hard-floor rule of patches).
        fn with_codes(mut self, codes: &[&str]) -> Self {
            self.retryable_codes = codes.iter().map(|c| (*c).to_owned()).collect();
            self
        }
    }

    #[test]
    fn a_patch_is_validated_strictly_naming_the_field() {
        let settings = AutoRetrySettings::default();
        let cases = [
            (json!({"extraRetries": -1}), "extraRetries: must be an integer within 0..=10, got -1"),
            (json!({"extraRetries": 11}), "extraRetries: must be an integer within 0..=10, got 11"),
            (
                json!({"extraRetries": 1.5}),
                "extraRetries: must be an integer within 0..=10, got 1.5",
            ),
            (
                json!({"extraRetries": null}),
                "extraRetries: must be an integer within 0..=10, got null",
            ),
            (
                json!({"initialDelayMs": 600001}),
                "initialDelayMs: must be an integer within 0..=600000, got 600001",
            ),
            (
                json!({"maxDelayMs": "1s"}),
                "maxDelayMs: must be an integer within 0..=600000, got \"1s\"",
            ),
            (json!({"jitterRatio": 1.01}), "jitterRatio: must be a number within [0, 1], got 1.01"),
            (json!({"enabled": "no"}), "enabled: must be a boolean, got \"no\""),
            (json!({"retryableCodes": []}), "retryableCodes: must list at least one code"),
            (
                json!({"retryableCodes": "SERVER"}),
                "retryableCodes: must be a list of code strings, got \"SERVER\"",
            ),
            (
                json!({"retryableCodes": ["SERVER", "SERVER"]}),
                "retryableCodes[1]: duplicate code \"SERVER\" (first at index 0)",
            ),
            (
                json!({"retryableCodes": ["SERVER", "AUTH"]}),
                "retryableCodes[1]: AUTH is never retried (hard floor) and cannot be added",
            ),
            (
                json!({"retries": 3}),
                "retries: unknown key (expected one of: enabled, extraRetries, initialDelayMs, \
                 maxDelayMs, jitterRatio, retryableCodes)",
            ),
            (json!(null), "must be an object, got null"),
            // The first invalid field in key order is reported, and nothing applies.
            (
                json!({"enabled": false, "jitterRatio": 2, "extraRetries": 20}),
                "extraRetries: must be an integer within 0..=10, got 20",
            ),
        ];
        for (patch, expected) in cases {
            assert_eq!(
                settings.validate_patch(&patch).unwrap_err().to_string(),
                expected,
                "{patch}"
            );
            assert_eq!(settings.patched(&patch).unwrap_err().to_string(), expected, "{patch}");
        }
    }

    #[test]
    fn a_patch_reports_the_fields_whose_value_changed() {
        let base = AutoRetrySettings::default();
        // (patch, changed keys)
        let cases: Vec<(Value, Vec<&str>)> = vec![
            (json!({}), vec![]),
            (json!({"extraRetries": 3}), vec![]),
            (json!({"extraRetries": 3.0, "jitterRatio": 0.2, "enabled": true}), vec![]),
            (json!({"extraRetries": 0}), vec!["extraRetries"]),
            (json!({"jitterRatio": 0, "enabled": false}), vec!["enabled", "jitterRatio"]),
            (
                json!({"maxDelayMs": 5000, "initialDelayMs": 10}),
                vec!["initialDelayMs", "maxDelayMs"],
            ),
            // Reordering the codes is not an edit; adding or removing one is.
            (
                json!({"retryableCodes": ["STREAM_CLOSED", "PI_AI_ERROR", "PROVIDER_ERROR", "TRANSPORT",
                                          "TIMEOUT", "SERVER", "RATE_LIMIT", "EMPTY_RESPONSE"]}),
                vec![],
            ),
            (json!({"retryableCodes": ["SERVER", "QUOTA"]}), vec!["retryableCodes"]),
            (json!({"retryableCodes": ["HTTP_418"]}), vec!["retryableCodes"]),
        ];
        for (patch, changed) in cases {
            let patched = base.patched(&patch).unwrap();
            assert_eq!(patched.changed, changed, "{patch}");
            assert_eq!(base.validate_patch(&patch).unwrap(), changed, "{patch}");
            assert_eq!(patched.settings == base, changed.is_empty(), "{patch}");
        }
        let reordered = base
            .patched(&json!({"retryableCodes": ["TRANSPORT", "TIMEOUT", "SERVER", "RATE_LIMIT",
                                                "EMPTY_RESPONSE", "PROVIDER_ERROR", "PI_AI_ERROR",
                                                "STREAM_CLOSED"]}))
            .unwrap()
            .settings;
        assert_eq!(reordered.retryable_codes(), base.retryable_codes(), "the order in force stays");
        let patched =
            base.patched(&json!({"extraRetries": 5, "retryableCodes": ["B", "A"]})).unwrap();
        assert_eq!(patched.settings.extra_retries(), 5);
        assert_eq!(patched.settings.retryable_codes(), ["B", "A"]);
        assert_eq!(patched.settings.policy_key(), r#"["auto-retry",5,["A","B"],1000,60000,0.2]"#);
    }

    #[test]
    fn a_listed_hard_floor_code_may_be_sent_back_unchanged() {
        // The file listed AUTH (kept, inert); a page that reports the configuration sends it back
        // with another switch flipped — that is not adding it.
        let (settings, _) =
            AutoRetrySettings::from_file(&json!({"retryableCodes": ["SERVER", "AUTH"]}), "");
        let patched =
            settings.patched(&json!({"retryableCodes": ["SERVER", "AUTH", "QUOTA"]})).unwrap();
        assert_eq!(patched.changed, ["retryableCodes"]);
        assert_eq!(patched.settings.retryable_codes(), ["SERVER", "AUTH", "QUOTA"]);
        assert!(settings.patched(&json!({"retryableCodes": ["SERVER", "ABORTED"]})).is_err());
    }

    #[test]
    fn policy_keys_follow_every_field_but_enabled() {
        let base = AutoRetrySettings::default();
        let cases = [
            (json!({"enabled": false}), true),
            (json!({"retryableCodes": DEFAULT_CODES.iter().rev().collect::<Vec<_>>()}), true),
            (json!({"extraRetries": 4}), false),
            (json!({"retryableCodes": ["SERVER"]}), false),
            (json!({"initialDelayMs": 999}), false),
            (json!({"maxDelayMs": 59999}), false),
            (json!({"jitterRatio": 0.25}), false),
        ];
        for (patch, same) in cases {
            assert_eq!(with(patch.clone()).policy_key() == base.policy_key(), same, "{patch}");
        }
        assert_eq!(
            with(json!({"jitterRatio": 0, "retryableCodes": ["SERVER"]})).policy_key(),
            r#"["auto-retry",3,["SERVER"],1000,60000,0]"#
        );
        assert_eq!(
            with(json!({"jitterRatio": 1, "retryableCodes": ["a\"b"]})).policy_key(),
            r#"["auto-retry",3,["a\"b"],1000,60000,1]"#
        );
    }

    #[test]
    fn inert_means_disabled_or_no_extra_retries() {
        assert!(with(json!({"enabled": false})).is_inert());
        assert!(with(json!({"extraRetries": 0})).is_inert());
        assert!(!with(json!({"extraRetries": 1})).is_inert());
    }
}
