//! How events nest and are numbered: `seq`, `session/start`, turns, steps and attempts.
//!
//! A session log is a sequence of turns; a turn a sequence of steps; a step a sequence of
//! attempts. Each level is numbered 1, 2, 3… and closes before the next one opens, so a reader
//! can always tell which turn, step and attempt an event belongs to from the last open ones.

use rein_event::event::{Envelope, Event, LOG_FORMAT, StepRef};
use rein_event::plural::count;

use crate::catalogue::Rule;
use crate::state::State;
use crate::violation::Violation;

/// Checks `event` against the session rules.
pub(super) fn check(state: &State, event: &Envelope, out: &mut Vec<Violation>) {
    seq(state, event, out);
    session_start(state, event, out);
    match &event.event {
        Event::TurnStart(t) => turn_start(state, event, t.turn, out),
        Event::TurnEnd(t) => turn_end(state, event, t.turn, out),
        Event::StepStart(s) => step_start(state, event, *s, out),
        Event::StepEnd(s) => step_end(state, event, *s, out),
        Event::RequestStart(r) => request_start(state, event, r.turn, r.step, r.attempt, out),
        Event::AssistantChunk(c) => in_open_step(state, event, c.turn, c.step, out),
        Event::AssistantMessage(m) => in_open_step(state, event, m.turn, m.step, out),
        Event::ToolCall(c) => in_open_step(state, event, c.turn, c.step, out),
        Event::ToolResult(r) => in_open_step(state, event, r.turn, r.step, out),
        Event::ContextCompacted(c) => in_open_step(state, event, c.turn, c.step, out),
        Event::AgentIdle(_) => {
            if let Some(open) = state.open_turn {
                out.push(Violation::new(
                    event,
                    Rule::IdleOutsideTurn,
                    format!(
                        "agent/idle while turn {} is open (turn/start seq {})",
                        open.turn, open.seq
                    ),
                ));
            }
        }
        _ => {}
    }
}

fn seq(state: &State, event: &Envelope, out: &mut Vec<Violation>) {
    let expected = state.next_seq.unwrap_or(0);
    let ok = if state.resync { event.seq >= expected } else { event.seq == expected };
    if !ok {
        let message = match state.last_seq {
            None => format!("seq {} must be 0: a log starts at seq 0", event.seq),
            Some(_) if state.resync => {
                format!("seq {} must be at least {expected} (after an unreadable line)", event.seq)
            }
            Some(last) => format!("seq {} must be {expected}: it follows seq {last}", event.seq),
        };
        out.push(Violation::new(event, Rule::SeqContiguous, message));
    }
}

fn session_start(state: &State, event: &Envelope, out: &mut Vec<Violation>) {
    match &event.event {
        Event::SessionStart(start) => {
            if state.events > 0 {
                out.push(Violation::new(
                    event,
                    Rule::SessionStartFirst,
                    format!(
                        "session/start may only be the first event; this log already has {}",
                        count(state.events, "event", "events")
                    ),
                ));
            }
            if start.format != LOG_FORMAT {
                out.push(Violation::new(
                    event,
                    Rule::LogFormatKnown,
                    format!(
                        "log format {} is unknown to this checker (it reads format {LOG_FORMAT})",
                        start.format
                    ),
                ));
            }
        }
        other if state.events == 0 => out.push(Violation::new(
            event,
            Rule::SessionStartFirst,
            format!("the first event must be session/start, not {}", other.kind()),
        )),
        _ => {}
    }
}

fn turn_start(state: &State, event: &Envelope, turn: u32, out: &mut Vec<Violation>) {
    if let Some(open) = state.open_turn {
        out.push(Violation::new(
            event,
            Rule::TurnsDoNotNest,
            format!(
                "turn {turn} starts while turn {} is open (turn/start seq {})",
                open.turn, open.seq
            ),
        ));
    }
    let expected = state.last_turn.saturating_add(1);
    if turn != expected {
        let after = match state.last_turn {
            0 => "the first turn is 1".to_owned(),
            last => format!("it follows turn {last}"),
        };
        out.push(Violation::new(
            event,
            Rule::TurnNumberedInOrder,
            format!("turn {turn} must be {expected}: {after}"),
        ));
    }
}

