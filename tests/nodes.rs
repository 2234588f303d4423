//! Several `rein node` processes on one throwaway PostgreSQL (SPEC §12), killed, paused and cut
//! off for real, talking to the providers' scripted server through the DeepSeek preset:
//!
//! - a node killed (`kill -9`) in a retry wait: the turn resumes on another node with the same
//!   `retryId`, its next attempt no earlier than the deadline and no later than deadline + lease
//!   + 1 s;
//! - a paused node (`SIGSTOP` longer than its lease, then `SIGCONT`) writes nothing after its
//!   partitions moved;
//! - a prompt and a cancel sent to a node that does not serve the session reach the one that
//!   does (the console's API);
//! - a settings patch on one node is in force on all, and a stale one refused on each;
//! - a PostgreSQL restart (`pg_ctl restart -m immediate`) loses no acknowledged event;
//! - a node cut off from PostgreSQL (a TCP proxy that stops passing anything) loses its leases,
//!   and its sessions continue on the other node.
//!
//! Every wait is on a log line or an event (read from the database), never a fixed sleep; every
//! log ends with the invariant check. Without PostgreSQL installed the tests say how to install
//! it and pass; with `CI=true` they fail.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use rein::invariant::check_finished_log;
use rein::runtime::event::{CancelCause, Envelope, Event, TurnEndReason};
use rein::runtime::store::postgres::PostgresStore;
use rein::runtime::store::postgres::partition::partition_of;
use rein::runtime::store::{Durability, SessionStore};
use rein_testkit::PgCluster;
use rein_testkit::console::{Console, call};
use rein_testkit::log::{retries, started, turn_ends};
use rein_testkit::proxy::Proxy;
use rein_testkit::server::{Part, Reply, Server, answer, delta, error};
use serde_json::json;

const KEY: &str = "sk-nodes-secret";
const PARTITIONS: u32 = 8;
const LEASE_MS: u64 = 1000;
/// llm-retry's one delay (no jitter): long enough for a kill and a takeover inside it.
const DELAY_MS: u64 = 3000;
const WAIT: Duration = Duration::from_secs(30);

/// The cluster of a test: the database, the scripted model server, the nodes' directory.
struct Cluster {
    pg: PgCluster,
    url: String,
    server: Server,
    dir: tempfile::TempDir,
    store: Arc<PostgresStore>,
}

