//! The writer thread of a JSONL store at [`Durability::Os`](crate::store::Durability::Os): one
//! thread per store that runs its appends in the order they were queued, each caller waiting on
//! a `oneshot` for its answer.
//!
//! An append at `Os` is one `write` to the page cache, a few microseconds. Sent to tokio's
//! blocking pool, each one costs more than that in thread hand-offs: a pool thread woken for it,
//! and, with thousands of sessions appending at once, a pool grown to hundreds of threads taking
//! turns on the cores. This thread stays awake while appends are queued and takes them one after
//! another, with no wake-up per append; no tokio worker ever blocks on a file.
//!
//! Dropping the writer closes its queue and joins the thread once it ran what was queued, so no
//! thread outlives the store. A job that panics loses only its own answer (its caller gets an
//! error); the thread goes on.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use crate::store::StoreError;

type Job = Box<dyn FnOnce() + Send>;

/// The thread and its queue.
pub(super) struct Writer {
    dir: PathBuf,
    queue: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl Writer {
    /// Starts the thread of the store over `dir`.
    pub(super) fn start(dir: &Path) -> Result<Self, StoreError> {
        let (queue, jobs) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("rein-jsonl-writer".into())
            .spawn(move || {
                while let Ok(job) = jobs.recv() {
                    // A panicking job drops its reply: its caller gets an error, the rest goes on.
                    let _ = std::panic::catch_unwind(AssertUnwindSafe(job));
                }
            })
            .map_err(|e| StoreError::io(dir, e))?;
        Ok(Self { dir: dir.to_owned(), queue: Some(queue), thread: Some(thread) })
    }

    /// Runs `work` on the thread, after whatever was queued before it; its result.
    pub(super) async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (reply, answer) = oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = reply.send(work());
        });
        let stopped =
            || StoreError::io(&self.dir, std::io::Error::other("the store's writer stopped"));
        let queue = self.queue.as_ref().ok_or_else(stopped)?;
        queue.send(job).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        drop(self.queue.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
