//! The plugin host: the supervisor of the plugin actors, one per plugin, in chain order.
//!
//! - [`intensity`]: the pure restart rule (default 3 restarts in 5 s).
//! - `slot`: a plugin's shared place in the chain; [`PluginChain`], what a waterfall hop reads.
//! - `plugin_actor`: the actor of one plugin incarnation; each recovery is a tracked task.
//!
//! The host spawns one [`plugin_actor`](self) per plugin, linked to itself, and one more for each
//! plugin registered while the runtime runs ([`PluginHost::register`]: it joins the end of the
//! chain and is supervised like the others, with a restart window of its own). When a recovery
//! panics, its incarnation fails (carrying the crash report) and ractor tells the host: the
//! host asks [`RestartWindow`] and either spawns a fresh incarnation (the slot, with its
//! in-flight recoveries and its `disposed` token, carries over) or removes the plugin from the
//! chain, cancelling its `disposed` token so its in-flight recoveries fail closed.
//!
//! # Why removal fails closed
//!
//! A plugin that crashes faster than its intensity allows is broken; it leaves the chain for every
//! later failure. Its recoveries already in flight are treated like those of a disposed plugin
//! (`docs/runtime-semantics.md`, "Waterfall and plugins", rule 5): their waits are aborted and they
//! answer `Stop`, so no turn keeps waiting on code the runtime has stopped trusting, and no task of
//! it outlives the decision.
//!
//! # Why disposal does not block the host
//!
//! Disposal waits until the plugin's recoveries settle, and a recovery may be
//! consulting plugins downstream whose own hops might need the host. The host therefore marks
//! the slot out of the chain, then stops the plugin's actor from a separate task and answers the
//! caller when that stop completed.

use std::sync::Arc;

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio::sync::oneshot;

use crate::census::{ActorKind, Alive, Census};
use crate::plugin::Plugin;
use crate::random::Jitter;

pub(crate) mod intensity;
pub(crate) mod plugin_actor;
pub(crate) mod plugin_msg;
mod slot;
pub(crate) mod walk;

pub use intensity::{CrashDecision, RestartIntensity, RestartWindow};
pub use slot::PluginChain;
pub(crate) use slot::Slot;

use plugin_actor::PluginActor;
use plugin_msg::PluginMsg;

/// Why the host could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// Two plugins share a name.
    #[error("plugins[{index}]: a plugin named {name:?} is already registered")]
    DuplicateName {
        /// The later one's position.
        index: usize,
        /// The name.
        name: String,
    },
    /// An actor could not be spawned.
    #[error("could not start the plugin host: {0}")]
    Spawn(String),
}

/// Why a plugin could not be disposed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DisposeError {
    /// No plugin of that name is in the chain (never registered, or already gone).
    #[error("no plugin named {0} is in the chain")]
    UnknownPlugin(String),
    /// The host is stopped.
    #[error("the plugin host is stopped")]
    Stopped,
}

/// Why a plugin could not be registered at run time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegisterError {
    /// A plugin of that name is in the chain (dispose it first to replace it).
    #[error("a plugin named {0} is already in the chain")]
    DuplicateName(String),
    /// Its actor could not be spawned.
    #[error("could not start the plugin {name}: {error}")]
    Spawn {
        /// The plugin.
        name: String,
        /// Why.
        error: String,
    },
    /// The host is stopped.
    #[error("the plugin host is stopped")]
    Stopped,
    /// Its settings name a route the runtime does not serve (`Plugin::known_routes`).
    #[error("plugin {name}: {error}")]
    Routes {
        /// The plugin.
        name: String,
        /// Its refusal, naming the field.
        error: crate::plugin::ConfigError,
    },
}

/// A message to the host.
pub(crate) enum HostMsg {
    /// The chain (asked once, right after spawning).
    Chain(oneshot::Sender<Arc<PluginChain>>),
    /// A hop found the slot's incarnation dead: answer its successor (after the restart), or
    /// `None` when the plugin left the chain.
    Resolve { slot: u64, reply: oneshot::Sender<Option<ActorRef<PluginMsg>>> },
    /// A recovery of an incarnation that is already gone panicked: count it.
    StaleCrash { slot: u64, error: String, report: oneshot::Sender<u32> },
    /// Dispose a plugin.
    Dispose { name: String, reply: oneshot::Sender<Result<(), DisposeError>> },
    /// Add a plugin at the end of the chain.
    Register { plugin: Arc<dyn Plugin>, reply: oneshot::Sender<Result<(), RegisterError>> },
}

