//! One `tracing` span per attempt, named `chat`, with OpenTelemetry GenAI field names.
//!
//! Opened with `gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model` and the
//! attempt's place (`session.id`, `turn`, `step`, `attempt`); closed with what the attempt
//! learned: `gen_ai.response.model`, `gen_ai.response.finish_reasons`,
//! `gen_ai.usage.input_tokens` and `gen_ai.usage.output_tokens` on success, `error.type` (the
//! failure code) on failure, and `http.response.status_code` once headers arrived. A cancelled
//! attempt's span closes with neither. No field ever holds a credential or a message body.

use rein_runtime::failure::Failure;
use rein_runtime::provider::Request;
use tracing::Span;
use tracing::field::Empty;

use crate::answer::Assembled;

/// The span of one attempt on provider `provider` (its `gen_ai.provider.name`).
pub(crate) fn attempt_span(provider: &str, request: &Request) -> Span {
    tracing::info_span!(
        "chat",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = %provider,
        gen_ai.request.model = %request.model,
        session.id = %request.session,
        turn = request.turn,
        step = request.step,
        attempt = request.attempt,
        gen_ai.response.model = Empty,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        http.response.status_code = Empty,
        error.r#type = Empty,
    )
}

/// Records an attempt's outcome on its span.
pub(crate) fn record(span: &Span, outcome: &Result<Assembled, Failure>) {
    match outcome {
        Ok(answer) => {
            if let Some(model) = &answer.response_model {
                span.record("gen_ai.response.model", model.as_str());
            }
            if let Some(reason) = &answer.finish_reason {
                span.record("gen_ai.response.finish_reasons", reason.as_str());
            }
            if let Some(usage) = answer.completion.usage {
                span.record("gen_ai.usage.input_tokens", usage.input_tokens);
                span.record("gen_ai.usage.output_tokens", usage.output_tokens);
            }
        }
        Err(failure) => {
            span.record("error.type", failure.code());
        }
    }
}

/// Records the HTTP status of the response.
pub(crate) fn record_status(span: &Span, status: u16) {
    span.record("http.response.status_code", status);
}
