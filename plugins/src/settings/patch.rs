//! Reading a run-time settings patch strictly: the first invalid field is a [`FieldError`] naming
//! it, and nothing is applied.
//!
//! A patch is a JSON object holding only the fields to change. Every key must be a field of the
//! settings, every value must be valid as written (`null` is not "unset": it is invalid), and a
//! code list must hold at least one code, without repeats or empty strings. Integral floats are
//! integers (`3.0` is 3).

use std::fmt;
use std::ops::RangeInclusive;

use rein_runtime::json_number;
use rein_runtime::plugin::ConfigError;
use rein_runtime::retry_policy::field_path;
use serde_json::{Map, Value};

use super::file::describe;

/// An invalid field of a patch. Displays as `path: problem`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", display(.path, .message))]
pub struct FieldError {
    /// The field (`extraRetries`, `retryableCodes[2]`; empty for the patch itself).
    pub path: String,
    /// What is wrong with it (`must be an integer within 0..=10, got -1`).
    pub message: String,
}

impl FieldError {
    /// An error about the field at `path`.
    pub fn new(path: impl Into<String>, message: impl fmt::Display) -> Self {
        FieldError { path: path.into(), message: message.to_string() }
    }
}

impl From<FieldError> for ConfigError {
    fn from(error: FieldError) -> Self {
        ConfigError::Invalid { path: error.path, message: error.message }
    }
}

fn display(path: &str, message: &str) -> String {
    if path.is_empty() { message.to_owned() } else { format!("{path}: {message}") }
}

/// The fields of `patch`: it must be an object whose keys are all in `keys`.
pub fn fields<'a>(patch: &'a Value, keys: &[&str]) -> Result<&'a Map<String, Value>, FieldError> {
    let Some(fields) = patch.as_object() else {
        return Err(FieldError::new(
            "",
            format_args!("must be an object, got {}", describe(patch)),
        ));
    };
    match fields.keys().find(|k| !keys.contains(&k.as_str())) {
        Some(key) => Err(FieldError::new(
            key.as_str(),
            format_args!("unknown key (expected one of: {})", keys.join(", ")),
        )),
        None => Ok(fields),
    }
}

/// A boolean field.
pub fn bool(value: &Value, key: &str) -> Result<bool, FieldError> {
    value.as_bool().ok_or_else(|| {
        FieldError::new(key, format_args!("must be a boolean, got {}", describe(value)))
    })
}

/// An integer field within `bounds`: `must be an integer within 0..=10, got -1`.
pub fn integer(value: &Value, key: &str, bounds: RangeInclusive<u32>) -> Result<u32, FieldError> {
    let (min, max) = (*bounds.start(), *bounds.end());
    match value.as_f64() {
        Some(n) if n.fract() == 0.0 && n >= f64::from(min) && n <= f64::from(max) => {
            // Integral and within `min..=max`, so the conversion is exact.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let int = n as u32;
            Ok(int)
        }
        _ => Err(FieldError::new(
            key,
            format_args!("must be an integer within {min}..={max}, got {}", describe(value)),
        )),
    }
}

/// A number field within `bounds`: `must be a number within [0, 1], got 1.5`.
pub fn number(value: &Value, key: &str, bounds: RangeInclusive<f64>) -> Result<f64, FieldError> {
    match value.as_f64() {
        // `+ 0.0` turns a written `-0` into 0.
        Some(n) if bounds.contains(&n) => Ok(n + 0.0),
        _ => Err(FieldError::new(
            key,
            format_args!(
                "must be a number within [{}, {}], got {}",
                json_number::format(*bounds.start()),
                json_number::format(*bounds.end()),
                describe(value)
            ),
        )),
    }
}

/// A list of at least one code, each a non-empty string, none repeated.
pub fn codes(value: &Value, key: &str) -> Result<Vec<String>, FieldError> {
    let Some(entries) = value.as_array() else {
        return Err(FieldError::new(
            key,
            format_args!("must be a list of code strings, got {}", describe(value)),
        ));
    };
    if entries.is_empty() {
        return Err(FieldError::new(key, "must list at least one code"));
    }
    let mut codes: Vec<String> = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let at = || field_path(key, &format!("[{i}]"));
        let code = match entry.as_str() {
            Some("") => return Err(FieldError::new(at(), "must be a non-empty code string")),
            Some(code) => code,
            None => {
                return Err(FieldError::new(
                    at(),
                    format_args!("must be a code string, got {}", describe(entry)),
                ));
            }
        };
        if let Some(first) = codes.iter().position(|c| c == code) {
            return Err(FieldError::new(
                at(),
                format_args!("duplicate code {code:?} (first at index {first})"),
            ));
        }
        codes.push(code.to_owned());
    }
    Ok(codes)
}

