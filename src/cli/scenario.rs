//! `rein scenario run FILE [--json] [--log PATH]`: runs a scenario file (SPEC §10) on virtual
//! time.
//!
//! - stdout: with `--json`, the report as one JSON object on one line; otherwise a short summary
//!   for a person (turns and how they ended, retries, configuration errors, the invariant
//!   verdict).
//! - stderr: `error: …` when the file is invalid (naming the field path) or the run failed, and
//!   `note: …` for what the report has no place for (an action that did not apply, a stall).
//! - `--log PATH`: the session log, one JSON event per line (the JSONL store's format).
//!
//! Exit status: 0 when the scenario ran, whatever its outcome (a turn that ended in an error,
//! even invariant violations — the report says so); 2 when the file cannot be read or is not a
//! valid scenario; 1 for an internal fault (the runtime failed, the log could not be written).
//!
//! # Why violations do not change the exit status
//!
//! SPEC §10 makes the exit status say whether the scenario *ran*; what happened is the report's
//! business, and `invariant.ok` is in it. A script that wants to fail on a violation reads the
//! report (or runs `rein check` on the `--log`, which exits 1).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rein::runtime::event::{CancelCause, Envelope, TurnEndReason};
use rein::scenario::{Outcome, Report, RunError, Scenario};

/// Arguments of `rein scenario`.
#[derive(Debug, clap::Args)]
pub(crate) struct ScenarioArgs {
    #[command(subcommand)]
    command: ScenarioCommand,
}

/// The `rein scenario` subcommands.
#[derive(Debug, clap::Subcommand)]
enum ScenarioCommand {
    /// Run a scenario file on virtual time and report what happened.
    Run(RunArgs),
}

/// Arguments of `rein scenario run`.
#[derive(Debug, clap::Args)]
struct RunArgs {
    /// The scenario file (JSON).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Print the report as one JSON object on stdout.
    #[arg(long)]
    json: bool,
    /// Also write the session log as JSONL to PATH.
    #[arg(long, value_name = "PATH")]
    log: Option<PathBuf>,
}

const INVALID: u8 = 2;
const FAULT: u8 = 1;

/// Runs `rein scenario`.
pub(crate) fn run(args: &ScenarioArgs) -> ExitCode {
    match &args.command {
        ScenarioCommand::Run(run) => run_file(run),
    }
}

fn run_file(args: &RunArgs) -> ExitCode {
    let file = args.file.display().to_string();
    let text = match std::fs::read_to_string(&args.file) {
        Ok(text) => text,
        Err(e) => return fail(INVALID, &format!("{file}: cannot read the scenario: {e}")),
    };
    run_text(&file, &text, args.json, args.log.as_deref())
}

/// Runs the scenario `text` (named `file` in messages), prints the report or a summary, and
/// writes the log to `log` when given. Shared by `rein scenario run` and `rein demo`.
pub(crate) fn run_text(file: &str, text: &str, json: bool, log: Option<&Path>) -> ExitCode {
    let scenario = match Scenario::from_json(text) {
        Ok(scenario) => scenario,
        Err(e) => return fail(INVALID, &format!("{file}: invalid scenario: {e}")),
    };
    let outcome = match rein::scenario::runner().run(&scenario) {
        Ok(outcome) => outcome,
        Err(RunError::Invalid(e)) => {
            return fail(INVALID, &format!("{file}: invalid scenario: {e}"));
        }
        Err(e) => return fail(FAULT, &format!("{file}: {e}")),
    };
    if let Some(path) = log {
        if let Err(e) = write_log(path, &outcome.events) {
            return fail(FAULT, &format!("{}: cannot write the log: {e}", path.display()));
        }
    }
    for note in &outcome.notes {
        eprintln!("note: {note}");
    }
    let out = if json {
        match serde_json::to_string(&outcome.report) {
            Ok(json) => json + "\n",
            Err(e) => return fail(FAULT, &format!("cannot serialize the report: {e}")),
        }
    } else {
        summary(file, &outcome)
    };
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(out.as_bytes()).and_then(|()| stdout.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe (`| head`) is not worth a message, but it is not a success either.
        Err(_) => ExitCode::from(FAULT),
    }
}

fn fail(code: u8, message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(code)
}

/// Writes the log as JSONL: one event per line, each line ending in `\n`.
fn write_log(path: &Path, events: &[Envelope]) -> std::io::Result<()> {
    let mut text = String::new();
    for event in events {
        text.push_str(&serde_json::to_string(event).map_err(std::io::Error::other)?);
        text.push('\n');
    }
    std::fs::write(path, text)
}

