//! The run's own statements on the cluster's database (the nodes write everything else): the
//! audit of who wrote each event, what the partitions table says of the owners, and whether the
//! cluster is quiet (no open turn, no request waiting).
//!
//! # The audit
//!
//! A statement-level trigger on `events` copies every appended row's `(session, seq)` with the
//! writing connection's `application_name` — each node incarnation connects under its own name
//! (`n2.1`) — into `rein_stress_writes`, in the append's own transaction: a row of the audit
//! exists exactly when its event does. The run installs it before its nodes start, reads it at
//! the end, and removes it (table, trigger and function); a run killed midway leaves them,
//! and the next run on the database replaces them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use tokio_postgres::{Client, NoTls};

use crate::runtime::store::postgres::{Target, message};

/// The audit, installed (or replaced) empty.
const INSTALL_AUDIT: &str = "
    CREATE TABLE IF NOT EXISTS rein_stress_writes (
        session text NOT NULL, seq bigint NOT NULL, writer text NOT NULL);
    TRUNCATE rein_stress_writes;
    CREATE OR REPLACE FUNCTION rein_stress_audit() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO rein_stress_writes (session, seq, writer)
            SELECT session, seq, current_setting('application_name') FROM appended;
        RETURN NULL;
    END $$;
    DROP TRIGGER IF EXISTS rein_stress_audit ON events;
    CREATE TRIGGER rein_stress_audit AFTER INSERT ON events
        REFERENCING NEW TABLE AS appended
        FOR EACH STATEMENT EXECUTE FUNCTION rein_stress_audit();";

/// The audit, removed.
const REMOVE_AUDIT: &str = "
    DROP TRIGGER IF EXISTS rein_stress_audit ON events;
    DROP FUNCTION IF EXISTS rein_stress_audit();
    DROP TABLE IF EXISTS rein_stress_writes;";

/// A connection of the run's own, on a task of its own.
pub(crate) async fn connect(url: &str) -> Result<Client, String> {
    let target = Target::parse(url)?;
    let (client, connection) = target
        .config()
        .connect(NoTls)
        .await
        .map_err(|e| format!("{}: {}", target.shown(), message(&e)))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

fn failed(e: &tokio_postgres::Error) -> String {
    message(e)
}

/// Installs the audit (the tables must exist: a store opened on the database made them).
pub(crate) async fn install_audit(client: &Client) -> Result<(), String> {
    client.batch_execute(INSTALL_AUDIT).await.map_err(|e| failed(&e))
}

/// Removes the audit.
pub(crate) async fn remove_audit(client: &Client) -> Result<(), String> {
    client.batch_execute(REMOVE_AUDIT).await.map_err(|e| failed(&e))
}

/// Who wrote each event since the audit was installed: session → seq → writer.
pub(crate) async fn writers(
    client: &Client,
) -> Result<HashMap<String, BTreeMap<u64, String>>, String> {
    let rows = client
        .query("SELECT session, seq, writer FROM rein_stress_writes", &[])
        .await
        .map_err(|e| failed(&e))?;
    let mut writers: HashMap<String, BTreeMap<u64, String>> = HashMap::new();
    for row in rows {
        let session: String = row.try_get(0).map_err(|e| failed(&e))?;
        let seq: i64 = row.try_get(1).map_err(|e| failed(&e))?;
        let writer: String = row.try_get(2).map_err(|e| failed(&e))?;
        writers.entry(session).or_default().insert(u64::try_from(seq).unwrap_or(0), writer);
    }
    Ok(writers)
}

/// The cluster's number of partitions, once its first node wrote it.
pub(crate) async fn partitions(client: &Client) -> Result<Option<u32>, String> {
    let row = client
        .query_opt("SELECT value FROM cluster WHERE key = 'partitions'", &[])
        .await
        .map_err(|e| failed(&e))?;
    Ok(row.and_then(|row| row.try_get::<_, String>(0).ok()).and_then(|v| v.parse().ok()))
}

/// The owner of every partition whose lease has not run out (database clock).
pub(crate) async fn owners(client: &Client) -> Result<Vec<(u32, String)>, String> {
    let rows = client
        .query(
            "SELECT partition, node FROM partitions WHERE expires_at > now() AND node IS NOT NULL",
            &[],
        )
        .await
        .map_err(|e| failed(&e))?;
    Ok(rows
        .iter()
        .filter_map(|row| {
            let partition: i32 = row.try_get(0).ok()?;
            Some((u32::try_from(partition).ok()?, row.try_get(1).ok()?))
        })
        .collect())
}

/// The partitions `node` holds on a lease that has not run out, and when the latest of those
/// leases runs out (ms since the epoch, database clock).
pub(crate) async fn held_by(
    client: &Client,
    node: &str,
) -> Result<(BTreeSet<u32>, Option<u64>), String> {
    let rows = client
        .query(
            "SELECT partition, (extract(epoch FROM expires_at) * 1000)::float8
             FROM partitions WHERE node = $1 AND expires_at > now()",
            &[&node],
        )
        .await
        .map_err(|e| failed(&e))?;
    let mut held = BTreeSet::new();
    let mut expiry: Option<f64> = None;
    for row in rows {
        let partition: i32 = row.try_get(0).map_err(|e| failed(&e))?;
        let expires: f64 = row.try_get(1).map_err(|e| failed(&e))?;
        held.insert(u32::try_from(partition).unwrap_or(0));
        expiry = Some(expiry.map_or(expires, |e| e.max(expires)));
    }
    Ok((held, expiry.map(|e| e.max(0.0) as u64)))
}

/// The sessions among `wanted` that have an open turn, and how many forwarded requests no node
/// answered yet: what is still going on.
pub(crate) async fn busy(
    client: &Client,
    wanted: impl Fn(&str) -> bool,
) -> Result<(Vec<String>, i64), String> {
    let rows = client
        .query("SELECT session FROM session_heads WHERE open_turn IS NOT NULL", &[])
        .await
        .map_err(|e| failed(&e))?;
    let open = rows
        .iter()
        .filter_map(|row| row.try_get::<_, String>(0).ok())
        .filter(|session| wanted(session))
        .collect();
    let pending: i64 = client
        .query_one("SELECT count(*) FROM commands WHERE NOT done", &[])
        .await
        .and_then(|row| row.try_get(0))
        .map_err(|e| failed(&e))?;
    Ok((open, pending))
}
