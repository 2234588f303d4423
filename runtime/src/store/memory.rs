//! [`MemoryStore`]: session logs in memory, for tests and benchmarks.
//!
//! Each log keeps its [`Head`] beside its events, updated by every append.
//!
//! It follows the same rules as the durable stores (session ids are checked, an append must
//! continue the log's `seq`), so a test against it means the same thing as one against them.
//!
//! # Why a log is a list of batches
//!
//! Each append keeps its batch as one allocation of its own, instead of growing one vector per
//! session. A growing vector is reallocated as the log grows, and once it passes a kilobyte or so
//! every reallocation is a "large" request to the system allocator — which glibc answers by first
//! consolidating every small free chunk in the heap. With a hundred thousand sessions appending
//! at once (a mass cancel), that consolidation was a quarter of the runtime's CPU. Batches stay
//! small; reading a log back copies them out in order, as it copied the vector before, and reading
//! it from a `seq` on finds the first batch it needs by a binary search. A batch the session log
//! shares ([`SessionStore::append_shared`]) is kept as it is, not copied.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use super::claim::Claims;
use super::settings_record::{check_base, check_plugin_name};
use super::{
    Claim, Durability, Head, Loaded, SessionHead, SessionStore, SettingsRecord, StoreError,
    StoredSettings, check_continues, check_session_id,
};
use crate::event::Envelope;
use crate::future::BoxFuture;

/// Session logs held in memory. Clones share the same logs.
///
/// For tests and short-lived programs; read a log back with [`MemoryStore::events`]:
///
/// ```
/// use std::sync::Arc;
/// use rein_runtime::prelude::*;
///
/// # tokio_test::block_on(async {
/// let store = MemoryStore::new();
/// let runtime = Runtime::builder().store(Arc::new(store.clone())).build().await?;
/// runtime.session("s1").await?.close().await?;
/// runtime.shutdown().await;
/// let kinds: Vec<&str> = store.events("s1").iter().map(|e| e.kind()).collect();
/// assert_eq!(kinds, ["session/start"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    logs: Arc<Mutex<HashMap<String, Log>>>,
    /// Everything is in this process: a claim is only the in-process part.
    claims: Claims,
    /// Plugin settings by plugin name.
    settings: Arc<Mutex<BTreeMap<String, SettingsRecord>>>,
}

/// One session's log: its batches in order, how many events they hold, and its head (kept as
/// it is appended to).
#[derive(Debug, Default)]
struct Log {
    batches: Vec<Arc<[Envelope]>>,
    len: u64,
    head: Head,
}

impl Log {
    fn events(&self) -> Vec<Envelope> {
        let mut events = Vec::with_capacity(usize::try_from(self.len).unwrap_or(0));
        for batch in &self.batches {
            events.extend_from_slice(batch);
        }
        events
    }

    /// The events from `seq` on: the batches before the one holding `seq` are skipped by a
    /// binary search (each batch is non-empty and its `seq`s follow the previous one's).
    fn events_from(&self, seq: u64) -> Vec<Envelope> {
        let first = self.batches.partition_point(|b| b.last().is_some_and(|e| e.seq < seq));
        let mut events = Vec::new();
        for batch in &self.batches[first..] {
            events.extend(batch.iter().filter(|e| e.seq >= seq).cloned());
        }
        events
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of one session's events (empty when it does not exist).
    pub fn events(&self, session: &str) -> Vec<Envelope> {
        self.logs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(session)
            .map(Log::events)
            .unwrap_or_default()
    }
}

impl MemoryStore {
    /// Appends `events` to `session`'s log as one batch (`batch` makes the one it keeps).
    fn keep(
        &self,
        session: &str,
        events: &[Envelope],
        batch: impl FnOnce() -> Arc<[Envelope]>,
    ) -> Result<(), StoreError> {
        check_session_id(session)?;
        if events.is_empty() {
            return Ok(());
        }
        let mut logs = self.logs.lock().unwrap_or_else(PoisonError::into_inner);
        let next = logs.get(session).map_or(0, |log| log.len);
        check_continues(session, next, events)?;
        let keep = |log: &mut Log| {
            log.batches.push(batch());
            log.len += events.len() as u64;
            events.iter().for_each(|event| log.head.apply(event));
        };
        match logs.get_mut(session) {
            Some(log) => keep(log),
            None => {
                let mut log = Log::default();
                keep(&mut log);
                logs.insert(session.to_owned(), log);
            }
        }
        Ok(())
    }
}

impl SessionStore for MemoryStore {
    fn durability(&self) -> Durability {
        Durability::Os
    }

    fn append<'a>(
        &'a self,
        session: &'a str,
        events: &'a [Envelope],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move { self.keep(session, events, || events.into()) })
    }

    fn append_shared<'a>(
        &'a self,
        session: &'a str,
        events: &'a Arc<[Envelope]>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move { self.keep(session, events, || Arc::clone(events)) })
    }

    fn claim<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Claim, StoreError>> {
        Box::pin(async move {
            check_session_id(session)?;
            Ok(Claim::new(self.claims.take(session).await))
        })
    }

    fn load<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Option<Loaded>, StoreError>> {
        Box::pin(async move {
            check_session_id(session)?;
            let logs = self.logs.lock().unwrap_or_else(PoisonError::into_inner);
            Ok(logs.get(session).map(|log| Loaded { events: log.events(), torn: None }))
        })
    }

    fn load_from<'a>(
        &'a self,
        session: &'a str,
        seq: u64,
    ) -> BoxFuture<'a, Result<Vec<Envelope>, StoreError>> {
        Box::pin(async move {
            check_session_id(session)?;
            let logs = self.logs.lock().unwrap_or_else(PoisonError::into_inner);
            Ok(logs.get(session).map(|log| log.events_from(seq)).unwrap_or_default())
        })
    }

    fn sessions(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        Box::pin(async move {
            let logs = self.logs.lock().unwrap_or_else(PoisonError::into_inner);
            let mut ids: Vec<String> = logs.keys().cloned().collect();
            ids.sort();
            Ok(ids)
        })
    }

    fn heads(&self) -> BoxFuture<'_, Result<Vec<SessionHead>, StoreError>> {
        Box::pin(async move {
            let logs = self.logs.lock().unwrap_or_else(PoisonError::into_inner);
            let mut heads: Vec<SessionHead> = logs
                .iter()
                .map(|(id, log)| SessionHead { session: id.clone(), head: Ok(log.head) })
                .collect();
            heads.sort_by(|a, b| a.session.cmp(&b.session));
            Ok(heads)
        })
    }

    fn save_settings<'a>(
        &'a self,
        record: &'a SettingsRecord,
        base: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            check_plugin_name(&record.plugin)?;
            let mut settings = self.settings.lock().unwrap_or_else(PoisonError::into_inner);
            check_base(record, base, settings.get(&record.plugin).map(|r| r.revision))?;
            settings.insert(record.plugin.clone(), record.clone());
            Ok(())
        })
    }

    fn load_settings(&self) -> BoxFuture<'_, Result<Vec<StoredSettings>, StoreError>> {
        Box::pin(async move {
            let settings = self.settings.lock().unwrap_or_else(PoisonError::into_inner);
            Ok(settings.values().cloned().map(StoredSettings::Record).collect())
        })
    }
}
