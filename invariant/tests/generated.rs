//! Generated histories: every valid one passes, and every mutation that breaks a rule is caught.
//!
//! The valid histories come from `rein_testkit::generate` (turns, steps, attempts, tool
//! calls, official and auto-retry chains, always mode, compaction, aborted waits, diagnostics).
//! Each mutation has an oracle that says, from the event kinds alone, whether the mutated log must
//! be caught, must stay valid, or may go either way (for example, dropping an `llm/retry-started`
//! breaks no rule of the session-log contract: the next attempt just follows).
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use proptest::prelude::*;
use rein_event::event::{Envelope, Event};
use rein_event::validator::Validator;
use rein_invariant::{Checker, LiveValidator, check_finished_log};
use rein_testkit::generate::generate;
use rein_testkit::history::renumber;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Kind {
    Drop,
    Duplicate,
    Swap,
    RetryNumber,
    RetryId,
    StartedEarly,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Caught,
    Valid,
    Either,
}

struct Mutation {
    kind: Kind,
    at: usize,
    log: Vec<Envelope>,
    expect: Expect,
}

/// (turn, step, attempt) of events that name an attempt.
fn attempt_of(e: &Envelope) -> Option<(u32, u32, u32)> {
    match &e.event {
        Event::RequestStart(r) => Some((r.turn, r.step, r.attempt)),
        Event::RequestError(r) => Some((r.turn, r.step, r.attempt)),
        Event::AssistantChunk(c) => Some((c.turn, c.step, c.attempt)),
        _ => None,
    }
}

/// (turn, step) of events that name a step.
fn step_of(e: &Envelope) -> Option<(u32, u32)> {
    match &e.event {
        Event::StepStart(s) | Event::StepEnd(s) => Some((s.turn, s.step)),
        Event::LlmRetry(r) => Some((r.turn, r.step)),
        Event::LlmRetryStarted(r) => Some((r.turn, r.step)),
        Event::AssistantMessage(m) => Some((m.turn, m.step)),
        Event::ToolCall(c) => Some((c.turn, c.step)),
        Event::ToolResult(r) => Some((r.turn, r.step)),
        Event::ContextCompacted(c) => Some((c.turn, c.step)),
        _ => attempt_of(e).map(|(t, s, _)| (t, s)),
    }
}

fn turn_of(e: &Envelope) -> Option<u32> {
    match &e.event {
        Event::TurnStart(t) => Some(t.turn),
        Event::TurnEnd(t) => Some(t.turn),
        _ => step_of(e).map(|(t, _)| t),
    }
}

fn retry_ref(e: &Envelope) -> Option<(&str, u64)> {
    match &e.event {
        Event::LlmRetry(r) => Some((&r.retry_id, r.retry)),
        Event::LlmRetryStarted(r) => Some((&r.retry_id, r.retry)),
        _ => None,
    }
}

/// Model-visible content and diagnostics: no rule orders them among themselves.
fn is_content(e: &Envelope) -> bool {
    matches!(
        e.event,
        Event::UserMessage(_)
            | Event::AssistantChunk(_)
            | Event::AssistantMessage(_)
            | Event::ToolCall(_)
            | Event::ToolResult(_)
            | Event::ContextCompacted(_)
            | Event::PluginCrashed(_)
            | Event::ConfigChanged(_)
    )
}

fn caught_if(condition: bool) -> Expect {
    if condition { Expect::Caught } else { Expect::Either }
}

fn expect_drop(log: &[Envelope], i: usize) -> Expect {
    let e = &log[i];
    let later = &log[i + 1..];
    match &e.event {
        Event::SessionStart(_)
        | Event::TurnStart(_)
        | Event::TurnEnd(_)
        | Event::StepStart(_)
        | Event::StepEnd(_) => Expect::Caught,
        Event::RequestStart(r) => caught_if(later.iter().any(|l| {
            attempt_of(l).is_some_and(|(t, s, a)| (t, s) == (r.turn, r.step) && a >= r.attempt)
        })),
        Event::RequestError(r) => caught_if(
            later
                .iter()
                .take_while(|l| !matches!(l.event, Event::RequestStart(_) | Event::StepEnd(_)))
                .any(|l| matches!(&l.event, Event::LlmRetry(x) if (x.turn, x.step) == (r.turn, r.step))),
        ),
        Event::LlmRetry(r) => caught_if(
            later.iter().any(|l| retry_ref(l).is_some_and(|(id, _)| id == r.retry_id)),
        ),
        Event::LlmRetryStarted(_) => Expect::Either,
        _ => Expect::Valid,
    }
}

fn expect_duplicate(log: &[Envelope], i: usize) -> Expect {
    match &log[i].event {
        Event::SessionStart(_)
        | Event::TurnStart(_)
        | Event::TurnEnd(_)
        | Event::StepStart(_)
        | Event::StepEnd(_)
        | Event::RequestStart(_)
        | Event::RequestError(_)
        | Event::LlmRetry(_)
        | Event::LlmRetryStarted(_) => Expect::Caught,
        _ => Expect::Valid,
    }
}

