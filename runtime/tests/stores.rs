//! The durable stores, through their public API: what a reopened log holds after torn writes,
//! corruption, random appends and concurrency, and whether `Disk` really syncs.

// The contract tests compare every store, SQLite included.
#![cfg(feature = "sqlite")]
// Helpers outside `#[test]` functions build fixtures; a failure there is a broken test.
#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use rein_runtime::event::*;
use rein_runtime::failure::Failure;
use rein_runtime::store::jsonl::JsonlStore;
use rein_runtime::store::memory::MemoryStore;
use rein_runtime::store::sqlite::SqliteStore;
use rein_runtime::store::sync::CountingSyncer;
use rein_runtime::store::{Durability, SessionStore, StoreError, TornTail};
use rein_testkit::stamped::{append_concurrently, envelope, idle, message};

/// A small session: start, a message whose text has multi-byte characters, a turn.
fn session_events() -> Vec<Envelope> {
    vec![
        envelope(0, Event::SessionStart(SessionStart { session: "s".into(), format: LOG_FORMAT })),
        message(1, "héllo \u{1F600} \"quoted\"\nnew line"),
        envelope(2, Event::TurnStart(TurnStart { turn: 1 })),
        envelope(
            3,
            Event::RequestError(RequestError {
                turn: 1,
                step: 1,
                attempt: 1,
                provider: "mock".into(),
                failure: Failure::new("RATE_LIMIT", "slow down — ✋")
                    .unwrap()
                    .with_status(429)
                    .unwrap(),
            }),
        ),
    ]
}

fn jsonl(dir: &Path) -> JsonlStore {
    JsonlStore::open(dir, Durability::Os).unwrap()
}

// ---------------------------------------------------------------------------------------------
// Torn last lines and corruption (JSONL)
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_log_cut_at_every_byte_of_its_last_line_reopens_to_the_events_before_it() {
    let events = session_events();
    let written = tempfile::tempdir().unwrap();
    jsonl(written.path()).append("s", &events).await.unwrap();
    let full = std::fs::read(written.path().join("s.jsonl")).unwrap();
    let last_start = full[..full.len() - 1].iter().rposition(|&b| b == b'\n').unwrap() + 1;
    let prefix = &events[..events.len() - 1];

    // Every length from "the last line is entirely missing" to "only its newline is missing".
    for cut_at in last_start..full.len() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, &full[..cut_at]).unwrap();
        let store = jsonl(dir.path());

        let loaded = store.load("s").await.unwrap().unwrap();
        assert_eq!(loaded.events, prefix, "cut at {cut_at}");
        assert_eq!(std::fs::read(&path).unwrap(), &full[..last_start], "cut at {cut_at}");
        let torn_path = dir.path().join("s.jsonl.torn");
        if cut_at == last_start {
            assert_eq!(loaded.torn, None, "nothing to cut at {cut_at}");
            assert!(!torn_path.exists());
        } else {
            let cut = &full[last_start..cut_at];
            let want = TornTail {
                line: events.len() as u64,
                bytes: cut.len() as u64,
                kept_in: Some(torn_path.clone()),
            };
            assert_eq!(loaded.torn, Some(want), "cut at {cut_at}");
            assert_eq!(
                std::fs::read(&torn_path).unwrap(),
                [cut, b"\n"].concat(),
                "cut at {cut_at}"
            );
        }

        // The log goes on from the prefix, and a second load finds nothing more to cut.
        store.append("s", &[idle(prefix.len() as u64)]).await.unwrap();
        let again = jsonl(dir.path()).load("s").await.unwrap().unwrap();
        assert_eq!(again.events.len(), events.len(), "cut at {cut_at}");
        assert_eq!(again.torn, None);
    }
}

#[tokio::test]
async fn cuts_accumulate_in_the_torn_file_one_line_each() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let first = serde_json::to_string(&idle(0)).unwrap();
    std::fs::write(&path, format!("{first}\n{{\"seq\":1")).unwrap();
    assert!(jsonl(dir.path()).load("s").await.unwrap().unwrap().torn.is_some());
    std::fs::write(&path, format!("{first}\n{{\"seq\":1,\"time\"")).unwrap();
    assert!(jsonl(dir.path()).load("s").await.unwrap().unwrap().torn.is_some());
    let kept = std::fs::read_to_string(dir.path().join("s.jsonl.torn")).unwrap();
    assert_eq!(kept, "{\"seq\":1\n{\"seq\":1,\"time\"\n");
}

