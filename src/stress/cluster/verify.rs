//! The checks of `rein stress --nodes` over the logs the cluster left, and the figures read from
//! them: pure functions of the events (and of who wrote each, and what the run saw).
//!
//! - [`writers`]: no turn ran on two nodes — inside an open turn, the node (incarnation) that
//!   writes changes only where a new owner takes the turn over (`turn/resumed`, or the
//!   `turn/end {interrupted}` that closes a turn it may not resume). A node that kept writing
//!   after its partition moved (a write the fence should have refused) breaks it.
//! - [`missing_acks`]: every event a node acknowledged to the run is in the log, unchanged.
//! - [`resumes`]: each `turn/resumed`, how long its turn had been silent before it, and whether a
//!   retry wait it continued kept its chain (same `retryId` and retry number) and its deadline.
//! - [`first_resumed`]: the first resumed write in the partitions a fault took from a node.

use std::collections::BTreeMap;

use crate::runtime::event::{Envelope, Event, TurnEndReason};

/// Who wrote an event: a node's incarnation (`n2.1`: node `n2`, started the first time), or
/// `None` for an event already in the log before the run.
pub(crate) type Writer = Option<String>;

/// What no turn ran on two nodes forbids in one session's log, in words (empty: nothing).
/// `writers` holds the writer of each `seq` written during the run.
pub(crate) fn writers(
    session: &str,
    events: &[Envelope],
    written: &BTreeMap<u64, String>,
) -> Vec<String> {
    let mut violations = Vec::new();
    let mut open: Option<u32> = None;
    let mut last: Option<(Writer, u64)> = None;
    for event in events {
        let writer: Writer = written.get(&event.seq).cloned();
        if let (Some(turn), Some((before, seq))) = (open, &last)
            && *before != writer
            && !takes_over(&event.event)
        {
            violations.push(format!(
                "{session}: seq {} ({}) written by {} inside turn {turn}, which {} ran up to seq \
                 {seq}, without a takeover (turn/resumed)",
                event.seq,
                event.kind(),
                shown(&writer),
                shown(before),
            ));
        }
        match &event.event {
            Event::TurnStart(start) => open = Some(start.turn),
            Event::TurnEnd(_) => open = None,
            _ => {}
        }
        last = Some((writer, event.seq));
    }
    violations
}

/// Whether `event` may be the first a new owner writes inside an open turn.
fn takes_over(event: &Event) -> bool {
    match event {
        Event::TurnResumed(_) => true,
        Event::TurnEnd(end) => matches!(end.reason, TurnEndReason::Interrupted),
        _ => false,
    }
}

fn shown(writer: &Writer) -> &str {
    writer.as_deref().unwrap_or("(before the run)")
}

/// The events a node acknowledged to the run (`acked`, by `seq`) that the log does not hold as
/// they were acknowledged, in words.
pub(crate) fn missing_acks(
    session: &str,
    events: &[Envelope],
    acked: &BTreeMap<u64, Envelope>,
) -> Vec<String> {
    let mut missing = Vec::new();
    for (seq, ack) in acked {
        match events.get(usize::try_from(*seq).unwrap_or(usize::MAX)) {
            Some(event) if event == ack => {}
            Some(event) => missing.push(format!(
                "{session}: seq {seq} was acknowledged as {} at {} and the log holds {} at {}",
                ack.kind(),
                ack.time,
                event.kind(),
                event.time
            )),
            None => missing.push(format!(
                "{session}: seq {seq} ({}) was acknowledged and the log ends at seq {}",
                ack.kind(),
                events.len().saturating_sub(1)
            )),
        }
    }
    missing
}

/// One `turn/resumed` of a log.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Resume {
    /// When it was written (ms since the epoch).
    pub(crate) at: u64,
    /// When the turn it resumed started (its `turn/start`).
    pub(crate) began: u64,
    /// How long the turn had been silent: from the event before it.
    pub(crate) silent_ms: u64,
    /// When it continued a retry wait: how the wait went on.
    pub(crate) wait: Option<Wait>,
}

/// A retry wait a `turn/resumed` continued.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Wait {
    /// Its next attempt started with the chain's `retryId` and retry number, `late_ms` after the
    /// wait's deadline (`llm/retry` time + `delayMs`).
    Continued { late_ms: f64 },
    /// Its turn ended before the next attempt (cancelled, or resumed again elsewhere first).
    Ended,
    /// Broken, in words: another chain, another retry number, or an attempt before the
    /// deadline.
    Broken(String),
}

