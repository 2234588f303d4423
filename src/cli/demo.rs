//! `rein demo [--json] [--dir DIR | --store postgres://USER@HOST/DB]`: the embedded demo
//! scenario — no API key, no server.
//!
//! Runs the embedded scenario `examples/scenarios/demo.json` on virtual time with the default
//! plugin chain (`llm-retry`, `compaction`, `auto-retry`): a turn whose first attempt is rate
//! limited (the provider asks for 1.5 s) and whose second hits a server error, both recovered by
//! `llm-retry`, then a tool call through `echo`; a second turn that fails with `AUTH` (never
//! retried, not even by `auto-retry`: the hard floor) and is retried by hand a minute later. It
//! prints what happened (the summary names the manual retry and shows the tool call), writes the
//! session log as JSONL (or, with `--store postgres://…`, as a new session `demo-XXXXXXXXXXXX` of
//! that PostgreSQL store, appended at `Disk` durability) and says where, so `rein check` can be
//! run on it. Output and exit status:
//! [`DEMO_HELP`].
//!
//! # Why a fresh directory per run, and no links
//!
//! A fixed path in the shared temporary directory (such as `/tmp/rein-demo`) belongs to whoever made it
//! first: a second user on the machine could not write there, and anyone could plant a symbolic
//! link there that redirects the log onto a file of the user running the demo. So each run makes
//! a new owner-only directory with an unpredictable name (created exclusively: never one that
//! existed), and a `--dir` that is a link — or holds a `demo.jsonl` that is one — is refused
//! rather than followed ([`output_file`]).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::output_file::{self, Access};

/// The embedded scenario.
const DEMO: &str = include_str!("../../examples/scenarios/demo.json");

/// The log's file name in the run's directory.
const LOG_NAME: &str = "demo.jsonl";

/// The prefix of a run's fresh directory in the temporary directory.
const DIR_PREFIX: &str = "rein-demo-";

/// What `rein demo --help` says after the options: where the log goes, output, exit status.
pub(crate) const DEMO_HELP: &str = "\
Files:
  The session log is DIR/demo.jsonl, readable by you only. Without --dir, DIR is a new directory
  made for this run in the temporary directory ($TMPDIR, else /tmp): rein-demo-XXXXXX, owner-only.
  With --dir, DIR is created owner-only if missing; a DIR or DIR/demo.jsonl that is a symbolic
  link is refused. The log is written whole (a temporary file renamed into place).
  With --store postgres://USER[:PASSWORD]@HOST[:PORT]/DB, the log is a new session
  demo-XXXXXXXXXXXX of that PostgreSQL store instead, appended whole in one transaction
  (synchronous commit); the password (from the URL or PGPASSWORD) is never printed.

Output:
  stdout   a summary: turns (the manual retry named), the tool call, the retries, the invariant
           verdict; then `session log: PATH (check it: rein check PATH)`. With --json, the
           report as one JSON object on one line instead, and the `session log:` line on stderr.
  stderr   `error: ...` (the log could not be written, naming the path), `note: ...`.

Exit status:
  0  the demo ran and its log was written
  1  the log could not be written (a refused or unwritable path), or an internal fault
  2  a usage error";

/// Arguments of `rein demo`.
#[derive(Debug, clap::Args)]
pub(crate) struct DemoArgs {
    /// Print the report as one JSON object on stdout.
    #[arg(long)]
    json: bool,
    /// Write the session log to DIR/demo.jsonl (default: a new directory per run in the
    /// temporary directory).
    #[arg(long, value_name = "DIR", conflicts_with = "store")]
    dir: Option<PathBuf>,
    /// Write the session log to a PostgreSQL store instead: postgres://USER@HOST/DB.
    #[arg(long, value_name = "URL")]
    store: Option<String>,
}

/// Runs `rein demo`.
pub(crate) fn run(args: &DemoArgs) -> ExitCode {
    if let Some(url) = &args.store {
        return to_postgres(url, args.json);
    }
    let fresh = args.dir.is_none();
    let dir = match prepare(args.dir.as_deref()) {
        Ok(dir) => dir,
        Err(e) => {
            eprintln!("error: cannot write the log: {e}");
            return ExitCode::from(1);
        }
    };
    let log = dir.join(LOG_NAME);
    let status = super::scenario::run_text(
        "demo.json (embedded)",
        DEMO,
        args.json,
        Some((&log, Access::Private)),
    );
    if status != ExitCode::SUCCESS {
        if fresh {
            // Only removes it if empty: a run that failed leaves no trace of itself.
            let _ = std::fs::remove_dir(&dir);
        }
    } else {
        let line =
            format!("session log: {} (check it: rein check {})", log.display(), log.display());
        if args.json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    }
    status
}

/// The demo with its log written to the PostgreSQL store at `url`, as a new session.
fn to_postgres(url: &str, json: bool) -> ExitCode {
    use rein::runtime::store::postgres::PostgresStore;
    use rein::runtime::store::{Durability, SessionStore};
    let id = format!("demo-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let mut shown = None;
    let status = super::scenario::run_text_with("demo.json (embedded)", DEMO, json, |events| {
        let tokio = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        tokio.block_on(async {
            let store =
                PostgresStore::open(url, Durability::Disk).await.map_err(|e| e.to_string())?;
            let _claim = store.claim(&id).await.map_err(|e| e.to_string())?;
            store.append(&id, events).await.map_err(|e| e.to_string())?;
            shown = Some(store.shown().to_owned());
            Ok(())
        })
    });
    if let (true, Some(shown)) = (status == ExitCode::SUCCESS, shown) {
        let line = format!(
            "session log: {id} in {shown} (check it: rein check --postgres {shown} --session {id})"
        );
        if json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    }
    status
}

/// The directory to write the log to: `dir` (created owner-only if missing, refused if a link),
/// or a fresh one in the temporary directory.
fn prepare(dir: Option<&Path>) -> Result<PathBuf, output_file::OutputError> {
    match dir {
        Some(dir) => output_file::private_dir(dir).map(|()| dir.to_owned()),
        None => output_file::fresh_dir(&std::env::temp_dir(), DIR_PREFIX),
    }
}
