//! Bad input never panics: arbitrary bytes, and real valid inputs with bytes flipped, cut or
//! inserted, fed to the readers of rein's inputs.
//!
//! - A JSONL session log loaded by `JsonlStore`: the events, or a torn tail cut and kept beside
//!   the file, or a corrupt-line error naming the file and a line it has (the file untouched).
//! - A scenario file: a scenario, or an `InvalidScenario` naming a field.
//! - A route's declared retry policy: a policy, or a `PolicyError` naming a field under the
//!   route's path.
//!
//! The valid inputs are real: logs written by the store itself, the scenario files of
//! `tests/scenarios/`, and the retry policies those scenarios declare.

// Helpers outside `#[test]` functions build fixtures; a failure there is a broken test.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use rein_runtime::event::*;
use rein_runtime::failure::Failure;
use rein_runtime::retry_policy::RetryPolicy;
use rein_runtime::store::jsonl::JsonlStore;
use rein_runtime::store::{Durability, SessionStore, StoreError};
use rein_scenario::format::Scenario;
use rein_testkit::stamped::envelope;
use serde_json::Value;

use rein_testkit::mutation::{Mutation, mutate};
use rein_testkit::{arbitrary_json, mutation};

/// Cases per property: enough to find what a run of the full suite should, few enough for CI.
const CASES: u32 = 96;

// ---------------------------------------------------------------------------------------------
// Mutations of valid inputs
// ---------------------------------------------------------------------------------------------

/// Mutations of a log or a scenario file: its JSON and its lines broken.
fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    mutation::mutations(b"\n{}[]\":,0-9eE.\\ \0")
}

// ---------------------------------------------------------------------------------------------
// JSONL session logs
// ---------------------------------------------------------------------------------------------

/// A real log, written by the store: a session start, text with escapes and multi-byte
/// characters, a turn, a request error.
fn valid_log() -> &'static [u8] {
    static LOG: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    LOG.get_or_init(|| {
        let events = vec![
            envelope(
                0,
                Event::SessionStart(SessionStart { session: "s".into(), format: LOG_FORMAT }),
            ),
            envelope(
                1,
                Event::UserMessage(UserMessage { text: "héllo \u{1F600} \"q\"\nx".into() }),
            ),
            envelope(2, Event::TurnStart(TurnStart { turn: 1 })),
            envelope(
                3,
                Event::RequestError(RequestError {
                    turn: 1,
                    step: 1,
                    attempt: 1,
                    provider: "mock".into(),
                    failure: Failure::new("RATE_LIMIT", "slow down")
                        .unwrap()
                        .with_status(429)
                        .unwrap(),
                }),
            ),
            envelope(4, Event::AgentIdle(AgentIdle {})),
        ];
        let dir = tempfile::tempdir().unwrap();
        let store = JsonlStore::open(dir.path(), Durability::Os).unwrap();
        block_on(store.append("s", &events)).unwrap();
        std::fs::read(store.path("s").unwrap()).unwrap()
    })
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(future)
}

/// Loads `bytes` as session `s`'s log and checks what a load may do with them.
fn load_checked(bytes: &[u8]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path(), Durability::Os).unwrap();
    let path = store.path("s").unwrap();
    std::fs::write(&path, bytes).unwrap();
    let lines = bytes.split_inclusive(|&b| b == b'\n').count() as u64;
    match block_on(store.load("s")) {
        Ok(loaded) => {
            let after = std::fs::read(&path).unwrap();
            let Some(loaded) = loaded else {
                prop_assert!(bytes.is_empty(), "only an empty file has no events");
                return Ok(());
            };
            match &loaded.torn {
                None => prop_assert_eq!(&after[..], bytes, "a clean load changed the file"),
                Some(torn) => {
                    // The torn line is the last one; exactly its bytes were cut and kept.
                    prop_assert_eq!(torn.line, lines);
                    let cut = bytes.len() - usize::try_from(torn.bytes).unwrap();
                    prop_assert_eq!(&after[..], &bytes[..cut]);
                    let kept = std::fs::read(torn.kept_in.as_ref().unwrap()).unwrap();
                    prop_assert_eq!(&kept[..kept.len() - 1], &bytes[cut..]);
                }
            }
            let seqs: Vec<u64> = loaded.events.iter().map(|e| e.seq).collect();
            prop_assert_eq!(seqs, (0..loaded.events.len() as u64).collect::<Vec<_>>());
        }
        Err(StoreError::Corrupt { path: named, line, .. }) => {
            prop_assert_eq!(named, path.display().to_string());
            prop_assert!((1..=lines).contains(&line), "line {line} of {lines}");
            prop_assert_eq!(&std::fs::read(&path).unwrap()[..], bytes, "a corrupt log was changed");
        }
        Err(other) => prop_assert!(false, "unexpected error: {other}"),
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Scenario files and declared retry policies
// ---------------------------------------------------------------------------------------------

fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios")
}

