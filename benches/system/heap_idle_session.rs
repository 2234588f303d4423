//! Metric `heap_per_idle_session_kib`: the heap a session holds once it has no running turn
//! (it hibernates: no actors). Budget: at most 1 KiB.
//!
//! N sessions are opened and each runs one turn with a provider of no latency; then the bench
//! waits until every one of them has hibernated (no session awake, the census back to the
//! runtime's own actors: every session actor's state dropped). The value is the growth of the live heap over all that, divided by N. The
//! caller's `Session` handles, kept, count too.
//!
//! As for parked turns, the logs are in a [`JsonlStore`] (on the disk, not on the heap) and a
//! warm-up of [`WARM`] sessions first fills what is sized once.
//!
//! The budget is absolute, so the baseline is the unit: 1 KiB, and the ratio is the value in KiB.

use std::sync::Arc;
use std::time::Duration;

use rein::runtime::event::TurnEndReason;
use rein::runtime::runtime::Runtime;
use rein::runtime::session::Session;
use rein::runtime::store::Durability;
use rein::runtime::store::jsonl::JsonlStore;

use crate::Options;
use crate::doubles::Instant;
use crate::heap::live_bytes;
use crate::report::{Budget, Metric};

/// The metric's name.
pub(crate) const NAME: &str = "heap_per_idle_session_kib";

const BUDGET: Budget = Budget::AtMost(1.0);

/// Sessions before the measurement starts.
const WARM: usize = 300;

/// Measures the metric.
pub(crate) fn run(options: &Options) -> anyhow::Result<Metric> {
    let sessions: usize = if options.quick { 5_000 } else { 20_000 };
    let dir = crate::temp_dir()?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        let store = JsonlStore::open(dir.path(), Durability::Os)?;
        let agents = Runtime::builder()
            .store(Arc::new(store))
            .route("instant", Arc::new(Instant), "instant-1", None)
            .build()
            .await?;
        let own = agents.census().actors();
        let mut warm = Vec::with_capacity(WARM);
        open_idle(&agents, "warm", WARM, &mut warm).await?;
        hibernated(&agents, own).await;
        let mut idle = Vec::with_capacity(sessions);
        let before = live_bytes();
        open_idle(&agents, "idle", sessions, &mut idle).await?;
        hibernated(&agents, own).await;
        let grown = live_bytes() - before;
        let per_session = grown as f64 / sessions as f64;
        eprintln!(
            "{NAME}: {sessions} idle sessions hold {:.1} KiB: {per_session:.0} B per session",
            grown as f64 / 1024.0
        );
        agents.shutdown().await;
        Ok(Metric::new(NAME, per_session / 1024.0, 1.0, BUDGET))
    })
}

/// Opens `n` sessions named `{prefix}-{i}` into `into`, each running one turn to its end.
async fn open_idle(
    agents: &Runtime,
    prefix: &str,
    n: usize,
    into: &mut Vec<Session>,
) -> anyhow::Result<()> {
    for i in 0..n {
        let session = agents.session(&format!("{prefix}-{i}")).await?;
        let outcome = session.prompt("hi").await?.outcome().await?;
        if outcome.reason != TurnEndReason::Completed {
            anyhow::bail!("{}: the turn ended {:?}", session.id(), outcome.reason);
        }
        into.push(session);
    }
    Ok(())
}

/// Waits until no session is awake and the census counts only the runtime's `own` actors. (A
/// session actor leaves the directory before its state is dropped, so the census is what says
/// it is gone; nothing signals that, hence the short sleeps.)
async fn hibernated(agents: &Runtime, own: usize) {
    while agents.awake_sessions() != 0 || agents.census().actors() != own {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}
