//! The summary `rein scenario run` and `rein demo` print without `--json`: what a person reads.
//!
//! One header line (counts, virtual end time), then indented rows: the turns and how they ended
//! (a turn that is a manual retry says so), the tool calls with their arguments and results, the
//! retries, the route switches, the configuration errors and the invariant verdict. Each list is cut at [`LISTED`]
//! rows. The report has no field for manual retries, tool results or route switches, so those
//! are read from the session log the run wrote — the same events `--log` saves.

use std::collections::HashMap;
use std::fmt::Write as _;

use rein::runtime::event::{CancelCause, Envelope, Event, ToolResult, TurnEndReason};
use rein_cli::scenario::{Report, RunOutcome};

/// How many rows of one kind the summary lists before it says "… and N more".
const LISTED: usize = 10;

/// How many characters of a tool's arguments or output a row shows.
const CLIPPED: usize = 80;

/// The summary of `outcome`, the run of the scenario named `file`.
pub(crate) fn summary(file: &str, outcome: &RunOutcome) -> String {
    let report: &Report = &outcome.report;
    let retried = manual_retries(&outcome.events);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "scenario {file}: {}, {}, {}, {} events, ended at {} ms (virtual)",
        plural(report.turns.len(), "turn"),
        plural(report.requests.len(), "request"),
        plural(report.retries.len(), "retry"),
        report.events,
        report.end_ms
    );
    let turns: Vec<_> = if report.turns.len() <= LISTED {
        report.turns.iter().collect()
    } else {
        let mut tally: Vec<(&str, usize)> = Vec::new();
        for turn in &report.turns {
            let kind = kind(&turn.reason);
            match tally.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, n)) => *n += 1,
                None => tally.push((kind, 1)),
            }
        }
        let tally: Vec<String> = tally.iter().map(|(k, n)| format!("{n} {k}")).collect();
        let _ = writeln!(out, "  turns: {}", tally.join(", "));
        report.turns.iter().filter(|t| t.reason != TurnEndReason::Completed).collect()
    };
    list(&mut out, &turns, |out, turn| {
        let retry = if retried.contains(&turn.turn) && turn.turn > 1 {
            format!(" (manual retry of turn {})", turn.turn - 1)
        } else {
            String::new()
        };
        let _ = writeln!(out, "  turn {}{retry}: {}", turn.turn, reason(&turn.reason));
    });
    list(&mut out, &tool_calls(&outcome.events), |out, call| {
        let _ = writeln!(out, "  {call}");
    });
    list(&mut out, &report.retries.iter().collect::<Vec<_>>(), |out, retry| {
        let _ = writeln!(
            out,
            "  retry {} by {} at {} ms: {} on {}, next attempt after {} ms",
            retry.retry,
            retry.plugin,
            retry.at_ms,
            retry.code,
            retry.provider,
            rein::runtime::json_number::format(retry.delay_ms)
        );
    });
    list(&mut out, &route_switches(&outcome.events), |out, switch| {
        let _ = writeln!(out, "  {switch}");
    });
    list(&mut out, &report.config_errors.iter().collect::<Vec<_>>(), |out, error| {
        let _ = writeln!(
            out,
            "  config error at {} ms: {}: {}",
            error.at_ms, error.plugin, error.error
        );
    });
    if report.invariant.ok {
        out.push_str("  invariant: ok\n");
    } else {
        let _ = writeln!(
            out,
            "  invariant: {} broken",
            plural(report.invariant.violations.len(), "rule")
        );
        list(&mut out, &report.invariant.violations.iter().collect::<Vec<_>>(), |out, v| {
            let _ = writeln!(out, "    {} seq {}: {} [{}]", v.kind, v.seq, v.message, v.rule);
        });
    }
    out
}

