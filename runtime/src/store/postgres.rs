//! [`PostgresStore`]: the logs of many sessions in one PostgreSQL database (cargo feature
//! `postgres`), so that several rein processes can share them (SPEC §12).
//!
//! Every event is a row of `events (session, seq, line)`, primary key `(session, seq)`: the key
//! makes a second row for one `seq` impossible, and a session's log is one range of it. `line` is
//! exactly the JSONL line of the event, so a session read from here is byte for byte what
//! [`JsonlStore`](super::jsonl::JsonlStore) would have written.
//!
//! - `target`: the `postgres://` URL, and the password kept out of every message.
//! - `schema`: the tables, their versioned migrations (run at open).
//! - `heads`: the per-session heads (`session_heads`), written with each batch.
//! - `writer`: the single group-commit writer task, its durability, its reconnection.
//! - `batch`: the writer's pure decisions (which requests continue their log; backoff).
//! - `locks`: one writer per session across processes (advisory locks on a dedicated
//!   connection) — for a store opened alone ([`PostgresStore::open`]).
//! - [`partition`] and [`fence`]: for a store opened as a node of a cluster
//!   ([`PostgresStore::open_node`], SPEC §12): sessions belong to partitions, a session may be
//!   claimed only while this node holds its partition, and every batch checks its partitions'
//!   epochs in its own transaction instead of advisory locks.
//! - `rows`: decoding a session's rows, its `seq`s checked.
//!
//! # Connections
//!
//! A store holds three: the writer's, the lock keeper's, and one for reads (loads and
//! `sessions`; tokio-postgres pipelines concurrent queries on it). Each reconnects on its own
//! after the database went away: the writer with backoff, refusing appends meanwhile (see
//! `writer`); the lock keeper with backoff, taking its locks back (see `locks`); the reader at the
//! next read. Opening the store connects all three, so a database that is down (or a wrong
//! password, or a missing database) is an error at open naming the URL — without its password.
//!
//! # Loading, reopening, crash repair
//!
//! A transaction is all or nothing, so there is never a torn row: what the store acknowledged is
//! in the table, what it did not may or may not be (a commit cut by a crash), and a reopened
//! store simply reads what is there. A row whose line does not parse, or a gap in a session's
//! `seq`s (rows deleted behind the store's back), is [`StoreError::Corrupt`] at `<url>#<session>`,
//! line `seq + 1`; nothing is ever rewritten. The open turn a crash left is closed (or resumed)
//! by the session log, as with every store.
//!
//! Dropping the store closes the writer's queue: the writer answers what was queued and ends, and
//! the connections close with their tasks.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{mpsc, oneshot};
use tokio_postgres::{Client, NoTls};

use self::locks::Locks;
use self::writer::{Request, Writer};
use super::claim::Claims;
use super::settings_record::{check_base, check_plugin_name, read_row};
use super::{
    Claim, Durability, Loaded, SessionHead, SessionStore, SettingsRecord, StoreError,
    StoredSettings, check_continues, check_session_id, line,
};
use crate::event::Envelope;
use crate::future::BoxFuture;

mod batch;
pub mod fence;
mod heads;
mod locks;
mod owners;
pub mod partition;
mod rows;
mod schema;
mod target;
mod writer;

pub(crate) use batch::backoff;
pub use fence::Fence;
pub use owners::Owners;
pub use target::{Target, redact};
pub use writer::Counters;

