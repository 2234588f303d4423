//! Metric `stress_1k_agents_postgres_vs_sqlite_turns_per_s`: the `rein stress` engine
//! (`rein_cli::stress`) at 1,000 agents, 3 turns each, on a [`PostgresStore`] at
//! [`Durability::Disk`] (a throwaway cluster from `rein-testkit`), against the same workload on a
//! [`SqliteStore`] at `Disk` in the same run — what moving a deployment's sessions from one
//! machine's SQLite file to a shared database costs in turns per second. No budget: printed for
//! the record, and failing only if a run breaks its own checks. Without PostgreSQL installed the
//! metric is skipped with a note.
//!
//! Each side gets a fresh store (a new database; a new directory), so neither continues the
//! other's sessions; the two run back to back in this process.

use std::sync::Arc;

use rein::runtime::store::postgres::PostgresStore;
use rein::runtime::store::sqlite::SqliteStore;
use rein::runtime::store::{Durability, SessionStore};

use crate::Options;
use crate::report::Metric;

/// The metric's name (what the bench's filter matches).
pub(crate) const NAME: &str = "stress_1k_agents_postgres_vs_sqlite_turns_per_s";

const AGENTS: usize = 1_000;
const TURNS: u32 = 3;

/// Measures the metric.
pub(crate) fn run(_options: &Options) -> anyhow::Result<Vec<Metric>> {
    let Some(cluster) = rein_testkit::PgCluster::start() else {
        eprintln!("{NAME}: skipped (no PostgreSQL)");
        return Ok(Vec::new());
    };
    let dir = crate::temp_dir()?;
    let sqlite_path = dir.path().join("stress.db");
    let sqlite = crate::drive(async move {
        let store = SqliteStore::open(sqlite_path, Durability::Disk)?;
        turns_per_s(Arc::new(store)).await
    })?;
    let url = cluster.create_database("stress");
    let postgres = crate::drive(async move {
        let store = PostgresStore::open(&url, Durability::Disk).await?;
        turns_per_s(Arc::new(store)).await
    })?;
    eprintln!(
        "{NAME}: SQLite {sqlite:.0} turns/s, PostgreSQL {postgres:.0} turns/s: ratio {:.2}",
        postgres / sqlite
    );
    Ok(vec![Metric::record(NAME, postgres, sqlite)])
}

/// Runs the workload on `store`: turns ended per second, once every check passed.
async fn turns_per_s(store: Arc<dyn SessionStore>) -> anyhow::Result<f64> {
    let config = crate::stress::config(AGENTS, TURNS);
    let summary =
        rein_cli::stress::run(&config, store, None).await.map_err(|e| anyhow::anyhow!(e))?.settle();
    let failures = summary.failures();
    anyhow::ensure!(failures.is_empty(), "the stress run broke its checks: {failures:?}");
    let seconds = summary.elapsed_ms as f64 / 1000.0;
    Ok(summary.tally.turns_ended() as f64 / seconds.max(1e-3))
}