/// The bytes of every scenario file of `tests/scenarios/`.
fn scenario_files() -> &'static [Vec<u8>] {
    static FILES: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    FILES.get_or_init(|| {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(scenarios_dir())
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|e| e == "json"))
            .collect();
        paths.sort();
        assert!(!paths.is_empty(), "no scenario files in {}", scenarios_dir().display());
        paths.iter().map(|path| std::fs::read(path).unwrap()).collect()
    })
}

/// The retry policies the scenario files declare on their routes (as JSON text).
fn declared_policies() -> &'static [Vec<u8>] {
    static POLICIES: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    POLICIES.get_or_init(|| {
        let mut found = Vec::new();
        for file in scenario_files() {
            let scenario: Value = serde_json::from_slice(file).unwrap();
            for route in scenario["providers"].as_array().into_iter().flatten() {
                if let Some(policy) = route.get("retryPolicy") {
                    found.push(serde_json::to_vec(policy).unwrap());
                }
            }
        }
        assert!(!found.is_empty(), "no scenario declares a retry policy");
        found
    })
}

/// Reads `bytes` as a scenario file's text (the CLI refuses text that is not UTF-8 before this
/// point; here it is read lossily so that mutations still reach the parser).
fn scenario_checked(bytes: &[u8]) -> Result<(), TestCaseError> {
    let text = String::from_utf8_lossy(bytes);
    if let Err(err) = Scenario::from_json(&text) {
        prop_assert!(!err.path.is_empty() && !err.message.is_empty(), "{err:?}");
    }
    if let Ok(value) = serde_json::from_slice::<Value>(bytes)
        && let Err(err) = Scenario::from_value(value)
    {
        prop_assert!(!err.path.is_empty() && !err.message.is_empty(), "{err:?}");
    }
    Ok(())
}

/// Reads `bytes`, if they are JSON, as a route's declared policy.
fn policy_checked(bytes: &[u8]) -> Result<(), TestCaseError> {
    const AT: &str = "providers.mock.retryPolicy";
    let Ok(value) = serde_json::from_slice::<Value>(bytes) else { return Ok(()) };
    let before = value.clone();
    if let Err(err) = RetryPolicy::from_declared(&value, AT) {
        prop_assert!(err.path.starts_with(AT), "{err:?} is not under {AT}");
        prop_assert!(!err.to_string().is_empty());
    }
    prop_assert_eq!(value, before, "the reader changed its input");
    Ok(())
}

/// Any JSON value, nested a little: what a reader of configuration may be handed.
fn json() -> impl Strategy<Value = Value> {
    arbitrary_json::json(
        &["normal", "always", "never", "", "RATE_LIMIT", "429", "-1"],
        &[
            "mode",
            "maxRetries",
            "retryableCodes",
            "backoff",
            "initialDelayMs",
            "maxDelayMs",
            "jitterRatio",
            "other",
        ],
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, ..ProptestConfig::default() })]

    #[test]
    fn a_jsonl_log_of_any_bytes_loads_or_names_its_bad_line(
        bytes in prop::collection::vec(any::<u8>(), 0..512),
    ) {
        load_checked(&bytes)?;
    }

    #[test]
    fn a_damaged_jsonl_log_loads_cuts_its_torn_tail_or_names_its_bad_line(
        mutations in mutations(),
    ) {
        load_checked(&mutate(valid_log().to_vec(), &mutations))?;
    }

    #[test]
    fn a_scenario_of_any_bytes_is_read_or_refused_naming_a_field(
        bytes in prop::collection::vec(any::<u8>(), 0..256),
    ) {
        scenario_checked(&bytes)?;
    }

    #[test]
    fn a_damaged_scenario_file_is_read_or_refused_naming_a_field(
        file in prop::sample::select(scenario_files()),
        mutations in mutations(),
    ) {
        scenario_checked(&mutate(file, &mutations))?;
    }

    #[test]
    fn a_declared_policy_of_any_json_is_read_or_refused_under_its_path(value in json()) {
        policy_checked(&serde_json::to_vec(&value).unwrap())?;
    }

    #[test]
    fn a_damaged_declared_policy_is_read_or_refused_under_its_path(
        policy in prop::sample::select(declared_policies()),
        mutations in mutations(),
    ) {
        policy_checked(&mutate(policy, &mutations))?;
    }
}

#[test]
fn the_valid_inputs_are_valid() {
    // The mutations start from inputs that read cleanly, or they would prove little.
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path(), Durability::Os).unwrap();
    std::fs::write(store.path("s").unwrap(), valid_log()).unwrap();
    assert_eq!(block_on(store.load("s")).unwrap().unwrap().events.len(), 5);
    for file in scenario_files() {
        Scenario::from_json(std::str::from_utf8(file).unwrap()).unwrap();
    }
    for policy in declared_policies() {
        RetryPolicy::from_declared(&serde_json::from_slice(policy).unwrap(), "p").unwrap();
    }
}
