//! Values from a file, quoted in a message: cut to a length a person can read.
//!
//! An error names what is wrong with a file by quoting it — the event type a line has, the
//! session a log belongs to, the field a parser did not expect. The file decides how long that
//! value is: a crafted line with a 100,000-character event type made `rein check` print all of
//! it. So every message that quotes a value from a file goes through here:
//!
//! - [`value`]: one value, quoted as a Rust string literal (control characters escaped), cut at
//!   [`VALUE_CHARS`] characters and saying how long it was (`"xxxx…" (100000 characters)`).
//! - [`message`]: a message someone else built around such values (a JSON parser's, which
//!   quotes the unknown variant or the bad string whole), cut in its middle to at most
//!   [`MESSAGE_CHARS`] characters: its start says what is wrong, its end where
//!   (`… at line 1 column 100034`).
//!
//! Both leave a short text exactly as it is, and cut only at character boundaries.

use std::borrow::Cow;

/// The most characters of one quoted value.
pub const VALUE_CHARS: usize = 64;

/// The most characters of a message built around values from a file.
pub const MESSAGE_CHARS: usize = 400;

/// `text` quoted (`"…"`, escaped like a Rust string literal), cut at [`VALUE_CHARS`] characters
/// with its length appended when longer.
pub fn value(text: &str) -> String {
    match text.char_indices().nth(VALUE_CHARS) {
        None => format!("{text:?}"),
        Some((cut, _)) => {
            let length = text.chars().count();
            format!("{:?} ({length} characters)", format!("{}…", &text[..cut]))
        }
    }
}

/// `text`, or, when longer than [`MESSAGE_CHARS`] characters, its start and its end around a
/// note of how much was cut.
pub fn message(text: &str) -> Cow<'_, str> {
    const TAIL: usize = 96;
    let length = text.chars().count();
    if length <= MESSAGE_CHARS {
        return Cow::Borrowed(text);
    }
    let note = format!(" …[{} characters cut]… ", length - (MESSAGE_CHARS - TAIL) - TAIL);
    let head_end = text.char_indices().nth(MESSAGE_CHARS - TAIL).map_or(text.len(), |(i, _)| i);
    let tail_start = text.char_indices().nth(length - TAIL).map_or(text.len(), |(i, _)| i);
    Cow::Owned(format!("{}{note}{}", &text[..head_end], &text[tail_start..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_value_is_quoted_whole_and_a_long_one_cut_saying_how_long() {
        assert_eq!(value("turn/start"), r#""turn/start""#);
        assert_eq!(value("a\nb"), r#""a\nb""#);
        let exact = "x".repeat(VALUE_CHARS);
        assert_eq!(value(&exact), format!("{exact:?}"));
        let long = "é".repeat(100_000);
        let cut = value(&long);
        assert_eq!(cut, format!("\"{}…\" (100000 characters)", "é".repeat(VALUE_CHARS)));
    }

    #[test]
    fn a_long_message_keeps_its_start_and_its_end() {
        assert_eq!(message("short"), "short");
        let variant = "x".repeat(100_000);
        let serde = format!(
            "unknown variant `{variant}`, expected one of `a`, `b` at line 1 column 100034"
        );
        let cut = message(&serde);
        assert!(cut.chars().count() < MESSAGE_CHARS + 40, "{cut}");
        assert!(cut.starts_with("unknown variant `xxxx"), "{cut}");
        assert!(cut.ends_with("`a`, `b` at line 1 column 100034"), "{cut}");
        assert!(cut.contains(" characters cut]… "), "{cut}");
        let total = serde.chars().count();
        let kept = MESSAGE_CHARS;
        assert!(cut.contains(&format!("[{} characters cut]", total - kept)), "{cut}");
        // Multi-byte characters are cut at their boundaries.
        let wide = "é".repeat(1000);
        assert!(message(&wide).starts_with('é') && message(&wide).ends_with('é'));
    }
}
