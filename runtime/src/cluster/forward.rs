//! The requests of a [`Session`](crate::session::Session) handle for a session another node
//! serves: each becomes a row of `commands` (with a `rein_commands` notice to the partition's
//! holder), its reply is awaited (a `rein_replies` notice, or a read every [`POLL`]), and a
//! prompted turn is followed to its end (`follow`).
//!
//! # Order
//!
//! One task inserts every command of the node, in the order the handles asked (its inserts are
//! pipelined on one connection, so the database numbers them in that order), and the serving
//! node runs a session's commands in that order: a cancel sent after a prompt reaches the
//! session after it.
//!
//! # Waiting
//!
//! A request nobody takes within the node's `command_timeout` (no node holds the partition, the
//! database is away) is withdrawn — only if still untaken, in one statement — and fails with
//! [`SessionError::Remote`]. Once taken it is waited for as long as the serving node takes (a
//! prompt queued behind a long turn), and a node that took it and died is replaced by the
//! partition's next owner, which takes it again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{Notify, mpsc, oneshot};

use super::command::{self, Command, Reply};
use super::{Core, NodeStats};
use crate::event::CancelCause;
use crate::future::BoxFuture;
use crate::session::placement;
use crate::session::turn_handle::{Started, TurnSink};
use crate::session::{Prompt, SessionError};

/// How often a waiting request reads its reply without being told.
const POLL: Duration = Duration::from_secs(1);

/// At most this many commands go out in one pipelined round.
const MAX_ROUND: usize = 256;

/// A request on its way out: the command, and who waits for its reply.
pub(crate) struct Outgoing {
    session: Arc<str>,
    command: Command,
    then: Then,
}

/// What happens with the reply.
enum Then {
    /// A prompt: its turn is followed.
    Turn(TurnSink),
    /// A retry: accepted (or not), then followed.
    Retry(TurnSink, oneshot::Sender<Result<(), SessionError>>),
    /// A cancel.
    Cancel(oneshot::Sender<Result<bool, SessionError>>),
    /// An open or a close.
    Done(oneshot::Sender<Result<(), SessionError>>),
}

impl Then {
    fn fail(self, error: SessionError) {
        match self {
            Then::Turn(sink) => sink.finish(Err(error)),
            Then::Retry(_, accepted) | Then::Done(accepted) => {
                let _ = accepted.send(Err(error));
            }
            Then::Cancel(answer) => {
                let _ = answer.send(Err(error));
            }
        }
    }
}

/// The requests waiting for their reply, by command id.
#[derive(Default)]
pub(crate) struct Replies {
    waiting: Mutex<HashMap<i64, Arc<Notify>>>,
}

impl Replies {
    fn lock(&self) -> MutexGuard<'_, HashMap<i64, Arc<Notify>>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The reply to `id` was written.
    pub(crate) fn wake(&self, id: i64) {
        if let Some(notify) = self.lock().get(&id) {
            notify.notify_one();
        }
    }

    /// Every waiting request reads (notices may have been missed).
    pub(crate) fn wake_all(&self) {
        for notify in self.lock().values() {
            notify.notify_one();
        }
    }
}

/// The node's router (see `session::placement`).
pub(crate) struct Router(pub(crate) Arc<Core>);

impl Router {
    fn enqueue(
        &self,
        session: &Arc<str>,
        command: Command,
        then: Then,
    ) -> Result<(), SessionError> {
        let outgoing = Outgoing { session: Arc::clone(session), command, then };
        self.0.outgoing.send(outgoing).map_err(|_| SessionError::ShutDown)
    }

    fn ask<T: Send + 'static>(
        &self,
        session: &Arc<str>,
        command: Command,
        then: impl FnOnce(oneshot::Sender<Result<T, SessionError>>) -> Then,
    ) -> BoxFuture<'static, Result<T, SessionError>> {
        let (reply, answer) = oneshot::channel();
        let sent = self.enqueue(session, command, then(reply));
        Box::pin(async move {
            sent?;
            answer.await.unwrap_or(Err(SessionError::Stopped))
        })
    }
}