/// Every `turn/resumed` of `events`, in order.
pub(crate) fn resumes(session: &str, events: &[Envelope]) -> Vec<Resume> {
    let mut out = Vec::new();
    for (i, event) in events.iter().enumerate() {
        let Event::TurnResumed(resumed) = &event.event else { continue };
        let silent_ms = i
            .checked_sub(1)
            .and_then(|before| events.get(before))
            .map_or(0, |before| event.time.saturating_sub(before.time));
        let began = events[..i]
            .iter()
            .rev()
            .find_map(|e| match &e.event {
                Event::TurnStart(start) if start.turn == resumed.turn => Some(e.time),
                _ => None,
            })
            .unwrap_or(event.time);
        let wait = (resumed.pending == "retry-wait").then(|| {
            let Some((retry, deadline)) = pending_retry(&events[..i]) else {
                return Wait::Broken(format!(
                    "{session}: seq {} resumed a retry wait the log does not hold",
                    event.seq
                ));
            };
            next_attempt(session, &events[i + 1..], &retry.retry_id, retry.retry, deadline)
        });
        out.push(Resume { at: event.time, began, silent_ms, wait });
    }
    out
}

/// The `llm/retry` waiting at the end of `events` (none started since), and its deadline.
fn pending_retry(events: &[Envelope]) -> Option<(&crate::runtime::event::LlmRetry, f64)> {
    let mut pending = None;
    for event in events {
        match &event.event {
            Event::LlmRetry(retry) => pending = Some((retry, event.time as f64 + retry.delay_ms)),
            Event::LlmRetryStarted(_) | Event::TurnStart(_) | Event::TurnEnd(_) => pending = None,
            _ => {}
        }
    }
    pending
}

/// How the wait of chain `retry_id` at retry `retry` went on in `after` (the events after the
/// `turn/resumed`).
fn next_attempt(
    session: &str,
    after: &[Envelope],
    retry_id: &str,
    retry: u64,
    deadline: f64,
) -> Wait {
    for event in after {
        match &event.event {
            Event::LlmRetryStarted(started) => {
                if started.retry_id != retry_id || started.retry != retry {
                    return Wait::Broken(format!(
                        "{session}: seq {} started retry {} of chain {} where retry {retry} of \
                         chain {retry_id} was waiting",
                        event.seq, started.retry, started.retry_id
                    ));
                }
                let late_ms = event.time as f64 - deadline;
                // Times are whole milliseconds: a deadline with a fraction is met within it.
                if late_ms <= -1.0 {
                    return Wait::Broken(format!(
                        "{session}: seq {} started retry {retry} of chain {retry_id} {:.0} ms \
                         before its deadline",
                        event.seq, -late_ms
                    ));
                }
                return Wait::Continued { late_ms: late_ms.max(0.0) };
            }
            Event::TurnEnd(_) | Event::TurnResumed(_) => return Wait::Ended,
            _ => {}
        }
    }
    Wait::Ended
}

