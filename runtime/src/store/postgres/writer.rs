//! The PostgreSQL store's single writer: one tokio task that owns one connection and commits
//! the appends of all sessions in groups — the SQLite store's design (see its `writer`).
//!
//! # Group commit
//!
//! Appends queue on a channel. The writer takes the first, then every request already waiting
//! (at most [`MAX_BATCH`]), checks each against its session's next `seq` (the pure
//! [`batch::accept`]; the next `seq` of a session it has not written yet comes from one query for
//! the whole batch), and inserts the accepted rows with **one** `INSERT … SELECT FROM unnest(…)`
//! in **one** transaction. The commit's WAL flush — the expensive part with
//! `synchronous_commit = on` — is paid per batch; appends that arrive while it runs form the next
//! batch, so the batch grows with the load.
//!
//! # Acknowledgement
//!
//! A caller hears `Ok` only after `COMMIT` returned: with [`Durability::Disk`] the connection runs
//! with `synchronous_commit = on`, so the batch is flushed to the server's disk; with
//! [`Durability::Os`] with `synchronous_commit = off` (the server holds the batch and writes it
//! within a few hundred milliseconds: a rein crash loses nothing, a server crash may lose the
//! last acknowledged batches). An insert that fails for a reason of the database (a row written
//! behind the store's back) is retried request by request, each in its own savepoint, so only
//! the requests at fault fail.
//!
//! # The database going away
//!
//! When the connection breaks, every request of the batch in flight fails (it may or may not have
//! been committed: it was never acknowledged, so the session log does not count on it, and a
//! reopened log shows what the database kept), the writer forgets its cached `seq`s, and it
//! reconnects with backoff ([`batch::backoff`]: 50 ms doubling up to 2 s). A batch that gets no
//! answer for [`WRITE_TIMEOUT`] (a network that stopped passing anything, which a connection
//! alone may not notice for hours) is failed the same way, and its connection dropped. Meanwhile every append
//! is refused at once with [`StoreError::Postgres`] "unreachable" — never queued, never
//! acknowledged. When the writer is connected again, appends go on.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio_postgres::Client;

use super::batch;
use super::fence::{self, Fence, Held};
use super::heads;
use super::locks::Locks;
use super::target::Target;
use crate::store::{Durability, Head, Mark, StoreError};

/// A batch whose transaction has not answered by then fails (unacknowledged: it may or may not
/// have been committed, as when the connection breaks) and the connection is dropped.
const WRITE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// At most this many requests share one transaction.
const MAX_BATCH: usize = 4096;

/// The writer remembers the next `seq` of at most this many sessions (then starts afresh).
const MAX_CACHED_SESSIONS: usize = 100_000;

/// One append: `lines` are the JSON lines of `seq` `first`, `first + 1`, … of `session`;
/// `marks` the [`Mark`]s of its events, in order (usually none), for the session's head.
pub(super) struct Request {
    pub(super) session: String,
    pub(super) first: u64,
    pub(super) lines: Vec<String>,
    pub(super) marks: Vec<Mark>,
    pub(super) reply: oneshot::Sender<Result<(), StoreError>>,
}

/// What the writer reports about its batches (for tests and the bench).
#[derive(Debug, Default)]
pub struct Counters {
    /// Transactions committed.
    pub commits: std::sync::atomic::AtomicU64,
    /// Requests acknowledged.
    pub appends: std::sync::atomic::AtomicU64,
}

/// The writer task's state.
pub(super) struct Writer {
    pub(super) target: Target,
    pub(super) durability: Durability,
    pub(super) client: Option<Client>,
    /// The heads of the sessions this writer wrote (committed only).
    pub(super) heads: HashMap<String, Head>,
    pub(super) counters: Arc<Counters>,
    pub(super) locks: Locks,
    /// A node's fence: every batch checks its partitions' epochs (see `fence`).
    pub(super) fence: Option<Arc<Fence>>,
    /// The epoch each cached head was written under (a node's): a session claimed again under
    /// another epoch may have been written by another node meanwhile, so its head is asked
    /// again.
    pub(super) epochs: HashMap<String, u64>,
}