/// Session logs in one PostgreSQL database. Share it as `Arc<PostgresStore>`.
///
/// ```no_run
/// use std::sync::Arc;
/// use rein_runtime::prelude::*;
/// use rein_runtime::store::postgres::PostgresStore;
///
/// # tokio_test::block_on(async {
/// let store = PostgresStore::open("postgres://rein@127.0.0.1/rein", Durability::Disk).await?;
/// let runtime = Runtime::builder().store(Arc::new(store)).build().await?;
/// runtime.session("s1").await?;
/// runtime.shutdown().await;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct PostgresStore {
    target: Target,
    durability: Durability,
    queue: mpsc::UnboundedSender<Request>,
    reader: Mutex<Option<Arc<Client>>>,
    /// Settings are saved through a connection with `synchronous_commit = on` (connected at the
    /// first save).
    settings: Mutex<Option<Arc<Client>>>,
    claims: Claims,
    locks: Locks,
    counters: Arc<Counters>,
    schema_found: Option<u32>,
    /// A node's fence (`None`: a store opened alone, one writer per session by advisory locks).
    fence: Option<Arc<Fence>>,
    /// The database was a cluster's when the store opened: a store opened alone writes none of
    /// its sessions (their nodes do).
    clustered: bool,
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://USER[:PASSWORD]@HOST[:PORT]/DB`; without a
    /// password in the URL, `PGPASSWORD`'s), brings its tables to this rein's schema version,
    /// and starts the writer. [`Durability::Disk`] commits with `synchronous_commit = on`,
    /// [`Durability::Os`] with `off`.
    pub async fn open(url: &str, durability: Durability) -> Result<Self, StoreError> {
        let target = Target::parse(url).map_err(StoreError::Postgres)?;
        Self::open_target(target, durability).await
    }

    /// [`PostgresStore::open`] with a parsed URL.
    pub async fn open_target(target: Target, durability: Durability) -> Result<Self, StoreError> {
        Self::open_with(target, durability, None).await
    }

    /// Opens the store as a node of a cluster (SPEC §12): sessions are claimed under `fence`
    /// (held by the node's partition keeper, `crate::cluster`), not by advisory locks, and every
    /// append batch checks its partitions' epochs in its own transaction
    /// ([`StoreError::Fenced`]); every batch also notifies `rein_appended` with its partitions,
    /// so other nodes following a session learn of its appends.
    pub async fn open_node(
        target: Target,
        durability: Durability,
        fence: Arc<Fence>,
    ) -> Result<Self, StoreError> {
        Self::open_with(target, durability, Some(fence)).await
    }

    async fn open_with(
        target: Target,
        durability: Durability,
        fence: Option<Arc<Fence>>,
    ) -> Result<Self, StoreError> {
        let shown = target.shown().to_owned();
        let failed =
            |e: tokio_postgres::Error| StoreError::Postgres(format!("{shown}: {}", message(&e)));
        let mut client = connect(&target, durability).await.map_err(failed)?;
        let schema_found = schema::migrate(&mut client)
            .await
            .map_err(|e| StoreError::Postgres(format!("{shown}: {e}")))?;
        let clustered = client
            .query_one("SELECT EXISTS (SELECT 1 FROM cluster)", &[])
            .await
            .and_then(|row| row.try_get::<_, bool>(0))
            .map_err(failed)?;
        let reader = connect(&target, Durability::Os).await.map_err(failed)?;
        let (lock_client, closed) =
            connect_watched(&target, Durability::Os).await.map_err(failed)?;
        let locks = Locks::spawn(target.clone(), lock_client, closed);
        let counters = Arc::new(Counters::default());
        let (queue, requests) = mpsc::unbounded_channel();
        let writer = Writer {
            target: target.clone(),
            durability,
            client: Some(client),
            heads: Default::default(),
            counters: counters.clone(),
            locks: locks.clone(),
            fence: fence.clone(),
            epochs: Default::default(),
        };
        tokio::spawn(writer.run(requests));
        Ok(Self {
            target,
            durability,
            queue,
            reader: Mutex::new(Some(Arc::new(reader))),
            settings: Mutex::new(None),
            claims: Claims::default(),
            locks,
            counters,
            schema_found,
            clustered,
            fence,
        })
    }

    /// The node's fence, when the store was opened as a node.
    pub fn fence(&self) -> Option<&Arc<Fence>> {
        self.fence.as_ref()
    }

    /// Which node serves each session of the cluster on this database now (`None`: the database
    /// is no cluster's: no node ever joined it).
    pub async fn owners(&self) -> Result<Option<Owners>, StoreError> {
        let client = self.reader().await?;
        let rows = client
            .query(
                "SELECT partition, CASE WHEN expires_at > now() THEN node END FROM partitions \
                 ORDER BY partition",
                &[],
            )
            .await
            .map_err(|e| self.error(e))?;
        if rows.is_empty() {
            return Ok(None);
        }
        let mut by_partition = vec![None; rows.len()];
        for row in rows {
            let partition: i32 = row.try_get(0).map_err(|e| self.error(e))?;
            let node: Option<String> = row.try_get(1).map_err(|e| self.error(e))?;
            if let Some(slot) =
                usize::try_from(partition).ok().and_then(|p| by_partition.get_mut(p))
            {
                *slot = node;
            }
        }
        Ok(Some(Owners { by_partition }))
    }

    /// The target it connects to (password included in its configuration, never shown).
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The URL, without its password.
    pub fn shown(&self) -> &str {
        self.target.shown()
    }

    /// The schema version the database had when this store opened it (`None`: it had none).
    pub fn schema_found(&self) -> Option<u32> {
        self.schema_found
    }

    /// The schema version this rein writes.
    pub fn schema_version() -> u32 {
        schema::CURRENT
    }

    /// How many transactions the writer committed and how many appends they acknowledged.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The reader connection, connected again if it broke.
    async fn reader(&self) -> Result<Arc<Client>, StoreError> {
        self.connection(&self.reader, Durability::Os).await
    }

    /// The connection in `slot` (committing at `durability`), connected if it is not or broke.
    async fn connection(
        &self,
        slot: &Mutex<Option<Arc<Client>>>,
        durability: Durability,
    ) -> Result<Arc<Client>, StoreError> {
        {
            let held = slot.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(client) = held.as_ref().filter(|c| !c.is_closed()) {
                return Ok(client.clone());
            }
        }
        let client = connect(&self.target, durability).await.map_err(|e| {
            StoreError::Postgres(format!(
                "{}: the database is unreachable: {}",
                self.target.shown(),
                message(&e)
            ))
        })?;
        let client = Arc::new(client);
        *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(client.clone());
        Ok(client)
    }

    async fn rows(&self, session: &str, from: u64) -> Result<Vec<Envelope>, StoreError> {
        let Ok(start) = i64::try_from(from) else { return Ok(Vec::new()) };
        let client = self.reader().await?;
        let rows = client
            .query(
                "SELECT seq, line FROM events WHERE session = $1 AND seq >= $2 ORDER BY seq",
                &[&session, &start],
            )
            .await
            .map_err(|e| self.error(e))?;
        let mut pairs = Vec::with_capacity(rows.len());
        for row in &rows {
            let seq: i64 = row.try_get(0).map_err(|e| self.error(e))?;
            let text: &str = row.try_get(1).map_err(|e| self.error(e))?;
            pairs.push((seq, text));
        }
        rows::decode(self.target.shown(), session, from, pairs)
    }

    fn error(&self, e: tokio_postgres::Error) -> StoreError {
        StoreError::Postgres(format!("{}: {}", self.target.shown(), message(&e)))
    }
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("url", &self.target.shown())
            .field("durability", &self.durability)
            .finish_non_exhaustive()
    }
}

