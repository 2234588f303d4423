//! Reading the JSONL session logs that `rein show` and `rein report` look at, with the store's
//! own reader ([`read_log`]): the same line rules as a session's reopen, and nothing is changed.
//!
//! - A torn last line (a crash during an append) is left out with a warning, as a reopen would.
//! - Any other corrupt line is an error naming the file and the 1-based line
//!   (`run.jsonl:7: corrupt log line: …`): the log is not shown, because what follows the bad
//!   line cannot be placed.

use std::path::Path;

use rein_runtime::event::Envelope;
use rein_runtime::store::jsonl::read_log;

/// A log that was read.
#[derive(Debug)]
pub(crate) struct Log {
    /// Its name in output: the path as given.
    pub(crate) name: String,
    /// Its events.
    pub(crate) events: Vec<Envelope>,
    /// What a person should know about it (a torn last line).
    pub(crate) warnings: Vec<String>,
}

/// Reads the log at `path`; the error names the file (and the line when one is corrupt).
pub(crate) fn read(path: &Path) -> Result<Log, String> {
    let name = path.display().to_string();
    let loaded = read_log(path).map_err(|e| e.to_string())?;
    let warnings = loaded
        .torn
        .map(|t| format!("{name}: torn last line {} ({} bytes), ignored", t.line, t.bytes))
        .into_iter()
        .collect();
    Ok(Log { name, events: loaded.events, warnings })
}
