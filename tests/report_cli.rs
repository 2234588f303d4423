//! `rein report` as a process: the page it writes (self-contained, one collapsed panel per turn
//! that retried or failed, provider text escaped, the same bytes for the same logs), the atomic
//! replacement of an existing report, and its exit codes. What the page does in a browser is
//! `tests/report_browser.rs`. Every log a scenario produced passed its invariant check.

// Helpers outside `#[test]` functions panic on purpose, like the tests themselves.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn rein(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rein")).args(args).output().expect("rein runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

fn arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Runs a scenario file of the repository and writes its log to `dir/<log>`.
fn scenario_log(dir: &Path, scenario: &str, log: &str) -> PathBuf {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join(scenario);
    let log = dir.join(log);
    let out = rein(&["scenario", "run", arg(&file), "--json", "--log", arg(&log)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["invariant"]["ok"], true, "{report}");
    log
}

/// The two logs of the browser test: three turns (recovered, clean, exhausted) with hostile
/// provider text, and a turn cancelled during a retry's wait.
fn logs(dir: &Path) -> [PathBuf; 2] {
    [
        scenario_log(dir, "tests/panels/report.json", "mixed.jsonl"),
        scenario_log(dir, "tests/scenarios/llm-retry-cancel-during-wait.json", "cancelled.jsonl"),
    ]
}

#[test]
fn the_page_is_self_contained_with_a_collapsed_panel_per_failing_turn() {
    let dir = tempfile::tempdir().unwrap();
    let [mixed, cancelled] = logs(dir.path());
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let page = out_dir.join("report.html");
    let out = rein(&["report", arg(&mixed), arg(&cancelled), "-o", arg(&page)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "");
    assert_eq!(
        text(&out.stdout),
        format!("wrote {}: 2 logs, 4 turns, 3 retried or failed\n", arg(&page))
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"));
    assert!(html.contains(
        r#"<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">"#
    ));
    assert_eq!(html.matches("<details class=\"rein-panel\"").count(), 3);
    for tag in html.split("<details").skip(1).map(|rest| &rest[..rest.find('>').unwrap()]) {
        assert!(!tag.contains("open"), "every panel collapsed: <details{tag}>");
    }
    assert!(html.contains("prefers-color-scheme: dark"));
    // No script, no external asset, and the provider's markup is text.
    for absent in ["<script", "<img", "<link", "src=\"", "http://", "https://", "@import", "url("] {
        assert!(!html.contains(absent), "{absent}");
    }
    assert!(html.contains(
        "&lt;script&gt;document.title='pwned';window.pwned=1&lt;/script&gt;&lt;img src=x \
         onerror=&quot;window.pwned=2&quot;&gt; &amp; &quot;quoted&quot;"
    ));
    assert!(html.contains("<div class=\"text\">Please echo &lt;hello &amp; bye&gt;</div>"));
    // Nothing but the report in the output directory (the temporary file was renamed).
    let names: Vec<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["report.html"]);

    // The same logs give the same bytes.
    let again = dir.path().join("again.html");
    let out = rein(&["report", arg(&mixed), arg(&cancelled), "--output", arg(&again)]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&again).unwrap(), html);
}

#[test]
fn an_existing_report_is_replaced_whole() {
    let dir = tempfile::tempdir().unwrap();
    let [mixed, _] = logs(dir.path());
    let page = dir.path().join("report.html");
    std::fs::write(&page, "old report").unwrap();
    let out = rein(&["report", arg(&mixed), "-o", arg(&page)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.ends_with("</html>"));
    assert!(html.contains(&format!("<title>rein report · {}</title>", arg(&mixed))));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&page).unwrap().permissions().mode();
        assert_eq!(mode & 0o444, 0o444, "readable by all, like any written file: {mode:o}");
    }
}

#[test]
fn an_unreadable_log_exits_2_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let [mixed, _] = logs(dir.path());
    let lines = std::fs::read_to_string(&mixed).unwrap();
    let mut broken: Vec<&str> = lines.lines().collect();
    broken[4] = "{\"seq\":4}";
    let corrupt = dir.path().join("corrupt.jsonl");
    std::fs::write(&corrupt, broken.join("\n") + "\n").unwrap();
    let page = dir.path().join("report.html");
    std::fs::write(&page, "old report").unwrap();

    let out = rein(&["report", arg(&mixed), arg(&corrupt), "-o", arg(&page)]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    let mut errors = stderr.lines();
    let first = errors.next().unwrap();
    assert!(
        first.starts_with(&format!("error: {}:5: corrupt log line: ", arg(&corrupt))),
        "{stderr}"
    );
    assert_eq!(errors.next(), Some("error: no report written: 1 log could not be read"));
    assert_eq!(std::fs::read_to_string(&page).unwrap(), "old report", "left as it was");
    assert_eq!(text(&out.stdout), "");
}

#[test]
fn a_report_that_cannot_be_written_exits_1_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let [mixed, _] = logs(dir.path());
    let page = dir.path().join("no-such-dir").join("report.html");
    let out = rein(&["report", arg(&mixed), "-o", arg(&page)]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with(&format!("error: {}: cannot write the report: ", arg(&page))),
        "{stderr}"
    );
}

#[test]
fn help_states_the_output_and_exit_status() {
    let out = rein(&["report", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    for needle in [
        "--output <FILE>",
        "On stdout",
        "on stderr",
        "Exit status: 0",
        "2 when a log",
        "or a usage error",
        "1 when the report",
    ] {
        assert!(help.contains(needle), "{needle}: {help}");
    }
}
