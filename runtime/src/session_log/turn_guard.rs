//! The turn guard: a log refuses events that belong to a turn that has already ended.
//!
//! Once a turn's `turn/end` is durable, nothing may be written for that turn any more. The
//! parties that write a turn's events are several — its step, the plugins recovering its
//! failures, its session — and a cancellation reaches them at slightly different moments: a
//! plugin may have checked the turn's token a moment before its session wrote the closing
//! events. The log is the one place every write goes through in order, so it is where a late
//! write is refused: the writer gets a rejection (a plugin treats it like any refused append:
//! `Stop`), and the log stays well formed whatever the timing.
//!
//! The guard is deliberately narrow: it only refuses events that name a turn which started and
//! ended before them. Everything else about a log's shape is the validators' business.

use crate::event::{Envelope, Event};
use crate::validator::Rejection;

use super::open_turn::OpenTurn;

/// The rule name a refusal carries.
pub(crate) const RULE: &str = "no-write-after-turn-end";

/// The turn an event belongs to, for the events that belong to one (`turn/start` opens a turn
/// rather than belonging to an open one, so it is not listed).
fn turn_of(event: &Event) -> Option<u32> {
    match event {
        Event::StepStart(e) | Event::StepEnd(e) => Some(e.turn),
        Event::RequestStart(e) => Some(e.turn),
        Event::AssistantChunk(e) => Some(e.turn),
        Event::RequestError(e) => Some(e.turn),
        Event::LlmRetry(e) => Some(e.turn),
        Event::LlmRetryStarted(e) => Some(e.turn),
        Event::AssistantMessage(e) => Some(e.turn),
        Event::ToolCall(e) => Some(e.turn),
        Event::ToolResult(e) => Some(e.turn),
        Event::ContextCompacted(e) => Some(e.turn),
        Event::RouteSwitched(e) => Some(e.turn),
        Event::RetryThrottled(e) => Some(e.turn),
        Event::TurnEnd(e) => Some(e.turn),
        _ => None,
    }
}

/// Checks a stamped batch against where the turn lifecycle stands (`open`, before the batch).
pub(crate) fn check(open: &OpenTurn, batch: &[Envelope]) -> Result<(), Rejection> {
    // What the check reads of the lifecycle, folded through the batch as `OpenTurn` folds it.
    let (mut open_turn, mut last_turn) = (open.turn, open.last_turn);
    for envelope in batch {
        if let Some(turn) = turn_of(&envelope.event) {
            let ended = turn <= last_turn && open_turn != Some(turn);
            if ended {
                return Err(Rejection {
                    seq: envelope.seq,
                    kind: envelope.kind().to_owned(),
                    rule: RULE.to_owned(),
                    message: format!(
                        "turn {turn} has already ended: nothing more is written for it"
                    ),
                });
            }
        }
        match &envelope.event {
            Event::TurnStart(start) => (open_turn, last_turn) = (Some(start.turn), start.turn),
            Event::TurnEnd(_) => open_turn = None,
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{
        AgentIdle, LlmRetryStarted, RetryThrottled, RouteSwitched, StepRef, TurnEnd, TurnEndReason,
        TurnStart, UserMessage,
    };

    fn stamp(events: Vec<Event>) -> Vec<Envelope> {
        events
            .into_iter()
            .enumerate()
            .map(|(seq, event)| Envelope { seq: seq as u64, time: 0, event })
            .collect()
    }

    fn folded(events: &[Event]) -> OpenTurn {
        let mut open = OpenTurn::default();
        for event in events {
            open.apply(event);
        }
        open
    }

    fn started(turn: u32) -> Event {
        Event::TurnStart(TurnStart { turn })
    }

    fn ended(turn: u32) -> Event {
        Event::TurnEnd(TurnEnd { turn, reason: TurnEndReason::Completed })
    }

    fn step_start(turn: u32) -> Event {
        Event::StepStart(StepRef { turn, step: 1 })
    }

    fn late_start(turn: u32) -> Event {
        Event::LlmRetryStarted(LlmRetryStarted { retry_id: "r".into(), turn, step: 1, retry: 1 })
    }

    fn late_switch(turn: u32) -> Event {
        let (from, to, code) = ("a".into(), "b".into(), "SERVER".into());
        Event::RouteSwitched(RouteSwitched {
            turn,
            step: 1,
            from,
            to,
            code,
            reason: "eager".into(),
        })
    }

    fn late_throttle(turn: u32) -> Event {
        let (provider, plugin, code) = ("a".into(), "llm-retry".into(), "SERVER".into());
        Event::RetryThrottled(RetryThrottled { turn, step: 1, provider, plugin, code })
    }

    #[test]
    fn only_events_of_an_ended_turn_are_refused() {
        let user = || Event::UserMessage(UserMessage { text: "hi".into() });
        let idle = || Event::AgentIdle(AgentIdle {});
        type Case = (&'static str, Vec<Event>, Vec<Event>, Option<u64>);
        let cases: Vec<Case> = vec![
            ("a turn's own events", vec![started(1)], vec![step_start(1), late_start(1)], None),
            (
                "the next turn",
                vec![started(1), ended(1)],
                vec![user(), started(2), step_start(2)],
                None,
            ),
            ("after its end", vec![started(1), ended(1)], vec![late_start(1)], Some(0)),
            (
                "after its end, idle",
                vec![started(1), ended(1), idle()],
                vec![step_start(1)],
                Some(0),
            ),
            (
                "an earlier turn",
                vec![started(1), ended(1), started(2)],
                vec![late_start(1)],
                Some(0),
            ),
            ("a second turn/end", vec![started(1), ended(1)], vec![ended(1)], Some(0)),
            // A plugin of a cancelled turn, still deciding while the next turn runs.
            (
                "a route switch after its end",
                vec![started(1), ended(1), started(2)],
                vec![late_switch(1)],
                Some(0),
            ),
            (
                "a throttled retry after its end",
                vec![started(1), ended(1), started(2)],
                vec![late_throttle(1)],
                Some(0),
            ),
            ("a route switch of the open turn", vec![started(1)], vec![late_switch(1)], None),
            ("ended within the batch", vec![started(1)], vec![ended(1), late_start(1)], Some(1)),
            ("no turn named", vec![started(1), ended(1)], vec![idle()], None),
            // A turn nobody started yet is the validators' business, not the guard's.
            ("a future turn", vec![], vec![step_start(3)], None),
        ];
        for (case, before, batch, refused) in cases {
            let outcome = check(&folded(&before), &stamp(batch));
            assert_eq!(outcome.as_ref().err().map(|r| r.seq), refused, "{case}: {outcome:?}");
            if let Err(rejection) = outcome {
                assert_eq!(rejection.rule, RULE, "{case}");
            }
        }
    }
}
