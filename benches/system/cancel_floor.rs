//! What the mass-cancel budget is up against on this machine: the least work one parked turn's
//! cancellation can be, measured with bare tokio and ractor, no rein code at all.
//!
//! Cancelling a turn parked in a retry wait means, at the very least: a task parked on a child
//! cancellation token wakes and appends its `turn/end` to a store; and the session's actor —
//! an actor per session is the design — takes one message and stops. These two floors are
//! measured here on the same runtime shape as the metric (multi-threaded, one worker per core),
//! over the same number of turns, all at once:
//!
//! - **task floor**: N tasks parked on child tokens of one root; the root is cancelled; each task
//!   appends one event to its session's log (which exists already) in a [`MemoryStore`] and
//!   ends. Time until all ended, per task.
//! - **actor floor**: N bare ractor actors; each is sent one message, on which it stops. Time
//!   until all stopped, per actor.
//!
//! Their sum is printed next to the metric: a cancellation can not cost less than it, whatever
//! the runtime does, so a budget below it is out of reach on the machine the bench runs on.

use std::time::Instant;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use rein::runtime::event::{AgentIdle, Envelope, Event};
use rein::runtime::store::SessionStore;
use rein::runtime::store::memory::MemoryStore;
use tokio_util::sync::CancellationToken;

/// The two floors, µs per turn.
pub(crate) struct Floor {
    pub(crate) task_us: f64,
    pub(crate) actor_us: f64,
}

/// Measures both floors over `n` turns (on the current multi-threaded runtime).
pub(crate) async fn measure(n: usize) -> anyhow::Result<Floor> {
    Ok(Floor { task_us: tasks(n).await?, actor_us: actors(n).await? })
}

async fn tasks(n: usize) -> anyhow::Result<f64> {
    let store = MemoryStore::new();
    let root = CancellationToken::new();
    let mut parked = Vec::with_capacity(n);
    let idle = |seq| [Envelope { seq, time: 0, event: Event::AgentIdle(AgentIdle {}) }];
    for i in 0..n {
        // The session's log exists already, as a parked turn's does.
        let session = format!("floor-{i}");
        store.append(&session, &idle(0)).await?;
        let (token, store) = (root.child_token(), store.clone());
        parked.push(tokio::spawn(async move {
            token.cancelled().await;
            store.append(&session, &idle(1)).await
        }));
    }
    tokio::task::yield_now().await;
    let start = Instant::now();
    root.cancel();
    for task in parked {
        task.await??;
    }
    Ok(start.elapsed().as_secs_f64() * 1e6 / n as f64)
}

/// An actor that stops on its first message.
struct StopOnMessage;

impl Actor for StopOnMessage {
    type Msg = ();
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<()>, (): ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<()>,
        (): (),
        (): &mut (),
    ) -> Result<(), ActorProcessingErr> {
        myself.stop(None);
        Ok(())
    }
}

async fn actors(n: usize) -> anyhow::Result<f64> {
    let mut spawned = Vec::with_capacity(n);
    for _ in 0..n {
        spawned.push(Actor::spawn(None, StopOnMessage, ()).await?);
    }
    let start = Instant::now();
    for (actor, _) in &spawned {
        actor.send_message(())?;
    }
    for (_, ended) in spawned {
        ended.await?;
    }
    Ok(start.elapsed().as_secs_f64() * 1e6 / n as f64)
}