/// The whole message of a driver error: its own words and its cause's ("db error: FATAL:
/// password authentication failed for user …", "error connecting to server: Connection refused").
/// The driver never puts a password in either.
pub fn message(e: &tokio_postgres::Error) -> String {
    let mut text = e.to_string();
    if let Some(db) = e.as_db_error() {
        text = format!("{text}: {} {}", db.severity(), db.message());
    } else if let Some(source) = std::error::Error::source(e) {
        let source = source.to_string();
        if !text.contains(&source) {
            text = format!("{text}: {source}");
        }
    }
    text
}

/// How every connection of rein's to `target` is made: a cut network is noticed — keepalives on
/// an idle connection, a limit on how long sent data may stay unacknowledged (Linux) — besides
/// the writer's and the keeper's own bounds on what they wait for.
pub(crate) fn client_config(target: &Target) -> tokio_postgres::Config {
    let mut config = target.config.clone();
    config
        .connect_timeout(std::time::Duration::from_secs(10))
        .keepalives(true)
        .keepalives_idle(std::time::Duration::from_secs(5))
        .keepalives_interval(std::time::Duration::from_secs(2))
        .keepalives_retries(3);
    #[cfg(target_os = "linux")]
    config.tcp_user_timeout(std::time::Duration::from_secs(10));
    config
}

