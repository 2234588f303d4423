//! Crash recovery, the hard way: `rein stress` runs as a child process on the JSONL, the SQLite
//! and the PostgreSQL store (durability `Disk`; PostgreSQL on a throwaway cluster from
//! `rein-testkit`), with faults, cancellations, plugin disposals, settings changes and plugin
//! crashes, and is killed with SIGKILL; then every session is reopened and checked:
//!
//! - every log opens (a torn last line is cut and kept in `<session>.jsonl.torn`);
//! - every event the child reported acknowledged (its `--acks` side channel: a line per event
//!   the log acknowledged at `Disk` durability) is in the log;
//! - reopening only appends, and a turn the kill left open is resumed (`turn/resumed` first):
//!   a pending retry wait continues its chain — the same `retryId`, its next attempt numbered on,
//!   `llm/retry-started` no earlier than its deadline — and the turn ends by its real outcome
//!   (the reopening route fails every attempt: an error), unless it was resumed too often
//!   (`interrupted`); no tool runs twice;
//! - every log passes the invariants as a finished log;
//! - a manual `retry()` of the failed turn starts a new turn, at attempt 1, with the whole
//!   retry budget of `llm-retry` (fresh budgets: `docs/runtime-semantics.md`).
//!
//! The kills are aimed ([`Moment`]): anywhere (any pace, plugin chaos), inside retry waits (long
//! backoffs, most attempts failing: the kill lands in a wait), inside attempts (a slow first
//! word: the kill cuts an attempt), inside tool calls (every answer calls a slow tool: the
//! resumed turn records its outcome unknown and never runs it again), and while the waterfall
//! decides (a first plugin slow over every failure: the resumed turn offers the failure again).
//! Over all kills of a store each aim must have hit its mark at least once (the resumed turns'
//! `pending`).
//!
//! The same directory (database) is used for every kill of a store, so each child also reopens
//! (and resumes) what the previous kill and check left, and logs grow across crashes.
//!
//! On PostgreSQL the database itself crashes too: in some runs ([`Store::restarts`]) it is
//! restarted with `pg_ctl restart -m immediate` after the child's first acknowledgement. The
//! child's appends are refused while it is down (never acknowledged: every acknowledged event
//! must still be in the log), its store reconnects, and the run must go on — a new
//! acknowledgement after the restart — before the child is killed. A killed child's connections
//! (and their advisory locks) go away with its server processes, a moment after the kill: each
//! open waits until no other connection holds a lock ([`Store::quiesce`]).
//!
//! Size: `REIN_CRASH_KILLS` kills per store (default 25, so 50 in CI for JSONL and SQLite);
//! PostgreSQL gets two fifths of that (10 by default, 3 of them with a database restart);
//! `REIN_CRASH_SEED` picks the kill moments and the children's seeds (default fixed; the failure
//! message names it, and shows the last events of the log that failed a check, or the stderr of
//! a child that ended by itself). Without PostgreSQL installed its test says how to install it
//! and passes; with `CI=true` it fails.
//!
//! And without a process crash: a plugin whose actor crashes mid-chain (it panics once in its
//! recovery) is restarted, and the retry chain it owns continues its count from the log.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rein::invariant::check_finished_log;
use rein::plugins::llm_retry::LlmRetry;
use rein::plugins::scripted::{Answer, ScriptedPlugin};
use rein::providers::{Simulated, SimulatedConfig};
use rein::runtime::BoxFuture;
use rein::runtime::clock::VirtualClock;
use rein::runtime::event::{Envelope, Event, TurnEndReason};
use rein::runtime::failure::Failure;
use rein::runtime::plugin::{IntoPlugin, Plugin, Recovery, Verdict};
use rein::runtime::runtime::{Route, Runtime};
use rein::runtime::store::jsonl::JsonlStore;
use rein::runtime::store::memory::MemoryStore;
use rein::runtime::store::postgres::PostgresStore;
use rein::runtime::store::sqlite::SqliteStore;
use rein::runtime::store::{Durability, SessionStore};
use rein_cli::scenario::scripted::{Scripted, ScriptedProvider};
use rein_testkit::PgCluster;
use rein_testkit::log::{open_turn, pending_retry};
use serde_json::json;

/// Kills per store when `REIN_CRASH_KILLS` is not set.
const QUICK_KILLS: usize = 25;
/// The default seed of the kill moments.
const DEFAULT_SEED: u64 = 20_260_101;
/// `llm-retry`'s budget in the reopening runtime.
const MAX_RETRIES: u64 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Store {
    Jsonl,
    Sqlite,
    /// The database of [`POSTGRES`].
    Postgres,
}

