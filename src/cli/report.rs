//! `rein report LOG… -o FILE`: one self-contained HTML page for session logs (the page is built
//! by [`rein_cli::html::report`]).
//!
//! Every log is read first; if one cannot be read, nothing is written (an existing report is
//! not replaced by one that silently lacks a log). The page is written to a temporary file in
//! the output's directory, synced, then renamed over the output: a reader (a browser reloading
//! it) sees the old page or the new one, never half of one.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rein_cli::html::report::{Source, report};
use rein_runtime::plural::count;

use super::logs::{self, Log};

/// Output and exit status, for `--help`.
const AFTER_HELP: &str = "\
Output: FILE, one HTML page, replaced whole (a temporary file renamed over it). On stdout,
`wrote FILE: N logs, T turns, M retried or failed`; on stderr, `warning: ...` for a torn last
line (left out) and `error: ...` for a log that cannot be read or a page that cannot be written.

The page has each log's conversation (user and assistant messages, tool calls and results) and,
at the tail of each turn that retried or failed, a collapsed panel with every attempt and the
provider's messages verbatim. It needs no network and runs no script; light and dark themes
follow the reader's system.

Exit status: 0 when the report was written; 1 when the report could not be written; 2 when a log
cannot be read (missing, or a corrupt line: the error names the file and line) and nothing was
written, or a usage error.";

/// Arguments of `rein report`.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub(crate) struct ReportArgs {
    /// JSONL session logs, shown in this order.
    #[arg(value_name = "LOG", required = true)]
    logs: Vec<PathBuf>,
    /// The HTML file to write (replaced atomically when it exists).
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
}

/// Runs `rein report`.
pub(crate) fn run(args: &ReportArgs) -> ExitCode {
    let mut err = io::stderr().lock();
    let mut read = Vec::with_capacity(args.logs.len());
    let mut unreadable = 0;
    for path in &args.logs {
        match logs::read(path) {
            Ok(log) => read.push(log),
            Err(error) => {
                unreadable += 1;
                writeln!(err, "error: {error}").ok();
            }
        }
    }
    for warning in read.iter().flat_map(|log| &log.warnings) {
        writeln!(err, "warning: {warning}").ok();
    }
    if unreadable > 0 {
        let logs = count(unreadable, "log", "logs");
        writeln!(err, "error: no report written: {logs} could not be read").ok();
        return ExitCode::from(2);
    }
    let sources: Vec<Source<'_>> =
        read.iter().map(|log| Source { name: &log.name, events: &log.events }).collect();
    let page = report(&sources);
    if let Err(error) = write_atomically(&args.output, page.as_bytes()) {
        writeln!(err, "error: {}: cannot write the report: {error}", args.output.display()).ok();
        return ExitCode::from(1);
    }
    let panels: usize = read.iter().map(|log| rein_runtime::panel::panels(&log.events).len()).sum();
    let logs = count(read.len(), "log", "logs");
    println!("wrote {}: {logs}, {}", args.output.display(), summary(&read, panels));
    ExitCode::SUCCESS
}

/// `N turns, M retried or failed`.
fn summary(logs: &[Log], panels: usize) -> String {
    let turns: usize =
        logs.iter().map(|l| l.events.iter().filter(|e| e.kind() == "turn/start").count()).sum();
    format!("{}, {panels} retried or failed", count(turns, "turn", "turns"))
}

/// Writes `bytes` to `path` through a synced temporary file in the same directory, renamed over
/// `path`. The file is readable by others (0644 before the umask), like any file a tool writes.
fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(".rein-report-").suffix(".html.tmp");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o644));
    }
    let mut file = builder.tempfile_in(dir)?;
    file.write_all(bytes)?;
    file.as_file().sync_all()?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}
