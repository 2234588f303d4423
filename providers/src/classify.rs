//! Failure classification: which code a provider's error gets, and the failure it becomes.
//!
//! The runtime routes on the code string only; this module is where an adapter reads a status
//! and an error body to choose that code (see "Providers" in `docs/runtime-semantics.md`). It
//! is a pure function of the status, the headers, the body and "now" (for an HTTP-date
//! `Retry-After`), so every row of the routing table is a test case:
//!
//! | status | code |
//! |---|---|
//! | 401, 403 | `AUTH` |
//! | 413 | `INVALID_REQUEST` |
//! | any other, with quota wording in the body | `QUOTA` (even on a 429) |
//! | 402 | `QUOTA` |
//! | 429 | `RATE_LIMIT` |
//! | 408 | `TIMEOUT` (a proxy's upstream timeout, `litellm`'s among them) |
//! | 409 | `SERVER` (a conflict the server resolves by itself; the official SDKs retry it) |
//! | 400 | `CONTEXT_WINDOW_EXCEEDED` when the body says the context or maximum length was exceeded, else `INVALID_REQUEST` |
//! | 422 | `INVALID_REQUEST` |
//! | ≥ 500 | `SERVER` |
//! | any other | `HTTP_<status>` |
//!
//! The message is the body's `error.message` verbatim (or a plain-string `error`, or a
//! top-level `message`, which some compatible servers send instead), else
//! "`<provider> API error (HTTP n)`".
//!
//! Wording is matched on a normalized body (lower case, `_` and `-` as spaces), so an error
//! code such as `insufficient_quota` or `context_length_exceeded` counts as well as prose.

use std::sync::LazyLock;
use std::time::{Duration, SystemTime};

use http::header::HeaderMap;
use regex::Regex;
use rein_runtime::failure::{self, Failure};
use serde_json::Value;

use crate::response_headers;

/// Quota or balance exhausted, in the words providers use.
static QUOTA_WORDING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"insufficient (account )?(quota|balance|credits?|funds)",
        r"|(quota|usage limit|credit limit|spend(ing)? limit|billing (hard )?limit|balance|credits?)",
        r" (has |have |is |was |were )?(been )?(exceeded|exhausted|reached|depleted|used up|run out)",
        r"|exceeded (your |the )?(current |monthly |daily )?(quota|usage limit|credit limit|spend(ing)? limit|billing limit)",
        r"|out of (extra )?(credits?|quota|balance|usage)",
        r"|(no|zero) (remaining )?(credits?|balance) ",
        r"|credit balance (is )?too low",
        r"|reached (your|its) ([a-z]+ ){0,3}usage limits?",
    ))
    .unwrap_or_else(|e| unreachable!("a literal pattern: {e}"))
});

/// The request is longer than the model's context.
static CONTEXT_WORDING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"context (length|window|size|limit)",
        r"|maximum (context |input |prompt )?length",
        r"|(prompt|input|request|messages?) (is |are )?too long",
        r"|too many (input |prompt )?tokens",
    ))
    .unwrap_or_else(|e| unreachable!("a literal pattern: {e}"))
});

/// Lower case, `_` and `-` as spaces, whitespace collapsed, a trailing space (so a pattern may
/// end on a word boundary).
fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 1);
    for word in text
        .chars()
        .map(|c| if c == '_' || c == '-' { ' ' } else { c.to_ascii_lowercase() })
        .collect::<String>()
        .split_whitespace()
    {
        out.push_str(word);
        out.push(' ');
    }
    out
}

/// Whether `body` says a quota, balance or credit is exhausted.
pub fn quota_wording(body: &str) -> bool {
    QUOTA_WORDING.is_match(&normalize(body))
}

/// Whether `body` says the request exceeded the context or maximum length.
pub fn context_wording(body: &str) -> bool {
    CONTEXT_WORDING.is_match(&normalize(body))
}

/// The code of an HTTP error response (the table in the module docs).
pub fn http_code(status: u16, body: &str) -> String {
    let code = match status {
        401 | 403 => failure::AUTH,
        413 => failure::INVALID_REQUEST,
        _ if quota_wording(body) => failure::QUOTA,
        402 => failure::QUOTA,
        429 => failure::RATE_LIMIT,
        408 => failure::TIMEOUT,
        409 => failure::SERVER,
        400 if context_wording(body) => failure::CONTEXT_WINDOW_EXCEEDED,
        400 | 422 => failure::INVALID_REQUEST,
        500.. => failure::SERVER,
        _ => return failure::http_code(status),
    };
    code.to_owned()
}

/// The provider's own message in an error body: `error.message`, a plain-string `error`, or a
/// top-level `message` (the first non-empty one); `None` when the body is not JSON or has none.
pub fn error_message(body: &str) -> Option<String> {
    let value: Value = serde_json::from_str(body).ok()?;
    message_of(&value)
}