#[tokio::test]
async fn a_corrupt_line_fails_naming_file_and_line_and_changes_no_byte() {
    let events = session_events();
    let good = tempfile::tempdir().unwrap();
    jsonl(good.path()).append("s", &events).await.unwrap();
    let text = std::fs::read_to_string(good.path().join("s.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().collect();

    // (description, file content, the line the error must name)
    let cases: Vec<(&str, String, u64)> = vec![
        (
            "garbage in the middle",
            format!("{}\n{}\nnot json\n{}\n", lines[0], lines[1], lines[3]),
            3,
        ),
        (
            "a middle line cut short",
            format!("{}\n{}\n{}\n", lines[0], &lines[1][..20], lines[2]),
            2,
        ),
        (
            "a corrupt middle line and a torn tail",
            format!("{}\n{}\n{{\"seq\":2,\"ti\n{}\n{{\"seq\"", lines[0], lines[1], lines[3]),
            3,
        ),
        (
            "a complete last line that does not parse",
            format!("{}\n{}\n{{\"seq\":2,\n", lines[0], lines[1]),
            3,
        ),
        ("a gap in seq", format!("{}\n{}\n{}\n", lines[0], lines[1], lines[3]), 3),
        ("a repeated line", format!("{}\n{}\n{}\n", lines[0], lines[1], lines[1]), 3),
    ];
    for (what, content, line) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, &content).unwrap();
        let before = std::fs::read(&path).unwrap();

        let err = jsonl(dir.path()).load("s").await.unwrap_err();
        let StoreError::Corrupt { path: named, line: at, .. } = &err else {
            panic!("{what}: {err}")
        };
        assert_eq!((named.as_str(), *at), (path.to_str().unwrap(), line), "{what}");
        let shown = err.to_string();
        assert!(shown.starts_with(&format!("{}:{line}: ", path.display())), "{what}: {shown}");
        assert_eq!(std::fs::read(&path).unwrap(), before, "{what}: the file must be untouched");
        assert!(!dir.path().join("s.jsonl.torn").exists(), "{what}");
    }
}

// ---------------------------------------------------------------------------------------------
// Every store keeps the same contract
// ---------------------------------------------------------------------------------------------

/// The three stores, fresh, each with its own directory.
fn every_store(dir: &Path) -> Vec<(&'static str, Box<dyn SessionStore>)> {
    vec![
        ("memory", Box::new(MemoryStore::new())),
        ("jsonl", Box::new(JsonlStore::open(dir.join("logs"), Durability::Os).unwrap())),
        ("sqlite", Box::new(SqliteStore::open(dir.join("events.db"), Durability::Os).unwrap())),
    ]
}

#[tokio::test]
async fn every_store_refuses_what_it_could_not_read_back() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in every_store(dir.path()) {
        assert_eq!(store.load("s").await.unwrap(), None, "{name}");
        store.append("s", &[idle(0), idle(1)]).await.unwrap();
        store.append("s", &[]).await.unwrap();

        for (stale, expected, found) in
            [(vec![idle(1)], 2, 1), (vec![idle(3)], 2, 3), (vec![idle(2), idle(4)], 3, 4)]
        {
            let err = store.append("s", &stale).await.unwrap_err();
            assert!(
                matches!(&err, StoreError::OutOfOrder { session, expected: e, found: f }
                    if session == "s" && *e == expected && *f == found),
                "{name}: {err}"
            );
        }
        for bad in ["", "../escape", "a/b", ".hidden"] {
            let err = store.append(bad, &[idle(0)]).await.unwrap_err();
            assert!(matches!(err, StoreError::InvalidSessionId(_)), "{name} {bad:?}: {err}");
            assert!(store.load(bad).await.is_err(), "{name} {bad:?}");
        }
        let loaded = store.load("s").await.unwrap().unwrap();
        assert_eq!(loaded.events, [idle(0), idle(1)], "{name}");
        assert_eq!(store.sessions().await.unwrap(), ["s"], "{name}");
    }
}

/// What `load` returns for `session` from `seq` on (what `load_from` must return).
async fn loaded_from(store: &dyn SessionStore, session: &str, seq: u64) -> Vec<Envelope> {
    let loaded = store.load(session).await.unwrap().map(|l| l.events).unwrap_or_default();
    loaded.into_iter().filter(|e| e.seq >= seq).collect()
}

/// A log of `n` events in batches of 1, 2, 3, 1, 2, 3, …, some of them longer than a JSONL
/// store's read chunk, some with newlines in their text.
fn batches(n: u64) -> Vec<Vec<Envelope>> {
    let event = |seq: u64| match seq % 5 {
        0 => idle(seq),
        1 => message(seq, &"long line ".repeat(8_000)),
        2 => message(seq, "two\nlines \u{1F600}"),
        _ => message(seq, &format!("event {seq}")),
    };
    let (mut out, mut seq, mut size) = (Vec::new(), 0, 1);
    while seq < n {
        let end = (seq + size).min(n);
        out.push((seq..end).map(event).collect());
        seq = end;
        size = size % 3 + 1;
    }
    out
}

