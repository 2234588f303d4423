//! One writer per session across processes: a PostgreSQL advisory lock per claimed session, held
//! on one dedicated connection of the store, which the database gives up with that connection.
//!
//! A claim takes `pg_try_advisory_lock(hashtextextended(session, 0))` on the store's lock
//! connection (session-level, so it outlives transactions) and `pg_advisory_unlock` when it is
//! dropped. A session another process (another node) holds is refused at once with
//! [`StoreError::Locked`]. A process that dies — however — loses its connection, and the
//! database releases its locks: a crash never leaves a session locked. Two session ids whose
//! 64-bit hashes collide would exclude each other (they are never written into each other).
//!
//! # The lock connection going away
//!
//! When the lock connection breaks (the server restarted, the network went), the database has
//! already let go of every lock it held, so another process may take a session over. The store
//! marks each held session *lost* at once, and the writer refuses their appends
//! ([`StoreError::Postgres`], "lost its lock") until the keeper, reconnecting with backoff, has
//! taken the lock again. A session whose lock another process took meanwhile stays refused for as
//! long as its claim lives (its log must be reopened). Claims made while it is away are refused at
//! once ("unreachable (reconnecting)"); they never put the next reconnection off, however many
//! come. These locks are one writer per session, not a fence: ownership with epochs checked in
//! every append transaction is the partition work of SPEC §12, not this.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{mpsc, oneshot};
use tokio_postgres::Client;

use super::batch;
use super::target::Target;
use crate::store::{Durability, StoreError};

/// The shared part: which sessions this store holds, and whether each lock is in force.
#[derive(Clone)]
pub(super) struct Locks {
    held: Arc<Mutex<HashMap<String, bool>>>,
    commands: mpsc::UnboundedSender<Command>,
}

enum Command {
    Take { session: String, reply: oneshot::Sender<Result<(), StoreError>> },
    Release { session: String },
}

/// A session's lock, released when dropped.
pub(super) struct SessionLock {
    session: String,
    commands: mpsc::UnboundedSender<Command>,
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        let session = std::mem::take(&mut self.session);
        // A keeper that is gone has lost its connection, and the database its locks.
        let _ = self.commands.send(Command::Release { session });
    }
}

impl Locks {
    /// Starts the keeper task over its own connection `client`.
    pub(super) fn spawn(target: Target, client: Client, closed: oneshot::Receiver<()>) -> Self {
        let held = Arc::new(Mutex::new(HashMap::new()));
        let (commands, queue) = mpsc::unbounded_channel();
        let keeper = Keeper { target, client: Some((client, closed)), held: held.clone() };
        tokio::spawn(keeper.run(queue));
        Self { held, commands }
    }

    /// Takes `session`'s lock (after its in-process claim).
    pub(super) async fn take(&self, session: &str) -> Result<SessionLock, StoreError> {
        let (reply, done) = oneshot::channel();
        self.commands
            .send(Command::Take { session: session.to_owned(), reply })
            .map_err(|_| StoreError::Closed)?;
        done.await.unwrap_or(Err(StoreError::Closed))?;
        Ok(SessionLock { session: session.to_owned(), commands: self.commands.clone() })
    }

    /// One outcome per session: an error for those whose lock is lost.
    pub(super) fn refuse_lost<'s>(
        &self,
        sessions: impl Iterator<Item = &'s str>,
    ) -> Vec<Result<(), StoreError>> {
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        sessions
            .map(|session| match held.get(session) {
                Some(false) => Err(StoreError::Postgres(format!(
                    "{session}: the session lost its lock with the connection that held it; \
                     nothing is written until it is taken again"
                ))),
                _ => Ok(()),
            })
            .collect()
    }
}

/// The keeper task: owns the lock connection.
struct Keeper {
    target: Target,
    client: Option<(Client, oneshot::Receiver<()>)>,
    held: Arc<Mutex<HashMap<String, bool>>>,
}

impl Keeper {
    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let mut failed = 0u32;
        // When the next reconnection is due: fixed when the connection is found missing, so
        // that claims arriving meanwhile (each refused at once) never put it off.
        let mut retry_at: Option<tokio::time::Instant> = None;
        loop {
            let command = match self.client.as_mut() {
                Some((_, closed)) => tokio::select! {
                    command = commands.recv() => command,
                    _ = closed => {
                        self.lost();
                        continue;
                    }
                },
                None => {
                    let at = *retry_at.get_or_insert_with(|| {
                        tokio::time::Instant::now() + batch::backoff(failed)
                    });
                    tokio::select! {
                        command = commands.recv() => command,
                        () = tokio::time::sleep_until(at) => {
                            retry_at = None;
                            failed = if self.reconnect().await { 0 } else { failed.saturating_add(1) };
                            continue;
                        }
                    }
                }
            };
            let Some(command) = command else { return };
            match command {
                Command::Take { session, reply } => {
                    let outcome = self.take(&session).await;
                    let _ = reply.send(outcome);
                }
                Command::Release { session } => {
                    let was = self.lock().remove(&session);
                    if let (Some(true), Some((client, _))) = (was, self.client.as_ref()) {
                        // A failure here is a lost connection: the lock went with it.
                        let _ = client.execute(UNLOCK, &[&session]).await;
                    }
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, bool>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The connection went: every lock with it.
    fn lost(&mut self) {
        self.client = None;
        for live in self.lock().values_mut() {
            *live = false;
        }
    }

    /// Connects again and takes back every lost lock nobody else took; whether it connected.
    async fn reconnect(&mut self) -> bool {
        let Ok((client, closed)) = super::connect_watched(&self.target, Durability::Os).await
        else {
            return false;
        };
        let sessions: Vec<String> = self.lock().keys().cloned().collect();
        for session in sessions {
            if let Ok(row) = client.query_one(TRY_LOCK, &[&session]).await
                && row.try_get::<_, bool>(0).unwrap_or(false)
            {
                self.lock().insert(session, true);
            }
        }
        self.client = Some((client, closed));
        true
    }

    async fn take(&mut self, session: &str) -> Result<(), StoreError> {
        let shown = self.target.shown().to_owned();
        let Some((client, _)) = self.client.as_ref() else {
            return Err(StoreError::Postgres(format!(
                "{shown}: the database is unreachable (reconnecting)"
            )));
        };
        // A lock another process let go of a moment ago may still be on its way out (its unlock
        // is sent when its claim drops): it is tried for a little while before it is refused.
        let mut tries = 0;
        let got = loop {
            let got = client
                .query_one(TRY_LOCK, &[&session])
                .await
                .and_then(|row| row.try_get::<_, bool>(0))
                .map_err(|e| StoreError::Postgres(format!("{shown}: {}", super::message(&e))))?;
            tries += 1;
            if got || tries >= LOCK_TRIES {
                break got;
            }
            tokio::time::sleep(LOCK_RETRY).await;
        };
        if !got {
            return Err(StoreError::Locked {
                what: format!("session {session} in {shown}"),
                lock: "a PostgreSQL advisory lock".into(),
                holder: None,
            });
        }
        self.lock().insert(session.to_owned(), true);
        Ok(())
    }
}

/// How many times a claim tries a lock held elsewhere, [`LOCK_RETRY`] apart (half a second).
const LOCK_TRIES: u32 = 20;
const LOCK_RETRY: std::time::Duration = std::time::Duration::from_millis(25);

const TRY_LOCK: &str = "SELECT pg_try_advisory_lock(hashtextextended($1, 0))";
const UNLOCK: &str = "SELECT pg_advisory_unlock(hashtextextended($1, 0))";
