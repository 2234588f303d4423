//! A failed provider attempt, as data (`docs/runtime-semantics.md`, "Failures").
//!
//! # Why validated at construction
//!
//! A `Failure` travels from an adapter through the session log, the waterfall and every plugin.
//! If an invalid one could exist, every reader would have to re-check it. So the only ways to
//! build one — [`Failure::new`] plus the `with_*` setters, and deserialization — enforce the rules
//! of its fields, and the fields are private. A log line holding an invalid failure does not
//! parse: the error names the field (`failure.status: …`).

use serde::{Deserialize, Serialize};

use crate::json_number;

/// Rate limited by the provider.
pub const RATE_LIMIT: &str = "RATE_LIMIT";
/// The provider reported a server error.
pub const SERVER: &str = "SERVER";
/// The request timed out.
pub const TIMEOUT: &str = "TIMEOUT";
/// The connection failed.
pub const TRANSPORT: &str = "TRANSPORT";
/// The provider answered nothing.
pub const EMPTY_RESPONSE: &str = "EMPTY_RESPONSE";
/// The stream closed before it finished.
pub const STREAM_CLOSED: &str = "STREAM_CLOSED";
/// Authentication failed.
pub const AUTH: &str = "AUTH";
/// No credential was configured.
pub const MISSING_CREDENTIAL: &str = "MISSING_CREDENTIAL";
/// The credential was refused.
pub const INVALID_CREDENTIAL: &str = "INVALID_CREDENTIAL";
/// A quota was exhausted.
pub const QUOTA: &str = "QUOTA";
/// The account's quota was exhausted.
pub const ACCOUNT_QUOTA: &str = "ACCOUNT_QUOTA";
/// The provider refused the request as malformed.
pub const INVALID_REQUEST: &str = "INVALID_REQUEST";
/// The model does not exist.
pub const INVALID_MODEL: &str = "INVALID_MODEL";
/// The route is misconfigured.
pub const INVALID_CONFIG: &str = "INVALID_CONFIG";
/// No adapter served the request (the failure has no effective retry policy).
pub const NO_ADAPTER: &str = "NO_ADAPTER";
/// The request exceeded the model's context window.
pub const CONTEXT_WINDOW_EXCEEDED: &str = "CONTEXT_WINDOW_EXCEEDED";
/// Images must be offloaded before the request can be sent.
pub const IMAGE_OFFLOAD_REQUIRED: &str = "IMAGE_OFFLOAD_REQUIRED";
/// An adapter's catch-all.
pub const PROVIDER_ERROR: &str = "PROVIDER_ERROR";
/// The adapter failed with an error that was not a typed failure.
pub const UNKNOWN: &str = "UNKNOWN";
/// The request was cancelled.
pub const ABORTED: &str = "ABORTED";
/// A scripted provider ran out of script (never offered to the waterfall).
pub const SCRIPT_EXHAUSTED: &str = "SCRIPT_EXHAUSTED";
/// The route's circuit breaker is open: the attempt failed at once and no request was sent
/// (never retried on the same route; `fallback` switches on it at once).
pub const CIRCUIT_OPEN: &str = "CIRCUIT_OPEN";

/// Every known code (besides `HTTP_<status>`).
pub const KNOWN_CODES: &[&str] = &[
    RATE_LIMIT,
    SERVER,
    TIMEOUT,
    TRANSPORT,
    EMPTY_RESPONSE,
    STREAM_CLOSED,
    AUTH,
    MISSING_CREDENTIAL,
    INVALID_CREDENTIAL,
    QUOTA,
    ACCOUNT_QUOTA,
    INVALID_REQUEST,
    INVALID_MODEL,
    INVALID_CONFIG,
    NO_ADAPTER,
    CONTEXT_WINDOW_EXCEEDED,
    IMAGE_OFFLOAD_REQUIRED,
    PROVIDER_ERROR,
    UNKNOWN,
    ABORTED,
    CIRCUIT_OPEN,
];

/// Codes that `auto-retry` never retries, whatever its configuration (the hard floor). They live
/// here, not in the plugin, because the invariant checker enforces them too. `CIRCUIT_OPEN` is
/// also `llm-retry`'s hard floor: a route whose breaker is open is never retried.
pub const HARD_FLOOR: &[&str] = &[
    AUTH,
    MISSING_CREDENTIAL,
    INVALID_CREDENTIAL,
    NO_ADAPTER,
    INVALID_MODEL,
    INVALID_CONFIG,
    CONTEXT_WINDOW_EXCEEDED,
    IMAGE_OFFLOAD_REQUIRED,
    ABORTED,
    CIRCUIT_OPEN,
];

/// The code for an HTTP status no other code covers: `HTTP_<status>`.
pub fn http_code(status: u16) -> String {
    format!("HTTP_{status}")
}

