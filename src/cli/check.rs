//! `rein check LOG…`: checks session logs against every rule of the session-log contract.
//!
//! Each JSONL log is read line by line and each line handed to a [`Checker`]; with
//! `--sqlite DB`, the sessions of a SQLite store are read the same way, row by row. Output and
//! exit status are in [`CHECK_HELP`] (`rein check --help`); the decisions behind them are in
//! `docs/runtime-semantics.md` ("Command line").
//!
//! # Why a torn last line is a warning and a corrupt middle line a violation
//!
//! A last line without its newline is what a crash during an append leaves; that append was never
//! acknowledged, and reopening the session cuts it. It says nothing about the rules, so it is
//! reported and ignored. A line that ends in a newline but is not an event was written whole and
//! damaged later (or written by something broken): that breaks the contract
//! ([`Rule::CorruptLine`](rein_invariant::Rule::CorruptLine)), but the lines around it can still
//! be checked, so it is reported with its line number and checking goes on — exit 1, not 2. Exit
//! 2 is kept for "could not check": a log that cannot be opened, a file that is not a session log
//! at all, a line over the line limit.
//!
//! # Why the logs are read here, not through the stores
//!
//! The stores are loaders: they stop at the first corrupt line (on purpose — the runtime must not
//! guess), a reopen cuts a torn tail from the file, and opening a SQLite store creates the database
//! and starts a writer. A checker must report every problem and change nothing. So it reads the
//! bytes of a JSONL log itself (never opening it for writing) with the stores' line rules and
//! line limit ([`line::read_line`]), and opens a SQLite database read-only — immutable when no
//! writer's `-wal` is beside it, so SQLite creates no `-wal`/`-shm` files — and selects from the
//! store's table (`events(session, seq, line)`, where `line` is the event's JSONL line).

use std::borrow::Cow;
use std::ffi::OsString;
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rein::runtime::file;
use rein::runtime::plural::count;
use rein::runtime::store::MAX_LOG_BYTES;
use rein::runtime::store::line::{self, LineRead, MAX_LINE_BYTES};
use rein::runtime::store::sqlite::{is_too_big, reader_length_limit};
use rein_invariant::{Checker, Rule, Violation, parse_line};
use rusqlite::{Connection, OpenFlags};

/// What `rein check --help` says after the options: output and exit status.
pub(crate) const CHECK_HELP: &str = "\
Output:
  stdout   one line per violation, `FILE:LINE: <type> seq <n>: <message> [<rule>]`, then one
           summary line: `ok: M logs, N events` when every rule holds, else
           `V violations in M logs`, followed by `; U logs could not be checked` when
           some could not be (the summary never starts with `ok` then).
           LINE is the 1-based line of the event (for --sqlite, FILE is `DB#SESSION` and LINE
           the row's position in seq order; for --postgres, FILE is `URL#SESSION`, the URL
           without its password). Rules about the end of a log (turn-left-open, and
           session-start-first for an empty log under --finished) are reported at the log's
           last line (0 for an empty log).
  stderr   `warning: FILE:LINE: ...` (a torn last line, ignored; a turn still open; a log with
           no events) and `error: FILE[:LINE]: ...` (a log that cannot be opened, a file that is
           not a session log, a line over the 64 MiB line limit).

Nothing is ever written: JSONL logs are only read, SQLite stores opened read-only (no -wal or
-shm files are created; a store being written is read through its writer's WAL), PostgreSQL
read in read-only transactions (the password, from the URL or PGPASSWORD, is never printed).

Exit status:
  0  every log was checked and every rule holds
  1  a rule is violated (a corrupt line is a violation too)
  2  a log could not be checked (missing, unreadable, not a session log, a line over the limit,
     not a SQLite store, a PostgreSQL database that cannot be reached, an unknown --session),
     or a usage error; the other logs are still
     checked and reported";

/// Arguments of `rein check`.
#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    /// JSONL session logs to check.
    #[arg(value_name = "LOG", required_unless_present_any = ["sqlite", "postgres"])]
    logs: Vec<PathBuf>,
    /// A SQLite session store to check (opened read-only).
    #[arg(long, value_name = "DB")]
    sqlite: Option<PathBuf>,
    /// A PostgreSQL session store to check (read only): postgres://USER[:PASSWORD]@HOST/DB.
    #[arg(long, value_name = "URL")]
    postgres: Option<String>,
    /// A session of the --sqlite or --postgres store; repeat for several (default: every
    /// session in it).
    #[arg(long, value_name = "ID")]
    session: Vec<String>,
    /// The logs are complete: a turn without its turn/end, or an empty log, is a violation, not
    /// a warning.
    #[arg(long)]
    finished: bool,
}

