//! `rein check` as a process: exit codes, output naming file, line, seq and rule, torn and corrupt
//! lines, and SQLite stores.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::path::{Path, PathBuf};
use std::process::Command;

use rein_runtime::event::Envelope;
use rein_testkit::history;
use rein_testkit::history::{History, Retry};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn rein(args: &[&str]) -> Run {
    let output = Command::new(env!("CARGO_BIN_EXE_rein")).args(args).output().unwrap();
    Run {
        code: output.status.code().unwrap(),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

fn jsonl(events: &[Envelope]) -> String {
    events.iter().map(|e| serde_json::to_string(e).unwrap() + "\n").collect()
}

/// A valid log: a failure, two official retries, success, tool call, a second step.
fn valid() -> Vec<Envelope> {
    History::new()
        .user()
        .turn()
        .step()
        .request("mock")
        .error("SERVER")
        .retried(Retry::official("id-a", 1))
        .request("mock")
        .error("SERVER")
        .retried(Retry::official("id-a", 2))
        .request("mock")
        .message(&["c"])
        .tool_call("c")
        .tool_result("c")
        .step_end()
        .step()
        .answer("mock")
        .completed()
        .idle()
        .build()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn a_valid_log_exits_0_with_a_summary() {
    let dir = tempfile::tempdir().unwrap();
    let log = write(dir.path(), "ok.jsonl", &jsonl(&valid()));
    let run = rein(&["check", arg(&log)]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.stdout, format!("ok: 1 log, {} events\n", valid().len()));
    assert_eq!(run.stderr, "");
}

#[test]
fn a_violation_exits_1_naming_file_line_seq_and_rule() {
    let dir = tempfile::tempdir().unwrap();
    let mut events = valid();
    // The second official retry claims to be retry 3.
    let at = events
        .iter()
        .position(|e| matches!(&e.event, rein_runtime::event::Event::LlmRetry(r) if r.retry == 2))
        .unwrap();
    if let rein_runtime::event::Event::LlmRetry(r) = &mut events[at].event {
        r.retry = 3;
    }
    let log = write(dir.path(), "bad.jsonl", &jsonl(&events));
    let run = rein(&["check", arg(&log)]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let first = run.stdout.lines().next().unwrap();
    assert_eq!(
        first,
        format!(
            "{}:{}: llm/retry seq {at}: retry 3 must equal 2 in chain [mock, {}] [retry-continues-chain]",
            log.display(),
            at + 1,
            history::OFFICIAL_KEY
        )
    );
    assert!(run.stdout.contains("[retry-within-max-retries]"), "{}", run.stdout);
    assert!(run.stdout.contains("[retry-started-pairs-retry]"), "{}", run.stdout);
    assert!(run.stdout.ends_with("3 violations in 1 log\n"), "{}", run.stdout);
}

#[test]
fn an_unreadable_log_exits_2_and_the_others_are_still_checked() {
    let dir = tempfile::tempdir().unwrap();
    let ok = write(dir.path(), "ok.jsonl", &jsonl(&valid()));
    let missing = dir.path().join("missing.jsonl");
    let run = rein(&["check", arg(&missing), arg(&ok), arg(dir.path())]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains(&format!("error: {}: cannot be read", missing.display())));
    assert!(run.stderr.contains(&format!("error: {}: cannot be read", dir.path().display())));
    assert_eq!(run.stdout, "0 violations in 1 log; 2 logs could not be checked\n");
    assert!(!missing.exists(), "checking never creates a log");
}

#[test]
fn a_torn_last_line_is_a_warning_and_the_file_is_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let events = valid();
    let whole = jsonl(&events);
    let next = serde_json::to_string(&events[3]).unwrap();
    let torn = format!("{whole}{}", &next[..25]);
    let log = write(dir.path(), "torn.jsonl", &torn);
    let run = rein(&["check", arg(&log)]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        run.stderr,
        format!(
            "warning: {}:{}: torn last line (25 bytes), ignored\n",
            log.display(),
            events.len() + 1
        )
    );
    assert_eq!(run.stdout, format!("ok: 1 log, {} events\n", events.len()));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), torn, "nothing is cut or rewritten");

    // Complete JSON without its newline is torn too: that append was never acknowledged.
    let unacked =
        format!("{whole}{}", next.replace("\"seq\":3", &format!("\"seq\":{}", events.len())));
    let log = write(dir.path(), "unacked.jsonl", &unacked);
    let run = rein(&["check", arg(&log)]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("torn last line"), "{}", run.stderr);
}

#[test]
fn a_corrupt_middle_line_is_a_violation_with_its_line_number() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines: Vec<String> = jsonl(&valid()).lines().map(str::to_owned).collect();
    lines[5] = "{\"seq\":5,\"time\":".to_owned();
    let text = lines.join("\n") + "\n";
    let log = write(dir.path(), "corrupt.jsonl", &text);
    let run = rein(&["check", arg(&log)]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let mut out = run.stdout.lines();
    let first = out.next().unwrap();
    assert!(
        first.starts_with(&format!("{}:6: corrupt line, not JSON: ", log.display())),
        "{first}"
    );
    assert!(first.ends_with("[corrupt-line]"), "{first}");
    // The lost line was request/error of attempt 1: the llm/retry after it has no error to retry.
    assert!(out.next().unwrap().ends_with("[retry-after-request-error]"), "{}", run.stdout);
    assert_eq!(out.next().unwrap(), "2 violations in 1 log");
    assert_eq!(std::fs::read_to_string(&log).unwrap(), text, "the file is left as it was");
}

#[test]
fn a_line_that_is_not_an_event_names_seq_type_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines: Vec<String> = jsonl(&valid()).lines().map(str::to_owned).collect();
    let retry = lines.iter().position(|l| l.contains("\"llm/retry\"")).unwrap();
    lines[retry] = lines[retry]
        .replace("\"message\":\"it failed\"", "\"message\":\"it failed\",\"status\":600");
    let log = write(dir.path(), "schema.jsonl", &(lines.join("\n") + "\n"));
    let run = rein(&["check", arg(&log)]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let first = run.stdout.lines().next().unwrap();
    assert!(
        first.starts_with(&format!(
            "{}:{}: llm/retry seq {retry}: failure.status",
            log.display(),
            retry + 1
        )),
        "{first}"
    );
    assert!(first.ends_with("[retry-failure-valid]"), "{first}");
}

#[test]
fn an_open_turn_is_a_warning_unless_the_log_is_finished() {
    let dir = tempfile::tempdir().unwrap();
    let events = History::new().user().turn().step().request("mock").chunk().build();
    let log = write(dir.path(), "open.jsonl", &jsonl(&events));
    let run = rein(&["check", arg(&log)]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("turn 1 is still open"), "{}", run.stderr);

    let run = rein(&["check", "--finished", arg(&log)]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    // An end-of-log rule is reported at the log's last line.
    assert!(
        run.stdout.starts_with(&format!(
            "{}:{}: turn/start seq 2: turn 1 never ends",
            log.display(),
            events.len()
        )),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("[turn-left-open]"));
}

#[test]
fn every_violation_line_starts_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines: Vec<String> = jsonl(&violating()).lines().map(str::to_owned).collect();
    lines[4] = "garbage".to_owned();
    lines.truncate(lines.len() - 3); // ends inside a turn
    let log = write(dir.path(), "many.jsonl", &(lines.join("\n") + "\n"));
    let run = rein(&["check", "--finished", arg(&log)]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let violations: Vec<&str> = run.stdout.lines().collect();
    let (summary, violations) = violations.split_last().unwrap();
    assert!(violations.len() >= 4, "{}", run.stdout);
    for violation in violations {
        let rest = violation.strip_prefix(&format!("{}:", log.display())).unwrap();
        let (number, _) = rest.split_once(": ").unwrap();
        let number: usize = number.parse().unwrap();
        assert!((1..=lines.len()).contains(&number), "{violation}");
    }
    assert!(summary.ends_with(" in 1 log"), "{summary}");
}

#[test]
fn an_empty_log_is_a_warning_unless_the_log_is_finished() {
    let dir = tempfile::tempdir().unwrap();
    let empty = write(dir.path(), "empty.jsonl", "");
    let run = rein(&["check", arg(&empty)]);
    assert_eq!((run.code, run.stdout.as_str()), (0, "ok: 1 log, 0 events\n"));
    assert!(run.stderr.contains(&format!("warning: {}:0: no events", empty.display())));

    let run = rein(&["check", "--finished", arg(&empty)]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        run.stdout,
        format!(
            "{}:0: session/start seq 0: missing: the log is empty, and a finished log starts with \
             session/start [session-start-first]\n1 violation in 1 log\n",
            empty.display()
        )
    );
}

#[test]
fn a_file_that_is_not_a_session_log_exits_2_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let readme = write(dir.path(), "README.md", "# rein\n\nAn agent runtime.\n");
    let json = write(dir.path(), "array.json", "[{\"seq\": 0}]\n");
    let binary = dir.path().join("image.png");
    std::fs::write(&binary, b"\x89PNG\r\x1a\x00\x00\x00\rIHDR").unwrap();
    let ok = write(dir.path(), "ok.jsonl", &jsonl(&valid()));
    let run = rein(&["check", arg(&readme), arg(&json), arg(&binary), arg(&ok)]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    let errors: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(
        errors,
        [
            format!(
                "error: {}: not a session log: none of its 3 lines is an event, and line 1 is not \
                 a session/start (corrupt line, not JSON: expected value at line 1 column 1 \
                 [corrupt-line])",
                readme.display()
            ),
            format!(
                "error: {}: not a session log: none of its 1 line is an event, and line 1 is not a \
                 session/start (not an event: invalid type: sequence, expected struct Envelope \
                 [event-schema])",
                json.display()
            ),
            format!(
                "error: {}: not a session log: its only line has no newline and does not start a \
                 JSON object",
                binary.display()
            ),
        ]
    );
    assert_eq!(run.stdout, "0 violations in 1 log; 3 logs could not be checked\n");

    // A log whose first line is damaged is still a log: its other events are checked.
    let mut lines: Vec<String> = jsonl(&valid()).lines().map(str::to_owned).collect();
    lines[0] = "garbage".to_owned();
    let damaged = write(dir.path(), "damaged.jsonl", &(lines.join("\n") + "\n"));
    let run = rein(&["check", arg(&damaged)]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.starts_with(&format!("{}:1: corrupt line", damaged.display())));
}

#[test]
fn a_line_over_the_limit_is_an_error_naming_file_and_line() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.jsonl");
    let events = valid();
    let head = jsonl(&events[..3]);
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    file.write_all(head.as_bytes()).unwrap();
    let limit = rein_runtime::store::line::MAX_LINE_BYTES;
    let chunk = vec![b'x'; 1 << 20];
    for _ in 0..limit / chunk.len() {
        file.write_all(&chunk).unwrap();
    }
    file.write_all(b"x\n").unwrap();
    file.write_all(jsonl(&events[3..]).as_bytes()).unwrap();
    file.flush().unwrap();
    drop(file);

    let run = rein(&["check", arg(&path)]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        run.stderr,
        format!(
            "error: {}:4: line 4 is {} bytes, over the line limit of {limit} bytes (64 MiB): the \
             log cannot be checked past it\n",
            path.display(),
            limit + 1
        )
    );
    assert_eq!(run.stdout, "0 violations in 0 logs; 1 log could not be checked\n");
}

#[test]
fn several_logs_are_summed_up() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.jsonl", &jsonl(&valid()));
    let b = write(dir.path(), "b.jsonl", &jsonl(&History::new().user().build()));
    let run = rein(&["check", arg(&a), arg(&b)]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.stdout, format!("ok: 2 logs, {} events\n", valid().len() + 2));
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(rein(&["check"]).code, 2);
    assert_eq!(rein(&["check", "--session", "s", "x.jsonl"]).code, 2, "--session needs --sqlite");
}

