//! `tracing` for `rein chat`: the subscriber (`RUST_LOG`, on stderr) and the spans of the chat's
//! session, turns and steps, with OpenTelemetry GenAI field names.
//!
//! The runtime already opens an `attempt` span per provider attempt and the adapters a `chat`
//! span per call; this adds the levels above them, opened and closed as the turn's events arrive:
//!
//! - `session`: `session.id`, `gen_ai.conversation.id`, `gen_ai.provider.name`,
//!   `gen_ai.request.model`; at its close, `turns`.
//! - `turn` (inside `session`): `turn`, `gen_ai.operation.name = "chat"`, the provider and
//!   model; at its close, `gen_ai.usage.input_tokens`/`output_tokens` (summed over its answers,
//!   when the provider reported usage), `retries` (attempts after the first of their step),
//!   `turn.end` (`completed`, `error`, `aborted`, `max-steps`, `interrupted`) and `error.type`
//!   (the failure code) when it failed.
//! - `step` (inside `turn`): `turn`, `step`, the provider and model it starts on (after a route
//!   switch in an earlier step, the route switched to); at its close, `attempts`,
//!   the usage of its answer, and `error.type` (its last attempt's code) when it got no answer.
//!
//! # What `RUST_LOG` asks for ([`directives`])
//!
//! Without `RUST_LOG` (or with a blank one) no subscriber is installed: the chat's own status
//! lines say what happens, and no tracing line lands between them and the panel. A bare level
//! (`RUST_LOG=info`, `debug`, `trace`) means rein's own spans and events at that level and every
//! other crate's warnings — `warn,rein=info` (a target is a prefix: `rein` covers `rein_runtime`,
//! `rein_plugins`, `rein_providers`…), since `info` everywhere is mostly the actor library's
//! spans; `warn`, `error` and `off` apply to every crate. Anything else is a filter as
//! `tracing_subscriber::EnvFilter` reads it, taken as written (`RUST_LOG=info,ractor=info` for
//! everything). With a filter, every span is printed when it closes, with its fields (the
//! runtime's and the adapters' included). No field holds a message text or a credential.

use std::io::IsTerminal;
use std::str::FromStr;

use rein_runtime::event::{Event, TurnEndReason};
use tracing::Span;
use tracing::field::Empty;
use tracing::level_filters::LevelFilter;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::FmtSpan;

/// The target prefix of rein's own crates (the `rein` binary and library, `rein_runtime`,
/// `rein_plugins`, `rein_providers`, …).
const OWN: &str = "rein";

/// The filter `RUST_LOG`'s value asks for (see the module docs): `None` — unset or blank — is no
/// tracing at all; a bare level more verbose than `warn` is rein's crates at that level and the
/// others' warnings; anything else is taken as written.
pub(crate) fn directives(rust_log: Option<&str>) -> Option<String> {
    let value = rust_log.map(str::trim).filter(|v| !v.is_empty())?;
    match LevelFilter::from_str(value) {
        Ok(level) if level > LevelFilter::WARN => {
            let level = level.to_string().to_lowercase();
            Some(format!("warn,{OWN}={level}"))
        }
        _ => Some(value.to_owned()),
    }
}

/// Installs the subscriber when `RUST_LOG` asks for one ([`directives`]): to stderr, every span
/// printed at its close; colour only on a terminal without `NO_COLOR`. An invalid `RUST_LOG` is
/// reported, and nothing is traced.
pub(crate) fn init() {
    let Some(directives) = directives(std::env::var("RUST_LOG").ok().as_deref()) else { return };
    let filter = match EnvFilter::builder().parse(&directives) {
        Ok(filter) => filter,
        Err(e) => {
            eprintln!("warning: RUST_LOG: {e}; no tracing");
            return;
        }
    };
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_span_events(FmtSpan::CLOSE)
        .with_ansi(ansi)
        .try_init();
}

/// What a span counts until it closes.
#[derive(Debug, Default)]
struct Tally {
    attempts: u32,
    retries: u32,
    input_tokens: u64,
    output_tokens: u64,
    usage: bool,
    answered: bool,
    last_error: Option<String>,
}

impl Tally {
    fn record_usage(&self, span: &Span) {
        if self.usage {
            span.record("gen_ai.usage.input_tokens", self.input_tokens);
            span.record("gen_ai.usage.output_tokens", self.output_tokens);
        }
    }
}

/// The spans of one chat session, fed the session's events in order.
pub(crate) struct Spans {
    session: Span,
    provider: String,
    model: String,
    /// The route the next step starts on: the primary at a turn's start, then the route of its
    /// latest attempt (a route switch moves the turn's later steps).
    current: (String, String),
    turns: u32,
    turn: Option<(Span, Tally)>,
    step: Option<(Span, Tally)>,
}

impl Spans {
    /// Opens the session's span.
    pub(crate) fn new(session: &str, provider: &str, model: &str) -> Self {
        let span = tracing::info_span!(
            "session",
            session.id = %session,
            gen_ai.conversation.id = %session,
            gen_ai.provider.name = %provider,
            gen_ai.request.model = %model,
            turns = Empty,
        );
        Self {
            session: span,
            provider: provider.to_owned(),
            model: model.to_owned(),
            current: (provider.to_owned(), model.to_owned()),
            turns: 0,
            turn: None,
            step: None,
        }
    }

