//! The run's view of its nodes: each node's current incarnation, whether requests may go to it
//! (it is up: not killed, not paused, not exited), and which node serves each partition (from
//! the partitions table, refreshed by [`poll_owners`]). Shared by the agents (where to send a
//! request), the fault controller (what to kill or pause) and the run (start, stop).
//!
//! Starting and stopping wait for processes: call them off the async workers
//! (`spawn_blocking`).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use tokio::sync::watch;

use super::nodes::{Heard, Process, Spawn};
use super::sql;
use crate::runtime::store::postgres::partition::partition_of;

/// How often the owners are read.
const OWNERS_EVERY: Duration = Duration::from_millis(100);

/// One node.
struct Slot {
    process: Option<Process>,
    up: bool,
    incarnations: u32,
}

/// The nodes of a run.
pub(crate) struct Members {
    spawns: Vec<Spawn>,
    slots: Vec<Mutex<Slot>>,
    /// What each node said, over its incarnations.
    heard: Vec<Arc<Mutex<Heard>>>,
    /// The node serving each partition (an index), as last read.
    owners: RwLock<Vec<Option<usize>>>,
    /// Nodes that failed: stopped on their own, or would not start again.
    failures: Mutex<Vec<String>>,
}

impl Members {
    /// The nodes `spawns` describe, none started.
    pub(crate) fn new(spawns: Vec<Spawn>) -> Self {
        let slots = spawns
            .iter()
            .map(|_| Mutex::new(Slot { process: None, up: false, incarnations: 0 }))
            .collect();
        let heard = spawns.iter().map(|_| Arc::default()).collect();
        Self { spawns, slots, heard, owners: RwLock::new(Vec::new()), failures: Mutex::default() }
    }

    fn slot(&self, node: usize) -> MutexGuard<'_, Slot> {
        self.slots[node].lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many nodes.
    pub(crate) fn len(&self) -> usize {
        self.spawns.len()
    }

    /// Node `node`'s id.
    pub(crate) fn id(&self, node: usize) -> &str {
        &self.spawns[node].id
    }

    /// Starts node `node`'s next incarnation (blocking until it listens) and marks it up.
    pub(crate) fn start(&self, node: usize) -> Result<(), String> {
        let incarnation = self.slot(node).incarnations + 1;
        let process =
            Process::start(&self.spawns[node], incarnation, Arc::clone(&self.heard[node]))?;
        let mut slot = self.slot(node);
        slot.incarnations = incarnation;
        slot.process = Some(process);
        slot.up = true;
        Ok(())
    }

    /// The nodes up now.
    pub(crate) fn up(&self) -> Vec<usize> {
        (0..self.len()).filter(|&node| self.slot(node).up).collect()
    }

    /// Node `node`'s API, when it is up.
    pub(crate) fn addr(&self, node: usize) -> Option<String> {
        let slot = self.slot(node);
        slot.process.as_ref().filter(|_| slot.up).map(|p| p.addr.clone())
    }

    /// The node serving `session` now, as last read.
    pub(crate) fn owner(&self, session: &str) -> Option<usize> {
        let owners = self.owners.read().unwrap_or_else(PoisonError::into_inner);
        if owners.is_empty() {
            return None;
        }
        owners.get(partition_of(session, owners.len() as u32) as usize).copied().flatten()
    }

    /// What the partitions table says now: the owner of each partition whose lease holds.
    pub(crate) fn set_owners(&self, partitions: u32, owned: &[(u32, String)]) {
        let mut owners = vec![None; partitions as usize];
        for (partition, id) in owned {
            if let (Some(slot), Some(node)) =
                (owners.get_mut(*partition as usize), self.spawns.iter().position(|s| &s.id == id))
            {
                *slot = Some(node);
            }
        }
        *self.owners.write().unwrap_or_else(PoisonError::into_inner) = owners;
    }

    /// How many partitions each node serves, as last read.
    pub(crate) fn shares(&self) -> (Vec<usize>, usize) {
        let owners = self.owners.read().unwrap_or_else(PoisonError::into_inner);
        let mut shares = vec![0; self.len()];
        let mut unowned = 0;
        for owner in owners.iter() {
            match owner {
                Some(node) => shares[*node] += 1,
                None => unowned += 1,
            }
        }
        (shares, unowned)
    }

    /// `kill -9` on node `node`, marked down first; waits until it is gone.
    pub(crate) fn kill(&self, node: usize) -> Result<(), String> {
        let mut process = {
            let mut slot = self.slot(node);
            slot.up = false;
            slot.process.take().ok_or("not started")?
        };
        // Waited for without the slot's lock: the agents read the slots meanwhile.
        let killed = process.signal("KILL");
        process.wait(Duration::from_secs(10));
        self.slot(node).process = Some(process);
        killed
    }

