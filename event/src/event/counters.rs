//! The counters an event carries — `seq`, `turn`, `step`, `attempt`, `retry` — and the rule that
//! each is below its type's largest value.
//!
//! Each of them is followed by a larger one: the next event, turn, step, attempt or retry takes
//! the number after it. A counter at its type's maximum has no number after it, and a session
//! that went on from it would repeat it (a crafted log with turn 4294967295 open was continued
//! as a second turn 4294967295). So [`Envelope::exhausted`] names such a counter, and a line
//! that holds one is refused by every reader of a log (a store's load names file and line;
//! `rein check` reports it) and by every writer (a store refuses to write it: a session that
//! would reach it fails its append and stops there). Nothing is rewritten. No log rein writes
//! comes near: a turn a millisecond for a hundred days is below 2^33.

use super::{Envelope, Event};

/// A counter of an event at its type's largest value: nothing can follow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{field} {value} is the largest there can be: no {field} can follow it")]
pub struct Exhausted {
    /// The counter's field (`seq`, `turn`, `step`, `attempt`, `retry`).
    pub field: &'static str,
    /// Its value.
    pub value: u64,
}

impl Envelope {
    /// The first counter of this line (its `seq`, then its event's `turn`, `step`, `attempt`
    /// or `retry`) that is at its type's largest value, if any (see the module docs).
    pub fn exhausted(&self) -> Option<Exhausted> {
        let at_max =
            |field, value: u64, max: u64| (value >= max).then_some(Exhausted { field, value });
        let turn_step = |turn: u32, step: u32| {
            at_max("turn", turn.into(), u32::MAX.into())
                .or_else(|| at_max("step", step.into(), u32::MAX.into()))
        };
        let attempt = |turn, step, attempt: u32| {
            turn_step(turn, step).or_else(|| at_max("attempt", attempt.into(), u32::MAX.into()))
        };
        let retry = |turn, step, retry: u64| {
            turn_step(turn, step).or_else(|| at_max("retry", retry, u64::MAX))
        };
        at_max("seq", self.seq, u64::MAX).or_else(|| match &self.event {
            Event::TurnStart(t) => at_max("turn", t.turn.into(), u32::MAX.into()),
            Event::TurnEnd(t) => at_max("turn", t.turn.into(), u32::MAX.into()),
            Event::StepStart(s) | Event::StepEnd(s) => turn_step(s.turn, s.step),
            Event::RequestStart(r) => attempt(r.turn, r.step, r.attempt),
            Event::AssistantChunk(c) => attempt(c.turn, c.step, c.attempt),
            Event::RequestError(e) => attempt(e.turn, e.step, e.attempt),
            Event::LlmRetry(r) => retry(r.turn, r.step, r.retry),
            Event::LlmRetryStarted(r) => retry(r.turn, r.step, r.retry),
            Event::AssistantMessage(m) => turn_step(m.turn, m.step),
            Event::ToolCall(c) => turn_step(c.turn, c.step),
            Event::ToolResult(r) => turn_step(r.turn, r.step),
            Event::RouteSwitched(r) => turn_step(r.turn, r.step),
            Event::ContextCompacted(c) => turn_step(c.turn, c.step),
            Event::TurnResumed(r) => turn_step(r.turn, r.step),
            Event::RetryThrottled(r) => turn_step(r.turn, r.step),
            Event::SessionStart(_)
            | Event::UserMessage(_)
            | Event::AgentIdle(_)
            | Event::PluginCrashed(_)
            | Event::ConfigChanged(_) => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(seq: u64, json: &str) -> Envelope {
        let text = format!(r#"{{"seq":{seq},"time":0,{json}}}"#);
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn a_counter_at_its_largest_value_is_named_and_one_below_is_not() {
        const T: u32 = u32::MAX;
        let cases: Vec<(Envelope, Option<(&str, u64)>)> = vec![
            (line(0, r#""type":"turn/start","data":{"turn":4294967294}"#), None),
            (
                line(0, &format!(r#""type":"turn/start","data":{{"turn":{T}}}"#)),
                Some(("turn", T.into())),
            ),
            (
                line(
                    0,
                    &format!(
                        r#""type":"turn/end","data":{{"turn":{T},"reason":{{"kind":"completed"}}}}"#
                    ),
                ),
                Some(("turn", T.into())),
            ),
            (
                line(0, &format!(r#""type":"step/start","data":{{"turn":1,"step":{T}}}"#)),
                Some(("step", T.into())),
            ),
            (
                line(
                    0,
                    &format!(
                        r#""type":"request/start","data":{{"turn":1,"step":1,"attempt":{T},"provider":"p","model":"m"}}"#
                    ),
                ),
                Some(("attempt", T.into())),
            ),
            (
                line(
                    0,
                    &format!(
                        r#""type":"llm/retry-started","data":{{"retryId":"a","turn":1,"step":1,"retry":{}}}"#,
                        u64::MAX
                    ),
                ),
                Some(("retry", u64::MAX)),
            ),
            (line(u64::MAX, r#""type":"agent/idle","data":{}"#), Some(("seq", u64::MAX))),
            (line(u64::MAX - 1, r#""type":"agent/idle","data":{}"#), None),
        ];
        for (envelope, want) in cases {
            let got = envelope.exhausted().map(|e| (e.field, e.value));
            assert_eq!(got, want, "{envelope:?}");
        }
        let named = Exhausted { field: "turn", value: T.into() }.to_string();
        assert_eq!(named, "turn 4294967295 is the largest there can be: no turn can follow it");
    }
}
