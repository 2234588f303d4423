//! `rein report`'s page: one self-contained HTML document for one or more session logs.
//!
//! For each log, a section with its name and session, then its turns: the
//! [`conversation`](super::conversation) (user and assistant messages, tool calls with their
//! arguments, tool results, compactions) and, at the tail of each turn that retried or failed,
//! its [`panel`](super::panel::panel), collapsed.
//!
//! Self-contained: the stylesheets are inlined, there is no script and no external asset, and a
//! `Content-Security-Policy` of `default-src 'none'; style-src 'unsafe-inline'` makes the
//! browser refuse any script and any network request, should anything ever slip through the
//! escaping. The page is the same for the same logs (no timestamp of its making).

use maud::{DOCTYPE, Markup, PreEscaped, html};
use rein_runtime::event::Envelope;
use rein_runtime::panel::panels;
use rein_runtime::plural::count;
use rein_runtime::transcript::transcript;

use super::conversation::conversation;
use super::{THEME_CSS, panel};

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
                        (count(sources.len(), "log", "logs")) ". Each turn that retried or failed ends with a \
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
    let transcript = transcript(source.events);
    let panels = panels(source.events);
    html! {
        section.log id=(format!("log-{index}")) {
            h2 { (source.name) }
            p.meta {
                @if let Some(session) = &transcript.session {
                    "session " (session) " · "
                }
                (count(transcript.turns.len(), "turn", "turns")) ", "
                @if panels.is_empty() { "none" } @else { (panels.len()) }
                " retried or failed"
            }
            @if source.events.is_empty() {
                p.note { "This log has no events." }
            }
            (conversation(&format!("log-{index}"), &transcript, &panels, None))
        }
    }
}

#[cfg(test)]
mod tests {
    use rein_runtime::event::{
        AssistantMessage, Event, SessionStart, ToolResult, TurnEnd, TurnEndReason, TurnStart,
        UserMessage,
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
            "session s&lt;1&gt; · 1 turn, none retried or failed",
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
