//! Reading a plugin's configuration file leniently: every fallback is a [`Warning`].
//!
//! The rules, field by field:
//! - a number below 0 → the default (never 0: 0 is the power to switch a gate off, and a mistyped
//!   sign must not have it);
//! - a number above its bounds (or below a lower bound above 0) → clamped into the bounds;
//! - a value of the wrong type (a string for a number, a fraction for an integer, a string for a
//!   list, `null`) → the default;
//! - a code list: entries that are not non-empty strings and repeated entries are dropped; a list
//!   left empty → the default list (an empty allowlist reads as a typo, not as "retry nothing":
//!   `enabled = false` says that unambiguously);
//! - an unknown key → ignored; a configuration that is not an object → every default.
//!
//! Integral floats are integers (`3.0` is 3), as everywhere in rein's JSON.
//!
//! # Why warnings are data
//!
//! The caller decides where they go — a `tracing` warning at start-up, a scenario's report, a CLI
//! `check` command — and tests compare them exactly. Each names the field path the way the file
//! reader was told to prefix it (`plugins[2].config.extraRetries`).

use std::fmt;
use std::ops::RangeInclusive;

use rein_runtime::json_number;
use rein_runtime::retry_policy::field_path;
use serde_json::{Map, Value};

/// A fallback taken while reading a configuration file.
#[derive(Debug, Clone, PartialEq)]
pub struct Warning {
    /// The field path (`extraRetries`, `retryableCodes[2]`; empty for the whole value).
    pub path: String,
    /// What happened.
    pub kind: WarningKind,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.kind)
        } else {
            write!(f, "{}: {}", self.path, self.kind)
        }
    }
}

impl From<Warning> for rein_runtime::plugin::ConfigWarning {
    fn from(warning: Warning) -> Self {
        rein_runtime::plugin::ConfigWarning {
            path: warning.path,
            message: warning.kind.to_string(),
        }
    }
}

/// What a [`Warning`] is about. Values are written as JSON text (`-1`, `"3"`, `null`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum WarningKind {
    /// The configuration is not a JSON object: every field takes its default.
    #[error("must be an object, got {got}; using the defaults")]
    NotAnObject {
        /// The value found.
        got: String,
    },
    /// A key the settings do not have (often a typo); ignored.
    #[error("unknown key (expected one of: {}); ignored", .expected.join(", "))]
    UnknownKey {
        /// The keys the settings have.
        expected: Vec<&'static str>,
    },
    /// A value of the wrong type: the default is used.
    #[error("must be {expected}, got {got}; using the default {default}")]
    WrongType {
        /// What the field holds (`an integer`, `a boolean`, `a list of codes`…).
        expected: &'static str,
        /// The value found.
        got: String,
        /// The default used instead.
        default: String,
    },
    /// A negative number: the default is used (never 0).
    #[error("{got} is negative; using the default {default}")]
    Negative {
        /// The value found.
        got: String,
        /// The default used instead.
        default: String,
    },
    /// A number outside its bounds: clamped into them.
    #[error("{got} is outside {bounds}; clamped to {clamped}")]
    OutOfRange {
        /// The value found.
        got: String,
        /// The bounds (`0..=10`, `[0, 1]`).
        bounds: String,
        /// The value used.
        clamped: String,
    },
    /// A code list with no usable code: the default list is used.
    #[error("lists no code; using the default list ({})", .default.join(", "))]
    NoCodes {
        /// The default list used instead.
        default: Vec<String>,
    },
    /// A list entry that is not a non-empty code string; dropped.
    #[error("must be a non-empty code string, got {got}; ignored")]
    BadCode {
        /// The value found.
        got: String,
    },
    /// A code listed twice; the repeat is dropped.
    #[error("duplicate code {code:?} (first at index {first}); ignored")]
    DuplicateCode {
        /// The repeated code.
        code: String,
        /// Where it first appeared.
        first: usize,
    },
    /// A code listed that the plugin never acts on (for `auto-retry`: the hard floor). It is
    /// kept as written — a page reports the configuration, it does not rewrite it — but has no
    /// effect.
    #[error("{code} is never retried ({reason}); listing it has no effect")]
    InertCode {
        /// The code.
        code: String,
        /// Why it is inert (`hard floor`).
        reason: &'static str,
    },
}