/// A database with the store's table (`SqliteStore`'s schema), holding `sessions`.
fn store(path: &Path, sessions: &[(&str, Vec<Envelope>)]) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; CREATE TABLE events (session TEXT NOT NULL, seq INTEGER NOT NULL, line TEXT NOT NULL, \
         PRIMARY KEY (session, seq)) WITHOUT ROWID",
    )
    .unwrap();
    for (session, events) in sessions {
        for e in events {
            conn.execute(
                "INSERT INTO events (session, seq, line) VALUES (?1, ?2, ?3)",
                rusqlite::params![session, e.seq as i64, serde_json::to_string(e).unwrap()],
            )
            .unwrap();
        }
    }
}

#[test]
fn a_sqlite_store_is_checked_per_session() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("logs.db");
    let mut bad = valid();
    bad.swap(5, 6);
    history::renumber(&mut bad);
    store(&db, &[("good", valid()), ("bad", bad)]);
    let before = std::fs::read(&db).unwrap();

    let run = rein(&["check", "--sqlite", arg(&db), "--session", "good"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.stdout, format!("ok: 1 log, {} events\n", valid().len()));

    let run = rein(&["check", "--sqlite", arg(&db), "--session", "bad"]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.starts_with(&format!("{}#bad:6: llm/retry seq 5: ", db.display())),
        "{}",
        run.stdout
    );

    let run = rein(&["check", "--sqlite", arg(&db)]);
    assert_eq!(run.code, 1, "every session: {}{}", run.stdout, run.stderr);
    assert!(run.stdout.ends_with("in 2 logs\n"), "{}", run.stdout);

    let run = rein(&["check", "--sqlite", arg(&db), "--session", "nope"]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("nope: cannot be read: no such session"), "{}", run.stderr);

    assert_eq!(std::fs::read(&db).unwrap(), before, "the store is read, never written");
}

