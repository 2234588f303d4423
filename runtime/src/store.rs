//! Where session logs live: one [`SessionStore`] trait, three stores.
//!
//! - [`memory::MemoryStore`]: in memory, for tests and benchmarks.
//! - [`jsonl::JsonlStore`]: a directory with one `<session>.jsonl` per session (the CLI default).
//! - `sqlite::SqliteStore` (cargo feature `sqlite`, on by default): one SQLite database (WAL)
//!   for many sessions; a single writer batches the appends of all sessions into one transaction
//!   (group commit).
//! - `postgres::PostgresStore` (cargo feature `postgres`): one PostgreSQL database shared by
//!   several processes; the same single group-commit writer, and advisory locks for one writer
//!   per session across processes.
//!
//! Shared by the stores:
//! - [`line`](mod@line): one log line: encoding an append, decoding a line with its `seq` checked.
//! - [`sync`]: the [`sync::Syncer`] that makes [`Durability::Disk`] real (and countable in tests).
//! - [`claim`]: one writer per session — the [`Claim`] a session log holds while it is open,
//!   and `lock_file`, the advisory lock the operating system releases with its holder's process.
//! - [`head`]: a session's [`Head`] (next `seq`, open turn, pending wake-up), the fold every
//!   store keeps up to date as it appends, for [`SessionStore::heads`].
//! - [`faulty`]: a store that fails on purpose, for tests of what a failed write does.
//! - [`settings_record`]: plugin settings as a store keeps them (the compare-and-set every
//!   store applies, the lenient read).
//!
//! # Why every store checks `seq`
//!
//! The session log assigns `seq`, so a store could trust it. But a log whose `seq`s are not
//! contiguous from 0 does not load (it is corrupt), so a store that accepted such an
//! append would acknowledge something it can never read back. Every store therefore refuses an
//! append that does not continue the log ([`StoreError::OutOfOrder`], nothing written), using the
//! pure [`check_continues`].
//!
//! # Why the store acknowledges, not the caller
//!
//! "Durable before effect" (a retry is recorded before its wait begins) is only true if an append
//! resolves after the store holds the records at the promised [`Durability`]. So `append` is a
//! future that resolves exactly then; the session log answers its caller only after it.

use std::sync::Arc;

use crate::event::Envelope;
use crate::future::BoxFuture;

pub mod claim;
pub mod faulty;
pub mod head;
pub mod jsonl;
pub mod line;
mod lock_file;
pub mod memory;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod settings_record;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod sync;

pub use claim::Claim;
pub use head::{Head, Mark, SessionHead};
pub use lock_file::Holder;
pub use settings_record::{SettingsRecord, StoredSettings};

/// The longest session log a store or a reader reads, in bytes: 4 GiB. A longer file is refused
/// whole (nothing of it is read, nothing cut), and a store refuses an append that would take a
/// log past it ([`StoreError::Unwritable`]): what a store acknowledged, it can read back.
pub const MAX_LOG_BYTES: u64 = 4 << 30;

/// How durable an acknowledged append is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Handed to the operating system: survives a process crash, not a power loss.
    #[default]
    Os,
    /// Synced to the disk (`fdatasync`) before the append is acknowledged.
    Disk,
}

/// A session's log as read back.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Loaded {
    /// The events, in `seq` order.
    pub events: Vec<Envelope>,
    /// A torn last line that was cut while loading, if any.
    pub torn: Option<TornTail>,
}

/// The bytes of a torn (partially written) last line, cut on reopen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// The 1-based line number the torn line had.
    pub line: u64,
    /// How many bytes were cut.
    pub bytes: u64,
    /// Where the cut bytes were kept (`<session>.jsonl.torn`), when the store keeps them.
    pub kept_in: Option<std::path::PathBuf>,
}

