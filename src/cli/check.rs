//! `rein check LOG…`: checks session logs against every rule of the session-log contract.
//!
//! Each JSONL log is read line by line and each line handed to a [`Checker`]; with
//! `--sqlite DB`, the sessions of a SQLite store are read the same way, row by row. Output:
//!
//! - stdout: one line per violation, `FILE:LINE: <type> seq <n>: <message> [<rule>]`, then a
//!   summary: `N violation(s) in M log(s)`, or `ok: M log(s), N events`;
//! - stderr: `warning: …` (a torn last line, a turn still open, an empty log) and `error: …`
//!   (a log that cannot be read).
//!
//! Exit status: 2 when any log cannot be read (missing, a directory, not a SQLite store, an
//! unknown session), else 1 when any rule is violated, else 0.
//!
//! # Why a torn last line is a warning and a corrupt middle line a violation
//!
//! A last line without its newline is what a crash during an append leaves; that append was never
//! acknowledged, and reopening the session cuts it (SPEC §9). It says nothing about the rules,
//! so it is reported and ignored. A line that ends in a newline but is not an event was written
//! whole and damaged later (or written by something broken): that breaks the contract
//! ([`Rule::CorruptLine`](rein_invariant::Rule::CorruptLine)), but the lines around it can still
//! be checked, so it is reported with its line number and checking goes on — exit 1, not 2. Exit
//! 2 is kept for "could not check at all".
//!
//! # Why the logs are read here, not through the stores
//!
//! The stores are loaders: they stop at the first corrupt line (on purpose — the runtime must not
//! guess), a reopen cuts a torn tail from the file, and opening a SQLite store creates the database
//! and starts a writer. A checker must report every problem and change nothing. So it reads the
//! bytes of a JSONL log itself (never opening it for writing) with the stores' line rules, and
//! opens a SQLite database read-only and selects from the store's table
//! (`events(session, seq, line)`, where `line` is the event's JSONL line).

use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rein_invariant::{Checker, Rule, Violation, parse_line};
use rusqlite::{Connection, OpenFlags};

/// Arguments of `rein check`.
#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    /// JSONL session logs to check.
    #[arg(value_name = "LOG", required_unless_present = "sqlite")]
    logs: Vec<PathBuf>,
    /// A SQLite session store to check (opened read-only).
    #[arg(long, value_name = "DB")]
    sqlite: Option<PathBuf>,
    /// A session of the --sqlite store; repeat for several (default: every session in it).
    #[arg(long, value_name = "ID", requires = "sqlite")]
    session: Vec<String>,
    /// The logs are complete: a turn without its turn/end is a violation, not a warning.
    #[arg(long)]
    finished: bool,
}

/// Runs `rein check`.
pub(crate) fn run(args: &CheckArgs) -> ExitCode {
    let mut totals = Totals::default();
    let stdout = io::stdout();
    let stderr = io::stderr();
    let mut out = stdout.lock();
    let mut err = stderr.lock();
    for path in &args.logs {
        let name = path.display().to_string();
        totals.add(&mut out, &mut err, &name, check_jsonl(path, &name, args.finished));
    }
    if let Some(db) = &args.sqlite {
        let db_name = db.display().to_string();
        match check_sqlite(db, &args.session, args.finished) {
            Ok(checked) => {
                for (name, report) in checked {
                    totals.add(&mut out, &mut err, &name, report);
                }
            }
            Err(error) => totals.add(&mut out, &mut err, &db_name, Err(error)),
        }
    }
    // Output errors (a closed pipe) cannot change the verdict; the exit status still tells it.
    writeln!(out, "{}", totals.summary()).ok();
    ExitCode::from(totals.exit_status())
}

/// What the check of one log found.
#[derive(Debug, Default)]
struct Report {
    events: u64,
    violations: Vec<String>,
    warnings: Vec<String>,
}

/// Feeds the lines of one log to a checker and collects what it says.
struct LogCheck<'a> {
    name: &'a str,
    checker: Checker,
    report: Report,
}

impl<'a> LogCheck<'a> {
    fn new(name: &'a str) -> Self {
        Self { name, checker: Checker::new(), report: Report::default() }
    }

    /// A complete line (1-based `number`, without its newline).
    fn line(&mut self, number: u64, bytes: &[u8]) {
        let name = self.name;
        match self.checker.push_line(bytes) {
            Ok(violations) => self
                .report
                .violations
                .extend(violations.into_iter().map(|v| format!("{name}:{number}: {v}"))),
            Err(error) => self.report.violations.push(format!("{name}:{number}: {error}")),
        }
    }

    /// A row of a SQLite store: its line must hold the event its key names.
    fn row(&mut self, number: u64, key: i64, bytes: &[u8]) {
        let name = self.name;
        match parse_line(bytes) {
            Ok(event) => {
                if u64::try_from(key) != Ok(event.seq) {
                    let v = Violation::new(
                        &event,
                        Rule::EventSchema,
                        format!("the row keyed seq {key} holds the event with seq {}", event.seq),
                    );
                    self.report.violations.push(format!("{name}:{number}: {v}"));
                }
                let violations = self.checker.push(&event);
                self.report
                    .violations
                    .extend(violations.into_iter().map(|v| format!("{name}:{number}: {v}")));
            }
            Err(error) => {
                self.checker.skip_unreadable(error.seq().or(u64::try_from(key).ok()));
                self.report.violations.push(format!("{name}:{number}: {error}"));
            }
        }
    }

    /// The last line has no newline: a crash's trace, ignored.
    fn torn(&mut self, number: u64, bytes: usize) {
        self.report
            .warnings
            .push(format!("{}: torn last line {number} ({bytes} bytes), ignored", self.name));
    }

