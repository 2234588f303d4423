//! A full disk, for real: `rein stress --store jsonl` into a 256 KiB tmpfs. The disk fills
//! mid-run; every append that does not fit fails whole (no partial line is left, and nothing a
//! smaller batch could squeeze in after it), the session whose append failed stops taking turns,
//! and every log left there passes `rein check` as it is — a turn the full disk kept open is only
//! a warning — and `rein check --finished` once the disk has room again and a run has reopened
//! (repaired) the sessions.
//!
//! Mounting needs root (as in CI); elsewhere the test says so and passes without running.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit {}\n--- stdout\n{}--- stderr\n{}", self.code, self.stdout, self.stderr)
    }
}

fn rein(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_rein")).args(args).output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// A tmpfs mounted at a fresh directory, unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// A tmpfs of `size` (`256k`), or why it cannot be mounted here.
    fn mount(size: &str) -> Result<Self, String> {
        let uid = Command::new("id").arg("-u").output().map_err(|e| e.to_string())?;
        if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
            return Err("not root".to_owned());
        }
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let options = format!("size={size}");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &options, "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| e.to_string())?;
        if !mounted.status.success() {
            return Err(String::from_utf8_lossy(&mounted.stderr).trim().to_owned());
        }
        Ok(Self { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Gives the file system `size` (its files stay).
    fn resize(&self, size: &str) {
        let options = format!("remount,size={size}");
        let status =
            Command::new("mount").args(["-o", &options]).arg(self.path()).status().unwrap();
        assert!(status.success());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// The session logs in `dir`, sorted.
fn logs(dir: &Path) -> Vec<PathBuf> {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    logs.sort();
    logs
}

fn check(logs: &[PathBuf], finished: bool) -> Run {
    let mut args = vec!["check"];
    if finished {
        args.push("--finished");
    }
    args.extend(logs.iter().map(|p| p.to_str().unwrap()));
    rein(&args)
}

#[test]
fn a_full_disk_fails_appends_whole_and_every_log_checks_clean_once_reopened() {
    let disk = match Tmpfs::mount("256k") {
        Ok(disk) => disk,
        Err(why) => {
            eprintln!("skipped: this test mounts a 256 KiB tmpfs, which needs root ({why})");
            return;
        }
    };
    let dir = disk.path().join("logs");
    let dir_arg = dir.to_str().unwrap();
    let stress = |turns: &str| {
        let args = ["--dir", dir_arg, "--agents", "8", "--turns", turns, "--json"];
        rein(&[&["stress", "--store", "jsonl"][..], &args].concat())
    };

    // 8 agents × 20 turns need several times the room there is.
    let full = stress("20");
    assert_eq!(full.code, 1, "{full:?}");
    let summary: Value = serde_json::from_str(full.stdout.trim()).unwrap();
    let errors = summary["agentErrorExamples"].to_string();
    assert!(errors.contains("its log failed, so the session closed"), "{summary:#}");
    assert!(errors.contains("No space left on device (os error 28)"), "{summary:#}");
    // The run checks its logs as finished: the only violations are turns the full disk kept
    // open (their repair did not fit either), never a turn inside another.
    for example in summary["tally"]["violationExamples"].as_array().unwrap() {
        assert!(example.as_str().unwrap().ends_with("[turn-left-open]"), "{summary:#}");
    }

    let logs = logs(&dir);
    assert_eq!(logs.len(), 8);
    for log in &logs {
        let bytes = std::fs::read(log).unwrap();
        assert_eq!(bytes.last(), Some(&b'\n'), "{}: a partial line was left", log.display());
    }
    let as_left = check(&logs, false);
    assert_eq!(as_left.code, 0, "{as_left:?}");
    assert!(!as_left.stderr.contains("torn"), "{as_left:?}");

    // With room again, a run reopens every session (closing what the full disk left open) and
    // goes on; then every log is a finished, valid log.
    disk.resize("64m");
    let again = stress("1");
    assert_eq!(again.code, 0, "{again:?}");
    let finished = check(&logs, true);
    assert_eq!(finished.code, 0, "{finished:?}");
}
