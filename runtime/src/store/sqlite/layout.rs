//! The database's layout: its tables, the version that names them, and what opening a database
//! of another version does.
//!
//! ```sql
//! -- Every event, in commit order (the rowid). `line` is the event's JSONL line.
//! CREATE TABLE events (session TEXT NOT NULL, seq INTEGER NOT NULL, line TEXT NOT NULL);
//! -- Where each event of a session is: the index a session is read back through.
//! CREATE TABLE events_by_session (session TEXT NOT NULL, seq INTEGER NOT NULL,
//!     row INTEGER NOT NULL, PRIMARY KEY (session, seq)) WITHOUT ROWID;
//! -- One row: the events up to this rowid are in events_by_session.
//! CREATE TABLE events_indexed (upto INTEGER NOT NULL);
//! -- Each plugin's latest accepted run-time settings (`settings` is the JSON the plugin shows).
//! CREATE TABLE settings (plugin TEXT PRIMARY KEY, revision INTEGER NOT NULL,
//!     settings TEXT NOT NULL);
//! -- What each session's marks decided last: its open turn, its pending wake-up (see `heads`).
//! CREATE TABLE session_heads (session TEXT PRIMARY KEY, open_turn INTEGER, wake_at INTEGER)
//!     WITHOUT ROWID;
//! PRAGMA user_version = 4;
//! ```
//!
//! `events` holds every event at any time, so a tool that only wants the lines can read that
//! table alone (`SELECT line FROM events WHERE session = ? ORDER BY seq`), at the price of a scan
//! of every row per session; `rein check` reads a session through `events_by_session` and the
//! events after `upto`, which are the store's unindexed tail (see the [writer](super::writer) for
//! why the index lags behind).
//!
//! # Opening a database of another layout
//!
//! - No `events` table (a new or empty file): the tables are created.
//! - Version 0 with an `events` table: the first layout (one table clustered by
//!   `(session, seq)`). It is migrated in one transaction: the rows are copied, byte for byte, into
//!   the new `events` (in session order), indexed, their heads filled, and the old table dropped. A crash during the
//!   migration leaves the old layout as it was.
//! - Version 2 (before plugin settings were kept): the `settings` table is added, then the heads
//!   as for version 3.
//! - Version 3 (before the per-session heads): the `session_heads` table is added and filled
//!   from the rows (the fold of the lines that can change a head), in one transaction; a
//!   failure leaves the database as it was.
//! - Version 4: used as is.
//! - Any other version (written by a newer rein): refused, naming the version; nothing is changed.

use rusqlite::Connection;

use super::heads;

/// The layout's version (`PRAGMA user_version`).
pub(super) const VERSION: i64 = 4;

/// The tables of version 3, created together.
const TABLES_3: &str = "
    CREATE TABLE events (session TEXT NOT NULL, seq INTEGER NOT NULL, line TEXT NOT NULL);
    CREATE TABLE events_by_session (session TEXT NOT NULL, seq INTEGER NOT NULL, row INTEGER NOT NULL, PRIMARY KEY (session, seq)) WITHOUT ROWID;
    CREATE TABLE events_indexed (upto INTEGER NOT NULL);
    INSERT INTO events_indexed (upto) VALUES (0);
    CREATE TABLE settings (plugin TEXT PRIMARY KEY, revision INTEGER NOT NULL, settings TEXT NOT NULL);";

/// From version 2 to 3.
const ADD_SETTINGS: &str = "
    CREATE TABLE settings (plugin TEXT PRIMARY KEY, revision INTEGER NOT NULL, settings TEXT NOT NULL);";

/// What opening a database does to its layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Plan {
    /// Create the tables (nothing is there).
    Create,
    /// Move the first layout's rows into this one.
    Migrate,
    /// Add the `settings` table to a version-2 database, then the heads.
    AddSettings,
    /// Add (and fill) the `session_heads` table of a version-3 database.
    AddHeads,
    /// The layout is this one.
    Ready,
    /// A layout this rein does not know: refuse.
    Refuse(i64),
}

/// Decides what to do with a database of `version` that has (or lacks) an `events` table.
pub(super) fn plan(version: i64, has_events: bool) -> Plan {
    match (version, has_events) {
        (VERSION, true) => Plan::Ready,
        (3, true) => Plan::AddHeads,
        (2, true) => Plan::AddSettings,
        (0, false) => Plan::Create,
        (0, true) => Plan::Migrate,
        (other, _) => Plan::Refuse(other),
    }
}

