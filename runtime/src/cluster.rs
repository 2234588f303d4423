//! Several nodes on one PostgreSQL database (SPEC §12, cargo feature `postgres`): sessions owned
//! by partitions with fenced leases, any node serving any session, a killed node's turns resumed
//! elsewhere.
//!
//! A [`Node`] is one rein process's membership: [`Node::join`] opens the shared
//! [`PostgresStore`] as a node (sessions claimed under the node's [`Fence`]), brings the cluster's
//! tables up (its fixed number of partitions is written by its first node) and starts listening
//! to the other nodes; the program builds its [`Runtime`] on [`Node::store`] with
//! [`Node::placement`], and [`Node::start`] sets it to work: the `PartitionKeeper` actor takes
//! and renews the node's fair share of partitions, the node serves what other nodes forward for
//! the sessions it holds, and it follows settings saved anywhere. [`Node::drain`] hands
//! everything back before the process ends.
//!
//! PostgreSQL is the engine: a partition's row (owner, epoch, expiry on the database clock) is
//! the lease, the epoch checked `FOR SHARE` in every append transaction is the fence, a table of
//! commands with `LISTEN/NOTIFY` is the forwarding, and the log itself is the timer (a retry's
//! deadline is in its `llm/retry`). No consensus, gossip, replication, timer service or clock
//! protocol of rein's own.
//!
//! # Layout
//! - `share`, `lease`: the pure decisions — a node's fair share; which partitions it lost.
//! - `command`: what travels between nodes (a forwarded request, its reply), pure.
//! - `sql`: the keeper's statements on `cluster`, `partitions` and `nodes`.
//! - `link`: the node's shared connection and its listening connection.
//! - `follow`: following a turn another node runs, to its `turn/end`.
//! - `forward`: a [`Session`](crate::session::Session)'s requests for a session another node
//!   serves (the placement's router): the command row, the reply, the turn followed.
//! - `serve`: the commands for the sessions this node serves, in order per session.
//! - `keeper`: the `PartitionKeeper` actor: leases, takeovers, losses, the drain.
//! - `settings`: settings saved on any node, applied here.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ractor::ActorRef;
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::runtime::Runtime;
use crate::session::Placement;
use crate::store::postgres::{Fence, PostgresStore, Target};
use crate::store::{Durability, StoreError};

mod command;
mod follow;
mod forward;
mod keeper;
mod lease;
mod link;
mod serve;
mod settings;
mod share;
mod sql;

use keeper::KeeperMsg;

/// How a node joins its cluster.
#[derive(Debug, Clone)]
pub struct NodeOptions {
    /// The node's id, unique among the live nodes (a restarted node may reuse its id: its old
    /// leases are fenced all the same).
    pub node: String,
    /// Where its console and API answer (`http://127.0.0.1:7410`), shown to the others; may be
    /// empty.
    pub addr: String,
    /// The cluster's number of partitions when this node is its first (default
    /// [`DEFAULT_PARTITIONS`](crate::store::postgres::partition::DEFAULT_PARTITIONS)); a node
    /// naming another number than the cluster's is refused.
    pub partitions: Option<u32>,
    /// How long a lease lasts without renewal: a killed node's sessions resume elsewhere about
    /// this long after it died. Renewed every third of it.
    pub lease: Duration,
    /// The durability of the store's appends.
    pub durability: Durability,
    /// How long a forwarded request waits for a node to take it before it fails (once taken, it
    /// waits as long as the serving node takes: a prompt queued behind a long turn).
    pub command_timeout: Duration,
}

impl NodeOptions {
    /// The defaults for node `node`: no address, the cluster's partitions, a 5 s lease, `Disk`
    /// durability, 30 s for a request to be taken.
    pub fn new(node: impl Into<String>) -> Self {
        Self {
            node: node.into(),
            addr: String::new(),
            partitions: None,
            lease: Duration::from_secs(5),
            durability: Durability::Disk,
            command_timeout: Duration::from_secs(30),
        }
    }
}

