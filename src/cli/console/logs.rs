//! Where the console reads session logs from: [`Logs`].
//!
//! - [`Logs::Store`]: through the session store — what a live console does, over the runtime's
//!   own store, whatever its kind (a JSONL directory, a PostgreSQL database), and a read-only
//!   console over PostgreSQL. The sessions are the store's [`SessionStore::sessions`]; a log is
//!   read as it grows with [`SessionStore::load_from`] from the next `seq` the reader has not
//!   seen, so each read costs what was appended since the last one, whatever the log's length
//!   (each store reads only the part asked for).
//! - [`Logs::Files`]: the `*.jsonl` files of a directory served read-only, which another process
//!   writes. Read as files (`reader.rs`), never through a store instance: loading through one
//!   would cut a torn last line — a write — and a log it does not hold may grow behind it.
//!
//! Either way a [`Reader`] returns the events appended since its last read, or the whole log
//! again when it no longer continues what was read ([`Read::Again`]).

use std::path::PathBuf;
use std::sync::Arc;

use rein_runtime::event::Envelope;
use rein_runtime::store::jsonl::read_log;
use rein_runtime::store::{SessionStore, check_session_id};

use super::feed::Changes;
use super::reader::{LogReader, Read};

/// Where the logs are.
#[derive(Clone)]
pub(crate) enum Logs {
    /// A store (see the module docs).
    Store(Arc<dyn SessionStore>),
    /// The JSONL files of a directory served read-only.
    Files(PathBuf),
}

impl Logs {
    /// The file of session `id` in a directory of files, when `id` is a valid session id.
    fn file(dir: &std::path::Path, id: &str) -> Option<PathBuf> {
        check_session_id(id).ok().map(|()| dir.join(format!("{id}.jsonl")))
    }

    /// The ids of every session, in id order.
    pub(crate) async fn ids(&self) -> Result<Vec<String>, String> {
        match self {
            Logs::Store(store) => {
                let mut ids = store.sessions().await.map_err(|e| e.to_string())?;
                ids.sort();
                Ok(ids)
            }
            Logs::Files(dir) => {
                let dir = dir.clone();
                blocking(move || {
                    let entries =
                        std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                    let mut ids: Vec<String> = entries
                        .flatten()
                        .filter_map(|entry| {
                            let name = entry.file_name().into_string().ok()?;
                            let id = name.strip_suffix(".jsonl")?;
                            let valid = check_session_id(id).is_ok() && entry.path().is_file();
                            valid.then(|| id.to_owned())
                        })
                        .collect();
                    ids.sort();
                    Ok(ids)
                })
                .await
            }
        }
    }

    /// Whether session `id` has a log.
    pub(crate) async fn exists(&self, id: &str) -> Result<bool, String> {
        if check_session_id(id).is_err() {
            return Ok(false);
        }
        match self {
            Logs::Store(_) => Ok(self.ids().await?.iter().any(|known| known == id)),
            Logs::Files(dir) => Ok(Self::file(dir, id).is_some_and(|path| path.is_file())),
        }
    }

    /// Session `id`'s whole log: `Ok(None)` when there is no such session.
    pub(crate) async fn read(&self, id: &str) -> Result<Option<Vec<Envelope>>, String> {
        if check_session_id(id).is_err() {
            return Ok(None);
        }
        match self {
            Logs::Store(store) => store
                .load(id)
                .await
                .map(|loaded| loaded.map(|loaded| loaded.events))
                .map_err(|e| e.to_string()),
            Logs::Files(dir) => {
                let Some(path) = Self::file(dir, id) else { return Ok(None) };
                blocking(move || {
                    if !path.is_file() {
                        return Ok(None);
                    }
                    read_log(&path).map(|loaded| Some(loaded.events)).map_err(|e| e.to_string())
                })
                .await
            }
        }
    }

    /// A reader of session `id`'s log that has read nothing yet.
    pub(crate) fn reader(&self, id: &str) -> Reader {
        match self {
            Logs::Store(store) => {
                Reader::Store { store: Arc::clone(store), id: id.to_owned(), next: 0 }
            }
            Logs::Files(dir) => Reader::File(Some(LogReader::new(dir.join(format!("{id}.jsonl"))))),
        }
    }