#[tokio::test]
async fn every_store_reads_a_log_from_any_seq_as_its_load_less_the_events_before_it() {
    const N: u64 = 40;
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in every_store(dir.path()) {
        assert_eq!(store.load_from("s", 0).await.unwrap(), [], "{name}: no such session");
        for bad in ["", "../escape"] {
            assert!(store.load_from(bad, 0).await.is_err(), "{name} {bad:?}");
        }
        for batch in batches(N) {
            store.append("s", &batch).await.unwrap();
            // Read at once, as a subscriber catching up does.
            let last = batch[batch.len() - 1].seq;
            assert_eq!(store.load_from("s", batch[0].seq).await.unwrap(), batch, "{name}");
            assert_eq!(store.load_from("s", last + 1).await.unwrap(), [], "{name}");
        }
        for seq in 0..N + 3 {
            let from = store.load_from("s", seq).await.unwrap();
            assert_eq!(from, loaded_from(&*store, "s", seq).await, "{name}: from {seq}");
        }
    }
    // Reopened: the JSONL store finds the lines from a fresh handle, SQLite in its index.
    let reopened: [(&str, Box<dyn SessionStore>); 2] = [
        ("jsonl", Box::new(JsonlStore::open(dir.path().join("logs"), Durability::Os).unwrap())),
        (
            "sqlite",
            Box::new(SqliteStore::open(dir.path().join("events.db"), Durability::Os).unwrap()),
        ),
    ];
    let all: Vec<Envelope> = batches(N).into_iter().flatten().collect();
    for (name, store) in reopened {
        for seq in (0..N + 3).rev() {
            let from = store.load_from("s", seq).await.unwrap();
            let want: Vec<Envelope> = all.iter().filter(|e| e.seq >= seq).cloned().collect();
            assert_eq!(from, want, "{name} reopened: from {seq}");
        }
    }
}