#[test]
fn a_sqlite_row_that_is_not_an_event_is_named_by_its_position() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("logs.db");
    store(&db, &[("s", valid())]);
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute("UPDATE events SET line = 'garbage' WHERE session = 's' AND seq = 1", []).unwrap();
    conn.execute("DELETE FROM events WHERE session = 's' AND seq = 7", []).unwrap();
    conn.execute("UPDATE events SET seq = 100 WHERE session = 's' AND seq = 23", []).unwrap();
    drop(conn);
    let run = rein(&["check", "--sqlite", arg(&db), "--session", "s"]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let name = format!("{}#s", db.display());
    assert!(run.stdout.contains(&format!("{name}:2: corrupt line, not JSON")), "{}", run.stdout);
    assert!(
        run.stdout.contains(&format!(
            "{name}:8: request/start seq 8: seq 8 must be 7: it follows seq 6 [seq-contiguous]"
        )),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains(&format!(
            "{name}:23: agent/idle seq 23: the row keyed seq 100 holds the event with seq 23 [event-schema]"
        )),
        "{}",
        run.stdout
    );
    assert!(run.stdout.ends_with("3 violations in 1 log\n"), "{}", run.stdout);
}

#[test]
fn a_missing_or_foreign_database_exits_2_and_is_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.db");
    let run = rein(&["check", "--sqlite", arg(&missing)]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(!missing.exists());

    let foreign = write(dir.path(), "foreign.db", "not a database at all, just text");
    let run = rein(&["check", "--sqlite", arg(&foreign), "--session", "s"]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("cannot be read"), "{}", run.stderr);
}

