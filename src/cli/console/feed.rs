//! How the console learns that a log grew.
//!
//! - Live (the console runs the runtime): [`NotifyingStore`] wraps the runtime's store and, once
//!   an append is acknowledged, bumps the session's counter in the [`Feed`] (and the counter of
//!   all sessions). Everything the runtime writes — a turn's events, a plugin's `llm/retry`,
//!   `config/changed`, the repair of a reopened log — goes through the store, so a session view
//!   subscribed to the counter sees every change, and nothing is polled.
//! - Read-only (another process writes the store): there is no runtime to tell, so once per
//!   [`POLL`] the console looks: at the [`Fingerprint`] of the files (size and modification
//!   time) of a JSONL directory, or, for a store read through its API (PostgreSQL), by reading
//!   on from where it stopped (a read that finds nothing new sends nothing).
//!
//! [`Changes`] is what a stream waits on: the feed's counter or the poll — or both, for what
//! changes with every append and also with time alone (a route's breaker half-opens at its
//! deadline).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use rein_runtime::BoxFuture;
use rein_runtime::event::Envelope;
use rein_runtime::store::{Durability, Loaded, SessionStore, StoreError};
use tokio::sync::watch;

/// How often a read-only console looks at the files.
pub(crate) const POLL: Duration = Duration::from_secs(1);

/// Resolves when what it watches changed.
pub(crate) enum Changes {
    /// The feed's counter.
    Feed(watch::Receiver<u64>),
    /// Files looked at once per [`POLL`].
    Files { target: PathBuf, dir: bool, last: Fingerprint, tick: tokio::time::Interval },
    /// Once per [`POLL`]: the reader finds out whether anything is new.
    Ticks(tokio::time::Interval),
    /// The feed's counter, and once per [`POLL`] besides.
    FeedOrTick(watch::Receiver<u64>, tokio::time::Interval),
}

impl Changes {
    /// The file `target` (or the logs of the directory `target`, when `dir`), looked at once per
    /// [`POLL`].
    pub(crate) fn files(target: PathBuf, dir: bool) -> Self {
        let last = if dir { Fingerprint::dir(&target) } else { Fingerprint::file(&target) };
        Changes::Files { target, dir, last, tick: interval() }
    }

    /// Once per [`POLL`].
    pub(crate) fn ticks() -> Self {
        Changes::Ticks(interval())
    }

    /// At each change of `feed`, and once per [`POLL`] besides.
    pub(crate) fn feed_or_tick(feed: watch::Receiver<u64>) -> Self {
        Changes::FeedOrTick(feed, interval())
    }

    /// Resolves at the next change (never, for a feed that is gone).
    pub(crate) async fn next(&mut self) {
        match self {
            Changes::Feed(rx) => {
                if rx.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
            Changes::Files { target, dir, last, tick } => loop {
                tick.tick().await;
                let now = if *dir { Fingerprint::dir(target) } else { Fingerprint::file(target) };
                if now != *last {
                    *last = now;
                    return;
                }
            },
            Changes::Ticks(tick) => {
                tick.tick().await;
            }
            Changes::FeedOrTick(rx, tick) => {
                tokio::select! {
                    changed = rx.changed() => {
                        if changed.is_err() {
                            tick.tick().await; // the feed is gone: the ticks go on
                        }
                    }
                    _ = tick.tick() => {}
                }
            }
        }
    }
}

fn interval() -> tokio::time::Interval {
    let mut tick = tokio::time::interval(POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick
}

/// Counters of appended events: one per session, one for all.
#[derive(Debug)]
pub(crate) struct Feed {
    sessions: Mutex<HashMap<String, watch::Sender<u64>>>,
    all: watch::Sender<u64>,
}

impl Default for Feed {
    fn default() -> Self {
        Self { sessions: Mutex::default(), all: watch::channel(0).0 }
    }
}

impl Feed {
    fn sender(&self, session: &str) -> watch::Sender<u64> {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.entry(session.to_owned()).or_insert_with(|| watch::channel(0).0).clone()
    }

    /// Changes whenever `session`'s log grows.
    pub(crate) fn session(&self, session: &str) -> watch::Receiver<u64> {
        self.sender(session).subscribe()
    }

    /// Changes whenever any log grows.
    pub(crate) fn all(&self) -> watch::Receiver<u64> {
        self.all.subscribe()
    }

    fn appended(&self, session: &str, count: usize) {
        let count = count as u64;
        self.sender(session).send_modify(|n| *n += count);
        self.all.send_modify(|n| *n += count);
    }
}

/// A store that tells a [`Feed`] about every acknowledged append.
pub(crate) struct NotifyingStore {
    inner: Arc<dyn SessionStore>,
    feed: Arc<Feed>,
}

impl NotifyingStore {
    /// `inner`, telling `feed`.
    pub(crate) fn new(inner: Arc<dyn SessionStore>, feed: Arc<Feed>) -> Self {
        Self { inner, feed }
    }
}

impl SessionStore for NotifyingStore {
    fn durability(&self) -> Durability {
        self.inner.durability()
    }

    fn append<'a>(
        &'a self,
        session: &'a str,
        events: &'a [Envelope],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            self.inner.append(session, events).await?;
            self.feed.appended(session, events.len());
            Ok(())
        })
    }

    fn claim<'a>(
        &'a self,
        session: &'a str,
    ) -> BoxFuture<'a, Result<rein_runtime::store::Claim, StoreError>> {
        self.inner.claim(session)
    }

    fn load<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Option<Loaded>, StoreError>> {
        self.inner.load(session)
    }

    fn load_from<'a>(
        &'a self,
        session: &'a str,
        seq: u64,
    ) -> BoxFuture<'a, Result<Vec<Envelope>, StoreError>> {
        self.inner.load_from(session, seq)
    }

    fn sessions(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        self.inner.sessions()
    }

    fn heads(&self) -> BoxFuture<'_, Result<Vec<rein_runtime::store::SessionHead>, StoreError>> {
        self.inner.heads()
    }
    fn save_settings<'a>(
        &'a self,
        record: &'a rein_runtime::store::SettingsRecord,
        base: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.save_settings(record, base)
    }

    fn load_settings(
        &self,
    ) -> BoxFuture<'_, Result<Vec<rein_runtime::store::StoredSettings>, StoreError>> {
        self.inner.load_settings()
    }
}

