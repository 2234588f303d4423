//! [`LockFile`]: an exclusive advisory lock on a file, which the operating system releases when
//! its holder's process ends — however it ends, so a crash never leaves a stale lock.
//!
//! The lock is an exclusive `flock` on Unix (`LockFileEx` on Windows), through std's
//! [`File::try_lock`], on a small file that also records who holds it: one line of JSON, `{"pid":4242,"since":1718000000000}` (milliseconds
//! since the Unix epoch), written by the holder once it has the lock. A process that finds the
//! file locked reads that line to name the holder in its error ([`StoreError::Locked`]); a line
//! left by a holder that died means nothing, because only a process that has the lock writes it.
//!
//! # Why a lock this process holds is tried again for a moment
//!
//! A process that spawns children (a test harness, a supervisor) forks: between the fork and the
//! child's `exec`, the child shares every open file of the parent, the lock's included (`O_CLOEXEC`
//! closes it only at `exec`). A lock the parent releases in that window stays held until the
//! child execs — a few milliseconds — and the parent's next `acquire` of it would be refused,
//! naming itself as the holder. So a lock whose recorded holder is this process is tried again for
//! up to [`OWN_RELEASE_GRACE`] before it is refused; a lock another process holds is refused at
//! once.
//!
//! # Why lock files are never deleted
//!
//! Deleting a lock file on release races with a process that has just opened it and is about to
//! lock it: the two would then lock different files (the deleted one and a new one) and both
//! believe they hold the lock. An idle lock file is a few bytes; it stays.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::StoreError;
use crate::file;

/// How long a lock this process's own record names is tried again before it is refused.
pub(crate) const OWN_RELEASE_GRACE: Duration = Duration::from_secs(1);

/// Who holds a lock, as its lock file records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Holder {
    /// The holder's process id.
    pub pid: u32,
    /// When it took the lock, in milliseconds since the Unix epoch.
    pub since: u64,
}

impl Holder {
    /// Who holds the lock `lock`, for an error: "another process (pid 4242, since Tue, 11 Jun
    /// 2024 06:13:20 GMT; lock file PATH)"; "another store in this process (since …; …)" when
    /// the holder is this process; "another process (lock file PATH)" when it is not recorded.
    pub fn describe(holder: Option<&Holder>, lock: &str) -> String {
        let Some(holder) = holder else { return format!("another process (lock file {lock})") };
        // Before the year 10000, which is as far as an HTTP date goes.
        let since = UNIX_EPOCH
            .checked_add(Duration::from_millis(holder.since))
            .filter(|t| t.duration_since(UNIX_EPOCH).is_ok_and(|d| d.as_secs() < 253_402_300_800))
            .map_or_else(|| format!("{} ms", holder.since), httpdate::fmt_http_date);
        if holder.pid == std::process::id() {
            format!("another store in this process (since {since}; lock file {lock})")
        } else {
            format!("another process (pid {}, since {since}; lock file {lock})", holder.pid)
        }
    }
}

/// An exclusive lock held on a file until this is dropped.
#[derive(Debug)]
pub(crate) struct LockFile {
    _file: File,
}

/// What a probe of a lock found.
pub(crate) enum Probe {
    /// Nobody holds it (or it does not exist): the lock is held until this is dropped.
    Free(Option<LockFile>),
    /// Another holder has it.
    Held,
}

impl LockFile {
    /// Takes the lock on `path` (created if missing) and records this process as its holder.
    /// Held by another: [`StoreError::Locked`] naming `what` it guards and the holder.
    pub(crate) fn acquire(path: &Path, what: &str) -> Result<Self, StoreError> {
        let io = |e| StoreError::Io { path: path.display().to_string(), source: e };
        let options = OpenOptions::new().read(true).write(true).create(true).clone();
        let mut file = file::open(path, &options).map_err(io)?;
        let started = std::time::Instant::now();
        while !try_lock(&file).map_err(io)? {
            let holder = read_holder(&file);
            let ours = holder.is_some_and(|h| h.pid == std::process::id());
            if !ours || started.elapsed() >= OWN_RELEASE_GRACE {
                return Err(StoreError::Locked {
                    what: what.to_owned(),
                    lock: path.display().to_string(),
                    holder,
                });
            }
            // Held by this process: a lock just released may still be held for a moment by a
            // child being spawned (see the module docs).
            std::thread::sleep(Duration::from_millis(5));
        }
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        // Who holds it, for whoever finds it locked. Best effort: the lock is what matters, and
        // a full disk must not keep a session from being repaired.
        let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_millis();
        let holder = Holder { pid: std::process::id(), since: u64::try_from(since).unwrap_or(0) };
        if let Ok(mut line) = serde_json::to_vec(&holder) {
            line.push(b'\n');
            // Not for appending, and sought back to the start above.
            let _ = file.set_len(0).and_then(|()| (&file).write_all(&line));
        }
        Ok(Self { _file: file })
    }

