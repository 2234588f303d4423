//! [`Stamped`]: a store that notes when each batch reaches it, so a metric can say how long each
//! stretch of a turn took — from one append to the next — in rein and in its floor alike.
//!
//! A note is an [`Instant`] and the type of the batch's first event, pushed under a mutex before
//! the batch goes on to the wrapped store: a few tens of nanoseconds per append, paid the same by
//! everything that appends through it.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use rein::runtime::BoxFuture;
use rein::runtime::event::Envelope;
use rein::runtime::store::{Durability, Loaded, SessionStore, StoreError};

/// When a batch reached the store, and the type of its first event.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stamp {
    pub(crate) at: Instant,
    pub(crate) kind: &'static str,
}

/// A store that stamps every append, then hands it to `S`.
pub(crate) struct Stamped<S> {
    inner: S,
    stamps: Mutex<Vec<Stamp>>,
}

impl<S: SessionStore> Stamped<S> {
    pub(crate) fn new(inner: S) -> Arc<Self> {
        Arc::new(Self { inner, stamps: Mutex::new(Vec::new()) })
    }

    /// The wrapped store.
    pub(crate) fn inner(&self) -> &S {
        &self.inner
    }

    /// The stamps noted since the last call, in the order the appends arrived.
    pub(crate) fn take(&self) -> Vec<Stamp> {
        std::mem::take(&mut *self.stamps.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl<S: SessionStore> SessionStore for Stamped<S> {
    fn durability(&self) -> Durability {
        self.inner.durability()
    }

    fn append<'a>(
        &'a self,
        session: &'a str,
        events: &'a [Envelope],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let kind = events.first().map_or("", |e| e.event.kind());
        let stamp = Stamp { at: Instant::now(), kind };
        self.stamps.lock().unwrap_or_else(PoisonError::into_inner).push(stamp);
        self.inner.append(session, events)
    }

    fn append_shared<'a>(
        &'a self,
        session: &'a str,
        events: &'a Arc<[Envelope]>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let kind = events.first().map_or("", |e| e.event.kind());
        let stamp = Stamp { at: Instant::now(), kind };
        self.stamps.lock().unwrap_or_else(PoisonError::into_inner).push(stamp);
        self.inner.append_shared(session, events)
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

    fn heads(&self) -> BoxFuture<'_, Result<Vec<rein::runtime::store::SessionHead>, StoreError>> {
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
