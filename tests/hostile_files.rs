//! Hostile files, through the CLI as processes: a session log, a log to check, show or report,
//! or a scenario that is a FIFO (whose open blocks and whose reads never end) or a symbolic link
//! to `/dev/zero` (zeros forever) is refused at once with an error naming the path, and nothing
//! is written. Each run has a deadline: a command that hangs or spins is killed and fails the
//! test instead of hanging it.

#![cfg(unix)]
#![allow(clippy::unwrap_used)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a refusal may take (a debug build on a loaded machine; a hang is minutes).
const DEADLINE: Duration = Duration::from_secs(20);

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit {:?}\n--- stdout\n{}--- stderr\n{}", self.code, self.stdout, self.stderr)
    }
}

/// `rein ARGS` in `dir`, killed (and the test failed) if it has not ended by the deadline.
fn rein(dir: &Path, args: &[&str]) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rein"))
        .args(args)
        .current_dir(dir)
        .env_remove("DEEPSEEK_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("rein {args:?} was still running after {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (mut stdout, mut stderr) = (String::new(), String::new());
    child.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    Run { code: status.code(), stdout, stderr }
}

/// A FIFO at `path`.
fn fifo(path: &Path) {
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
}

/// A symbolic link to `/dev/zero` at `path`.
fn zeros(path: &Path) {
    std::os::unix::fs::symlink("/dev/zero", path).unwrap();
}

/// Both kinds of hostile file in `dir` as `NAME.EXT`, with what their error says they are.
fn hostile(dir: &Path, ext: &str) -> [(PathBuf, &'static str); 2] {
    let (pipe, zero) = (dir.join(format!("f.{ext}")), dir.join(format!("z.{ext}")));
    fifo(&pipe);
    zeros(&zero);
    [(pipe, "a FIFO"), (zero, "a character device")]
}

/// The names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn chat_refuses_a_session_log_that_is_a_fifo_or_dev_zero() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let logs = hostile(&store, "jsonl");
    for (path, what) in &logs {
        let id = path.file_stem().unwrap().to_str().unwrap();
        let run = rein(dir.path(), &["chat", "--store", "store", "--session", id, "hi"]);
        assert_eq!(run.code, Some(2), "{run:?}");
        let want = format!("error: store/{id}.jsonl: not a regular file: {what}");
        assert!(run.stderr.contains(&want), "{run:?}");
        assert_eq!(run.stdout, "");
    }
    assert_eq!(listing(&store), ["f.jsonl", "z.jsonl"], "nothing written beside them");
}

#[test]
fn check_show_and_report_refuse_a_log_that_is_a_fifo_or_dev_zero() {
    let dir = tempfile::tempdir().unwrap();
    for (path, what) in hostile(dir.path(), "jsonl") {
        let log = path.to_str().unwrap();
        let want = format!("{log}: not a regular file: {what}");

        let check = rein(dir.path(), &["check", log]);
        assert_eq!(check.code, Some(2), "{check:?}");
        assert!(
            check
                .stderr
                .contains(&format!("error: {log}: cannot be read: not a regular file: {what}")),
            "{check:?}"
        );

        let show = rein(dir.path(), &["show", log]);
        assert_eq!(show.code, Some(2), "{show:?}");
        assert!(show.stderr.contains(&format!("error: {want}")), "{show:?}");

        let report = rein(dir.path(), &["report", log, "-o", "page.html"]);
        assert_eq!(report.code, Some(2), "{report:?}");
        assert!(report.stderr.contains(&format!("error: {want}")), "{report:?}");
    }
    let db = dir.path().join("store.db");
    fifo(&db);
    let check = rein(dir.path(), &["check", "--sqlite", db.to_str().unwrap()]);
    assert_eq!(check.code, Some(2), "{check:?}");
    assert!(check.stderr.contains("not a regular file: a FIFO"), "{check:?}");
    assert_eq!(listing(dir.path()), ["f.jsonl", "store.db", "z.jsonl"], "no report, no -wal");
}

#[test]
fn scenario_run_refuses_a_fifo_dev_zero_and_a_file_over_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    for (path, what) in hostile(dir.path(), "json") {
        let file = path.to_str().unwrap();
        let run = rein(dir.path(), &["scenario", "run", file]);
        assert_eq!(run.code, Some(2), "{run:?}");
        let want = format!("error: {file}: cannot read the scenario: not a regular file: {what}");
        assert!(run.stderr.contains(&want), "{run:?}");
    }
    // Sparse: 16 MiB and one byte of nothing on the disk.
    let big = dir.path().join("big.json");
    std::fs::File::create(&big).unwrap().set_len((16 << 20) + 1).unwrap();
    let run = rein(dir.path(), &["scenario", "run", big.to_str().unwrap()]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("over the limit of 16 MiB"), "{run:?}");
}

/// The JSON lines of `values`, one per line.
fn lines(values: &[serde_json::Value]) -> String {
    values.iter().map(|v| format!("{v}\n")).collect()
}

fn session_start(session: &str) -> serde_json::Value {
    serde_json::json!({"seq": 0, "time": 0, "type": "session/start",
        "data": {"session": session, "format": 1}})
}

