//! Fault injection for scenarios: [`RejectAppends`], a session-log [`Validator`] that refuses every
//! append holding an event of the chosen types (a scenario's `"reject"`, rein's extension of the
//! scenario format).
//!
//! A rejected `llm/retry` append (for example by a live invariant) abandons the retry. A correct
//! plugin never provokes a rejection, so a scenario needs a way to make the log refuse on purpose;
//! this validator is that way, installed through the runtime's ordinary validator hook
//! ([`RuntimeBuilder::validator`](rein_runtime::runtime::RuntimeBuilder::validator)), so the
//! refusal travels the same path a live invariant's would: nothing is written and the appender gets
//! the error.
//!
//! # Why only the events written for plugins
//!
//! [`REJECTABLE`] lists the types appended by plugins or about them: `llm/retry`,
//! `llm/retry-started`, `route/switched`, `context/compacted`, `plugin/crashed`,
//! `config/changed`. A refusal of
//! those is something a plugin (or the waterfall's diagnostics) must survive, which is what a
//! scenario wants to show. Refusing the runtime's own lifecycle (`session/start`, `turn/start`,
//! `turn/end`…) would only break the run itself (an internal fault, exit 1, for what is really
//! a bad file), so the scenario format rejects such a list at `reject[i]`.

use rein_runtime::event::Envelope;
use rein_runtime::validator::{Rejection, Validator};

/// The event types a scenario may reject: those appended by plugins or about them.
pub const REJECTABLE: [&str; 6] = [
    "llm/retry",
    "llm/retry-started",
    "route/switched",
    "context/compacted",
    "plugin/crashed",
    "config/changed",
];

/// The rule name a [`RejectAppends`] rejection carries.
pub const RULE: &str = "scenario-reject";

/// A validator that refuses every batch holding an event of one of its types (the whole batch:
/// a log append is all or nothing). It keeps no state.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RejectAppends {
    kinds: Vec<String>,
}

impl RejectAppends {
    /// Refuses every append of these event types (`llm/retry`, …).
    pub fn new<S: Into<String>>(kinds: impl IntoIterator<Item = S>) -> Self {
        Self { kinds: kinds.into_iter().map(Into::into).collect() }
    }

    /// The first event of `batch` it refuses, if any.
    pub fn refused<'a>(&self, batch: &'a [Envelope]) -> Option<&'a Envelope> {
        batch.iter().find(|e| self.kinds.iter().any(|k| k == e.kind()))
    }
}

impl Validator for RejectAppends {
    fn name(&self) -> &str {
        "scenario reject"
    }

    fn check(&self, batch: &[Envelope]) -> Result<(), Rejection> {
        match self.refused(batch) {
            None => Ok(()),
            Some(event) => Err(Rejection {
                seq: event.seq,
                kind: event.kind().to_owned(),
                rule: RULE.to_owned(),
                message: format!(
                    "the scenario rejects every {} append (fault injection)",
                    event.kind()
                ),
            }),
        }
    }

    fn commit(&mut self, _batch: &[Envelope]) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use rein_runtime::event::{AgentIdle, Event, LlmRetryStarted, StepRef};

    fn at(seq: u64, event: Event) -> Envelope {
        Envelope { seq, time: 0, event }
    }

    fn started() -> Event {
        Event::LlmRetryStarted(LlmRetryStarted { retry_id: "r".into(), turn: 1, step: 1, retry: 1 })
    }

    #[test]
    fn it_refuses_exactly_the_batches_holding_its_types() {
        let reject = RejectAppends::new(["llm/retry-started", "config/changed"]);
        let step_end = || Event::StepEnd(StepRef { turn: 1, step: 1 });
        type Refused = Option<(u64, &'static str)>;
        let cases: Vec<(Vec<Envelope>, Refused)> = vec![
            (vec![], None),
            (vec![at(3, step_end())], None),
            (vec![at(3, started())], Some((3, "llm/retry-started"))),
            // The whole batch is refused, at its first refused event.
            (
                vec![at(3, step_end()), at(4, started()), at(5, started())],
                Some((4, "llm/retry-started")),
            ),
            (vec![at(3, Event::AgentIdle(AgentIdle {}))], None),
        ];
        for (batch, expected) in cases {
            let verdict = reject.check(&batch).err();
            let got = verdict.as_ref().map(|r| (r.seq, r.kind.as_str()));
            assert_eq!(got, expected, "{batch:?}");
            if let Some(rejection) = verdict {
                assert_eq!(rejection.rule, RULE);
                assert_eq!(
                    rejection.to_string(),
                    format!(
                        "llm/retry-started seq {}: the scenario rejects every llm/retry-started \
                         append (fault injection) [scenario-reject]",
                        rejection.seq
                    )
                );
            }
        }
        assert!(
            RejectAppends::default().check(&[at(0, started())]).is_ok(),
            "no types, no refusal"
        );
    }

    #[test]
    fn every_rejectable_type_is_an_event_type() {
        for kind in REJECTABLE {
            assert!(Event::KINDS.contains(&kind), "{kind}");
        }
    }
}
