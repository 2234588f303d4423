//! `rein demo` — the embedded scenario, on a fresh machine — run as a process: it must run with
//! no key and no server, recover the scripted failures with `llm-retry`, leave a log that
//! `rein check` accepts, write it only where it should (a fresh owner-only directory per run, or
//! `--dir`, never through a symbolic link), and say what happened.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// Runs `rein` with `TMPDIR` pointing at `tmp` (where a demo without `--dir` makes its
/// directory).
fn rein_in(tmp: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rein"))
        .args(args)
        .env("TMPDIR", tmp)
        .output()
        .expect("rein runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// The path after `session log: ` in `out`.
fn log_path(out: &str) -> PathBuf {
    let line = out.lines().find_map(|l| l.strip_prefix("session log: ")).unwrap();
    PathBuf::from(line.split(" (check it").next().unwrap())
}

/// `rein check` on `log` exits 0.
fn checks_clean(tmp: &Path, log: &Path) {
    let check = rein_in(tmp, &["check", "--finished", log.to_str().unwrap()]);
    assert_eq!(check.status.code(), Some(0), "{}{}", text(&check.stdout), text(&check.stderr));
}

#[test]
fn the_demo_recovers_retries_writes_a_log_and_the_log_checks_clean() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let out = rein_in(tmp.path(), &["demo", "--json", "--dir", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();

    let kinds: Vec<&str> = report["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["reason"]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["completed", "error", "completed"], "turn 2 fails AUTH, turn 3 retries it");
    assert_eq!(report["turns"][1]["reason"]["failure"]["code"], "AUTH");

    let retries = report["retries"].as_array().unwrap();
    let codes: Vec<&str> = retries.iter().map(|r| r["code"].as_str().unwrap()).collect();
    assert_eq!(codes, ["RATE_LIMIT", "SERVER"], "AUTH is never retried by llm-retry");
    assert_eq!(retries[0]["delayMs"], 1500, "the provider's delay is used verbatim");
    assert_eq!(retries[0]["retryId"], retries[1]["retryId"], "one chain within the step");
    assert_eq!(report["invariant"]["ok"], true);

    // With --json, stdout is the report alone; where the log went is on stderr.
    let log = dir.join("demo.jsonl");
    assert_eq!(log_path(&text(&out.stderr)), log);
    checks_clean(tmp.path(), &log);
}

#[test]
fn the_demo_summary_names_the_manual_retry_shows_the_tool_call_and_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    let out = rein_in(tmp.path(), &["demo"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[1..4],
        [
            "  turn 1: completed",
            "  turn 2: error AUTH: 401: invalid api key",
            "  turn 3 (manual retry of turn 2): completed",
        ]
    );
    assert_eq!(
        lines[4],
        r#"  tool call echo {"text":"hello"} in turn 1, step 1 (call-1): "hello""#
    );
    assert!(stdout.contains("  invariant: ok\n"), "{stdout}");
    let log = log_path(&stdout);
    assert!(log.starts_with(tmp.path()), "in the temporary directory: {}", log.display());
    checks_clean(tmp.path(), &log);
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(path).unwrap().permissions().mode() & 0o777
}

#[cfg(unix)]
#[test]
fn each_run_gets_a_fresh_owner_only_directory() {
    let tmp = tempfile::tempdir().unwrap();
    // What a fixed path would have met: a directory another user made first.
    std::fs::create_dir(tmp.path().join("rein-demo")).unwrap();
    let logs: Vec<PathBuf> = (0..2)
        .map(|_| {
            let out = rein_in(tmp.path(), &["demo"]);
            assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
            log_path(&text(&out.stdout))
        })
        .collect();
    assert_ne!(logs[0].parent(), logs[1].parent(), "one directory per run");
    for log in &logs {
        let dir = log.parent().unwrap();
        assert_eq!(dir.parent().unwrap(), tmp.path());
        let name = dir.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("rein-demo-") && name.len() > "rein-demo-".len(), "{name}");
        assert_eq!(mode(dir), 0o700, "{}", dir.display());
        assert_eq!(mode(log), 0o600, "{}", log.display());
        let entries: Vec<_> = std::fs::read_dir(dir).unwrap().collect();
        assert_eq!(entries.len(), 1, "only the log, no temporary file left");
    }
    let dir = tmp.path().join("made");
    let out = rein_in(tmp.path(), &["demo", "--dir", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!((mode(&dir), mode(&dir.join("demo.jsonl"))), (0o700, 0o600));
}

#[cfg(unix)]
#[test]
fn a_symbolic_link_as_the_directory_or_the_log_is_refused_and_nothing_is_written() {
    use std::os::unix::fs::symlink;
    let tmp = tempfile::tempdir().unwrap();
    let victim = tmp.path().join("victim.txt");
    std::fs::write(&victim, "precious\n").unwrap();
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();

    // --dir is a link to a directory.
    let linked_dir = tmp.path().join("linked-dir");
    symlink(&elsewhere, &linked_dir).unwrap();
    let out = rein_in(tmp.path(), &["demo", "--dir", linked_dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: cannot write the log: {}: is a symbolic link; rein does not write through \
             links it did not create (name the real path)\n",
            linked_dir.display()
        )
    );
    assert!(out.stdout.is_empty());
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0, "nothing written through it");

    // --dir is a real directory whose demo.jsonl is a link to a file of the user.
    let dir = tmp.path().join("dir");
    std::fs::create_dir(&dir).unwrap();
    let log = dir.join("demo.jsonl");
    symlink(&victim, &log).unwrap();
    let out = rein_in(tmp.path(), &["demo", "--dir", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "error: cannot write the log: {}: is a symbolic link",
            log.display()
        )),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n", "the target is untouched");
    assert!(std::fs::symlink_metadata(&log).unwrap().file_type().is_symlink(), "the link stays");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no temporary file left");
}

#[test]
fn a_dir_that_is_a_file_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let out = rein_in(tmp.path(), &["demo", "--dir", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!("error: cannot write the log: {}: is not a directory\n", file.display())
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
}
