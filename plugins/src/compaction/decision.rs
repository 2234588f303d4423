//! What `compaction` does with a failure (see `docs/runtime-semantics.md`, "compaction").
//!
//! 1. Only `CONTEXT_WINDOW_EXCEEDED` concerns it; any other code → `Next`.
//! 2. Its own budget: at most `maxOverflowRetries` compactions per turn, counted from the log
//!    (the `context/compacted` events of the turn) → `Next` once spent. The budget is its own:
//!    it neither reads nor spends the retry chains of `llm-retry` or `auto-retry`.
//! 3. The cut ([`shrink::cut`]): nothing can be removed → `Next` (retrying the same request
//!    would overflow again); else append its `context/compacted` and answer `Retry`. No
//!    `llm/retry` is written and there is no wait: the new attempt is built from the shrunk
//!    history at once.
//!
//! It never consults downstream: when it cannot help, `Next` hands the failure on.

use rein_runtime::failure::{CONTEXT_WINDOW_EXCEEDED, Failure};
use rein_runtime::history::VisibleEvent;
use rein_runtime::plugin::Verdict;

use super::settings::CompactionSettings;
use super::shrink::{self, Cut};

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Not `compaction`'s to recover: answer `Next`.
    Decline(Declined),
    /// Append the cut's `context/compacted` ([`Cut::event`]) and answer `Retry` (unless the turn
    /// was cancelled or the plugin disposed first: then write nothing and answer `Stop`).
    Compact(Cut),
}

impl Decision {
    /// The answer to give at once, or `None` when the compaction must be written first.
    pub fn verdict(&self) -> Option<Verdict> {
        match self {
            Decision::Decline(_) => Some(Verdict::Next),
            Decision::Compact(_) => None,
        }
    }
}

/// Why `compaction` hands a failure on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Declined {
    /// The failure is not a context overflow.
    NotOverflow,
    /// The turn already made `maxOverflowRetries` compactions.
    BudgetSpent {
        /// Compactions made in the turn.
        used: u32,
        /// The budget.
        max: u32,
    },
    /// The history cannot shrink (it is all within the kept tail).
    NothingToRemove,
}

/// The decision for `failure`, given the compactions the turn already made (read from the
/// history fold, `History::compactions_in_turn`) and the model-visible history.
pub fn decide(
    settings: &CompactionSettings,
    failure: &Failure,
    compactions_in_turn: u32,
    visible: &[VisibleEvent],
) -> Decision {
    if failure.code() != CONTEXT_WINDOW_EXCEEDED {
        return Decision::Decline(Declined::NotOverflow);
    }
    let max = settings.max_overflow_retries();
    if compactions_in_turn >= max {
        return Decision::Decline(Declined::BudgetSpent { used: compactions_in_turn, max });
    }
    match shrink::cut(visible, settings.keep_recent_messages()) {
        Some(cut) => Decision::Compact(cut),
        None => Decision::Decline(Declined::NothingToRemove),
    }
}

#[cfg(test)]
mod tests {
    use rein_runtime::event::{AssistantMessage, Envelope, Event, StepRef, TurnStart, UserMessage};
    use rein_runtime::history::History;
    use serde_json::json;

    use super::*;
    use crate::settings::Patchable;

    fn settings(patch: serde_json::Value) -> CompactionSettings {
        CompactionSettings::default().patched(&patch).unwrap().settings
    }

    /// A log of `turns` exchanges (user, turn start, step start, answer), then turn `turns + 1`
    /// opened with its user message and first step.
    fn log(turns: u32) -> Vec<Envelope> {
        let mut events = Vec::new();
        for turn in 1..=turns + 1 {
            events.push(Event::UserMessage(UserMessage { text: format!("q{turn}") }));
            events.push(Event::TurnStart(TurnStart { turn }));
            events.push(Event::StepStart(StepRef { turn, step: 1 }));
            if turn <= turns {
                events.push(Event::AssistantMessage(AssistantMessage {
                    turn,
                    step: 1,
                    text: format!("a{turn}"),
                    tool_calls: None,
                    usage: None,
                }));
            }
        }
        events
            .into_iter()
            .enumerate()
            .map(|(seq, event)| Envelope { seq: seq as u64, time: 0, event })
            .collect()
    }

