//! The `PartitionKeeper` actor: one per node, the only one that takes, renews and gives back the
//! node's partitions (wiring; the decisions are `share` and `lease`, the statements `sql`).
//!
//! Every third of a lease it runs a round on its own connection: the heartbeat, the renewal of
//! every held partition in one statement, and the count of live nodes, in one pipelined trip
//! (bounded by a lease: a database that does not answer is a failed round — a slow answer is
//! still a good one, since the renewal renews only what is still the node's). Then:
//!
//! - **lost** partitions (`lease::lost`: not renewed — taken over — or a whole lease without an
//!   answer) leave the fence at once and their sessions are stopped without writing (evicted:
//!   killed, not woken again here);
//! - under its fair share (`share::plan`) it **takes** free or expired partitions, bumping their
//!   epochs, and then resumes the open turns of their sessions (`Runtime::resume_pending_of`:
//!   a retry wait continues at its original deadline with the same `retryId`) and takes their
//!   unanswered commands;
//! - over its share (a node joined) it **gives back** the excess, its sessions stopped first.
//!
//! An append the fence refused (`fence`) reaches it as [`KeeperMsg::Fenced`]: that partition's
//! other sessions are stopped the same way. [`KeeperMsg::Drain`] gives everything back and
//! removes the heartbeat (the node's graceful stop).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio_postgres::Client;

use super::lease::{self, Renewal};
use super::serve::Notice;
use super::{Core, LostBy, NodeEvent, NodeStats, share, sql};
use crate::store::Durability;
use crate::store::postgres::fence::Held;

/// A keeper's messages.
pub(crate) enum KeeperMsg {
    /// Time for a round.
    Round,
    /// An append found this partition fenced.
    Fenced(u32),
    /// Give everything back and stop taking.
    Drain(RpcReplyPort<()>),
}

pub(crate) struct PartitionKeeper {
    core: Arc<Core>,
}

pub(crate) struct KeeperState {
    client: Option<Client>,
    /// When the last renewal that answered was sent.
    renewed_at: Instant,
    draining: bool,
}

/// Spawns the node's keeper, its first round at once.
pub(crate) async fn spawn(core: Arc<Core>) -> Result<ActorRef<KeeperMsg>, String> {
    let losses = core.fence.losses();
    let keeper = PartitionKeeper { core: Arc::clone(&core) };
    let (actor, _) = Actor::spawn(None, keeper, ()).await.map_err(|e| e.to_string())?;
    if let Some(mut losses) = losses {
        let fenced = actor.clone();
        core.tasks.spawn(async move {
            while let Some(partition) = losses.recv().await {
                if fenced.send_message(KeeperMsg::Fenced(partition)).is_err() {
                    return;
                }
            }
        });
    }
    Ok(actor)
}

impl Actor for PartitionKeeper {
    type Msg = KeeperMsg;
    type State = KeeperState;
    type Arguments = ();

    async fn pre_start(
        &self,
        myself: ActorRef<KeeperMsg>,
        (): (),
    ) -> Result<KeeperState, ActorProcessingErr> {
        let _ = myself.send_message(KeeperMsg::Round);
        Ok(KeeperState { client: None, renewed_at: Instant::now(), draining: false })
    }

    async fn handle(
        &self,
        myself: ActorRef<KeeperMsg>,
        message: KeeperMsg,
        state: &mut KeeperState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            KeeperMsg::Round => {
                if state.draining {
                    return Ok(());
                }
                self.round(state).await;
                myself.send_after(self.core.options.lease / 3, || KeeperMsg::Round);
            }
            KeeperMsg::Fenced(partition) => {
                let sessions = self.stop_sessions(&BTreeSet::from([partition])).await;
                NodeStats::add(&self.core.stats.fenced, 1);
                let partitions = vec![partition];
                self.core.event(NodeEvent::Lost { partitions, by: LostBy::Fenced, sessions });
            }
            KeeperMsg::Drain(reply) => {
                state.draining = true;
                let held = self.core.fence.held();
                self.give_back(state, held).await;
                if let Some(client) = self.client(state).await {
                    let _ = self.bounded(sql::leave(&client, &self.core.options.node)).await;
                    state.client = Some(client);
                }
                let _ = reply.send(());
            }
        }
        Ok(())
    }
}

impl PartitionKeeper {
    /// A statement, bounded by a lease (`None`: no answer in time, or an error).
    async fn bounded<T, E>(&self, work: impl Future<Output = Result<T, E>>) -> Option<T> {
        let bound = self.core.options.lease;
        tokio::time::timeout(bound, work).await.ok()?.ok()
    }

    /// The keeper's connection, connected if it is not (bounded).
    async fn client(&self, state: &mut KeeperState) -> Option<Client> {
        if let Some(client) = state.client.take().filter(|c| !c.is_closed()) {
            return Some(client);
        }
        let connect = crate::store::postgres::connect(&self.core.target, Durability::Disk);
        self.bounded(connect).await
    }