/// A log that breaks one rule: the second official retry claims to be retry 3.
fn violating() -> Vec<Envelope> {
    let mut events = valid();
    for e in &mut events {
        if let rein_runtime::event::Event::LlmRetry(r) = &mut e.event
            && r.retry == 2
        {
            r.retry = 3;
        }
    }
    events
}

#[tokio::test]
async fn logs_written_by_the_sqlite_store_are_checked_even_while_it_is_open() {
    use rein_runtime::store::{Durability, SessionStore, sqlite::SqliteStore};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("logs.db");
    let store = SqliteStore::open(&db, Durability::Os).unwrap();
    store.append("good", &valid()).await.unwrap();
    store.append("bad", &violating()).await.unwrap();

    // The store is still open (WAL): a reader sees what it committed.
    let run = rein(&["check", "--sqlite", arg(&db)]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let name = format!("{}#bad", db.display());
    assert!(
        run.stdout.starts_with(&format!("{name}:11: llm/retry seq 10: retry 3 must equal 2")),
        "{}",
        run.stdout
    );
    assert!(run.stdout.ends_with("3 violations in 2 logs\n"), "{}", run.stdout);

    let run = rein(&["check", "--sqlite", arg(&db), "--session", "good"]);
    assert_eq!((run.code, run.stdout), (0, format!("ok: 1 log, {} events\n", valid().len())));

    // The checker's reads do not disturb the store: it still appends and loads.
    let more = History::new().user().build();
    let mut next = more[1].clone();
    next.seq = valid().len() as u64;
    store.append("good", &[next]).await.unwrap();
    assert_eq!(store.load("good").await.unwrap().unwrap().events.len(), valid().len() + 1);
}

#[tokio::test]
async fn a_session_partly_indexed_and_partly_in_the_unindexed_tail_is_checked_whole() {
    use rein_runtime::store::{Durability, SessionStore, sqlite::SqliteStore};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("logs.db");
    // Closing the store indexes everything: "good" and "bad" are in the index.
    let store = SqliteStore::open(&db, Durability::Os).unwrap();
    store.append("good", &valid()).await.unwrap();
    store.append("bad", &violating()).await.unwrap();
    drop(store);
    // Reopened, the next events stay in the tail: one more of "good", and all of "new".
    let store = SqliteStore::open(&db, Durability::Os).unwrap();
    let more = History::new().user().build();
    let mut next = more[1].clone();
    next.seq = valid().len() as u64;
    store.append("good", &[next]).await.unwrap();
    store.append("new", &valid()).await.unwrap();

    let run = rein(&["check", "--sqlite", arg(&db), "--session", "good"]);
    assert_eq!((run.code, run.stdout), (0, format!("ok: 1 log, {} events\n", valid().len() + 1)));
    let run = rein(&["check", "--sqlite", arg(&db)]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let violations = run.stdout.lines().filter(|l| l.contains('#'));
    assert!(
        violations.map(|l| l.split(':').next()).all(|n| n.is_some_and(|n| n.ends_with("#bad")))
    );
    assert!(run.stdout.ends_with("3 violations in 3 logs\n"), "{}", run.stdout);
    drop(store);
}

#[tokio::test]
async fn logs_written_by_the_jsonl_store_are_checked_and_a_crash_tail_is_only_reported() {
    use rein_runtime::store::{Durability, SessionStore, jsonl::JsonlStore};
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path(), Durability::Os).unwrap();
    store.append("s1", &valid()).await.unwrap();
    let path = store.path("s1").unwrap();
    drop(store);

    // A crash mid-append leaves part of a line.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(b"{\"seq\":24,\"ti")
        .unwrap();
    let before = std::fs::read(&path).unwrap();
    let run = rein(&["check", arg(&path)]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains(&format!(":{}: torn last line (13 bytes), ignored", valid().len() + 1))
    );
    assert_eq!(std::fs::read(&path).unwrap(), before, "the checker does not cut it; a reopen does");
}

/// The names of a directory's entries with their bytes, sorted.
fn listing(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut entries: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap())
        })
        .collect();
    entries.sort();
    entries
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[cfg(unix)]
#[tokio::test]
async fn a_sqlite_store_in_a_read_only_directory_is_checked_and_nothing_is_written() {
    use rein_runtime::store::{Durability, SessionStore, sqlite::SqliteStore};
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("logs.db");
    let store = SqliteStore::open(&original, Durability::Os).unwrap();
    store.append("good", &valid()).await.unwrap();
    store.append("bad", &violating()).await.unwrap();
    drop(store);
    // A closed store is its database (its WAL checkpointed) and the lock file it leaves.
    let names: Vec<String> = listing(dir.path()).into_iter().map(|(name, _)| name).collect();
    assert_eq!(names, ["logs.db", "logs.db.lock"]);

    // A read-only copy: a read-only file in a read-only directory.
    let copy = dir.path().join("copy");
    std::fs::create_dir(&copy).unwrap();
    let db = copy.join("logs.db");
    std::fs::copy(&original, &db).unwrap();
    set_mode(&db, 0o444);
    set_mode(&copy, 0o555);
    let before = listing(&copy);

    let every = rein(&["check", "--sqlite", arg(&db)]);
    let good = rein(&["check", "--sqlite", arg(&db), "--session", "good"]);
    let after = listing(&copy);
    set_mode(&copy, 0o755);

    assert_eq!(every.code, 1, "{}{}", every.stdout, every.stderr);
    assert!(every.stdout.ends_with("3 violations in 2 logs\n"), "{}", every.stdout);
    assert_eq!((good.code, good.stdout), (0, format!("ok: 1 log, {} events\n", valid().len())));
    let names = |l: &[(String, Vec<u8>)]| l.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&after), ["logs.db"], "no -wal, no -shm, nothing new");
    assert!(after == before, "the database is byte for byte as it was");
}

#[test]
fn every_subcommand_help_states_its_output_and_exit_status() {
    for command in [&["chat"][..], &["check"], &["demo"], &["scenario", "run"], &["codes"]] {
        let mut args = command.to_vec();
        args.push("--help");
        let run = rein(&args);
        assert_eq!(run.code, 0, "{command:?}");
        for needle in
            ["Output:", "stdout", "stderr", "Exit status:", "\n  0  ", "\n  1  ", "\n  2  "]
        {
            assert!(
                run.stdout.contains(needle),
                "{command:?} --help lacks {needle:?}:\n{}",
                run.stdout
            );
        }
    }
}
