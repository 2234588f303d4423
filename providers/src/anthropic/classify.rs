//! Anthropic's failures: which code an error gets, and the failure it becomes. Pure functions of
//! the status (none for an in-stream `error` event), the headers, the body and "now", so every
//! row is a test case over a recorded body.
//!
//! An Anthropic error body is `{"type":"error","error":{"type":T,"message":M},"request_id":R}`.
//! The code, first rule that applies ([`code`]):
//!
//! | when | code |
//! |---|---|
//! | status 401 or 403, or `T` is `authentication_error` / `permission_error` | `AUTH` |
//! | status 402, or `T` is `billing_error` | `QUOTA` |
//! | the body says a credit or spend limit is exhausted ("credit balance is too low", "reached your … usage limits", `enforced_spend_limit_reached`) | `QUOTA` (also under `rate_limit_error` or `invalid_request_error`) |
//! | `T` is `rate_limit_error` | `RATE_LIMIT` |
//! | `T` is `overloaded_error` or `api_error` | `SERVER` |
//! | `T` is `invalid_request_error`, the body says the prompt is too long or the context exceeded | `CONTEXT_WINDOW_EXCEEDED` |
//! | `T` is `invalid_request_error` or `request_too_large` | `INVALID_REQUEST` |
//! | `T` is `not_found_error` and `M` starts with `model:` (an unknown model) | `INVALID_MODEL` |
//! | any other, with a status | the shared HTTP table: 408 → `TIMEOUT`, 409 → `SERVER`, 429 → `RATE_LIMIT`, 5xx and 529 → `SERVER`, … ([`classify::http_code`]) |
//! | any other, in a stream | `timeout_error` → `TIMEOUT`, `conflict_error` → `SERVER`, else the shared wording rules, else `PROVIDER_ERROR` |
//!
//! The message is `M` verbatim, else "Anthropic API error (HTTP n)". The request id is the
//! `request-id` header (else `x-request-id`, else the body's `request_id`); the suggested delay
//! is `retry-after` (or `retry-after-ms`) as for every adapter.

use std::time::SystemTime;

use rein_runtime::failure::{self, Failure};
use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::classify::{self, typed};
use crate::response_headers;

/// The headers a request id is read from, in order.
const REQUEST_ID_HEADERS: [&str; 2] = ["request-id", "x-request-id"];

/// The code of an Anthropic error: `status` (none in a stream), the error object's `type`, and
/// the body's text (for its wording). See the module docs.
pub fn code(status: Option<u16>, error_type: Option<&str>, body: &str) -> String {
    let code = match (status, error_type) {
        (Some(401 | 403), _) | (_, Some("authentication_error" | "permission_error")) => {
            failure::AUTH
        }
        (Some(402), _) | (_, Some("billing_error")) => failure::QUOTA,
        _ if classify::quota_wording(body) => failure::QUOTA,
        (_, Some("rate_limit_error")) => failure::RATE_LIMIT,
        (_, Some("overloaded_error" | "api_error")) => failure::SERVER,
        (_, Some("invalid_request_error")) if classify::context_wording(body) => {
            failure::CONTEXT_WINDOW_EXCEEDED
        }
        (_, Some("invalid_request_error" | "request_too_large")) => failure::INVALID_REQUEST,
        (_, Some("not_found_error")) if message_of(body).is_some_and(unknown_model) => {
            failure::INVALID_MODEL
        }
        (Some(status), _) => return classify::http_code(status, body),
        (None, Some("timeout_error")) => failure::TIMEOUT,
        (None, Some("conflict_error")) => failure::SERVER,
        (None, _) => return classify::stream_code(&wording(body)),
    };
    code.to_owned()
}

/// The failure of an HTTP error response: its code, message, status, request id and suggested
/// delay.
pub fn http_failure(
    label: &str,
    status: u16,
    headers: &HeaderMap,
    body: &str,
    now: SystemTime,
) -> Failure {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    let error_type = error.and_then(|e| e.get("type")).and_then(Value::as_str);
    let message = message_of(body).unwrap_or_else(|| format!("{label} API error (HTTP {status})"));
    let failure = typed(&code(Some(status), error_type, body), message);
    let failure = failure.clone().with_status(status).unwrap_or(failure);
    let body_id = parsed
        .as_ref()
        .and_then(|v| v.get("request_id"))
        .and_then(Value::as_str)
        .filter(|id| !id.trim().is_empty())
        .map(str::to_owned);
    let failure = match request_id(headers).or(body_id) {
        Some(id) => failure.clone().with_request_id(id).unwrap_or(failure),
        None => failure,
    };
    match response_headers::retry_after_ms(headers, now) {
        Some(ms) => failure.clone().with_retry_after_ms(ms).unwrap_or(failure),
        None => failure,
    }
}

