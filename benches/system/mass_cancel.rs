//! Metric `mass_cancel_{N}k_parked_turns_vs_bare_tree`: cancelling N turns parked in a retry wait
//! by shutting the runtime down, against the same cascade through their bare actor trees.
//! Budget: at most 2 ×.
//!
//! N is 100 000 (20 000 with `--quick`; the metric's name says which).
//!
//! - **Value**: µs per turn of [`Runtime::shutdown`] over N sessions, each with a turn whose
//!   failed attempt waits in [`Parking`](crate::doubles::Parking)'s hour-long retry wait (see
//!   `parked`): from the call until it returned — every turn ended, its closing batch
//!   (`step/end` + `turn/end {aborted: disposed}` + `agent/idle`) durable, every session
//!   hibernated, the plugins disposed, no actor and no task left.
//! - **Baseline** (the floor): µs per turn of the same N sessions as bare actor trees
//!   (`bare_tree`: session, log, turn and step actors and a waiting task per turn) stopped by the
//!   same cascade — a shutdown message to each session, which stops its turn, whose `post_stop`
//!   stops its step, which cancels its wait's token and waits for the task — writing the same
//!   closing batch, then stopping its log and itself; from the first message until every session
//!   actor ended.
//!
//! The metric fails, whatever the times, unless every turn ended `aborted {cause: disposed}`
//! (in rein and in the floor), every rein log ends with that closing batch, one session's log is
//! the floor's event for event, and after the shutdown the runtime's census counts no actor and no
//! task and tokio counts no more live tasks than before.
//!
//! A round measures rein, then its floor, so both see the same load; the bench runs [`ROUNDS`]
//! rounds and reports the one whose ratio is the median.
//! For the record both sides append through a [`Stamped`] store, so the bench prints when the
//! first, the median and the last closing batch reached it, and the CPU time, allocations and
//! frees per turn while the turns ended.

use std::time::{Duration, Instant};

use rein::runtime::event::{CancelCause, Event, TurnEndReason};
use rein::runtime::session::TurnOutcome;
use rein::runtime::store::memory::MemoryStore;

use crate::Options;
use crate::bare_tree::{Answer, BareRuntime};
use crate::cpu::process_seconds;
use crate::doubles::Down;
use crate::heap::{allocations, frees};
use crate::parked::{Parked, ParkingRuntime};
use crate::report::{Budget, Metric};
use crate::sample::{median, micros};
use crate::stamped::{Stamp, Stamped};
use crate::turn_overhead::{same_events, strip};

/// The prefix of the metric's name (what a filter matches).
pub(crate) const NAME: &str = "mass_cancel";

const BUDGET: Budget = Budget::AtMost(2.0);

/// Rounds (rein, then its floor); the round with the median ratio is reported.
const ROUNDS: usize = 5;

/// How a parked turn must end.
const ABORTED: TurnEndReason = TurnEndReason::Aborted { cause: CancelCause::Disposed };

/// Measures the metric.
pub(crate) fn run(options: &Options) -> anyhow::Result<Vec<Metric>> {
    let turns: usize = if options.quick { 20_000 } else { 100_000 };
    let name = format!("{NAME}_{}k_parked_turns_vs_bare_tree", turns / 1000);
    crate::drive(async move {
        let tasks_before = tokio::runtime::Handle::current().metrics().num_alive_tasks();
        let mut rounds = Vec::with_capacity(ROUNDS);
        for round in 1..=ROUNDS {
            let side = |side| format!("{name}: round {round}, {side}");
            let (rein, rein_log) = rein(&side("rein"), turns).await?;
            let (floor, floor_log) = floor(&side("bare tree"), turns).await?;
            same_events(&rein_log, &floor_log, "bare tree")?;
            let tasks_after = tokio::runtime::Handle::current().metrics().num_alive_tasks();
            if tasks_after > tasks_before {
                anyhow::bail!("{tasks_after} tokio tasks left, {tasks_before} before");
            }
            let (rein, floor) = (per_turn(rein, turns), per_turn(floor, turns));
            eprintln!("{name}: round {round}: rein / bare tree {:.2}", rein / floor);
            rounds.push((rein, floor));
        }
        rounds.sort_by(|a, b| (a.0 / a.1).total_cmp(&(b.0 / b.1)));
        let Some(&(rein, floor)) = rounds.get(ROUNDS / 2) else { anyhow::bail!("no round ran") };
        Ok(vec![Metric::new(&name, rein, floor, BUDGET)])
    })
}

/// Rein's time to shut down `turns` parked turns, and the log of one of their sessions.
async fn rein(side: &str, turns: usize) -> anyhow::Result<(Duration, Vec<(u64, Event)>)> {
    let store = Stamped::new(MemoryStore::new());
    let mut parking = ParkingRuntime::new(store.clone()).await?;
    let setup = Instant::now();
    let parked = parking.park("c", turns).await?;
    let setup = setup.elapsed();
    store.take();

    let agents = parking.agents.clone();
    let watch = Watch::start();
    agents.shutdown().await;
    let took = watch.stop(side, turns, setup, &store.take());

    let mut ended = Vec::with_capacity(turns);
    for Parked { session, turn } in parked {
        ended.push(turn.outcome().await.map_err(|e| anyhow::anyhow!("{}: {e}", session.id())));
    }
    all_aborted(ended, side)?;
    check_logs(store.inner(), turns)?;
    let census = agents.census();
    if census.actors() != 0 || census.tasks() != 0 {
        anyhow::bail!(
            "left after shutdown: {} actors and {} tasks of the runtime",
            census.actors(),
            census.tasks()
        );
    }
    Ok((took, strip(store.inner().events("c-0"))))
}