/// Runs `rein check`.
pub(crate) fn run(args: &CheckArgs) -> ExitCode {
    if !args.session.is_empty() && args.sqlite.is_none() && args.postgres.is_none() {
        eprintln!("error: --session: only with --sqlite DB or --postgres URL");
        return ExitCode::from(2);
    }
    let mut totals = Totals::default();
    let stdout = io::stdout();
    let stderr = io::stderr();
    let mut out = stdout.lock();
    let mut err = stderr.lock();
    for path in &args.logs {
        let name = path.display().to_string();
        totals.add(&mut out, &mut err, check_jsonl(path, &name, args.finished));
    }
    if let Some(db) = &args.sqlite {
        let db_name = db.display().to_string();
        match check_sqlite(db, &args.session, args.finished) {
            Ok(checked) => {
                for checked in checked {
                    totals.add(&mut out, &mut err, checked);
                }
            }
            Err(error) => {
                let why = format!("cannot be read: {error}");
                totals.add(&mut out, &mut err, Checked::unreadable(db_name, why));
            }
        }
    }
    if let Some(url) = &args.postgres {
        match postgres::check(url, &args.session, args.finished) {
            Ok(checked) => {
                for checked in checked {
                    totals.add(&mut out, &mut err, checked);
                }
            }
            Err((at, error)) => {
                let why = format!("cannot be read: {error}");
                totals.add(&mut out, &mut err, Checked::unreadable(at, why));
            }
        }
    }
    // Output errors (a closed pipe) cannot change the verdict; the exit status still tells it.
    writeln!(out, "{}", totals.summary()).ok();
    ExitCode::from(totals.exit_status())
}

/// What the check of one log found.
#[derive(Debug, Default)]
struct Checked {
    events: u64,
    violations: Vec<String>,
    warnings: Vec<String>,
    /// Why the log could not be checked (whole or in part): `(FILE or FILE:LINE, what)`.
    error: Option<(String, String)>,
}

impl Checked {
    fn unreadable(at: String, why: String) -> Self {
        Self { error: Some((at, why)), ..Self::default() }
    }
}

/// What the first line of a log says about whether the file is a session log at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FirstLine {
    /// No line yet.
    None,
    /// It is (or claims to be) a `session/start`, or it is a torn line starting a JSON object.
    Plausible,
    /// Anything else.
    Foreign,
}

/// Feeds the lines of one log to a checker and collects what it says.
struct LogCheck<'a> {
    name: &'a str,
    checker: Checker,
    checked: Checked,
    /// Complete lines (or rows) seen.
    lines: u64,
    first: FirstLine,
    /// The first line's problem, for a "not a session log" error.
    first_problem: Option<String>,
    torn: bool,
}

impl<'a> LogCheck<'a> {
    fn new(name: &'a str) -> Self {
        Self {
            name,
            checker: Checker::new(),
            checked: Checked::default(),
            lines: 0,
            first: FirstLine::None,
            first_problem: None,
            torn: false,
        }
    }

    /// Notes what the first line claims to be.
    fn first_line(&mut self, bytes: &[u8]) {
        if self.first == FirstLine::None {
            self.first =
                if claims_session_start(bytes) { FirstLine::Plausible } else { FirstLine::Foreign };
        }
    }

    fn violation(&mut self, number: u64, what: impl std::fmt::Display) {
        if self.first_problem.is_none() && number == 1 {
            self.first_problem = Some(what.to_string());
        }
        self.checked.violations.push(format!("{}:{number}: {what}", self.name));
    }

    /// A complete line (1-based `number`, without its newline).
    fn line(&mut self, number: u64, bytes: &[u8]) {
        self.lines = number;
        self.first_line(bytes);
        match self.checker.push_line(bytes) {
            Ok(violations) => violations.into_iter().for_each(|v| self.violation(number, v)),
            Err(error) => self.violation(number, error),
        }
    }

    /// A row of a SQLite store: its line must hold the event its key names.
    fn row(&mut self, number: u64, key: i64, bytes: &[u8]) {
        self.lines = number;
        self.first_line(bytes);
        match parse_line(bytes) {
            Ok(event) => {
                if u64::try_from(key) != Ok(event.seq) {
                    let v = Violation::new(
                        &event,
                        Rule::EventSchema,
                        format!("the row keyed seq {key} holds the event with seq {}", event.seq),
                    );
                    self.violation(number, v);
                }
                let violations = self.checker.push(&event);
                violations.into_iter().for_each(|v| self.violation(number, v));
            }
            Err(error) => {
                self.checker.skip_unreadable(error.seq().or(u64::try_from(key).ok()));
                self.violation(number, error);
            }
        }
    }

