//! Following logs as they grow, for the console's live streams: one session's ([`Session`]: the
//! session view's updates) and a whole store's ([`Store`]: the sessions-list rows).
//!
//! Each keeps, per log, a reader that reads only what was appended since its last look
//! (`reader.rs`) and the tail that can still change what is shown (`tail.rs`). A stream that
//! connects late reads and renders the history once; after that every update costs the new
//! events and the open turn, whatever the log's length. Blocking: the server runs them on
//! tokio's blocking pool.

use std::collections::BTreeMap;
use std::path::PathBuf;

use rein_runtime::store::check_session_id;
use serde_json::{Value, json};

use super::pages;
use super::reader::{LogReader, Read};
use super::status::{self, Summary};
use super::tail::Tail;

/// One session's log, followed for its view.
#[derive(Debug)]
pub(crate) struct Session {
    id: String,
    path: PathBuf,
    reader: LogReader,
    tail: Tail,
    /// Whether an update was made (the first is made even when the log is empty).
    started: bool,
}

impl Session {
    /// Session `id`, whose log is at `path`, followed from its start.
    pub(crate) fn new(id: &str, path: PathBuf) -> Self {
        let reader = LogReader::new(path.clone());
        Self { id: id.to_owned(), path, reader, tail: Tail::default(), started: false }
    }

    /// The next update of the view, `None` when nothing was appended since the last one:
    ///
    /// `{"state", "running", "events", "status", "kept", "tail"}` — what the session does (and
    /// its state line, markup), how many events the log holds, and the conversation after the
    /// first `kept` turn articles (markup), which the page keeps; `kept` is 0 on the first update
    /// and whenever the log had to be read again. `{"error"}` when the log cannot be read.
    pub(crate) fn update(&mut self) -> Option<Value> {
        match self.reader.read() {
            Ok(Read::New(events)) if events.is_empty() && self.started => return None,
            Ok(Read::New(events)) => self.tail.extend(events),
            Ok(Read::Again(events)) => self.tail = Tail::of(events),
            Err(_) if !self.path.exists() => {
                return Some(
                    json!({"error": format!("there is no session {:?} any more", self.id)}),
                );
            }
            Err(e) => return Some(json!({"error": e})),
        }
        self.started = true;
        let state = self.tail.state();
        let update = json!({
            "state": state,
            "running": state.is_running(),
            "events": self.tail.seen(),
            "status": pages::status(&state).into_string(),
            "kept": self.tail.settled(),
            "tail": pages::tail(&self.tail).into_string(),
        });
        self.tail.settle();
        Some(update)
    }
}

/// Every log of a store, followed for the sessions list.
#[derive(Debug)]
pub(crate) struct Store {
    dir: PathBuf,
    logs: BTreeMap<String, (LogReader, Tail)>,
}

impl Store {
    /// The store at `dir`, nothing read yet.
    pub(crate) fn new(dir: PathBuf) -> Self {
        Self { dir, logs: BTreeMap::new() }
    }

    /// Every session's row, newest activity first: each `*.jsonl` log whose name is a session
    /// id, read on from where the last call stopped; a log that cannot be read is a row saying
    /// why.
    pub(crate) fn rows(&mut self) -> Result<Vec<Summary>, String> {
        let dir = &self.dir;
        let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut ids: Vec<(String, PathBuf)> = entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                let id = name.strip_suffix(".jsonl")?;
                let path = entry.path();
                (check_session_id(id).is_ok() && path.is_file()).then(|| (id.to_owned(), path))
            })
            .collect();
        ids.sort();
        self.logs.retain(|id, _| ids.iter().any(|(known, _)| known == id));
        let mut rows = Vec::with_capacity(ids.len());
        for (id, path) in ids {
            let (reader, tail) = self
                .logs
                .entry(id.clone())
                .or_insert_with(|| (LogReader::new(path), Tail::default()));
            let read = match reader.read() {
                Ok(Read::New(events)) => {
                    tail.extend(events);
                    Ok(())
                }
                Ok(Read::Again(events)) => {
                    *tail = Tail::of(events);
                    Ok(())
                }
                Err(e) => Err(e),
            };
            tail.settle();
            rows.push(match read {
                Ok(()) => tail.summary(&id),
                Err(e) => status::unreadable(&id, e),
            });
        }
        rows.sort_by(|a, b| b.last_time.cmp(&a.last_time).then_with(|| a.id.cmp(&b.id)));
        Ok(rows)
    }
}