#[tokio::test]
async fn a_jsonl_read_from_a_seq_names_a_corrupt_line_it_reads_and_never_looks_before_it() {
    let events = session_events();
    let good = tempfile::tempdir().unwrap();
    jsonl(good.path()).append("s", &events).await.unwrap();
    let text = std::fs::read_to_string(good.path().join("s.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // Line 2 (seq 1) is damaged, its length kept.
    let damaged = "x".repeat(lines[1].len());
    let content = format!("{}\n{damaged}\n{}\n{}\n", lines[0], lines[2], lines[3]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    std::fs::write(&path, &content).unwrap();
    let store = jsonl(dir.path());
    assert_eq!(store.load_from("s", 2).await.unwrap(), events[2..], "lines 3 and 4 only");
    let err = store.load_from("s", 1).await.unwrap_err();
    assert!(matches!(&err, StoreError::Corrupt { line: 2, .. }), "{err}");
    assert!(err.to_string().starts_with(&format!("{}:2: ", path.display())), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), content, "nothing was rewritten");
}

// ---------------------------------------------------------------------------------------------
// Random appends reopen to the same events
// ---------------------------------------------------------------------------------------------

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(any::<char>(), 0..12).prop_map(String::from_iter)
}

fn word() -> impl Strategy<Value = String> {
    prop::collection::vec(any::<char>(), 1..8).prop_map(String::from_iter)
}

fn finite_positive() -> impl Strategy<Value = f64> {
    prop_oneof![
        (1u32..100_000).prop_map(f64::from),
        0.001f64..1e6,
        prop::num::f64::POSITIVE | prop::num::f64::NORMAL | prop::num::f64::SUBNORMAL,
    ]
}

fn failure() -> impl Strategy<Value = Failure> {
    (
        word(),
        word(),
        prop::option::of(100u16..=599),
        prop::option::of(finite_positive()),
        prop::option::of(word()),
    )
        .prop_map(|(code, message, status, retry_after, request_id)| {
            let mut f = Failure::new(code, message).unwrap();
            if let Some(status) = status {
                f = f.with_status(status).unwrap();
            }
            if let Some(ms) = retry_after {
                f = f.with_retry_after_ms(ms).unwrap();
            }
            if let Some(id) = request_id {
                f = f.with_request_id(id).unwrap();
            }
            f
        })
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        finite_positive().prop_map(serde_json::Value::from),
        text().prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            prop::collection::btree_map(text(), inner, 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

fn reason() -> impl Strategy<Value = TurnEndReason> {
    prop_oneof![
        Just(TurnEndReason::Completed),
        failure().prop_map(|failure| TurnEndReason::Error { failure }),
        prop_oneof![
            Just(CancelCause::User),
            Just(CancelCause::Parent),
            Just(CancelCause::Disposed),
            text().prop_map(|reason| CancelCause::Hook { reason }),
        ]
        .prop_map(|cause| TurnEndReason::Aborted { cause }),
        Just(TurnEndReason::MaxSteps),
        Just(TurnEndReason::Interrupted),
    ]
}

/// Any event of the vocabulary.
fn event() -> impl Strategy<Value = Event> {
    let n = || 0u32..50;
    prop_oneof![
        (text(), any::<u32>())
            .prop_map(|(session, format)| Event::SessionStart(SessionStart { session, format })),
        text().prop_map(|text| Event::UserMessage(UserMessage { text })),
        n().prop_map(|turn| Event::TurnStart(TurnStart { turn })),
        (n(), n()).prop_map(|(turn, step)| Event::StepStart(StepRef { turn, step })),
        (n(), n(), n(), word(), word()).prop_map(|(turn, step, attempt, provider, model)| {
            Event::RequestStart(RequestStart { turn, step, attempt, provider, model })
        }),
        (n(), n(), n(), text()).prop_map(|(turn, step, attempt, text)| {
            Event::AssistantChunk(AssistantChunk { turn, step, attempt, text })
        }),
        (n(), n(), n(), word(), failure()).prop_map(|(turn, step, attempt, provider, failure)| {
            Event::RequestError(RequestError { turn, step, attempt, provider, failure })
        }),
        (
            word(),
            n(),
            n(),
            word(),
            word(),
            word(),
            text(),
            any::<u64>(),
            prop::option::of(any::<u64>()),
            finite_positive(),
            failure()
        )
            .prop_map(
                |(
                    retry_id,
                    turn,
                    step,
                    provider,
                    plugin,
                    mode,
                    policy_key,
                    retry,
                    max_retries,
                    delay_ms,
                    failure,
                )| {
                    Event::LlmRetry(LlmRetry {
                        retry_id,
                        turn,
                        step,
                        provider,
                        plugin,
                        mode,
                        policy_key,
                        retry,
                        max_retries,
                        delay_ms,
                        failure,
                    })
                }
            ),
        (word(), n(), n(), any::<u64>()).prop_map(|(retry_id, turn, step, retry)| {
            Event::LlmRetryStarted(LlmRetryStarted { retry_id, turn, step, retry })
        }),
        (
            n(),
            n(),
            text(),
            prop::option::of(prop::collection::vec(
                (word(), word(), json_value()).prop_map(|(id, name, arguments)| ToolCall {
                    id,
                    name,
                    arguments
                }),
                0..3
            )),
            prop::option::of(
                (any::<u64>(), any::<u64>()).prop_map(|(input_tokens, output_tokens)| Usage {
                    input_tokens,
                    output_tokens
                })
            ),
        )
            .prop_map(|(turn, step, text, tool_calls, usage)| {
                Event::AssistantMessage(AssistantMessage { turn, step, text, tool_calls, usage })
            }),
        (n(), n(), word(), word(), json_value()).prop_map(|(turn, step, id, name, arguments)| {
            Event::ToolCall(ToolCallEvent { turn, step, id, name, arguments })
        }),
        (n(), n(), word(), text(), any::<bool>()).prop_map(|(turn, step, id, output, is_error)| {
            Event::ToolResult(ToolResult { turn, step, id, output, is_error })
        }),
        (n(), n(), prop::collection::vec(any::<u64>(), 0..5), any::<u64>()).prop_map(
            |(turn, step, removed, kept)| {
                Event::ContextCompacted(ContextCompacted { turn, step, removed, kept })
            }
        ),
        (n(), n()).prop_map(|(turn, step)| Event::StepEnd(StepRef { turn, step })),
        (n(), reason()).prop_map(|(turn, reason)| Event::TurnEnd(TurnEnd { turn, reason })),
        Just(Event::AgentIdle(AgentIdle {})),
        (word(), text(), any::<u32>()).prop_map(|(plugin, error, restarts)| {
            Event::PluginCrashed(PluginCrashed { plugin, error, restarts })
        }),
        (word(), any::<u64>(), prop::collection::vec(word(), 0..3)).prop_map(
            |(plugin, revision, changed)| {
                Event::ConfigChanged(ConfigChanged { plugin, revision, changed })
            }
        ),
    ]
}

/// Appends: (session index, events with times), in order.
fn appends() -> impl Strategy<Value = Vec<(usize, Vec<(u64, Event)>)>> {
    prop::collection::vec((0usize..3, prop::collection::vec((any::<u64>(), event()), 1..5)), 1..10)
}

/// Applies `appends` to `store`, giving each session contiguous seqs; returns what each session
/// must hold.
async fn apply(
    store: &dyn SessionStore,
    appends: &[(usize, Vec<(u64, Event)>)],
) -> std::collections::BTreeMap<String, Vec<Envelope>> {
    let mut logs: std::collections::BTreeMap<String, Vec<Envelope>> = Default::default();
    for (session, batch) in appends {
        let session = format!("s{session}");
        let log = logs.entry(session.clone()).or_default();
        let start = log.len() as u64;
        let batch: Vec<Envelope> = (start..)
            .zip(batch)
            .map(|(seq, (time, event))| Envelope { seq, time: *time, event: event.clone() })
            .collect();
        store.append(&session, &batch).await.unwrap();
        log.extend(batch);
    }
    logs
}

async fn reopened_holds(
    store: &dyn SessionStore,
    logs: &std::collections::BTreeMap<String, Vec<Envelope>>,
) {
    assert_eq!(store.sessions().await.unwrap(), logs.keys().cloned().collect::<Vec<_>>());
    for (session, events) in logs {
        let loaded = store.load(session).await.unwrap().unwrap();
        assert_eq!(loaded.torn, None);
        assert_eq!(&loaded.events, events, "{session}");
        for seq in 0..=events.len() {
            let from = store.load_from(session, seq as u64).await.unwrap();
            assert_eq!(from, events[seq..], "{session} from {seq}");
        }
    }
}

fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(future)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn any_appends_reopen_to_the_same_events_in_jsonl(appends in appends()) {
        block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let logs = apply(&jsonl(dir.path()), &appends).await;
            reopened_holds(&jsonl(dir.path()), &logs).await;
        });
    }

    #[test]
    fn any_appends_reopen_to_the_same_events_in_sqlite(appends in appends()) {
        block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let db = dir.path().join("events.db");
            let store = SqliteStore::open(&db, Durability::Os).unwrap();
            let logs = apply(&store, &appends).await;
            drop(store);
            reopened_holds(&SqliteStore::open(&db, Durability::Os).unwrap(), &logs).await;
        });
    }
}

