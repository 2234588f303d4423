//! A plugin's place in the chain ([`Slot`]) and the chain itself ([`PluginChain`]): what the
//! waterfall reads on every hop without asking the host.
//!
//! The chain's list of slots is replaced whole (never edited in place) when a plugin is
//! registered at run time; a walk takes the list once, when it starts, and offers its failure to
//! exactly those plugins — so a walk never sees the chain change under it, and a registration
//! can drop the slots of plugins that left the chain without shifting anyone's position.
//!
//! # Why hops go straight to the plugin actor
//!
//! A waterfall hop should cost about one actor round trip (≤ 1.5×: the budget in
//! `docs/architecture.md`, "Benchmark"). Routing every offer through the host's mailbox would
//! double that and make the host a queue every session shares. So the chain is shared memory: each
//! slot keeps its live incarnation behind a read-mostly lock (written only on a restart), and a hop
//! reads it, sends the recovery to the plugin actor and awaits the answer. Only when that
//! incarnation turns out to be dead — it crashed with the offer in its mailbox — does the hop ask
//! the host, which answers once the restart is done.

use std::sync::{Arc, Mutex, PoisonError, RwLock};

use futures::FutureExt;

use ractor::{ActorRef, ActorStatus, MessagingErr};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::HostMsg;
use super::plugin_msg::{PluginMsg, PluginReply, RecoverCall};
use crate::plugin::{AskedDownstream, Downstream, DownstreamWalk, Plugin, RequestErrorPayload};
use crate::random::Jitter;

/// How often a hop re-sends an offer that a dying incarnation dropped before giving up.
const MAX_REOFFERS: usize = 16;

/// One plugin's place in the chain, shared by the host, its incarnations and every hop.
pub(crate) struct Slot {
    /// Its id, unique within the host (positions change when plugins are registered).
    pub(crate) id: u64,
    /// The plugin's name.
    pub(crate) name: String,
    /// The plugin, until it is disposed (then the chain keeps no reference to it).
    plugin: Mutex<Option<Arc<dyn Plugin>>>,
    /// Cancelled when the plugin leaves the chain (disposed, or too many crashes).
    pub(crate) disposed: CancellationToken,
    /// Its in-flight recoveries, across incarnations.
    pub(crate) tracker: TaskTracker,
    /// The live incarnation, on a cache line of its own (see [`Current`]).
    current: Current,
    host: ActorRef<HostMsg>,
    jitter: Arc<dyn Jitter>,
}

impl Slot {
    pub(crate) fn new(
        id: u64,
        plugin: Arc<dyn Plugin>,
        host: ActorRef<HostMsg>,
        jitter: Arc<dyn Jitter>,
    ) -> Self {
        Self {
            id,
            name: plugin.name().to_owned(),
            plugin: Mutex::new(Some(plugin)),
            disposed: CancellationToken::new(),
            tracker: TaskTracker::new(),
            current: Current(RwLock::new(None)),
            host,
            jitter,
        }
    }

    /// The plugin, unless it was disposed.
    pub(crate) fn plugin(&self) -> Option<Arc<dyn Plugin>> {
        self.plugin.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Disposes the plugin: out of the chain at once (its waits abort, its recoveries answer
    /// `Stop`), then — once every recovery of every incarnation settled — its own
    /// [`Plugin::dispose`], exactly once, after which the slot forgets it.
    pub(crate) async fn dispose(&self) {
        self.disposed.cancel();
        self.tracker.close();
        self.tracker.wait().await;
        let plugin = self.plugin.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(plugin) = plugin {
            let name = self.name.clone();
            let disposed = std::panic::AssertUnwindSafe(plugin.dispose()).catch_unwind().await;
            if let Err(panic) = disposed {
                let error = crate::crash::panic_message(panic.as_ref());
                tracing::error!(plugin = %name, %error, "a plugin's dispose panicked");
            }
        }
    }

    /// Whether the plugin is still in the chain.
    pub(crate) fn in_chain(&self) -> bool {
        !self.disposed.is_cancelled()
    }

    /// The live incarnation, if any.
    pub(crate) fn current(&self) -> Option<ActorRef<PluginMsg>> {
        self.current.0.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Sends `message` to the live incarnation if it is running, under the read lock (a hop
    /// does not clone the actor's handle: its count is a word the actor itself touches on every
    /// message). Gives the message back when there is no running incarnation or its mailbox is
    /// closed. (ractor's other send errors do not give the message back; they cannot happen for a
    /// typed handle, and if one did, the dropped reply port makes the hop offer again.)
    pub(crate) fn send_to_current(&self, message: PluginMsg) -> Result<(), PluginMsg> {
        let current = self.current.0.read().unwrap_or_else(PoisonError::into_inner);
        let Some(actor) = current.as_ref().filter(|actor| is_running(actor)) else {
            return Err(message);
        };
        match actor.send_message(message) {
            Err(MessagingErr::SendErr(message)) => Err(message),
            Ok(()) | Err(_) => Ok(()),
        }
    }

    /// Replaces the live incarnation (host only).
    pub(crate) fn set_current(&self, actor: Option<ActorRef<PluginMsg>>) {
        *self.current.0.write().unwrap_or_else(PoisonError::into_inner) = actor;
    }

    /// The host.
    pub(crate) fn host(&self) -> &ActorRef<HostMsg> {
        &self.host
    }

    /// The jitter source recoveries get.
    pub(crate) fn jitter(&self) -> Arc<dyn Jitter> {
        Arc::clone(&self.jitter)
    }
}

/// The slot's live incarnation behind its lock, aligned to a cache-line pair of its own: every hop
/// takes the read lock (a write to the lock word), and the fields the plugin actor reads on every
/// recovery (`plugin`, `disposed`, `tracker`, `jitter`) should not share a line with it.
#[repr(align(128))]
struct Current(RwLock<Option<ActorRef<PluginMsg>>>);

/// What offering a failure to one slot gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Offered {
    /// The plugin answered (or crashed).
    Answer(PluginReply),
    /// The plugin is out of the chain (disposed or removed): skip it.
    Skipped,
    /// The host is gone (the runtime is shutting down).
    Unreachable,
}

/// The plugins of one walk, in chain order: the chain's list when the walk started.
pub(crate) type Slots = Arc<Vec<Arc<Slot>>>;

/// The plugins in chain order, with what a hop needs to reach them.
pub struct PluginChain {
    slots: RwLock<Slots>,
}

impl std::fmt::Debug for PluginChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let slots = self.snapshot();
        let names: Vec<(&str, bool)> =
            slots.iter().map(|s| (s.name.as_str(), s.in_chain())).collect();
        f.debug_struct("PluginChain").field("slots", &names).finish()
    }
}

impl PluginChain {
    pub(crate) fn new(slots: Vec<Arc<Slot>>) -> Self {
        Self { slots: RwLock::new(Arc::new(slots)) }
    }