    fn finish(mut self, finished: bool) -> Report {
        let name = self.name;
        self.report.events = self.checker.events();
        if finished {
            let open = self.checker.finish();
            self.report.violations.extend(open.iter().map(|v| format!("{name}: {v}")));
        } else if let Some(turn) = self.checker.open_turn() {
            self.report.warnings.push(format!(
                "{name}: turn {turn} is still open at the end of the log (a running session, or \
                 a crash: reopening closes it); --finished makes this a violation"
            ));
        }
        if self.report.events == 0 && self.report.violations.is_empty() {
            self.report.warnings.push(format!("{name}: no events"));
        }
        self.report
    }
}

/// Checks a JSONL log, streaming it line by line.
fn check_jsonl(path: &Path, name: &str, finished: bool) -> Result<Report, String> {
    let fail = |e: io::Error| e.to_string();
    let mut reader = BufReader::new(File::open(path).map_err(fail)?);
    let mut check = LogCheck::new(name);
    let mut buffer = Vec::new();
    let mut number = 0u64;
    loop {
        buffer.clear();
        if reader.read_until(b'\n', &mut buffer).map_err(fail)? == 0 {
            break;
        }
        number += 1;
        match buffer.strip_suffix(b"\n") {
            Some(line) => check.line(number, line),
            None => {
                check.torn(number, buffer.len());
                break;
            }
        }
    }
    Ok(check.finish(finished))
}

/// A checked log's name and its report (or why it cannot be read).
type Checked = (String, Result<Report, String>);

/// Checks sessions of a SQLite store (`wanted`, or every session), streaming each one's rows in
/// `seq` order. An unknown session cannot be read.
fn check_sqlite(db: &Path, wanted: &[String], finished: bool) -> Result<Vec<Checked>, String> {
    let fail = |e: rusqlite::Error| e.to_string();
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(db, flags).map_err(fail)?;
    let ids = if wanted.is_empty() {
        let mut query =
            conn.prepare("SELECT DISTINCT session FROM events ORDER BY session").map_err(fail)?;
        let ids = query.query_map([], |row| row.get::<_, String>(0)).map_err(fail)?;
        ids.collect::<Result<Vec<_>, _>>().map_err(fail)?
    } else {
        wanted.to_vec()
    };
    let mut query = conn
        .prepare("SELECT seq, line FROM events WHERE session = ?1 ORDER BY seq")
        .map_err(fail)?;
    let mut checked = Vec::with_capacity(ids.len());
    for id in ids {
        let name = format!("{}#{id}", db.display());
        let report = check_session(&mut query, &name, &id, finished).map_err(fail);
        let report = report.and_then(|r| r.ok_or_else(|| "no such session".to_owned()));
        checked.push((name, report));
    }
    Ok(checked)
}

/// Checks one session's rows; `None` when it has none. The line number of a row is its position
/// (1-based, so `seq + 1` in a sound store).
fn check_session(
    query: &mut rusqlite::Statement<'_>,
    name: &str,
    id: &str,
    finished: bool,
) -> Result<Option<Report>, rusqlite::Error> {
    let mut rows = query.query([id])?;
    let mut check = LogCheck::new(name);
    let mut number = 0u64;
    while let Some(row) = rows.next()? {
        number += 1;
        let key: i64 = row.get(0)?;
        // A NULL or numeric line (the schema forbids both; a hand-made table might hold them)
        // reads as an empty, corrupt line.
        let line = row.get_ref(1)?.as_bytes().unwrap_or_default();
        check.row(number, key, line);
    }
    Ok((number > 0).then(|| check.finish(finished)))
}

/// The counts behind the summary and the exit status.
#[derive(Debug, Default)]
struct Totals {
    logs: usize,
    events: u64,
    violations: usize,
    unreadable: usize,
}

impl Totals {
    /// Prints one log's findings and counts them.
    fn add(
        &mut self,
        out: &mut impl Write,
        err: &mut impl Write,
        name: &str,
        report: Result<Report, String>,
    ) {
        match report {
            Ok(report) => {
                self.logs += 1;
                self.events += report.events;
                self.violations += report.violations.len();
                for warning in &report.warnings {
                    writeln!(err, "warning: {warning}").ok();
                }
                for violation in &report.violations {
                    writeln!(out, "{violation}").ok();
                }
            }
            Err(error) => {
                self.unreadable += 1;
                writeln!(err, "error: {name}: cannot be read: {error}").ok();
            }
        }
    }

    fn summary(&self) -> String {
        let checked = if self.violations > 0 {
            format!("{} violation(s) in {} log(s)", self.violations, self.logs)
        } else {
            format!("ok: {} log(s), {} events", self.logs, self.events)
        };
        match self.unreadable {
            0 => checked,
            n => format!("{checked}; {n} log(s) could not be read"),
        }
    }

    /// 2 when a log could not be read, else 1 when a rule is violated, else 0.
    fn exit_status(&self) -> u8 {
        if self.unreadable > 0 {
            2
        } else if self.violations > 0 {
            1
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_status_puts_unreadable_before_violated() {
        let cases = [((0, 0), 0), ((3, 0), 1), ((0, 1), 2), ((3, 1), 2)];
        for ((violations, unreadable), status) in cases {
            let totals = Totals { logs: 2, events: 9, violations, unreadable };
            assert_eq!(totals.exit_status(), status, "{totals:?}");
        }
    }

    #[test]
    fn the_summary_counts_logs_events_and_violations() {
        let ok = Totals { logs: 2, events: 9, violations: 0, unreadable: 0 };
        assert_eq!(ok.summary(), "ok: 2 log(s), 9 events");
        let bad = Totals { logs: 2, events: 9, violations: 3, unreadable: 1 };
        assert_eq!(bad.summary(), "3 violation(s) in 2 log(s); 1 log(s) could not be read");
    }
}
