//! The text of a `policyKey`: a compact JSON array, byte for byte what the seed harness's
//! JavaScript writes with `JSON.stringify` for the same array (`docs/runtime-semantics.md`,
//! "Retry chains").
//!
//! - Strings are JSON strings with JSON's escapes (`serde_json` and `JSON.stringify` escape the
//!   same characters the same way: `"`, `\`, and control characters, `\u001f` in lower case).
//! - Whole numbers are their digits; other numbers are [`json_number::format`]'s text, which is
//!   JavaScript's (`0.000001`, not `1e-6`).
//! - Lists of codes are sorted as JavaScript's `Array.prototype.sort` sorts strings: by UTF-16
//!   code units ([`sort_codes`]).
//!
//! # Why UTF-16 order
//!
//! Rust compares strings by their UTF-8 bytes, which is the order of code points; JavaScript by
//! their UTF-16 code units. The two agree everywhere but at one seam: a character outside the
//! Basic Multilingual Plane is a surrogate pair in UTF-16 (`0xD800..0xDFFF`), which sorts before
//! `U+E000..U+FFFF`, while its code point sorts after them. A key that sorted `["\u{E000}",
//! "😀"]` the Rust way would differ from the harness's `["😀","\u{E000}"]`, and a log shared
//! between the two would split the chain (a fresh budget, a new `retryId`).

use std::cmp::Ordering;

use crate::json_number;

/// One element of a key.
#[derive(Debug, Clone, PartialEq)]
pub enum Part<'a> {
    /// A string (a mode, a plugin's name).
    Text(&'a str),
    /// A whole number (a retry budget).
    Whole(u64),
    /// A number (a delay, a ratio).
    Number(f64),
    /// A list of codes, written sorted ([`sort_codes`]).
    Codes(Vec<&'a str>),
}

/// The key made of `parts`: `["normal",2,["RATE_LIMIT","SERVER"],500,10000,0.1]`.
pub fn write(parts: &[Part<'_>]) -> String {
    let texts: Vec<String> = parts.iter().map(part).collect();
    format!("[{}]", texts.join(","))
}

fn part(part: &Part<'_>) -> String {
    match part {
        Part::Text(text) => string(text),
        Part::Whole(n) => n.to_string(),
        Part::Number(n) => json_number::format(*n),
        Part::Codes(codes) => {
            let mut codes = codes.clone();
            sort_codes(&mut codes);
            let texts: Vec<String> = codes.iter().map(|c| string(c)).collect();
            format!("[{}]", texts.join(","))
        }
    }
}

/// `text` as a JSON string.
fn string(text: &str) -> String {
    // Serializing a string cannot fail.
    serde_json::to_string(text).unwrap_or_default()
}

/// Sorts `codes` as JavaScript sorts strings: by UTF-16 code units.
pub fn sort_codes<S: AsRef<str>>(codes: &mut [S]) {
    codes.sort_by(|a, b| utf16_order(a.as_ref(), b.as_ref()));
}

/// How JavaScript orders two strings: by their UTF-16 code units.
pub fn utf16_order(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Node 22 gives for `[...codes].sort()`.
    #[test]
    fn codes_sort_by_utf16_code_units_as_javascript_sorts_them() {
        let cases: [(&[&str], &[&str]); 6] = [
            (&["SERVER", "RATE_LIMIT", "TIMEOUT"], &["RATE_LIMIT", "SERVER", "TIMEOUT"]),
            (&["b", "B", "a", "_"], &["B", "_", "a", "b"]),
            // Outside the BMP (a surrogate pair, 0xD83D…) before U+E000..U+FFFF; UTF-8 byte
            // order (code points) would put it after them.
            (&["\u{E000}", "\u{1F600}"], &["\u{1F600}", "\u{E000}"]),
            (&["\u{FF61}", "\u{10000}", "\u{FFFF}"], &["\u{10000}", "\u{FF61}", "\u{FFFF}"]),
            // Below the surrogates, both orders agree.
            (&["\u{D7FF}", "\u{1F600}", "é"], &["é", "\u{D7FF}", "\u{1F600}"]),
            (&["A\u{E000}", "AB", "A", "A\u{1F600}"], &["A", "AB", "A\u{1F600}", "A\u{E000}"]),
        ];
        for (codes, sorted) in cases {
            let mut got = codes.to_vec();
            sort_codes(&mut got);
            assert_eq!(got, sorted, "{codes:?}");
        }
        let mut bytes = vec!["\u{E000}", "\u{1F600}"];
        bytes.sort_unstable();
        assert_eq!(bytes, ["\u{E000}", "\u{1F600}"], "Rust's own order differs there");
    }

    /// What Node 22 gives for `JSON.stringify([...])` of the same parts.
    #[test]
    fn a_key_is_what_json_stringify_writes() {
        let cases: [(Vec<Part<'_>>, &str); 5] = [
            (
                vec![
                    Part::Text("normal"),
                    Part::Whole(2),
                    Part::Codes(vec!["SERVER", "RATE_LIMIT"]),
                    Part::Number(500.0),
                    Part::Number(10000.0),
                    Part::Number(0.1),
                ],
                r#"["normal",2,["RATE_LIMIT","SERVER"],500,10000,0.1]"#,
            ),
            (
                vec![Part::Text("always"), Part::Number(0.000001), Part::Number(1e-7)],
                r#"["always",0.000001,1e-7]"#,
            ),
            (
                vec![Part::Codes(vec!["\u{E000}", "A\"B", "\u{1F600}", "a\\b", "\u{1f}"])],
                "[[\"\\u001f\",\"A\\\"B\",\"a\\\\b\",\"\u{1F600}\",\"\u{E000}\"]]",
            ),
            (vec![Part::Number(-0.0), Part::Number(0.1 + 0.2)], "[0,0.30000000000000004]"),
            (vec![], "[]"),
        ];
        for (parts, key) in cases {
            assert_eq!(write(&parts), key, "{parts:?}");
        }
    }
}