    /// The list of slots as it is now (a walk's view of the chain).
    pub(crate) fn snapshot(&self) -> Slots {
        Arc::clone(&self.slots.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Replaces the list (host only): walks already started keep the list they took.
    pub(crate) fn replace(&self, slots: Vec<Arc<Slot>>) {
        *self.slots.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(slots);
    }

    /// How many plugins are in the chain.
    pub fn len(&self) -> usize {
        self.snapshot().iter().filter(|s| s.in_chain()).count()
    }

    /// Whether no plugin is in the chain.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The names of the plugins still in the chain, in order.
    pub fn names(&self) -> Vec<String> {
        self.snapshot().iter().filter(|s| s.in_chain()).map(|s| s.name.clone()).collect()
    }

    /// The plugin named `name`, if it is still in the chain.
    pub fn plugin(&self, name: &str) -> Option<Arc<dyn Plugin>> {
        self.slot(name).and_then(|s| s.plugin())
    }

    /// The id of the live actor of the plugin named `name` (a restart changes it).
    pub fn incarnation(&self, name: &str) -> Option<ractor::ActorId> {
        self.slot(name).and_then(|s| s.current()).map(|a| a.get_id())
    }

    pub(crate) fn slot(&self, name: &str) -> Option<Arc<Slot>> {
        self.snapshot().iter().find(|s| s.name == name && s.in_chain()).cloned()
    }
}

impl Slot {
    /// Offers a failure to this plugin. `rest` names the walk of the chain after it
    /// (called again if the offer must be re-sent; nothing is walked unless the plugin asks).
    /// Returns the answer and what the plugin's downstream answered, if it asked.
    pub(crate) async fn offer<W: DownstreamWalk + 'static>(
        &self,
        payload: &Arc<RequestErrorPayload>,
        rest: impl Fn() -> W,
    ) -> (Offered, Option<AskedDownstream>) {
        for _ in 0..MAX_REOFFERS {
            if !self.in_chain() {
                return (Offered::Skipped, None);
            }
            let (downstream, asked) = Downstream::chain(Arc::new(rest()));
            let (reply, answer) = oneshot::channel();
            let call =
                PluginMsg::Recover(RecoverCall { payload: Arc::clone(payload), downstream, reply });
            if let Err(call) = self.send_to_current(call) {
                // No running incarnation (it crashed): the host's successor gets it. Boxed, with
                // the offer: only after a crash, and it should not size every hop's future.
                match Box::pin(send_to_successor(self, call)).await {
                    Resolved::Sent => {}
                    Resolved::Lost => continue,
                    Resolved::OutOfChain => return (Offered::Skipped, None),
                    Resolved::HostGone => return (Offered::Unreachable, None),
                }
            }
            match answer.await {
                Ok(reply) => return (Offered::Answer(reply), Some(asked)),
                // The incarnation died with the offer unread in its mailbox: offer it again.
                Err(_) => continue,
            }
        }
        (Offered::Unreachable, None)
    }
}

fn is_running(actor: &ActorRef<PluginMsg>) -> bool {
    matches!(
        actor.get_status(),
        ActorStatus::Running | ActorStatus::Starting | ActorStatus::Upgrading
    )
}

/// What became of an offer sent to a crashed plugin's successor.
enum Resolved {
    /// The successor has it.
    Sent,
    /// The successor died before it could take it: offer again.
    Lost,
    /// The plugin left the chain.
    OutOfChain,
    /// The host is gone.
    HostGone,
}

/// Asks the host for the slot's live incarnation (it answers after a pending restart) and sends
/// it `call`.
async fn send_to_successor(slot: &Slot, call: PluginMsg) -> Resolved {
    let (reply, answer) = oneshot::channel();
    if slot.host().send_message(HostMsg::Resolve { slot: slot.id, reply }).is_err() {
        return Resolved::HostGone;
    }
    // A host that is stopping disposes every slot first; it may never read this request.
    let actor = tokio::select! {
        biased;
        answer = answer => match answer {
            Ok(Some(actor)) => actor,
            Ok(None) => return Resolved::OutOfChain,
            Err(_) => return Resolved::HostGone,
        },
        () = slot.disposed.cancelled() => return Resolved::OutOfChain,
    };
    match actor.send_message(call) {
        Ok(()) => Resolved::Sent,
        Err(_) => Resolved::Lost,
    }
}