impl placement::Router for Router {
    fn is_local(&self, session: &str) -> bool {
        self.0.fence.holds_session(session)
    }

    fn prompt(
        &self,
        session: &Arc<str>,
        prompt: Prompt,
        sink: TurnSink,
    ) -> Result<(), SessionError> {
        self.enqueue(session, Command::prompt(prompt), Then::Turn(sink))
    }

    fn retry(
        &self,
        session: &Arc<str>,
        sink: TurnSink,
    ) -> BoxFuture<'static, Result<(), SessionError>> {
        self.ask(session, Command::Retry, |accepted| Then::Retry(sink, accepted))
    }

    fn cancel(
        &self,
        session: &Arc<str>,
        cause: CancelCause,
    ) -> BoxFuture<'static, Result<bool, SessionError>> {
        self.ask(session, Command::Cancel { cause }, Then::Cancel)
    }

    fn close(&self, session: &Arc<str>) -> BoxFuture<'static, Result<(), SessionError>> {
        self.ask(session, Command::Close, Then::Done)
    }

    fn open(&self, session: &Arc<str>) -> BoxFuture<'static, Result<(), SessionError>> {
        self.ask(session, Command::Open, Then::Done)
    }
}

/// A command row, and a notice to its partition's holder, in one statement.
const INSERT: &str = "WITH c AS (
         INSERT INTO commands (session, partition, kind, body, from_node)
         VALUES ($1, $2, $3, $4, $5) RETURNING id, partition)
     SELECT id, pg_notify('rein_commands', partition || ':' || id) IS NULL FROM c";

/// The node's sending task: inserts the queued commands in order, then waits for each reply on
/// a task of its own.
pub(crate) async fn send(core: Arc<Core>, mut queue: mpsc::UnboundedReceiver<Outgoing>) {
    while let Some(first) = queue.recv().await {
        let mut round = vec![first];
        while round.len() < MAX_ROUND {
            match queue.try_recv() {
                Ok(more) => round.push(more),
                Err(_) => break,
            }
        }
        let client = match core.link.client().await {
            Ok(client) => client,
            Err(message) => {
                for outgoing in round {
                    let session = outgoing.session.to_string();
                    outgoing.then.fail(SessionError::Remote { session, message: message.clone() });
                }
                continue;
            }
        };
        let node = core.options.node.as_str();
        let inserts = round.iter().map(|o| {
            let partition = i32::try_from(core.fence.partition_of(&o.session)).unwrap_or(0);
            let body = command::encode(&o.command);
            let client = Arc::clone(&client);
            let session = o.session.to_string();
            let kind = o.command.kind();
            async move {
                client
                    .query_one(INSERT, &[&session, &partition, &kind, &body, &node])
                    .await
                    .and_then(|row| row.try_get::<_, i64>(0))
            }
        });
        // Polled in order: the queries go out on the connection in this order.
        let ids = futures::future::join_all(inserts).await;
        for (outgoing, id) in round.into_iter().zip(ids) {
            match id {
                Ok(id) => {
                    NodeStats::add(&core.stats.forwarded, 1);
                    core.tasks.spawn(wait(Arc::clone(&core), id, outgoing));
                }
                Err(e) => {
                    let message = format!(
                        "{}: could not forward the request: {}",
                        core.target.shown(),
                        crate::store::postgres::message(&e)
                    );
                    let session = outgoing.session.to_string();
                    outgoing.then.fail(SessionError::Remote { session, message });
                }
            }
        }
    }
}