    /// `SIGSTOP` on node `node`, marked down first.
    pub(crate) fn pause(&self, node: usize) -> Result<(), String> {
        let mut slot = self.slot(node);
        slot.up = false;
        slot.process.as_ref().ok_or("not started")?.signal("STOP")
    }

    /// `SIGCONT` on node `node`, then marked up again.
    pub(crate) fn resume(&self, node: usize) -> Result<(), String> {
        let mut slot = self.slot(node);
        slot.process.as_ref().ok_or("not started")?.signal("CONT")?;
        slot.up = true;
        Ok(())
    }

    /// Its current incarnation's database name.
    pub(crate) fn writer(&self, node: usize) -> Option<String> {
        self.slot(node).process.as_ref().map(Process::writer)
    }

    /// Records a failure of node `node` (it stays down).
    pub(crate) fn failed(&self, node: usize, why: String) {
        self.slot(node).up = false;
        self.failures.lock().unwrap_or_else(PoisonError::into_inner).push(why);
    }

    /// Marks down, as failures, the nodes that were up and whose process exited on its own.
    pub(crate) fn check_exits(&self) {
        for node in 0..self.len() {
            let exited = {
                let slot = self.slot(node);
                match (&slot.process, slot.up) {
                    (Some(process), true) => {
                        process.exit_status().map(|exit| (process.writer(), exit.status))
                    }
                    _ => None,
                }
            };
            if let Some((writer, status)) = exited {
                let words = self.last_words(node);
                self.failed(node, format!("node {writer} stopped on its own: {status}{words}"));
            }
        }
    }

    fn last_words(&self, node: usize) -> String {
        self.heard[node].lock().unwrap_or_else(PoisonError::into_inner).last_words()
    }

    /// What every node said, over its incarnations.
    pub(crate) fn heard(&self) -> Vec<Heard> {
        self.heard
            .iter()
            .map(|h| h.lock().unwrap_or_else(PoisonError::into_inner).clone())
            .collect()
    }

    /// Stops every node with SIGTERM (they drain) and waits up to `limit` for each: the
    /// failures of the run (nodes that failed before, or did not stop cleanly), and the largest
    /// peak RSS of a node (read before the signal).
    pub(crate) fn stop_all(&self, limit: Duration) -> (Vec<String>, Option<u64>) {
        self.check_exits();
        let mut peak = None;
        let mut stopping = Vec::new();
        for node in 0..self.len() {
            let slot = self.slot(node);
            let Some(process) = slot.process.as_ref().filter(|p| p.exit_status().is_none()) else {
                continue;
            };
            peak = peak.max(process.peak_rss_kib());
            // A paused node would never drain.
            let _ = process.signal("CONT");
            match process.signal("TERM") {
                Ok(()) => stopping.push(node),
                Err(e) => self.failures.lock().unwrap_or_else(PoisonError::into_inner).push(e),
            }
        }
        let mut failures = Vec::new();
        for node in stopping {
            let mut slot = self.slot(node);
            let Some(process) = slot.process.as_mut() else { continue };
            let writer = process.writer();
            match process.wait(limit) {
                Some(exit) if exit.clean => {}
                Some(exit) => failures.push(format!(
                    "node {writer} did not stop cleanly on SIGTERM: {}{}",
                    exit.status,
                    self.last_words(node)
                )),
                None => {
                    process.kill();
                    failures.push(format!(
                        "node {writer} did not stop within {} s of SIGTERM (killed){}",
                        limit.as_secs(),
                        self.last_words(node)
                    ));
                }
            }
            slot.up = false;
        }
        let mut all = self.failures.lock().unwrap_or_else(PoisonError::into_inner).clone();
        all.extend(failures);
        (all, peak)
    }

    /// Kills every node still running (a run that could not go on).
    pub(crate) fn kill_all(&self) {
        for node in 0..self.len() {
            let mut slot = self.slot(node);
            slot.up = false;
            if let Some(process) = slot.process.as_mut().filter(|p| p.exit_status().is_none()) {
                let _ = process.signal("CONT");
                process.kill();
            }
        }
    }
}

/// Reads the owners into `members` every [`OWNERS_EVERY`] (and notices nodes that stopped on
/// their own), until `stop`; its own connection, connected again after the database went away.
pub(crate) async fn poll_owners(
    url: String,
    partitions: u32,
    members: Arc<Members>,
    mut stop: watch::Receiver<bool>,
) {
    let mut client = None;
    loop {
        if client.as_ref().is_none_or(tokio_postgres::Client::is_closed) {
            client = sql::connect(&url).await.ok();
        }
        if let Some(connected) = &client
            && let Ok(owned) = sql::owners(connected).await
        {
            members.set_owners(partitions, &owned);
        }
        members.check_exits();
        tokio::select! {
            () = tokio::time::sleep(OWNERS_EVERY) => {}
            _ = stop.changed() => return,
        }
    }
}
