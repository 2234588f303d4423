//! The session directory: which sessions are awake, and the hand-off that lets one hibernate
//! without losing a message.
//!
//! Every message to a session goes through [`Directory::send`]: under one lock it finds the
//! session's actor — waking one (`spawn_instant`, no await under the lock) when the session is
//! hibernating — counts the message as *sent* to that actor and enqueues it.
//!
//! # Why counting makes hibernation safe
//!
//! An idle session actor wants to stop, but a client may have just looked it up and enqueued a
//! prompt. The actor counts the client messages it has *handled*; [`Directory::try_hibernate`]
//! removes it, under the same lock, only if that count equals the number *sent* to it. If a
//! message is still on its way, the actor stays and handles it; once it is removed, no client
//! can reach it any more and the next message wakes a fresh actor, which reopens the log.
//!
//! # Why session actors are not linked under the runtime's root
//!
//! A ractor link costs every stop a supervision event in the parent's channel — a hundred
//! thousand sessions stopping at once (a mass cancel, a shutdown) would queue them all at the
//! root — and one more message for the root to handle, one at a time, per hibernation. All the
//! root would do with it is forget a crashed session. The session's [`Lease`] does that itself when
//! its state is dropped, however the actor ended, and its token is what shutdown waits for
//! ([`Directory::settled`]). A session actor still fails alone, and the next message to its
//! session still wakes a fresh one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ractor::{ActorId, ActorRef, MessagingErr, SpawnErr};
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

use super::SessionError;
use super::Sessions;
use super::message::{ClientMsg, SessionMsg};

struct Entry {
    actor: ActorRef<SessionMsg>,
    sent: u64,
}

#[derive(Default)]
struct Inner {
    closed: bool,
    sessions: HashMap<Arc<str>, Entry>,
}

/// How the directory wakes a session: spawns its actor without awaiting its start (the session
/// actor's `wake`; passed in, so that the directory needs only the actor's messages).
pub(crate) type Wake = fn(&Arc<Sessions>, &Arc<str>) -> Result<ActorRef<SessionMsg>, SpawnErr>;

/// The awake sessions of a runtime.
pub(crate) struct Directory {
    wake: Wake,
    inner: Mutex<Inner>,
    /// One token per live session actor (held by its state): shutdown waits for them all.
    live: TaskTracker,
}

/// A session actor's hold on its directory entry, kept in its state: however the actor ends
/// (hibernating, failing, killed), dropping the state drops the lease, which forgets the entry
/// if it is still this actor's and counts the actor out of the live ones. If the actor ended
/// abnormally while a turn of its session was open — or hibernated after its log failed with a
/// turn open — the lease wakes the session again at once (and again while that open fails for
/// a reason that may pass: `rewake`), so that the reopened log resumes or closes that turn
/// without waiting for the next call.
pub(crate) struct Lease {
    sessions: Arc<Sessions>,
    id: Arc<str>,
    actor: ActorId,
    turn_open: bool,
    /// The log failed: wake the session to repair an open turn even after a hibernation.
    repair: bool,
    _live: TaskTrackerToken,
}

impl Lease {
    /// Whether a turn of the session is open in its log (written by the session actor).
    pub(crate) fn turn_open(&mut self, open: bool) {
        self.turn_open = open;
    }

    /// The session's log failed: however the actor ends, wake the session if a turn is open.
    pub(crate) fn repair_when_gone(&mut self) {
        self.repair = true;
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let directory = &self.sessions.directory;
        let wake = {
            let mut inner = directory.lock();
            let ours = inner.sessions.get(&self.id).is_some_and(|e| e.actor.get_id() == self.actor);
            if ours {
                // Not hibernated (that removes the entry first): the actor failed or was killed.
                inner.sessions.remove(&self.id);
            }
            (ours || self.repair) && !inner.closed
        };
        // A session served elsewhere now (its partition moved: it was evicted, or its log was
        // fenced) is resumed by the node that serves it, never here.
        let here = self.sessions.is_local(&self.id);
        if wake && here && self.turn_open && tokio::runtime::Handle::try_current().is_ok() {
            super::rewake::repair(&self.sessions, &self.id);
        }
    }
}