impl Writer {
    /// Runs until the queue closes (the store was dropped), answering what was queued.
    pub(super) async fn run(mut self, mut requests: mpsc::UnboundedReceiver<Request>) {
        let mut failed = 0u32;
        loop {
            if self.client.is_none() {
                match super::connect(&self.target, self.durability).await {
                    Ok(client) => {
                        self.client = Some(client);
                        failed = 0;
                    }
                    Err(e) => {
                        let why = self.unreachable(&super::message(&e));
                        let wait = tokio::time::sleep(batch::backoff(failed));
                        failed = failed.saturating_add(1);
                        tokio::pin!(wait);
                        loop {
                            tokio::select! {
                                () = &mut wait => break,
                                request = requests.recv() => match request {
                                    Some(request) => {
                                        let _ = request.reply.send(Err(StoreError::Postgres(why.clone())));
                                    }
                                    None => return,
                                },
                            }
                        }
                        continue;
                    }
                }
            }
            let Some(first) = requests.recv().await else { return };
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH {
                match requests.try_recv() {
                    Ok(more) => batch.push(more),
                    Err(_) => break,
                }
            }
            self.commit(batch).await;
        }
    }

    fn unreachable(&self, cause: &str) -> String {
        format!("{}: the database is unreachable (reconnecting): {cause}", self.target.shown())
    }

    /// Commits one batch and answers its callers.
    async fn commit(&mut self, batch: Vec<Request>) {
        let mut outcomes = self.locks.refuse_lost(batch.iter().map(|r| r.session.as_str()));
        let written =
            match tokio::time::timeout(WRITE_TIMEOUT, self.write(&batch, &mut outcomes)).await {
                Ok(written) => written,
                Err(_) => {
                    // A connection that stopped answering (a cut network): never acknowledged, and
                    // dropped, so that the next batch connects afresh.
                    self.client = None;
                    Err(format!("no answer within {} s", WRITE_TIMEOUT.as_secs()))
                }
            };
        let broken = self.client.as_ref().is_none_or(Client::is_closed);
        match written {
            Ok(next) => {
                let acknowledged = outcomes.iter().filter(|o| o.is_ok()).count() as u64;
                if self.heads.len() > MAX_CACHED_SESSIONS {
                    self.heads.clear();
                    self.epochs.clear();
                }
                self.heads.extend(next);
                // A batch whose every request was refused committed nothing.
                if acknowledged > 0 {
                    use std::sync::atomic::Ordering::Relaxed;
                    self.counters.commits.fetch_add(1, Relaxed);
                    self.counters.appends.fetch_add(acknowledged, Relaxed);
                }
            }
            Err(message) => {
                let message = if broken { self.unreachable(&message) } else { message };
                for outcome in outcomes.iter_mut().filter(|o| o.is_ok()) {
                    *outcome = Err(StoreError::Postgres(message.clone()));
                }
                self.heads.clear();
            }
        }
        if broken {
            self.client = None;
            self.heads.clear();
        }
        for (request, outcome) in batch.into_iter().zip(outcomes) {
            // A caller that stopped waiting does not mind.
            let _ = request.reply.send(outcome);
        }
    }

