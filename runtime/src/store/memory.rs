//! [`MemoryStore`]: session logs in memory, for tests and benchmarks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::{BoxFuture, Durability, Loaded, SessionStore, StoreError};
use crate::event::Envelope;

/// Session logs held in memory. Clones share the same logs.
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    logs: Arc<Mutex<HashMap<String, Vec<Envelope>>>>,
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
            .cloned()
            .unwrap_or_default()
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
        Box::pin(async move {
            let mut logs = self.logs.lock().unwrap_or_else(PoisonError::into_inner);
            logs.entry(session.to_owned()).or_default().extend_from_slice(events);
            Ok(())
        })
    }

    fn load<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Option<Loaded>, StoreError>> {
        Box::pin(async move {
            let logs = self.logs.lock().unwrap_or_else(PoisonError::into_inner);
            Ok(logs.get(session).map(|events| Loaded { events: events.clone(), torn: None }))
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
}