/// What the host is configured with.
pub(crate) struct HostArgs {
    pub(crate) plugins: Vec<Arc<dyn Plugin>>,
    pub(crate) intensity: RestartIntensity,
    pub(crate) jitter: Arc<dyn Jitter>,
}

/// The host actor.
pub(crate) struct HostActor {
    census: Census,
}

struct HostSlot {
    shared: Arc<Slot>,
    window: RestartWindow,
    waiters: Vec<oneshot::Sender<Option<ActorRef<PluginMsg>>>>,
}

/// The host's state.
pub(crate) struct HostState {
    chain: Arc<PluginChain>,
    slots: Vec<HostSlot>,
    origin: tokio::time::Instant,
    intensity: RestartIntensity,
    jitter: Arc<dyn Jitter>,
    /// The id of the next slot.
    next_id: u64,
    _alive: Alive,
}

impl HostActor {
    async fn spawn_incarnation(
        &self,
        myself: &ActorRef<HostMsg>,
        slot: &Arc<Slot>,
    ) -> Result<ActorRef<PluginMsg>, ActorProcessingErr> {
        let plugin = slot.plugin().ok_or("the plugin was disposed")?;
        let actor = PluginActor { slot: Arc::clone(slot), plugin, census: self.census.clone() };
        let (actor, _task) = Actor::spawn_linked(None, actor, (), myself.get_cell()).await?;
        slot.set_current(Some(actor.clone()));
        Ok(actor)
    }

    /// A plugin's incarnation failed: restart it or remove it, and report the count.
    async fn on_failure(
        &self,
        myself: &ActorRef<HostMsg>,
        state: &mut HostState,
        who: &ActorCell,
        error: &ActorProcessingErr,
    ) -> Result<(), ActorProcessingErr> {
        let Some(index) = state
            .slots
            .iter()
            .position(|s| s.shared.current().is_some_and(|a| a.get_id() == who.get_id()))
        else {
            return Ok(()); // not a live incarnation (already replaced or removed)
        };
        let crash = error.downcast_ref::<plugin_actor::RecoveryCrash>();
        let report = crash.and_then(plugin_actor::RecoveryCrash::take_report);
        let now = state.origin.elapsed();
        let slot = &mut state.slots[index];
        slot.shared.set_current(None);
        if !slot.shared.in_chain() {
            if let Some(report) = report {
                let _ = report.send(0);
            }
            wake(&mut slot.waiters, None);
            return Ok(());
        }
        let message = crash.map_or_else(|| error.to_string(), |c| c.error.clone());
        match slot.window.on_crash(now) {
            CrashDecision::Restart { restarts } => {
                tracing::warn!(plugin = %slot.shared.name, restarts, error = %message, "plugin restarted");
                let shared = Arc::clone(&slot.shared);
                let actor = self.spawn_incarnation(myself, &shared).await?;
                let slot = &mut state.slots[index];
                if let Some(report) = report {
                    let _ = report.send(restarts);
                }
                wake(&mut slot.waiters, Some(actor));
            }
            CrashDecision::Remove { restarts } => {
                tracing::error!(plugin = %slot.shared.name, restarts, error = %message, "plugin crashed beyond its restart intensity: removed from the chain");
                slot.shared.disposed.cancel();
                let shared = Arc::clone(&slot.shared);
                self.census.spawn(async move { shared.dispose().await });
                if let Some(report) = report {
                    let _ = report.send(restarts);
                }
                wake(&mut slot.waiters, None);
            }
        }
        Ok(())
    }
}

impl HostActor {
    /// Spawns `plugin`'s actor and appends its slot to the chain. The slots of plugins that left
    /// the chain are dropped from the new list (walks under way keep theirs); hops still waiting
    /// for one of them are told it is out of the chain.
    async fn register(
        &self,
        myself: &ActorRef<HostMsg>,
        state: &mut HostState,
        plugin: Arc<dyn Plugin>,
    ) -> Result<(), RegisterError> {
        let name = plugin.name().to_owned();
        if state.slots.iter().any(|s| s.shared.name == name && s.shared.in_chain()) {
            return Err(RegisterError::DuplicateName(name));
        }
        let slot =
            Arc::new(Slot::new(state.next_id, plugin, myself.clone(), Arc::clone(&state.jitter)));
        state.next_id += 1;
        if let Err(error) = self.spawn_incarnation(myself, &slot).await {
            // Never in the chain: let it go the way a disposed plugin goes.
            slot.disposed.cancel();
            self.census.spawn(async move { slot.dispose().await });
            return Err(RegisterError::Spawn { name, error: error.to_string() });
        }
        for gone in state.slots.iter_mut().filter(|s| !s.shared.in_chain()) {
            wake(&mut gone.waiters, None);
        }
        state.slots.retain(|s| s.shared.in_chain());
        state.slots.push(HostSlot {
            shared: slot,
            window: RestartWindow::new(state.intensity),
            waiters: Vec::new(),
        });
        state.chain.replace(state.slots.iter().map(|s| Arc::clone(&s.shared)).collect());
        Ok(())
    }
}

