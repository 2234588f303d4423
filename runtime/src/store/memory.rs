//! [`MemoryStore`]: session logs in memory, for tests and benchmarks.
//!
//! It follows the same rules as the durable stores (session ids are checked, an append must
//! continue the log's `seq`), so a test against it means the same thing as one against them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::{
    BoxFuture, Durability, Loaded, SessionStore, StoreError, check_continues, check_session_id,
};
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
            check_session_id(session)?;
            if events.is_empty() {
                return Ok(());
            }
            let mut logs = self.logs.lock().unwrap_or_else(PoisonError::into_inner);
            let next = logs.get(session).map_or(0, |log| log.len() as u64);
            check_continues(session, next, events)?;
            logs.entry(session.to_owned()).or_default().extend_from_slice(events);
            Ok(())
        })
    }

    fn load<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Option<Loaded>, StoreError>> {
        Box::pin(async move {
            check_session_id(session)?;
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
