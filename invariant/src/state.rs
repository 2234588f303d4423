//! The fold state the rules read: what is open, what the current attempt did (its error, the
//! retry that consumed it, the route switch that left it), and the retry chains
//! (`docs/runtime-semantics.md`, "Retry chains").
//!
//! # Why fold a violating event anyway
//!
//! [`State::fold`] applies every event for what it *claims* (a `turn/start` of turn 5 opens turn
//! 5, even when turn 2 was expected). The offline checker thereby keeps going after a violation
//! and reports the next independent one, instead of one error followed by a cascade. The live
//! validator never folds a violating event: its append is rejected first.
//!
//! # Why retry ids are remembered for the whole log
//!
//! Chains reset on `step/start`, `turn/end` and `agent/idle`, but "a `retryId` is owned by no
//! other chain" spans the whole log: a plugin that reuses an id in a later turn is as wrong as one
//! that reuses it in the same step. The map holds one small record per retry chain ever started,
//! so it stays tiny next to the log it summarises.

use std::collections::HashMap;

use rein_event::event::{Envelope, Event, LlmRetry};

use crate::catalogue::MAX_DELAY_MS;

/// The key of a retry chain: (turn, step, provider, policyKey).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ChainKey {
    pub(crate) turn: u32,
    pub(crate) step: u32,
    pub(crate) provider: String,
    pub(crate) policy_key: String,
}

impl ChainKey {
    pub(crate) fn of(retry: &LlmRetry) -> Self {
        Self {
            turn: retry.turn,
            step: retry.step,
            provider: retry.provider.clone(),
            policy_key: retry.policy_key.clone(),
        }
    }
}

impl std::fmt::Display for ChainKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}, {}]", self.provider, self.policy_key)
    }
}

/// A chain's progress: its id and latest retry number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Chain {
    pub(crate) retry_id: String,
    pub(crate) retry: u64,
}

/// The latest `llm/retry` scheduled under a retry id.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Scheduled {
    pub(crate) seq: u64,
    pub(crate) retry: u64,
    pub(crate) turn: u32,
    pub(crate) step: u32,
    /// The attempt that failed and is being retried.
    pub(crate) attempt: Option<u32>,
    /// `floor(time + delayMs)`: the earliest `llm/retry-started.time`.
    pub(crate) due: u64,
    pub(crate) time: u64,
    pub(crate) delay_ms: f64,
    /// The `seq` of its `llm/retry-started`, once written.
    pub(crate) started: Option<u64>,
}

/// What a retry id is bound to.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RetryIdRecord {
    /// The chain that used it first.
    pub(crate) owner: ChainKey,
    /// The `seq` of the owner's first `llm/retry` with this id.
    pub(crate) first_seq: u64,
    pub(crate) latest: Scheduled,
}

/// The latest attempt of the open step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Attempt {
    pub(crate) number: u32,
    pub(crate) provider: String,
    /// The `seq` of its `request/error`, if it failed.
    pub(crate) error: Option<u64>,
    /// The `seq` of the `llm/retry-started` that consumed the failure, if any.
    pub(crate) retry_started: Option<u64>,
    /// The `seq` and `to` of the `route/switched` that moved the step away from this attempt's
    /// route, if any.
    pub(crate) switched: Option<(u64, String)>,
}

/// The open turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OpenTurn {
    pub(crate) turn: u32,
    pub(crate) seq: u64,
}

/// The open step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OpenStep {
    pub(crate) turn: u32,
    pub(crate) step: u32,
    /// The latest `request/start` of this step.
    pub(crate) attempt: Option<Attempt>,
}

impl OpenStep {
    pub(crate) fn is(&self, turn: u32, step: u32) -> bool {
        self.turn == turn && self.step == step
    }
}

/// Everything the rules need to know about the events before the one being checked.
#[derive(Debug, Clone, Default)]
pub(crate) struct State {
    /// How many events were folded.
    pub(crate) events: u64,
    /// The `seq` the next event must carry; `None` before the first event.
    pub(crate) next_seq: Option<u64>,
    /// An unreadable line was skipped: the next `seq` may be anything not below `next_seq`.
    pub(crate) resync: bool,
    /// The `seq` of the last event folded.
    pub(crate) last_seq: Option<u64>,
    /// The highest turn number started so far (0 before any).
    pub(crate) last_turn: u32,
    pub(crate) open_turn: Option<OpenTurn>,
    /// The highest step number started in the current turn (0 before any).
    pub(crate) last_step: u32,
    pub(crate) open_step: Option<OpenStep>,
    /// The retry chains of the open step (reset on `step/start`, `turn/end`, `agent/idle`).
    pub(crate) chains: HashMap<ChainKey, Chain>,
    /// Every retry id of the log.
    pub(crate) retry_ids: HashMap<String, RetryIdRecord>,
}

impl State {
    /// The open step's latest attempt, if a step is open and has one.
    pub(crate) fn current_attempt(&self) -> Option<&Attempt> {
        self.open_step.as_ref().and_then(|s| s.attempt.as_ref())
    }