/// What can go wrong in a store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// An I/O error on a file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A line that is not a valid event, other than a torn last line. Nothing was rewritten.
    #[error("{path}:{line}: corrupt log line: {message}")]
    Corrupt {
        /// The file (or `db#session`).
        path: String,
        /// The 1-based line (or row) number.
        line: u64,
        /// Why it does not parse.
        message: String,
    },
    /// An event that cannot be written as a log line: longer than
    /// [`line::MAX_LINE_BYTES`], or not serializable. Nothing was written.
    #[error("{session}: cannot write the append: {source}")]
    Unwritable {
        /// The session.
        session: String,
        /// Why.
        #[source]
        source: line::EncodeError,
    },
    /// A session id that cannot name a log.
    #[error("invalid session id {0:?}: use letters, digits, '-', '_' and '.' (not leading)")]
    InvalidSessionId(String),
    /// An error from SQLite.
    #[error("sqlite: {0}")]
    Sqlite(String),
    /// An error from PostgreSQL, or the database unreachable; the message names the database by
    /// its URL without the password.
    #[error("postgres: {0}")]
    Postgres(String),
    /// The store's writer is gone.
    #[error("the store is closed")]
    Closed,
    /// A settings save that does not continue the stored revision: another save came first
    /// (see [`settings_record`]). Nothing was written.
    #[error(
        "settings of plugin {plugin}: saved at revision {found}, not {base} as the change assumed"
    )]
    SettingsConflict {
        /// The plugin.
        plugin: String,
        /// The revision the save was based on.
        base: u64,
        /// The revision the store holds (0: none).
        found: u64,
    },
    /// A plugin name that cannot name a settings record (quoted).
    #[error("invalid plugin name {0}: use letters, digits, '-', '_' and '.' (not leading)")]
    InvalidPluginName(String),
    /// The store does not keep plugin settings (a store of another crate that did not
    /// implement [`SessionStore::save_settings`]).
    #[error("this store does not keep plugin settings")]
    NoSettings,
    /// What a writer needs is held by another: a session (or a whole SQLite database) another
    /// process has open. Nothing was read or written.
    #[error("{what} is in use by {}", Holder::describe(.holder.as_ref(), lock))]
    Locked {
        /// What is held: a session's log file (JSONL), or a whole database (SQLite).
        what: String,
        /// The lock file.
        lock: String,
        /// Who holds it, as the lock file records it (`None`: not recorded yet, or unreadable).
        holder: Option<Holder>,
    },
    /// An append of a node that no longer owns the session's partition: another node took the
    /// partition over (a later epoch) while this one was paused, cut off, or slow to renew its
    /// lease. Nothing was written; the session continues on its new owner (SPEC §12).
    #[error(
        "{session}: partition {partition} moved to another node (epoch {epoch} is no longer this \
         node's): nothing was written; the session continues on its new owner"
    )]
    Fenced {
        /// The session.
        session: String,
        /// Its partition.
        partition: u32,
        /// The epoch this node claimed the session under.
        epoch: u64,
    },
    /// A session whose partition this node does not hold: it is served by another node (a
    /// request for it is forwarded there). Nothing was read or written.
    #[error("{session}: its partition {partition} is not held by node {node}")]
    NotOwned {
        /// The session.
        session: String,
        /// Its partition.
        partition: u32,
        /// This node.
        node: String,
    },
    /// A session of a cluster's database (SPEC §12) claimed through a store opened alone: only
    /// the cluster's nodes write its sessions, each under its partition's lease. Nothing was
    /// read or written.
    #[error(
        "{session}: {url} is the database of a cluster of rein nodes: its sessions are written by \
         its nodes only (ask one: rein node, its console or API)"
    )]
    Clustered {
        /// The session.
        session: String,
        /// The database, without its password.
        url: String,
    },
    /// An append that does not continue the session's log (a duplicate or a gap in `seq`).
    /// Nothing was written.
    #[error("{session}: append out of order: got seq {found}, the log's next seq is {expected}")]
    OutOfOrder {
        /// The session.
        session: String,
        /// The `seq` the log needed next.
        expected: u64,
        /// The `seq` the append carried there.
        found: u64,
    },
}