/// Reads the fields of one configuration value leniently, collecting [`Warning`]s.
///
/// ```
/// use rein_plugins::settings::FileReader;
/// use serde_json::json;
///
/// let config = json!({"extraRetries": -1, "jitterRatio": 3, "colour": "red"});
/// let mut file = FileReader::new(&config, "plugins[2].config", &["extraRetries", "jitterRatio"]);
/// assert_eq!(file.integer("extraRetries", 3, 0..=10), 3);
/// assert_eq!(file.number("jitterRatio", 0.2, 0.0..=1.0), 1.0);
/// let warnings: Vec<String> = file.finish().iter().map(ToString::to_string).collect();
/// assert_eq!(warnings, [
///     "plugins[2].config.colour: unknown key (expected one of: extraRetries, jitterRatio); ignored",
///     "plugins[2].config.extraRetries: -1 is negative; using the default 3",
///     "plugins[2].config.jitterRatio: 3 is outside [0, 1]; clamped to 1",
/// ]);
/// ```
#[derive(Debug)]
pub struct FileReader<'a> {
    fields: Option<&'a Map<String, Value>>,
    path: &'a str,
    warnings: Vec<Warning>,
}

impl<'a> FileReader<'a> {
    /// A reader of `value` (found at `path`, prefixed to every warning) whose settings have
    /// `keys`. `null` (no configuration) reads as an empty object, silently; a value that is not
    /// an object reads as an empty object with a warning; unknown keys are warned about here, in
    /// key order.
    pub fn new(value: &'a Value, path: &'a str, keys: &[&'static str]) -> Self {
        let mut reader = FileReader { fields: None, path, warnings: Vec::new() };
        match value {
            Value::Null => {}
            Value::Object(fields) => {
                reader.fields = Some(fields);
                for key in fields.keys().filter(|k| !keys.contains(&k.as_str())) {
                    reader.warn(key, WarningKind::UnknownKey { expected: keys.to_vec() });
                }
            }
            other => reader.warn("", WarningKind::NotAnObject { got: describe(other) }),
        }
        reader
    }

    /// A boolean field.
    pub fn bool(&mut self, key: &str, default: bool) -> bool {
        match self.get(key) {
            None => default,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                let got = describe(other);
                self.wrong_type(key, "a boolean", got, default.to_string());
                default
            }
        }
    }

    /// A non-negative integer field within `bounds`.
    pub fn integer(&mut self, key: &str, default: u32, bounds: RangeInclusive<u32>) -> u32 {
        let Some(value) = self.get(key) else {
            return default;
        };
        let expected = "an integer";
        let Some(n) = value.as_f64() else {
            let got = describe(value);
            self.wrong_type(key, expected, got, default.to_string());
            return default;
        };
        if n < 0.0 {
            let kind = WarningKind::Negative { got: describe(value), default: default.to_string() };
            self.warn(key, kind);
            return default;
        }
        if n.fract() != 0.0 {
            let got = describe(value);
            self.wrong_type(key, expected, got, default.to_string());
            return default;
        }
        let (min, max) = (*bounds.start(), *bounds.end());
        let clamped = n.clamp(f64::from(min), f64::from(max));
        if clamped != n {
            let got = describe(value);
            let bounds = format!("{min}..={max}");
            let kind =
                WarningKind::OutOfRange { got, bounds, clamped: json_number::format(clamped) };
            self.warn(key, kind);
        }
        // `clamped` is integral and within `min..=max`, so the conversion is exact.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let int = clamped as u32;
        int
    }

    /// A non-negative number field within `bounds` (`0.0..=1.0` for a ratio).
    pub fn number(&mut self, key: &str, default: f64, bounds: RangeInclusive<f64>) -> f64 {
        let Some(value) = self.get(key) else {
            return default;
        };
        let Some(n) = value.as_f64() else {
            let got = describe(value);
            self.wrong_type(key, "a number", got, json_number::format(default));
            return default;
        };
        if n < 0.0 {
            let default_text = json_number::format(default);
            self.warn(key, WarningKind::Negative { got: describe(value), default: default_text });
            return default;
        }
        let (min, max) = (*bounds.start(), *bounds.end());
        // `+ 0.0` turns a written `-0` into 0.
        let clamped = n.clamp(min, max) + 0.0;
        if clamped != n {
            let got = describe(value);
            let bounds = format!("[{}, {}]", json_number::format(min), json_number::format(max));
            let kind =
                WarningKind::OutOfRange { got, bounds, clamped: json_number::format(clamped) };
            self.warn(key, kind);
        }
        clamped
    }