/// Why a failure is invalid. The message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FailureError {
    /// `message` was empty.
    #[error("failure.message: must be a non-empty string")]
    EmptyMessage,
    /// `code` was empty.
    #[error("failure.code: must be a non-empty string")]
    EmptyCode,
    /// `status` was not an integer in 100..=599.
    #[error("failure.status: must be an integer HTTP status in 100..=599, got {0}")]
    Status(String),
    /// `providerRetryAfterMs` was not finite and positive.
    #[error("failure.providerRetryAfterMs: must be a finite number > 0, got {0}")]
    RetryAfter(String),
    /// `requestId` was empty.
    #[error("failure.requestId: must be a non-empty string when present")]
    EmptyRequestId,
}

/// A failed provider attempt. Always valid: see the module docs.
///
/// ```
/// use rein_event::failure::Failure;
///
/// let failure = Failure::new("RATE_LIMIT", "slow down")?
///     .with_status(429)?
///     .with_retry_after_ms(2000.0)?;
/// assert_eq!((failure.code(), failure.status()), ("RATE_LIMIT", Some(429)));
/// assert_eq!(failure.provider_retry_after_ms(), Some(2000.0));
///
/// // An invalid failure cannot be built: the error names the field.
/// let error = Failure::new("RATE_LIMIT", "x")?.with_status(42).unwrap_err();
/// assert!(error.to_string().starts_with("failure.status:"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawFailure", into = "RawFailure")]
pub struct Failure {
    code: String,
    message: String,
    status: Option<u16>,
    provider_retry_after_ms: Option<f64>,
    request_id: Option<String>,
}

impl Failure {
    /// A failure with a code and the provider's message, verbatim.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Result<Self, FailureError> {
        let code = code.into();
        let message = message.into();
        if code.is_empty() {
            return Err(FailureError::EmptyCode);
        }
        if message.is_empty() {
            return Err(FailureError::EmptyMessage);
        }
        Ok(Self { code, message, status: None, provider_retry_after_ms: None, request_id: None })
    }

    /// Sets the HTTP status (100..=599).
    pub fn with_status(mut self, status: u16) -> Result<Self, FailureError> {
        if !(100..=599).contains(&status) {
            return Err(FailureError::Status(status.to_string()));
        }
        self.status = Some(status);
        Ok(self)
    }

    /// Sets the server-suggested delay (finite, > 0).
    pub fn with_retry_after_ms(mut self, ms: f64) -> Result<Self, FailureError> {
        if !(ms.is_finite() && ms > 0.0) {
            return Err(FailureError::RetryAfter(ms.to_string()));
        }
        self.provider_retry_after_ms = Some(ms);
        Ok(self)
    }

    /// Sets the provider's request id (non-empty).
    pub fn with_request_id(mut self, id: impl Into<String>) -> Result<Self, FailureError> {
        let id = id.into();
        if id.is_empty() {
            return Err(FailureError::EmptyRequestId);
        }
        self.request_id = Some(id);
        Ok(self)
    }

    /// The failure for a cancelled request.
    pub fn aborted() -> Self {
        Self::internal(ABORTED, "the request was cancelled")
    }

    /// A failure the runtime (or an adapter) produces itself, never failing: an empty `code`
    /// becomes [`UNKNOWN`] and an empty `message` becomes `"(no message)"`, so the code a caller
    /// meant is kept and nothing has to fall back to another failure (least of all [`ABORTED`],
    /// which means the user cancelled).
    pub fn internal(code: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        Self {
            code: if code.is_empty() { UNKNOWN.to_owned() } else { code.to_owned() },
            message: if message.is_empty() { "(no message)".to_owned() } else { message },
            status: None,
            provider_retry_after_ms: None,
            request_id: None,
        }
    }

    /// The failure code the runtime routes on.
    pub fn code(&self) -> &str {
        &self.code
    }

    /// The provider's message, verbatim.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The HTTP status, if any.
    pub fn status(&self) -> Option<u16> {
        self.status
    }

    /// The server-suggested delay, if any.
    pub fn provider_retry_after_ms(&self) -> Option<f64> {
        self.provider_retry_after_ms
    }

    /// The provider's request id, if any.
    pub fn request_id(&self) -> Option<&str> {
        self.request_id.as_deref()
    }
}

/// The wire form, checked by `TryFrom`. Numbers stay `serde_json::Number` so that a status of
/// `429.5` is reported by the field rule, not as a type error.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawFailure {
    code: String,
    message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<serde_json::Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    provider_retry_after_ms: Option<serde_json::Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    request_id: Option<String>,
}

impl TryFrom<RawFailure> for Failure {
    type Error = FailureError;