/// Swapping `log[i]` and `log[i + 1]`: caught when the later one needs the earlier one first.
fn expect_swap(log: &[Envelope], i: usize) -> Expect {
    let (a, b) = (&log[i], &log[i + 1]);
    let needs = match (&a.event, &b.event) {
        (Event::SessionStart(_), _) => true,
        (Event::TurnStart(t), _) => turn_of(b) == Some(t.turn),
        (Event::StepStart(s), _) => step_of(b) == Some((s.turn, s.step)),
        (Event::RequestStart(_), Event::RequestError(_) | Event::AssistantChunk(_)) => {
            attempt_of(a) == attempt_of(b)
        }
        (Event::RequestError(_), Event::LlmRetry(_)) => step_of(a) == step_of(b),
        (Event::LlmRetry(_), Event::LlmRetryStarted(_)) => retry_ref(a) == retry_ref(b),
        (Event::LlmRetryStarted(_), Event::RequestStart(_)) => step_of(a) == step_of(b),
        (Event::StepEnd(_), Event::TurnEnd(_) | Event::StepStart(_)) => true,
        (Event::TurnEnd(_), Event::TurnStart(_) | Event::AgentIdle(_)) => true,
        _ => false,
    };
    if needs {
        Expect::Caught
    } else if is_content(a) && is_content(b) {
        Expect::Valid
    } else {
        Expect::Either
    }
}

fn retry_mut(e: &mut Envelope) -> Option<(&mut String, &mut u64)> {
    match &mut e.event {
        Event::LlmRetry(r) => Some((&mut r.retry_id, &mut r.retry)),
        Event::LlmRetryStarted(r) => Some((&mut r.retry_id, &mut r.retry)),
        _ => None,
    }
}

/// Every mutation of one kind at every position where it applies (seqs renumbered, so only the
/// structural rules can catch it).
fn mutations(log: &[Envelope]) -> Vec<Mutation> {
    let mut out = Vec::new();
    let mut add = |kind, at, mut log: Vec<Envelope>, expect| {
        renumber(&mut log);
        out.push(Mutation { kind, at, log, expect });
    };
    for i in 0..log.len() {
        let mut dropped = log.to_vec();
        dropped.remove(i);
        add(Kind::Drop, i, dropped, expect_drop(log, i));

        let mut doubled = log.to_vec();
        doubled.insert(i + 1, log[i].clone());
        add(Kind::Duplicate, i, doubled, expect_duplicate(log, i));

        if i + 1 < log.len() {
            let mut swapped = log.to_vec();
            swapped.swap(i, i + 1);
            add(Kind::Swap, i, swapped, expect_swap(log, i));
        }

        if let Some((id, retry)) = retry_ref(&log[i]) {
            let (id, retry) = (id.to_owned(), retry);
            for changed in [retry + 1, retry - 1] {
                let mut m = log.to_vec();
                if let Some((_, n)) = retry_mut(&mut m[i]) {
                    *n = changed;
                }
                add(Kind::RetryNumber, i, m, Expect::Caught);
            }

            let referenced_later =
                log[i + 1..].iter().any(|l| retry_ref(l).is_some_and(|(other, _)| other == id));
            let fresh_expect = match log[i].event {
                Event::LlmRetryStarted(_) => Expect::Caught,
                _ => caught_if(retry > 1 || referenced_later),
            };
            let mut m = log.to_vec();
            if let Some((rid, _)) = retry_mut(&mut m[i]) {
                *rid = "ffffffff-ffff-4fff-bfff-ffffffffffff".into();
            }
            add(Kind::RetryId, i, m, fresh_expect);

            // Another chain's id: a retryId is owned by one chain.
            if matches!(log[i].event, Event::LlmRetry(_)) {
                let other = log.iter().find_map(|l| match &l.event {
                    Event::LlmRetry(r) if r.retry_id != id => Some(r.retry_id.clone()),
                    _ => None,
                });
                if let Some(other) = other {
                    let mut m = log.to_vec();
                    if let Some((rid, _)) = retry_mut(&mut m[i]) {
                        *rid = other;
                    }
                    add(Kind::RetryId, i, m, Expect::Caught);
                }
            }
        }

        if let Event::LlmRetryStarted(s) = &log[i].event {
            let scheduled = log[..i].iter().rev().find_map(|l| match &l.event {
                Event::LlmRetry(r) if r.retry_id == s.retry_id && r.retry == s.retry => {
                    Some(l.time + r.delay_ms.floor() as u64)
                }
                _ => None,
            });
            if let Some(due) = scheduled.filter(|due| *due >= 1) {
                let mut m = log.to_vec();
                m[i].time = due - 1;
                add(Kind::StartedEarly, i, m, Expect::Caught);
            }
        }
    }
    out
}