/// The failure of an in-stream `error` event (`error` is the value of its `error` field), or of
/// a 2xx JSON error body: no status.
pub fn stream_error(label: &str, error: &Value) -> Failure {
    let error_type = error.get("type").and_then(Value::as_str);
    let body = serde_json::json!({ "error": error }).to_string();
    let message = message_of(&body).unwrap_or_else(|| format!("{label} stream error"));
    typed(&code(None, error_type, &body), message)
}

/// The provider's request id in a response's headers: `request-id`, else `x-request-id`.
pub fn request_id(headers: &HeaderMap) -> Option<String> {
    response_headers::request_id_of(headers, &REQUEST_ID_HEADERS)
}

/// `error.message` of a body, when non-blank.
fn message_of(body: &str) -> Option<String> {
    let value: Value = serde_json::from_str(body).ok()?;
    let message = value.get("error")?.get("message")?.as_str()?;
    (!message.trim().is_empty()).then(|| message.to_owned())
}

/// Whether a `not_found_error` message names the model (`model: claude-nope`).
fn unknown_model(message: String) -> bool {
    message.trim_start().starts_with("model:")
}

/// The error object of a body, for the shared wording rules (the body as a string when it is not
/// JSON).
fn wording(body: &str) -> Value {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v.get("error").cloned())
        .unwrap_or_else(|| Value::String(body.to_owned()))
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;
    use serde_json::json;

    use super::*;

    /// An Anthropic error body.
    fn body(error_type: &str, message: &str) -> String {
        json!({"type": "error", "error": {"type": error_type, "message": message},
               "request_id": "req_body_1"})
        .to_string()
    }

    /// Recorded bodies (the API's documented examples and errors users reported), each with its
    /// status and the code it gets.
    #[test]
    fn recorded_http_errors() {
        let spend_cap = json!({"type": "error", "error": {"type": "rate_limit_error",
            "message": "You have reached your API usage limits: your organization has crossed its monthly API usage threshold, set based on your organization's API tier. You will regain access on 2026-09-01 at 00:00 UTC.",
            "details": {"error_code": "enforced_spend_limit_reached"}},
            "request_id": "req_018EeWyXxfu5pfWkrYcMdjWG"})
        .to_string();
        let cases: Vec<(u16, String, &str)> = vec![
            (529, body("overloaded_error", "Overloaded"), "SERVER"),
            (529, String::new(), "SERVER"),
            (500, body("api_error", "Internal server error"), "SERVER"),
            (503, "<html>upstream connect error</html>".into(), "SERVER"),
            (504, body("timeout_error", "Request timed out"), "SERVER"),
            (
                429,
                body(
                    "rate_limit_error",
                    "Number of request tokens has exceeded your per-minute rate limit (https://docs.claude.com/en/api/rate-limits); see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later.",
                ),
                "RATE_LIMIT",
            ),
            (429, String::new(), "RATE_LIMIT"),
            (429, spend_cap, "QUOTA"),
            (
                400,
                body(
                    "invalid_request_error",
                    "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.",
                ),
                "QUOTA",
            ),
            (
                400,
                body(
                    "invalid_request_error",
                    "You have reached your specified workspace API usage limits. You will regain access on 2026-06-01 at 00:00 UTC.",
                ),
                "QUOTA",
            ),
            (402, body("billing_error", "There is an issue with your payment method."), "QUOTA"),
            (401, body("authentication_error", "invalid x-api-key"), "AUTH"),
            (
                403,
                body(
                    "permission_error",
                    "Your API key does not have permission to use the specified resource.",
                ),
                "AUTH",
            ),
            (401, String::new(), "AUTH"),
            (
                400,
                body("invalid_request_error", "prompt is too long: 215342 tokens > 200000 maximum"),
                "CONTEXT_WINDOW_EXCEEDED",
            ),
            (
                400,
                body(
                    "invalid_request_error",
                    "input length and `max_tokens` exceed context limit: 197202 + 21333 > 200000, decrease input length or `max_tokens` and try again",
                ),
                "CONTEXT_WINDOW_EXCEEDED",
            ),
            (
                400,
                body(
                    "invalid_request_error",
                    "max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens for claude-haiku-4-5-20251001",
                ),
                "INVALID_REQUEST",
            ),
            (400, body("invalid_request_error", "temperature: range: 0..1"), "INVALID_REQUEST"),
            (
                413,
                body("request_too_large", "Request exceeds the maximum allowed number of bytes."),
                "INVALID_REQUEST",
            ),
            (404, body("not_found_error", "model: claude-nope"), "INVALID_MODEL"),
            (404, body("not_found_error", "Not Found"), "HTTP_404"),
            (408, body("timeout_error", "Request timed out"), "TIMEOUT"),
            (408, String::new(), "TIMEOUT"),
            (409, body("conflict_error", "Conflict"), "SERVER"),
            (409, String::new(), "SERVER"),
            (418, "teapot".into(), "HTTP_418"),
        ];
        for (status, text, expected) in cases {
            let f =
                http_failure("Anthropic", status, &HeaderMap::new(), &text, SystemTime::UNIX_EPOCH);
            assert_eq!(f.code(), expected, "{status} {text}");
            assert_eq!(f.status(), Some(status));
        }
    }

    #[test]
    fn the_message_the_request_id_and_the_delay() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("12"));
        headers.insert("request-id", HeaderValue::from_static("req_header_1"));
        let text = body("rate_limit_error", "Rate limited");
        let f = http_failure("Anthropic", 429, &headers, &text, SystemTime::UNIX_EPOCH);
        assert_eq!(
            (f.code(), f.message(), f.request_id(), f.provider_retry_after_ms()),
            ("RATE_LIMIT", "Rate limited", Some("req_header_1"), Some(12_000.0))
        );
        // Without the header, the body's request id; without a message, one naming the status.
        let f = http_failure(
            "Anthropic",
            529,
            &HeaderMap::new(),
            &body("overloaded_error", " "),
            SystemTime::UNIX_EPOCH,
        );
        assert_eq!(
            (f.message(), f.request_id(), f.provider_retry_after_ms()),
            ("Anthropic API error (HTTP 529)", Some("req_body_1"), None)
        );
        let mut other = HeaderMap::new();
        other.insert("x-request-id", HeaderValue::from_static("x-1"));
        assert_eq!(request_id(&other).as_deref(), Some("x-1"));
        other.insert("request-id", HeaderValue::from_static("r-1"));
        assert_eq!(request_id(&other).as_deref(), Some("r-1"), "request-id first");
    }

    #[test]
    fn in_stream_error_events() {
        let cases = [
            (json!({"type": "overloaded_error", "message": "Overloaded"}), "SERVER", "Overloaded"),
            (
                json!({"type": "api_error", "message": "Internal server error"}),
                "SERVER",
                "Internal server error",
            ),
            (
                json!({"type": "rate_limit_error", "message": "Rate limited"}),
                "RATE_LIMIT",
                "Rate limited",
            ),
            (json!({"type": "timeout_error", "message": "Timed out"}), "TIMEOUT", "Timed out"),
            (
                json!({"type": "invalid_request_error", "message": "prompt is too long: 300000 tokens > 200000 maximum"}),
                "CONTEXT_WINDOW_EXCEEDED",
                "prompt is too long: 300000 tokens > 200000 maximum",
            ),
            (
                json!({"type": "invalid_request_error", "message": "Your credit balance is too low to access the Anthropic API."}),
                "QUOTA",
                "Your credit balance is too low to access the Anthropic API.",
            ),
            (
                json!({"type": "authentication_error", "message": "invalid x-api-key"}),
                "AUTH",
                "invalid x-api-key",
            ),
            (
                json!({"type": "something_new", "message": "the server is overloaded"}),
                "SERVER",
                "the server is overloaded",
            ),
            (json!({"type": "something_new", "message": "odd"}), "PROVIDER_ERROR", "odd"),
            (json!({}), "PROVIDER_ERROR", "Anthropic stream error"),
            (json!("a plain string"), "PROVIDER_ERROR", "Anthropic stream error"),
        ];
        for (error, code, message) in cases {
            let f = stream_error("Anthropic", &error);
            assert_eq!((f.code(), f.message(), f.status()), (code, message, None), "{error}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_body_gives_a_valid_failure(
            status in 100u16..=999,
            error_type in proptest::option::of("[a-z_]{0,24}"),
            message in proptest::option::of(".{0,40}"),
            raw in ".{0,80}",
        ) {
            let text = match (&error_type, &message) {
                (None, None) => raw,
                _ => json!({"type": "error", "error": {"type": error_type, "message": message}}).to_string(),
            };
            let f = http_failure("Anthropic", status, &HeaderMap::new(), &text, SystemTime::now());
            let back: Failure = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
            proptest::prop_assert_eq!(&back, &f);
            proptest::prop_assert!(!f.code().is_empty() && !f.message().is_empty());
            let value = serde_json::from_str(&text).unwrap_or(Value::String(text.clone()));
            let e = stream_error("Anthropic", &value);
            proptest::prop_assert!(!e.code().is_empty() && !e.message().is_empty());
        }
    }
}