    /// One round: heartbeat and renewal, losses, then the share.
    async fn round(&self, state: &mut KeeperState) {
        let core = &self.core;
        let held = core.fence.held();
        let sent = Instant::now();
        let client = self.client(state).await;
        let round = match &client {
            Some(client) => {
                let options = &core.options;
                self.bounded(sql::round(client, &options.node, &options.addr, options.lease, &held))
                    .await
            }
            None => None,
        };
        // A connection that did not answer is dropped: the next round connects afresh.
        state.client = if round.is_some() { client } else { None };
        let renewal = match &round {
            Some(round) => {
                state.renewed_at = sent;
                Renewal::Renewed(round.renewed.clone())
            }
            None => {
                core.event(NodeEvent::Unreachable(format!(
                    "{}: no answer within a lease",
                    core.target.shown()
                )));
                Renewal::Failed
            }
        };
        let held_set: BTreeSet<u32> = held.iter().map(|h| h.partition).collect();
        let lost = lease::lost(
            &held_set,
            &renewal,
            sent.duration_since(state.renewed_at),
            core.options.lease,
        );
        if !lost.is_empty() {
            let by = if round.is_some() { LostBy::TakenOver } else { LostBy::LeaseRanOut };
            let sessions = self.stop_sessions(&lost).await;
            let partitions = lost.iter().copied().collect();
            core.event(NodeEvent::Lost { partitions, by, sessions });
        }
        let Some(round) = round else { return };
        let holding = held_set.len() - lost.len();
        let plan = share::plan(core.fence.partitions(), round.live, holding);
        if plan.take > 0 {
            self.take(state, plan.take).await;
        } else if plan.give_back > 0 {
            let mut excess = core.fence.held();
            excess.sort_by_key(|h| std::cmp::Reverse(h.partition));
            excess.truncate(plan.give_back);
            self.give_back(state, excess).await;
        }
    }

    /// Takes at most `count` partitions, then resumes their sessions and serves their commands.
    async fn take(&self, state: &mut KeeperState, count: usize) {
        let core = &self.core;
        let Some(client) = state.client.as_ref() else { return };
        let options = &core.options;
        let Some(taken) = self
            .bounded(sql::take(client, &options.node, &options.addr, options.lease, count))
            .await
        else {
            return;
        };
        if taken.is_empty() {
            return;
        }
        let held: Vec<Held> = taken.iter().map(|t| t.held).collect();
        core.fence.hold(&held);
        let over: Vec<(u32, String)> =
            taken.iter().filter_map(|t| Some((t.held.partition, t.from.clone()?))).collect();
        NodeStats::add(&core.stats.taken, taken.len() as u64);
        NodeStats::add(&core.stats.takeovers, over.len() as u64);
        core.event(NodeEvent::Took {
            partitions: held.iter().map(|h| h.partition).collect(),
            over,
        });
        let partitions: BTreeSet<u32> = held.iter().map(|h| h.partition).collect();
        let core = Arc::clone(core);
        self.core.tasks.spawn(async move {
            if let Some(runtime) = core.runtime.get() {
                let fence = Arc::clone(&core.fence);
                let wanted = |s: &str| partitions.contains(&fence.partition_of(s));
                match runtime.resume_pending_of(wanted).await {
                    Ok(resumed) => {
                        NodeStats::add(&core.stats.resumed, resumed.resumed.len() as u64);
                        if !resumed.resumed.is_empty() || !resumed.failed.is_empty() {
                            core.event(NodeEvent::Resumed {
                                partitions: partitions.len(),
                                sessions: resumed.resumed.len(),
                                failed: resumed
                                    .failed
                                    .into_iter()
                                    .map(|f| (f.session, f.error))
                                    .collect(),
                            });
                        }
                    }
                    Err(error) => core.event(NodeEvent::Unreachable(error.to_string())),
                }
            }
            if let Some(serving) = core.serving.get() {
                let _ = serving.send(Notice::Scan(partitions));
            }
        });
    }

    /// Gives `held` back: out of the fence, its sessions stopped, then free in the database.
    async fn give_back(&self, state: &mut KeeperState, held: Vec<Held>) {
        if held.is_empty() {
            return;
        }
        let partitions: BTreeSet<u32> = held.iter().map(|h| h.partition).collect();
        let sessions = self.stop_sessions(&partitions).await;
        if let Some(client) = self.client(state).await {
            let _ = self.bounded(sql::give_back(&client, &self.core.options.node, &held)).await;
            state.client = Some(client);
        }
        let partitions = partitions.into_iter().collect();
        self.core.event(NodeEvent::GaveBack { partitions, sessions });
    }

    /// Takes `partitions` out of the fence and stops their awake sessions without writing.
    async fn stop_sessions(&self, partitions: &BTreeSet<u32>) -> usize {
        let core = &self.core;
        let list: Vec<u32> = partitions.iter().copied().collect();
        core.fence.release(&list);
        let Some(runtime) = core.runtime.get() else { return 0 };
        let fence = Arc::clone(&core.fence);
        runtime.evict(&|s: &str| partitions.contains(&fence.partition_of(s))).await
    }
}