#[test]
fn a_value_of_100k_characters_is_cut_in_every_message_that_quotes_it() {
    let dir = tempfile::tempdir().unwrap();
    let long = "x".repeat(100_000);
    let log = dir.path().join("long.jsonl");
    std::fs::write(
        &log,
        lines(&[
            session_start("s"),
            serde_json::json!({"seq": 1, "time": 0, "type": long, "data": {}}),
            serde_json::json!({"seq": 2, "time": 0, "type": "turn/start", "data": {"turn": long}}),
        ]),
    )
    .unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    std::fs::write(store.join("s.jsonl"), lines(&[session_start(&long)])).unwrap();
    let scenario = dir.path().join("scenario.json");
    std::fs::write(&scenario, serde_json::json!({"seed": 1, long.clone(): 1}).to_string()).unwrap();

    let log_arg = log.to_str().unwrap();
    let check = rein(dir.path(), &["check", log_arg]);
    let show = rein(dir.path(), &["show", log_arg]);
    let chat = rein(dir.path(), &["chat", "--store", "store", "--session", "s", "hi"]);
    let run = rein(dir.path(), &["scenario", "run", scenario.to_str().unwrap()]);
    assert_eq!(check.code, Some(1), "{check:?}");
    assert!(check.stdout.contains("unknown event type \"xxxx"), "{check:?}");
    assert!(check.stdout.contains("…\" (100000 characters)"), "{check:?}");
    assert!(check.stdout.contains("characters cut]…"), "{check:?}");
    assert!(
        show.stderr.contains(&format!("error: {log_arg}:2: corrupt log line: unknown variant")),
        "{show:?}"
    );
    assert!(chat.stderr.contains("the log belongs to session \"xxxx"), "{chat:?}");
    assert!(run.stderr.contains("invalid scenario: "), "{run:?}");
    for (name, out) in [("check", &check), ("show", &show), ("chat", &chat), ("scenario", &run)] {
        assert_ne!(out.code, Some(0), "{name}: {out:?}");
        for line in out.stdout.lines().chain(out.stderr.lines()) {
            assert!(line.chars().count() < 600, "{name}: a line of {} characters", line.len());
        }
    }
}

#[test]
fn chat_refuses_a_crafted_log_whose_open_turn_has_the_largest_number() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let text = lines(&[
        session_start("s"),
        serde_json::json!({"seq": 1, "time": 0, "type": "user/message", "data": {"text": "hi"}}),
        serde_json::json!({"seq": 2, "time": 0, "type": "turn/start", "data": {"turn": u32::MAX}}),
    ]);
    std::fs::write(store.join("s.jsonl"), &text).unwrap();
    let run = rein(dir.path(), &["chat", "--store", "store", "--session", "s", "again"]);
    assert_eq!(run.code, Some(2), "{run:?}");
    let want = "error: store/s.jsonl:3: corrupt log line: turn 4294967295 is the largest there can \
                be: no turn can follow it: the log cannot be continued";
    assert!(run.stderr.contains(want), "{run:?}");
    assert_eq!(std::fs::read_to_string(store.join("s.jsonl")).unwrap(), text, "nothing rewritten");
    assert_eq!(listing(&store), ["s.jsonl"]);
}

/// Whether the process `pid` has a file whose path ends with `name` open.
#[cfg(target_os = "linux")]
fn has_open(pid: u32, name: &str) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return false };
    fds.filter_map(Result::ok)
        .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target.ends_with(name)))
}

#[cfg(target_os = "linux")]
#[test]
fn ctrl_c_while_chat_reads_a_long_log_ends_it_at_once_and_writes_nothing() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    // 40 MB of valid events: a second or so of reading for a debug build.
    let path = store.join("long.jsonl");
    let mut log = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    writeln!(log, "{}", session_start("long")).unwrap();
    let text = "x".repeat(100);
    for seq in 1..=300_000 {
        let line = serde_json::json!({"seq": seq, "time": 0, "type": "user/message",
            "data": {"text": text}});
        writeln!(log, "{line}").unwrap();
    }
    drop(log);
    let before = std::fs::metadata(&path).unwrap().len();

    let mut child = Command::new(env!("CARGO_BIN_EXE_rein"))
        .args(["chat", "--store", "store", "--session", "long", "hi"])
        .current_dir(dir.path())
        .env_remove("DEEPSEEK_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once it reads the log (its handlers are installed before), press Ctrl-C.
    let started = Instant::now();
    while !has_open(child.id(), "long.jsonl") {
        assert!(started.elapsed() < DEADLINE, "the chat never opened its log");
        assert!(child.try_wait().unwrap().is_none(), "the chat ended before reading its log");
        std::thread::yield_now();
    }
    let pressed = Instant::now();
    let kill = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: interrupted while the session's log was read; nothing was written"),
        "{stderr}"
    );
    assert!(pressed.elapsed() < Duration::from_secs(5), "it took {:?}", pressed.elapsed());
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "", "no turn ran");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), before, "nothing written");
}
