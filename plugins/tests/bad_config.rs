//! Bad configuration never panics: `llm-retry`'s configuration reader, fed any JSON and the real
//! configurations of `tests/scenarios/` with bytes flipped, cut or inserted, returns a policy or
//! a `PolicyError` naming a field under the configuration's path, and leaves its input as it was.

// Helpers outside `#[test]` functions build fixtures; a failure there is a broken test.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use rein_plugins::llm_retry::LlmRetryConfig;
use serde_json::Value;

use rein_testkit::mutation::{Mutation, mutate};
use rein_testkit::{arbitrary_json, mutation};

/// Cases per property: enough to find what a run of the full suite should, few enough for CI.
const CASES: u32 = 128;

/// Where the configuration sits in its file.
const AT: &str = "plugins[0].config";

/// The `llm-retry` configurations the scenario files use (as JSON text).
fn configurations() -> &'static [Vec<u8>] {
    static FOUND: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    FOUND.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios");
        let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|e| e == "json"))
            .collect();
        paths.sort();
        let mut found = Vec::new();
        for path in paths {
            let scenario: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
            for plugin in scenario["plugins"].as_array().into_iter().flatten() {
                if plugin["use"] == "llm-retry" && !plugin["config"].is_null() {
                    found.push(serde_json::to_vec(&plugin["config"]).unwrap());
                }
            }
        }
        assert!(!found.is_empty(), "no scenario in {} configures llm-retry", dir.display());
        found
    })
}

/// Reads `bytes`, if they are JSON, as `llm-retry`'s configuration.
fn checked(bytes: &[u8]) -> Result<(), TestCaseError> {
    let Ok(value) = serde_json::from_slice::<Value>(bytes) else { return Ok(()) };
    let before = value.clone();
    if let Err(err) = LlmRetryConfig::parse(&value, AT) {
        prop_assert!(err.path.starts_with(AT), "{err:?} is not under {AT}");
        prop_assert!(!err.to_string().is_empty());
    }
    prop_assert_eq!(value, before, "the reader changed its input");
    Ok(())
}

/// Mutations of a configuration: numbers made huge, negative or fractional, structure broken.
fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    mutation::mutations(b"0123456789-.eE+\"{}[],:")
}

/// Any JSON value, nested a little, with the configuration's keys likelier than others.
fn json() -> impl Strategy<Value = Value> {
    let mut keys = LlmRetryConfig::KEYS.to_vec();
    keys.push("other");
    arbitrary_json::json(&["RATE_LIMIT", "SERVER", "", "429", "1e400"], &keys)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, ..ProptestConfig::default() })]

    #[test]
    fn any_json_configuration_is_read_or_refused_under_its_path(value in json()) {
        checked(&serde_json::to_vec(&value).unwrap())?;
    }

    #[test]
    fn any_bytes_as_a_configuration_are_read_or_refused(
        bytes in prop::collection::vec(any::<u8>(), 0..128),
    ) {
        checked(&bytes)?;
    }

    #[test]
    fn a_damaged_real_configuration_is_read_or_refused_under_its_path(
        config in prop::sample::select(configurations()),
        mutations in mutations(),
    ) {
        checked(&mutate(config, &mutations))?;
    }
}

#[test]
fn the_real_configurations_are_valid() {
    // The mutations start from configurations that read cleanly, or they would prove little.
    for config in configurations() {
        LlmRetryConfig::parse(&serde_json::from_slice(config).unwrap(), AT).unwrap();
    }
}
