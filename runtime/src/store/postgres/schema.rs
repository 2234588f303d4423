//! The PostgreSQL store's tables and their versioned migrations, run at open.
//!
//! | table | what |
//! |---|---|
//! | `schema_version (version)` | one row: the version of the tables below |
//! | `events (session, seq, line)` | every event; primary key `(session, seq)`; `line` is the event's JSONL line |
//! | `settings (plugin, revision, settings)` | each plugin's latest accepted run-time settings (`settings`: the JSON it shows); a save is a compare-and-set on `revision` |
//! | `session_heads (session, open_turn, wake_at)` | what each session's marks decided last (its open turn, its pending wake-up), written with the batch that changed it (see `heads`) |
//! | `cluster (key, value)` | a cluster's fixed settings: `partitions`, written by its first node |
//! | `partitions (partition, node, addr, epoch, expires_at)` | a row per partition: its owner node, the owner's address, the epoch its last taking bumped, when its lease ends (database clock) |
//! | `nodes (node, addr, heartbeat_at, started_at)` | every node's heartbeat: the live nodes share the partitions |
//! | `commands (id, session, partition, kind, body, from_node, created_at, taken_by, taken_epoch, reply, done)` | requests for a session forwarded to its partition's owner, and their replies |
//!
//! [`MIGRATIONS`]`[i]` takes the tables from version `i` to `i + 1`. Opening a database runs,
//! in one transaction under a transaction-scoped advisory lock (two rein processes opening one
//! new database at once do not both create it), the migrations from the version found up to
//! [`CURRENT`] — all of them for an empty database. A database at a newer version (written by a
//! newer rein) is refused, naming the version found and the newest this rein knows: nothing is
//! changed. The decision is the pure [`plan`]. The migration to version 3 also fills the heads
//! from the rows already there (`heads::fill`, in the same transaction).

use std::ops::Range;

/// The migrations, in order: `MIGRATIONS[i]` goes from version `i` to `i + 1`.
pub(super) const MIGRATIONS: &[&str] = &[
    // 0 → 1: the events.
    "CREATE TABLE events (
         session text NOT NULL,
         seq bigint NOT NULL,
         line text NOT NULL,
         PRIMARY KEY (session, seq)
     )",
    // 1 → 2: plugin settings.
    "CREATE TABLE settings (
         plugin text PRIMARY KEY,
         revision bigint NOT NULL,
         settings text NOT NULL
     )",
    // 2 → 3: per-session heads (filled from the rows by `heads::fill`).
    super::heads::TABLE,
    // 3 → 4: several nodes (SPEC §12): partitions with leases, heartbeats, forwarded commands.
    "CREATE TABLE cluster (key text PRIMARY KEY, value text NOT NULL);
     CREATE TABLE partitions (
         partition integer PRIMARY KEY,
         node text,
         addr text,
         epoch bigint NOT NULL DEFAULT 0,
         expires_at timestamptz NOT NULL DEFAULT '-infinity'
     );
     CREATE TABLE nodes (
         node text PRIMARY KEY,
         addr text NOT NULL,
         heartbeat_at timestamptz NOT NULL,
         started_at timestamptz NOT NULL DEFAULT now()
     );
     CREATE TABLE commands (
         id bigserial PRIMARY KEY,
         session text NOT NULL,
         partition integer NOT NULL,
         kind text NOT NULL,
         body text NOT NULL,
         from_node text NOT NULL,
         created_at timestamptz NOT NULL DEFAULT now(),
         taken_by text,
         taken_epoch bigint,
         reply text,
         done boolean NOT NULL DEFAULT false
     );
     CREATE INDEX commands_pending ON commands (partition, id) WHERE NOT done;",
];

/// The version this rein writes.
pub(super) const CURRENT: u32 = MIGRATIONS.len() as u32;

/// An arbitrary constant: the advisory lock key that serializes the migrations of one database.
const MIGRATION_LOCK: i64 = 0x7265_696e_5f73_6368; // "rein_sch"

/// Which migrations take a database at version `found` (`None`: no `schema_version` table yet)
/// to `current`; an error naming both when the database is newer.
pub(super) fn plan(found: Option<u32>, current: u32) -> Result<Range<usize>, String> {
    let from = found.unwrap_or(0);
    if from > current {
        return Err(format!(
            "the database's tables are at schema version {from}, written by a newer rein; this \
             rein knows versions up to {current} and changes nothing"
        ));
    }
    Ok(from as usize..current as usize)
}

/// Brings the tables of the database behind `client` to [`CURRENT`]; returns the version found.
pub(super) async fn migrate(client: &mut tokio_postgres::Client) -> Result<Option<u32>, String> {
    let e = |e: tokio_postgres::Error| super::message(&e);
    let tx = client.transaction().await.map_err(e)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await.map_err(e)?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)")
        .await
        .map_err(e)?;
    let rows = tx.query("SELECT version FROM schema_version", &[]).await.map_err(e)?;
    let found = match rows.as_slice() {
        [] => None,
        [row] => {
            let version: i32 = row.try_get(0).map_err(e)?;
            Some(u32::try_from(version).map_err(|_| format!("schema version {version}?"))?)
        }
        more => return Err(format!("schema_version has {} rows, not one", more.len())),
    };
    let steps = plan(found, CURRENT)?;
    if steps.is_empty() {
        tx.rollback().await.map_err(e)?;
        return Ok(found);
    }
    for (i, migration) in MIGRATIONS[steps.clone()].iter().enumerate() {
        let to = steps.start + i + 1;
        let failed = |err| format!("migrating to schema version {to}: {}", super::message(&err));
        tx.batch_execute(migration).await.map_err(failed)?;
        if to == super::heads::VERSION {
            super::heads::fill(&tx).await.map_err(failed)?;
        }
    }
    let current = i32::try_from(CURRENT).unwrap_or(i32::MAX);
    tx.execute("DELETE FROM schema_version", &[]).await.map_err(e)?;
    tx.execute("INSERT INTO schema_version (version) VALUES ($1)", &[&current]).await.map_err(e)?;
    tx.commit().await.map_err(e)?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_is_migrated_from_the_version_found_and_a_newer_one_refused() {
        /// (version found, current, migrations to run or what the error says)
        type Case = (Option<u32>, u32, Result<Range<usize>, &'static str>);
        let cases: [Case; 5] = [
            (None, 1, Ok(0..1)),
            (Some(0), 1, Ok(0..1)),
            (Some(1), 1, Ok(1..1)),
            (Some(1), 3, Ok(1..3)),
            (
                Some(4),
                3,
                Err("schema version 4, written by a newer rein; this rein knows versions up to 3"),
            ),
        ];
        for (found, current, want) in cases {
            match (plan(found, current), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{found:?}"),
                (Err(got), Err(want)) => assert!(got.contains(want), "{got}"),
                (got, want) => panic!("{found:?}: {got:?}, want {want:?}"),
            }
        }
    }
}