/// The throwaway cluster of the PostgreSQL run and its database's URL, while it runs (one test
/// uses it; it is dropped, and the server stopped, when that test ends).
static POSTGRES: Mutex<Option<(PgCluster, String)>> = Mutex::new(None);

/// Runs `f` with the cluster of the PostgreSQL run and its database's URL.
fn with_postgres<T>(f: impl FnOnce(&PgCluster, &str) -> T) -> T {
    let postgres = POSTGRES.lock().unwrap_or_else(PoisonError::into_inner);
    let (cluster, url) = postgres.as_ref().expect("the PostgreSQL cluster runs");
    f(cluster, url)
}

/// Stops the cluster when the PostgreSQL test ends, even by a panic.
struct StopsPostgres;

impl Drop for StopsPostgres {
    fn drop(&mut self) {
        let cluster = POSTGRES.lock().unwrap_or_else(PoisonError::into_inner).take();
        let _spawning = spawning();
        drop(cluster);
    }
}

/// Held while this process starts a child process (`rein stress`, and the PostgreSQL tools).
///
/// Between its fork and its exec a child holds a copy of every file this process has open,
/// the stores' lock files included (see the runtime's `store::lock_file`): a lock this process
/// has just released stays held by that child for the moment, and a `rein stress` started on the
/// store then finds it held by another process and refuses to run. The tests of this file run in
/// parallel, each starting children; a spawn returns once its child has exec'd, so taking this
/// once after a store is released waits out every child that may hold a copy of its locks.
static SPAWNING: Mutex<()> = Mutex::new(());

fn spawning() -> MutexGuard<'static, ()> {
    SPAWNING.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Store {
    fn flag(self) -> &'static str {
        match self {
            Store::Jsonl => "jsonl",
            Store::Sqlite => "sqlite",
            Store::Postgres => "postgres",
        }
    }

    /// The child's flags naming its store.
    fn args(self, dir: &Path) -> Vec<String> {
        let mut args = vec!["--store".to_owned(), self.flag().to_owned()];
        match self {
            Store::Jsonl | Store::Sqlite => args.extend(["--dir".to_owned(), path_text(dir)]),
            Store::Postgres => {
                args.extend(["--url".to_owned(), with_postgres(|_, url| url.to_owned())]);
            }
        }
        args
    }

    /// How many of the `asked` kills run on this store.
    fn kills(self, asked: usize) -> usize {
        match self {
            Store::Jsonl | Store::Sqlite => asked,
            Store::Postgres => (asked * 2 / 5).max(1),
        }
    }

    /// Whether kill `kill` restarts the database mid-run first (`pg_ctl restart -m immediate`).
    fn restarts(self, kill: usize) -> bool {
        self == Store::Postgres && kill % 4 == 1
    }

    /// Restarts the database at once, as a crash of the server would.
    fn restart(self) {
        with_postgres(|cluster, _| {
            let _spawning = spawning();
            cluster.restart_immediate();
        });
    }

    /// Waits until no connection but its own holds an advisory lock in the database (a killed
    /// child's server processes, or a dropped store's, let their session locks go a moment
    /// after); nothing to wait for in a directory.
    fn quiesce(self) {
        if self == Store::Postgres {
            let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            tokio.block_on(no_advisory_locks());
        }
    }

    async fn open(self, dir: &Path) -> Arc<dyn SessionStore> {
        match self {
            Store::Jsonl => Arc::new(JsonlStore::open(dir, Durability::Disk).unwrap()),
            Store::Sqlite => {
                Arc::new(SqliteStore::open(dir.join("stress.db"), Durability::Disk).unwrap())
            }
            Store::Postgres => {
                no_advisory_locks().await;
                let url = with_postgres(|_, url| url.to_owned());
                Arc::new(PostgresStore::open(&url, Durability::Disk).await.unwrap())
            }
        }
    }
}