/// Brings the database behind `conn` (the writer's connection) to this layout, or refuses it.
/// The error is a message for [`StoreError::Sqlite`](crate::store::StoreError::Sqlite).
pub(super) fn prepare(conn: &Connection) -> Result<(), String> {
    let version: i64 =
        conn.query_row("PRAGMA user_version", [], |row| row.get(0)).map_err(|e| e.to_string())?;
    let has_events: bool = conn
        .query_row(
            "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'events'",
            [],
            |row| row.get(0),
        )
        .map_err(|e| e.to_string())?;
    let plan = plan(version, has_events);
    let (script, fill) = match plan {
        Plan::Ready => return Ok(()),
        Plan::Refuse(version) => {
            return Err(format!(
                "the database has layout version {version}; this rein reads version {VERSION} \
                 (and migrates versions 0, 2 and 3): refusing to touch it"
            ));
        }
        Plan::Create => (format!("{TABLES_3} {}", heads::TABLE), false),
        Plan::AddSettings => (format!("{ADD_SETTINGS} {}", heads::TABLE), true),
        Plan::AddHeads => (heads::TABLE.to_owned(), true),
        Plan::Migrate => (
            format!(
                "ALTER TABLE events RENAME TO events_first_layout;
                 {TABLES_3} {}
                 INSERT INTO events (session, seq, line)
                     SELECT session, seq, line FROM events_first_layout ORDER BY session, seq;
                 INSERT INTO events_by_session (session, seq, row) SELECT session, seq, rowid FROM events;
                 UPDATE events_indexed SET upto = (SELECT coalesce(max(rowid), 0) FROM events);
                 DROP TABLE events_first_layout;",
                heads::TABLE
            ),
            true,
        ),
    };
    let run = || -> rusqlite::Result<()> {
        conn.execute_batch("BEGIN IMMEDIATE")?;
        conn.execute_batch(&script)?;
        if fill {
            heads::fill(conn)?;
        }
        conn.execute_batch(&format!("PRAGMA user_version = {VERSION}; COMMIT;"))
    };
    run().map_err(|e| {
        if !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        match plan {
            Plan::Migrate => format!("migrating the first layout (left as it was): {e}"),
            Plan::AddSettings => format!("adding the settings table (left as it was): {e}"),
            Plan::AddHeads => format!("adding the session heads (left as it was): {e}"),
            _ => format!("creating the tables: {e}"),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_follows_the_version_and_the_events_table() {
        let cases = [
            (0, false, Plan::Create),
            (0, true, Plan::Migrate),
            (4, true, Plan::Ready),
            (3, true, Plan::AddHeads),
            (2, true, Plan::AddSettings),
            (2, false, Plan::Refuse(2)),
            (3, false, Plan::Refuse(3)),
            (4, false, Plan::Refuse(4)),
            (1, true, Plan::Refuse(1)),
            (5, true, Plan::Refuse(5)),
            (7, false, Plan::Refuse(7)),
        ];
        for (version, has_events, want) in cases {
            assert_eq!(plan(version, has_events), want, "version {version}, events {has_events}");
        }
    }

    const ALL: [&str; 5] =
        ["events", "events_by_session", "events_indexed", "session_heads", "settings"];

    fn tables(conn: &Connection) -> Vec<String> {
        let mut query = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .unwrap();
        query.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
    }

    #[test]
    fn a_first_layout_database_is_migrated_row_for_row() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE events (session TEXT NOT NULL, seq INTEGER NOT NULL, line TEXT NOT NULL, \
             PRIMARY KEY (session, seq)) WITHOUT ROWID;
             INSERT INTO events VALUES ('b', 0, 'b0'), ('a', 1, 'a1'), ('a', 0, 'a0'), ('b', 2, 'b2');",
        )
        .unwrap();
        prepare(&conn).unwrap();
        assert_eq!(tables(&conn), ALL);
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(version, VERSION);
        let heads = heads::read_all(&conn, &[]).unwrap();
        let next: Vec<(String, u64)> =
            heads.into_iter().map(|h| (h.session, h.head.unwrap().next_seq)).collect();
        assert_eq!(next, [("a".into(), 2), ("b".into(), 3)], "each session's next seq");
        let mut query = conn
            .prepare(
                "SELECT b.session, b.seq, e.line FROM events_by_session b \
                 JOIN events e ON e.rowid = b.row ORDER BY b.session, b.seq",
            )
            .unwrap();
        let rows: Vec<(String, i64, String)> = query
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let want = [("a", 0, "a0"), ("a", 1, "a1"), ("b", 0, "b0"), ("b", 2, "b2")];
        let want: Vec<(String, i64, String)> =
            want.iter().map(|&(s, q, l)| (s.into(), q, l.into())).collect();
        assert_eq!(rows, want, "every row, the gap at b/1 kept for the load to report");
        let upto: i64 =
            conn.query_row("SELECT upto FROM events_indexed", [], |r| r.get(0)).unwrap();
        assert_eq!(upto, 4, "every migrated row is indexed");
        prepare(&conn).unwrap();
        assert_eq!(tables(&conn).len(), 5, "a second open changes nothing");
    }

    #[test]
    fn a_failed_migration_leaves_the_first_layout_as_it_was() {
        let conn = Connection::open_in_memory().unwrap();
        // A first-layout table without the `line` column cannot be migrated.
        conn.execute_batch(
            "CREATE TABLE events (session TEXT, seq INTEGER); INSERT INTO events VALUES ('a', 0)",
        )
        .unwrap();
        let err = prepare(&conn).unwrap_err();
        assert!(err.contains("migrating the first layout (left as it was)"), "{err}");
        assert_eq!(tables(&conn), ["events"]);
        let rows: i64 = conn.query_row("SELECT count(*) FROM events", [], |r| r.get(0)).unwrap();
        assert_eq!(rows, 1);
    }

    #[test]
    fn a_version_2_database_gains_the_settings_table_and_keeps_its_rows() {
        let conn = Connection::open_in_memory().unwrap();
        let v2 = TABLES_3.replace(ADD_SETTINGS.trim(), "");
        conn.execute_batch(&format!("{v2} PRAGMA user_version = 2;")).unwrap();
        conn.execute_batch("INSERT INTO events VALUES ('a', 0, 'a0')").unwrap();
        assert_eq!(tables(&conn), ["events", "events_by_session", "events_indexed"]);
        prepare(&conn).unwrap();
        assert_eq!(tables(&conn), ALL);
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(version, VERSION);
        let rows: i64 = conn.query_row("SELECT count(*) FROM events", [], |r| r.get(0)).unwrap();
        assert_eq!(rows, 1);
    }

    #[test]
    fn a_newer_layout_is_refused_untouched() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE events (x); PRAGMA user_version = 5").unwrap();
        let err = prepare(&conn).unwrap_err();
        assert!(err.contains("layout version 5") && err.contains("refusing"), "{err}");
        assert_eq!(tables(&conn), ["events"]);
    }

    #[test]
    fn a_version_3_database_gains_heads_folded_from_its_rows() {
        use crate::event::{Envelope, Event, TurnEnd, TurnEndReason, TurnStart, UserMessage};
        use crate::store::Head;
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(&format!("{TABLES_3} PRAGMA user_version = 3;")).unwrap();
        let line = |seq, event| serde_json::to_string(&Envelope { seq, time: 10, event }).unwrap();
        let start = |turn| Event::TurnStart(TurnStart { turn });
        let end = |turn| Event::TurnEnd(TurnEnd { turn, reason: TurnEndReason::Completed });
        // A message whose text looks like a mark is not one.
        let tricky = Event::UserMessage(UserMessage { text: r#""type":"turn/start""#.into() });
        let rows = [
            ("open", line(0, start(1))),
            ("open", line(1, end(1))),
            ("open", line(2, start(2))),
            ("open", line(3, tricky.clone())),
            ("closed", line(0, start(1))),
            ("closed", line(1, end(1))),
            ("closed", line(2, tricky)),
            ("junk", "not json".into()),
        ];
        for (session, line) in &rows {
            let seq: i64 = conn
                .query_row("SELECT count(*) FROM events WHERE session = ?1", [session], |r| {
                    r.get(0)
                })
                .unwrap();
            conn.execute(
                "INSERT INTO events VALUES (?1, ?2, ?3)",
                rusqlite::params![session, seq, line],
            )
            .unwrap();
        }
        prepare(&conn).unwrap();
        assert_eq!(tables(&conn), ALL);
        let head = |next_seq, open_turn| Ok(Head { next_seq, open_turn, wake_at: None });
        conn.execute_batch(
            "INSERT INTO events_by_session (session, seq, row) SELECT session, seq, rowid FROM events",
        )
        .unwrap();
        let got: Vec<(String, Result<Head, String>)> =
            heads::read_all(&conn, &[]).unwrap().into_iter().map(|h| (h.session, h.head)).collect();
        let want = [
            ("closed".into(), head(3, None)),
            ("junk".into(), head(1, None)),
            ("open".into(), head(4, Some(2))),
        ];
        assert_eq!(got, want);
    }
}
