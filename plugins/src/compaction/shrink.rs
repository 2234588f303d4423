//! The cut rule: which model-visible events a compaction drops (see `docs/runtime-semantics.md`,
//! "compaction").
//!
//! The history is read as the provider sees it: messages. A user message is one message; a
//! step's assistant message together with its tool calls is one message, and each tool result is
//! one more. The events that make up a step — its assistant message, its tool calls and the
//! results answering them — form one **unit**, kept or dropped whole, so a call is never split
//! from its result (a provider refuses a result without its call, or a call left unanswered) and
//! a call never loses the message it belongs to. A user message is a unit of its own.
//!
//! [`cut`] keeps, walking from the newest event back, whole units until they hold at least
//! `keep_recent` messages (a unit straddling the boundary is kept whole, so more may be kept,
//! never fewer); the latest user message (the request the turn is answering, even when the tail
//! is all tool traffic); and the user message that asked the oldest kept answer, so the kept
//! history never opens with an answer whose question is gone (some providers refuse a
//! conversation that does not start with the user). Everything else is dropped. When nothing
//! would be dropped, there is no cut: the history cannot shrink.
//!
//! A tool result joins the latest earlier call with its id (ids may repeat across steps); a
//! result whose call is gone already (an earlier compaction by another rule) is a unit of its own.

use rein_runtime::event::ContextCompacted;
use rein_runtime::history::{Visible, VisibleEvent};

/// What a compaction drops: the data of its `context/compacted`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// The seqs of the dropped model-visible events, in log order (never empty).
    pub removed: Vec<u64>,
    /// How many model-visible events remain.
    pub kept: u64,
}

impl Cut {
    /// The `context/compacted` event of this cut, written in (`turn`, `step`).
    pub fn event(self, turn: u32, step: u32) -> ContextCompacted {
        ContextCompacted { turn, step, removed: self.removed, kept: self.kept }
    }
}

/// The cut of `visible` (the model-visible history, in log order) that keeps the latest user
/// message and the newest `keep_recent` messages; `None` when nothing can be removed.
pub fn cut(visible: &[VisibleEvent], keep_recent: u32) -> Option<Cut> {
    let units = Units::of(visible);
    let mut kept = vec![false; units.messages.len()];
    let mut kept_messages: u64 = 0;
    for &unit in units.of_event.iter().rev() {
        if kept[unit] {
            continue;
        }
        if kept_messages >= u64::from(keep_recent) {
            break;
        }
        kept[unit] = true;
        kept_messages += units.messages[unit];
    }
    let is_user = |e: &VisibleEvent| matches!(e.visible, Visible::User { .. });
    if let Some(i) = visible.iter().rposition(is_user) {
        kept[units.of_event[i]] = true;
    }
    // The question of the oldest kept answer.
    let oldest = units.of_event.iter().position(|unit| kept[*unit]);
    if let Some(oldest) = oldest.filter(|i| !is_user(&visible[*i]))
        && let Some(i) = visible[..oldest].iter().rposition(is_user)
    {
        kept[units.of_event[i]] = true;
    }
    let removed: Vec<u64> = visible
        .iter()
        .zip(&units.of_event)
        .filter(|(_, unit)| !kept[**unit])
        .map(|(event, _)| event.seq)
        .collect();
    if removed.is_empty() {
        return None;
    }
    let kept = (visible.len() - removed.len()) as u64;
    Some(Cut { removed, kept })
}

/// The units of a history: which unit each event belongs to, and how many messages each holds.
struct Units {
    of_event: Vec<usize>,
    messages: Vec<u64>,
}