impl StoreError {
    /// An I/O error on `path`.
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        Self::Io { path: path.display().to_string(), source }
    }
}

/// A place that holds session logs.
pub trait SessionStore: Send + Sync + 'static {
    /// The durability an acknowledged append has.
    fn durability(&self) -> Durability;

    /// Appends `events` (already sequenced by the session log) to `session`'s log, all or
    /// nothing. Resolves once the store holds them at [`SessionStore::durability`].
    fn append<'a>(
        &'a self,
        session: &'a str,
        events: &'a [Envelope],
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// [`SessionStore::append`] of a batch its caller shares (the session log hands every batch
    /// to the store, its subscribers and its caller as one allocation): a store that keeps
    /// events in memory keeps the batch itself instead of a copy. The default appends the
    /// slice; a store that wraps another should forward this too.
    fn append_shared<'a>(
        &'a self,
        session: &'a str,
        events: &'a Arc<[Envelope]>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.append(session, events)
    }

    /// Claims `session` for writing until the returned [`Claim`] is dropped (see [`claim`]): a
    /// second claimant through the same store waits for the first to let go; a session another
    /// process holds is [`StoreError::Locked`], naming the holder. A session log claims its
    /// session before it reads it and holds the claim while it is open; `append` trusts that its
    /// caller holds it.
    fn claim<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Claim, StoreError>>;

    /// Reads a session's log; `None` when the session does not exist. A torn last line is cut
    /// (and reported in [`Loaded::torn`]); any other corrupt line is [`StoreError::Corrupt`].
    fn load<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Option<Loaded>, StoreError>>;

    /// Reads the events of `session`'s log from `seq` on, in `seq` order: what
    /// [`SessionStore::load`] returns, less the events before `seq`. Empty when the log ends
    /// before `seq` or the session does not exist. A corrupt line among those read is
    /// [`StoreError::Corrupt`], as in a load; lines before `seq` are not looked at.
    ///
    /// This is how a reader that is behind catches up (a turn's events read back once it
    /// started): its cost must follow what it returns, not the length of the log, or a long
    /// session pays for its whole history on every turn. The stores of this crate read only
    /// the part asked for (see each store); this default, for stores that have no better way,
    /// loads the whole log and drops the events before `seq`.
    fn load_from<'a>(
        &'a self,
        session: &'a str,
        seq: u64,
    ) -> BoxFuture<'a, Result<Vec<Envelope>, StoreError>> {
        Box::pin(async move {
            let loaded = self.load(session).await?;
            let events = loaded.map(|loaded| loaded.events).unwrap_or_default();
            Ok(events.into_iter().skip_while(|e| e.seq < seq).collect())
        })
    }

    /// The ids of every stored session.
    fn sessions(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>>;

    /// Every stored session's [`Head`] (next `seq`, open turn, pending wake-up), in session-id
    /// order: how `Runtime::resume_pending` finds the sessions with an open turn.
    ///
    /// The stores of this crate answer without reading whole logs (see each store). This
    /// default, for stores of other crates, is the slow path: it loads every log in full and
    /// folds it ([`Head::of`]). A session whose head cannot be read (its log fails to load) is
    /// listed with the error's message, not dropped.
    fn heads(&self) -> BoxFuture<'_, Result<Vec<SessionHead>, StoreError>> {
        Box::pin(async move {
            let mut heads = Vec::new();
            for session in self.sessions().await? {
                match self.load(&session).await {
                    Ok(Some(loaded)) => {
                        heads.push(SessionHead { head: Ok(Head::of(&loaded.events)), session });
                    }
                    Ok(None) => {}
                    Err(e) => heads.push(SessionHead { head: Err(e.to_string()), session }),
                }
            }
            Ok(heads)
        })
    }

    /// The heads of the sessions with an open turn (and those whose head cannot be read), in
    /// session-id order: what [`SessionStore::heads`] returns, less the sessions with nothing
    /// open. `Runtime::resume_pending` reads this; a store that knows its open sessions without
    /// listing every session (the PostgreSQL store) answers in a time that follows them, which a
    /// node taking partitions over pays at every takeover. The default filters `heads`.
    fn pending_heads(&self) -> BoxFuture<'_, Result<Vec<SessionHead>, StoreError>> {
        Box::pin(async move {
            let mut heads = self.heads().await?;
            heads.retain(|h| h.head.as_ref().map_or(true, |head| head.open_turn.is_some()));
            Ok(heads)
        })
    }

    /// Saves a plugin's accepted settings, durably, based on revision `base`: a
    /// compare-and-set ([`settings_record::check_base`]) refused with
    /// [`StoreError::SettingsConflict`] when the stored record is not at `base`. Resolves once
    /// the record is durable (whatever the store's [`Durability`] for appends: a settings change
    /// is rare and must survive). Nothing is written when it fails.
    ///
    /// The default keeps nothing: [`StoreError::NoSettings`], so a runtime on such a store
    /// refuses run-time patches rather than accept one it would forget.
    fn save_settings<'a>(
        &'a self,
        record: &'a SettingsRecord,
        base: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let _ = (record, base);
        Box::pin(async { Err(StoreError::NoSettings) })
    }

    /// Every plugin's latest saved settings, read leniently ([`StoredSettings::Damaged`] for a
    /// record that cannot be read), in plugin-name order. The default: none.
    fn load_settings(&self) -> BoxFuture<'_, Result<Vec<StoredSettings>, StoreError>> {
        Box::pin(async { Ok(Vec::new()) })
    }
}

