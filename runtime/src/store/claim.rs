//! One writer per session: the [`Claim`] a session log holds while it is open.
//!
//! Two writers on one log destroy it: each takes the other's running turn for a crash and
//! closes it, their `seq`s collide, and the log can never be opened again. So a session log
//! claims its session from the store before it reads it, and holds the claim until it closes
//! (a hibernating session lets it go; waking takes it again).
//!
//! A claim has two parts:
//!
//! - **In this process**, [`Claims`]: one holder per session per store, and a second claimant
//!   *waits* for the first to let go. That is how a session is handed from an actor that is
//!   hibernating (its log still closing) or was killed (its state not dropped yet) to the fresh
//!   actor woken for the next call. Within one runtime the session directory already keeps one
//!   actor per session, so nobody else waits here.
//! - **Across processes**, an advisory lock on a file (`lock_file`) that the
//!   operating system releases when its holder's process ends, however it ends: a crash never
//!   leaves a stale lock. A second process is refused at once with [`StoreError::Locked`](super::StoreError::Locked), which
//!   names the holder (its pid, and since when) and writes nothing. The JSONL store locks
//!   `<session>.jsonl.lock` beside each log; the SQLite store locks its whole database (see
//!   there for why).
//!
//! Readers that change nothing (`rein check`, `show`, `report`, a read-only console) take no
//! claim: they never wait for a writer, and never stop one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::OwnedMutexGuard;

/// A session held for writing; dropping it lets the session go. Returned by
/// [`SessionStore::claim`](super::SessionStore::claim).
pub struct Claim {
    _held: Box<dyn Send + Sync>,
}

impl Claim {
    /// A claim holding `held` (a lock, a guard) until it is dropped: for a store's own claims.
    pub fn new(held: impl Send + Sync + 'static) -> Self {
        Self { _held: Box::new(held) }
    }
}

impl std::fmt::Debug for Claim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Claim")
    }
}

/// The sessions claimed through one store in this process. Clones share the same claims.
#[derive(Debug, Clone, Default)]
pub struct Claims {
    held: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

impl Claims {
    /// Claims `session` in this process, waiting while another holder has it.
    pub async fn take(&self, session: &str) -> Held {
        let slot = {
            let mut held = self.lock();
            Arc::clone(held.entry(session.to_owned()).or_default())
        };
        // Built before waiting, so that a claimant that stops waiting forgets the entry too.
        let mut held =
            Held { claims: self.clone(), session: session.to_owned(), slot, guard: None };
        held.guard = Some(Arc::clone(&held.slot).lock_owned().await);
        held
    }

    /// Whether `session` is held in this process.
    pub fn is_claimed(&self, session: &str) -> bool {
        self.lock().get(session).is_some_and(|slot| slot.try_lock().is_err())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<tokio::sync::Mutex<()>>>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A session claimed in this process ([`Claims::take`]); dropping it lets the next claimant in,
/// and forgets the session when nobody waits for it.
#[derive(Debug)]
pub struct Held {
    claims: Claims,
    session: String,
    slot: Arc<tokio::sync::Mutex<()>>,
    guard: Option<OwnedMutexGuard<()>>,
}

impl Drop for Held {
    fn drop(&mut self) {
        drop(self.guard.take());
        let mut held = self.claims.lock();
        // The map's reference and ours: nobody else waits, so the entry goes (a hibernated
        // session costs nothing here).
        if Arc::strong_count(&self.slot) == 2 {
            held.remove(&self.session);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_second_claimant_in_the_process_waits_for_the_first_and_nothing_is_left_behind() {
        let claims = Claims::default();
        let first = claims.take("s").await;
        let other = claims.take("t").await;
        let waiting = tokio::spawn({
            let claims = claims.clone();
            async move { claims.take("s").await }
        });
        tokio::time::sleep(std::time::Duration::from_secs(60)).await;
        assert!(!waiting.is_finished(), "s is held");
        drop(first);
        let second = waiting.await.unwrap();
        assert!(claims.is_claimed("s"));
        drop(second);
        drop(other);
        assert!(!claims.is_claimed("s") && !claims.is_claimed("t"));
        assert!(claims.lock().is_empty(), "released sessions are forgotten");
    }
}