/// Why a node could not join or start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NodeError {
    /// The store could not be opened (the database unreachable, a newer schema, …).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The node's options are not usable.
    #[error("{0}")]
    Options(String),
    /// The cluster has another number of partitions than the options name.
    #[error(
        "{url}: the cluster has {found} partitions; a node cannot change it (asked for {asked})"
    )]
    Partitions {
        /// The database, without its password.
        url: String,
        /// The cluster's.
        found: u32,
        /// The options'.
        asked: u32,
    },
    /// The node was started twice.
    #[error("node {0} is already started")]
    Started(String),
    /// The keeper actor could not start.
    #[error("could not start the partition keeper: {0}")]
    Spawn(String),
}

/// Why a node stopped holding partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LostBy {
    /// Another node took them over (the renewal did not renew them).
    TakenOver,
    /// A lease went by without a renewal answering (the database away or cut off).
    LeaseRanOut,
    /// An append found the partition's epoch moved ([`StoreError::Fenced`]).
    Fenced,
}

/// What a node does with its partitions, as it happens (what `rein node` logs).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum NodeEvent {
    /// It took these partitions.
    Took {
        /// The partitions.
        partitions: Vec<u32>,
        /// Those of them taken over from a node whose lease had run out (killed, paused, cut
        /// off), with that node.
        over: Vec<(u32, String)>,
    },
    /// It resumed the open turns of the sessions of partitions it took.
    Resumed {
        /// The partitions.
        partitions: usize,
        /// The sessions whose turn resumed.
        sessions: usize,
        /// The sessions that could not be opened, with why.
        failed: Vec<(String, String)>,
    },
    /// It stopped holding these partitions, and stopped their sessions without writing.
    Lost {
        /// The partitions.
        partitions: Vec<u32>,
        /// Why.
        by: LostBy,
        /// The sessions stopped.
        sessions: usize,
    },
    /// It gave these partitions back (a node joined, or it drains), its sessions stopped first.
    GaveBack {
        /// The partitions.
        partitions: Vec<u32>,
        /// The sessions stopped.
        sessions: usize,
    },
    /// The keeper could not reach the database this round.
    Unreachable(String),
}

/// What a node counted since it joined.
#[derive(Debug, Default)]
pub struct NodeStats {
    /// Partitions taken over from a node whose lease had run out.
    pub takeovers: AtomicU64,
    /// Partitions taken in all.
    pub taken: AtomicU64,
    /// Sessions whose open turn resumed after a takeover.
    pub resumed: AtomicU64,
    /// Appends the fence refused (this node wrote nothing of them).
    pub fenced: AtomicU64,
    /// Requests this node forwarded to another.
    pub forwarded: AtomicU64,
    /// Requests this node served for another.
    pub served: AtomicU64,
}

impl NodeStats {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// A counter's value.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// What every part of a node shares.
pub(crate) struct Core {
    options: NodeOptions,
    target: Target,
    fence: Arc<Fence>,
    store: Arc<PostgresStore>,
    link: link::Link,
    follows: follow::Follows,
    replies: forward::Replies,
    outgoing: mpsc::UnboundedSender<forward::Outgoing>,
    runtime: OnceLock<Runtime>,
    keeper: OnceLock<ActorRef<KeeperMsg>>,
    serving: OnceLock<mpsc::UnboundedSender<serve::Notice>>,
    events: broadcast::Sender<NodeEvent>,
    stats: NodeStats,
    tasks: TaskTracker,
    closing: CancellationToken,
}

impl Core {
    fn event(&self, event: NodeEvent) {
        let _ = self.events.send(event);
    }

    /// The store, as the runtime's trait object.
    fn session_store(&self) -> Arc<dyn crate::store::SessionStore> {
        Arc::clone(&self.store) as Arc<dyn crate::store::SessionStore>
    }

