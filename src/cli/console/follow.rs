//! Following logs as they grow, for the console's live streams: one session's ([`Session`]: the
//! session view's updates) and a whole store's ([`Store`]: the sessions-list rows).
//!
//! Each keeps, per log, a reader that reads only what was appended since its last look
//! (`logs.rs`: through the store, or a file) and the tail that can still change what is shown
//! (`tail.rs`). A stream that connects late reads and renders the history once; after that every
//! update costs the new events and the open turn, whatever the log's length.

use std::collections::BTreeMap;
use std::sync::Arc;

use rein_runtime::store::postgres::PostgresStore;
use serde_json::{Value, json};

use super::logs::{Logs, Reader};
use super::pages;
use super::reader::Read;
use super::status::{self, Summary};
use super::tail::Tail;

/// One session's log, followed for its view.
pub(crate) struct Session {
    id: String,
    logs: Logs,
    reader: Reader,
    tail: Tail,
    /// Whether an update was made (the first is made even when the log is empty).
    started: bool,
}

impl Session {
    /// Session `id` of `logs`, followed from its start.
    pub(crate) fn new(id: &str, logs: &Logs) -> Self {
        let reader = logs.reader(id);
        let (id, logs) = (id.to_owned(), logs.clone());
        Self { id, logs, reader, tail: Tail::default(), started: false }
    }

    /// The next update of the view, `None` when nothing was appended since the last one:
    ///
    /// `{"state", "running", "events", "status", "kept", "tail"}` — what the session does (and
    /// its state line, markup), how many events the log holds, and the conversation after the
    /// first `kept` turn articles (markup), which the page keeps; `kept` is 0 on the first update
    /// and whenever the log had to be read again. `{"error"}` when the log cannot be read.
    pub(crate) async fn update(&mut self) -> Option<Value> {
        match self.reader.read().await {
            Ok(Read::New(events)) if events.is_empty() && self.started => return None,
            Ok(Read::New(events)) => self.tail.extend(events),
            Ok(Read::Again(events)) => self.tail = Tail::of(events),
            Err(_) if !self.logs.exists(&self.id).await.unwrap_or(true) => {
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
pub(crate) struct Store {
    logs: Logs,
    followed: BTreeMap<String, (Reader, Tail)>,
    /// A cluster's database: each row names the node serving its session.
    cluster: Option<Arc<PostgresStore>>,
}

impl Store {
    /// The logs of `logs`, nothing read yet; on a cluster's database (`cluster`), each row names
    /// the node serving its session.
    pub(crate) fn new(logs: &Logs, cluster: Option<Arc<PostgresStore>>) -> Self {
        Self { logs: logs.clone(), followed: BTreeMap::new(), cluster }
    }

    /// Every session's row, newest activity first: each session of the store, read on from
    /// where the last call stopped; a log that cannot be read is a row saying why.
    pub(crate) async fn rows(&mut self) -> Result<Vec<Summary>, String> {
        let ids = self.logs.ids().await?;
        self.followed.retain(|id, _| ids.binary_search(id).is_ok());
        let mut rows = Vec::with_capacity(ids.len());
        for id in ids {
            let logs = &self.logs;
            let (reader, tail) = self
                .followed
                .entry(id.clone())
                .or_insert_with(|| (logs.reader(&id), Tail::default()));
            let read = match reader.read().await {
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
        if let Some(cluster) = &self.cluster
            && let Some(owners) = cluster.owners().await.map_err(|e| e.to_string())?
        {
            for row in &mut rows {
                row.node = owners.of(&row.id).map(str::to_owned);
            }
        }
        Ok(rows)
    }
}