fn message_of(value: &Value) -> Option<String> {
    let non_empty = |v: Option<&Value>| {
        v.and_then(Value::as_str).filter(|s| !s.trim().is_empty()).map(str::to_owned)
    };
    let error = value.get("error");
    non_empty(error.and_then(|e| e.get("message")))
        .or_else(|| non_empty(error))
        .or_else(|| non_empty(value.get("message")))
}

/// The failure of an HTTP error response from provider `label` (`DeepSeek`): its code, message,
/// status, request id and suggested delay.
pub fn http_failure(
    label: &str,
    status: u16,
    headers: &HeaderMap,
    body: &str,
    now: SystemTime,
) -> Failure {
    let message =
        error_message(body).unwrap_or_else(|| format!("{label} API error (HTTP {status})"));
    let failure = typed(&http_code(status, body), message);
    let failure = failure.clone().with_status(status).unwrap_or(failure);
    decorate(failure, headers, now)
}

/// Adds what the headers tell (request id, suggested delay) to a failure.
pub fn decorate(failure: Failure, headers: &HeaderMap, now: SystemTime) -> Failure {
    let failure = match response_headers::request_id(headers) {
        Some(id) => failure.clone().with_request_id(id).unwrap_or(failure),
        None => failure,
    };
    match response_headers::retry_after_ms(headers, now) {
        Some(ms) => failure.clone().with_retry_after_ms(ms).unwrap_or(failure),
        None => failure,
    }
}

/// The failure of an `{"error": …}` payload inside a stream (`error` is the value of `error`):
/// its code is [`stream_code`]'s, its status the numeric `status` or `code` in 100..=599, if any.
pub fn stream_error(label: &str, error: &Value) -> Failure {
    let message = message_of(&serde_json::json!({ "error": error }))
        .unwrap_or_else(|| format!("{label} stream error"));
    let failure = typed(&stream_code(error), message);
    match stream_status(error) {
        Some(status) => failure.clone().with_status(status).unwrap_or(failure),
        None => failure,
    }
}

/// The code of an in-stream error object. A numeric `status` or `code` in 100..=599 routes like
/// an HTTP status; otherwise the wording decides: quota → `QUOTA`, context →
/// `CONTEXT_WINDOW_EXCEEDED`, rate limit → `RATE_LIMIT`, a server error or overload → `SERVER`,
/// anything else `PROVIDER_ERROR`.
pub fn stream_code(error: &Value) -> String {
    let text = error.to_string();
    if let Some(status) = stream_status(error) {
        return http_code(status, &text);
    }
    let normalized = normalize(&text);
    let code = if quota_wording(&text) {
        failure::QUOTA
    } else if context_wording(&text) {
        failure::CONTEXT_WINDOW_EXCEEDED
    } else if normalized.contains("rate limit") || normalized.contains("too many requests") {
        failure::RATE_LIMIT
    } else if ["server error", "overloaded", "internal error", "service unavailable"]
        .iter()
        .any(|w| normalized.contains(w))
    {
        failure::SERVER
    } else {
        failure::PROVIDER_ERROR
    };
    code.to_owned()
}

/// The numeric `status` or `code` of an in-stream error object, when it is an HTTP status.
fn stream_status(error: &Value) -> Option<u16> {
    ["status", "code"]
        .iter()
        .find_map(|k| error.get(*k).and_then(Value::as_u64))
        .and_then(|s| u16::try_from(s).ok())
        .filter(|s| (100..=599).contains(s))
}

/// `TIMEOUT`: nothing arrived for `silence` (not even a keep-alive comment).
pub fn dead_air(label: &str, silence: Duration) -> Failure {
    typed(failure::TIMEOUT, format!("{label} sent nothing for {} s", silence.as_secs_f64()))
}

/// `STREAM_CLOSED`: the stream ended cleanly before its end marker (`[DONE]`, `message_stop`).
pub fn stream_closed(label: &str, marker: &str) -> Failure {
    typed(failure::STREAM_CLOSED, format!("{label} closed the stream before {marker}"))
}

/// `TRANSPORT`: the connection failed (`detail` says how).
pub fn transport(label: &str, detail: &str) -> Failure {
    typed(failure::TRANSPORT, format!("{label} connection failed: {detail}"))
}

/// `PROVIDER_ERROR`: the provider sent something this adapter cannot read (`detail` says what).
pub fn malformed(label: &str, detail: &str) -> Failure {
    typed(failure::PROVIDER_ERROR, format!("{label} sent a malformed response: {detail}"))
}

