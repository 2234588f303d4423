//! `rein scenario run FILE [--json] [--log PATH]`: runs a scenario file on virtual time.
//!
//! Output and exit status are in [`RUN_HELP`] (`rein scenario run --help`); the decisions behind
//! them are in `docs/runtime-semantics.md` ("Command line").
//!
//! # Why violations do not change the exit status
//!
//! The exit status says whether the scenario *ran*; what happened is the report's business, and
//! `invariant.ok` is in it. A script that wants to fail on a violation reads the report (or runs
//! `rein check` on the `--log`, which exits 1).
//!
//! # Why the log is written after the run, through a temporary file
//!
//! The run happens on virtual time with an in-memory store (no real I/O may let the paused clock
//! jump), so the log exists whole only when the run ends. It is then written to a temporary file
//! beside `PATH` and renamed over it ([`output_file::write`]): a crash or a kill while writing
//! leaves the previous log, never a cut-off one.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rein::runtime::event::Envelope;
use rein_cli::scenario::{RunError, Scenario};

use super::output_file::{self, Access};

/// What `rein scenario run --help` says after the options: output and exit status.
pub(crate) const RUN_HELP: &str = "\
Output:
  stdout   with --json, the report: one JSON object on one line (turns, requests, retries,
           retriesStarted, configErrors, messages, invariant, events, endMs); without it, a
           summary for a person (turns, manual retries, tool calls, retries, configuration
           errors, the invariant verdict).
  stderr   `error: ...` (an invalid file, naming the field path; a failed run; a log that could
           not be written), `warning: ...` (a plugin configuration value that could not be used
           and what was used instead, naming the field path) and `note: ...` (an action that
           did not apply, a stalled turn).
  --log    the session log, one JSON event per line. It is written to a temporary file in the
           same directory and renamed over PATH when complete: PATH holds the previous log or
           the whole new one, never part of one. A PATH that is a symbolic link is refused.

Runs are deterministic: two runs of one file print the same report and write the same log,
byte for byte (retryIds included: they come from the scenario's seed).

Exit status:
  0  the scenario ran, whatever its outcome (failed turns, invariant violations: see the report)
  1  internal fault: the runtime failed, or the log could not be written
  2  the file cannot be read (missing, not a regular file, over 16 MiB) or is not a valid
     scenario, or a usage error";

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
    #[command(after_help = RUN_HELP)]
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
    /// Also write the session log as JSONL to PATH (replaced whole, never through a link).
    #[arg(long, value_name = "PATH")]
    log: Option<PathBuf>,
}

const INVALID: u8 = 2;
const FAULT: u8 = 1;

/// The longest scenario file read, in bytes: 16 MiB, far above any scenario a person writes
/// (a file of a thousand turns is a few hundred KiB). A longer file, or one that is not a
/// regular file (a FIFO, `/dev/zero`), is refused before it is read.
pub(crate) const MAX_SCENARIO_BYTES: u64 = 16 << 20;

/// Runs `rein scenario`.
pub(crate) fn run(args: &ScenarioArgs) -> ExitCode {
    match &args.command {
        ScenarioCommand::Run(run) => run_file(run),
    }
}

fn run_file(args: &RunArgs) -> ExitCode {
    let file = args.file.display().to_string();
    let text = match rein::runtime::file::read_to_string(&args.file, MAX_SCENARIO_BYTES) {
        Ok(text) => text,
        Err(e) => return fail(INVALID, &format!("{file}: cannot read the scenario: {e}")),
    };
    run_text(&file, &text, args.json, args.log.as_deref().map(|path| (path, Access::Usual)))
}

/// Runs the scenario `text` (named `file` in messages), prints the report or a summary, and
/// writes the log to `log` when given (a file with that access). Shared by `rein scenario run`
/// and `rein demo`.
pub(crate) fn run_text(
    file: &str,
    text: &str,
    json: bool,
    log: Option<(&Path, Access)>,
) -> ExitCode {
    run_text_with(file, text, json, |events| match log {
        Some((path, access)) => output_file::write(path, access, |out| write_log(out, events))
            .map_err(|e| e.to_string()),
        None => Ok(()),
    })
}

/// [`run_text`], the run's log handed to `write` (before anything is printed; its error fails
/// the run, "cannot write the log: …").
pub(crate) fn run_text_with(
    file: &str,
    text: &str,
    json: bool,
    write: impl FnOnce(&[Envelope]) -> Result<(), String>,
) -> ExitCode {
    let scenario = match Scenario::from_json(text) {
        Ok(scenario) => scenario,
        // The error quotes the file (an unknown key, a bad value): cut to a readable length.
        Err(e) => return fail(INVALID, &format!("{file}: invalid scenario: {}", quote(&e))),
    };
    let outcome = match rein_cli::scenario::runner().run(&scenario) {
        Ok(outcome) => outcome,
        Err(RunError::Invalid(e)) => {
            return fail(INVALID, &format!("{file}: invalid scenario: {}", quote(&e)));
        }
        Err(e) => return fail(FAULT, &format!("{file}: {e}")),
    };
    if let Err(e) = write(&outcome.events) {
        return fail(FAULT, &format!("cannot write the log: {e}"));
    }
    for warning in &outcome.warnings {
        eprintln!("warning: {warning}");
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
        super::summary::summary(file, &outcome)
    };
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(out.as_bytes()).and_then(|()| stdout.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe (`| head`) is not worth a message, but it is not a success either.
        Err(_) => ExitCode::from(FAULT),
    }
}

/// An error about the scenario file, cut to a readable length (it quotes the file).
fn quote(error: &dyn std::fmt::Display) -> String {
    rein::runtime::quote::message(&error.to_string()).into_owned()
}

fn fail(code: u8, message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(code)
}

/// Writes the log as JSONL, exactly as the JSONL store would: one event per line, each line
/// ending in `\n`.
fn write_log(out: &mut dyn Write, events: &[Envelope]) -> std::io::Result<()> {
    for event in events {
        let line = rein::runtime::store::line::encode(event).map_err(std::io::Error::other)?;
        out.write_all(line.as_bytes())?;
        out.write_all(b"\n")?;
    }
    Ok(())
}
