//! The faults of `rein stress --nodes`: set off by the turns' ends ([`Draws`], from the seed)
//! and made one at a time by the [`Controller`] — `kill -9` a node and start it again, stop a
//! node (`SIGSTOP`) past its lease and continue it, restart the database — each recorded with
//! what the faulted node held, for the takeover times the run reports.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, watch};
use tokio_postgres::Client;

use super::choice::{self, Fault, FaultRates};
use super::members::Members;
use super::sql;
use crate::stress::plan::StressRng;

/// The draws the turns' ends make (one stream of the seed, whichever agent's turn it was).
pub(crate) struct Draws {
    rng: Mutex<StressRng>,
    rates: FaultRates,
    faults: mpsc::UnboundedSender<Fault>,
}

impl Draws {
    /// Draws from `seed`'s fault stream at `rates`, sending what fires to `faults`.
    pub(crate) fn new(seed: u64, rates: FaultRates, faults: mpsc::UnboundedSender<Fault>) -> Self {
        Self { rng: Mutex::new(choice::fault_rng(seed)), rates, faults }
    }

    /// A turn ended: the faults it sets off go to the controller.
    pub(crate) fn turn_ended(&self) {
        let fired = {
            let mut rng = self.rng.lock().unwrap_or_else(PoisonError::into_inner);
            choice::after_turn(&mut *rng, &self.rates)
        };
        for fault in fired {
            let _ = self.faults.send(fault);
        }
    }
}

/// A fault that took a node away.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NodeFault {
    /// What it was.
    pub(crate) fault: Fault,
    /// The node.
    pub(crate) node: String,
    /// When (ms since the epoch).
    pub(crate) at_ms: u64,
    /// The partitions it held then.
    pub(crate) partitions: BTreeSet<u32>,
    /// When the last of its leases ran out (ms since the epoch, database clock).
    pub(crate) expiry_ms: Option<u64>,
}

/// What the controller did.
#[derive(Debug, Default)]
pub(crate) struct Done {
    /// The kills and pauses.
    pub(crate) node_faults: Vec<NodeFault>,
    /// Database restarts.
    pub(crate) database_restarts: u64,
    /// Faults set off and not run (still waiting at the end, or no node to hit).
    pub(crate) not_run: u64,
    /// A database restart that failed, in words (a node that would not start again is a
    /// member's failure).
    pub(crate) failures: Vec<String>,
}

/// Makes the faults, one at a time.
pub(crate) struct Controller {
    /// The nodes.
    pub(crate) members: Arc<Members>,
    /// The database.
    pub(crate) url: String,
    /// The nodes' lease.
    pub(crate) lease: Duration,
    /// Which node, how long: the controller's own stream of the seed.
    pub(crate) rng: StressRng,
    /// `--pg-restart`: the command that restarts the database.
    pub(crate) restart_database: Option<String>,
}

impl Controller {
    /// Makes the faults `faults` asks for until `stop` turns true (the fault under way is
    /// finished), then counts those left waiting.
    pub(crate) async fn run(
        mut self,
        mut faults: mpsc::UnboundedReceiver<Fault>,
        mut stop: watch::Receiver<bool>,
    ) -> Done {
        let mut done = Done::default();
        let mut client: Option<Client> = None;
        loop {
            if *stop.borrow() {
                break;
            }
            tokio::select! {
                biased;
                changed = stop.changed() => if changed.is_err() { break },
                fault = faults.recv() => match fault {
                    Some(fault) => self.make(fault, &mut client, &mut done).await,
                    None => break,
                },
            }
        }
        while faults.try_recv().is_ok() {
            done.not_run += 1;
        }
        done
    }