impl Units {
    fn of(visible: &[VisibleEvent]) -> Self {
        let mut units = Units { of_event: Vec::with_capacity(visible.len()), messages: Vec::new() };
        // The unit of each (turn, step) met so far, and of each call id (latest call wins).
        let mut steps: Vec<((u32, u32), usize)> = Vec::new();
        let mut calls: Vec<(&str, usize)> = Vec::new();
        for event in visible {
            let unit = match &event.visible {
                Visible::User { .. } => units.new_unit(1),
                Visible::Assistant { turn, step, .. } => units.step(&mut steps, (*turn, *step)),
                Visible::ToolCall { turn, step, call } => {
                    let unit = units.step(&mut steps, (*turn, *step));
                    calls.retain(|(id, _)| *id != call.id);
                    calls.push((call.id.as_str(), unit));
                    unit
                }
                Visible::ToolResult { id, .. } => {
                    match calls.iter().find(|(call, _)| call == id) {
                        Some(&(_, unit)) => {
                            units.messages[unit] += 1;
                            unit
                        }
                        // Its call is gone already: a message on its own.
                        None => units.new_unit(1),
                    }
                }
            };
            units.of_event.push(unit);
        }
        units
    }

    fn new_unit(&mut self, messages: u64) -> usize {
        self.messages.push(messages);
        self.messages.len() - 1
    }