impl Cluster {
    async fn start(name: &str, script: Vec<Reply>) -> Option<Cluster> {
        let pg = PgCluster::start()?;
        let url = pg.create_database(name);
        let server = Server::start(script).await;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("rein.toml"),
            format!(
                "chain = [\"llm-retry\", \"auto-retry\"]\n\n[plugins.llm-retry]\n\
                 maxTransientRetries = 2\ninitialDelayMs = {DELAY_MS}\nmaxDelayMs = {DELAY_MS}\n\
                 jitterRatio = 0\n"
            ),
        )
        .unwrap();
        // The tables first: the test reads the database before any node did.
        let store = Arc::new(PostgresStore::open(&url, Durability::Os).await.unwrap());
        Some(Cluster { pg, url, server, dir, store })
    }

    /// `rein node` `id` on the cluster, through `url` (the database's, or a proxy's).
    fn node_via(&self, id: &str, url: &str) -> Console {
        let base = self.server.base_url();
        let env = [("DEEPSEEK_API_KEY", KEY), ("DEEPSEEK_BASE_URL", base.as_str())];
        let partitions = PARTITIONS.to_string();
        let lease = LEASE_MS.to_string();
        let args = [
            "--store",
            url,
            "--partitions",
            &partitions,
            "--lease-ms",
            &lease,
            "--provider",
            "deepseek",
        ];
        Console::start_node(self.dir.path(), id, &args, &env)
    }

    fn node(&self, id: &str) -> Console {
        self.node_via(id, &self.url)
    }

    /// The partitions `node` holds now, as the database says.
    async fn held_by(&self, node: &str) -> Vec<u32> {
        let client = raw(&self.url).await;
        let rows = client
            .query(
                "SELECT partition FROM partitions WHERE node = $1 AND expires_at > now() \
                 ORDER BY partition",
                &[&node],
            )
            .await
            .unwrap();
        rows.iter().map(|r| u32::try_from(r.get::<_, i32>(0)).unwrap()).collect()
    }

    /// A fresh session id served by `node` now.
    async fn session_on(&self, node: &str, tag: &str) -> String {
        let held = self.held_by(node).await;
        assert!(!held.is_empty(), "{node} holds nothing");
        (0..)
            .map(|i| format!("{tag}-{i}"))
            .find(|s| held.contains(&partition_of(s, PARTITIONS)))
            .unwrap()
    }

    /// The session's log once `done` says so (read every 20 ms, up to [`WAIT`]).
    async fn log_until(
        &self,
        session: &str,
        what: &str,
        done: impl Fn(&[Envelope]) -> bool,
    ) -> Vec<Envelope> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let events = self.store.load(session).await.unwrap().map(|l| l.events);
            let events = events.unwrap_or_default();
            if done(&events) {
                return events;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{session}: {what} never happened; log: {:?}",
                events.iter().map(Envelope::kind).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn raw(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    client
}

/// Two nodes, `a` then `b`, each holding its share.
fn pair(cluster: &Cluster) -> (Console, Console) {
    let a = cluster.node("a");
    assert!(a.wait_for_stderr("rein node a: took 8 partitions", WAIT), "{}", a.stderr());
    let b = cluster.node("b");
    assert!(b.wait_for_stderr("rein node b: took 4 partitions", WAIT), "{}", b.stderr());
    assert!(a.wait_for_stderr("rein node a: gave back 4 partitions", WAIT), "{}", a.stderr());
    (a, b)
}

/// Creates `session` and prompts it through `node`'s API.
async fn prompt(node: &Console, session: &str, text: &str) {
    let sessions = format!("{}/api/sessions", node.url);
    let made = call("POST", &sessions, Some(json!({"id": session}))).await;
    assert_eq!(made.status, 201, "{:?}", made.body);
    let sent = call(
        "POST",
        &format!("{}/api/sessions/{session}/prompt", node.url),
        Some(json!({"text": text})),
    )
    .await;
    assert_eq!(sent.status, 202, "{:?}", sent.body);
}

fn has(kind: &'static str) -> impl Fn(&[Envelope]) -> bool {
    move |events| events.iter().any(|e| e.kind() == kind)
}

fn ended(events: &[Envelope]) -> bool {
    events.last().is_some_and(|e| e.kind() == "agent/idle") && !turn_ends(events).is_empty()
}

fn checked(events: &[Envelope]) {
    let violations = check_finished_log(events);
    assert!(violations.is_empty(), "{violations:?}");
}

/// Stops a node (SIGTERM: drained, exit 0); its stderr never shows a secret.
fn stop(node: Console) -> String {
    let (code, stderr) = node.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        !stderr.contains(KEY) && !stderr.contains(rein_testkit::postgres::PASSWORD),
        "{stderr}"
    );
    stderr
}

