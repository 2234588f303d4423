//! Running `rein` as a process in a directory of its own, with a clean environment, and reading
//! what it wrote: its output, the session id its banner printed, the session's log after the
//! invariant check.
//!
//! The binary is the one cargo built for the integration test that calls ([`bin`]): these
//! helpers serve the tests of the `rein-cli` package.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rein_runtime::event::Envelope;
use rein_runtime::store::jsonl::read_log;

/// Every variable that would change what `rein chat` does, removed from the child's environment.
pub const ENVIRONMENT: [&str; 13] = [
    "DEEPSEEK_API_KEY",
    "DEEPSEEK_BASE_URL",
    "DEEPSEEK_MODEL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_MODEL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_MODEL",
    "RUST_LOG",
    "NO_COLOR",
    "CLICOLOR_FORCE",
    "CLICOLOR",
];

/// The `rein` binary cargo built beside the running test: `CARGO_BIN_EXE_rein` when the runner
/// sets it, else `rein` in the target directory that holds the test executable (`deps/`'s
/// parent).
pub fn bin() -> PathBuf {
    if let Some(path) = std::env::var_os("CARGO_BIN_EXE_rein") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().unwrap();
    let mut dir = exe.parent().unwrap();
    if dir.ends_with("deps") {
        dir = dir.parent().unwrap();
    }
    let path = dir.join(format!("rein{}", std::env::consts::EXE_SUFFIX));
    assert!(path.is_file(), "no rein binary at {}: run this test through cargo", path.display());
    path
}

/// `rein` in `dir` with `args` and `env`, nothing else of the test's environment (the
/// variables of [`ENVIRONMENT`] removed).
pub fn command(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(bin());
    command.args(args).current_dir(dir);
    for name in ENVIRONMENT {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    command
}

/// What a run printed, and how it ended.
pub struct Run {
    /// The exit code (`None` when a signal ended it).
    pub code: Option<i32>,
    /// What it printed on stdout.
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit {:?}\n--- stdout\n{}--- stderr\n{}", self.code, self.stdout, self.stderr)
    }
}

/// `rein ARGS` in `dir` (where the default store `.rein/sessions` goes) with only `env` of the
/// variables above, `stdin` piped in.
pub fn rein(dir: &Path, args: &[&str], env: &[(&str, &str)], stdin: &str) -> Run {
    let mut child = command(dir, args, env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// The session id the banner printed (`session ID (new) · log …`).
pub fn session_id(run: &Run) -> String {
    let line =
        run.stderr.lines().find(|l| l.starts_with("session ") && l.contains(" · log ")).unwrap();
    line["session ".len()..].split(' ').next().unwrap().to_owned()
}

/// Where the default store keeps session `id`'s log.
pub fn log_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(".rein/sessions").join(format!("{id}.jsonl"))
}

/// The session's log, after its invariant check (a finished log: no turn left open).
pub fn checked_log(path: &Path) -> Vec<Envelope> {
    let events = read_log(path).unwrap().events;
    let violations = rein_invariant::check_finished_log(&events);
    assert!(
        violations.is_empty(),
        "{}: {}",
        path.display(),
        violations.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
    );
    events
}

/// `rein check --finished LOG`, which must pass.
pub fn rein_check(dir: &Path, log: &Path) {
    let check = rein(dir, &["check", "--finished", log.to_str().unwrap()], &[], "");
    assert_eq!(check.code, Some(0), "{}: {check:?}", log.display());
}

/// The lines of `text` that start with `prefix`.
pub fn lines_starting<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.starts_with(prefix)).collect()
}