    /// A list of codes: entries that are not non-empty strings and repeats are dropped, and a
    /// list with no code left (or a value that is not a list) is `default`.
    pub fn codes(&mut self, key: &str, default: &[&str]) -> Vec<String> {
        let default_list = || default.iter().map(|c| (*c).to_owned()).collect::<Vec<String>>();
        let Some(value) = self.get(key) else {
            return default_list();
        };
        let Some(entries) = value.as_array() else {
            let got = describe(value);
            self.wrong_type(key, "a list of codes", got, default.join(", "));
            return default_list();
        };
        let mut codes: Vec<String> = Vec::with_capacity(entries.len());
        // Where each kept code was written, for the duplicate warning.
        let mut written_at: Vec<usize> = Vec::with_capacity(entries.len());
        for (i, entry) in entries.iter().enumerate() {
            let at = field_path(key, &format!("[{i}]"));
            match entry.as_str() {
                Some(code) if !code.is_empty() => {
                    if let Some(k) = codes.iter().position(|c| c == code) {
                        let first = written_at[k];
                        self.warn(&at, WarningKind::DuplicateCode { code: code.to_owned(), first });
                    } else {
                        codes.push(code.to_owned());
                        written_at.push(i);
                    }
                }
                _ => self.warn(&at, WarningKind::BadCode { got: describe(entry) }),
            }
        }
        if codes.is_empty() {
            self.warn(key, WarningKind::NoCodes { default: default_list() });
            return default_list();
        }
        codes
    }

    /// Adds a warning about the field at `key` (relative to the value, like the readers' keys):
    /// for rules a plugin adds on top of the field readers.
    pub fn warn(&mut self, key: &str, kind: WarningKind) {
        self.warnings.push(Warning { path: field_path(self.path, key), kind });
    }

    /// The warnings, in the order the fields were read (unknown keys first).
    pub fn finish(self) -> Vec<Warning> {
        self.warnings
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.fields.and_then(|fields| fields.get(key))
    }

    fn wrong_type(&mut self, key: &str, expected: &'static str, got: String, default: String) {
        self.warn(key, WarningKind::WrongType { expected, got, default });
    }
}

