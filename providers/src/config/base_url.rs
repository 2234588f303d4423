//! [`BaseUrl`]: where a provider route sends its requests — checked, and printed without its
//! credentials.
//!
//! - **Checked**: an `http(s)` URL with no query or fragment, and no control character anywhere.
//!   The URL parser silently drops tabs and newlines and trims other control characters, so the
//!   URL used would differ from the one written; such a value is a paste gone wrong (or a forged
//!   log or header line) and is refused, without quoting it.
//! - **Printed redacted**: the user information of `http://user:password@host/v1` reads
//!   `http://[redacted]@host/v1` wherever the URL is shown ([`BaseUrl::shown`], `Debug`, every
//!   error message — even for a value that does not parse, so the rule is on the text:
//!   [`redact_userinfo`]).
//! - **Its password is a secret**: [`BaseUrl::password`] hands it to the adapter's scrubber.

use std::borrow::Cow;
use std::fmt;

use super::ProviderConfigError;
use crate::secret::REDACTED;

/// A checked base URL (the path before an endpoint's own: `/chat/completions`, `/v1/messages`).
#[derive(Clone, PartialEq, Eq)]
pub struct BaseUrl {
    raw: String,
    shown: String,
}

impl fmt::Debug for BaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.shown, f)
    }
}

impl BaseUrl {
    /// `url` checked as a base URL, or an error naming `field` (the variable or field path) that
    /// never quotes the URL's user information or a control character.
    pub fn parse(url: &str, field: &str) -> Result<Self, ProviderConfigError> {
        let invalid = |reason: String| ProviderConfigError::invalid(field, reason);
        if let Some((at, c)) = url.char_indices().find(|(_, c)| c.is_control()) {
            return Err(invalid(format!(
                "must not contain a control character (U+{:04X} at byte {at})",
                u32::from(c)
            )));
        }
        let shown = redact_userinfo(url).into_owned();
        let parsed =
            url::Url::parse(url).map_err(|e| invalid(format!("not a URL ({e}): {shown:?}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(invalid(format!("must be an http(s) URL, got {shown:?}")));
        }
        if parsed.query().is_some() || parsed.fragment().is_some() {
            return Err(invalid(format!("must have no query or fragment: {shown:?}")));
        }
        Ok(Self { raw: url.to_owned(), shown })
    }

    /// The URL as it prints: its user information, if any, reads `[redacted]`.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The endpoint requests go to: the URL (credentials included), without its trailing
    /// slashes, followed by `path` (`/chat/completions`).
    pub(crate) fn endpoint(&self, path: &str) -> String {
        format!("{}{path}", self.raw.trim_end_matches('/'))
    }

    /// The password of the user information, as written (a secret for the scrubber).
    pub(crate) fn password(&self) -> Option<String> {
        let parsed = url::Url::parse(&self.raw).ok()?;
        parsed.password().filter(|p| !p.is_empty()).map(str::to_owned)
    }
}

/// `url` with the user information of its authority (everything before the last `@` between
/// `://` and the next `/`, `?` or `#`) replaced by `[redacted]`; the text as it is when it has
/// none.
pub fn redact_userinfo(url: &str) -> Cow<'_, str> {
    let Some(scheme_end) = url.find("://") else { return url.into() };
    let start = scheme_end + "://".len();
    let rest = &url[start..];
    let authority = rest.find(['/', '?', '#']).map_or(rest, |end| &rest[..end]);
    match authority.rfind('@') {
        Some(at) => Cow::Owned(format!("{}{REDACTED}{}", &url[..start], &rest[at..])),
        None => url.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_information_is_redacted_on_the_text() {
        let cases = [
            ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
            ("http://user:pw@127.0.0.1:8000/v1", "http://[redacted]@127.0.0.1:8000/v1"),
            ("https://only-user@host", "https://[redacted]@host"),
            ("http://a@b:c@host/v1?x=@y", "http://[redacted]@host/v1?x=@y"),
            ("http://host/v1/@path", "http://host/v1/@path"),
            ("http://:secret@host#f@g", "http://[redacted]@host#f@g"),
            ("not a url user:pw@host", "not a url user:pw@host"),
            ("http//user:pw@host", "http//user:pw@host"),
        ];
        for (url, shown) in cases {
            assert_eq!(redact_userinfo(url), shown, "{url}");
        }
    }

    #[test]
    fn control_characters_are_refused_without_quoting_the_value() {
        let cases = [
            ("http://host/v1\n", "U+000A at byte 14"),
            ("http://ho\nst/v1", "U+000A at byte 9"),
            ("\thttp://host/v1", "U+0009 at byte 0"),
            ("http://user:sk-secret@host/v1\r\nX-Injected: 1", "U+000D at byte 29"),
            ("http://host/\u{7f}", "U+007F at byte 12"),
            ("http://host/\u{85}", "U+0085 at byte 12"),
        ];
        for (url, at) in cases {
            let error = BaseUrl::parse(url, "OPENAI_BASE_URL").unwrap_err().to_string();
            assert_eq!(
                error,
                format!("OPENAI_BASE_URL: must not contain a control character ({at})"),
                "{url:?}"
            );
            assert!(!error.contains("sk-secret") && !error.contains("host"), "{error}");
        }
    }

    #[test]
    fn errors_and_the_shown_url_never_carry_the_password() {
        let url = BaseUrl::parse("http://user:pa%40ss@127.0.0.1:9/v1/", "base_url").unwrap();
        assert_eq!(url.shown(), "http://[redacted]@127.0.0.1:9/v1/");
        assert_eq!(format!("{url:?}"), "\"http://[redacted]@127.0.0.1:9/v1/\"");
        assert_eq!(
            url.endpoint("/chat/completions"),
            "http://user:pa%40ss@127.0.0.1:9/v1/chat/completions"
        );
        assert_eq!(url.password().as_deref(), Some("pa%40ss"));
        assert_eq!(BaseUrl::parse("http://u@h", "f").unwrap().password(), None);
        let refusals = [
            (
                "ftp://user:sk-secret@host",
                "f: must be an http(s) URL, got \"ftp://[redacted]@host\"",
            ),
            (
                "http://user:sk-secret@host/?q=1",
                "f: must have no query or fragment: \"http://[redacted]@host/?q=1\"",
            ),
            (
                "http://user:sk-secret@ho st",
                "f: not a URL (invalid international domain name): \"http://[redacted]@ho st\"",
            ),
        ];
        for (raw, error) in refusals {
            assert_eq!(BaseUrl::parse(raw, "f").unwrap_err().to_string(), error, "{raw}");
        }
    }
}