impl Directory {
    pub(crate) fn new(wake: Wake) -> Self {
        Self { wake, inner: Mutex::default(), live: TaskTracker::default() }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Delivers a client message to the session's actor, waking one if needed.
    pub(crate) fn send(
        &self,
        sessions: &Arc<Sessions>,
        id: &Arc<str>,
        message: ClientMsg,
    ) -> Result<(), SessionError> {
        let mut inner = self.lock();
        if inner.closed {
            return Err(SessionError::ShutDown);
        }
        let mut message = SessionMsg::Client(message);
        // At most twice: an actor that died without leaving (a crash) is replaced once.
        for _ in 0..2 {
            let entry = match inner.sessions.get_mut(id) {
                Some(entry) => entry,
                None => {
                    let actor = (self.wake)(sessions, id).map_err(|_| SessionError::ShutDown)?;
                    inner.sessions.entry(Arc::clone(id)).or_insert(Entry { actor, sent: 0 })
                }
            };
            match entry.actor.send_message(message) {
                Ok(()) => {
                    entry.sent += 1;
                    return Ok(());
                }
                Err(MessagingErr::SendErr(back)) => {
                    message = back;
                    inner.sessions.remove(id);
                }
                Err(_) => return Err(SessionError::Stopped),
            }
        }
        Err(SessionError::Stopped)
    }

    /// Sends a message to every awake session (none is woken for it).
    pub(crate) fn broadcast(&self, make: &dyn Fn() -> ClientMsg) {
        let mut inner = self.lock();
        if inner.closed {
            return;
        }
        for entry in inner.sessions.values_mut() {
            if entry.actor.send_message(SessionMsg::Client(make())).is_ok() {
                entry.sent += 1;
            }
        }
    }

    /// Removes the session's actor if every client message sent to it was handled.
    pub(crate) fn try_hibernate(&self, id: &str, actor: ActorId, handled: u64) -> bool {
        let mut inner = self.lock();
        match inner.sessions.get(id) {
            Some(entry) if entry.actor.get_id() == actor && entry.sent == handled => {
                inner.sessions.remove(id);
                true
            }
            Some(entry) if entry.actor.get_id() == actor => false,
            // Not ours (already replaced or closed): nothing can reach this actor any more.
            _ => true,
        }
    }

    /// The lease a session actor keeps in its state (see [`Lease`]).
    pub(crate) fn lease(&self, sessions: &Arc<Sessions>, id: Arc<str>, actor: ActorId) -> Lease {
        let sessions = Arc::clone(sessions);
        Lease { sessions, id, actor, turn_open: false, repair: false, _live: self.live.token() }
    }

    /// Resolves once every session actor's state is gone (call after [`Directory::close`]).
    pub(crate) async fn settled(&self) {
        self.live.close();
        self.live.wait().await;
    }

    /// Closes the directory for good and returns the awake sessions' actors.
    pub(crate) fn close(&self) -> Vec<ActorRef<SessionMsg>> {
        let mut inner = self.lock();
        inner.closed = true;
        inner.sessions.drain().map(|(_, e)| e.actor).collect()
    }

    /// Kills the session's actor (see `Session::kill`); false when it is not awake.
    pub(crate) fn kill(&self, id: &str) -> bool {
        let actor = self.lock().sessions.get(id).map(|entry| entry.actor.clone());
        actor.map(|actor| actor.kill()).is_some()
    }

    /// Kills the actors of the awake sessions `wanted` accepts — at once, as a crash would:
    /// nothing more is written — and resolves once they are gone (their claims let go). For
    /// sessions served elsewhere from now on (a node's partitions lost or given back): the
    /// caller has made them not local first, so that none wakes again here.
    pub(crate) async fn evict(&self, wanted: &(dyn Fn(&str) -> bool + Sync)) -> usize {
        let actors: Vec<ActorRef<SessionMsg>> = {
            let mut inner = self.lock();
            let ids: Vec<Arc<str>> =
                inner.sessions.keys().filter(|id| wanted(id)).cloned().collect();
            ids.iter().filter_map(|id| inner.sessions.remove(id)).map(|e| e.actor).collect()
        };
        let evicted = actors.len();
        let waits = actors.into_iter().map(|actor| async move {
            let _ = actor.get_cell().kill_and_wait(None).await;
        });
        futures::future::join_all(waits).await;
        evicted
    }

    /// Whether the session is awake.
    pub(crate) fn is_awake(&self, id: &str) -> bool {
        self.lock().sessions.contains_key(id)
    }

    /// How many sessions are awake.
    pub(crate) fn awake(&self) -> usize {
        self.lock().sessions.len()
    }
}