    /// Where the log stands, for a violation's message: the open step, or why there is none.
    pub(crate) fn open_step_now(&self) -> String {
        match (&self.open_step, self.open_turn) {
            (Some(o), _) => format!("the open step is turn {} step {}", o.turn, o.step),
            (None, Some(t)) => format!("turn {} has no open step", t.turn),
            (None, None) => "no turn is open".to_owned(),
        }
    }

    /// Records that a line whose event could not be read held `seq` (when known).
    pub(crate) fn skip(&mut self, seq: Option<u64>) {
        match seq {
            Some(seq) => {
                self.next_seq = Some(seq.saturating_add(1));
                self.last_seq = Some(seq);
            }
            None => self.resync = true,
        }
    }

    /// Applies `event` for what it claims (see the module docs).
    pub(crate) fn fold(&mut self, envelope: &Envelope) {
        self.events += 1;
        self.next_seq = Some(envelope.seq.saturating_add(1));
        self.last_seq = Some(envelope.seq);
        self.resync = false;
        match &envelope.event {
            Event::TurnStart(t) => {
                self.open_turn = Some(OpenTurn { turn: t.turn, seq: envelope.seq });
                self.last_turn = t.turn;
                self.last_step = 0;
                self.open_step = None;
                self.chains.clear();
            }
            Event::TurnEnd(_) => {
                self.open_turn = None;
                self.open_step = None;
                self.chains.clear();
            }
            Event::AgentIdle(_) => self.chains.clear(),
            Event::StepStart(s) => {
                self.open_step = Some(OpenStep { turn: s.turn, step: s.step, attempt: None });
                self.last_step = s.step;
                self.chains.clear();
            }
            Event::StepEnd(_) => self.open_step = None,
            Event::RequestStart(r) => {
                if let Some(step) = self.open_step.as_mut() {
                    step.attempt = Some(Attempt {
                        number: r.attempt,
                        provider: r.provider.clone(),
                        error: None,
                        retry_started: None,
                        switched: None,
                    });
                }
            }
            Event::RequestError(e) => {
                if let Some(attempt) = self.open_step.as_mut().and_then(|s| s.attempt.as_mut())
                    && attempt.number == e.attempt
                    && attempt.error.is_none()
                {
                    attempt.error = Some(envelope.seq);
                }
            }
            Event::LlmRetry(r) => self.fold_retry(envelope, r),
            Event::RouteSwitched(s) => {
                let open = self.open_step.as_mut().filter(|o| o.is(s.turn, s.step));
                if let Some(attempt) = open.and_then(|o| o.attempt.as_mut()) {
                    attempt.switched.get_or_insert_with(|| (envelope.seq, s.to.clone()));
                }
            }
            Event::LlmRetryStarted(s) => {
                let Some(record) = self.retry_ids.get_mut(&s.retry_id) else { return };
                if record.latest.retry != s.retry || record.latest.started.is_some() {
                    return;
                }
                record.latest.started = Some(envelope.seq);
                let retried = record.latest.attempt;
                if let Some(attempt) = self.open_step.as_mut().and_then(|s| s.attempt.as_mut())
                    && Some(attempt.number) == retried
                {
                    attempt.retry_started = Some(envelope.seq);
                }
            }
            _ => {}
        }
    }

    fn fold_retry(&mut self, envelope: &Envelope, retry: &LlmRetry) {
        let key = ChainKey::of(retry);
        let attempt = self.current_attempt().map(|a| a.number);
        let scheduled = Scheduled {
            seq: envelope.seq,
            retry: retry.retry,
            turn: retry.turn,
            step: retry.step,
            attempt,
            due: due(envelope.time, retry.delay_ms),
            time: envelope.time,
            delay_ms: retry.delay_ms,
            started: None,
        };
        match self.retry_ids.get_mut(&retry.retry_id) {
            Some(record) => record.latest = scheduled,
            None => {
                self.retry_ids.insert(
                    retry.retry_id.clone(),
                    RetryIdRecord {
                        owner: key.clone(),
                        first_seq: envelope.seq,
                        latest: scheduled,
                    },
                );
            }
        }
        self.chains.insert(key, Chain { retry_id: retry.retry_id.clone(), retry: retry.retry });
    }
}

/// `floor(time + delayMs)`, the earliest time a retry may start. `time` is an integer, so this
/// is `time + floor(delayMs)`; an invalid delay (reported by its own rule) counts as its nearest
/// valid value.
pub(crate) fn due(time: u64, delay_ms: f64) -> u64 {
    let delay = if delay_ms.is_nan() { 0.0 } else { delay_ms.clamp(0.0, MAX_DELAY_MS) };
    // In [0, 2^31): the floor converts exactly.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let whole = delay.floor() as u64;
    time.saturating_add(whole)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_is_the_floor_of_time_plus_delay() {
        let cases = [
            (1000, 500.0, 1500),
            (1000, 500.9, 1500),
            (1000, 0.0, 1000),
            (1000, 0.5, 1000),
            (0, 2_147_483_647.0, 2_147_483_647),
            (7, -3.0, 7),
            (7, f64::NAN, 7),
            (7, f64::INFINITY, 2_147_483_654),
            (u64::MAX, 10.0, u64::MAX),
        ];
        for (time, delay, expected) in cases {
            assert_eq!(due(time, delay), expected, "{time} + {delay}");
        }
    }
}