/// Connects to `target`, running the connection on its own task, with `synchronous_commit` for
/// `durability`.
pub(crate) async fn connect(
    target: &Target,
    durability: Durability,
) -> Result<Client, tokio_postgres::Error> {
    Ok(connect_watched(target, durability).await?.0)
}

/// [`connect`], and a receiver that fires when the connection ends.
async fn connect_watched(
    target: &Target,
    durability: Durability,
) -> Result<(Client, oneshot::Receiver<()>), tokio_postgres::Error> {
    let (client, connection) = client_config(target).connect(NoTls).await?;
    let (ended, closed) = oneshot::channel();
    tokio::spawn(async move {
        // Its error is the next query's error, reported there.
        let _ = connection.await;
        let _ = ended.send(());
    });
    let synchronous = match durability {
        Durability::Disk => "on",
        Durability::Os => "off",
    };
    client.batch_execute(&format!("SET synchronous_commit = {synchronous}")).await?;
    Ok((client, closed))
}

impl SessionStore for PostgresStore {
    fn durability(&self) -> Durability {
        self.durability
    }

    fn append<'a>(
        &'a self,
        session: &'a str,
        events: &'a [Envelope],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            check_session_id(session)?;
            let Some(first) = events.first().map(|e| e.seq) else { return Ok(()) };
            check_continues(session, first, events)?;
            let mut lines = Vec::with_capacity(events.len());
            for event in events {
                if i64::try_from(event.seq).is_err() {
                    return Err(StoreError::Postgres(format!(
                        "seq {} does not fit PostgreSQL's bigint",
                        event.seq
                    )));
                }
                lines.push(line::encode(event).map_err(|source| StoreError::Unwritable {
                    session: session.to_owned(),
                    source,
                })?);
            }
            let marks = events.iter().filter_map(crate::store::Mark::of).collect();
            let (reply, done) = oneshot::channel();
            self.queue
                .send(Request { session: session.to_owned(), first, lines, marks, reply })
                .map_err(|_| StoreError::Closed)?;
            done.await.unwrap_or(Err(StoreError::Closed))
        })
    }

    fn claim<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Claim, StoreError>> {
        Box::pin(async move {
            check_session_id(session)?;
            let held = self.claims.take(session).await;
            if let Some(fence) = &self.fence {
                let fenced = fence.claim(session)?;
                return Ok(Claim::new((fenced, held)));
            }
            if self.clustered {
                return Err(StoreError::Clustered {
                    session: session.to_owned(),
                    url: self.target.shown().to_owned(),
                });
            }
            let lock = self.locks.take(session).await?;
            // The lock is released before the in-process claim lets the next claimant in.
            Ok(Claim::new((lock, held)))
        })
    }

    fn load<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Option<Loaded>, StoreError>> {
        Box::pin(async move {
            check_session_id(session)?;
            let events = self.rows(session, 0).await?;
            Ok(if events.is_empty() { None } else { Some(Loaded { events, torn: None }) })
        })
    }

    fn load_from<'a>(
        &'a self,
        session: &'a str,
        seq: u64,
    ) -> BoxFuture<'a, Result<Vec<Envelope>, StoreError>> {
        Box::pin(async move {
            check_session_id(session)?;
            self.rows(session, seq).await
        })
    }

    fn sessions(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        Box::pin(async move {
            let client = self.reader().await?;
            // One index probe per session (a "loose index scan"), not a scan of every row.
            let rows = client
                .query(
                    "WITH RECURSIVE s(id) AS (
                         SELECT min(session) FROM events
                         UNION ALL
                         SELECT (SELECT min(session) FROM events WHERE session > s.id) FROM s
                         WHERE s.id IS NOT NULL)
                     SELECT id FROM s WHERE id IS NOT NULL",
                    &[],
                )
                .await
                .map_err(|e| self.error(e))?;
            let mut ids = rows
                .iter()
                .map(|row| row.try_get(0).map_err(|e| self.error(e)))
                .collect::<Result<Vec<String>, _>>()?;
            // In Rust's order, whatever the database's collation.
            ids.sort();
            Ok(ids)
        })
    }

    fn heads(&self) -> BoxFuture<'_, Result<Vec<SessionHead>, StoreError>> {
        Box::pin(async move {
            let client = self.reader().await?;
            heads::read_all(&*client).await.map_err(|e| self.error(e))
        })
    }

    fn pending_heads(&self) -> BoxFuture<'_, Result<Vec<SessionHead>, StoreError>> {
        Box::pin(async move {
            let client = self.reader().await?;
            heads::read_open(&*client).await.map_err(|e| self.error(e))
        })
    }

    fn save_settings<'a>(
        &'a self,
        record: &'a SettingsRecord,
        base: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            check_plugin_name(&record.plugin)?;
            if record.revision != base + 1 {
                return check_base(record, base, Some(base));
            }
            let too_big = |n: u64| StoreError::Postgres(format!("revision {n} does not fit"));
            let revision = i64::try_from(record.revision).map_err(|_| too_big(record.revision))?;
            let based = i64::try_from(base).map_err(|_| too_big(base))?;
            let text = record.settings.to_string();
            let client = self.connection(&self.settings, Durability::Disk).await?;
            // One statement: a first record inserted where there is none, a later one updated
            // only where the row is at the base revision.
            let written = if base == 0 {
                client
                    .execute(
                        "INSERT INTO settings (plugin, revision, settings) VALUES ($1, $2, $3)
                         ON CONFLICT (plugin) DO NOTHING",
                        &[&record.plugin, &revision, &text],
                    )
                    .await
            } else {
                client
                    .execute(
                        "UPDATE settings SET revision = $2, settings = $3
                         WHERE plugin = $1 AND revision = $4",
                        &[&record.plugin, &revision, &text, &based],
                    )
                    .await
            }
            .map_err(|e| self.error(e))?;
            if written == 1 {
                if self.fence.is_some() {
                    // The other nodes of the cluster put it in force (a missed notice is made
                    // up for when their listener reconnects).
                    let notify = "SELECT pg_notify('rein_settings', $1)";
                    let _ = client.execute(notify, &[&record.plugin]).await;
                }
                return Ok(());
            }
            let row = client
                .query_opt("SELECT revision FROM settings WHERE plugin = $1", &[&record.plugin])
                .await
                .map_err(|e| self.error(e))?;
            let found = match row {
                Some(row) => row.try_get::<_, i64>(0).map_err(|e| self.error(e))?,
                None => 0,
            };
            check_base(record, base, Some(u64::try_from(found).unwrap_or(0)))
        })
    }

    fn load_settings(&self) -> BoxFuture<'_, Result<Vec<StoredSettings>, StoreError>> {
        Box::pin(async move {
            let client = self.reader().await?;
            let rows = client
                .query("SELECT plugin, revision, settings FROM settings", &[])
                .await
                .map_err(|e| self.error(e))?;
            let mut records = Vec::with_capacity(rows.len());
            for row in &rows {
                let plugin: String = row.try_get(0).map_err(|e| self.error(e))?;
                let revision: i64 = row.try_get(1).map_err(|e| self.error(e))?;
                let settings: &str = row.try_get(2).map_err(|e| self.error(e))?;
                let at = format!("{}#settings/{plugin}", self.target.shown());
                records.push(match u64::try_from(revision) {
                    Ok(revision) => read_row(&plugin, &at, revision, settings),
                    Err(_) => StoredSettings::Damaged {
                        message: format!("revision {revision} is negative"),
                        plugin,
                        at,
                        revision: 0,
                    },
                });
            }
            // In Rust's order, whatever the database's collation.
            records.sort_by(|a, b| a.plugin().cmp(b.plugin()));
            Ok(records)
        })
    }
}
