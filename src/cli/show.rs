//! `rein show LOG…`: the turn-tail panels of session logs in the terminal.
//!
//! Each log gets a header line, then one panel per turn that retried or failed, collapsed to its
//! summary line unless `--expand` (the format is [`rein::show`], shared with `rein chat` and the
//! examples). Colour follows `--color`: `auto` colours a terminal unless `NO_COLOR` is set
//! (`CLICOLOR_FORCE` forces it), through `anstream`, which strips the styles when colour is off.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anstream::{AutoStream, ColorChoice};

use super::logs;

/// Output and exit status, for `--help`.
const AFTER_HELP: &str = "\
Output: on stdout, for each log, a header line `LOG: session ID · N turns, M retried or
failed`, then one panel per turn that retried or failed: `▸ turn N · Retried 3 times this
turn · finally failed with RATE_LIMIT` (or `· recovered`, `· cancelled during the wait`…). With --expand, every
attempt follows on its own line (origin, attempt N/M of its retry chain, wait, turn·step,
provider, code, HTTP status, request id) with the provider's message verbatim below it; control
characters in provider text are shown as escapes (\\u{1b}).

Origins: `harness` (the first attempt of a step: nothing retried it), the plugin whose llm/retry
was started before the attempt, `fallback` (after a route/switched), `compaction` (after a
context/compacted), `unrecorded` (a plugin retried without writing any record). A retry whose
wait was cut short is shown as `never started`.

On stderr: `warning: ...` for a torn last line (a crash during an append), which is left out,
and `error: ...` for a log that cannot be read.

Exit status: 0 when every log was shown; 2 when a log cannot be read (missing, or a corrupt
line: the error names the file and line; the other logs are still shown), or a usage error.";

/// When to colour the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ColorWhen {
    /// On a terminal, unless NO_COLOR is set (CLICOLOR_FORCE forces it).
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// Arguments of `rein show`.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub(crate) struct ShowArgs {
    /// JSONL session logs.
    #[arg(value_name = "LOG", required = true)]
    logs: Vec<PathBuf>,
    /// Show every line of each panel, not only its summary.
    #[arg(short, long)]
    expand: bool,
    /// When to colour the output.
    #[arg(long, value_name = "WHEN", value_enum, default_value_t = ColorWhen::Auto)]
    color: ColorWhen,
}

/// Runs `rein show`.
pub(crate) fn run(args: &ShowArgs) -> ExitCode {
    let choice = match args.color {
        ColorWhen::Auto => ColorChoice::Auto,
        ColorWhen::Always => ColorChoice::Always,
        ColorWhen::Never => ColorChoice::Never,
    };
    let mut out = AutoStream::new(io::stdout().lock(), choice);
    let mut err = io::stderr().lock();
    let mut unreadable = 0;
    for path in &args.logs {
        match logs::read(path) {
            Ok(log) => {
                for warning in &log.warnings {
                    writeln!(err, "warning: {warning}").ok();
                }
                // A closed pipe cannot change the verdict; the exit status still tells it.
                write!(out, "{}", rein::show::render(&log.name, &log.events, args.expand)).ok();
            }
            Err(error) => {
                unreadable += 1;
                writeln!(err, "error: {error}").ok();
            }
        }
    }
    out.flush().ok();
    if unreadable > 0 { ExitCode::from(2) } else { ExitCode::SUCCESS }
}