    /// What the listener heard, dispatched.
    fn heard(&self, heard: link::Heard) {
        match heard {
            link::Heard::Connected => {
                self.follows.wake_all();
                self.replies.wake_all();
                if let Some(serving) = self.serving.get() {
                    let held = self.fence.held().iter().map(|h| h.partition).collect();
                    let _ = serving.send(serve::Notice::Scan(held));
                }
                if let Some(runtime) = self.runtime.get() {
                    settings::spawn_sync(self, runtime);
                }
            }
            link::Heard::Notice(channel, payload) => match channel.as_str() {
                "rein_appended" => {
                    self.follows.wake(payload.split(',').filter_map(|p| p.parse().ok()));
                }
                "rein_replies" => {
                    if let Ok(id) = payload.parse() {
                        self.replies.wake(id);
                    }
                }
                "rein_commands" => {
                    let parsed = payload.split_once(':').and_then(|(p, id)| {
                        Some((p.parse::<u32>().ok()?, id.parse::<i64>().ok()?))
                    });
                    if let (Some((partition, id)), Some(serving)) = (parsed, self.serving.get())
                        && self.fence.held().iter().any(|h| h.partition == partition)
                    {
                        let _ = serving.send(serve::Notice::Command(id));
                    }
                }
                "rein_settings" => {
                    if let Some(runtime) = self.runtime.get() {
                        settings::spawn_sync(self, runtime);
                    }
                }
                _ => {}
            },
        }
    }
}

/// One rein process's membership in a cluster (see the module docs). Cheap to clone.
#[derive(Clone)]
pub struct Node {
    core: Arc<Core>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("node", &self.core.options.node)
            .field("url", &self.core.target.shown())
            .finish_non_exhaustive()
    }
}

impl Node {
    /// Joins the cluster at `url` (`postgres://USER[:PASSWORD]@HOST[:PORT]/DB`): opens its store
    /// as this node (migrating its tables), settles the cluster's partitions, and listens to the
    /// other nodes. The node holds no partition until [`Node::start`].
    pub async fn join(url: &str, options: NodeOptions) -> Result<Self, NodeError> {
        let target = Target::parse(url).map_err(StoreError::Postgres)?;
        if options.node.is_empty()
            || options.node.len() > 64
            || !options.node.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        {
            return Err(NodeError::Options(format!(
                "node id {:?}: use 1 to 64 letters, digits, '-', '_' and '.'",
                options.node
            )));
        }
        if options.lease < Duration::from_millis(100) {
            return Err(NodeError::Options(format!(
                "lease {} ms: at least 100 ms",
                options.lease.as_millis()
            )));
        }
        if let Some(p) = options.partitions
            && !(1..=crate::store::postgres::partition::MAX_PARTITIONS).contains(&p)
        {
            return Err(NodeError::Options(format!(
                "partitions {p}: from 1 to {}",
                crate::store::postgres::partition::MAX_PARTITIONS
            )));
        }
        // The tables first (the store's open migrates them), then the cluster's partitions.
        let probe = PostgresStore::open_target(target.clone(), Durability::Os).await?;
        drop(probe);
        let link = link::Link::new(target.clone());
        let shown = target.shown().to_owned();
        let pg = |e: tokio_postgres::Error| {
            StoreError::Postgres(format!("{shown}: {}", crate::store::postgres::message(&e)))
        };
        let mut client =
            crate::store::postgres::connect(&target, Durability::Disk).await.map_err(pg)?;
        let partitions = match sql::init(&mut client, options.partitions).await.map_err(pg)? {
            Ok(partitions) => partitions,
            Err(found) => {
                let asked = options.partitions.unwrap_or_default();
                return Err(NodeError::Partitions { url: shown, found, asked });
            }
        };
        drop(client);
        let fence = Fence::new(options.node.clone(), partitions);
        let store = Arc::new(
            PostgresStore::open_node(target.clone(), options.durability, Arc::clone(&fence))
                .await?,
        );
        let (outgoing, queue) = mpsc::unbounded_channel();
        let (events, _) = broadcast::channel(1024);
        let core = Arc::new(Core {
            options,
            target: target.clone(),
            fence,
            store,
            link,
            follows: follow::Follows::default(),
            replies: forward::Replies::default(),
            outgoing,
            runtime: OnceLock::new(),
            keeper: OnceLock::new(),
            serving: OnceLock::new(),
            events,
            stats: NodeStats::default(),
            tasks: TaskTracker::new(),
            closing: CancellationToken::new(),
        });
        core.tasks.spawn(forward::send(Arc::clone(&core), queue));
        let (heard, mut hearing) = mpsc::unbounded_channel();
        core.tasks.spawn(link::listen(target, heard, core.closing.clone()));
        let listening = Arc::clone(&core);
        core.tasks.spawn(async move {
            while let Some(heard) = hearing.recv().await {
                listening.heard(heard);
            }
        });
        Ok(Self { core })
    }