    /// How a console without a runtime learns that session `id`'s log (`None`: any log) grew:
    /// the files' fingerprints, or a store asked again once per [`POLL`](super::feed::POLL).
    pub(crate) fn polled(&self, id: Option<&str>) -> Changes {
        match (self, id) {
            (Logs::Store(_), _) => Changes::ticks(),
            (Logs::Files(dir), None) => Changes::files(dir.clone(), true),
            (Logs::Files(dir), Some(id)) => Changes::files(dir.join(format!("{id}.jsonl")), false),
        }
    }
}

/// One log, read as it grows.
pub(crate) enum Reader {
    /// Through a store: the next `seq` not read yet.
    Store { store: Arc<dyn SessionStore>, id: String, next: u64 },
    /// A file (`None` only while a read runs on the blocking pool).
    File(Option<LogReader>),
}

impl Reader {
    /// The events appended since the last read (all of them on the first), or the whole log
    /// again when it no longer continues what was read.
    pub(crate) async fn read(&mut self) -> Result<Read, String> {
        match self {
            Reader::Store { store, id, next } => {
                let events = store.load_from(id, *next).await.map_err(|e| e.to_string())?;
                match continued(*next, &events) {
                    true => {
                        *next += events.len() as u64;
                        Ok(Read::New(events))
                    }
                    false => {
                        let loaded = store.load(id).await.map_err(|e| e.to_string())?;
                        let events = loaded.map(|loaded| loaded.events).unwrap_or_default();
                        *next = events.len() as u64;
                        Ok(Read::Again(events))
                    }
                }
            }
            Reader::File(slot) => {
                let Some(mut reader) = slot.take() else {
                    return Err("the log is being read already".to_owned());
                };
                let (reader, read) = tokio::task::spawn_blocking(move || {
                    let read = reader.read();
                    (reader, read)
                })
                .await
                .map_err(|e| format!("reading failed: {e}"))?;
                *slot = Some(reader);
                read
            }
        }
    }
}

/// Whether `events`, read from `seq` `next` on, go on from there (none do too).
fn continued(next: u64, events: &[Envelope]) -> bool {
    events.iter().zip(next..).all(|(event, seq)| event.seq == seq)
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(work).await.map_err(|e| format!("reading failed: {e}"))?
}

#[cfg(test)]
mod tests {
    use rein_runtime::event::{AgentIdle, Event};
    use rein_runtime::store::memory::MemoryStore;

    use super::*;

    fn at(seq: u64) -> Envelope {
        Envelope { seq, time: seq, event: Event::AgentIdle(AgentIdle {}) }
    }

    #[test]
    fn events_continue_a_read_only_from_its_next_seq() {
        let cases: [(u64, &[u64], bool); 5] = [
            (0, &[], true),
            (0, &[0, 1], true),
            (3, &[3, 4, 5], true),
            (3, &[0, 1], false),
            (3, &[3, 5], false),
        ];
        for (next, seqs, want) in cases {
            let events: Vec<Envelope> = seqs.iter().map(|seq| at(*seq)).collect();
            assert_eq!(continued(next, &events), want, "{next} {seqs:?}");
        }
    }

    #[tokio::test]
    async fn a_store_reader_reads_each_event_once_and_the_store_lists_what_exists() {
        let store = MemoryStore::new();
        let logs = Logs::Store(Arc::new(store.clone()));
        let mut reader = logs.reader("s");
        let seqs = |read: Read| match read {
            Read::New(events) => ("new", events.iter().map(|e| e.seq).collect::<Vec<_>>()),
            Read::Again(events) => ("again", events.iter().map(|e| e.seq).collect()),
        };
        assert_eq!(seqs(reader.read().await.unwrap()), ("new", vec![]));
        assert!(!logs.exists("s").await.unwrap());
        store.append("s", &[at(0), at(1)]).await.unwrap();
        assert_eq!(seqs(reader.read().await.unwrap()), ("new", vec![0, 1]));
        assert_eq!(seqs(reader.read().await.unwrap()), ("new", vec![]));
        store.append("s", &[at(2)]).await.unwrap();
        assert_eq!(seqs(reader.read().await.unwrap()), ("new", vec![2]));
        assert_eq!(logs.ids().await.unwrap(), ["s"]);
        assert!(logs.exists("s").await.unwrap() && !logs.exists("../s").await.unwrap());
        assert_eq!(logs.read("s").await.unwrap().map(|e| e.len()), Some(3));
        assert_eq!(logs.read("t").await.unwrap(), None);
    }
}
