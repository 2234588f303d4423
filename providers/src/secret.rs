//! [`ApiKey`]: a provider credential that cannot leak by accident.
//!
//! The key is only ever read to build the header it travels in (`Authorization`, `x-api-key`:
//! marked sensitive, so the HTTP client redacts it too) and to hand it to the adapter's
//! [`Scrubber`](crate::scrub::Scrubber), which takes it out of everything a server sends back.
//! Its `Debug` and `Display` print `[redacted]`, and it has no `Serialize`.

use std::fmt;

/// What a redacted key reads as.
pub const REDACTED: &str = "[redacted]";

/// The longest key accepted.
pub const MAX_KEY_BYTES: usize = 4096;

/// A provider API key. Never printed: see the module docs.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// A key; `None` when `key` is empty or only whitespace (an unset key). Surrounding
    /// whitespace (a pasted newline) is trimmed.
    pub fn new(key: impl Into<String>) -> Option<Self> {
        let key = key.into();
        let trimmed = key.trim();
        if trimmed.is_empty() { None } else { Some(Self(trimmed.to_owned())) }
    }

    /// Whether the key can travel in an HTTP header: visible ASCII only, at most
    /// [`MAX_KEY_BYTES`] (servers refuse longer header lines anyway). The reason never quotes
    /// the key.
    pub fn check(&self) -> Result<(), &'static str> {
        if !self.0.bytes().all(|b| b.is_ascii_graphic()) {
            Err("must be printable ASCII without spaces")
        } else if self.0.len() > MAX_KEY_BYTES {
            Err("must be at most 4096 characters")
        } else {
            Ok(())
        }
    }

    /// The key itself, for its header and the scrubber.
    pub(crate) fn secret(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_never_prints() {
        let key = ApiKey::new("sk-secret-123").unwrap();
        assert_eq!(
            format!("{key:?} {key} {:?}", Some(&key)),
            "[redacted] [redacted] Some([redacted])"
        );
        assert_eq!(key.secret(), "sk-secret-123");
    }

    #[test]
    fn empty_keys_are_unset_and_pasted_whitespace_is_trimmed() {
        let cases = [("", None), ("   ", None), ("\n", None), (" sk-1\n", Some("sk-1"))];
        for (raw, secret) in cases {
            assert_eq!(ApiKey::new(raw).as_ref().map(ApiKey::secret), secret, "{raw:?}");
        }
    }

    #[test]
    fn keys_that_cannot_be_a_header_are_refused_without_quoting_them() {
        let long = "k".repeat(MAX_KEY_BYTES + 1);
        let cases = [
            ("sk-abc", true),
            ("sk abc", false),
            ("sk-é", false),
            ("sk\u{7f}", false),
            (&long[1..], true),
            (&long, false),
        ];
        for (raw, ok) in cases {
            let result = ApiKey::new(raw).unwrap().check();
            assert_eq!(result.is_ok(), ok, "{raw:?}");
            if let Err(reason) = result {
                assert!(!reason.contains(raw));
            }
        }
    }
}