    /// Writes the requests whose outcome is still `Ok` in one transaction, turning the outcome
    /// of those refused into errors; returns the sessions' heads once committed.
    async fn write(
        &mut self,
        batch: &[Request],
        outcomes: &mut [Result<(), StoreError>],
    ) -> Result<HashMap<String, Head>, String> {
        let shown = self.target.shown().to_owned();
        let Some(client) = self.client.as_mut() else { return Err("not connected".into()) };
        let pg = |e: tokio_postgres::Error| format!("{shown}: {}", super::message(&e));
        // A node's: the claim of every request, and no cached head of another epoch.
        let claims: Vec<Option<Held>> = match &self.fence {
            Some(fence) => batch.iter().map(|r| fence.claim_of(&r.session)).collect(),
            None => Vec::new(),
        };
        for (request, claim) in batch.iter().zip(&claims) {
            if claim.is_none_or(|c| self.epochs.get(&request.session) != Some(&c.epoch)) {
                self.heads.remove(&request.session);
            }
        }
        // The head (and next seq) of every session of the batch.
        let mut before: HashMap<String, Head> = HashMap::new();
        let mut unknown: Vec<&str> = Vec::new();
        for request in batch {
            match self.heads.get(&request.session) {
                Some(&head) => {
                    before.insert(request.session.clone(), head);
                }
                None if !before.contains_key(&request.session) => {
                    before.insert(request.session.clone(), Head::default());
                    unknown.push(&request.session);
                }
                None => {}
            }
        }
        if !unknown.is_empty() {
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&unknown];
            let (rows, stored) = tokio::try_join!(
                client.query(
                    "SELECT session, max(seq) + 1 FROM events WHERE session = ANY($1) GROUP BY session",
                    &params,
                ),
                heads::stored(&*client, &unknown),
            )
            .map_err(pg)?;
            for (session, head) in stored {
                before.insert(session, head);
            }
            for row in rows {
                let session: String = row.try_get(0).map_err(pg)?;
                let seq: i64 = row.try_get(1).map_err(pg)?;
                before.entry(session).or_default().next_seq = u64::try_from(seq).unwrap_or(0);
            }
        }
        let mut next: HashMap<String, u64> =
            before.iter().map(|(session, head)| (session.clone(), head.next_seq)).collect();
        let shape: Vec<(&str, u64, usize)> =
            batch.iter().map(|r| (r.session.as_str(), r.first, r.lines.len())).collect();
        for (outcome, accepted) in outcomes.iter_mut().zip(batch::accept(&shape, &mut next)) {
            if outcome.is_ok() {
                *outcome = accepted;
            }
        }
        let tx = client.transaction().await.map_err(pg)?;
        if let Some(fence) = &self.fence {
            check_fence(&tx, fence, batch, &claims, outcomes).await.map_err(pg)?;
        }
        let mut sessions = Vec::new();
        let mut seqs = Vec::new();
        let mut lines = Vec::new();
        for (request, _) in batch.iter().zip(outcomes.iter()).filter(|(_, o)| o.is_ok()) {
            for (i, line) in request.lines.iter().enumerate() {
                sessions.push(request.session.as_str());
                seqs.push(i64::try_from(request.first + i as u64).unwrap_or(i64::MAX));
                lines.push(line.as_str());
            }
        }
        if sessions.is_empty() {
            tx.rollback().await.map_err(pg)?;
            return Ok(HashMap::new());
        }
        let after = heads_after(&before, batch, outcomes);
        let rows = marked(&after, batch, outcomes);
        let appended = self.fence.as_ref().map(|fence| appended(fence, batch, outcomes));
        // Pipelined: the batch's rows, the heads its marks changed (see `heads`), and a node's
        // notice to the others following its sessions.
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] = [&sessions, &seqs, &lines];
        let notify = async {
            match &appended {
                Some(partitions) => tx.execute(NOTIFY, &[partitions]).await.map(|_| ()),
                None => Ok(()),
            }
        };
        let insert =
            tokio::try_join!(tx.execute(INSERT, &params), heads::write(&tx, &rows), notify);
        match insert {
            Ok(_) => {
                tx.commit().await.map_err(pg)?;
                for (claim, request) in claims.iter().zip(batch) {
                    if let Some(claim) = claim {
                        self.epochs.insert(request.session.clone(), claim.epoch);
                    }
                }
            }
            Err(e) if e.is_closed() || e.code().is_none() => return Err(pg(e)),
            Err(_) => {
                drop(tx);
                // Find the requests at fault: each in a savepoint of a new transaction (fenced
                // again: its check is what makes the new transaction safe).
                let mut tx = client.transaction().await.map_err(pg)?;
                if let Some(fence) = &self.fence {
                    check_fence(&tx, fence, batch, &claims, outcomes).await.map_err(pg)?;
                }
                for (request, outcome) in batch.iter().zip(outcomes.iter_mut()) {
                    if outcome.is_err() {
                        continue;
                    }
                    let sessions = vec![request.session.as_str(); request.lines.len()];
                    let seqs: Vec<i64> = (0..request.lines.len())
                        .map(|i| i64::try_from(request.first + i as u64).unwrap_or(i64::MAX))
                        .collect();
                    let lines: Vec<&str> = request.lines.iter().map(String::as_str).collect();
                    let savepoint = tx.savepoint("request").await.map_err(pg)?;
                    match savepoint.execute(INSERT, &[&sessions, &seqs, &lines]).await {
                        Ok(_) => savepoint.commit().await.map_err(pg)?,
                        Err(e) if e.is_closed() || e.code().is_none() => return Err(pg(e)),
                        Err(e) => {
                            savepoint.rollback().await.map_err(pg)?;
                            *outcome = Err(StoreError::Postgres(pg(e)));
                        }
                    }
                }
                let after = heads_after(&before, batch, outcomes);
                heads::write(&tx, &marked(&after, batch, outcomes)).await.map_err(pg)?;
                tx.commit().await.map_err(pg)?;
                // The cache is not trusted after a surprise: every session is asked again.
                self.heads.clear();
                return Ok(HashMap::new());
            }
        }
        Ok(after)
    }
}

