//! The requests other nodes forward for the sessions this node serves (see `forward`): taken from
//! `commands` when their notice arrives (or when the node takes a partition over, or its
//! listener reconnects: [`Notice::Scan`]) — all those waiting together, in one statement — run
//! on the local session in the order they were sent, answered in the row with a `rein_replies`
//! notice.
//!
//! A command is taken with its partition's epoch (`taken_epoch`): one taken under an older epoch
//! and never answered — its node died or lost the partition — is taken again by the next owner.
//! A command whose session is no longer served here when its turn comes (the partition moved
//! meanwhile) is given back untaken, with a notice, for the new owner. A prompt is answered when
//! its turn started (its `user/message` is durable); a node that dies between that and the
//! answer has its prompt run again by the next owner (at least once, never lost).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::mpsc;

use super::command::{self, Command, Refusal, Reply};
use super::{Core, NodeStats};
use crate::session::{Prompt, Session, SessionError};

/// What the server is told.
pub(crate) enum Notice {
    /// Command `id` was sent for a partition this node holds.
    Command(i64),
    /// Take every unanswered command of these partitions (taken over, or notices missed).
    Scan(BTreeSet<u32>),
}

/// A command taken, for its session's worker.
struct Taken {
    id: i64,
    partition: u32,
    command: Result<Command, String>,
}

type Workers = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<Taken>>>>;

/// Takes the notified commands and hands each to its session's worker, until the node closes.
pub(crate) async fn run(core: Arc<Core>, mut notices: mpsc::UnboundedReceiver<Notice>) {
    let workers: Workers = Arc::default();
    loop {
        let notice = tokio::select! {
            notice = notices.recv() => notice,
            () = core.closing.cancelled() => None,
        };
        let Some(notice) = notice else { return };
        // The notices already waiting are taken with it: one statement (one commit) for all,
        // not a round trip each — under load the commands came faster than one at a time could
        // take them, and every request waited behind the others' takes.
        let mut ids = Vec::new();
        let mut next = Some(notice);
        while let Some(notice) = next.take() {
            match notice {
                Notice::Command(id) => ids.push(id),
                Notice::Scan(partitions) => ids.extend(scan(&core, &partitions).await),
            }
            if ids.len() < MAX_TAKE {
                next = notices.try_recv().ok();
            }
        }
        // In the order they were sent (ids are given in insertion order).
        ids.sort_unstable();
        ids.dedup();
        for some in ids.chunks(MAX_TAKE) {
            for (session, taken) in take(&core, some).await {
                hand(&core, &workers, session, taken);
            }
        }
    }
}

/// At most this many commands are taken in one statement.
const MAX_TAKE: usize = 256;

/// The unanswered commands of `partitions`, oldest first.
async fn scan(core: &Core, partitions: &BTreeSet<u32>) -> Vec<i64> {
    if partitions.is_empty() {
        return Vec::new();
    }
    let partitions: Vec<i32> =
        partitions.iter().map(|&p| i32::try_from(p).unwrap_or(i32::MAX)).collect();
    let Ok(client) = core.link.client().await else { return Vec::new() };
    let rows = client
        .query(
            "SELECT id FROM commands WHERE partition = ANY($1) AND NOT done ORDER BY id",
            &[&partitions],
        )
        .await;
    rows.map(|rows| rows.iter().filter_map(|r| r.try_get(0).ok()).collect()).unwrap_or_default()
}

/// Takes commands `ids` under their partitions' epochs — those of partitions this node holds
/// that nobody took under that epoch — in one statement: each with its session and what to
/// run, in id order.
async fn take(core: &Core, ids: &[i64]) -> Vec<(String, Taken)> {
    let Ok(client) = core.link.client().await else { return Vec::new() };
    let held = core.fence.held();
    let partitions: Vec<i32> =
        held.iter().map(|h| i32::try_from(h.partition).unwrap_or(i32::MAX)).collect();
    let epochs: Vec<i64> = held.iter().map(|h| i64::try_from(h.epoch).unwrap_or(0)).collect();
    let rows = client
        .query(
            "UPDATE commands c SET taken_by = $2, taken_epoch = h.epoch
             FROM unnest($3::int[], $4::bigint[]) AS h(partition, epoch)
             WHERE c.id = ANY($1) AND c.partition = h.partition AND NOT c.done
               AND (c.taken_epoch IS NULL OR c.taken_epoch < h.epoch)
             RETURNING c.id, c.session, c.partition, c.body",
            &[&ids, &core.options.node, &partitions, &epochs],
        )
        .await
        .unwrap_or_default();
    let mut taken: Vec<(String, Taken)> = rows
        .iter()
        .filter_map(|row| {
            let id: i64 = row.try_get(0).ok()?;
            let session: String = row.try_get(1).ok()?;
            let partition: i32 = row.try_get(2).ok()?;
            let body: String = row.try_get(3).ok()?;
            let command =
                serde_json::from_str(&body).map_err(|e| format!("unreadable request: {e}"));
            let partition = u32::try_from(partition).unwrap_or(0);
            Some((session, Taken { id, partition, command }))
        })
        .collect();
    taken.sort_by_key(|(_, taken)| taken.id);
    taken
}