fn turn_end(state: &State, event: &Envelope, turn: u32, out: &mut Vec<Violation>) {
    match state.open_turn {
        None => out.push(Violation::new(
            event,
            Rule::TurnEndMatchesTurn,
            format!("turn/end of turn {turn}, but no turn is open"),
        )),
        Some(open) if open.turn != turn => out.push(Violation::new(
            event,
            Rule::TurnEndMatchesTurn,
            format!("turn/end of turn {turn}, but the open turn is {}", open.turn),
        )),
        Some(_) => {}
    }
    if let Some(step) = &state.open_step {
        out.push(Violation::new(
            event,
            Rule::StepClosedBeforeTurnEnd,
            format!(
                "turn {turn} ends while step {} of turn {} is open (no step/end)",
                step.step, step.turn
            ),
        ));
    }
}

fn step_start(state: &State, event: &Envelope, s: StepRef, out: &mut Vec<Violation>) {
    let in_turn = match state.open_turn {
        None => {
            out.push(Violation::new(
                event,
                Rule::StepInOpenTurn,
                format!("step {} of turn {} starts, but no turn is open", s.step, s.turn),
            ));
            false
        }
        Some(open) if open.turn != s.turn => {
            out.push(Violation::new(
                event,
                Rule::StepInOpenTurn,
                format!(
                    "step {} names turn {}, but the open turn is {}",
                    s.step, s.turn, open.turn
                ),
            ));
            false
        }
        Some(_) => true,
    };
    if let Some(open) = &state.open_step {
        out.push(Violation::new(
            event,
            Rule::StepsDoNotNest,
            format!(
                "step {} starts while step {} of turn {} is open (no step/end)",
                s.step, open.step, open.turn
            ),
        ));
    }
    let expected = state.last_step.saturating_add(1);
    if in_turn && s.step != expected {
        let after = match state.last_step {
            0 => format!("the first step of turn {} is 1", s.turn),
            last => format!("it follows step {last} of turn {}", s.turn),
        };
        out.push(Violation::new(
            event,
            Rule::StepNumberedInOrder,
            format!("step {} must be {expected}: {after}", s.step),
        ));
    }
}

fn step_end(state: &State, event: &Envelope, s: StepRef, out: &mut Vec<Violation>) {
    match &state.open_step {
        None => out.push(Violation::new(
            event,
            Rule::StepEndMatchesStep,
            format!("step/end of turn {} step {}, but no step is open", s.turn, s.step),
        )),
        Some(open) if !open.is(s.turn, s.step) => out.push(Violation::new(
            event,
            Rule::StepEndMatchesStep,
            format!(
                "step/end of turn {} step {}, but the open step is turn {} step {}",
                s.turn, s.step, open.turn, open.step
            ),
        )),
        Some(_) => {}
    }
}

fn request_start(
    state: &State,
    event: &Envelope,
    turn: u32,
    step: u32,
    attempt: u32,
    out: &mut Vec<Violation>,
) {
    match &state.open_step {
        None => out.push(Violation::new(
            event,
            Rule::RequestInOpenStep,
            format!("attempt {attempt} of turn {turn} step {step} starts, but no step is open"),
        )),
        Some(open) if !open.is(turn, step) => out.push(Violation::new(
            event,
            Rule::RequestInOpenStep,
            format!(
                "attempt {attempt} names turn {turn} step {step}, but the open step is turn {} step {}",
                open.turn, open.step
            ),
        )),
        Some(open) => {
            let previous = open.attempt.as_ref().map_or(0, |a| a.number);
            let expected = previous.saturating_add(1);
            if attempt != expected {
                let after = match previous {
                    0 => format!("the first attempt of turn {turn} step {step} is 1"),
                    p => format!("it follows attempt {p} of turn {turn} step {step}"),
                };
                out.push(Violation::new(
                    event,
                    Rule::AttemptNumberedInOrder,
                    format!("attempt {attempt} must be {expected}: {after}"),
                ));
            }
        }
    }
}

fn in_open_step(state: &State, event: &Envelope, turn: u32, step: u32, out: &mut Vec<Violation>) {
    match &state.open_step {
        None => out.push(Violation::new(
            event,
            Rule::EventInOpenStep,
            format!("{} of turn {turn} step {step}, but no step is open", event.kind()),
        )),
        Some(open) if !open.is(turn, step) => out.push(Violation::new(
            event,
            Rule::EventInOpenStep,
            format!(
                "{} names turn {turn} step {step}, but the open step is turn {} step {}",
                event.kind(),
                open.turn,
                open.step
            ),
        )),
        Some(_) => {}
    }
}
