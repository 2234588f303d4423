//! Retry ids are unique in a log and across sessions, and still replay: the README's own two
//! commands (`rein chat --seed 1 …`, then `rein chat --seed 1 --session ID …`) on one session,
//! a second session of the same seed, and the same seed and session in another store.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use rein_runtime::event::Event;
use rein_testkit::cli::{checked_log, log_path, rein, rein_check, session_id};

/// Every `llm/retry` of a log, as (turn, retryId).
fn retry_ids(path: &Path) -> Vec<(u32, String)> {
    checked_log(path)
        .iter()
        .filter_map(|e| match &e.event {
            Event::LlmRetry(r) => Some((r.turn, r.retry_id.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn two_seeded_runs_on_one_session_write_two_retry_ids_and_the_log_checks_finished() {
    let dir = tempfile::tempdir().unwrap();
    let first = rein(dir.path(), &["chat", "--seed", "1", "What is a retry?"], &[], "");
    assert_eq!(first.code, Some(0), "{first:?}");
    let id = session_id(&first);
    let args = ["chat", "--seed", "1", "--session", &id, "And a second one?"];
    let second = rein(dir.path(), &args, &[], "");
    assert_eq!(second.code, Some(0), "{second:?}");
    assert!(second.stderr.contains("(resumed, 1 turn)"), "{second:?}");

    // Seed 1 meets a fault in both turns: each run opened a chain in its own process.
    let path = log_path(dir.path(), &id);
    let ids = retry_ids(&path);
    let turns: Vec<u32> = ids.iter().map(|(turn, _)| *turn).collect();
    assert!(turns.contains(&1) && turns.contains(&2), "a retry in each turn: {ids:?}");
    let first_of = |turn: u32| ids.iter().find(|(t, _)| *t == turn).unwrap().1.clone();
    assert_ne!(first_of(1), first_of(2), "two chains, two ids");
    rein_check(dir.path(), &path);

    // Another session of the same seed meets the same faults, under ids of its own.
    let other = rein(dir.path(), &["chat", "--seed", "1", "What is a retry?"], &[], "");
    assert_eq!(other.code, Some(0), "{other:?}");
    let other_path = log_path(dir.path(), &session_id(&other));
    let other_ids = retry_ids(&other_path);
    assert_eq!(other_ids.len(), ids.iter().filter(|(t, _)| *t == 1).count(), "{other_ids:?}");
    assert!(other_ids.iter().all(|(_, o)| ids.iter().all(|(_, i)| i != o)), "{other_ids:?}");
    rein_check(dir.path(), &other_path);

    // The same seed and session in another store: a replay, with the same ids.
    let replay = tempfile::tempdir().unwrap();
    let args = ["chat", "--seed", "1", "--session", &id, "What is a retry?"];
    let run = rein(replay.path(), &args, &[], "");
    assert_eq!(run.code, Some(0), "{run:?}");
    let replayed = retry_ids(&log_path(replay.path(), &id));
    let turn_1: Vec<(u32, String)> = ids.into_iter().filter(|(t, _)| *t == 1).collect();
    assert_eq!(replayed, turn_1, "a replay writes the same ids");
}
