//! The statements a node's keeper runs on the `cluster`, `partitions` and `nodes` tables (schema
//! version 4, see `store::postgres`'s `schema`). Every time is the database's clock: a lease
//! ends at the database's `now()` plus the lease, whatever the nodes' clocks say.

use std::collections::BTreeSet;
use std::time::Duration;

use tokio_postgres::Client;

use crate::store::postgres::fence::Held;

type Error = tokio_postgres::Error;

fn seconds(lease: Duration) -> f64 {
    lease.as_secs_f64()
}

/// The cluster's number of partitions: `requested` (or [`DEFAULT_PARTITIONS`]) when the database
/// has none yet — written with every partition's row — else the stored one. `Err` with the
/// stored number when `requested` names another.
///
/// [`DEFAULT_PARTITIONS`]: crate::store::postgres::partition::DEFAULT_PARTITIONS
pub(crate) async fn init(
    client: &mut Client,
    requested: Option<u32>,
) -> Result<Result<u32, u32>, Error> {
    use crate::store::postgres::partition::DEFAULT_PARTITIONS;
    let wanted = requested.unwrap_or(DEFAULT_PARTITIONS);
    let tx = client.transaction().await?;
    tx.execute(
        "INSERT INTO cluster (key, value) VALUES ('partitions', $1) ON CONFLICT (key) DO NOTHING",
        &[&wanted.to_string()],
    )
    .await?;
    let row = tx.query_one("SELECT value FROM cluster WHERE key = 'partitions'", &[]).await?;
    let stored: String = row.try_get(0)?;
    let stored: u32 = stored.parse().unwrap_or(0);
    if requested.is_some_and(|r| r != stored) || stored == 0 {
        tx.rollback().await?;
        return Ok(Err(stored));
    }
    let last = i32::try_from(stored - 1).unwrap_or(i32::MAX);
    tx.execute(
        "INSERT INTO partitions (partition) SELECT generate_series(0, $1) ON CONFLICT DO NOTHING",
        &[&last],
    )
    .await?;
    tx.commit().await?;
    Ok(Ok(stored))
}

/// What a round's first trip learnt.
pub(crate) struct Round {
    /// The held partitions whose lease was renewed.
    pub(crate) renewed: BTreeSet<u32>,
    /// The live nodes (heartbeat within a lease), this one included.
    pub(crate) live: usize,
}

fn arrays(held: &[Held]) -> (Vec<i32>, Vec<i64>) {
    held.iter()
        .map(|h| {
            (
                i32::try_from(h.partition).unwrap_or(i32::MAX),
                i64::try_from(h.epoch).unwrap_or(i64::MAX),
            )
        })
        .unzip()
}

/// The heartbeat, the renewal of every held partition in one statement, and the live nodes: one
/// pipelined trip.
pub(crate) async fn round(
    client: &Client,
    node: &str,
    addr: &str,
    lease: Duration,
    held: &[Held],
) -> Result<Round, Error> {
    let (partitions, epochs) = arrays(held);
    let secs = seconds(lease);
    let beat: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&node, &addr];
    let renewing: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
        [&node, &secs, &partitions, &epochs];
    let counting: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&secs];
    let heartbeat = client.execute(
        "INSERT INTO nodes (node, addr, heartbeat_at) VALUES ($1, $2, now())
         ON CONFLICT (node) DO UPDATE SET addr = excluded.addr, heartbeat_at = now()",
        &beat,
    );
    let renew = client.query(
        "UPDATE partitions p SET expires_at = now() + make_interval(secs => $2)
         FROM unnest($3::int[], $4::bigint[]) AS h(partition, epoch)
         WHERE p.partition = h.partition AND p.epoch = h.epoch AND p.node = $1
         RETURNING p.partition",
        &renewing,
    );
    let live = client.query_one(
        "SELECT count(*) FROM nodes WHERE heartbeat_at > now() - make_interval(secs => $1)",
        &counting,
    );
    let (_, renewed, live) = tokio::try_join!(heartbeat, renew, live)?;
    let renewed = renewed
        .iter()
        .map(|row| row.try_get::<_, i32>(0).map(|p| u32::try_from(p).unwrap_or(u32::MAX)))
        .collect::<Result<_, _>>()?;
    let live: i64 = live.try_get(0)?;
    Ok(Round { renewed, live: usize::try_from(live).unwrap_or(1).max(1) })
}

/// A partition taken: held at its new epoch, and the node whose lease on it had run out (`None`:
/// it was free — never held, or given back).
pub(crate) struct Taken {
    pub(crate) held: Held,
    pub(crate) from: Option<String>,
}

/// Takes at most `count` free or expired partitions (skipping any a batch holds right now),
/// bumping each one's epoch: what this node now holds.
pub(crate) async fn take(
    client: &Client,
    node: &str,
    addr: &str,
    lease: Duration,
    count: usize,
) -> Result<Vec<Taken>, Error> {
    let count = i64::try_from(count).unwrap_or(i64::MAX);
    let rows = client
        .query(
            "UPDATE partitions p SET node = $1, addr = $2, epoch = p.epoch + 1,
                 expires_at = now() + make_interval(secs => $3)
             FROM (SELECT partition, node AS was FROM partitions WHERE expires_at < now()
                   ORDER BY random() LIMIT $4 FOR UPDATE SKIP LOCKED) AS t
             WHERE p.partition = t.partition
             RETURNING p.partition, p.epoch, t.was",
            &[&node, &addr, &seconds(lease), &count],
        )
        .await?;
    rows.iter()
        .map(|row| {
            let partition: i32 = row.try_get(0)?;
            let epoch: i64 = row.try_get(1)?;
            let held = Held {
                partition: u32::try_from(partition).unwrap_or(u32::MAX),
                epoch: u64::try_from(epoch).unwrap_or(0),
            };
            Ok(Taken { held, from: row.try_get(2)? })
        })
        .collect()
}

/// Gives `held` back (still this node's at those epochs): free for any node at once.
pub(crate) async fn give_back(client: &Client, node: &str, held: &[Held]) -> Result<u64, Error> {
    let (partitions, epochs) = arrays(held);
    client
        .execute(
            "UPDATE partitions p SET node = NULL, addr = NULL, expires_at = '-infinity'
             FROM unnest($2::int[], $3::bigint[]) AS h(partition, epoch)
             WHERE p.partition = h.partition AND p.epoch = h.epoch AND p.node = $1",
            &[&node, &partitions, &epochs],
        )
        .await
}

/// The node leaves: its heartbeat row goes, so the others count it out at once.
pub(crate) async fn leave(client: &Client, node: &str) -> Result<u64, Error> {
    client.execute("DELETE FROM nodes WHERE node = $1", &[&node]).await
}