/// The turns of `events` that are manual retries: a `turn/start` with no `user/message` of its
/// own (each `user/message` opens one turn; a retry opens a turn without one).
fn manual_retries(events: &[Envelope]) -> Vec<u32> {
    let mut prompts = 0usize;
    let mut retries = Vec::new();
    for envelope in events {
        match &envelope.event {
            Event::UserMessage(_) => prompts += 1,
            Event::TurnStart(start) if prompts == 0 => retries.push(start.turn),
            Event::TurnStart(_) => prompts -= 1,
            _ => {}
        }
    }
    retries
}

/// Each `tool/call` of `events` as a row: `tool call <name> <arguments> in turn T, step S (<id>):
/// <output>` — the output quoted, `error <output>` when the tool failed, `no result` when none
/// was logged (the turn was cancelled first).
fn tool_calls(events: &[Envelope]) -> Vec<String> {
    let results: HashMap<(u32, u32, &str), &ToolResult> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolResult(r) => Some(((r.turn, r.step, r.id.as_str()), r)),
            _ => None,
        })
        .collect();
    let mut rows = Vec::new();
    for envelope in events {
        let Event::ToolCall(call) = &envelope.event else { continue };
        let outcome = match results.get(&(call.turn, call.step, call.id.as_str())) {
            Some(r) if r.is_error => format!("error {}", clip(&quoted(&r.output))),
            Some(r) => clip(&quoted(&r.output)),
            None => "no result".to_owned(),
        };
        rows.push(format!(
            "tool call {} {} in turn {}, step {} ({}): {outcome}",
            call.name,
            clip(&call.arguments.to_string()),
            call.turn,
            call.step,
            call.id,
        ));
    }
    rows
}

/// Each `route/switched` of `events` as a row: `route switched at <ms> ms in turn T, step S:
/// <from> → <to> (<code>, <reason>)`.
fn route_switches(events: &[Envelope]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Event::RouteSwitched(s) => Some(format!(
                "route switched at {} ms in turn {}, step {}: {} → {} ({}, {})",
                e.time, s.turn, s.step, s.from, s.to, s.code, s.reason
            )),
            _ => None,
        })
        .collect()
}

/// `text` as a JSON string (quoted, control characters escaped: one line whatever it holds).
fn quoted(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// `text` cut to [`CLIPPED`] characters, with `…` when cut.
fn clip(text: &str) -> String {
    match text.char_indices().nth(CLIPPED) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// Writes up to [`LISTED`] rows, then how many were left out.
fn list<T>(out: &mut String, rows: &[T], mut row: impl FnMut(&mut String, &T)) {
    for item in rows.iter().take(LISTED) {
        row(out, item);
    }
    if rows.len() > LISTED {
        let _ = writeln!(out, "  … and {} more", rows.len() - LISTED);
    }
}

/// The `kind` of a turn's end, as in the report.
fn kind(reason: &TurnEndReason) -> &'static str {
    match reason {
        TurnEndReason::Completed => "completed",
        TurnEndReason::Error { .. } => "error",
        TurnEndReason::Aborted { .. } => "aborted",
        TurnEndReason::MaxSteps => "max-steps",
        TurnEndReason::Interrupted => "interrupted",
    }
}

fn reason(reason: &TurnEndReason) -> String {
    match reason {
        TurnEndReason::Completed => "completed".to_owned(),
        TurnEndReason::Error { failure } => {
            format!("error {}: {}", failure.code(), failure.message())
        }
        TurnEndReason::Aborted { cause } => format!(
            "aborted ({})",
            match cause {
                CancelCause::User => "user".to_owned(),
                CancelCause::Parent => "parent".to_owned(),
                CancelCause::Disposed => "disposed".to_owned(),
                CancelCause::Hook { reason } => format!("hook: {reason}"),
            }
        ),
        TurnEndReason::MaxSteps => "max-steps".to_owned(),
        TurnEndReason::Interrupted => "interrupted".to_owned(),
    }
}

fn plural(n: usize, noun: &str) -> String {
    match (n, noun) {
        (1, _) => format!("1 {noun}"),
        (_, "retry") => format!("{n} retries"),
        _ => format!("{n} {noun}s"),
    }
}

#[cfg(test)]
mod tests;
