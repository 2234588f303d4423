//! Metric `mass_cancel_{N}k_parked_turns`: the time per turn to cancel N turns parked in a
//! plugin's wait, until every one of them has ended. Budget: at most 3 µs per turn.
//!
//! N is 100 000 (20 000 with `--quick`; the metric's name says which). N sessions each run a
//! turn whose failed attempt parks in [`Parking`]'s wait (see `parked`). Then the clock starts
//! and [`Runtime::shutdown`] cancels them all at once (the root cancellation scope, cause
//! `disposed`); the value is the time until every turn's handle has resolved — its `turn/end`
//! written — divided by N. The time until `shutdown` returned (sessions idle and hibernated,
//! plugins disposed, no actor or task left) is printed beside it.
//!
//! The metric fails, whatever the time, unless every turn ended `aborted {cause: disposed}`,
//! every log ends with that `turn/end` followed only by `agent/idle`, and after the shutdown the
//! runtime's census counts no actor and no task and tokio counts no more live tasks than before
//! the runtime was built.
//!
//! The budget is absolute, so the baseline is the unit: 1 µs, and the ratio is the value in µs.
//! For the record, the least any cancellation of a parked turn can cost on this machine — a bare
//! task woken and appending, a bare actor messaged and stopped (`cancel_floor`) — is printed
//! beside it.

use std::sync::Arc;
use std::time::Instant;

use rein::runtime::event::{CancelCause, Event, TurnEndReason};
use rein::runtime::store::memory::MemoryStore;

use crate::Options;
use crate::cancel_floor;
use crate::cpu::process_seconds;
use crate::heap::allocations;
use crate::parked::{Parked, ParkingRuntime};
use crate::report::{Budget, Metric};

/// The prefix of the metric's name (what a filter matches).
pub(crate) const NAME: &str = "mass_cancel";

const BUDGET: Budget = Budget::AtMost(3.0);

/// Measures the metric.
pub(crate) fn run(options: &Options) -> anyhow::Result<Metric> {
    let turns: usize = if options.quick { 20_000 } else { 100_000 };
    let name = format!("{NAME}_{}k_parked_turns_us_per_turn", turns / 1000);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        let tasks_before = tokio::runtime::Handle::current().metrics().num_alive_tasks();
        let store = MemoryStore::new();
        let mut parking = ParkingRuntime::new(Arc::new(store.clone())).await?;
        let setup = Instant::now();
        let parked = parking.park("c", turns).await?;
        eprintln!("{name}: {turns} turns parked in {:.1} s", setup.elapsed().as_secs_f64());

        let agents = parking.agents.clone();
        let (cpu_before, allocations_before) = (process_seconds(), allocations());
        let start = Instant::now();
        let shutdown = tokio::spawn(async move { agents.shutdown().await });
        let mut wrong = Vec::new();
        for Parked { session, turn } in parked {
            match turn.outcome().await {
                Ok(outcome)
                    if outcome.reason
                        == TurnEndReason::Aborted { cause: CancelCause::Disposed } => {}
                other => wrong.push(format!("{}: {other:?}", session.id())),
            }
        }
        let ended = start.elapsed();
        let cpu = process_seconds() - cpu_before;
        let allocated = allocations() - allocations_before;
        eprintln!(
            "{name}: while they ended: {:.0} µs of CPU and {} allocations per turn",
            cpu * 1e6 / turns as f64,
            allocated / turns
        );
        shutdown.await?;
        let down = start.elapsed();
        let per_turn = ended.as_secs_f64() * 1e6 / turns as f64;
        eprintln!(
            "{name}: all turns ended after {:.0} ms ({per_turn:.2} µs per turn); shutdown \
             returned after {:.0} ms ({:.2} µs per turn)",
            ended.as_secs_f64() * 1e3,
            down.as_secs_f64() * 1e3,
            down.as_secs_f64() * 1e6 / turns as f64,
        );
        if let Some(first) = wrong.first() {
            anyhow::bail!("{} turns did not end aborted by disposal, e.g. {first}", wrong.len());
        }
        check_logs(&store, turns)?;
        let census = parking.agents.census();
        let tasks_after = tokio::runtime::Handle::current().metrics().num_alive_tasks();
        if census.actors() != 0 || census.tasks() != 0 || tasks_after > tasks_before {
            anyhow::bail!(
                "left after shutdown: {} actors and {} tasks of the runtime, {} tokio tasks \
                 (before: {tasks_before})",
                census.actors(),
                census.tasks(),
                tasks_after
            );
        }
        let floor = cancel_floor::measure(turns).await?;
        eprintln!(
            "{name}: the floor on this machine (no rein code; see cancel_floor.rs): {:.2} µs per \
             parked task cancelled and appending + {:.2} µs per actor messaged and stopped = \
             {:.2} µs per turn, {:.1}× below the value",
            floor.task_us,
            floor.actor_us,
            floor.task_us + floor.actor_us,
            per_turn / (floor.task_us + floor.actor_us),
        );
        Ok(Metric::new(&name, per_turn, 1.0, BUDGET))
    })
}

/// Every session's log ends with `turn/end {aborted: disposed}`, then only `agent/idle`.
fn check_logs(store: &MemoryStore, turns: usize) -> anyhow::Result<()> {
    let aborted = TurnEndReason::Aborted { cause: CancelCause::Disposed };
    for i in 0..turns {
        let id = format!("c-{i}");
        let events = store.events(&id);
        let tail: Vec<&Event> = events
            .iter()
            .rev()
            .take_while(|e| !matches!(e.event, Event::TurnEnd(_)))
            .map(|e| &e.event)
            .collect();
        let end = events.iter().rev().find_map(|e| match &e.event {
            Event::TurnEnd(end) => Some(end),
            _ => None,
        });
        let tail_ok = tail.iter().all(|e| matches!(e, Event::AgentIdle(_)));
        if !tail_ok || end.map(|end| &end.reason) != Some(&aborted) {
            let kinds: Vec<&str> = events.iter().map(|e| e.event.kind()).collect();
            anyhow::bail!("{id}: the log does not end with turn/end aborted (disposed): {kinds:?}");
        }
    }
    Ok(())
}