/// A failure with a code and a message, both non-empty (an empty message reads "no message").
pub(crate) fn typed(code: &str, message: impl Into<String>) -> Failure {
    let message = message.into();
    let message = if message.trim().is_empty() { "no message".to_owned() } else { message };
    let code = if code.is_empty() { failure::UNKNOWN } else { code };
    // Both are non-empty now, so `new` cannot refuse them.
    Failure::new(code, message).unwrap_or_else(|_| Failure::aborted())
}

/// An error and its sources, joined by ": " (what a transport failure says).
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let line = cause.to_string();
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use http::header::HeaderValue;
    use serde_json::json;

    use super::*;

    #[test]
    fn the_routing_table() {
        let plain = r#"{"error":{"message":"nope","type":"invalid_request_error"}}"#;
        let quota_429 = r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota"}}"#;
        let context = r#"{"error":{"message":"This model's maximum context length is 65536 tokens. However, you requested 70000 tokens.","type":"invalid_request_error"}}"#;
        let cases = [
            (401, plain, "AUTH"),
            (403, plain, "AUTH"),
            (401, quota_429, "AUTH"),
            (413, plain, "INVALID_REQUEST"),
            (413, quota_429, "INVALID_REQUEST"),
            (429, quota_429, "QUOTA"),
            (429, plain, "RATE_LIMIT"),
            (429, "", "RATE_LIMIT"),
            (402, plain, "QUOTA"),
            (402, r#"{"error":{"message":"Insufficient Balance"}}"#, "QUOTA"),
            (400, context, "CONTEXT_WINDOW_EXCEEDED"),
            (400, plain, "INVALID_REQUEST"),
            (400, r#"{"error":{"code":"insufficient_quota"}}"#, "QUOTA"),
            (422, plain, "INVALID_REQUEST"),
            (422, context, "INVALID_REQUEST"),
            (500, plain, "SERVER"),
            (503, "<html>busy</html>", "SERVER"),
            (599, "", "SERVER"),
            (408, plain, "TIMEOUT"),
            (408, "", "TIMEOUT"),
            (409, plain, "SERVER"),
            (409, "", "SERVER"),
            (409, quota_429, "QUOTA"),
            (404, plain, "HTTP_404"),
            (410, "", "HTTP_410"),
            (418, "", "HTTP_418"),
        ];
        for (status, body, code) in cases {
            assert_eq!(http_code(status, body), code, "{status} {body}");
        }
    }

    #[test]
    fn quota_wording() {
        let quota = [
            "Insufficient Balance",
            "insufficient_quota",
            "Insufficient credits remaining",
            "You exceeded your current quota, please check your plan",
            "Quota exceeded for this project",
            "usage limit reached",
            "Monthly usage limit has been exhausted",
            "Your credit balance is exhausted",
            "balance exhausted",
            "You are out of credits.",
            "credits exhausted; top up",
            "Spending limit reached",
            "insufficient funds",
            "Your account has no remaining credits left",
            // Anthropic's: the prepaid credit, a spend limit set on a workspace, the tier's cap.
            "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.",
            "You have reached your specified workspace API usage limits. You will regain access on 2026-06-01 at 00:00 UTC.",
            "You have reached your API usage limits: your organization has crossed its monthly API usage threshold",
            "enforced_spend_limit_reached",
            "Monthly spend limit reached.",
            "You're out of extra usage. Add more at claude.ai/settings/usage and keep going.",
        ];
        for text in quota {
            assert!(super::quota_wording(text), "{text}");
        }
        let not_quota = [
            "Rate limit reached for requests",
            "Too many requests, slow down",
            "Server overloaded",
            "quota",
            "Invalid API key",
            "Number of request tokens has exceeded your per-minute rate limit; see the response headers for current usage.",
            "This request would exceed your organization's rate limit of 50,000 input tokens per minute",
            "",
        ];
        for text in not_quota {
            assert!(!super::quota_wording(text), "{text}");
        }
    }

    #[test]
    fn context_wording() {
        let context = [
            "This model's maximum context length is 8192 tokens",
            "context_length_exceeded",
            "The input exceeds the context window of this model",
            "prompt is too long: 210000 tokens > 200000 maximum",
            "Messages are too long",
            "Request exceeds maximum length",
            "too many input tokens",
        ];
        for text in context {
            assert!(super::context_wording(text), "{text}");
        }
        let not_context = [
            "max_tokens is too large: 10000",
            "Invalid value for 'temperature'",
            "messages[0].role is required",
            "",
        ];
        for text in not_context {
            assert!(!super::context_wording(text), "{text}");
        }
    }

    #[test]
    fn the_message_is_the_bodys_own_or_names_provider_and_status() {
        let cases = [
            (r#"{"error":{"message":"  Keep   spacing  "}}"#, "  Keep   spacing  "),
            (r#"{"error":"plain string"}"#, "plain string"),
            (r#"{"object":"error","message":"top level"}"#, "top level"),
            (r#"{"error":{"message":""}}"#, "DeepSeek API error (HTTP 503)"),
            (r#"{"error":{"code":503}}"#, "DeepSeek API error (HTTP 503)"),
            ("<html>502 Bad Gateway</html>", "DeepSeek API error (HTTP 503)"),
            ("", "DeepSeek API error (HTTP 503)"),
        ];
        for (body, message) in cases {
            let f = http_failure("DeepSeek", 503, &HeaderMap::new(), body, SystemTime::UNIX_EPOCH);
            assert_eq!((f.message(), f.status(), f.code()), (message, Some(503), "SERVER"));
        }
    }

    #[test]
    fn headers_decorate_the_failure() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("2"));
        headers.insert("x-deepseek-request-id", HeaderValue::from_static("ds-7"));
        let f = http_failure("DeepSeek", 429, &headers, "", SystemTime::UNIX_EPOCH);
        assert_eq!(f.code(), "RATE_LIMIT");
        assert_eq!(f.provider_retry_after_ms(), Some(2000.0));
        assert_eq!(f.request_id(), Some("ds-7"));
        let bare = http_failure("DeepSeek", 429, &HeaderMap::new(), "", SystemTime::UNIX_EPOCH);
        assert_eq!((bare.provider_retry_after_ms(), bare.request_id()), (None, None));
    }

    #[test]
    fn in_stream_errors_route_on_their_status_or_their_wording() {
        let cases = [
            (json!({"message": "Rate limit reached", "code": 429}), "RATE_LIMIT", Some(429)),
            (json!({"message": "overloaded", "status": 503}), "SERVER", Some(503)),
            (json!({"message": "upstream timed out", "code": 408}), "TIMEOUT", Some(408)),
            (json!({"message": "conflict", "status": 409}), "SERVER", Some(409)),
            (json!({"message": "insufficient_quota", "code": 429}), "QUOTA", Some(429)),
            (json!({"message": "Rate limit reached", "type": "requests"}), "RATE_LIMIT", None),
            (json!({"message": "boom", "type": "server_error"}), "SERVER", None),
            (json!({"message": "Insufficient Balance"}), "QUOTA", None),
            (json!({"message": "maximum context length is 8k"}), "CONTEXT_WINDOW_EXCEEDED", None),
            (json!({"message": "something odd", "code": "weird"}), "PROVIDER_ERROR", None),
            (json!("a plain string error"), "PROVIDER_ERROR", None),
            (json!({"code": 9999}), "PROVIDER_ERROR", None),
        ];
        for (error, code, status) in cases {
            let f = stream_error("DeepSeek", &error);
            assert_eq!((f.code(), f.status()), (code, status), "{error}");
        }
        assert_eq!(stream_error("X", &json!({"message": "m"})).message(), "m");
        assert_eq!(stream_error("X", &json!("s")).message(), "s");
        assert_eq!(stream_error("X", &json!({})).message(), "X stream error");
    }

    proptest::proptest! {
        #[test]
        fn any_status_headers_and_body_give_a_valid_failure(
            status in 100u16..=999,
            body in ".{0,200}",
            after in "[ -~]{0,12}",
            id in "[ -~]{0,12}",
            json_message in proptest::option::of(".{0,40}"),
        ) {
            let mut headers = HeaderMap::new();
            headers.insert("retry-after", HeaderValue::from_str(&after).unwrap());
            headers.insert("x-request-id", HeaderValue::from_str(&id).unwrap());
            let body = match json_message {
                Some(message) => json!({"error": {"message": message}}).to_string(),
                None => body,
            };
            let f = http_failure("P", status, &headers, &body, SystemTime::now());
            // Valid by construction, and it survives the log's round trip.
            let back: Failure = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
            proptest::prop_assert_eq!(&back, &f);
            proptest::prop_assert_eq!(f.status(), (status <= 599).then_some(status));
            proptest::prop_assert!(!f.code().is_empty() && !f.message().is_empty());
            let e = stream_error("P", &serde_json::from_str(&body).unwrap_or(Value::String(body.clone())));
            proptest::prop_assert!(!e.code().is_empty() && !e.message().is_empty());
        }
    }

    #[test]
    fn typed_failures_are_never_empty() {
        assert_eq!(typed("SERVER", " ").message(), "no message");
        assert_eq!(typed("", "m").code(), "UNKNOWN");
        assert_eq!(
            dead_air("DeepSeek", Duration::from_secs(300)).message(),
            "DeepSeek sent nothing for 300 s"
        );
        let closed = stream_closed("DeepSeek", "[DONE]");
        assert_eq!(
            (closed.code(), closed.message()),
            ("STREAM_CLOSED", "DeepSeek closed the stream before [DONE]")
        );
    }
}