/// Resolves once no other connection holds an advisory lock in the database of [`POSTGRES`].
async fn no_advisory_locks() {
    let url = with_postgres(|_, url| url.to_owned());
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    let connection = tokio::spawn(connection);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let held: i64 = client
            .query_one(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' \
                 AND pid <> pg_backend_pid()",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if held == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{held} advisory locks still held after 60 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(client);
    let _ = connection.await;
}

fn path_text(path: &Path) -> String {
    path.to_str().unwrap().to_owned()
}

/// Where a kill is aimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Moment {
    /// Anywhere: a quick pace with every kind of chaos.
    Anywhere,
    /// Inside a retry wait: most attempts fail and backoffs are long.
    RetryWait,
    /// Inside an attempt: the first word comes late.
    Attempt,
    /// Inside a tool call: every answer calls a tool that takes long.
    Tool,
    /// While the waterfall decides: most attempts fail and the first plugin takes long over
    /// each failure.
    Waterfall,
}

impl Moment {
    /// The `rein stress` flags of its pace and faults.
    fn flags(self) -> &'static [&'static str] {
        match self {
            Moment::Anywhere => &[
                "--fault-rate",
                "0.3",
                "--cancel-rate",
                "0.2",
                "--dispose-rate",
                "0.05",
                "--config-rate",
                "0.05",
                "--crash-rate",
                "0.05",
                "--latency-ms",
                "4",
                "--backoff-ms",
                "2",
                "--stall-ms",
                "30",
            ],
            Moment::RetryWait => &[
                "--fault-rate",
                "0.9",
                "--cancel-rate",
                "0",
                "--latency-ms",
                "2",
                "--backoff-ms",
                "150",
                "--stall-ms",
                "30",
            ],
            Moment::Attempt => &[
                "--fault-rate",
                "0.1",
                "--cancel-rate",
                "0",
                "--latency-ms",
                "400",
                "--backoff-ms",
                "2",
                "--stall-ms",
                "30",
            ],
            Moment::Tool => &[
                "--fault-rate",
                "0",
                "--cancel-rate",
                "0",
                "--tool-rate",
                "1",
                "--tool-ms",
                "600",
                "--latency-ms",
                "2",
            ],
            Moment::Waterfall => &[
                "--fault-rate",
                "0.9",
                "--cancel-rate",
                "0",
                "--decide-ms",
                "500",
                "--latency-ms",
                "2",
                "--backoff-ms",
                "2",
                "--stall-ms",
                "30",
            ],
        }
    }

    /// Every moment, in the order the kills take them.
    const ALL: [Moment; 5] =
        [Moment::Anywhere, Moment::RetryWait, Moment::Attempt, Moment::Tool, Moment::Waterfall];

    /// The `pending` of a turn resumed from a kill aimed here (`None`: no particular one).
    fn mark(self) -> Option<&'static str> {
        match self {
            Moment::Anywhere => None,
            Moment::RetryWait => Some("retry-wait"),
            Moment::Attempt => Some("attempt"),
            Moment::Tool => Some("tool"),
            Moment::Waterfall => Some("waterfall"),
        }
    }
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
fn killed_stress_runs_on_jsonl_lose_no_acknowledged_event() {
    crash_and_recover(Store::Jsonl);
}

#[test]
fn killed_stress_runs_on_sqlite_lose_no_acknowledged_event() {
    crash_and_recover(Store::Sqlite);
}

#[test]
fn killed_stress_runs_on_postgres_and_database_restarts_lose_no_acknowledged_event() {
    let started = {
        let _spawning = spawning();
        PgCluster::start().map(|cluster| {
            let url = cluster.create_database("crash");
            (cluster, url)
        })
    };
    let Some((cluster, url)) = started else { return };
    *POSTGRES.lock().unwrap_or_else(PoisonError::into_inner) = Some((cluster, url));
    let _stops = StopsPostgres;
    crash_and_recover(Store::Postgres);
}

/// What the checks of all kills of one store saw.
#[derive(Debug, Default)]
struct Seen {
    acks: usize,
    /// Turns left open by a kill, found on reopening.
    open: usize,
    /// Of those, resumed, by what was pending.
    resumed: BTreeMap<String, usize>,
    /// Of those, closed `interrupted` (resumed too often).
    interrupted: usize,
    /// Resumed turns that completed (the kill came after their last answer).
    completed: usize,
    /// Pending retry waits resumed with their chain continued.
    chains_continued: usize,
    retried: usize,
    torn: usize,
}

