//! Numbers written the way a person (and a `policyKey`) writes them: `500`, not `500.0`.
//! Delays and ratios are `f64` in memory, but an integral value is written as an integer so logs
//! and keys stay canonical and compare byte for byte.
//!
//! - [`number`]: the JSON number a log field holds (an integer when integral, else the float).
//! - [`format()`]: the text of a number exactly as JavaScript's `JSON.stringify` writes it, for
//!   canonical strings compared byte for byte with the seed harness's (a `policyKey`).
//!
//! # Why JavaScript's text
//!
//! The seed harness that defines a `policyKey` is JavaScript, and a key is a string: the same
//! policy must give the same bytes in both, or a log shared between the two splits a chain (a
//! fresh budget, a new `retryId`). JavaScript writes a number as ECMAScript's
//! `Number::toString` does — decimal from 1e-6 up to (not including) 1e21 (`0.000001`,
//! `100000000000000000000`), exponential outside (`1e-7`, `1e+21`), the shortest digits that
//! read back to the same number, `-0` as `0` — where Rust's shortest-float writers put the
//! exponent elsewhere (`1e-6`, `1e20`). The `ryu-js` crate implements exactly that algorithm.

use serde::Serializer;

/// The JSON number for `value`: an integer when `value` is integral and within ±2^53, otherwise
/// the shortest float. Non-finite values (which JSON cannot hold) become `null`'s stand-in `0`;
/// callers validate finiteness before they get here.
pub fn number(value: f64) -> serde_json::Number {
    const SAFE: f64 = 9_007_199_254_740_992.0;
    if value.fract() == 0.0 && value.abs() <= SAFE {
        // The range check above makes the conversion exact.
        #[allow(clippy::cast_possible_truncation)]
        let int = value as i64;
        return serde_json::Number::from(int);
    }
    serde_json::Number::from_f64(value).unwrap_or_else(|| serde_json::Number::from(0))
}

/// The text `JSON.stringify(value)` gives in JavaScript: `500`, `0.1`, `0.000001`, `1e-7`,
/// `100000000000000000000`, `1e+21`, `0` for `-0`, and `null` for a value JSON cannot hold
/// (NaN, ±Infinity).
pub fn format(value: f64) -> String {
    if value.is_finite() {
        ryu_js::Buffer::new().format_finite(value).to_owned()
    } else {
        "null".to_owned()
    }
}

/// `serialize_with` for an `f64` field.
pub fn serialize<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(&number(*value), serializer)
}

/// `serialize_with` for an `Option<f64>` field (used with `skip_serializing_if`).
pub fn serialize_opt<S: Serializer>(value: &Option<f64>, serializer: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(v) => serialize(v, serializer),
        None => serializer.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integral_values_have_no_fraction() {
        let cases = [
            (500.0, "500"),
            (0.0, "0"),
            (0.1, "0.1"),
            (1.1, "1.1"),
            (-3.0, "-3"),
            (2147483647.0, "2147483647"),
            (450.00000000000006, "450.00000000000006"),
        ];
        for (value, text) in cases {
            assert_eq!(number(value).to_string(), text, "{value}");
            assert_eq!(format(value), text, "{value}");
        }
    }

    /// What Node 22 prints for `JSON.stringify(x)`.
    #[test]
    fn numbers_are_written_exactly_as_javascript_writes_them() {
        let cases: [(f64, &str); 24] = [
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (123456789012345680000.0, "123456789012345680000"),
            (9007199254740992.0, "9007199254740992"),
            (9007199254740994.0, "9007199254740994"),
            (1e16, "10000000000000000"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (2.5e21, "2.5e+21"),
            (1e-6, "0.000001"),
            (1.5e-6, "0.0000015"),
            (0.000001234, "0.000001234"),
            (1e-5, "0.00001"),
            (1e-7, "1e-7"),
            (1.5e-7, "1.5e-7"),
            (-1e-7, "-1e-7"),
            (1.23e-18, "1.23e-18"),
            (5e-324, "5e-324"),
            (0.1 + 0.2, "0.30000000000000004"),
            (-0.0, "0"),
            (0.5, "0.5"),
            (-2147483647.0, "-2147483647"),
            (f64::NAN, "null"),
            (f64::INFINITY, "null"),
            (f64::NEG_INFINITY, "null"),
        ];
        for (value, text) in cases {
            assert_eq!(format(value), text, "{value:e}");
        }
    }
}