// ---------------------------------------------------------------------------------------------
// SQLite: concurrency and group commit
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_sessions_appending_at_once_lose_nothing_and_keep_seq_contiguous() {
    const SESSIONS: usize = 256;
    const APPENDS: u64 = 8;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("events.db");
    let syncs = Arc::new(CountingSyncer::fdatasync());
    let store =
        Arc::new(SqliteStore::open_with_syncer(&db, Durability::Disk, syncs.clone()).unwrap());
    let opened = syncs.count();

    let expected = append_concurrently(&store, SESSIONS, APPENDS).await;
    let appends = SESSIONS as u64 * APPENDS;
    let synced = syncs.count() - opened;
    assert!((1..=appends).contains(&synced), "{synced} syncs for {appends} appends");

    drop(Arc::into_inner(store).expect("every task is done"));
    let store = SqliteStore::open(&db, Durability::Os).unwrap();
    assert_eq!(store.sessions().await.unwrap().len(), SESSIONS);
    for (session, count) in expected {
        let events = store.load(&session).await.unwrap().unwrap().events;
        let want: Vec<Envelope> =
            (0..count).map(|q| message(q, &format!("{session}/{q}"))).collect();
        assert_eq!(events, want, "{session}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_append_among_concurrent_ones_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("events.db"), Durability::Disk).unwrap();
    store.append("b", &[idle(0)]).await.unwrap();
    let (ea, eb, ec) = ([idle(0), idle(1)], [idle(0)], [idle(0)]);
    // "b" repeats a seq it already has.
    let (a, b, c) =
        tokio::join!(store.append("a", &ea), store.append("b", &eb), store.append("c", &ec));
    a.unwrap();
    let err = b.unwrap_err();
    assert!(matches!(err, StoreError::OutOfOrder { expected: 1, found: 0, .. }), "{err}");
    c.unwrap();
    assert_eq!(store.load("a").await.unwrap().unwrap().events, ea);
    assert_eq!(store.load("b").await.unwrap().unwrap().events, [idle(0)]);
    assert_eq!(store.load("c").await.unwrap().unwrap().events, ec);
}

// ---------------------------------------------------------------------------------------------
// Durability levels: counted syncs
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn jsonl_disk_syncs_every_append_before_acknowledging_it() {
    const N: u64 = 20;
    let dir = tempfile::tempdir().unwrap();
    let syncs = Arc::new(CountingSyncer::fdatasync());
    let store = JsonlStore::open(dir.path(), Durability::Disk).unwrap().with_syncer(syncs.clone());
    for seq in 0..N {
        let before = syncs.count();
        store.append("s", &[idle(seq)]).await.unwrap();
        assert!(syncs.count() > before, "append {seq} was acknowledged without a sync");
    }
    assert!(syncs.count() >= N);

    let os_syncs = Arc::new(CountingSyncer::fdatasync());
    let os = JsonlStore::open(dir.path().join("os"), Durability::Os)
        .unwrap()
        .with_syncer(os_syncs.clone());
    for seq in 0..N {
        os.append("s", &[idle(seq)]).await.unwrap();
    }
    assert_eq!(os_syncs.count(), 0);
}

#[tokio::test]
async fn sqlite_disk_syncs_each_commit_and_os_never_syncs() {
    const N: u64 = 20;
    let dir = tempfile::tempdir().unwrap();
    let syncs = Arc::new(CountingSyncer::fdatasync());
    let store =
        SqliteStore::open_with_syncer(dir.path().join("disk.db"), Durability::Disk, syncs.clone())
            .unwrap();
    let opened = syncs.count();
    for seq in 0..N {
        let before = syncs.count();
        store.append("s", &[idle(seq)]).await.unwrap();
        assert!(syncs.count() > before, "append {seq} was acknowledged without a sync");
    }
    let synced = syncs.count() - opened;
    assert!((1..=N).contains(&synced), "{synced} syncs for {N} appends");

    let os_syncs = Arc::new(CountingSyncer::fdatasync());
    let os =
        SqliteStore::open_with_syncer(dir.path().join("os.db"), Durability::Os, os_syncs.clone())
            .unwrap();
    for seq in 0..N {
        os.append("s", &[idle(seq)]).await.unwrap();
    }
    assert_eq!(os_syncs.count(), 0);
}

#[tokio::test]
async fn a_session_written_by_one_store_reads_the_same_from_the_other() {
    // The SQLite `line` column holds exactly the JSONL line.
    let dir = tempfile::tempdir().unwrap();
    let events = session_events();
    let sqlite = SqliteStore::open(dir.path().join("events.db"), Durability::Os).unwrap();
    sqlite.append("s", &events).await.unwrap();
    let files = jsonl(dir.path().join("logs").as_path());
    files.append("s", &events).await.unwrap();

    let conn = rusqlite::Connection::open(dir.path().join("events.db")).unwrap();
    let mut query =
        conn.prepare("SELECT line FROM events WHERE session = 's' ORDER BY seq").unwrap();
    let lines: Vec<String> =
        query.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    let text = std::fs::read_to_string(files.path("s").unwrap()).unwrap();
    assert_eq!(text, lines.iter().map(|l| format!("{l}\n")).collect::<String>());
}

// ---------------------------------------------------------------------------------------------
// One writer per session
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_jsonl_session_claimed_by_one_store_is_refused_to_another_naming_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (jsonl(dir.path()), jsonl(dir.path()));
    let held = first.claim("s").await.unwrap();
    first.append("s", &session_events()).await.unwrap();

    let refused = second.claim("s").await.unwrap_err();
    let (log, lock) = (dir.path().join("s.jsonl"), dir.path().join("s.jsonl.lock"));
    match &refused {
        StoreError::Locked { what, lock: named, holder } => {
            assert_eq!(
                (what.as_str(), named.as_str()),
                (&*log.to_string_lossy(), &*lock.to_string_lossy())
            );
            assert_eq!(holder.map(|h| h.pid), Some(std::process::id()), "{refused}");
        }
        other => panic!("{other:?}"),
    }
    let text = refused.to_string();
    let want = format!("{} is in use by another store in this process (since ", log.display());
    assert!(text.starts_with(&want), "{text}");
    // Another session of the same directory is free; the claimed one is again once let go.
    drop(second.claim("t").await.unwrap());
    drop(held);
    let taken = second.claim("s").await.unwrap();
    assert_eq!(second.load("s").await.unwrap().unwrap().events, session_events());
    drop(taken);
}

#[tokio::test]
async fn a_load_without_the_claim_cuts_nothing_while_another_store_holds_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let writer = jsonl(dir.path());
    let held = writer.claim("s").await.unwrap();
    writer.append("s", &session_events()).await.unwrap();
    let path = writer.path("s").unwrap();
    // What an append in flight looks like from outside: a line without its newline yet.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(br#"{"seq":4,"ti"#);
    std::fs::write(&path, &bytes).unwrap();

    let reader = jsonl(dir.path());
    let loaded = reader.load("s").await.unwrap().unwrap();
    assert_eq!(loaded.events, session_events());
    assert_eq!(loaded.torn, Some(TornTail { line: 5, bytes: 12, kept_in: None }));
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "the holder's file is not touched");

    // Once nobody holds it, the tail is a crash's: a load cuts it.
    drop(held);
    let loaded = reader.load("s").await.unwrap().unwrap();
    assert_eq!(loaded.torn.map(|t| t.line), Some(5));
    assert_eq!(loaded.events, session_events());
    assert_eq!(std::fs::read(&path).unwrap(), &bytes[..bytes.len() - 12]);
}