    async fn make(&mut self, fault: Fault, client: &mut Option<Client>, done: &mut Done) {
        if fault == Fault::RestartDatabase {
            return self.restart_database(done).await;
        }
        let Some(node) = choice::victim(&mut self.rng, &self.members.up()) else {
            done.not_run += 1;
            return;
        };
        let away = choice::away(&mut self.rng, fault, self.lease);
        let id = self.members.id(node).to_owned();
        let writer = self.members.writer(node).unwrap_or_else(|| id.clone());
        let at_ms = now_ms();
        let members = Arc::clone(&self.members);
        let hit = tokio::task::spawn_blocking(move || match fault {
            Fault::Kill => members.kill(node),
            _ => members.pause(node),
        })
        .await
        .unwrap_or_else(|e| Err(e.to_string()));
        if let Err(error) = hit {
            tracing::warn!(node = %writer, %error, "a fault could not be made");
            done.not_run += 1;
            return;
        }
        // Its leases as it left them: nothing renews them any more.
        let (partitions, expiry_ms) = held_by(&self.url, client, &id).await;
        tokio::time::sleep(away).await;
        let members = Arc::clone(&self.members);
        let back = tokio::task::spawn_blocking(move || match fault {
            Fault::Kill => members.start(node),
            _ => members.resume(node),
        })
        .await
        .unwrap_or_else(|e| Err(e.to_string()));
        let what = match fault {
            Fault::Kill => "killed (kill -9), started again",
            _ => "paused (SIGSTOP), continued",
        };
        match back {
            Ok(()) => eprintln!("stress: node {writer} {what} after {} ms", away.as_millis()),
            Err(error) => {
                self.members.failed(node, format!("node {id} did not come back: {error}"))
            }
        }
        done.node_faults.push(NodeFault { fault, node: id, at_ms, partitions, expiry_ms });
    }

    async fn restart_database(&mut self, done: &mut Done) {
        let Some(command) = self.restart_database.clone() else {
            done.not_run += 1;
            return;
        };
        let ran = tokio::task::spawn_blocking(move || run_command(&command, RESTART_WITHIN))
            .await
            .unwrap_or_else(|e| Err(e.to_string()));
        match ran {
            Ok(()) => {
                done.database_restarts += 1;
                eprintln!("stress: the database restarted (--pg-restart)");
            }
            Err(error) => done.failures.push(format!("--pg-restart: {error}")),
        }
    }
}

/// How long `--pg-restart` may take.
const RESTART_WITHIN: Duration = Duration::from_secs(120);

/// Runs `command` with `sh -c`, its output nowhere (a server it starts would keep a pipe open
/// for ever), within `limit`.
fn run_command(command: &str, limit: Duration) -> Result<(), String> {
    let mut child = std::process::Command::new("sh")
        .args(["-c", command])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run it: {e}"))?;
    let deadline = std::time::Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => return Err(format!("it failed: {status}")),
            Ok(None) if std::time::Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("it did not return within {} ms", limit.as_millis()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("cannot wait for it: {e}")),
        }
    }
}

/// What `node` holds, read on `client` (connected again if it broke); nothing when the
/// database does not answer.
async fn held_by(
    url: &str,
    client: &mut Option<Client>,
    node: &str,
) -> (BTreeSet<u32>, Option<u64>) {
    if client.as_ref().is_none_or(Client::is_closed) {
        *client = sql::connect(url).await.ok();
    }
    match client.as_ref() {
        Some(client) => sql::held_by(client, node).await.unwrap_or_default(),
        None => (BTreeSet::new(), None),
    }
}

/// Now, in ms since the epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restart_command_succeeds_fails_or_runs_out_of_time() {
        let limit = Duration::from_secs(5);
        assert_eq!(run_command("true", limit), Ok(()));
        assert_eq!(run_command("exit 3", limit), Err("it failed: exit status: 3".into()));
        let started = std::time::Instant::now();
        // A server it starts keeps running, holding what it inherited: the command returns all
        // the same.
        assert_eq!(run_command("sleep 3 & echo started", limit), Ok(()));
        assert!(started.elapsed() < limit, "{:?}", started.elapsed());
        assert_eq!(
            run_command("sleep 30", Duration::from_millis(200)),
            Err("it did not return within 200 ms".into())
        );
    }
}