fn crash_and_recover(store: Store) {
    let kills = store.kills(env_number("REIN_CRASH_KILLS", QUICK_KILLS as u64) as usize);
    let seed = env_number("REIN_CRASH_SEED", DEFAULT_SEED);
    let context = format!("{} store, REIN_CRASH_SEED={seed}", store.flag());
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ store as u64);
    let dir = tempfile::tempdir().unwrap();
    let tokio =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut acked: BTreeMap<String, u64> = BTreeMap::new();
    let mut seen = Seen::default();
    let mut aimed: BTreeMap<&'static str, usize> = BTreeMap::new();
    for kill in 0..kills {
        let child_seed: u64 = rng.random();
        let moment = Moment::ALL[kill % Moment::ALL.len()];
        // Some kills aimed anywhere land from the start (maybe while the child reopens the
        // logs); the others once agents are running turns, the aimed ones after time enough
        // for their agents to be in a wait or an attempt.
        let early = moment == Moment::Anywhere && rng.random_bool(0.25);
        let pause = Duration::from_millis(match (moment, early) {
            (Moment::Anywhere, true) => rng.random_range(0..=40),
            (Moment::Anywhere, false) => rng.random_range(0..=200),
            (Moment::RetryWait, _) => rng.random_range(200..=900),
            (Moment::Attempt | Moment::Tool | Moment::Waterfall, _) => rng.random_range(100..=700),
        });
        let restart = store.restarts(kill);
        let acks =
            run_and_kill(store, dir.path(), child_seed, moment, early, restart, pause, &context);
        for (session, seq) in acks {
            seen.acks += 1;
            let max = acked.entry(session).or_default();
            *max = (*max).max(seq);
        }
        let context = format!("{context}, kill {kill} ({moment:?}, child seed {child_seed})");
        let before = seen.resumed.clone();
        let opened =
            tokio.block_on(reopen_and_check(store, dir.path(), &acked, &mut seen, &context));
        if let Some(mark) = moment.mark()
            && seen.resumed.get(mark) > before.get(mark)
        {
            *aimed.entry(mark).or_default() += 1;
        }
        // The next child must find the sessions (and a SQLite database) unlocked: wait until the
        // last reference to this process's store is gone (an actor task of the runtime that was
        // shut down may still be letting go of one), so that its locks are released, and until
        // no child started meanwhile still holds a copy of them (see `SPAWNING`).
        tokio.block_on(released(opened));
        drop(spawning());
    }
    eprintln!("{context}: {kills} kills: {seen:?}; aimed kills that hit: {aimed:?}");
    assert!(seen.acks > 0, "{context}: the children acknowledged nothing: {seen:?}");
    assert!(seen.open > 0, "{context}: no kill left a turn open: {seen:?}");
    let resumed: usize = seen.resumed.values().sum();
    assert_eq!(resumed + seen.interrupted, seen.open, "{context}: {seen:?}");
    assert_eq!(
        seen.retried,
        seen.open - seen.completed,
        "{context}: every failed turn retried: {seen:?}"
    );
    if kills >= 3 * Moment::ALL.len() {
        for mark in Moment::ALL.iter().filter_map(|m| m.mark()) {
            assert!(
                aimed.get(mark).is_some_and(|n| *n > 0),
                "{context}: no kill hit {mark}: {seen:?}"
            );
        }
        assert!(seen.chains_continued > 0, "{context}: no resumed wait continued: {seen:?}");
    }
}

/// Runs `rein stress` on `dir` at the pace of `moment` until it is killed, `pause` after its
/// first acknowledgement (or after its start, when `early`), and returns what it acknowledged.
/// With `restart`, the database is restarted after the first acknowledgement, and the pause
/// starts once the child acknowledged again.
#[allow(clippy::too_many_arguments)]
fn run_and_kill(
    store: Store,
    dir: &Path,
    seed: u64,
    moment: Moment,
    early: bool,
    restart: bool,
    pause: Duration,
    context: &str,
) -> Vec<(String, u64)> {
    let seed = seed.to_string();
    store.quiesce();
    // What the child says on stderr, for the failure message of a child that ended by itself.
    let stderr = tempfile::NamedTempFile::new().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_rein"));
    command
        .args(["stress", "--agents", "6", "--turns", "1000000"])
        .args(store.args(dir))
        .args(["--durability", "disk", "--acks", "-"])
        .args(["--seed", &seed])
        .args(moment.flags())
        .stdout(Stdio::piped())
        .stderr(stderr.reopen().unwrap());
    let mut child = {
        let _spawning = spawning();
        command.spawn().unwrap()
    };
    let stdout = child.stdout.take().unwrap();
    let (lines, received) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut acks = Vec::new();
    // The next acknowledgement, within a minute; else the child is killed and the test fails.
    let mut next_ack = |what: &str| match received.recv_timeout(Duration::from_secs(60)) {
        Ok(line) => line,
        Err(e) => {
            let _ = child.kill();
            let status = child.wait();
            let said = last_lines(stderr.path());
            panic!("{context}: no acknowledgement {what}: {e}; the child ended {status:?}: {said}");
        }
    };
    if !early || restart {
        // The child is up and writing: its first acknowledgement arrived.
        acks.push(next_ack("from the start"));
    }
    if restart {
        store.restart();
        // What was acknowledged before the restart, then proof that the run goes on.
        acks.extend(received.try_iter());
        acks.push(next_ack("after the database restarted"));
    }
    std::thread::sleep(pause);
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert!(
        !status.success(),
        "{context}: the child ended by itself: {status}: {}",
        last_lines(stderr.path())
    );
    reader.join().unwrap();
    acks.extend(received.try_iter());
    acks.iter()
        .filter_map(|line| {
            // A kill may cut the last line short: only whole lines count.
            let mut words = line.strip_prefix("ack ")?.split(' ');
            let session = words.next()?.to_owned();
            let seq = words.next()?.parse().ok()?;
            words.next().is_none().then_some((session, seq))
        })
        .collect()
}