/// What a file (or every log file of a directory) looks like from outside: names, sizes,
/// modification times. Two equal fingerprints: nothing visible changed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Fingerprint(Vec<(String, u64, Option<SystemTime>)>);

impl Fingerprint {
    /// The fingerprint of one file (empty when it cannot be read).
    pub(crate) fn file(path: &Path) -> Self {
        let entry = std::fs::metadata(path)
            .ok()
            .map(|meta| (String::new(), meta.len(), meta.modified().ok()));
        Fingerprint(entry.into_iter().collect())
    }

    /// The fingerprint of the `*.jsonl` files of `dir`, by name.
    pub(crate) fn dir(dir: &Path) -> Self {
        let mut entries: Vec<(String, u64, Option<SystemTime>)> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                let meta = entry.metadata().ok()?;
                name.ends_with(".jsonl").then(|| (name, meta.len(), meta.modified().ok()))
            })
            .collect();
        entries.sort();
        Fingerprint(entries)
    }
}

#[cfg(test)]
mod tests {
    use rein_runtime::event::{AgentIdle, Event};
    use rein_runtime::store::memory::MemoryStore;

    use super::*;

    #[tokio::test]
    async fn an_acknowledged_append_bumps_its_session_and_all() {
        let feed = Arc::new(Feed::default());
        let store = NotifyingStore::new(Arc::new(MemoryStore::new()), Arc::clone(&feed));
        let (mut one, mut other, mut all) = (feed.session("a"), feed.session("b"), feed.all());
        let at = |seq| Envelope { seq, time: 0, event: Event::AgentIdle(AgentIdle {}) };
        store.append("a", &[at(0), at(1)]).await.unwrap();
        assert!(one.has_changed().unwrap() && all.has_changed().unwrap());
        assert!(!other.has_changed().unwrap());
        assert_eq!((*one.borrow_and_update(), *all.borrow_and_update()), (2, 2));
        // Refused (out of order): nothing was written, nobody is told.
        assert!(store.append("a", &[at(5)]).await.is_err());
        assert!(!one.has_changed().unwrap() && !all.has_changed().unwrap());
        store.append("b", &[at(0)]).await.unwrap();
        assert_eq!((*other.borrow_and_update(), *all.borrow_and_update()), (1, 3));
    }

    #[test]
    fn a_fingerprint_changes_when_a_log_grows_or_appears() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("s.jsonl");
        let empty = Fingerprint::dir(dir.path());
        assert_eq!(Fingerprint::file(&log), Fingerprint::default());
        std::fs::write(&log, "a\n").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        let (one, file) = (Fingerprint::dir(dir.path()), Fingerprint::file(&log));
        assert_ne!(one, empty);
        assert_eq!(one.0.len(), 1, "only logs count");
        std::fs::write(&log, "a\nb\n").unwrap();
        assert_ne!(Fingerprint::dir(dir.path()), one);
        assert_ne!(Fingerprint::file(&log), file);
    }
}
