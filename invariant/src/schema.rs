//! Reading one line of a log leniently: an [`Envelope`], or the rule the line breaks.
//!
//! A reader of logs (`rein check`) must not stop at the first bad line, and must say *why* a line
//! is bad in the vocabulary of the rules. A line is first read as JSON (else
//! [`Rule::CorruptLine`]), then as a typed event (else [`Rule::EventSchema`], naming the `seq` and
//! `type` when they are readable). An `llm/retry` whose `failure`, `retry`, `maxRetries` or
//! `delayMs` cannot even be held by the typed event breaks the matching retry rule instead, so
//! `"retry": -1` is reported as `retry-number-valid` like `"retry": 0` is.
//!
//! Pure: text in, value out; the caller does the I/O.

use std::fmt;

use rein_event::event::{Envelope, Event};
use rein_event::failure::Failure;
use rein_event::quote;
use serde::Deserialize;
use serde_json::Value;

use crate::catalogue::Rule;

/// Why a line of a log is not an event.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LineError {
    /// The line is not JSON ([`Rule::CorruptLine`]).
    Corrupt {
        /// The JSON parser's message.
        message: String,
    },
    /// The line is JSON but not a valid event.
    Schema {
        /// Its `seq`, when readable.
        seq: Option<u64>,
        /// Its `type`, when readable.
        kind: Option<String>,
        /// The rule it breaks.
        rule: Rule,
        /// What is wrong (the deserializer's message, which names the field).
        message: String,
    },
}

impl LineError {
    /// The rule the line breaks.
    pub fn rule(&self) -> Rule {
        match self {
            LineError::Corrupt { .. } => Rule::CorruptLine,
            LineError::Schema { rule, .. } => *rule,
        }
    }

    /// The line's `seq`, when readable.
    pub fn seq(&self) -> Option<u64> {
        match self {
            LineError::Corrupt { .. } => None,
            LineError::Schema { seq, .. } => *seq,
        }
    }
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LineError::Corrupt { message } => {
                let message = quote::message(message);
                write!(f, "corrupt line, not JSON: {message} [{}]", Rule::CorruptLine)
            }
            LineError::Schema { seq, kind, rule, message } => {
                // The type is the line's own: a long one is quoted and cut.
                let kind = kind.as_deref().map(|k| match k.chars().count() <= quote::VALUE_CHARS {
                    true => k.to_owned(),
                    false => quote::value(k),
                });
                match (kind, seq) {
                    (Some(kind), Some(seq)) => write!(f, "{kind} seq {seq}: ")?,
                    (Some(kind), None) => write!(f, "{kind} (no readable seq): ")?,
                    (None, Some(seq)) => write!(f, "event seq {seq}: ")?,
                    (None, None) => write!(f, "not an event: ")?,
                }
                write!(f, "{} [{rule}]", quote::message(message))
            }
        }
    }
}

impl std::error::Error for LineError {}

/// Reads one line (without its newline) as an event. Bytes that are not UTF-8 make a corrupt
/// line, like any other text that is not JSON.
pub fn parse_line(line: impl AsRef<[u8]>) -> Result<Envelope, LineError> {
    let line = line.as_ref();
    // The fast path: a valid line is parsed once.
    if let Ok(envelope) = serde_json::from_slice::<Envelope>(line) {
        return Ok(envelope);
    }
    let value: Value =
        serde_json::from_slice(line).map_err(|e| LineError::Corrupt { message: e.to_string() })?;
    parse_value(&value)
}

/// Reads a JSON value as an event.
pub fn parse_value(value: &Value) -> Result<Envelope, LineError> {
    Envelope::deserialize(value).map_err(|e| classify(value, e.to_string()))
}

fn classify(value: &Value, message: String) -> LineError {
    let seq = value.get("seq").and_then(Value::as_u64);
    let kind = value.get("type").and_then(Value::as_str).map(str::to_owned);
    let (rule, message) = match kind.as_deref() {
        Some(k) if !Event::KINDS.contains(&k) => {
            (Rule::EventSchema, format!("unknown event type {}", quote::value(k)))
        }
        Some("llm/retry") => {
            value.get("data").and_then(retry_rule).unwrap_or((Rule::EventSchema, message))
        }
        _ => (Rule::EventSchema, message),
    };
    LineError::Schema { seq, kind, rule, message }
}

