//! `rein report`'s page: one self-contained HTML document for one or more session logs.
//!
//! For each log, a section with its name and session, then its turns: the conversation
//! (user and assistant messages, tool calls with their arguments, tool results, compactions)
//! and, at the tail of each turn that retried or failed, its [`panel`](super::panel::panel), collapsed.
//!
//! Self-contained: the stylesheets are inlined, there is no script and no external asset, and a
//! `Content-Security-Policy` of `default-src 'none'; style-src 'unsafe-inline'` makes the
//! browser refuse any script and any network request, should anything ever slip through the
//! escaping. The page is the same for the same logs (no timestamp of its making).

use maud::{DOCTYPE, Markup, PreEscaped, html};
use rein_runtime::event::{CancelCause, Envelope, TurnEndReason};
use rein_runtime::panel::{TurnPanel, panels};
use rein_runtime::transcript::{Entry, TurnTranscript, transcript};

use super::{THEME_CSS, Verbatim, panel};

/// The page's own stylesheet (the panels' is [`panel::CSS`]).
pub const CSS: &str = include_str!("report.css");

/// One log of a report.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    /// Its name (the path it was read from).
    pub name: &'a str,
    /// Its events.
    pub events: &'a [Envelope],
}

/// The whole page for `sources`, in order.
pub fn report(sources: &[Source<'_>]) -> String {
    let title = match sources {
        [one] => format!("rein report · {}", one.name),
        many => format!("rein report · {} logs", many.len()),
    };
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="Content-Security-Policy"
                    content="default-src 'none'; style-src 'unsafe-inline'";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                meta name="generator" content=(concat!("rein ", env!("CARGO_PKG_VERSION")));
                title { (title) }
                style { (PreEscaped(THEME_CSS)) (PreEscaped(panel::CSS)) (PreEscaped(CSS)) }
            }
            body {
                header {
                    h1 { "rein report" }
                    p.meta {
                        (sources.len()) " log(s). Each turn that retried or failed ends with a \
                        panel: open it for every attempt and the provider's messages verbatim."
                    }
                    @if sources.len() > 1 {
                        nav {
                            ul {
                                @for (i, source) in sources.iter().enumerate() {
                                    li { a href=(format!("#log-{}", i + 1)) { (source.name) } }
                                }
                            }
                        }
                    }
                }
                main {
                    @for (i, source) in sources.iter().enumerate() {
                        (log(i + 1, source))
                    }
                }
            }
        }
    };
    page.into_string()
}

fn log(index: usize, source: &Source<'_>) -> Markup {
    let conversation = transcript(source.events);
    let panels = panels(source.events);
    html! {
        section.log id=(format!("log-{index}")) {
            h2 { (source.name) }
            p.meta {
                @if let Some(session) = &conversation.session {
                    "session " (session) " · "
                }
                (conversation.turns.len()) " turn(s), "
                @if panels.is_empty() { "none" } @else { (panels.len()) }
                " retried or failed"
            }
            @if source.events.is_empty() {
                p.note { "This log has no events." }
            }
            @for turn in &conversation.turns {
                (self::turn(index, turn, panels.iter().find(|p| p.turn == turn.turn)))
            }
            @if !conversation.queued.is_empty() {
                article.turn.queued {
                    div.turn-head { h3 { "Queued" } span.badge { "no turn has taken these up yet" } }
                    @for text in &conversation.queued {
                        (message("user", text))
                    }
                }
            }
        }
    }
}

fn turn(log: usize, turn: &TurnTranscript, panel: Option<&TurnPanel>) -> Markup {
    let (kind, label) = ending(turn.ending.as_ref());
    html! {
        article.turn id=(format!("log-{log}-turn-{}", turn.turn)) data-turn=(turn.turn) {
            div.turn-head {
                h3 { "Turn " (turn.turn) }
                span.badge data-ending=(kind) { (label) }
            }
            @if !turn.entries.iter().any(|e| matches!(e, Entry::User { .. })) {
                p.note { "No new user message: a manual retry over the same history." }
            }
            @for entry in &turn.entries {
                (self::entry(entry))
            }
            @if let Some(panel) = panel {
                (panel::panel(panel))
            }
        }
    }
}