    /// Takes the lock on an existing `path` if nobody holds it, recording nothing: for a reader
    /// that must know no other process writes while it works. A missing lock file is free.
    pub(crate) fn probe(path: &Path) -> Result<Probe, StoreError> {
        let file = match file::open_read(path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Probe::Free(None)),
            Err(source) => return Err(StoreError::Io { path: path.display().to_string(), source }),
        };
        match try_lock(&file) {
            Ok(true) => Ok(Probe::Free(Some(Self { _file: file }))),
            Ok(false) => Ok(Probe::Held),
            Err(source) => Err(StoreError::Io { path: path.display().to_string(), source }),
        }
    }
}

/// The holder a locked file records, if its line can be read.
fn read_holder(mut file: &File) -> Option<Holder> {
    let mut line = Vec::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.take(1024).read_to_end(&mut line).ok()?;
    serde_json::from_slice(line.trim_ascii()).ok()
}

/// Takes the exclusive lock on `file` if nobody holds it: `Ok(false)` when another does.
fn try_lock(file: &File) -> io::Result<bool> {
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(std::fs::TryLockError::WouldBlock) => Ok(false),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

/// Where the lock of `path` lives: `path` with `.lock` appended (the SQLite store's).
#[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
pub(crate) fn beside(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_second_holder_is_refused_naming_the_first_and_the_lock_goes_with_its_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl.lock");
        let first = LockFile::acquire(&path, "session s").unwrap();
        let recorded: Holder =
            serde_json::from_str(std::fs::read_to_string(&path).unwrap().trim()).unwrap();
        assert_eq!(recorded.pid, std::process::id());

        let err = LockFile::acquire(&path, "session s").unwrap_err();
        match &err {
            StoreError::Locked { what, lock, holder } => {
                assert_eq!((what.as_str(), lock.as_str()), ("session s", &*path.to_string_lossy()));
                assert_eq!(*holder, Some(recorded));
            }
            other => panic!("{other:?}"),
        }
        let text = err.to_string();
        assert!(text.starts_with("session s is in use by another store in this process (since "));
        assert!(text.ends_with(&format!("GMT; lock file {})", path.display())), "{text}");
        assert!(matches!(LockFile::probe(&path).unwrap(), Probe::Held));

        drop(first);
        assert!(matches!(LockFile::probe(&path).unwrap(), Probe::Free(Some(_))));
        let missing = dir.path().join("never.lock");
        assert!(matches!(LockFile::probe(&missing).unwrap(), Probe::Free(None)));
        assert!(!missing.exists(), "a probe creates nothing");
        drop(LockFile::acquire(&path, "session s").unwrap());
    }

    #[cfg(unix)]
    #[test]
    fn a_lock_this_process_releases_a_moment_later_is_taken_and_its_record_is_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl.lock");
        let first = LockFile::acquire(&path, "session s").unwrap();
        // As a forked child holds a released lock until it execs: let go from another thread.
        let (held, release) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let _ = release.recv();
            // Let the waiter meet the lock held (it must try again, not give up).
            std::thread::sleep(Duration::from_millis(30));
            drop(first);
        });
        let waiter = std::thread::spawn(move || {
            held.send(()).unwrap();
            LockFile::acquire(&path, "session s").map(|_| std::fs::read_to_string(&path).unwrap())
        });
        let record = waiter.join().unwrap().unwrap();
        holder.join().unwrap();
        let recorded: Holder = serde_json::from_str(record.trim()).unwrap();
        assert_eq!(recorded.pid, std::process::id(), "one whole line, written from the start");
        assert_eq!(record.lines().count(), 1, "{record:?}");
    }

    #[test]
    fn a_holder_is_described_by_pid_and_time_and_garbage_is_not_trusted() {
        let other = Holder { pid: std::process::id().wrapping_add(1), since: 1_718_086_400_000 };
        assert_eq!(
            Holder::describe(Some(&other), "l"),
            format!(
                "another process (pid {}, since Tue, 11 Jun 2024 06:13:20 GMT; lock file l)",
                other.pid
            )
        );
        let far = Holder { since: u64::MAX, ..other };
        assert!(
            Holder::describe(Some(&far), "l")
                .ends_with(&format!("since {} ms; lock file l)", u64::MAX))
        );
        assert_eq!(Holder::describe(None, "l"), "another process (lock file l)");

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        std::fs::write(&path, "not json").unwrap();
        assert_eq!(read_holder(&File::open(&path).unwrap()), None);
    }

    #[cfg(unix)]
    #[test]
    fn a_lock_file_that_is_not_a_regular_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl.lock");
        std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
        let err = LockFile::acquire(&path, "session s").unwrap_err().to_string();
        assert_eq!(err, format!("{}: not a regular file: a character device", path.display()));
    }
}