#[tokio::test]
async fn a_sqlite_database_belongs_to_one_store_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("events.db");
    let store = SqliteStore::open(&db, Durability::Os).unwrap();
    store.append("s", &session_events()).await.unwrap();
    let refused = SqliteStore::open(&db, Durability::Os).unwrap_err();
    match &refused {
        StoreError::Locked { what, lock, holder } => {
            assert_eq!(what, &db.display().to_string());
            assert_eq!(lock, &format!("{}.lock", db.display()));
            assert_eq!(holder.map(|h| h.pid), Some(std::process::id()));
        }
        other => panic!("{other:?}"),
    }
    drop(store);
    let reopened = SqliteStore::open(&db, Durability::Os).unwrap();
    assert_eq!(reopened.load("s").await.unwrap().unwrap().events, session_events());
}

#[tokio::test]
async fn a_session_log_cannot_open_a_session_another_store_holds_and_writes_nothing() {
    use rein_runtime::clock::VirtualClock;
    use rein_runtime::session_log::{LogError, SessionLog};
    let dir = tempfile::tempdir().unwrap();
    let open =
        |store: JsonlStore| SessionLog::open(Arc::new(store), Arc::new(VirtualClock::start()), "s");
    let (log, _) = open(jsonl(dir.path())).await.unwrap();
    log.append(vec![Event::UserMessage(UserMessage { text: "hi".into() })]).await.unwrap();
    let path = dir.path().join("s.jsonl");
    let before = std::fs::read(&path).unwrap();

    let refused = open(jsonl(dir.path())).await.unwrap_err();
    assert!(matches!(refused, LogError::Store(StoreError::Locked { .. })), "{refused}");
    assert_eq!(std::fs::read(&path).unwrap(), before, "the second opener wrote nothing");

    log.close().await;
    let (again, report) = open(jsonl(dir.path())).await.unwrap();
    assert_eq!(report.events, 2);
    again.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_hibernated_session_lets_its_lock_go_and_waking_takes_it_again() {
    use rein_runtime::runtime::{Route, Runtime};
    use rein_runtime::session::SessionError;
    let dir = tempfile::tempdir().unwrap();
    let adapter = Arc::new(Answer);
    let runtime = Runtime::builder()
        .store(Arc::new(jsonl(dir.path())))
        .clock(Arc::new(rein_runtime::clock::VirtualClock::start()))
        .route(Route::new("mock", adapter).model("m"))
        .idle_grace(std::time::Duration::ZERO)
        .build()
        .await
        .unwrap();
    let session = runtime.session("s").await.unwrap();
    session.ask("one").await.unwrap();
    session.close().await.unwrap();
    assert!(!session.is_awake());

    // Hibernated, the session is free for another process (here, another store).
    let elsewhere = jsonl(dir.path());
    let held = elsewhere.claim("s").await.unwrap();
    let refused = session.ask("two").await.unwrap_err();
    match &refused {
        SessionError::Open { session, source } => {
            assert_eq!(session, "s");
            let log = dir.path().join("s.jsonl");
            let want = format!("{} is in use by ", log.display());
            assert!(source.to_string().starts_with(&want), "{refused}");
        }
        other => panic!("{other:?}"),
    }
    drop(held);
    let outcome = session.ask("three").await.unwrap();
    assert_eq!(outcome.turn, 2, "the refused prompt wrote nothing");
    runtime.shutdown().await;
    let events = jsonl(dir.path()).load("s").await.unwrap().unwrap().events;
    assert!(rein_invariant::check_finished_log(&events).is_empty());
}

/// Answers every request with one chunk.
struct Answer;

impl rein_runtime::provider::Adapter for Answer {
    fn call(
        &self,
        _: rein_runtime::provider::Request,
        chunks: rein_runtime::provider::ChunkSink,
    ) -> rein_runtime::BoxFuture<'static, Result<rein_runtime::provider::Completion, Failure>> {
        let _ = chunks.send("ok".into());
        Box::pin(async { Ok(rein_runtime::provider::Completion::default()) })
    }
}