/// The retry rule an `llm/retry`'s data breaks so badly that the typed event cannot hold it.
fn retry_rule(data: &Value) -> Option<(Rule, String)> {
    if let Some(failure) = data.get("failure")
        && let Err(e) = Failure::deserialize(failure)
    {
        return Some((Rule::RetryFailureValid, e.to_string()));
    }
    let not_a_count = |field: &str| data.get(field).filter(|v| !v.is_null() && !v.is_u64());
    if let Some(retry) = not_a_count("retry") {
        return Some((
            Rule::RetryNumberValid,
            format!("retry {retry} must be a safe integer >= 1"),
        ));
    }
    if let Some(max) = not_a_count("maxRetries") {
        return Some((
            Rule::RetryMaxRetriesValid,
            format!("maxRetries {max} must be a safe integer >= 1"),
        ));
    }
    if let Some(delay) = data.get("delayMs").filter(|v| !v.is_number()) {
        return Some((Rule::RetryDelayValid, format!("delayMs {delay} must be a finite number")));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const RETRY: &str = r#"{"seq":4,"time":9,"type":"llm/retry","data":{"retryId":"id","turn":1,"step":1,"provider":"mock","plugin":"llm-retry","mode":"normal","policyKey":"k","retry":1,"maxRetries":2,"delayMs":500,"failure":{"code":"SERVER","message":"down"}}}"#;

    fn err(line: &str) -> LineError {
        parse_line(line).expect_err(line)
    }

    #[test]
    fn a_valid_line_parses() {
        let envelope = parse_line(RETRY).unwrap();
        assert_eq!((envelope.seq, envelope.kind()), (4, "llm/retry"));
    }

    #[test]
    fn bad_lines_name_their_rule_seq_type_and_field() {
        let cases = [
            ("{\"seq\":4,", Rule::CorruptLine, "corrupt line, not JSON"),
            ("", Rule::CorruptLine, "corrupt line"),
            ("42", Rule::EventSchema, "not an event"),
            (
                r#"{"seq":3,"time":1,"type":"nope/nope","data":{}}"#,
                Rule::EventSchema,
                "nope/nope seq 3: unknown event type \"nope/nope\"",
            ),
            (
                r#"{"seq":3,"time":1,"type":"turn/start","data":{}}"#,
                Rule::EventSchema,
                "turn/start seq 3: missing field `turn`",
            ),
            (
                r#"{"time":1,"type":"turn/start","data":{"turn":1}}"#,
                Rule::EventSchema,
                "turn/start (no readable seq): missing field `seq`",
            ),
            (
                r#"{"seq":2,"time":1,"type":"request/error","data":{"turn":1,"step":1,"attempt":1,"provider":"p","failure":{"code":"SERVER","message":""}}}"#,
                Rule::EventSchema,
                "request/error seq 2: failure.message",
            ),
            (
                &RETRY.replace(r#""message":"down""#, r#""message":"down","status":600"#),
                Rule::RetryFailureValid,
                "llm/retry seq 4: failure.status",
            ),
            (
                &RETRY.replace(r#""retry":1"#, r#""retry":-1"#),
                Rule::RetryNumberValid,
                "retry -1 must be a safe integer",
            ),
            (&RETRY.replace(r#""retry":1"#, r#""retry":1.5"#), Rule::RetryNumberValid, "retry 1.5"),
            (
                &RETRY.replace(r#""maxRetries":2"#, r#""maxRetries":"2""#),
                Rule::RetryMaxRetriesValid,
                "maxRetries \"2\"",
            ),
            (
                &RETRY.replace(r#""delayMs":500"#, r#""delayMs":"soon""#),
                Rule::RetryDelayValid,
                "delayMs \"soon\"",
            ),
            (
                &RETRY.replace(r#""plugin":"llm-retry","#, ""),
                Rule::EventSchema,
                "missing field `plugin`",
            ),
        ];
        for (line, rule, text) in cases {
            let e = err(line);
            assert_eq!(e.rule(), rule, "{line}: {e}");
            let shown = e.to_string();
            assert!(shown.contains(text), "{line}: {shown} should contain {text}");
            assert!(shown.ends_with(&format!("[{rule}]")), "{shown}");
        }
    }

    #[test]
    fn a_schema_error_keeps_the_seq_for_resynchronising() {
        let e = err(r#"{"seq":3,"time":1,"type":"turn/start","data":{"turn":"x"}}"#);
        assert_eq!(e.seq(), Some(3));
        assert_eq!(err("{").seq(), None);
    }

    #[test]
    fn bytes_that_are_not_utf8_are_a_corrupt_line() {
        let e = parse_line(b"{\"seq\":0,\"t\xff\":1}").expect_err("not UTF-8");
        assert_eq!(e.rule(), Rule::CorruptLine);
    }
}