    /// The last line has no newline: a crash's trace, ignored. `start` is its bytes (`None` when
    /// it is over the line limit).
    fn torn(&mut self, number: u64, bytes: u64, start: Option<&[u8]>) {
        self.torn = true;
        if self.first == FirstLine::None {
            let (first, problem) = match start {
                Some(start) if start.first() == Some(&b'{') => (FirstLine::Plausible, ""),
                Some(_) => (
                    FirstLine::Foreign,
                    "its only line has no newline and does not start a JSON object",
                ),
                None => {
                    (FirstLine::Foreign, "its only line has no newline and is over the line limit")
                }
            };
            self.first = first;
            self.first_problem = Some(problem.to_owned());
        }
        self.checked
            .warnings
            .push(format!("{}:{number}: torn last line ({bytes} bytes), ignored", self.name));
    }

    /// A line over the line limit: the log cannot be checked past it.
    fn too_long(mut self, number: u64, bytes: u64) -> Checked {
        self.checked.events = self.checker.events();
        self.checked.error = Some((
            format!("{}:{number}", self.name),
            format!(
                "line {number} is {bytes} bytes, over the line limit of {MAX_LINE_BYTES} bytes \
                 (64 MiB): the log cannot be checked past it"
            ),
        ));
        self.checked
    }

    fn finish(mut self, finished: bool) -> Checked {
        let name = self.name;
        let last = self.lines;
        self.checked.events = self.checker.events();
        if self.checked.events == 0 && self.first == FirstLine::Foreign {
            let problem = self.first_problem.take().unwrap_or_default();
            let why = match self.lines {
                0 => problem,
                n => format!(
                    "none of its {} is an event, and line 1 is not a session/start ({problem})",
                    if n == 1 { "1 line".to_owned() } else { format!("{n} lines") }
                ),
            };
            return Checked::unreadable(name.to_owned(), format!("not a session log: {why}"));
        }
        if finished {
            let end = self.checker.finish();
            self.checked.violations.extend(end.iter().map(|v| format!("{name}:{last}: {v}")));
        } else {
            if let Some(turn) = self.checker.open_turn() {
                self.checked.warnings.push(format!(
                    "{name}:{last}: turn {turn} is still open at the end of the log (a running \
                     session, or a crash: reopening closes it); --finished makes this a violation"
                ));
            }
            if self.checked.events == 0 && self.checked.violations.is_empty() {
                self.checked
                    .warnings
                    .push(format!("{name}:{last}: no events; --finished makes this a violation"));
            }
        }
        self.checked
    }
}

/// Whether a line is a JSON object whose `type` is `session/start` (whatever else is wrong with
/// it).
fn claims_session_start(bytes: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Head<'a> {
        #[serde(rename = "type", borrow)]
        kind: Option<Cow<'a, str>>,
    }
    // A struct also deserializes from a JSON array; only an object is an event.
    bytes.trim_ascii_start().first() == Some(&b'{')
        && serde_json::from_slice::<Head<'_>>(bytes)
            .is_ok_and(|head| head.kind.as_deref() == Some("session/start"))
}

/// Checks a JSONL log, streaming it line by line (at most one line of at most the line limit in
/// memory).
fn check_jsonl(path: &Path, name: &str, finished: bool) -> Checked {
    let cannot_read =
        |e: io::Error| Checked::unreadable(name.to_owned(), format!("cannot be read: {e}"));
    // A regular file only (a FIFO or a device would be read forever), of at most the log limit,
    // read up to the length it had when it was opened.
    let opened =
        file::open_read(path).and_then(|f| file::within(&f, MAX_LOG_BYTES).map(|n| (f, n)));
    let (log, len) = match opened {
        Ok(opened) => opened,
        Err(e) => return cannot_read(e),
    };
    let mut reader = BufReader::with_capacity(64 * 1024, log.take(len));
    let mut check = LogCheck::new(name);
    let mut buffer = Vec::new();
    let mut number = 0u64;
    loop {
        number += 1;
        match line::read_line(&mut reader, &mut buffer, MAX_LINE_BYTES) {
            Ok(LineRead::End) => break,
            Ok(LineRead::Line) => check.line(number, &buffer),
            Ok(LineRead::Torn) => {
                check.torn(number, buffer.len() as u64, Some(&buffer));
                break;
            }
            Ok(LineRead::TooLong { bytes, complete: false }) => {
                check.torn(number, bytes, None);
                break;
            }
            Ok(LineRead::TooLong { bytes, complete: true }) => {
                return check.too_long(number, bytes);
            }
            Err(e) => return cannot_read(e),
        }
    }
    check.finish(finished)
}