// ---------------------------------------------------------------------------------------------
// Hostile files
// ---------------------------------------------------------------------------------------------

#[cfg(unix)]
#[tokio::test]
async fn a_log_that_is_a_fifo_or_a_device_is_refused_by_every_reader_never_read() {
    use rein_runtime::store::jsonl::read_log;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("f.jsonl");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("z.jsonl")).unwrap();
    let store = jsonl(dir.path());
    for (session, what) in [("f", "a FIFO"), ("z", "a character device")] {
        let path = dir.path().join(format!("{session}.jsonl"));
        let want = format!("{}: not a regular file: {what}", path.display());
        assert_eq!(store.load(session).await.unwrap_err().to_string(), want);
        assert_eq!(store.append(session, &[idle(0)]).await.unwrap_err().to_string(), want);
        assert_eq!(read_log(&path).unwrap_err().to_string(), want);
    }
    let db = dir.path().join("events.db");
    assert!(std::process::Command::new("mkfifo").arg(&db).status().unwrap().success());
    let err = SqliteStore::open(&db, Durability::Os).unwrap_err().to_string();
    assert_eq!(err, format!("{}: not a regular file: a FIFO", db.display()));
}

#[tokio::test]
async fn a_log_over_the_size_limit_is_refused_before_a_byte_is_read() {
    use rein_runtime::store::MAX_LOG_BYTES;
    use rein_runtime::store::jsonl::read_log;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    // Sparse: 4 GiB of nothing on the disk.
    std::fs::File::create(&path).unwrap().set_len(MAX_LOG_BYTES + 1).unwrap();
    let want = format!(
        "{}: the file is {} bytes, over the limit of 4 GiB",
        path.display(),
        MAX_LOG_BYTES + 1
    );
    let store = jsonl(dir.path());
    assert_eq!(store.load("s").await.unwrap_err().to_string(), want);
    assert_eq!(store.append("s", &[idle(0)]).await.unwrap_err().to_string(), want);
    assert_eq!(read_log(&path).unwrap_err().to_string(), want);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), MAX_LOG_BYTES + 1, "nothing cut");
}