/// Gives `taken` to its session's worker (started if there is none).
fn hand(core: &Arc<Core>, workers: &Workers, session: String, taken: Taken) {
    let mut map = workers.lock().unwrap_or_else(PoisonError::into_inner);
    let taken = match map.get(&session) {
        Some(worker) => match worker.send(taken) {
            Ok(()) => return,
            Err(back) => back.0,
        },
        None => taken,
    };
    let (worker, queue) = mpsc::unbounded_channel();
    let _ = worker.send(taken);
    map.insert(session.clone(), worker);
    core.tasks.spawn(work(Arc::clone(core), Arc::clone(workers), session, queue));
}

/// Runs one session's commands in order; ends when none is left.
async fn work(
    core: Arc<Core>,
    workers: Workers,
    session: String,
    mut queue: mpsc::UnboundedReceiver<Taken>,
) {
    loop {
        let next = match queue.try_recv() {
            Ok(taken) => Some(taken),
            Err(_) => {
                let mut map = workers.lock().unwrap_or_else(PoisonError::into_inner);
                match queue.try_recv() {
                    Ok(taken) => Some(taken),
                    Err(_) => {
                        map.remove(&session);
                        None
                    }
                }
            }
        };
        let Some(taken) = next else { return };
        run_one(&core, &session, taken).await;
    }
}

/// Runs one command on the local session and answers it.
async fn run_one(core: &Arc<Core>, session: &str, taken: Taken) {
    let Some(runtime) = core.runtime.get() else { return };
    if !core.fence.holds_session(session) {
        give_back(core, taken.id, taken.partition).await;
        return;
    }
    NodeStats::add(&core.stats.served, 1);
    let handle = runtime.local_session(session);
    let reply = match taken.command {
        Err(message) => Reply::Failed { error: Refusal::Other { message } },
        Ok(command) => serve(handle, command).await,
    };
    answer(core, taken.id, &reply).await;
}

/// What `command` does on the local session `handle`.
async fn serve(handle: Session, command: Command) -> Reply {
    let failed = |error: &SessionError| Reply::Failed { error: Refusal::of(error) };
    match command {
        Command::Open => match handle.open().await {
            Ok(()) => Reply::Done,
            Err(error) => failed(&error),
        },
        Command::Prompt { text, route, generation } => {
            let prompt = Prompt { text, route, generation };
            match handle.prompt(prompt) {
                Ok(mut turn) => match turn.started().await {
                    Ok((turn, from_seq)) => Reply::Started { turn, from_seq },
                    Err(error) => failed(&error),
                },
                Err(error) => failed(&error),
            }
        }
        Command::Retry => match handle.retry().await {
            Ok(mut turn) => match turn.started().await {
                Ok((turn, from_seq)) => Reply::Started { turn, from_seq },
                Err(error) => failed(&error),
            },
            Err(error) => failed(&error),
        },
        Command::Cancel { cause } => match handle.cancel(cause).await {
            Ok(cancelled) => Reply::Cancelled { cancelled },
            Err(error) => failed(&error),
        },
        Command::Close => match handle.close().await {
            Ok(()) => Reply::Done,
            Err(error) => failed(&error),
        },
    }
}

/// Writes the reply to command `id`, with its notice, in one statement (tried again while the
/// database is away, for as long as the node runs).
async fn answer(core: &Core, id: i64, reply: &Reply) {
    let text = command::encode(reply);
    let mut failed = 0u32;
    loop {
        if let Ok(client) = core.link.client().await
            && client
                .execute(
                    "WITH u AS (UPDATE commands SET reply = $2, done = true WHERE id = $1
                                RETURNING id)
                     SELECT pg_notify('rein_replies', id::text) FROM u",
                    &[&id, &text],
                )
                .await
                .is_ok()
        {
            return;
        }
        failed = failed.saturating_add(1);
        tokio::select! {
            () = tokio::time::sleep(crate::store::postgres::backoff(failed)) => {}
            () = core.closing.cancelled() => return,
        }
    }
}

/// Gives command `id` back untaken, with a notice for its partition's holder.
async fn give_back(core: &Core, id: i64, partition: u32) {
    let Ok(client) = core.link.client().await else { return };
    let notice = format!("{partition}:{id}");
    let _ = client
        .execute(
            "WITH u AS (UPDATE commands SET taken_by = NULL, taken_epoch = NULL
                        WHERE id = $1 AND taken_by = $2 RETURNING id)
             SELECT pg_notify('rein_commands', $3) FROM u",
            &[&id, &core.options.node, &notice],
        )
        .await;
}