fn wake(
    waiters: &mut Vec<oneshot::Sender<Option<ActorRef<PluginMsg>>>>,
    actor: Option<ActorRef<PluginMsg>>,
) {
    for waiter in waiters.drain(..) {
        let _ = waiter.send(actor.clone());
    }
}

impl Actor for HostActor {
    type Msg = HostMsg;
    type State = HostState;
    type Arguments = HostArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: HostArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let alive = self.census.enter(ActorKind::PluginHost);
        let shared: Vec<Arc<Slot>> = args
            .plugins
            .into_iter()
            .zip(0..)
            .map(|(plugin, id)| {
                Arc::new(Slot::new(id, plugin, myself.clone(), Arc::clone(&args.jitter)))
            })
            .collect();
        let next_id = shared.len() as u64;
        let mut slots = Vec::with_capacity(shared.len());
        for slot in &shared {
            self.spawn_incarnation(&myself, slot).await?;
            slots.push(HostSlot {
                shared: Arc::clone(slot),
                window: RestartWindow::new(args.intensity),
                waiters: Vec::new(),
            });
        }
        let chain = Arc::new(PluginChain::new(shared));
        Ok(HostState {
            chain,
            slots,
            origin: tokio::time::Instant::now(),
            intensity: args.intensity,
            jitter: args.jitter,
            next_id,
            _alive: alive,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            HostMsg::Chain(reply) => {
                let _ = reply.send(Arc::clone(&state.chain));
            }
            HostMsg::Resolve { slot, reply } => {
                let Some(entry) = state.slots.iter_mut().find(|s| s.shared.id == slot) else {
                    let _ = reply.send(None);
                    return Ok(());
                };
                if !entry.shared.in_chain() {
                    let _ = reply.send(None);
                } else if let Some(actor) = entry.shared.current().filter(|a| {
                    matches!(
                        a.get_status(),
                        ractor::ActorStatus::Running | ractor::ActorStatus::Starting
                    )
                }) {
                    let _ = reply.send(Some(actor));
                } else {
                    // Its failure is on its way to us: answer after the restart.
                    entry.waiters.push(reply);
                }
            }
            HostMsg::StaleCrash { slot, error, report } => {
                let now = state.origin.elapsed();
                let Some(entry) = state.slots.iter_mut().find(|s| s.shared.id == slot) else {
                    let _ = report.send(0);
                    return Ok(());
                };
                if !entry.shared.in_chain() {
                    let _ = report.send(0);
                    return Ok(());
                }
                match entry.window.on_crash(now) {
                    CrashDecision::Restart { restarts } => {
                        tracing::warn!(plugin = %entry.shared.name, restarts, %error, "a recovery of a replaced incarnation panicked");
                        let _ = report.send(restarts);
                    }
                    CrashDecision::Remove { restarts } => {
                        tracing::error!(plugin = %entry.shared.name, restarts, %error, "plugin crashed beyond its restart intensity: removed from the chain");
                        entry.shared.disposed.cancel();
                        if let Some(actor) = entry.shared.current() {
                            actor.stop(Some("removed after too many crashes".into()));
                        }
                        let shared = Arc::clone(&entry.shared);
                        self.census.spawn(async move { shared.dispose().await });
                        let _ = report.send(restarts);
                    }
                }
            }
            HostMsg::Dispose { name, reply } => {
                let Some(entry) =
                    state.slots.iter_mut().find(|s| s.shared.name == name && s.shared.in_chain())
                else {
                    let _ = reply.send(Err(DisposeError::UnknownPlugin(name)));
                    return Ok(());
                };
                // Out of the chain for every later failure, at once.
                entry.shared.disposed.cancel();
                let actor = entry.shared.current();
                let shared = Arc::clone(&entry.shared);
                self.census.spawn(async move {
                    if let Some(actor) = actor {
                        let _ = actor.stop_and_wait(Some("disposed".into()), None).await;
                    }
                    // Recoveries of earlier incarnations too, then the plugin's own dispose
                    // (once: a no-op if the actor's stop already ran it).
                    shared.dispose().await;
                    let _ = reply.send(Ok(()));
                });
            }
            HostMsg::Register { plugin, reply } => {
                let _ = reply.send(self.register(&myself, state, plugin).await);
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ActorFailed(who, error) => {
                self.on_failure(&myself, state, &who, &error).await?;
            }
            SupervisionEvent::ActorTerminated(who, _, _) => {
                // A stopped (disposed or removed) incarnation: forget it.
                for slot in &mut state.slots {
                    if slot.shared.current().is_some_and(|a| a.get_id() == who.get_id()) {
                        slot.shared.set_current(None);
                        slot.shared.disposed.cancel();
                        wake(&mut slot.waiters, None);
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Dispose every plugin: cancel all waits first, then let each drain.
        for slot in &state.slots {
            slot.shared.disposed.cancel();
        }
        for slot in &mut state.slots {
            wake(&mut slot.waiters, None);
            if let Some(actor) = slot.shared.current() {
                let _ = actor.stop_and_wait(Some("runtime shutdown".into()), None).await;
            }
            slot.shared.set_current(None);
            slot.shared.dispose().await;
        }
        Ok(())
    }
}

/// A running plugin host: the chain, and the supervisor behind it.
#[derive(Debug, Clone)]
pub(crate) struct PluginHost {
    actor: ActorRef<HostMsg>,
    chain: Arc<PluginChain>,
}

impl std::fmt::Debug for HostMsg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HostMsg::Chain(_) => "Chain",
            HostMsg::Resolve { .. } => "Resolve",
            HostMsg::StaleCrash { .. } => "StaleCrash",
            HostMsg::Dispose { .. } => "Dispose",
            HostMsg::Register { .. } => "Register",
        })
    }
}

impl PluginHost {
    /// Starts the host and one actor per plugin, in chain order (linked under `supervisor`).
    pub(crate) async fn spawn(
        plugins: Vec<Arc<dyn Plugin>>,
        intensity: RestartIntensity,
        jitter: Arc<dyn Jitter>,
        census: Census,
        supervisor: Option<ActorCell>,
    ) -> Result<Self, HostError> {
        for (index, plugin) in plugins.iter().enumerate() {
            if plugins[..index].iter().any(|p| p.name() == plugin.name()) {
                return Err(HostError::DuplicateName { index, name: plugin.name().to_owned() });
            }
        }
        let args = HostArgs { plugins, intensity, jitter };
        let host = HostActor { census };
        let spawned = match supervisor {
            Some(supervisor) => Actor::spawn_linked(None, host, args, supervisor).await,
            None => Actor::spawn(None, host, args).await,
        };
        let (actor, _task) = spawned.map_err(|e| HostError::Spawn(e.to_string()))?;
        let (reply, chain) = oneshot::channel();
        actor.send_message(HostMsg::Chain(reply)).map_err(|e| HostError::Spawn(e.to_string()))?;
        let chain = chain.await.map_err(|e| HostError::Spawn(e.to_string()))?;
        Ok(Self { actor, chain })
    }