/// Whether two code lists hold the same codes, in any order (reordering is not an edit).
pub fn same_codes(a: &[String], b: &[String]) -> bool {
    a.len() == b.len() && a.iter().all(|code| b.contains(code))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn invalid_values_name_the_field() {
        let int = |v: Value| integer(&v, "extraRetries", 0..=10).map(u64::from);
        let ratio = |v: Value| number(&v, "jitterRatio", 0.0..=1.0);
        let cases: Vec<(Result<String, FieldError>, &str)> = vec![
            (
                int(json!(-1)).map(|n| n.to_string()),
                "extraRetries: must be an integer within 0..=10, got -1",
            ),
            (
                int(json!(11)).map(|n| n.to_string()),
                "extraRetries: must be an integer within 0..=10, got 11",
            ),
            (
                int(json!(2.5)).map(|n| n.to_string()),
                "extraRetries: must be an integer within 0..=10, got 2.5",
            ),
            (
                int(json!("3")).map(|n| n.to_string()),
                "extraRetries: must be an integer within 0..=10, got \"3\"",
            ),
            (
                int(Value::Null).map(|n| n.to_string()),
                "extraRetries: must be an integer within 0..=10, got null",
            ),
            (
                ratio(json!(1.5)).map(|n| n.to_string()),
                "jitterRatio: must be a number within [0, 1], got 1.5",
            ),
            (
                ratio(json!(-0.1)).map(|n| n.to_string()),
                "jitterRatio: must be a number within [0, 1], got -0.1",
            ),
            (
                bool(&json!(1), "enabled").map(|b| b.to_string()),
                "enabled: must be a boolean, got 1",
            ),
            (
                codes(&json!([]), "retryableCodes").map(|c| c.join(",")),
                "retryableCodes: must list at least one code",
            ),
            (
                codes(&json!("SERVER"), "retryableCodes").map(|c| c.join(",")),
                "retryableCodes: must be a list of code strings, got \"SERVER\"",
            ),
            (
                codes(&json!(["SERVER", 3]), "retryableCodes").map(|c| c.join(",")),
                "retryableCodes[1]: must be a code string, got 3",
            ),
            (
                codes(&json!([""]), "retryableCodes").map(|c| c.join(",")),
                "retryableCodes[0]: must be a non-empty code string",
            ),
            (
                codes(&json!(["A", "B", "A"]), "retryableCodes").map(|c| c.join(",")),
                "retryableCodes[2]: duplicate code \"A\" (first at index 0)",
            ),
            (
                fields(&json!({"extraRetries": 1, "extraRetrys": 2}), &["extraRetries", "enabled"])
                    .map(|_| String::new()),
                "extraRetrys: unknown key (expected one of: extraRetries, enabled)",
            ),
            (fields(&json!([]), &["enabled"]).map(|_| String::new()), "must be an object, got []"),
        ];
        for (got, expected) in cases {
            assert_eq!(got.unwrap_err().to_string(), expected);
        }
    }

    #[test]
    fn valid_values_are_read_as_written() {
        assert_eq!(integer(&json!(0), "n", 0..=10), Ok(0));
        assert_eq!(integer(&json!(10.0), "n", 0..=10), Ok(10));
        assert_eq!(number(&json!(1), "r", 0.0..=1.0), Ok(1.0));
        assert_eq!(number(&json!(0.25), "r", 0.0..=1.0), Ok(0.25));
        assert!(number(&json!(-0.0), "r", 0.0..=1.0).unwrap().is_sign_positive());
        assert_eq!(bool(&json!(false), "b"), Ok(false));
        assert_eq!(codes(&json!(["B", "A"]), "c"), Ok(vec!["B".to_owned(), "A".to_owned()]));
        assert!(fields(&json!({}), &["a"]).unwrap().is_empty());
    }

    #[test]
    fn a_field_error_becomes_the_runtimes_config_error() {
        let error = FieldError::new("retryableCodes", "must list at least one code");
        assert_eq!(
            ConfigError::from(error).to_string(),
            "retryableCodes: must list at least one code"
        );
    }

    #[test]
    fn code_lists_compare_as_sets() {
        let list = |codes: &[&str]| codes.iter().map(|c| (*c).to_owned()).collect::<Vec<_>>();
        assert!(same_codes(&list(&["A", "B"]), &list(&["B", "A"])));
        assert!(!same_codes(&list(&["A", "B"]), &list(&["A"])));
        assert!(!same_codes(&list(&["A", "B"]), &list(&["A", "C"])));
    }
}