/// The turn's ending as a `data-ending` value and a label.
fn ending(reason: Option<&TurnEndReason>) -> (&'static str, String) {
    match reason {
        None => ("running", "still running".to_owned()),
        Some(TurnEndReason::Completed) => ("completed", "completed".to_owned()),
        Some(TurnEndReason::Error { failure }) => ("error", format!("failed: {}", failure.code())),
        Some(TurnEndReason::Aborted { cause }) => (
            "aborted",
            match cause {
                CancelCause::User => "cancelled".to_owned(),
                CancelCause::Parent => "cancelled with its session".to_owned(),
                CancelCause::Disposed => "cancelled: disposed".to_owned(),
                CancelCause::Hook { reason } => format!("cancelled by a hook: {reason}"),
            },
        ),
        Some(TurnEndReason::MaxSteps) => ("max-steps", "stopped at the step limit".to_owned()),
        Some(TurnEndReason::Interrupted) => ("interrupted", "interrupted".to_owned()),
    }
}

fn message(role: &str, text: &str) -> Markup {
    html! {
        div.entry.msg.(role) {
            div.role { (role) }
            div.text { (Verbatim(text)) }
        }
    }
}

fn entry(entry: &Entry) -> Markup {
    match entry {
        Entry::User { text } => message("user", text),
        Entry::Assistant { text, .. } if text.is_empty() => html! {},
        Entry::Assistant { text, .. } => message("assistant", text),
        Entry::ToolCall { name, id, arguments, .. } => {
            let arguments =
                serde_json::to_string_pretty(arguments).unwrap_or_else(|_| arguments.to_string());
            html! {
                div.entry.tool.call {
                    div.role { "tool call · " code { (name) } " · " code { (id) } }
                    pre { "\n" (Verbatim(&arguments)) }
                }
            }
        }
        Entry::ToolResult { id, output, is_error, .. } => html! {
            div.entry.tool.result.error[*is_error] {
                div.role { "tool result · " code { (id) } @if *is_error { " · error" } }
                pre { "\n" (Verbatim(output)) }
            }
        },
        Entry::Compacted { removed, kept, .. } => html! {
            p.entry.note { "Context compacted: " (removed) " event(s) removed, " (kept) " kept." }
        },
        other => html! { p.entry.note { (format!("{other:?}")) } },
    }
}

#[cfg(test)]
mod tests {
    use rein_runtime::event::{
        AssistantMessage, Event, SessionStart, ToolResult, TurnEnd, TurnStart, UserMessage,
    };

    use super::*;

    fn log(events: Vec<Event>) -> Vec<Envelope> {
        events
            .into_iter()
            .enumerate()
            .map(|(seq, event)| Envelope { seq: seq as u64, time: 0, event })
            .collect()
    }

    #[test]
    fn the_page_tells_manual_retries_queued_messages_and_empty_logs() {
        let events = log(vec![
            Event::SessionStart(SessionStart { session: "s<1>".into(), format: 1 }),
            Event::TurnStart(TurnStart { turn: 1 }),
            Event::AssistantMessage(AssistantMessage {
                turn: 1,
                step: 1,
                text: String::new(),
                tool_calls: None,
                usage: None,
            }),
            Event::ToolResult(ToolResult {
                turn: 1,
                step: 1,
                id: "c1".into(),
                output: "boom".into(),
                is_error: true,
            }),
            Event::TurnEnd(TurnEnd { turn: 1, reason: TurnEndReason::MaxSteps }),
            Event::UserMessage(UserMessage { text: "later".into() }),
        ]);
        let page = report(&[
            Source { name: "a&b.jsonl", events: &events },
            Source { name: "empty.jsonl", events: &[] },
        ]);
        for needle in [
            "<title>rein report · 2 logs</title>",
            r##"<a href="#log-1">a&amp;b.jsonl</a>"##,
            "session s&lt;1&gt; · 1 turn(s), none retried or failed",
            r#"<span class="badge" data-ending="max-steps">stopped at the step limit</span>"#,
            "No new user message: a manual retry over the same history.",
            r#"<div class="entry tool result error">"#,
            r#"<article class="turn queued">"#,
            r#"<div class="text">later</div>"#,
            "This log has no events.",
        ] {
            assert!(page.contains(needle), "{needle} in {page}");
        }
        assert!(
            !page.contains("<div class=\"entry msg assistant\">"),
            "an empty answer is left out"
        );
        assert!(!page.contains("<details"), "no panel: nothing retried or failed");
    }
}