/// Runs every mutation of `log`; returns the kinds that were caught at least once.
fn check_mutations(log: &[Envelope]) -> Vec<Kind> {
    assert!(check_finished_log(log).is_empty(), "the base log must be valid");
    let mut caught = Vec::new();
    for m in mutations(log) {
        let violations = check_finished_log(&m.log);
        match m.expect {
            Expect::Caught => assert!(
                !violations.is_empty(),
                "{:?} at {} ({}) was not caught",
                m.kind,
                m.at,
                log[m.at].kind()
            ),
            Expect::Valid => assert!(
                violations.is_empty(),
                "{:?} at {} ({}) breaks no rule, yet: {violations:#?}",
                m.kind,
                m.at,
                log[m.at].kind()
            ),
            Expect::Either => {}
        }
        if !violations.is_empty() {
            caught.push(m.kind);
            assert_live_agrees(&m.log, violations[0].seq);
        }
    }
    caught.sort();
    caught.dedup();
    caught
}

/// The live validator rejects the first event the offline checker faults, and no earlier one.
fn assert_live_agrees(log: &[Envelope], first_violation: u64) {
    let mut live = LiveValidator::new();
    for event in log {
        let batch = std::slice::from_ref(event);
        match live.check(batch) {
            Ok(()) => live.commit(batch),
            Err(rejection) => {
                assert_eq!(rejection.seq, first_violation, "{rejection}");
                return;
            }
        }
    }
    // The only violation the live validator cannot see is a turn left open at the end.
    let mut checker = Checker::new();
    log.iter().for_each(|e| assert!(checker.push(e).is_empty()));
    assert!(!checker.finish().is_empty());
}

/// A few fixed valid histories with every recovery path.
fn seeds() -> Vec<Vec<Envelope>> {
    (0u8..24).map(|s| generate(&[s, s.wrapping_mul(7), 3, s ^ 5, 1, 2, 0, s % 3, 4, 6])).collect()
}

#[test]
fn every_mutation_kind_is_caught_and_no_harmless_one_is_flagged() {
    let mut caught = Vec::new();
    for log in seeds() {
        caught.extend(check_mutations(&log));
    }
    caught.sort();
    caught.dedup();
    assert_eq!(
        caught,
        [
            Kind::Drop,
            Kind::Duplicate,
            Kind::Swap,
            Kind::RetryNumber,
            Kind::RetryId,
            Kind::StartedEarly
        ]
    );
}

#[test]
fn without_renumbering_every_drop_duplicate_and_swap_breaks_seq() {
    for log in seeds() {
        for i in 0..log.len() {
            let mut dropped = log.clone();
            dropped.remove(i);
            // Dropping the last event leaves seq contiguous (it is a prefix of the log).
            if i + 1 < log.len() {
                assert!(!check_finished_log(&dropped).is_empty(), "drop {i}");
            }

            let mut doubled = log.clone();
            doubled.insert(i, log[i].clone());
            assert!(!check_finished_log(&doubled).is_empty(), "duplicate {i}");

            if i + 1 < log.len() {
                let mut swapped = log.clone();
                swapped.swap(i, i + 1);
                assert!(!check_finished_log(&swapped).is_empty(), "swap {i}");
            }
        }
    }
}

#[test]
fn the_generator_covers_every_recovery_path() {
    let logs = seeds();
    let all: Vec<&Envelope> = logs.iter().flatten().collect();
    let has = |f: &dyn Fn(&Event) -> bool| all.iter().any(|e| f(&e.event));
    assert!(has(&|e| matches!(e, Event::LlmRetry(r) if r.plugin == "auto-retry")));
    assert!(has(&|e| matches!(e, Event::LlmRetry(r) if r.mode == "always")));
    assert!(has(
        &|e| matches!(e, Event::LlmRetry(r) if r.plugin == "llm-retry" && r.mode == "normal")
    ));
    assert!(has(&|e| matches!(e, Event::LlmRetry(r) if r.retry >= 2)));
    assert!(has(&|e| matches!(e, Event::ContextCompacted(_))));
    assert!(has(&|e| matches!(e, Event::ToolResult(_))));
    assert!(has(
        &|e| matches!(e, Event::TurnEnd(t) if matches!(t.reason, rein_event::event::TurnEndReason::Aborted { .. }))
    ));
    assert!(has(
        &|e| matches!(e, Event::TurnEnd(t) if matches!(t.reason, rein_event::event::TurnEndReason::Error { .. }))
    ));
    assert!(has(&|e| matches!(e, Event::RequestStart(r) if r.provider == "deepseek")));
    assert!(has(&|e| matches!(e, Event::StepStart(s) if s.step >= 2)));
}

fn choices() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..160)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn generated_histories_pass_offline(choices in choices()) {
        let log = generate(&choices);
        let violations = check_finished_log(&log);
        prop_assert!(violations.is_empty(), "{:#?}", violations);
    }

    #[test]
    fn generated_histories_pass_live_in_any_batching(choices in choices(), cuts in proptest::collection::vec(1usize..5, 1..40)) {
        let log = generate(&choices);
        let mut live = LiveValidator::new();
        let mut at = 0;
        for cut in cuts.iter().cycle() {
            if at >= log.len() {
                break;
            }
            let batch = &log[at..(at + cut).min(log.len())];
            prop_assert_eq!(live.check(batch), Ok(()));
            live.commit(batch);
            at += cut;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn mutations_of_generated_histories_are_caught(choices in choices()) {
        check_mutations(&generate(&choices));
    }
}
