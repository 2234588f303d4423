//! Numbers written the way a person (and a `policyKey`) writes them: `500`, not
//! `500.0`. Delays and ratios are `f64` in memory, but an integral value is written as an integer
//! so logs and keys stay canonical and compare byte for byte.

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

/// The text of [`number`], for building canonical strings.
pub fn format(value: f64) -> String {
    number(value).to_string()
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
            assert_eq!(format(value), text, "{value}");
        }
    }
}