    /// The node's store: the runtime's ([`RuntimeBuilder::store`](crate::runtime::RuntimeBuilder::store)).
    pub fn store(&self) -> Arc<PostgresStore> {
        Arc::clone(&self.core.store)
    }

    /// The node's placement of sessions: the runtime's
    /// ([`RuntimeBuilder::placement`](crate::runtime::RuntimeBuilder::placement)).
    pub fn placement(&self) -> Placement {
        Placement(Arc::new(forward::Router(Arc::clone(&self.core))))
    }

    /// Sets the node to work with `runtime` (built on [`Node::store`] and [`Node::placement`]):
    /// the partition keeper takes the node's share and resumes what it takes over, and the node
    /// serves the requests forwarded to it and follows settings saved anywhere.
    pub async fn start(&self, runtime: &Runtime) -> Result<(), NodeError> {
        let core = &self.core;
        if core.runtime.set(runtime.clone()).is_err() {
            return Err(NodeError::Started(core.options.node.clone()));
        }
        let (serving, notices) = mpsc::unbounded_channel();
        let _ = core.serving.set(serving);
        core.tasks.spawn(serve::run(Arc::clone(core), notices));
        let keeper = keeper::spawn(Arc::clone(core)).await.map_err(NodeError::Spawn)?;
        let _ = core.keeper.set(keeper);
        Ok(())
    }

    /// The node's id.
    pub fn id(&self) -> &str {
        &self.core.options.node
    }

    /// The cluster's number of partitions.
    pub fn partitions(&self) -> u32 {
        self.core.fence.partitions()
    }

    /// The partition of `session`.
    pub fn partition_of(&self, session: &str) -> u32 {
        self.core.fence.partition_of(session)
    }

    /// The partitions this node holds now.
    pub fn held(&self) -> BTreeSet<u32> {
        self.core.fence.held().iter().map(|h| h.partition).collect()
    }

    /// Whether this node serves `session` now.
    pub fn serves(&self, session: &str) -> bool {
        self.core.fence.holds_session(session)
    }

    /// What the node does with its partitions, from now on.
    pub fn events(&self) -> broadcast::Receiver<NodeEvent> {
        self.core.events.subscribe()
    }

    /// What the node counted.
    pub fn stats(&self) -> &NodeStats {
        &self.core.stats
    }

    /// Leaves the cluster gracefully: stops taking partitions, stops every session it serves
    /// without writing (a turn running resumes on the partition's next owner, a retry wait at
    /// its deadline), gives every partition back at once (the others take them at their next
    /// round, not a lease later) and removes its heartbeat. Then the runtime can be shut down
    /// (it serves nothing any more). Idempotent.
    pub async fn drain(&self) {
        if let Some(keeper) = self.core.keeper.get() {
            let _ = ractor::call!(keeper, KeeperMsg::Drain);
            keeper.stop(None);
        }
        self.core.closing.cancel();
        self.core.tasks.close();
    }
}