/// The floor's time to shut down `turns` parked bare trees, and the log of one of their sessions.
async fn floor(side: &str, turns: usize) -> anyhow::Result<(Duration, Vec<(u64, Event)>)> {
    let store = Stamped::new(MemoryStore::new());
    let tree = BareRuntime::start(store.clone(), "down", "down-1", Answer::Fails(Down::failure()?))
        .await?;
    let setup = Instant::now();
    let mut sessions = Vec::with_capacity(turns);
    for i in 0..turns {
        let session = tree.session(&format!("c-{i}")).await?;
        let outcome = session.prompt("hi")?;
        sessions.push((session, outcome));
    }
    tree.parked(turns).await;
    let setup = setup.elapsed();
    store.take();

    let watch = Watch::start();
    for (session, _) in &sessions {
        session.shutdown();
    }
    let mut outcomes = Vec::with_capacity(turns);
    for (session, outcome) in sessions {
        session.ended().await?;
        outcomes.push(outcome);
    }
    let took = watch.stop(side, turns, setup, &store.take());

    let mut ended = Vec::with_capacity(turns);
    for outcome in outcomes {
        ended.push(outcome.await.map_err(anyhow::Error::from));
    }
    all_aborted(ended, side)?;
    tree.stop().await;
    Ok((took, strip(store.inner().events("c-0"))))
}

/// µs per turn.
fn per_turn(took: Duration, turns: usize) -> f64 {
    micros(took) / turns as f64
}

/// The clock, CPU time and allocations from the start of a cancellation.
struct Watch {
    start: Instant,
    cpu: f64,
    allocations: usize,
    frees: usize,
}

impl Watch {
    fn start() -> Self {
        let (cpu, allocations, frees) = (process_seconds(), allocations(), frees());
        Self { cpu, allocations, frees, start: Instant::now() }
    }

    /// The time since the start; prints what it cost and when the closing batches (`stamps`)
    /// reached the store.
    fn stop(self, side: &str, turns: usize, setup: Duration, stamps: &[Stamp]) -> Duration {
        let took = self.start.elapsed();
        let cpu = process_seconds() - self.cpu;
        let allocated = allocations() - self.allocations;
        let freed = frees() - self.frees;
        let closing: Vec<Duration> = stamps
            .iter()
            .filter(|s| s.kind == "step/end")
            .map(|s| s.at.saturating_duration_since(self.start))
            .collect();
        let ms = |d: Option<Duration>| d.map_or(f64::NAN, |d| d.as_secs_f64() * 1e3);
        eprintln!(
            "{side}: {turns} turns parked in {:.1} s; shut down in {:.0} ms ({:.2} µs per \
             turn); closing batches reached the store from {:.0} ms (first) through {:.0} ms \
             (median) to {:.0} ms (last, {} of them); per turn {:.1} µs of CPU, {} allocations and {} frees",
            setup.as_secs_f64(),
            took.as_secs_f64() * 1e3,
            per_turn(took, turns),
            ms(closing.first().copied()),
            ms(Some(median(closing.clone()))),
            ms(closing.last().copied()),
            closing.len(),
            cpu * 1e6 / turns as f64,
            allocated / turns,
            freed / turns,
        );
        took
    }
}

/// Fails unless every outcome is `aborted {cause: disposed}`.
fn all_aborted(outcomes: Vec<anyhow::Result<TurnOutcome>>, side: &str) -> anyhow::Result<()> {
    let wrong: Vec<String> = outcomes
        .into_iter()
        .filter_map(|outcome| match outcome {
            Ok(outcome) if outcome.reason == ABORTED => None,
            other => Some(format!("{other:?}")),
        })
        .collect();
    if let Some(first) = wrong.first() {
        anyhow::bail!(
            "{side}: {} turns did not end aborted by disposal, e.g. {first}",
            wrong.len()
        );
    }
    Ok(())
}

/// Every session's log ends with `step/end`, `turn/end {aborted: disposed}`, `agent/idle`.
fn check_logs(store: &MemoryStore, turns: usize) -> anyhow::Result<()> {
    for i in 0..turns {
        let id = format!("c-{i}");
        let events = store.events(&id);
        let tail: Vec<&Event> = events.iter().rev().take(3).rev().map(|e| &e.event).collect();
        let closed = matches!(
            tail.as_slice(),
            [Event::StepEnd(_), Event::TurnEnd(end), Event::AgentIdle(_)] if end.reason == ABORTED
        );
        if !closed {
            let kinds: Vec<&str> = events.iter().map(|e| e.event.kind()).collect();
            anyhow::bail!("{id}: the log does not end with its closing batch: {kinds:?}");
        }
    }
    Ok(())
}