/// How many rows of one kind the summary lists before it says "… and N more".
const LISTED: usize = 10;

/// The summary printed without `--json`: counts, then the turns (all of them when there are few;
/// otherwise a tally by outcome and the turns that did not complete), the retries, the
/// configuration errors and the invariant verdict — each list cut at [`LISTED`] rows.
fn summary(file: &str, outcome: &Outcome) -> String {
    let report: &Report = &outcome.report;
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
        let _ = writeln!(out, "  turn {}: {}", turn.turn, reason(&turn.reason));
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
mod tests {
    use super::*;
    use rein::runtime::failure::Failure;
    use rein::runtime::scenario::report::{
        ConfigErrorRow, InvariantRow, RetryRow, TurnRow, ViolationRow,
    };

    fn report() -> Report {
        Report {
            turns: vec![
                TurnRow {
                    turn: 1,
                    reason: TurnEndReason::Error {
                        failure: Failure::new("SERVER", "busy three").unwrap(),
                    },
                },
                TurnRow {
                    turn: 2,
                    reason: TurnEndReason::Aborted {
                        cause: CancelCause::Hook { reason: "b".into() },
                    },
                },
            ],
            requests: Vec::new(),
            retries: vec![RetryRow {
                at_ms: 30,
                turn: 1,
                step: 1,
                plugin: "llm-retry".into(),
                retry_id: "id".into(),
                retry: 1,
                max_retries: Some(2),
                mode: "normal".into(),
                policy_key: "k".into(),
                delay_ms: 1.5,
                code: "RATE_LIMIT".into(),
                provider: "mock".into(),
            }],
            retries_started: Vec::new(),
            config_errors: vec![ConfigErrorRow {
                at_ms: 100,
                plugin: "auto-retry".into(),
                error: "extraRetries: too big".into(),
            }],
            messages: Vec::new(),
            invariant: InvariantRow {
                ok: false,
                violations: vec![ViolationRow {
                    seq: 7,
                    kind: "llm/retry".into(),
                    rule: "retry-continues-chain".into(),
                    message: "retry 3 must equal 2".into(),
                }],
            },
            events: 17,
            end_ms: 1500,
        }
    }

    #[test]
    fn the_summary_names_every_turn_retry_config_error_and_violation() {
        let outcome = Outcome { report: report(), events: Vec::new(), notes: Vec::new() };
        assert_eq!(
            summary("s.json", &outcome),
            "scenario s.json: 2 turns, 0 requests, 1 retry, 17 events, ended at 1500 ms (virtual)\n\
             \x20 turn 1: error SERVER: busy three\n\
             \x20 turn 2: aborted (hook: b)\n\
             \x20 retry 1 by llm-retry at 30 ms: RATE_LIMIT on mock, next attempt after 1.5 ms\n\
             \x20 config error at 100 ms: auto-retry: extraRetries: too big\n\
             \x20 invariant: 1 rule broken\n\
             \x20   llm/retry seq 7: retry 3 must equal 2 [retry-continues-chain]\n"
        );
    }

    #[test]
    fn many_turns_are_tallied_and_only_the_unfinished_ones_listed() {
        let mut report = report();
        report.turns = (1..=30)
            .map(|turn| TurnRow {
                turn,
                reason: if turn % 2 == 0 || turn == 29 {
                    TurnEndReason::Completed
                } else {
                    TurnEndReason::MaxSteps
                },
            })
            .collect();
        report.retries.clear();
        report.config_errors.clear();
        report.invariant = InvariantRow { ok: true, violations: Vec::new() };
        let text = summary("s.json", &Outcome { report, events: Vec::new(), notes: Vec::new() });
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], "  turns: 14 max-steps, 16 completed");
        assert_eq!(lines[2], "  turn 1: max-steps");
        assert_eq!(lines[11], "  turn 19: max-steps");
        assert_eq!(lines[12], "  … and 4 more");
        assert_eq!(lines[13], "  invariant: ok");
        assert_eq!(lines.len(), 14);
    }

    #[test]
    fn plurals_read_naturally() {
        assert_eq!(plural(0, "retry"), "0 retries");
        assert_eq!(plural(1, "retry"), "1 retry");
        assert_eq!(plural(3, "turn"), "3 turns");
    }
}