/// Checks sessions of a SQLite store (`wanted`, or every session), streaming each one's rows in
/// `seq` order. An unknown session cannot be checked.
fn check_sqlite(db: &Path, wanted: &[String], finished: bool) -> Result<Vec<Checked>, String> {
    let fail = |e: rusqlite::Error| e.to_string();
    // SQLite would block on a FIFO, and read a device as an empty database.
    match file::open_read(db) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e.to_string()),
        _ => {}
    }
    let conn = open_read_only(db).map_err(fail)?;
    let layout = SqliteLayout::of(&conn).map_err(fail)?;
    let ids = if wanted.is_empty() {
        let mut query = conn.prepare(layout.sessions()).map_err(fail)?;
        let ids = query.query_map([], |row| row.get::<_, String>(0)).map_err(fail)?;
        ids.collect::<Result<Vec<_>, _>>().map_err(fail)?
    } else {
        wanted.to_vec()
    };
    let mut query = conn.prepare(layout.rows()).map_err(fail)?;
    let mut checked = Vec::with_capacity(ids.len());
    for id in ids {
        let name = format!("{}#{id}", db.display());
        checked.push(check_session(&mut query, &name, &id, finished));
    }
    Ok(checked)
}

/// How a store's database is laid out, and so how a session is read from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SqliteLayout {
    /// One `events` table clustered by `(session, seq)` (the store's first layout).
    Clustered,
    /// `events` in commit order, with the `events_by_session` index up to
    /// `events_indexed.upto` and an unindexed tail after it (the store's layout now).
    Indexed,
}

impl SqliteLayout {
    fn of(conn: &Connection) -> rusqlite::Result<Self> {
        let indexed: bool = conn.query_row(
            "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'events_by_session'",
            [],
            |row| row.get(0),
        )?;
        Ok(if indexed { Self::Indexed } else { Self::Clustered })
    }

    /// Every session, in order. Through the index and the tail: a scan of the whole table for
    /// them would be a sort of every row.
    fn sessions(self) -> &'static str {
        match self {
            Self::Clustered => "SELECT DISTINCT session FROM events ORDER BY session",
            Self::Indexed => {
                "WITH RECURSIVE s(id) AS (
                     SELECT min(session) FROM events_by_session
                     UNION ALL
                     SELECT (SELECT min(session) FROM events_by_session WHERE session > s.id)
                     FROM s WHERE s.id IS NOT NULL)
                 SELECT id FROM s WHERE id IS NOT NULL
                 UNION
                 SELECT session FROM events WHERE rowid > (SELECT upto FROM events_indexed)
                 ORDER BY 1"
            }
        }
    }

    /// One session's `(seq, line)` rows in `seq` order (`?1`: the session): its indexed rows,
    /// then its tail. Per session, never a scan of the whole table.
    fn rows(self) -> &'static str {
        match self {
            Self::Clustered => "SELECT seq, line FROM events WHERE session = ?1 ORDER BY seq",
            Self::Indexed => {
                "SELECT seq, line FROM (
                     SELECT e.seq AS seq, e.line AS line
                     FROM events_by_session b JOIN events e ON e.rowid = b.row
                     WHERE b.session = ?1
                     UNION ALL
                     SELECT seq, line FROM events
                     WHERE rowid > (SELECT upto FROM events_indexed) AND session = ?1)
                 ORDER BY seq"
            }
        }
    }
}

/// Opens `db` read-only without leaving a trace. With no `-wal` (or `-journal`) beside it, no
/// writer has it open and every committed row is in the file, so it is opened immutable: SQLite
/// then takes no locks and creates no `-wal`/`-shm` files, even in a read-only directory.
/// Otherwise a writer may hold committed rows in its WAL, which only a normal read-only
/// connection reads (through the writer's `-shm`).
fn open_read_only(db: &Path) -> rusqlite::Result<Connection> {
    let beside = |suffix: &str| {
        let mut name = OsString::from(db.as_os_str());
        name.push(suffix);
        PathBuf::from(name).symlink_metadata().is_ok()
    };
    let at_rest = !beside("-wal") && !beside("-journal");
    let uri = format!("file:{}?mode=ro{}", uri_path(db), if at_rest { "&immutable=1" } else { "" });
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(uri, flags)?;
    conn.set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_LENGTH, reader_length_limit())?;
    Ok(conn)
}