/// The heads of the sessions of `batch` after its requests whose outcome is `Ok`, from their
/// heads `before` it.
fn heads_after(
    before: &HashMap<String, Head>,
    batch: &[Request],
    outcomes: &[Result<(), StoreError>],
) -> HashMap<String, Head> {
    let mut heads = HashMap::new();
    for (request, _) in batch.iter().zip(outcomes).filter(|(_, o)| o.is_ok()) {
        let head = heads
            .entry(request.session.clone())
            .or_insert_with(|| before.get(&request.session).copied().unwrap_or_default());
        head.append(request.first, request.lines.len() as u64, &request.marks);
    }
    heads
}

/// A node's check of its batch's partitions, in the batch's transaction (see `fence`): the
/// requests whose claim is not at their partition's epoch on this node are refused with
/// [`StoreError::Fenced`], and the fence forgets their partitions.
async fn check_fence(
    tx: &tokio_postgres::Transaction<'_>,
    fence: &Fence,
    batch: &[Request],
    claims: &[Option<Held>],
    outcomes: &mut [Result<(), StoreError>],
) -> Result<(), tokio_postgres::Error> {
    let mut partitions: Vec<i32> = claims
        .iter()
        .zip(outcomes.iter())
        .filter(|(_, o)| o.is_ok())
        .filter_map(|(c, _)| c.map(|c| i32::try_from(c.partition).unwrap_or(i32::MAX)))
        .collect();
    partitions.sort_unstable();
    partitions.dedup();
    let mut rows = HashMap::new();
    if !partitions.is_empty() {
        for row in tx.query(FENCE, &[&partitions]).await? {
            let partition: i32 = row.try_get(0)?;
            let epoch: i64 = row.try_get(1)?;
            let node: Option<String> = row.try_get(2)?;
            let row = fence::Row { epoch: u64::try_from(epoch).unwrap_or(0), node };
            rows.insert(u32::try_from(partition).unwrap_or(u32::MAX), row);
        }
    }
    let passes = fence::judge(claims, &rows, fence.node());
    for ((request, claim), (outcome, pass)) in
        batch.iter().zip(claims).zip(outcomes.iter_mut().zip(passes))
    {
        if outcome.is_err() || pass {
            continue;
        }
        let held =
            claim.unwrap_or(Held { partition: fence.partition_of(&request.session), epoch: 0 });
        fence.fenced(held.partition);
        *outcome = Err(StoreError::Fenced {
            session: request.session.clone(),
            partition: held.partition,
            epoch: held.epoch,
        });
    }
    Ok(())
}

/// The partitions of the requests of `batch` that are written, as `rein_appended`'s payload
/// (`3,17,200`).
fn appended(fence: &Fence, batch: &[Request], outcomes: &[Result<(), StoreError>]) -> String {
    let mut partitions: Vec<u32> = batch
        .iter()
        .zip(outcomes)
        .filter(|(_, o)| o.is_ok())
        .map(|(r, _)| fence.partition_of(&r.session))
        .collect();
    partitions.sort_unstable();
    partitions.dedup();
    partitions.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

/// A batch's read of its partitions' rows, held until it commits.
const FENCE: &str =
    "SELECT partition, epoch, node FROM partitions WHERE partition = ANY($1) FOR SHARE";

/// A node's notice of a batch: its partitions, to the nodes following its sessions.
const NOTIFY: &str = "SELECT pg_notify('rein_appended', $1)";

/// The one statement of a batch: every row, from three arrays.
const INSERT: &str = "INSERT INTO events (session, seq, line) \
                      SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[])";

/// The heads of `after` whose marks a request of `batch` with an `Ok` outcome changed: the rows
/// the batch writes.
fn marked(
    after: &HashMap<String, Head>,
    batch: &[Request],
    outcomes: &[Result<(), StoreError>],
) -> HashMap<String, Head> {
    let mut rows = HashMap::new();
    for (request, _) in batch.iter().zip(outcomes).filter(|(r, o)| o.is_ok() && !r.marks.is_empty())
    {
        if let Some(head) = after.get(&request.session) {
            rows.insert(request.session.clone(), *head);
        }
    }
    rows
}
