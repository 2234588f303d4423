//! `rein node`: one node of a cluster of rein processes sharing one PostgreSQL database (SPEC
//! §12) — the console and its API on a port of its own, serving any session of the cluster.
//!
//! It is `rein console` on a runtime that is a [`Node`](rein_runtime::cluster::Node): the node
//! takes its fair share of the cluster's partitions (renewing its leases every third of
//! `--lease-ms`), resumes the open turns of the partitions it takes over, forwards what it is
//! asked for a session another node serves and serves what the others forward to it. Every
//! change of what it holds is a line on stderr (what the tests and an operator wait on). The
//! first SIGTERM or Ctrl-C drains it: every session it serves stops without writing, every
//! partition is given back at once (their turns resume on the nodes that take them, a retry wait
//! at its deadline), then it exits 0.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use rein_cli::stress::StressConfig;
use rein_runtime::cluster::NodeOptions;

use super::agent::ProviderArgs;
use super::console::{self, Served};

/// What `rein node --help` says after the options.
pub(crate) const NODE_HELP: &str = "\
What it does:
  Joins the cluster of rein nodes on the PostgreSQL database of --store (its tables are created
  or brought up to date; the first node fixes the number of partitions, --partitions, default
  256). Sessions belong to partitions (a fixed hash of the session id); every node takes a fair
  share of the partitions (the live nodes share them out) on leases of --lease-ms, renewed every
  third of it, and every append checks its partition's epoch in its own transaction: a node that
  lost a lease (paused, cut off from the database) writes nothing more. A node that takes a
  partition over resumes its sessions' open turns (a retry wait at its original deadline, with
  the same retryId). Any node serves any session: what it is asked for a session another node
  serves (in its console, or through its API) is forwarded there through the database, and the
  turn's events come back. Settings saved on any node are in force on all.

The runtime:
  The one `rein console` builds (providers, flags, rein.toml), on the cluster's store.

Output:
  stdout   `rein node NODE: http://127.0.0.1:PORT/` once it listens (--port 0 picks a free port).
  stderr   what it holds, as it changes: `took N partitions (M taken over from NODE)`,
           `resumed N turns`,
           `lost N partitions (taken over|lease ran out|fenced)`, `gave back N partitions`,
           `database unreachable: ...`; then `drained` and `stopped`.
  SIGTERM or Ctrl-C drains it (see above) and exits 0; a second one exits at once (130).

Exit status:
  0  drained and stopped
  1  it could not listen, or the runtime failed
  2  bad input, nothing written: a usage error, --store not a PostgreSQL URL, a database that is
     down or refuses the password, --partitions other than the cluster's";

/// Arguments of `rein node`.
#[derive(Debug, clap::Args)]
pub(crate) struct NodeArgs {
    /// The cluster's database: postgres://USER@HOST[:PORT]/DB (the password from the URL or
    /// PGPASSWORD, never printed).
    #[arg(long, value_name = "URL")]
    store: PathBuf,
    /// The node's id among the live nodes (letters, digits, '-', '_', '.') [default: node-PID].
    #[arg(long, value_name = "ID")]
    node_id: Option<String>,
    /// The port of its console and API on 127.0.0.1 (0: any free port, printed) [default: the
    /// configuration file's `console.port`, else 4180].
    #[arg(long, value_name = "PORT")]
    port: Option<u16>,
    /// The number of partitions, when this node is the cluster's first (else it must be the
    /// cluster's) [default: 256].
    #[arg(long, value_name = "N")]
    partitions: Option<u32>,
    /// How long a lease lasts without renewal, in ms (at least 100): a killed node's turns resume
    /// elsewhere about this long after it died.
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    lease_ms: u64,
    #[command(flatten)]
    provider: ProviderArgs,
    /// For `rein stress --nodes` (hidden): the run's workload as JSON (`rein_cli::stress::
    /// StressConfig`); the node's runtime is then the stress run's — the simulated provider of
    /// its pace and faults, its chain, its tool — instead of `rein console`'s.
    #[arg(long, value_name = "JSON", hide = true, conflicts_with_all = ["provider", "model", "seed", "fallback"])]
    stress_workload: Option<String>,
}

/// Runs `rein node`.
pub(crate) fn run(args: &NodeArgs) -> ExitCode {
    let mut options = NodeOptions::new(
        args.node_id.clone().unwrap_or_else(|| format!("node-{}", std::process::id())),
    );
    options.partitions = args.partitions;
    options.lease = Duration::from_millis(args.lease_ms);
    let stress = match args.stress_workload.as_deref().map(workload).transpose() {
        Ok(stress) => stress,
        Err(error) => {
            eprintln!("error: --stress-workload: {error}");
            return ExitCode::from(2);
        }
    };
    console::run_served(Served {
        port: args.port,
        provider: &args.provider,
        store: Some(args.store.as_path()),
        read_only: false,
        node: Some(options),
        stress,
    })
}

/// The stress workload of `--stress-workload`, checked.
fn workload(json: &str) -> Result<StressConfig, String> {
    let config: StressConfig = serde_json::from_str(json).map_err(|e| e.to_string())?;
    config.check()?;
    Ok(config)
}