/// `path` as the path of a `file:` URI: every byte but ASCII letters, digits, `/`, `.`, `-`,
/// `_` and `~` percent-encoded (SQLite decodes them back).
fn uri_path(path: &Path) -> String {
    #[cfg(unix)]
    let bytes = std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()).to_vec();
    #[cfg(not(unix))]
    let bytes = path.to_string_lossy().into_owned().into_bytes();
    let mut uri = String::with_capacity(bytes.len());
    for b in bytes {
        if b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'-' | b'_' | b'~') {
            uri.push(char::from(b));
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri
}

/// Checks one session's rows. The line number of a row is its position (1-based, so `seq + 1`
/// in a sound store).
fn check_session(
    query: &mut rusqlite::Statement<'_>,
    name: &str,
    id: &str,
    finished: bool,
) -> Checked {
    let fail =
        |e: rusqlite::Error| Checked::unreadable(name.to_owned(), format!("cannot be read: {e}"));
    let mut rows = match query.query([id]) {
        Ok(rows) => rows,
        Err(e) => return fail(e),
    };
    let mut check = LogCheck::new(name);
    let mut number = 0u64;
    loop {
        number += 1;
        let row = match rows.next() {
            Ok(Some(row)) => row,
            Ok(None) => break,
            // SQLite refuses to read a line over the reader's length limit.
            Err(e) if is_too_big(&e) => return check.too_long(number, MAX_LINE_BYTES as u64 + 1),
            Err(e) => return fail(e),
        };
        let key: i64 = match row.get(0) {
            Ok(key) => key,
            Err(e) => return fail(e),
        };
        // A NULL or numeric line (the schema forbids both; a hand-made table might hold them)
        // reads as an empty, corrupt line.
        let line = row.get_ref(1).ok().and_then(|v| v.as_bytes().ok()).unwrap_or_default();
        check.row(number, key, line);
    }
    if number == 1 {
        return Checked::unreadable(name.to_owned(), "cannot be read: no such session".to_owned());
    }
    check.finish(finished)
}

mod postgres {
    //! `rein check --postgres URL`: the sessions of a PostgreSQL store, each streamed row by
    //! row in `seq` order in a read-only transaction, checked as the SQLite store's are.

    use futures::StreamExt;
    use rein::runtime::store::postgres::{Target, message};

    use super::{Checked, LogCheck};

    /// Checks `wanted` (or every session) of the database at `url`. The error is `(where, why)`,
    /// naming the URL without its password.
    pub(super) fn check(
        url: &str,
        wanted: &[String],
        finished: bool,
    ) -> Result<Vec<Checked>, (String, String)> {
        let target = Target::parse(url).map_err(|e| ("--postgres".to_owned(), e))?;
        let shown = target.shown().to_owned();
        let tokio = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| (shown.clone(), e.to_string()))?;
        tokio.block_on(read(&target, wanted, finished)).map_err(|e| (shown, e))
    }

    async fn read(
        target: &Target,
        wanted: &[String],
        finished: bool,
    ) -> Result<Vec<Checked>, String> {
        let text = |e: tokio_postgres::Error| message(&e);
        let (mut client, connection) =
            target.config().connect(tokio_postgres::NoTls).await.map_err(text)?;
        tokio::spawn(connection);
        let tx = client.build_transaction().read_only(true).start().await.map_err(text)?;
        let ids: Vec<String> = if wanted.is_empty() {
            let rows = tx
                .query("SELECT DISTINCT session FROM events ORDER BY session", &[])
                .await
                .map_err(text)?;
            rows.iter().map(|r| r.try_get(0)).collect::<Result<_, _>>().map_err(text)?
        } else {
            wanted.to_vec()
        };
        let query = tx
            .prepare("SELECT seq, line FROM events WHERE session = $1 ORDER BY seq")
            .await
            .map_err(text)?;
        let mut checked = Vec::with_capacity(ids.len());
        for id in ids {
            let name = format!("{}#{id}", target.shown());
            let fail = |e: tokio_postgres::Error| {
                Checked::unreadable(name.clone(), format!("cannot be read: {}", message(&e)))
            };
            let rows = match tx.query_raw(&query, [&id]).await {
                Ok(rows) => rows,
                Err(e) => {
                    checked.push(fail(e));
                    continue;
                }
            };
            futures::pin_mut!(rows);
            let mut check = LogCheck::new(&name);
            let mut number = 0u64;
            let mut failed = None;
            while let Some(row) = rows.next().await {
                number += 1;
                let row = match row {
                    Ok(row) => row,
                    Err(e) => {
                        failed = Some(fail(e));
                        break;
                    }
                };
                match (row.try_get::<_, i64>(0), row.try_get::<_, &str>(1)) {
                    (Ok(key), Ok(line)) => check.row(number, key, line.as_bytes()),
                    (Err(e), _) | (_, Err(e)) => {
                        failed = Some(fail(e));
                        break;
                    }
                }
            }
            checked.push(match failed {
                Some(failed) => failed,
                None if number == 0 => {
                    Checked::unreadable(name.clone(), "cannot be read: no such session".to_owned())
                }
                None => check.finish(finished),
            });
        }
        Ok(checked)
    }
}

