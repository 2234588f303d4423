//! [`Syncer`]: how a durable store pushes a file to the disk.
//!
//! [`Durability::Disk`](super::Durability::Disk) means "synced before the append is
//! acknowledged". Both durable stores call their `Syncer` at exactly that point, and nowhere else
//! on the append path, so:
//!
//! - production uses [`Fdatasync`] (`File::sync_data`: `fdatasync(2)` on Linux, which skips
//!   metadata such as the modification time that a log does not need to recover);
//! - tests wrap it in a [`CountingSyncer`] and prove durability by counting calls, never by
//!   timing them.
//!
//! # Why a trait and not a flag
//!
//! A test that wants to see whether a store syncs cannot look at the disk: a sync leaves no trace
//! that survives anything short of pulling the power. Injecting the syncer turns "did it sync
//! before acknowledging?" into an observable fact, and lets a test hold the writer inside a sync
//! (to make a group commit deterministic) without any real sleep.

use std::fs::File;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Makes a file's written data durable.
pub trait Syncer: Send + Sync + 'static {
    /// Syncs `file`'s data to the disk; returns once it is durable.
    fn sync(&self, file: &File) -> io::Result<()>;
}

/// The default syncer: [`File::sync_data`] (`fdatasync`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Fdatasync;

impl Syncer for Fdatasync {
    fn sync(&self, file: &File) -> io::Result<()> {
        file.sync_data()
    }
}

/// A syncer that counts its calls and forwards them to another syncer.
///
/// Hand the store a clone of the `Arc` and keep one to read [`CountingSyncer::count`].
pub struct CountingSyncer {
    inner: Arc<dyn Syncer>,
    calls: AtomicU64,
}

impl CountingSyncer {
    /// Counts the calls made to `inner`.
    pub fn new(inner: Arc<dyn Syncer>) -> Self {
        Self { inner, calls: AtomicU64::new(0) }
    }

    /// Counts real [`Fdatasync`] calls.
    pub fn fdatasync() -> Self {
        Self::new(Arc::new(Fdatasync))
    }

    /// How many syncs were requested so far (successful or not).
    pub fn count(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }
}

impl std::fmt::Debug for CountingSyncer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CountingSyncer").field("calls", &self.count()).finish_non_exhaustive()
    }
}

impl Syncer for CountingSyncer {
    fn sync(&self, file: &File) -> io::Result<()> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.sync(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Failing;
    impl Syncer for Failing {
        fn sync(&self, _: &File) -> io::Result<()> {
            Err(io::Error::other("disk on fire"))
        }
    }

    #[test]
    fn counts_every_call_and_forwards_the_result() {
        let file = tempfile::tempfile().unwrap();
        let ok = CountingSyncer::fdatasync();
        ok.sync(&file).unwrap();
        ok.sync(&file).unwrap();
        assert_eq!(ok.count(), 2);

        let failing = CountingSyncer::new(Arc::new(Failing));
        assert_eq!(failing.sync(&file).unwrap_err().to_string(), "disk on fire");
        assert_eq!(failing.count(), 1);
    }
}