/// A value as JSON text, cut short when long (a warning is read by a person).
pub(crate) fn describe(value: &Value) -> String {
    const MAX_CHARS: usize = 60;
    let text = match value.as_f64() {
        // `1000000000`, not `1000000000.0`.
        Some(n) if value.is_f64() => json_number::format(n),
        _ => value.to_string(),
    };
    if text.chars().count() <= MAX_CHARS {
        return text;
    }
    let mut short: String = text.chars().take(MAX_CHARS).collect();
    short.push('…');
    short
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const KEYS: &[&str] = &["on", "count", "ratio", "codes"];

    /// The four fields read: on, count, ratio, codes.
    type Read = (bool, u32, f64, Vec<String>);

    /// Reads every field of `value` with fixed defaults; returns the values and the warnings.
    fn read(value: Value) -> (Read, Vec<String>) {
        let mut file = FileReader::new(&value, "cfg", KEYS);
        let values = (
            file.bool("on", true),
            file.integer("count", 3, 0..=10),
            file.number("ratio", 0.2, 0.0..=1.0),
            file.codes("codes", &["A", "B"]),
        );
        (values, file.finish().iter().map(ToString::to_string).collect())
    }

    fn codes(list: &[&str]) -> Vec<String> {
        list.iter().map(|c| (*c).to_owned()).collect()
    }

    #[test]
    fn each_fallback_leaves_a_warning_naming_the_field() {
        let defaults = (true, 3, 0.2, codes(&["A", "B"]));
        let cases: Vec<(Value, Read, Vec<&str>)> = vec![
            (json!({}), defaults.clone(), vec![]),
            (Value::Null, defaults.clone(), vec![]),
            (
                json!({"on": false, "count": 0, "ratio": 0, "codes": ["X"]}),
                (false, 0, 0.0, codes(&["X"])),
                vec![],
            ),
            (json!({"count": 10.0, "ratio": 1}), (true, 10, 1.0, codes(&["A", "B"])), vec![]),
            // A negative number is the default, never 0.
            (
                json!({"count": -1, "ratio": -0.5}),
                defaults.clone(),
                vec![
                    "cfg.count: -1 is negative; using the default 3",
                    "cfg.ratio: -0.5 is negative; using the default 0.2",
                ],
            ),
            (
                json!({"count": -0.5}),
                defaults.clone(),
                vec!["cfg.count: -0.5 is negative; using the default 3"],
            ),
            // Out of range: clamped.
            (
                json!({"count": 50, "ratio": 1.5}),
                (true, 10, 1.0, codes(&["A", "B"])),
                vec![
                    "cfg.count: 50 is outside 0..=10; clamped to 10",
                    "cfg.ratio: 1.5 is outside [0, 1]; clamped to 1",
                ],
            ),
            (
                json!({"count": 1e300}),
                (true, 10, 0.2, codes(&["A", "B"])),
                vec!["cfg.count: 1e+300 is outside 0..=10; clamped to 10"],
            ),
            // Wrong types: the default.
            (
                json!({"on": "yes", "count": "3", "ratio": null, "codes": "A"}),
                defaults.clone(),
                vec![
                    "cfg.on: must be a boolean, got \"yes\"; using the default true",
                    "cfg.count: must be an integer, got \"3\"; using the default 3",
                    "cfg.ratio: must be a number, got null; using the default 0.2",
                    "cfg.codes: must be a list of codes, got \"A\"; using the default A, B",
                ],
            ),
            (
                json!({"count": 2.5}),
                defaults.clone(),
                vec!["cfg.count: must be an integer, got 2.5; using the default 3"],
            ),
            // Code lists.
            (
                json!({"codes": []}),
                defaults.clone(),
                vec!["cfg.codes: lists no code; using the default list (A, B)"],
            ),
            (
                json!({"codes": [3, ""]}),
                defaults.clone(),
                vec![
                    "cfg.codes[0]: must be a non-empty code string, got 3; ignored",
                    "cfg.codes[1]: must be a non-empty code string, got \"\"; ignored",
                    "cfg.codes: lists no code; using the default list (A, B)",
                ],
            ),
            (
                json!({"codes": ["X", {"c": 1}, "Y", "X"]}),
                (true, 3, 0.2, codes(&["X", "Y"])),
                vec![
                    "cfg.codes[1]: must be a non-empty code string, got {\"c\":1}; ignored",
                    "cfg.codes[3]: duplicate code \"X\" (first at index 0); ignored",
                ],
            ),
            // Unknown keys (in key order) and non-objects.
            (
                json!({"zeta": 1, "Count": 4}),
                defaults.clone(),
                vec![
                    "cfg.Count: unknown key (expected one of: on, count, ratio, codes); ignored",
                    "cfg.zeta: unknown key (expected one of: on, count, ratio, codes); ignored",
                ],
            ),
            (
                json!([1]),
                defaults.clone(),
                vec!["cfg: must be an object, got [1]; using the defaults"],
            ),
        ];
        for (value, expected, warnings) in cases {
            let (got, got_warnings) = read(value.clone());
            assert_eq!(got, expected, "{value}");
            assert_eq!(got_warnings, warnings, "{value}");
        }
    }

    #[test]
    fn a_lower_bound_above_zero_clamps_upwards_and_minus_zero_is_zero() {
        let value = json!({"keep": 0, "ratio": -0.0});
        let mut file = FileReader::new(&value, "", &["keep", "ratio"]);
        assert_eq!(file.integer("keep", 6, 1..=1000), 1);
        let ratio = file.number("ratio", 0.2, 0.0..=1.0);
        assert!(ratio == 0.0 && ratio.is_sign_positive());
        let warnings: Vec<String> = file.finish().iter().map(ToString::to_string).collect();
        assert_eq!(warnings, ["keep: 0 is outside 1..=1000; clamped to 1"]);
    }

    #[test]
    fn long_values_are_cut_short_in_warnings() {
        let value = json!({"on": "x".repeat(200)});
        let mut file = FileReader::new(&value, "", &["on"]);
        file.bool("on", true);
        let warning = file.finish().remove(0).to_string();
        assert!(warning.contains(&format!("\"{}…;", "x".repeat(59))), "{warning}");
        let whole =
            Warning { path: String::new(), kind: WarningKind::NotAnObject { got: "3".into() } };
        assert_eq!(whole.to_string(), "must be an object, got 3; using the defaults");
    }
}