/// The counts behind the summary and the exit status.
#[derive(Debug, Default)]
struct Totals {
    /// Logs checked to the end.
    logs: usize,
    events: u64,
    violations: usize,
    /// Logs that could not be checked (whole or in part).
    unreadable: usize,
}

impl Totals {
    /// Prints one log's findings and counts them.
    fn add(&mut self, out: &mut impl Write, err: &mut impl Write, checked: Checked) {
        self.violations += checked.violations.len();
        for warning in &checked.warnings {
            writeln!(err, "warning: {warning}").ok();
        }
        for violation in &checked.violations {
            writeln!(out, "{violation}").ok();
        }
        match &checked.error {
            None => {
                self.logs += 1;
                self.events += checked.events;
            }
            Some((at, why)) => {
                self.unreadable += 1;
                writeln!(err, "error: {at}: {why}").ok();
            }
        }
    }

    /// `ok: …` only when every log was checked and every rule holds.
    fn summary(&self) -> String {
        let logs = count(self.logs, "log", "logs");
        let checked = if self.violations == 0 && self.unreadable == 0 {
            format!("ok: {logs}, {}", count(self.events, "event", "events"))
        } else {
            format!("{} in {logs}", count(self.violations, "violation", "violations"))
        };
        match self.unreadable {
            0 => checked,
            n => format!("{checked}; {} could not be checked", count(n, "log", "logs")),
        }
    }

    /// 2 when a log could not be checked, else 1 when a rule is violated, else 0.
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
    fn the_summary_says_ok_only_when_the_exit_status_is_0() {
        let cases = [
            ((0, 0), "ok: 2 logs, 9 events"),
            ((3, 0), "3 violations in 2 logs"),
            ((1, 0), "1 violation in 2 logs"),
            ((0, 1), "0 violations in 2 logs; 1 log could not be checked"),
            ((3, 2), "3 violations in 2 logs; 2 logs could not be checked"),
        ];
        for ((violations, unreadable), summary) in cases {
            let totals = Totals { logs: 2, events: 9, violations, unreadable };
            assert_eq!(totals.summary(), summary);
            assert_eq!(summary.starts_with("ok"), totals.exit_status() == 0, "{summary}");
        }
    }

    #[test]
    fn a_first_line_is_a_session_start_by_its_type_alone() {
        let cases: [(&str, bool); 6] = [
            (
                r#"{"seq":0,"time":0,"type":"session/start","data":{"session":"s","format":1}}"#,
                true,
            ),
            (r#"{"type":"session/start","data":"broken"}"#, true),
            (r#"{"seq":0,"time":0,"type":"turn/start","data":{"turn":1}}"#, false),
            (r#"["session/start"]"#, false),
            ("# README", false),
            ("", false),
        ];
        for (line, claims) in cases {
            assert_eq!(claims_session_start(line.as_bytes()), claims, "{line}");
        }
    }

    #[test]
    fn paths_become_uri_paths_sqlite_decodes() {
        let cases = [
            ("/var/lib/rein/logs.db", "/var/lib/rein/logs.db"),
            ("logs.db", "logs.db"),
            ("/a b/c?d#e%f.db", "/a%20b/c%3Fd%23e%25f.db"),
            ("/é.db", "/%C3%A9.db"),
        ];
        for (path, uri) in cases {
            assert_eq!(uri_path(Path::new(path)), uri);
        }
    }
}