/// The last lines of a child's stderr, for a failure message.
fn last_lines(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let last = &lines[lines.len().saturating_sub(20)..];
    format!("its stderr ends:\n{}", last.join("\n"))
}

/// No tool call of the log has two results (a tool the kill caught is never run again).
fn assert_no_tool_ran_twice(events: &[Envelope], context: &str, session: &str) {
    let mut results = BTreeMap::new();
    for event in events {
        if let Event::ToolResult(result) = &event.event {
            *results.entry(result.id.clone()).or_insert(0) += 1;
        }
    }
    let twice: Vec<_> = results.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "{context}: {session}: tools with two results: {twice:?}");
}

/// The session's log once it is idle again after its first `old` events (a resumed turn ran to
/// its end), waited for by reading it, up to a minute.
async fn idle_again(
    handle: &rein::runtime::session::Session,
    old: usize,
    context: &str,
    session: &str,
) -> Vec<Envelope> {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let events = handle.events().await.unwrap();
        if is_idle_again(&events, old) {
            return events;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{context}: {session} never idle again; the log ends (its first {old} events were \
             there before reopening):\n{}",
            log_tail(&events, old)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Whether a reopened log, whose first `old` events were there before reopening, is idle again:
/// no turn is open, and what reopening appended — a resumed turn's events, the repair of a turn
/// not resumed, or the `agent/idle` a kill kept from following the last `turn/end` — ends with
/// `agent/idle` (or is the `session/start` of a log the kill left empty).
///
/// A log reopened with no turn open may get nothing, and then ends with whatever its session
/// wrote last between turns: `agent/idle`, only `session/start`, or `config/changed` — a settings
/// change reaches every awake session, also one that is idle or has not started its first turn,
/// and the kill may come right after it.
fn is_idle_again(events: &[Envelope], old: usize) -> bool {
    let appended = &events[old.min(events.len())..];
    let settled = appended.is_empty()
        || appended.last().is_some_and(|e| e.kind() == "agent/idle")
        || events.iter().map(Envelope::kind).eq(["session/start"]);
    events.len() >= old && open_turn(events).is_none() && settled
}

#[test]
fn a_reopened_log_is_idle_again_once_nothing_is_open_and_what_closed_it_ended_idle() {
    let line = |seq: usize, event: &str| -> Envelope {
        serde_json::from_str(&format!(r#"{{"seq":{seq},"time":1,{event}}}"#)).unwrap()
    };
    let log = |kinds: &[&str]| -> Vec<Envelope> {
        let event = |kind: &str| match kind {
            "start" => r#""type":"session/start","data":{"session":"s","format":1}"#,
            "config" => {
                r#""type":"config/changed","data":{"plugin":"p","revision":1,"changed":["x"]}"#
            }
            "turn" => r#""type":"turn/start","data":{"turn":1}"#,
            "resumed" => r#""type":"turn/resumed","data":{"turn":1,"step":0,"pending":"loop"}"#,
            "end" => r#""type":"turn/end","data":{"turn":1,"reason":{"kind":"interrupted"}}"#,
            "idle" => r#""type":"agent/idle","data":{}"#,
            other => panic!("{other}"),
        };
        kinds.iter().enumerate().map(|(seq, kind)| line(seq, event(kind))).collect()
    };
    // (the log after reopening, how many events it had before, idle again)
    let cases: [(&[&str], usize, bool); 10] = [
        (&["start"], 1, true),
        // Created by reopening: the kill came before `session/start` was durable.
        (&["start"], 0, true),
        (&["start", "turn", "end", "idle"], 4, true),
        // A settings change reached the session before its first turn, or while it was idle.
        (&["start", "config"], 2, true),
        (&["start", "turn", "end", "idle", "config"], 5, true),
        // The kill came between a turn's end and its `agent/idle`: reopening writes the idle.
        (&["start", "turn", "end", "config", "idle"], 4, true),
        // A turn left open: idle once reopening closed it, `agent/idle` last.
        (&["start", "turn"], 2, false),
        (&["start", "turn", "resumed"], 2, false),
        (&["start", "turn", "resumed", "end", "idle"], 2, true),
        (&["start", "turn", "end"], 2, false),
    ];
    for (kinds, old, idle) in cases {
        assert_eq!(is_idle_again(&log(kinds), old), idle, "{kinds:?} after {old}");
    }
}

/// The last events of a log, one JSON line each, numbered, with a line where reopening began
/// (after the first `old`): what a failure message shows of a log that went wrong.
fn log_tail(events: &[Envelope], old: usize) -> String {
    const SHOWN: usize = 30;
    const WIDTH: usize = 400;
    let mut tail = String::new();
    for (i, event) in events.iter().enumerate().skip(events.len().saturating_sub(SHOWN)) {
        if i == old {
            tail.push_str("  --- reopened ---\n");
        }
        let line = serde_json::to_string(event).unwrap();
        let cut: String = line.chars().take(WIDTH).collect();
        let more = if cut.len() < line.len() { " …" } else { "" };
        tail.push_str(&format!("  {i:>5} {cut}{more}\n"));
    }
    if old >= events.len() {
        tail.push_str("  --- reopened (nothing appended) ---\n");
    }
    tail
}

/// Resolves once `store` is the last reference to its store, then drops it.
async fn released(store: Arc<dyn SessionStore>) {
    while Arc::strong_count(&store) > 1 {
        tokio::task::yield_now().await;
    }
    drop(store);
}

/// Reopens the store the children wrote and checks it; returns the store, for [`released`].
async fn reopen_and_check(
    store: Store,
    dir: &Path,
    acked: &BTreeMap<String, u64>,
    seen: &mut Seen,
    context: &str,
) -> Arc<dyn SessionStore> {
    let opened = store.open(dir).await;
    let sessions = opened.sessions().await.unwrap();
    for (session, seq) in acked {
        assert!(sessions.contains(session), "{context}: {session} acknowledged seq {seq}, no log");
    }
    // Every log opens; a torn tail is cut and kept aside.
    let mut before = BTreeMap::new();
    for session in &sessions {
        let loaded = opened.load(session).await;
        let loaded = loaded.unwrap_or_else(|e| panic!("{context}: {session} does not open: {e}"));
        let loaded = loaded.unwrap_or_else(|| panic!("{context}: {session} listed, not stored"));
        if let Some(torn) = &loaded.torn {
            seen.torn += 1;
            let kept = torn.kept_in.as_ref().expect("a JSONL store keeps what it cuts");
            let kept = std::fs::read(kept).unwrap();
            assert!(kept.len() as u64 > torn.bytes, "{context}: {session}: {torn:?}");
        }
        before.insert(session.clone(), loaded.events);
    }
    // Nothing acknowledged was lost (a log is contiguous: its highest acknowledged seq is
    // enough).
    for (session, seq) in acked {
        let events = &before[session];
        assert!(
            events.len() as u64 > *seq && events[*seq as usize].seq == *seq,
            "{context}: {session}: seq {seq} was acknowledged at Disk durability, the log has {} events",
            events.len()
        );
    }

    // Reopen through a runtime whose route fails every attempt with SERVER, so a manual retry
    // shows its whole llm-retry budget.
    let failing = Simulated::new(SimulatedConfig {
        seed: 1,
        rate_limit_rate: 0.0,
        server_error_rate: 1.0,
        drop_rate: 0.0,
        stall_rate: 0.0,
        first_chunk_latency_ms: 0..=0,
        chunk_latency_ms: 0..=0,
        ..SimulatedConfig::default()
    })
    .unwrap();
    let llm_retry = LlmRetry::from_config(&json!({
        "maxTransientRetries": MAX_RETRIES, "initialDelayMs": 1, "maxDelayMs": 2, "jitterRatio": 0
    }))
    .unwrap();
    let runtime = Runtime::builder()
        .store(Arc::clone(&opened))
        .route(Route::new("simulated", Arc::new(failing.clone())).model(failing.model()))
        .plugin(llm_retry)
        .idle_grace(Duration::ZERO)
        .build()
        .await
        .unwrap();
    for session in &sessions {
        let old = &before[session];
        let handle = runtime.session(session).await.unwrap();
        // Opening resumes a turn the kill left open: wait until the session is idle again.
        let events = idle_again(&handle, old.len(), context, session).await;
        assert_eq!(&events[..old.len()], &old[..], "{context}: {session}: reopening only appends");
        let violations = check_finished_log(&events);
        assert!(
            violations.is_empty(),
            "{context}: {session}: {violations:?}\n{}",
            log_tail(&events, old.len())
        );
        let Some(turn) = open_turn(old) else { continue };
        seen.open += 1;
        let tail = &events[old.len()..];
        let ended = tail.iter().find_map(|e| match &e.event {
            Event::TurnEnd(end) if end.turn == turn => Some(end.reason.clone()),
            _ => None,
        });
        match &tail[0].event {
            Event::TurnResumed(resumed) => {
                assert_eq!(resumed.turn, turn, "{context}: {session}");
                *seen.resumed.entry(resumed.pending.clone()).or_default() += 1;
                // The resumed turn ends by its real outcome: an error (the route fails every
                // attempt with SERVER; a failure the waterfall was deciding, offered again, may
                // end it with its own code once its chain's budget is spent), or complete when the
                // kill came after its last answer (it had nothing left to ask).
                let real = match &ended {
                    Some(TurnEndReason::Error { .. }) => true,
                    Some(TurnEndReason::Completed) => {
                        seen.completed += 1;
                        true
                    }
                    _ => false,
                };
                assert!(
                    real,
                    "{context}: {session}: the resumed turn {turn} ended {ended:?}\n{}",
                    log_tail(&events, old.len())
                );
                if let Some(retry) = pending_retry(old) {
                    let started = tail.iter().find_map(|e| match &e.event {
                        Event::LlmRetryStarted(s) if s.retry_id == retry.retry_id => Some(e.time),
                        _ => None,
                    });
                    let started = started.unwrap_or_else(|| {
                        panic!(
                            "{context}: {session}: the pending wait {} never started",
                            retry.retry_id
                        )
                    });
                    assert!(
                        started as f64 >= retry.deadline,
                        "{context}: {session}: the wait started at {started}, its deadline was {}",
                        retry.deadline
                    );
                    let next = tail.iter().find_map(|e| match &e.event {
                        Event::RequestStart(r) => Some(r.attempt),
                        _ => None,
                    });
                    assert_eq!(
                        next,
                        Some(retry.attempt + 1),
                        "{context}: {session}: attempts go on"
                    );
                    seen.chains_continued += 1;
                }
            }
            Event::TurnEnd(end) if end.turn == turn => {
                assert_eq!(end.reason, TurnEndReason::Interrupted, "{context}: {session}");
                seen.interrupted += 1;
            }
            other => panic!(
                "{context}: {session}: turn {turn} left open, reopened with {other:?}\n{}",
                log_tail(&events, old.len())
            ),
        }
        assert_no_tool_ran_twice(&events, context, session);

        if matches!(ended, Some(TurnEndReason::Completed)) {
            continue;
        }
        // A manual retry of the failed turn: a new turn over the same history, at attempt 1,
        // whole budget.
        let retried = handle.retry().await.unwrap().outcome().await.unwrap();
        assert_eq!(retried.turn, turn + 1, "{context}: {session}");
        match &retried.reason {
            TurnEndReason::Error { failure } => assert_eq!(failure.code(), "SERVER"),
            other => panic!("{context}: {session}: the retry ended {other:?}"),
        }
        let after = handle.events().await.unwrap();
        let new_turn = &after[events.len()..];
        assert!(
            matches!(&new_turn[0].event, Event::TurnStart(t) if t.turn == turn + 1),
            "{context}: {session}: a retry starts with turn/start, no user message: {:?}",
            new_turn[0]
        );
        let attempts: Vec<u32> = new_turn
            .iter()
            .filter_map(|e| match &e.event {
                Event::RequestStart(r) => Some(r.attempt),
                _ => None,
            })
            .collect();
        let retries: Vec<(u64, Option<u64>)> = new_turn
            .iter()
            .filter_map(|e| match &e.event {
                Event::LlmRetry(r) => Some((r.retry, r.max_retries)),
                _ => None,
            })
            .collect();
        assert_eq!(attempts, [1, 2, 3], "{context}: {session}");
        assert_eq!(
            retries,
            [(1, Some(MAX_RETRIES)), (2, Some(MAX_RETRIES))],
            "{context}: {session}: fresh budgets"
        );
        let violations = check_finished_log(&after);
        assert!(
            violations.is_empty(),
            "{context}: {session}: {violations:?}\n{}",
            log_tail(&after, old.len())
        );
        seen.retried += 1;
    }
    runtime.shutdown().await;
    let census = runtime.census();
    assert_eq!((census.actors(), census.tasks()), (0, 0), "{context}");
    opened
}

/// Wraps a plugin and panics in its recovery of the `crash_on`-th failure offered (from 1),
/// before the plugin sees it; delegates every other.
struct CrashOnce {
    inner: Arc<dyn Plugin>,
    crash_on: usize,
    offered: AtomicUsize,
}

impl Plugin for CrashOnce {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn recover(self: Arc<Self>, recovery: Recovery) -> BoxFuture<'static, Verdict> {
        let n = self.offered.fetch_add(1, Ordering::SeqCst) + 1;
        if n == self.crash_on {
            return Box::pin(async move {
                std::panic::resume_unwind(Box::new(format!("crash on failure {n}")))
            });
        }
        Arc::clone(&self.inner).recover(recovery)
    }
}

#[tokio::test(start_paused = true)]
async fn a_plugin_restarted_mid_chain_continues_the_chain_count() {
    // Four SERVER failures in one step. llm-retry schedules retry 1; on the second failure its
    // actor crashes (counted as Next: the scripted plugin after it retries once, writing
    // nothing); on the third the restarted llm-retry continues its chain at retry 2, with the
    // chain's id; the fourth finds the budget spent.
    let server = || Scripted::fail(Failure::new("SERVER", "busy").unwrap());
    let provider = ScriptedProvider::new([server(), server(), server(), server()]);
    let llm_retry = LlmRetry::from_config(&json!({
        "maxTransientRetries": 2, "initialDelayMs": 100, "maxDelayMs": 1000, "jitterRatio": 0
    }))
    .unwrap();
    let built = llm_retry.into_plugin();
    let policy = built.default_route_policy.clone().unwrap();
    let crashing =
        Arc::new(CrashOnce { inner: built.plugin, crash_on: 2, offered: AtomicUsize::new(0) });
    let store = MemoryStore::new();
    let runtime = Runtime::builder()
        .store(Arc::new(store.clone()))
        .clock(Arc::new(VirtualClock::start()))
        .route(Route::new("mock", Arc::new(provider)).model("m"))
        .default_route_policy(policy)
        .plugin(crashing)
        .plugin(Arc::new(ScriptedPlugin::new("scripted", [Answer::Retry])))
        .build()
        .await
        .unwrap();
    let before = runtime.chain().incarnation("llm-retry").unwrap();
    let session = runtime.session("s").await.unwrap();
    let outcome = session.prompt("hi").unwrap().outcome().await.unwrap();
    match outcome.reason {
        TurnEndReason::Error { failure } => assert_eq!(failure.code(), "SERVER"),
        other => panic!("{other:?}"),
    }
    let after = runtime.chain().incarnation("llm-retry").unwrap();
    assert_ne!(before, after, "the crashed actor was replaced");
    runtime.shutdown().await;
    assert_eq!((runtime.census().actors(), runtime.census().tasks()), (0, 0));

    let events = store.events("s");
    let trail: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::RequestError(r) => Some(format!("error {}", r.attempt)),
            Event::LlmRetry(r) => Some(format!("retry {} of {}", r.retry, r.retry_id)),
            Event::PluginCrashed(c) => Some(format!("crashed {} {}", c.plugin, c.restarts)),
            _ => None,
        })
        .collect();
    let id = events
        .iter()
        .find_map(|e| match &e.event {
            Event::LlmRetry(r) => Some(r.retry_id.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        trail,
        [
            "error 1".to_owned(),
            format!("retry 1 of {id}"),
            "error 2".to_owned(),
            "crashed llm-retry 1".to_owned(),
            "error 3".to_owned(),
            format!("retry 2 of {id}"),
            "error 4".to_owned(),
        ]
    );
    let violations = check_finished_log(&events);
    assert!(violations.is_empty(), "{violations:?}");
}