/// The retry wait's deadline and the time its next attempt started, with the `retryId`s of the
/// `llm/retry` and of every `llm/retry-started`.
fn wait_and_start(events: &[Envelope]) -> (u64, u64, String, Vec<String>) {
    let (at, retry) = retries(events).into_iter().next().expect("a retry was scheduled");
    let deadline = at + retry.delay_ms as u64;
    let starts = started(events);
    let begun = starts.first().map(|(t, _)| *t).expect("the retry started");
    let ids = starts.iter().map(|(_, s)| s.retry_id.clone()).collect();
    (deadline, begun, retry.retry_id, ids)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_in_a_retry_wait_has_its_turn_resumed_by_another_at_the_original_deadline() {
    let script =
        vec![error(503, "overloaded"), answer(&["resumed", " elsewhere"]), answer(&["then"])];
    let Some(cluster) = Cluster::start("killed", script).await else { return };
    let (a, b) = pair(&cluster);
    let session = cluster.session_on("a", "killed").await;
    // Prompted through b, which forwards it to a.
    prompt(&b, &session, "hello").await;
    cluster.log_until(&session, "the retry wait", has("llm/retry")).await;
    a.signal("KILL");
    // A prompt sent while nobody serves the session waits for the partition's next owner.
    let again = call(
        "POST",
        &format!("{}/api/sessions/{session}/prompt", b.url),
        Some(json!({"text": "and then?"})),
    )
    .await;
    assert_eq!(again.status, 202, "{:?}", again.body);
    assert!(
        b.wait_for_stderr("taken over from a", WAIT) && b.wait_for_stderr("resumed 1 turn", WAIT),
        "{}",
        b.stderr()
    );
    let events = cluster
        .log_until(&session, "both turns' ends", |e| turn_ends(e).len() == 2 && ended(e))
        .await;
    assert_eq!(turn_ends(&events), [TurnEndReason::Completed, TurnEndReason::Completed]);
    assert!(events.iter().any(|e| e.kind() == "turn/resumed"), "{events:?}");
    let (deadline, begun, retry_id, started_ids) = wait_and_start(&events);
    assert_eq!(started_ids, [retry_id], "one start, of the same chain");
    assert!(begun >= deadline, "started {} ms early", deadline - begun);
    let late = begun - deadline;
    assert!(late <= LEASE_MS + 1000, "started {late} ms after its deadline");
    assert_eq!(
        cluster.server.seen().len(),
        3,
        "a failed attempt, one after the wait, the next turn"
    );
    checked(&events);
    stop(b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_node_writes_nothing_after_its_partitions_moved() {
    let script = vec![error(503, "overloaded"), answer(&["from b"])];
    let Some(cluster) = Cluster::start("paused", script).await else { return };
    let (a, b) = pair(&cluster);
    let session = cluster.session_on("a", "paused").await;
    prompt(&a, &session, "hello").await;
    let before = cluster.log_until(&session, "the retry wait", has("llm/retry")).await;
    a.signal("STOP");
    assert!(b.wait_for_stderr("taken over from a", WAIT), "{}", b.stderr());
    assert!(b.wait_for_stderr("resumed 1 turn", WAIT), "{}", b.stderr());
    // a wakes while b waits out the rest of the retry: a's own wait is due at the same deadline.
    a.signal("CONT");
    let events = cluster.log_until(&session, "the resumed turn's end", ended).await;
    assert!(a.wait_for_stderr("rein node a: lost", WAIT), "{}", a.stderr());
    assert_eq!(&events[..before.len()], &before[..], "what a wrote stays as it was");
    let (_, _, retry_id, started_ids) = wait_and_start(&events);
    assert_eq!(started_ids, [retry_id], "the wait started once, on b");
    let resumed = events.iter().position(|e| e.kind() == "turn/resumed").unwrap();
    assert_eq!(resumed, before.len(), "nothing of a's between its pause and b's takeover");
    assert_eq!(turn_ends(&events), [TurnEndReason::Completed]);
    assert_eq!(cluster.server.seen().len(), 2, "a sent nothing after its pause");
    checked(&events);
    // a, still alive, serves again what it holds after the next rounds; the session's log stays
    // whole whoever serves it.
    stop(a);
    stop(b);
    let after = cluster.store.load(&session).await.unwrap().unwrap().events;
    assert_eq!(after.len(), events.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_and_a_cancel_sent_to_a_node_that_does_not_serve_the_session_reach_its_node() {
    let stall = Reply::Sse(vec![delta("thinking"), Part::Stall]);
    let script = vec![answer(&["forwarded", " and back"]), stall];
    let Some(cluster) = Cluster::start("forward", script).await else { return };
    let (a, b) = pair(&cluster);
    let session = cluster.session_on("b", "fwd").await;
    // Through a, the session b serves: a turn that completes.
    prompt(&a, &session, "first").await;
    cluster.log_until(&session, "the first turn's end", ended).await;
    // Then one that stalls, cancelled through a.
    let sent = call(
        "POST",
        &format!("{}/api/sessions/{session}/prompt", a.url),
        Some(json!({"text": "second"})),
    )
    .await;
    assert_eq!(sent.status, 202);
    cluster
        .log_until(&session, "the second turn's chunk", |events| {
            events.iter().filter(|e| e.kind() == "assistant/chunk").count() == 3
        })
        .await;
    let cancel = format!("{}/api/sessions/{session}/cancel", a.url);
    let cancelled = call("POST", &cancel, Some(json!({}))).await;
    assert_eq!(cancelled.body, json!({"cancelled": true}), "{:?}", cancelled.body);
    let events = cluster
        .log_until(&session, "the cancelled turn's end", |e| turn_ends(e).len() == 2 && ended(e))
        .await;
    assert_eq!(
        turn_ends(&events),
        [TurnEndReason::Completed, TurnEndReason::Aborted { cause: CancelCause::User }]
    );
    // a's API reads the session b serves, and its sessions list says b serves it; so does a
    // console on the cluster's database.
    let one = call("GET", &format!("{}/api/sessions/{session}", a.url), None).await;
    assert_eq!(one.body["turns"], json!(2), "{:?}", one.body);
    let listed = call("GET", &format!("{}/api/sessions", a.url), None).await;
    assert_eq!(listed.body["sessions"][0]["node"], json!("b"), "{:?}", listed.body);
    let console =
        Console::start(cluster.dir.path(), &["--store", &cluster.url, "--read-only"], &[]);
    let listed = call("GET", &format!("{}/api/sessions", console.url), None).await;
    assert_eq!(listed.body["sessions"][0]["node"], json!("b"), "{:?}", listed.body);
    let page = reqwest::get(format!("{}/", console.url)).await.unwrap().text().await.unwrap();
    assert!(page.contains("<th>Node</th>") && page.contains("<td class=\"node\">b</td>"), "{page}");
    drop(console);
    checked(&events);
    stop(a);
    stop(b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settings_patch_on_one_node_is_in_force_on_all_and_a_stale_one_is_refused_on_each() {
    let Some(cluster) = Cluster::start("settings", vec![]).await else { return };
    let (a, b) = pair(&cluster);
    let plugin = |node: &Console| format!("{}/api/plugins/auto-retry", node.url);
    let before = call("GET", &plugin(&b), None).await;
    let base = before.body["revision"].as_u64().unwrap();
    let patched =
        call("PATCH", &plugin(&a), Some(json!({"revision": base, "patch": {"extraRetries": 7}})))
            .await;
    assert_eq!(patched.status, 200, "{:?}", patched.body);
    // In force on b once its notice arrived (read until then, bounded).
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let seen = call("GET", &plugin(&b), None).await;
        if seen.body["revision"] == json!(base + 1) {
            assert_eq!(seen.body["settings"]["extraRetries"], json!(7));
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "b never adopted it: {:?}", seen.body);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for node in [&a, &b] {
        let stale = call(
            "PATCH",
            &plugin(node),
            Some(json!({"revision": base, "patch": {"extraRetries": 1}})),
        )
        .await;
        assert_eq!((stale.status, stale.body["error"]["kind"].clone()), (409, json!("stale")));
    }
    stop(a);
    stop(b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgresql_restart_loses_no_acknowledged_event() {
    let script = vec![answer(&["before"]), error(503, "overloaded"), answer(&["after"])];
    let Some(cluster) = Cluster::start("restart", script).await else { return };
    let (a, b) = pair(&cluster);
    let session = cluster.session_on("a", "restart").await;
    prompt(&b, &session, "one").await;
    let first = cluster.log_until(&session, "the first turn's end", ended).await;
    let second = call(
        "POST",
        &format!("{}/api/sessions/{session}/prompt", b.url),
        Some(json!({"text": "two"})),
    )
    .await;
    assert_eq!(second.status, 202);
    let waiting = cluster.log_until(&session, "the retry wait", has("llm/retry")).await;
    // What was read back from the database was acknowledged.
    cluster.pg.restart_immediate();
    let events = cluster
        .log_until(&session, "the second turn's end", |e| turn_ends(e).len() == 2 && ended(e))
        .await;
    assert_eq!(&events[..first.len()], &first[..]);
    assert_eq!(&events[..waiting.len()], &waiting[..], "nothing acknowledged was lost");
    assert_eq!(turn_ends(&events), [TurnEndReason::Completed, TurnEndReason::Completed]);
    checked(&events);
    stop(a);
    stop(b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cut_off_from_postgresql_loses_its_leases_and_its_sessions_continue_elsewhere() {
    let script = vec![error(503, "overloaded"), answer(&["continued"])];
    let Some(cluster) = Cluster::start("cut", script).await else { return };
    let proxy = Proxy::start(([127, 0, 0, 1], cluster.pg.port()).into()).await;
    let through =
        cluster.url.replace(&format!(":{}/", cluster.pg.port()), &format!(":{}/", proxy.port()));
    let a = cluster.node_via("a", &through);
    assert!(a.wait_for_stderr("rein node a: took 8 partitions", WAIT), "{}", a.stderr());
    let b = cluster.node("b");
    assert!(b.wait_for_stderr("rein node b: took 4 partitions", WAIT), "{}", b.stderr());
    assert!(a.wait_for_stderr("rein node a: gave back 4 partitions", WAIT), "{}", a.stderr());
    let session = cluster.session_on("a", "cut").await;
    prompt(&b, &session, "hello").await;
    let before = cluster.log_until(&session, "the retry wait", has("llm/retry")).await;
    proxy.cut();
    assert!(a.wait_for_stderr("(lease ran out)", WAIT), "{}", a.stderr());
    assert!(b.wait_for_stderr("taken over from a", WAIT), "{}", b.stderr());
    let events = cluster.log_until(&session, "the turn's end on b", ended).await;
    assert_eq!(&events[..before.len()], &before[..]);
    assert_eq!(turn_ends(&events), [TurnEndReason::Completed]);
    let (_, _, retry_id, started_ids) = wait_and_start(&events);
    assert_eq!(started_ids, [retry_id]);
    assert!(events.iter().any(|e| matches!(&e.event, Event::TurnResumed(_))));
    checked(&events);
    proxy.restore();
    stop(b);
    drop(a);
}
