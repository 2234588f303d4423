//! A session's conversation as HTML, turn by turn: what `rein report` shows for each log and
//! what the console's session view shows (and replaces as the log grows).
//!
//! Each turn is an `<article class="turn">` with its number, a badge telling how it ended
//! (`data-ending`: `completed`, `error`, `aborted`, `max-steps`, `interrupted`, `running`), its
//! entries (user and assistant messages, tool calls with their arguments, tool results,
//! compactions) and, when it retried or failed, its [`panel`](super::panel::panel), collapsed.
//! User messages no turn has taken up yet close the conversation as a "Queued" article.
//!
//! A running turn may be given the text its current attempt has streamed so far
//! ([`Streaming`]): it is shown after the turn's entries as `div.entry.msg.assistant.streaming`.
//! Every text is escaped ([`Verbatim`]).

use maud::{Markup, html};
use rein_runtime::event::{CancelCause, TurnEndReason};
use rein_runtime::panel::TurnPanel;
use rein_runtime::plural::count;
use rein_runtime::transcript::{Entry, Transcript, TurnTranscript};

use super::{Verbatim, panel};

/// What the running turn's current attempt has streamed so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Streaming<'a> {
    /// The turn.
    pub turn: u32,
    /// The text.
    pub text: &'a str,
}

/// Every turn of `conversation` with its panel (from `panels`), then the queued messages. Turn
/// articles get the id `{anchor}-turn-{n}`.
pub fn conversation(
    anchor: &str,
    conversation: &Transcript,
    panels: &[TurnPanel],
    streaming: Option<Streaming<'_>>,
) -> Markup {
    html! {
        @for turn in &conversation.turns {
            (self::turn(
                anchor,
                turn,
                panels.iter().find(|p| p.turn == turn.turn),
                streaming.filter(|s| s.turn == turn.turn && turn.ending.is_none()),
            ))
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

/// One turn: its head, its entries, what it streams now, its panel.
pub fn turn(
    anchor: &str,
    turn: &TurnTranscript,
    panel: Option<&TurnPanel>,
    streaming: Option<Streaming<'_>>,
) -> Markup {
    let (kind, label) = ending(turn.ending.as_ref());
    html! {
        article.turn id=(format!("{anchor}-turn-{}", turn.turn)) data-turn=(turn.turn) {
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
            @if let Some(streaming) = streaming.filter(|s| !s.text.is_empty()) {
                div.entry.msg.assistant.streaming {
                    div.role { "assistant · streaming" }
                    div.text { (Verbatim(streaming.text)) }
                }
            }
            @if let Some(panel) = panel {
                (panel::panel(panel))
            }
        }
    }
}

/// The turn's ending as a `data-ending` value and a label.
pub fn ending(reason: Option<&TurnEndReason>) -> (&'static str, String) {
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
            p.entry.note {
                "Context compacted: " (count(*removed, "event", "events")) " removed, " (kept) " kept."
            }
        },
        other => html! { p.entry.note { (format!("{other:?}")) } },
    }
}

#[cfg(test)]
mod tests {
    use rein_runtime::transcript::TurnTranscript;

    use super::*;

    #[test]
    fn a_running_turn_shows_what_it_streamed_and_an_ended_one_does_not() {
        let running = TurnTranscript {
            turn: 2,
            entries: vec![Entry::User { text: "hi <there>".into() }],
            ending: None,
        };
        let live = Streaming { turn: 2, text: "Hel<lo" };
        let html = turn("c", &running, None, Some(live)).into_string();
        assert!(
            html.starts_with(r#"<article class="turn" id="c-turn-2" data-turn="2">"#),
            "{html}"
        );
        assert!(
            html.contains(r#"<span class="badge" data-ending="running">still running</span>"#),
            "{html}"
        );
        assert!(html.contains(r#"<div class="text">hi &lt;there&gt;</div>"#), "{html}");
        assert!(
            html.contains(
                r#"<div class="entry msg assistant streaming"><div class="role">assistant · streaming</div><div class="text">Hel&lt;lo</div></div>"#
            ),
            "{html}"
        );

        let transcript = Transcript {
            session: None,
            turns: vec![TurnTranscript { ending: Some(TurnEndReason::Completed), ..running }],
            queued: vec![],
        };
        let html = conversation("c", &transcript, &[], Some(live)).into_string();
        assert!(!html.contains("streaming"), "an ended turn streams nothing: {html}");
    }
}
