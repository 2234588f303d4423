//! `rein demo [--json] [--log PATH]`: the main job on a fresh machine — no API key, no server.
//!
//! Runs the embedded scenario `examples/scenarios/demo.json` on virtual time: a turn whose first
//! attempt is rate limited (the provider asks for 1.5 s) and whose second hits a server error,
//! both recovered by `llm-retry`, then a tool call through `echo`; a second turn that fails with
//! `AUTH` (never retried) and is retried by hand a minute later. It prints what happened, writes
//! the session log as JSONL and says where, so `rein check` can be run on it.

use std::path::PathBuf;
use std::process::ExitCode;

/// The embedded scenario.
const DEMO: &str = include_str!("../../examples/scenarios/demo.json");

/// Arguments of `rein demo`.
#[derive(Debug, clap::Args)]
pub(crate) struct DemoArgs {
    /// Print the report as one JSON object on stdout.
    #[arg(long)]
    json: bool,
    /// Where to write the session log (default: `rein-demo/demo.jsonl` in the temp directory).
    #[arg(long, value_name = "PATH")]
    log: Option<PathBuf>,
}

/// Runs `rein demo`.
pub(crate) fn run(args: &DemoArgs) -> ExitCode {
    let log = match &args.log {
        Some(path) => path.clone(),
        None => {
            let dir = std::env::temp_dir().join("rein-demo");
            if let Err(e) = std::fs::create_dir_all(&dir) {
                eprintln!("error: {}: {e}", dir.display());
                return ExitCode::from(1);
            }
            dir.join("demo.jsonl")
        }
    };
    let status = super::scenario::run_text("demo.json (embedded)", DEMO, args.json, Some(&log));
    if status == ExitCode::SUCCESS && !args.json {
        println!("session log: {} (check it: rein check {})", log.display(), log.display());
    }
    status
}