/// Checks that a session id is safe as a file name: `[A-Za-z0-9_.-]`, not starting with `.`,
/// 1..=128 bytes.
pub fn check_session_id(id: &str) -> Result<(), StoreError> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && !id.starts_with('.')
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok { Ok(()) } else { Err(StoreError::InvalidSessionId(id.to_owned())) }
}

/// Checks that `events` continue a log whose next `seq` is `next`: their `seq`s must be `next`,
/// `next + 1`, … in order. Pure; every store calls it before writing anything.
pub fn check_continues(session: &str, next: u64, events: &[Envelope]) -> Result<(), StoreError> {
    for (expected, event) in (next..).zip(events) {
        if event.seq != expected {
            return Err(StoreError::OutOfOrder {
                session: session.to_owned(),
                expected,
                found: event.seq,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{AgentIdle, Event};

    fn at(seq: u64) -> Envelope {
        Envelope { seq, time: 0, event: Event::AgentIdle(AgentIdle {}) }
    }

    #[test]
    fn an_append_must_continue_the_log() {
        /// (next, seqs, `None` = accepted or `Some((expected, found))`)
        type Case = (u64, &'static [u64], Option<(u64, u64)>);
        let cases: [Case; 7] = [
            (0, &[], None),
            (0, &[0], None),
            (3, &[3, 4, 5], None),
            (3, &[2], Some((3, 2))),
            (3, &[4], Some((3, 4))),
            (0, &[0, 2], Some((1, 2))),
            (0, &[0, 1, 1], Some((2, 1))),
        ];
        for (next, seqs, want) in cases {
            let events: Vec<Envelope> = seqs.iter().map(|&s| at(s)).collect();
            let got = check_continues("s", next, &events);
            match (got, want) {
                (Ok(()), None) => {}
                (Err(StoreError::OutOfOrder { session, expected, found }), Some((e, f))) => {
                    assert_eq!((session.as_str(), expected, found), ("s", e, f), "{seqs:?}");
                }
                (got, want) => panic!("next {next}, {seqs:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn session_ids_must_be_safe_file_names() {
        for ok in ["s1", "a-b_c.d", "0f8fad5b-d9cb-469f-a165-70867728950e"] {
            assert!(check_session_id(ok).is_ok(), "{ok}");
        }
        for bad in ["", ".hidden", "a/b", "..", "a b", "ü", &"x".repeat(129)] {
            assert!(check_session_id(bad).is_err(), "{bad}");
        }
    }
}