    fn try_from(raw: RawFailure) -> Result<Self, Self::Error> {
        let mut failure = Failure::new(raw.code, raw.message)?;
        if let Some(status) = raw.status {
            let valid = status
                .as_u64()
                .and_then(|s| u16::try_from(s).ok())
                .ok_or_else(|| FailureError::Status(status.to_string()))?;
            failure = failure.with_status(valid)?;
        }
        if let Some(ms) = raw.provider_retry_after_ms {
            let value = ms.as_f64().ok_or_else(|| FailureError::RetryAfter(ms.to_string()))?;
            failure = failure.with_retry_after_ms(value)?;
        }
        if let Some(id) = raw.request_id {
            failure = failure.with_request_id(id)?;
        }
        Ok(failure)
    }
}

impl From<Failure> for RawFailure {
    fn from(f: Failure) -> Self {
        RawFailure {
            code: f.code,
            message: f.message,
            status: f.status.map(serde_json::Number::from),
            provider_retry_after_ms: f.provider_retry_after_ms.map(json_number::number),
            request_id: f.request_id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<Failure, String> {
        serde_json::from_str::<Failure>(json).map_err(|e| e.to_string())
    }

    #[test]
    fn an_internal_failure_never_fails_and_never_becomes_aborted() {
        let cases = [
            ("RUNTIME_ERROR", "log refused", "RUNTIME_ERROR", "log refused"),
            ("RUNTIME_ERROR", "", "RUNTIME_ERROR", "(no message)"),
            ("", "m", UNKNOWN, "m"),
            ("", "", UNKNOWN, "(no message)"),
        ];
        for (code, message, want_code, want_message) in cases {
            let failure = Failure::internal(code, message);
            assert_eq!((failure.code(), failure.message()), (want_code, want_message));
            assert_ne!(failure.code(), ABORTED);
            // What the runtime writes reads back as a valid failure.
            let json = serde_json::to_string(&failure).unwrap();
            assert_eq!(parse(&json).unwrap(), failure);
        }
    }

    #[test]
    fn invalid_failures_are_rejected_naming_the_field() {
        let cases = [
            (r#"{"code":"SERVER","message":""}"#, "failure.message"),
            (r#"{"code":"","message":"m"}"#, "failure.code"),
            (r#"{"code":"SERVER","message":"m","status":99}"#, "failure.status"),
            (r#"{"code":"SERVER","message":"m","status":600}"#, "failure.status"),
            (r#"{"code":"SERVER","message":"m","status":429.5}"#, "failure.status"),
            (r#"{"code":"SERVER","message":"m","status":-1}"#, "failure.status"),
            (
                r#"{"code":"SERVER","message":"m","providerRetryAfterMs":0}"#,
                "failure.providerRetryAfterMs",
            ),
            (
                r#"{"code":"SERVER","message":"m","providerRetryAfterMs":-5}"#,
                "failure.providerRetryAfterMs",
            ),
            (r#"{"code":"SERVER","message":"m","requestId":""}"#, "failure.requestId"),
            (r#"{"code":"SERVER","message":"m","typo":1}"#, "unknown field"),
            (r#"{"message":"m"}"#, "missing field `code`"),
        ];
        for (json, expected) in cases {
            let err = parse(json).expect_err(json);
            assert!(err.contains(expected), "{json}: {err} should mention {expected}");
        }
    }

    #[test]
    fn valid_failures_round_trip_losslessly() {
        let cases = [
            r#"{"code":"SERVER","message":"busy"}"#,
            r#"{"code":"RATE_LIMIT","message":"slow down","status":429,"providerRetryAfterMs":2000,"requestId":"r-1"}"#,
            r#"{"code":"HTTP_418","message":"teapot","status":418,"providerRetryAfterMs":0.5}"#,
            r#"{"code":"SERVER","message":"m","status":100}"#,
            r#"{"code":"SERVER","message":"m","status":599}"#,
        ];
        for json in cases {
            let failure = parse(json).expect(json);
            assert_eq!(serde_json::to_string(&failure).unwrap(), json);
        }
    }

    #[test]
    fn builders_enforce_the_same_rules() {
        assert_eq!(Failure::new("X", "").unwrap_err(), FailureError::EmptyMessage);
        let f = Failure::new("X", "m").unwrap();
        assert!(f.clone().with_status(600).is_err());
        assert!(f.clone().with_retry_after_ms(f64::INFINITY).is_err());
        assert!(f.clone().with_retry_after_ms(f64::NAN).is_err());
        assert!(f.clone().with_request_id("").is_err());
        let ok = f.with_status(503).unwrap().with_retry_after_ms(1.5).unwrap();
        assert_eq!(ok.status(), Some(503));
        assert_eq!(ok.provider_retry_after_ms(), Some(1.5));
        assert_eq!(http_code(418), "HTTP_418");
    }
}