// ---------------------------------------------------------------------------------------------
// Counters that cannot be incremented
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_log_whose_open_turn_has_the_largest_number_is_refused_naming_file_and_line() {
    use rein_runtime::clock::VirtualClock;
    use rein_runtime::session_log::{LogError, SessionLog};
    let crafted = [
        envelope(0, Event::SessionStart(SessionStart { session: "s".into(), format: LOG_FORMAT })),
        message(1, "hi"),
        envelope(2, Event::TurnStart(TurnStart { turn: u32::MAX })),
    ];
    let text: String = crafted.iter().map(|e| serde_json::to_string(e).unwrap() + "\n").collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    std::fs::write(&path, &text).unwrap();
    let want = format!(
        "{}:3: corrupt log line: turn 4294967295 is the largest there can be: no turn can follow \
         it: the log cannot be continued",
        path.display()
    );

    // Loaded, reopened as a session, or appended to without a load: refused, never continued.
    assert_eq!(jsonl(dir.path()).load("s").await.unwrap_err().to_string(), want);
    let opened =
        SessionLog::open(Arc::new(jsonl(dir.path())), Arc::new(VirtualClock::start()), "s");
    match opened.await {
        Err(LogError::Store(error)) => assert_eq!(error.to_string(), want),
        other => panic!("{other:?}"),
    }
    let appended = jsonl(dir.path()).append("s", &[idle(3)]).await.unwrap_err();
    assert_eq!(appended.to_string(), want);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "nothing rewritten");

    // The same rows in a SQLite store: the same refusal, at `db#session`.
    let db = dir.path().join("events.db");
    let store = SqliteStore::open(&db, Durability::Os).unwrap();
    store.append("s", &crafted[..2]).await.unwrap();
    drop(store);
    let raw = rusqlite::Connection::open(&db).unwrap();
    let line = serde_json::to_string(&crafted[2]).unwrap();
    raw.execute("INSERT INTO events VALUES ('s', 2, ?1)", [line]).unwrap();
    drop(raw);
    let err = SqliteStore::open(&db, Durability::Os).unwrap().load("s").await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Corrupt { path, line: 3, message }
            if *path == format!("{}#s", db.display()) && message.contains("turn 4294967295")),
        "{err}"
    );

    // And no store writes one: a session that would reach it fails its append there.
    let refused = jsonl(dir.path()).append("t", &crafted).await.unwrap_err().to_string();
    assert!(refused.contains("cannot be written: turn 4294967295 is the largest"), "{refused}");
    assert!(!dir.path().join("t.jsonl").exists());
}