    /// The unit of a step: its assistant message (or, if that is gone, its calls) counts one.
    fn step(&mut self, steps: &mut Vec<((u32, u32), usize)>, key: (u32, u32)) -> usize {
        match steps.iter().find(|(k, _)| *k == key) {
            Some(&(_, unit)) => unit,
            None => {
                let unit = self.new_unit(1);
                steps.push((key, unit));
                unit
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use rein_runtime::event::{Envelope, Event, ToolCall};
    use rein_runtime::history::History;
    use rein_runtime::provider::Message;
    use serde_json::json;

    use super::*;

    /// A history written with one letter per event: `u` user, `a` assistant (opens a step),
    /// `c` call (id = its number in the step), `r` result of the step's oldest unanswered call,
    /// `|` next turn. Seqs count from 0 and skip one between events (other events in between).
    fn history(spec: &str) -> Vec<VisibleEvent> {
        let (mut turn, mut step, mut seq) = (1, 0, 0);
        let mut open: Vec<String> = Vec::new();
        let mut calls_in_step = 0;
        let mut out = Vec::new();
        for letter in spec.chars() {
            let visible = match letter {
                '|' => {
                    turn += 1;
                    step = 0;
                    continue;
                }
                'u' => Visible::User { text: format!("u{seq}") },
                'a' => {
                    step += 1;
                    calls_in_step = 0;
                    Visible::Assistant { turn, step, text: format!("a{seq}") }
                }
                'c' => {
                    calls_in_step += 1;
                    let id = format!("call{calls_in_step}");
                    open.push(id.clone());
                    let call = ToolCall { id, name: "echo".into(), arguments: json!({}) };
                    Visible::ToolCall { turn, step, call }
                }
                'r' => {
                    Visible::ToolResult { id: open.remove(0), output: "o".into(), is_error: false }
                }
                other => panic!("unknown letter {other}"),
            };
            out.push(VisibleEvent { seq, visible });
            seq += 2;
        }
        out
    }

    /// The letters of the events a cut keeps (`None`: no cut).
    fn kept(spec: &str, keep_recent: u32) -> Option<String> {
        let visible = history(spec);
        let cut = cut(&visible, keep_recent)?;
        assert!(!cut.removed.is_empty());
        assert_eq!(cut.kept as usize, visible.len() - cut.removed.len());
        let letters: String = spec.chars().filter(|c| *c != '|').collect();
        Some(
            visible
                .iter()
                .zip(letters.chars())
                .filter(|(e, _)| !cut.removed.contains(&e.seq))
                .map(|(_, l)| l)
                .collect(),
        )
    }

    #[test]
    fn the_cut_keeps_the_latest_user_and_the_newest_messages_whole() {
        // (history, keepRecentMessages) → the letters kept (None: nothing can be removed)
        let cases: Vec<(&str, u32, Option<&str>)> = vec![
            ("", 6, None),
            ("ua", 6, None),
            ("ua|ua|ua", 6, None),
            // Whole exchanges kept, the oldest dropped; a kept answer keeps its question.
            ("ua|ua|ua|ua", 4, Some("uaua")),
            ("ua|ua|ua|ua", 3, Some("uaua")),
            ("ua|ua|ua|ua", 5, Some("uauaua")),
            ("ua|ua|ua|ua", 1, Some("ua")),
            // The latest user message stays even when the tail is tool traffic of its turn.
            ("ua|uacracracr", 2, Some("uacr")),
            ("ua|uacracracr", 4, Some("uacracr")),
            // A step with many calls is kept whole (here 1 + 3 messages for keep 1).
            ("ua|uacrcrcr", 1, Some("uacrcrcr")),
            ("ua|uacrcrcr", 5, Some("uacrcrcr")),
            ("ua|uacrcrcr", 6, None),
            ("ua|ua|uacrcrcr", 6, Some("uauacrcrcr")),
            // Calls made back to back, results after.
            ("uaccrr|ua", 2, Some("ua")),
            ("uaccrr|ua", 3, None),
            ("ua|uaccrr|ua", 3, Some("uaccrrua")),
            // A tail inside the current turn: its earlier steps go, its user message stays.
            ("ua|uacracr", 2, Some("uacr")),
            // Only the latest user message: nothing else to drop.
            ("u", 1, None),
            ("u|u|u", 1, Some("u")),
        ];
        for (spec, keep, expected) in cases {
            assert_eq!(kept(spec, keep).as_deref(), expected, "{spec:?} keep {keep}");
        }
    }

    #[test]
    fn results_join_the_latest_call_with_their_id() {
        // Both steps use the id "call1": each result belongs to its own step.
        assert_eq!(kept("uacr|uacr", 2).as_deref(), Some("uacr"));
        let visible = history("uacr|uacr");
        assert_eq!(cut(&visible, 2).unwrap().removed, [0, 2, 4, 6]);
    }

    #[test]
    fn a_result_whose_call_is_gone_is_a_message_of_its_own() {
        let mut visible = history("uacr|ua");
        visible.retain(|e| !matches!(e.visible, Visible::ToolCall { .. }));
        // u a r | u a: keep 2 keeps the last exchange only; the orphan result goes.
        assert_eq!(cut(&visible, 2).unwrap().removed, [0, 2, 6]);
        // keep 3: the orphan result is the third message, and its turn's question stays.
        assert_eq!(cut(&visible, 3).unwrap().removed, [2]);
    }

    #[test]
    fn a_call_whose_message_is_gone_still_travels_with_its_result() {
        let mut visible = history("u|acr|ua");
        visible.retain(|e| e.seq != 2); // the assistant message of the calls
        // u c r | u a: keep 2 drops the call and its result together.
        assert_eq!(cut(&visible, 2), Some(Cut { removed: vec![0, 4, 6], kept: 2 }));
        // keep 3 keeps them together (one assistant message and one tool message).
        assert_eq!(cut(&visible, 3), None);
    }

    #[test]
    fn the_cut_becomes_its_event() {
        let cut = Cut { removed: vec![1, 4], kept: 6 };
        assert_eq!(
            cut.event(2, 3),
            ContextCompacted { turn: 2, step: 3, removed: vec![1, 4], kept: 6 }
        );
    }

    /// Folds `visible` back into a log (the events at their seqs), then the compaction.
    fn folded(visible: &[VisibleEvent], cut: Option<&Cut>) -> History {
        let mut events: Vec<Envelope> = Vec::new();
        for v in visible {
            let event = match &v.visible {
                Visible::User { text } => {
                    Event::UserMessage(rein_runtime::event::UserMessage { text: text.clone() })
                }
                Visible::Assistant { turn, step, text } => {
                    Event::AssistantMessage(rein_runtime::event::AssistantMessage {
                        turn: *turn,
                        step: *step,
                        text: text.clone(),
                        tool_calls: None,
                        usage: None,
                    })
                }
                Visible::ToolCall { turn, step, call } => {
                    Event::ToolCall(rein_runtime::event::ToolCallEvent {
                        turn: *turn,
                        step: *step,
                        id: call.id.clone(),
                        name: call.name.clone(),
                        arguments: call.arguments.clone(),
                    })
                }
                Visible::ToolResult { id, output, is_error } => {
                    Event::ToolResult(rein_runtime::event::ToolResult {
                        turn: 1,
                        step: 1,
                        id: id.clone(),
                        output: output.clone(),
                        is_error: *is_error,
                    })
                }
            };
            events.push(Envelope { seq: v.seq, time: 0, event });
        }
        if let Some(cut) = cut {
            let seq = visible.last().map_or(0, |v| v.seq + 1);
            let event = Event::ContextCompacted(cut.clone().event(9, 1));
            events.push(Envelope { seq, time: 0, event });
        }
        History::from_events(&events)
    }

    /// Every tool message follows an assistant message that made its call, with nothing but
    /// other results of that message in between.
    fn well_formed(messages: &[Message]) -> bool {
        let mut open: Vec<String> = Vec::new();
        for message in messages {
            match message {
                Message::Assistant { tool_calls, .. } => {
                    open = tool_calls.iter().map(|c| c.id.clone()).collect();
                }
                Message::Tool { id, .. } => match open.iter().position(|c| c == id) {
                    Some(i) => {
                        open.remove(i);
                    }
                    None => return false,
                },
                Message::User { .. } => open.clear(),
            }
        }
        true
    }

    /// A history of whole turns: per turn a user message, then steps of an assistant message
    /// and 0–3 calls, each answered (back to back or interleaved).
    fn spec() -> impl Strategy<Value = String> {
        let step = (0..4usize, any::<bool>()).prop_map(|(calls, interleaved)| {
            if interleaved {
                format!("a{}", "cr".repeat(calls))
            } else {
                format!("a{}{}", "c".repeat(calls), "r".repeat(calls))
            }
        });
        let turn =
            prop::collection::vec(step, 0..4).prop_map(|steps| format!("u{}", steps.concat()));
        prop::collection::vec(turn, 0..6).prop_map(|turns| turns.join("|"))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn a_cut_keeps_what_it_promises(spec in spec(), keep in 0..12u32) {
            let visible = history(&spec);
            let before = folded(&visible, None);
            let total_messages = before.messages().len();
            match cut(&visible, keep) {
                None => {
                    // With no tail to keep, only a lone user message cannot shrink.
                    prop_assert!(keep > 0 || total_messages <= 1, "{spec} keep {keep}");
                }
                Some(cut) => {
                    let after = folded(&visible, Some(&cut));
                    prop_assert!(!cut.removed.is_empty());
                    // A history within the tail never shrinks.
                    prop_assert!(total_messages > keep as usize, "{spec} keep {keep}");
                    prop_assert_eq!(after.len() as u64, cut.kept, "kept = what the fold leaves");
                    let messages = after.messages();
                    prop_assert!(messages.len() < total_messages, "it shrank");
                    prop_assert!(messages.len() >= (keep as usize).min(total_messages));
                    prop_assert!(well_formed(&messages), "{spec} keep {keep}: {messages:?}");
                    // The kept history opens with a question, as the whole one did.
                    if matches!(before.messages().first(), Some(Message::User { .. })) {
                        let opens_with_user = matches!(messages.first(), Some(Message::User { .. }));
                        prop_assert!(opens_with_user, "{} keep {}", spec, keep);
                    }
                    // The latest user message and the newest `keep` messages survive.
                    let all = before.messages();
                    let latest_user = all.iter().rposition(|m| matches!(m, Message::User { .. }));
                    if let Some(i) = latest_user {
                        prop_assert!(messages.contains(&all[i]));
                    }
                    let tail = &all[all.len() - (keep as usize).min(all.len())..];
                    prop_assert!(messages.ends_with(tail), "{spec} keep {keep}");
                }
            }
            prop_assert!(well_formed(&before.messages()));
        }
    }
}