    /// Opens, fills and closes spans as `event` says.
    pub(crate) fn observe(&mut self, event: &Event) {
        match event {
            Event::TurnStart(start) => {
                self.close_turn(None);
                self.turns += 1;
                self.current = (self.provider.clone(), self.model.clone());
                let span = tracing::info_span!(
                    parent: &self.session,
                    "turn",
                    turn = start.turn,
                    gen_ai.operation.name = "chat",
                    gen_ai.provider.name = %self.provider,
                    gen_ai.request.model = %self.model,
                    gen_ai.usage.input_tokens = Empty,
                    gen_ai.usage.output_tokens = Empty,
                    retries = Empty,
                    turn.end = Empty,
                    error.r#type = Empty,
                );
                self.turn = Some((span, Tally::default()));
            }
            Event::StepStart(step) => {
                self.close_step();
                let parent = self.turn.as_ref().map_or(&self.session, |(span, _)| span);
                let span = tracing::info_span!(
                    parent: parent,
                    "step",
                    turn = step.turn,
                    step = step.step,
                    gen_ai.provider.name = %self.current.0,
                    gen_ai.request.model = %self.current.1,
                    gen_ai.usage.input_tokens = Empty,
                    gen_ai.usage.output_tokens = Empty,
                    attempts = Empty,
                    error.r#type = Empty,
                );
                self.step = Some((span, Tally::default()));
            }
            Event::RequestStart(request) => {
                self.current = (request.provider.clone(), request.model.clone());
                for (_, tally) in self.open() {
                    tally.attempts += 1;
                    if request.attempt > 1 {
                        tally.retries += 1;
                    }
                }
            }
            Event::RequestError(error) => {
                for (_, tally) in self.open() {
                    tally.last_error = Some(error.failure.code().to_owned());
                }
            }
            Event::AssistantMessage(message) => {
                for (_, tally) in self.open() {
                    tally.answered = true;
                    if let Some(usage) = message.usage {
                        tally.usage = true;
                        tally.input_tokens += usage.input_tokens;
                        tally.output_tokens += usage.output_tokens;
                    }
                }
            }
            Event::StepEnd(_) => self.close_step(),
            Event::TurnEnd(end) => self.close_turn(Some(&end.reason)),
            _ => {}
        }
    }

    /// The open turn and step spans with their tallies.
    fn open(&mut self) -> impl Iterator<Item = &mut (Span, Tally)> {
        self.turn.iter_mut().chain(self.step.iter_mut())
    }

    fn close_step(&mut self) {
        if let Some((span, tally)) = self.step.take() {
            span.record("attempts", tally.attempts);
            tally.record_usage(&span);
            if !tally.answered
                && let Some(code) = &tally.last_error
            {
                span.record("error.type", code.as_str());
            }
        }
    }

    fn close_turn(&mut self, reason: Option<&TurnEndReason>) {
        self.close_step();
        if let Some((span, tally)) = self.turn.take() {
            tally.record_usage(&span);
            span.record("retries", tally.retries);
            let end = match reason {
                None => "unknown",
                Some(TurnEndReason::Completed) => "completed",
                Some(TurnEndReason::Error { failure }) => {
                    span.record("error.type", failure.code());
                    "error"
                }
                Some(TurnEndReason::Aborted { .. }) => "aborted",
                Some(TurnEndReason::MaxSteps) => "max-steps",
                Some(TurnEndReason::Interrupted) => "interrupted",
            };
            span.record("turn.end", end);
        }
    }
}

impl Drop for Spans {
    fn drop(&mut self) {
        self.close_turn(None);
        self.session.record("turns", self.turns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_log_maps_to_a_filter_of_reins_own_spans_or_none() {
        let cases = [
            (None, None),
            (Some(""), None),
            (Some("  "), None),
            (Some("info"), Some("warn,rein=info")),
            (Some(" INFO "), Some("warn,rein=info")),
            (Some("debug"), Some("warn,rein=debug")),
            (Some("trace"), Some("warn,rein=trace")),
            (Some("warn"), Some("warn")),
            (Some("error"), Some("error")),
            (Some("off"), Some("off")),
            (Some("info,ractor=info"), Some("info,ractor=info")),
            (Some("rein_plugins=debug"), Some("rein_plugins=debug")),
            (Some("nonsense=[{"), Some("nonsense=[{")),
        ];
        for (rust_log, want) in cases {
            assert_eq!(directives(rust_log).as_deref(), want, "{rust_log:?}");
        }
    }

    #[test]
    fn the_bare_level_filter_lets_reins_crates_through_and_holds_the_actor_library_at_warn() {
        use tracing_subscriber::layer::SubscriberExt;

        let filter = EnvFilter::builder().parse(directives(Some("info")).unwrap()).unwrap();
        let subscriber = tracing_subscriber::registry().with(filter);
        tracing::subscriber::with_default(subscriber, || {
            use tracing::Level;
            let enabled = [
                tracing::enabled!(target: "rein_runtime::step", Level::INFO),
                tracing::enabled!(target: "rein_providers::openai", Level::INFO),
                tracing::enabled!(target: "rein::cli::chat::telemetry", Level::INFO),
                tracing::enabled!(target: "ractor::actor", Level::INFO),
                tracing::enabled!(target: "ractor::actor", Level::WARN),
            ];
            assert_eq!(enabled, [true, true, true, false, true]);
        });
    }
}