/// Waits for the reply to command `id` and carries it out.
async fn wait(core: Arc<Core>, id: i64, outgoing: Outgoing) {
    let Outgoing { session, then, .. } = outgoing;
    let reply = match reply(&core, id, &session).await {
        Ok(reply) => reply,
        Err(error) => return then.fail(error),
    };
    let unexpected = |reply: &Reply| SessionError::Remote {
        session: session.to_string(),
        message: format!("unexpected reply {}", command::encode(reply)),
    };
    match (then, reply) {
        (then, Reply::Failed { error }) => then.fail(error.into_error(&session)),
        (Then::Turn(sink), Reply::Started { turn, from_seq }) => {
            follow(&core, &session, sink, turn, from_seq).await;
        }
        (Then::Retry(sink, accepted), Reply::Started { turn, from_seq }) => {
            let _ = accepted.send(Ok(()));
            follow(&core, &session, sink, turn, from_seq).await;
        }
        (Then::Cancel(answer), Reply::Cancelled { cancelled }) => {
            let _ = answer.send(Ok(cancelled));
        }
        (Then::Done(done), Reply::Done) => {
            let _ = done.send(Ok(()));
        }
        (then, reply) => {
            let error = unexpected(&reply);
            then.fail(error);
        }
    }
}

/// Follows the started turn for its handle, to its end.
async fn follow(core: &Core, session: &Arc<str>, mut sink: TurnSink, turn: u32, from_seq: u64) {
    let (events, live) = mpsc::unbounded_channel();
    let store = core.session_store();
    sink.started(Started::remote(turn, from_seq, Arc::clone(session), Arc::clone(&store), live));
    let partition = core.fence.partition_of(session);
    let outcome = core.follows.follow(&*store, partition, session, turn, from_seq, events).await;
    sink.finish(Ok(outcome));
}

/// The reply to command `id`: read when told (or every [`POLL`]); the command withdrawn when
/// nobody took it within the node's `command_timeout`.
async fn reply(core: &Core, id: i64, session: &str) -> Result<Reply, SessionError> {
    let notify = Arc::new(Notify::new());
    core.replies.lock().insert(id, Arc::clone(&notify));
    let _registered = Deregister(&core.replies, id);
    let deadline = tokio::time::Instant::now() + core.options.command_timeout;
    let mut taken = false;
    loop {
        if let Ok(client) = core.link.client().await
            && let Ok(row) =
                client.query_opt("SELECT reply, taken_by FROM commands WHERE id = $1", &[&id]).await
        {
            let Some(row) = row else {
                return Err(remote(session, "the request was removed before it was answered"));
            };
            let reply: Option<String> = row.try_get(0).unwrap_or(None);
            let taker: Option<String> = row.try_get(1).unwrap_or(None);
            if let Some(reply) = reply {
                return serde_json::from_str(&reply)
                    .map_err(|e| remote(session, &format!("unreadable reply: {e}")));
            }
            taken = taker.is_some();
        }
        if !taken && tokio::time::Instant::now() >= deadline {
            match withdraw(core, id).await {
                Some(true) => {
                    let waited = core.options.command_timeout.as_millis();
                    return Err(remote(
                        session,
                        &format!(
                            "no node took the request within {waited} ms (the database \
                             unreachable, or no node holding the session's partition)"
                        ),
                    ));
                }
                Some(false) => taken = true,
                // The database away: tried again at the next read.
                None => {}
            }
        }
        tokio::select! {
            () = notify.notified() => {}
            () = tokio::time::sleep(POLL) => {}
            () = tokio::time::sleep_until(deadline), if !taken && tokio::time::Instant::now() < deadline => {}
        }
    }
}

/// Withdraws command `id` if nobody took it: whether it did (`None`: the database did not
/// answer).
async fn withdraw(core: &Core, id: i64) -> Option<bool> {
    let client = core.link.client().await.ok()?;
    let deleted = client
        .execute("DELETE FROM commands WHERE id = $1 AND taken_by IS NULL", &[&id])
        .await
        .ok()?;
    Some(deleted == 1)
}

fn remote(session: &str, message: &str) -> SessionError {
    SessionError::Remote { session: session.to_owned(), message: message.to_owned() }
}

struct Deregister<'a>(&'a Replies, i64);

impl Drop for Deregister<'_> {
    fn drop(&mut self) {
        self.0.lock().remove(&self.1);
    }
}
