//! [`FaultyStore`]: a store that fails on purpose, for tests of what a failed write does.
//!
//! It wraps another store (a [`MemoryStore`] by default) and passes everything through, except
//! the faults a test switches on: appends that fail (all of them while [`FaultyStore::fail_appends`]
//! is on, or the appends numbered with [`FaultyStore::fail_append`], counted from the first this
//! store was asked for), appends held until the test lets them go ([`FaultyStore::hold_next`]),
//! loads that report a torn last line cut ([`FaultyStore::torn`]), and the durability it claims.
//! A failed append writes nothing to the inner store, as a real store's failed append leaves no
//! trace; it fails like a full disk.

use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use tokio::sync::oneshot;

use super::memory::MemoryStore;
use super::{
    Claim, Durability, Loaded, SessionStore, SettingsRecord, StoreError, StoredSettings, TornTail,
};
use crate::event::Envelope;
use crate::future::BoxFuture;

/// A store that fails when told to (see the module docs).
///
/// ```
/// use std::sync::Arc;
/// use rein_runtime::prelude::*;
/// use rein_runtime::store::faulty::FaultyStore;
///
/// # tokio_test::block_on(async {
/// let store = Arc::new(FaultyStore::new(MemoryStore::new()));
/// store.fail_append(1); // the session's second append: its first turn's opening events
/// let runtime = Runtime::builder().store(store.clone()).build().await?;
/// let session = runtime.session("s1").await?;
/// assert!(session.ask("hi").await.is_err(), "the turn could not be written");
/// runtime.shutdown().await;
/// let kinds: Vec<&str> = store.inner().events("s1").iter().map(|e| e.kind()).collect();
/// assert_eq!(kinds, ["session/start"], "nothing of the failed append was kept");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Default)]
pub struct FaultyStore<S = MemoryStore> {
    inner: S,
    disk: bool,
    torn: Option<TornTail>,
    failing: AtomicBool,
    fail_at: Mutex<BTreeSet<u64>>,
    appends: AtomicU64,
    gates: Mutex<VecDeque<oneshot::Receiver<()>>>,
    failing_settings: AtomicBool,
    unreachable: AtomicBool,
}

impl<S: SessionStore> FaultyStore<S> {
    /// `inner`, with no fault switched on.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            disk: false,
            torn: None,
            failing: AtomicBool::new(false),
            fail_at: Mutex::new(BTreeSet::new()),
            appends: AtomicU64::new(0),
            gates: Mutex::new(VecDeque::new()),
            failing_settings: AtomicBool::new(false),
            unreachable: AtomicBool::new(false),
        }
    }

    /// The store it wraps.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Claims [`Durability::Disk`] (whatever the inner store's).
    #[must_use]
    pub fn disk(mut self) -> Self {
        self.disk = true;
        self
    }

    /// Every load reports `tail` as a torn last line it cut.
    #[must_use]
    pub fn torn(mut self, tail: TornTail) -> Self {
        self.torn = Some(tail);
        self
    }

    /// While `on`, every append fails.
    pub fn fail_appends(&self, on: bool) {
        self.failing.store(on, Ordering::SeqCst);
    }

    /// The append numbered `n` fails (0 is the first append this store is asked for; see
    /// [`FaultyStore::appends`]); the ones after it go through again.
    pub fn fail_append(&self, n: u64) {
        self.fail_at.lock().unwrap_or_else(PoisonError::into_inner).insert(n);
    }

    /// While `on`, every settings save fails (as on a full disk); nothing is saved.
    pub fn fail_settings(&self, on: bool) {
        self.failing_settings.store(on, Ordering::SeqCst);
    }

    /// While `on`, the store is away as a database is during a restart: every append, claim
    /// and load fails (`ConnectionRefused`).
    pub fn unreachable(&self, on: bool) {
        self.unreachable.store(on, Ordering::SeqCst);
    }

    /// The error of a store that is away, if it is.
    fn away(&self, session: &str) -> Result<(), StoreError> {
        if !self.unreachable.load(Ordering::SeqCst) {
            return Ok(());
        }
        let source = std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "the store is unreachable (fault injected)",
        );
        Err(StoreError::Io { path: format!("{session}.jsonl"), source })
    }

    /// How many appends this store was asked for so far (failed ones included).
    pub fn appends(&self) -> u64 {
        self.appends.load(Ordering::SeqCst)
    }

    /// Holds the next append until the returned sender fires (or is dropped: the append then
    /// fails with [`StoreError::Closed`]).
    pub fn hold_next(&self) -> oneshot::Sender<()> {
        let (tx, rx) = oneshot::channel();
        self.gates.lock().unwrap_or_else(PoisonError::into_inner).push_back(rx);
        tx
    }
}

impl<S: SessionStore> SessionStore for FaultyStore<S> {
    fn durability(&self) -> Durability {
        if self.disk { Durability::Disk } else { self.inner.durability() }
    }

    fn append<'a>(
        &'a self,
        session: &'a str,
        events: &'a [Envelope],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let number = self.appends.fetch_add(1, Ordering::SeqCst);
        let gate = self.gates.lock().unwrap_or_else(PoisonError::into_inner).pop_front();
        Box::pin(async move {
            if let Some(gate) = gate {
                gate.await.map_err(|_| StoreError::Closed)?;
            }
            // Decided once the append goes ahead: a held append meets the faults of that moment.
            self.away(session)?;
            let fails = self.failing.load(Ordering::SeqCst)
                || self.fail_at.lock().unwrap_or_else(PoisonError::into_inner).contains(&number);
            if fails {
                let source = std::io::Error::new(
                    std::io::ErrorKind::StorageFull,
                    format!("no space left on device (fault injected into append {number})"),
                );
                return Err(StoreError::Io { path: format!("{session}.jsonl"), source });
            }
            self.inner.append(session, events).await
        })
    }

    fn claim<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Claim, StoreError>> {
        if let Err(error) = self.away(session) {
            return Box::pin(async move { Err(error) });
        }
        self.inner.claim(session)
    }

    fn load<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Option<Loaded>, StoreError>> {
        if let Err(error) = self.away(session) {
            return Box::pin(async move { Err(error) });
        }
        let Some(torn) = self.torn.clone() else { return self.inner.load(session) };
        Box::pin(async move {
            let events = self.inner.load(session).await?.map(|l| l.events).unwrap_or_default();
            Ok(Some(Loaded { events, torn: Some(torn) }))
        })
    }

    fn sessions(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        self.inner.sessions()
    }

    fn heads(&self) -> BoxFuture<'_, Result<Vec<super::SessionHead>, StoreError>> {
        self.inner.heads()
    }

    fn save_settings<'a>(
        &'a self,
        record: &'a SettingsRecord,
        base: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        if self.failing_settings.load(Ordering::SeqCst) {
            let source = std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                "no space left on device (fault injected into a settings save)",
            );
            let path = format!("{}.settings.json", record.plugin);
            return Box::pin(async move { Err(StoreError::Io { path, source }) });
        }
        self.inner.save_settings(record, base)
    }

    fn load_settings(&self) -> BoxFuture<'_, Result<Vec<StoredSettings>, StoreError>> {
        self.inner.load_settings()
    }
}