/// The first resumed write after a fault at `from` took `partitions` from a node: the earliest
/// of `resumed` (each a session's partition, when its turn began, when it resumed) in those
/// partitions, of a turn already running at the fault, resumed at or after it. (A turn that
/// began later was resumed for another reason: a partition handed back when the node came back.)
pub(crate) fn first_resumed(
    resumed: &[(u32, u64, u64)],
    partitions: &std::collections::BTreeSet<u32>,
    from: u64,
) -> Option<u64> {
    resumed
        .iter()
        .filter(|(p, began, at)| partitions.contains(p) && *began <= from && *at >= from)
        .map(|(_, _, at)| *at)
        .min()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use crate::runtime::event::{
        AgentIdle, CancelCause, LlmRetry, LlmRetryStarted, SessionStart, StepRef, TurnEnd,
        TurnResumed, TurnStart, UserMessage,
    };
    use crate::runtime::failure::Failure;

    use super::*;

    fn at(events: Vec<(u64, Event)>) -> Vec<Envelope> {
        events
            .into_iter()
            .enumerate()
            .map(|(seq, (time, event))| Envelope { seq: seq as u64, time, event })
            .collect()
    }

    fn retry(id: &str, retry: u64, delay_ms: f64) -> Event {
        Event::LlmRetry(LlmRetry {
            retry_id: id.into(),
            turn: 1,
            step: 1,
            provider: "simulated".into(),
            plugin: "llm-retry".into(),
            mode: "normal".into(),
            policy_key: "k".into(),
            retry,
            max_retries: Some(2),
            delay_ms,
            failure: Failure::new("SERVER", "busy").unwrap(),
        })
    }

    fn started(id: &str, retry: u64) -> Event {
        Event::LlmRetryStarted(LlmRetryStarted { retry_id: id.into(), turn: 1, step: 1, retry })
    }

    fn resumed(pending: &str) -> Event {
        Event::TurnResumed(TurnResumed { turn: 1, step: 1, pending: pending.into() })
    }

    fn end(reason: TurnEndReason) -> Event {
        Event::TurnEnd(TurnEnd { turn: 1, reason })
    }

    /// A session's log: a turn waiting for retry `r-1` #1 (deadline 1,100), resumed, then `tail`.
    fn waiting_then(tail: Vec<(u64, Event)>) -> Vec<Envelope> {
        let mut events = vec![
            (1000, Event::SessionStart(SessionStart { session: "s".into(), format: 1 })),
            (1000, Event::UserMessage(UserMessage { text: "hi".into() })),
            (1000, Event::TurnStart(TurnStart { turn: 1 })),
            (1000, Event::StepStart(StepRef { turn: 1, step: 1 })),
            (1000, retry("r-1", 1, 100.0)),
            (1900, resumed("retry-wait")),
        ];
        events.extend(tail);
        at(events)
    }

    fn written(pairs: &[(u64, &str)]) -> BTreeMap<u64, String> {
        pairs.iter().map(|(seq, w)| (*seq, (*w).to_owned())).collect()
    }

    #[test]
    fn a_turn_changes_node_only_where_a_new_owner_takes_it_over() {
        let log = waiting_then(vec![
            (1900, started("r-1", 1)),
            (1950, end(TurnEndReason::Completed)),
            (1950, Event::AgentIdle(AgentIdle {})),
            (3000, Event::UserMessage(UserMessage { text: "again".into() })),
        ]);
        // (writer of each seq, the violations' seqs)
        type Case<'a> = (&'a [(u64, &'a str)], &'a [u64]);
        let cases: [Case; 6] = [
            // One node all along.
            (
                &[
                    (0, "a.1"),
                    (1, "a.1"),
                    (2, "a.1"),
                    (3, "a.1"),
                    (4, "a.1"),
                    (5, "a.1"),
                    (6, "a.1"),
                    (7, "a.1"),
                    (8, "a.1"),
                    (9, "a.1"),
                ],
                &[],
            ),
            // Taken over at the turn/resumed; the next turn on a third node.
            (
                &[
                    (0, "a.1"),
                    (1, "a.1"),
                    (2, "a.1"),
                    (3, "a.1"),
                    (4, "a.1"),
                    (5, "b.1"),
                    (6, "b.1"),
                    (7, "b.1"),
                    (8, "b.1"),
                    (9, "c.1"),
                ],
                &[],
            ),
            // The old owner wrote after the new one had taken the turn over.
            (
                &[
                    (0, "a.1"),
                    (1, "a.1"),
                    (2, "a.1"),
                    (3, "a.1"),
                    (4, "a.1"),
                    (5, "b.1"),
                    (6, "a.1"),
                    (7, "b.1"),
                    (8, "b.1"),
                    (9, "b.1"),
                ],
                &[6, 7],
            ),
            // A node's restart is another writer: it too must take the turn over.
            (
                &[
                    (0, "a.1"),
                    (1, "a.1"),
                    (2, "a.1"),
                    (3, "a.1"),
                    (4, "a.2"),
                    (5, "a.2"),
                    (6, "a.2"),
                    (7, "a.2"),
                    (8, "a.2"),
                    (9, "a.2"),
                ],
                &[4],
            ),
            // Events written before the run, continued by the run's node at the takeover.
            (&[(5, "b.1"), (6, "b.1"), (7, "b.1"), (8, "b.1"), (9, "b.1")], &[]),
            // ... or not at a takeover.
            (&[(4, "b.1"), (5, "b.1"), (6, "b.1"), (7, "b.1"), (8, "b.1"), (9, "b.1")], &[4]),
        ];
        for (pairs, bad) in cases {
            let found = writers("s", &log, &written(pairs));
            let seqs: Vec<u64> = found
                .iter()
                .map(|v| {
                    v.split("seq ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap()
                })
                .collect();
            assert_eq!(seqs, bad, "{pairs:?}: {found:?}");
        }
        let interrupted = at(vec![
            (0, Event::SessionStart(SessionStart { session: "s".into(), format: 1 })),
            (0, Event::UserMessage(UserMessage { text: "hi".into() })),
            (0, Event::TurnStart(TurnStart { turn: 1 })),
            (9, end(TurnEndReason::Interrupted)),
        ]);
        let by = written(&[(0, "a.1"), (1, "a.1"), (2, "a.1"), (3, "b.1")]);
        assert!(writers("s", &interrupted, &by).is_empty(), "closed interrupted by its next owner");
        let aborted = at(vec![
            (0, Event::SessionStart(SessionStart { session: "s".into(), format: 1 })),
            (0, Event::UserMessage(UserMessage { text: "hi".into() })),
            (0, Event::TurnStart(TurnStart { turn: 1 })),
            (9, end(TurnEndReason::Aborted { cause: CancelCause::User })),
        ]);
        let found = writers("s", &aborted, &by);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with(
                "s: seq 3 (turn/end) written by b.1 inside turn 1, which a.1 ran up to seq 2"
            ),
            "{found:?}"
        );
    }

    #[test]
    fn every_acknowledged_event_must_be_in_the_log_as_it_was_acknowledged() {
        let log = waiting_then(vec![]);
        let mut acked: BTreeMap<u64, Envelope> =
            log.iter().take(4).map(|e| (e.seq, e.clone())).collect();
        assert!(missing_acks("s", &log, &acked).is_empty());
        let mut changed = log[2].clone();
        changed.time += 1;
        acked.insert(2, changed);
        let mut beyond = log[5].clone();
        beyond.seq = 9;
        acked.insert(9, beyond);
        assert_eq!(
            missing_acks("s", &log, &acked),
            [
                "s: seq 2 was acknowledged as turn/start at 1001 and the log holds turn/start at 1000",
                "s: seq 9 (turn/resumed) was acknowledged and the log ends at seq 5",
            ]
        );
    }

    #[test]
    fn a_resumed_retry_wait_keeps_its_chain_and_its_deadline() {
        // (what follows the resume, what the wait became)
        let cases = [
            (vec![(1900, started("r-1", 1))], Wait::Continued { late_ms: 800.0 }),
            // Due later than the resume: started at its deadline.
            (vec![(1100, started("r-1", 1))], Wait::Continued { late_ms: 0.0 }),
            (
                vec![(1050, started("r-1", 1))],
                Wait::Broken(
                    "s: seq 6 started retry 1 of chain r-1 50 ms before its deadline".into(),
                ),
            ),
            (
                vec![(1900, started("r-2", 1))],
                Wait::Broken(
                    "s: seq 6 started retry 1 of chain r-2 where retry 1 of chain r-1 was waiting"
                        .into(),
                ),
            ),
            (
                vec![(1900, started("r-1", 2))],
                Wait::Broken(
                    "s: seq 6 started retry 2 of chain r-1 where retry 1 of chain r-1 was waiting"
                        .into(),
                ),
            ),
            (vec![(1950, end(TurnEndReason::Aborted { cause: CancelCause::User }))], Wait::Ended),
            (vec![], Wait::Ended),
        ];
        for (tail, want) in cases {
            let got = resumes("s", &waiting_then(tail.clone()));
            assert_eq!(got.len(), 1, "{tail:?}");
            assert_eq!((got[0].at, got[0].began), (1900, 1000));
            assert_eq!(got[0].silent_ms, 900, "silent since its llm/retry");
            assert_eq!(got[0].wait, Some(want), "{tail:?}");
        }
        // A resume of anything else carries no wait.
        let other = at(vec![
            (0, Event::SessionStart(SessionStart { session: "s".into(), format: 1 })),
            (0, Event::UserMessage(UserMessage { text: "hi".into() })),
            (10, Event::TurnStart(TurnStart { turn: 1 })),
            (700, resumed("attempt")),
        ]);
        assert_eq!(
            resumes("s", &other),
            [Resume { at: 700, began: 10, silent_ms: 690, wait: None }]
        );
        // A retry-wait resume with no retry waiting is itself broken.
        let bogus = at(vec![
            (0, Event::SessionStart(SessionStart { session: "s".into(), format: 1 })),
            (0, Event::TurnStart(TurnStart { turn: 1 })),
            (5, resumed("retry-wait")),
        ]);
        assert!(matches!(&resumes("s", &bogus)[0].wait, Some(Wait::Broken(_))));
    }

    #[test]
    fn the_first_resumed_write_is_the_earliest_in_the_faults_partitions_after_it() {
        // (partition, turn began, resumed)
        let resumed = [(1, 0, 500), (2, 900, 1200), (1, 800, 1500), (3, 0, 900), (2, 1000, 1100)];
        let of = |ps: &[u32]| ps.iter().copied().collect::<BTreeSet<u32>>();
        assert_eq!(first_resumed(&resumed, &of(&[1, 2]), 1000), Some(1100));
        assert_eq!(first_resumed(&resumed, &of(&[1]), 1000), Some(1500));
        assert_eq!(first_resumed(&resumed, &of(&[3]), 1000), None, "resumed before the fault");
        assert_eq!(first_resumed(&resumed, &of(&[2]), 950), Some(1200), "began after the fault");
        assert_eq!(first_resumed(&resumed, &of(&[]), 0), None);
    }
}