    fn failure(code: &str) -> Failure {
        Failure::new(code, "too long").unwrap()
    }

    #[test]
    fn only_a_context_overflow_within_budget_that_shrinks_is_compacted() {
        let long = History::from_events(&log(5)); // 11 messages
        let short = History::from_events(&log(2)); // 5 messages
        let overflow = failure("CONTEXT_WINDOW_EXCEEDED");
        // (settings patch, failure, compactions this turn, history) → decision
        let cases: Vec<(serde_json::Value, Failure, u32, &History, Decision)> = vec![
            (json!({}), failure("SERVER"), 0, &long, Decision::Decline(Declined::NotOverflow)),
            (
                json!({}),
                failure("context_window_exceeded"),
                0,
                &long,
                Decision::Decline(Declined::NotOverflow),
            ),
            (
                json!({}),
                overflow.clone(),
                1,
                &long,
                Decision::Decline(Declined::BudgetSpent { used: 1, max: 1 }),
            ),
            (
                json!({"maxOverflowRetries": 0}),
                overflow.clone(),
                0,
                &long,
                Decision::Decline(Declined::BudgetSpent { used: 0, max: 0 }),
            ),
            (json!({}), overflow.clone(), 0, &short, Decision::Decline(Declined::NothingToRemove)),
            // 11 messages, keep 6 (the latest user is in the tail): the tail opens with the
            // answer a3 (seq 11), so its question q3 (seq 8) stays too; the oldest 4 go.
            (
                json!({}),
                overflow.clone(),
                0,
                &long,
                Decision::Compact(Cut { removed: vec![0, 3, 4, 7], kept: 7 }),
            ),
            (
                json!({"maxOverflowRetries": 2}),
                overflow.clone(),
                1,
                &long,
                Decision::Compact(Cut { removed: vec![0, 3, 4, 7], kept: 7 }),
            ),
            (
                json!({"keepRecentMessages": 5}),
                overflow.clone(),
                0,
                &long,
                Decision::Compact(Cut { removed: vec![0, 3, 4, 7, 8, 11], kept: 5 }),
            ),
            (
                json!({"keepRecentMessages": 1}),
                overflow.clone(),
                0,
                &long,
                Decision::Compact(Cut {
                    removed: vec![0, 3, 4, 7, 8, 11, 12, 15, 16, 19],
                    kept: 1,
                }),
            ),
        ];
        for (patch, failure, used, history, expected) in cases {
            let got = decide(&settings(patch.clone()), &failure, used, history.visible());
            assert_eq!(got, expected, "{patch} {failure:?} used {used}");
            let verdict =
                if matches!(got, Decision::Compact(_)) { None } else { Some(Verdict::Next) };
            assert_eq!(got.verdict(), verdict);
        }
    }

    #[test]
    fn a_written_compaction_shrinks_the_history_and_spends_the_turns_budget() {
        let mut events = log(5);
        let turn = 6;
        let history = History::from_events(&events);
        let s = CompactionSettings::default();
        let overflow = failure("CONTEXT_WINDOW_EXCEEDED");
        let used = history.compactions_in_turn(turn);
        let Decision::Compact(cut) = decide(&s, &overflow, used, history.visible()) else {
            panic!("the first overflow compacts");
        };
        let kept = cut.kept;
        let seq = events.len() as u64;
        events.push(Envelope { seq, time: 0, event: Event::ContextCompacted(cut.event(turn, 1)) });
        let after = History::from_events(&events);
        assert_eq!(after.len() as u64, kept);
        assert_eq!(after.messages().len(), 7);
        assert_eq!(after.compactions_in_turn(turn), 1);
        // A second overflow in the turn: the budget of 1 is spent.
        assert_eq!(
            decide(&s, &overflow, after.compactions_in_turn(turn), after.visible()),
            Decision::Decline(Declined::BudgetSpent { used: 1, max: 1 })
        );
        // With a budget of 2 the same history cannot shrink any further.
        let two = settings(json!({"maxOverflowRetries": 2}));
        assert_eq!(
            decide(&two, &overflow, after.compactions_in_turn(turn), after.visible()),
            Decision::Decline(Declined::NothingToRemove)
        );
        // The next turn has a budget of its own.
        assert_eq!(after.compactions_in_turn(turn + 1), 0);
    }
}