    /// The chain the waterfall walks.
    pub(crate) fn chain(&self) -> &Arc<PluginChain> {
        &self.chain
    }

    /// Disposes the plugin named `name`: it leaves the chain at once, its
    /// waits are aborted (those recoveries answer `Stop`), and this resolves once every recovery
    /// it was involved in has settled.
    pub(crate) async fn dispose(&self, name: &str) -> Result<(), DisposeError> {
        let (reply, done) = oneshot::channel();
        self.actor
            .send_message(HostMsg::Dispose { name: name.to_owned(), reply })
            .map_err(|_| DisposeError::Stopped)?;
        done.await.map_err(|_| DisposeError::Stopped)?
    }

    /// Adds `plugin` at the end of the chain, supervised like the others (a restart window of its
    /// own): it takes part in every failure offered after this resolves (a walk already under
    /// way keeps the chain it started with). Its name must not be in the chain (a disposed or
    /// removed plugin's name is free again).
    pub(crate) async fn register(&self, plugin: Arc<dyn Plugin>) -> Result<(), RegisterError> {
        let (reply, done) = oneshot::channel();
        self.actor
            .send_message(HostMsg::Register { plugin, reply })
            .map_err(|_| RegisterError::Stopped)?;
        done.await.map_err(|_| RegisterError::Stopped)?
    }

    /// Stops the host: disposes every plugin (waits abort, recoveries settle), then stops.
    pub(crate) async fn stop(&self) {
        let _ = self.actor.stop_and_wait(None, None).await;
    }
}
