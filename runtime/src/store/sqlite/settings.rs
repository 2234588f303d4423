//! Plugin settings in a SQLite store: the `settings` table (see `layout`), one row per plugin
//! holding its latest accepted [`SettingsRecord`].
//!
//! Written through a connection of their own (not the writer thread's group commit: a settings
//! change is rare), each save one `BEGIN IMMEDIATE` transaction that reads the row, applies the
//! compare-and-set and writes it, with `synchronous = FULL` so that an acknowledged change is on
//! disk whatever the store's durability for appends. The writer and this connection share the
//! database's write lock as any two SQLite connections do (`busy_timeout`).

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};

use super::BUSY_TIMEOUT;
use crate::store::settings_record::{check_base, check_plugin_name, read_row};
use crate::store::{SettingsRecord, StoreError, StoredSettings};

fn sqlite(db: &Path) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |e| StoreError::Sqlite(format!("{}: {e}", db.display()))
}

/// The connection settings are written through.
pub(super) fn open(db: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open(db).map_err(sqlite(db))?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(sqlite(db))?;
    conn.pragma_update(None, "synchronous", "FULL").map_err(sqlite(db))?;
    Ok(conn)
}

/// Saves `record` based on `base`, all or nothing.
pub(super) fn save(
    conn: &Connection,
    db: &Path,
    record: &SettingsRecord,
    base: u64,
) -> Result<(), StoreError> {
    check_plugin_name(&record.plugin)?;
    let json = serde_json::to_string(&record.settings)
        .map_err(|e| StoreError::Sqlite(format!("{}: {e}", db.display())))?;
    let revision = i64::try_from(record.revision)
        .map_err(|_| StoreError::Sqlite(format!("revision {} does not fit", record.revision)))?;
    conn.execute_batch("BEGIN IMMEDIATE").map_err(sqlite(db))?;
    let result = save_in_transaction(conn, db, record, base, revision, &json);
    let end = if result.is_ok() { "COMMIT" } else { "ROLLBACK" };
    match (result, conn.execute_batch(end)) {
        (Ok(()), Ok(())) => Ok(()),
        (Err(e), _) => Err(e),
        (Ok(()), Err(e)) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(sqlite(db)(e))
        }
    }
}

fn save_in_transaction(
    transaction: &Connection,
    db: &Path,
    record: &SettingsRecord,
    base: u64,
    revision: i64,
    json: &str,
) -> Result<(), StoreError> {
    let stored: Option<(i64, String)> = transaction
        .query_row(
            "SELECT revision, settings FROM settings WHERE plugin = ?1",
            [&record.plugin],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()
        .map_err(sqlite(db))?;
    let stored =
        stored.map(|(revision, text)| row_record(db, &record.plugin, revision, &text).revision());
    check_base(record, base, stored)?;
    transaction
        .execute(
            "INSERT INTO settings (plugin, revision, settings) VALUES (?1, ?2, ?3)
             ON CONFLICT (plugin) DO UPDATE SET revision = ?2, settings = ?3",
            params![record.plugin, revision, json],
        )
        .map_err(sqlite(db))?;
    Ok(())
}

/// Every plugin's record, in plugin-name order, read leniently.
pub(super) fn load(conn: &Connection, db: &Path) -> Result<Vec<StoredSettings>, StoreError> {
    let mut query = conn
        .prepare("SELECT plugin, revision, settings FROM settings ORDER BY plugin")
        .map_err(sqlite(db))?;
    let rows = query
        .query_map([], |row| Ok((row.get::<_, String>(0)?, row.get(1)?, row.get::<_, String>(2)?)))
        .map_err(sqlite(db))?;
    let mut records = Vec::new();
    for row in rows {
        let (plugin, revision, text) = row.map_err(sqlite(db))?;
        records.push(row_record(db, &plugin, revision, &text));
    }
    Ok(records)
}

/// A row as a record, leniently.
fn row_record(db: &Path, plugin: &str, revision: i64, settings: &str) -> StoredSettings {
    let at = format!("{}#settings/{plugin}", db.display());
    let Ok(revision) = u64::try_from(revision) else {
        let message = format!("revision {revision} is negative");
        return StoredSettings::Damaged { plugin: plugin.to_owned(), at, message, revision: 0 };
    };
    read_row(plugin, &at, revision, settings)
}
