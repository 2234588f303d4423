//! The SQLite store's flusher: a second OS thread that makes commits durable and answers their
//! callers (only for [`Durability::Disk`](crate::store::Durability::Disk)).
//!
//! The writer hands over the replies of each committed transaction; the flusher takes every
//! hand-over that is waiting, calls the [`Syncer`] once on the `-wal` file, and answers them all.
//!
//! # Why the sync runs beside the writer, not inside it
//!
//! A sync of the WAL covers every frame written before it, so nothing requires the writer to
//! stand still while it runs. Handing the sync to its own thread lets the writer already build
//! the next transaction from the appends that queued meanwhile: the disk's flush latency and the
//! writer's CPU work overlap instead of adding up, and syncs that find several commits waiting
//! cover them all at once. No caller hears back before a sync that started after its commit has
//! returned, so an acknowledged append is on the disk exactly as if the writer had synced it
//! itself.
//!
//! A checkpoint (run by the writer) may copy committed frames into the database and later let the
//! WAL restart over them while their sync is still pending. That is safe: with
//! `synchronous=NORMAL`, SQLite syncs the WAL before a checkpoint copies it and the database
//! after, so those frames are durable in the database file by then.

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::Receiver;

use tokio::sync::oneshot;

use crate::store::StoreError;
use crate::store::sync::Syncer;

/// The callers of one committed transaction, waiting for it to be durable.
pub(super) type Waiting = Vec<oneshot::Sender<Result<(), StoreError>>>;

/// What the flusher thread owns.
pub(super) struct Flusher {
    /// The `-wal` file.
    pub(super) wal: File,
    /// Its path, for errors.
    pub(super) wal_path: PathBuf,
    pub(super) syncer: Arc<dyn Syncer>,
}

impl Flusher {
    /// Runs until the writer hangs up, one sync per round of waiting commits.
    pub(super) fn run(self, commits: &Receiver<Waiting>) {
        while let Ok(mut waiting) = commits.recv() {
            while let Ok(more) = commits.try_recv() {
                waiting.extend(more);
            }
            let synced = self.syncer.sync(&self.wal).map_err(|e| e.to_string());
            for reply in waiting {
                let outcome = synced.clone().map_err(|message| StoreError::Io {
                    path: self.wal_path.display().to_string(),
                    source: std::io::Error::other(message),
                });
                // A caller that stopped waiting does not mind.
                let _ = reply.send(outcome);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Mutex, mpsc};

    use super::*;

    /// Counts syncs; the first one waits for `release`.
    struct Gate {
        calls: AtomicU64,
        entered: mpsc::Sender<()>,
        release: Mutex<mpsc::Receiver<()>>,
        fail: bool,
    }

    impl Syncer for Gate {
        fn sync(&self, _: &File) -> std::io::Result<()> {
            if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
                let _ = self.entered.send(());
                let _ = self.release.lock().unwrap().recv();
            }
            if self.fail { Err(std::io::Error::other("EIO")) } else { Ok(()) }
        }
    }

    fn commit(n: usize) -> (Waiting, Vec<oneshot::Receiver<Result<(), StoreError>>>) {
        (0..n).map(|_| oneshot::channel()).unzip()
    }

    /// A running flusher whose first sync is held until `release`.
    struct Held {
        gate: Arc<Gate>,
        commits: mpsc::Sender<Waiting>,
        entered: mpsc::Receiver<()>,
        release: mpsc::Sender<()>,
        thread: std::thread::JoinHandle<()>,
    }

    fn held(fail: bool) -> Held {
        let (entered_tx, entered) = mpsc::channel();
        let (release, release_rx) = mpsc::channel();
        let gate = Arc::new(Gate {
            calls: AtomicU64::new(0),
            entered: entered_tx,
            release: Mutex::new(release_rx),
            fail,
        });
        let flusher = Flusher {
            wal: tempfile::tempfile().unwrap(),
            wal_path: "/d/events.db-wal".into(),
            syncer: gate.clone(),
        };
        let (commits, rx) = mpsc::channel();
        let thread = std::thread::spawn(move || flusher.run(&rx));
        Held { gate, commits, entered, release, thread }
    }

    #[test]
    fn commits_that_wait_during_a_sync_share_the_next_one() {
        let Held { gate, commits, entered, release, thread } = held(false);
        let (first, mut first_rx) = commit(1);
        commits.send(first).unwrap();
        entered.recv().unwrap();
        // Two more commits arrive while the first sync runs; nobody is answered yet.
        let (second, second_rx) = commit(3);
        let (third, third_rx) = commit(2);
        commits.send(second).unwrap();
        commits.send(third).unwrap();
        assert!(first_rx[0].try_recv().is_err(), "answered before its sync returned");
        release.send(()).unwrap();
        drop(commits);
        thread.join().unwrap();

        assert_eq!(
            gate.calls.load(Ordering::SeqCst),
            2,
            "one sync for the first, one for the rest"
        );
        for reply in first_rx.into_iter().chain(second_rx).chain(third_rx) {
            assert!(matches!(reply.blocking_recv(), Ok(Ok(()))));
        }
    }

    #[test]
    fn a_failed_sync_fails_every_caller_it_covered() {
        let Held { commits, entered, release, thread, .. } = held(true);
        let (first, first_rx) = commit(2);
        commits.send(first).unwrap();
        entered.recv().unwrap();
        release.send(()).unwrap();
        drop(commits);
        thread.join().unwrap();
        for reply in first_rx {
            let err = reply.blocking_recv().unwrap().unwrap_err();
            assert_eq!(err.to_string(), "/d/events.db-wal: EIO");
        }
    }
}
