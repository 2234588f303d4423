//! [`Revisioned`]: a plugin's current settings behind a revision fence (compare-and-set).
//!
//! The settings start at revision 0. A patch names the revision it was based on; it is applied
//! only if that is still the current revision, and then the revision goes up by one. A patch
//! based on any other revision is refused with
//! [`ConfigError::StaleRevision`] and nothing is overwritten, so of two writers that read the
//! same revision exactly one wins and the other must reload. Every accepted patch bumps the
//! revision, also one that changed no value (its `changed` is empty): the revision counts
//! accepted writes.
//!
//! Readers take a [`Snapshot`] — the revision and an `Arc` of the settings — and keep deciding
//! with it; a patch swaps the `Arc`, so a recovery in progress sees the new settings the next time
//! it takes a snapshot, without locking anything while it waits.
//!
//! # Why a lock and no async
//!
//! The critical section is a comparison and an `Arc` swap: a `std` lock held for nanoseconds, and
//! the patch itself is read before the lock is taken. Nothing here waits, so it is usable from a
//! plugin's synchronous `configure` and from any thread, and stays free of the runtime's executor.

use std::sync::{Arc, PoisonError, RwLock};

use rein_runtime::plugin::{ConfigError, ConfigOutcome, PluginSettings};
use serde_json::Value;

use super::Settings;

/// A plugin's settings and their revision.
#[derive(Debug)]
pub struct Revisioned<T> {
    current: RwLock<Snapshot<T>>,
}

/// The settings at one revision.
#[derive(Debug)]
pub struct Snapshot<T> {
    /// The revision (0 for the settings the plugin was built with).
    pub revision: u64,
    /// The settings.
    pub settings: Arc<T>,
}

impl<T> Clone for Snapshot<T> {
    fn clone(&self) -> Self {
        Snapshot { revision: self.revision, settings: Arc::clone(&self.settings) }
    }
}

/// An accepted patch.
#[derive(Debug, Clone, PartialEq)]
pub struct Accepted<T> {
    /// The new revision.
    pub revision: u64,
    /// The keys of the fields whose value changed (empty when the patch changed nothing).
    pub changed: Vec<&'static str>,
    /// The settings now in force.
    pub settings: Arc<T>,
}

impl<T> From<Accepted<T>> for ConfigOutcome {
    fn from(accepted: Accepted<T>) -> Self {
        ConfigOutcome {
            revision: accepted.revision,
            changed: accepted.changed.into_iter().map(str::to_owned).collect(),
        }
    }
}

impl<T: Settings> Revisioned<T> {
    /// `settings` at revision 0.
    pub fn new(settings: T) -> Self {
        Revisioned { current: RwLock::new(Snapshot { revision: 0, settings: Arc::new(settings) }) }
    }

    /// The current settings and their revision.
    pub fn snapshot(&self) -> Snapshot<T> {
        self.current.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The current settings.
    pub fn settings(&self) -> Arc<T> {
        self.snapshot().settings
    }

    /// The current revision (the base the next patch must name).
    pub fn revision(&self) -> u64 {
        self.current.read().unwrap_or_else(PoisonError::into_inner).revision
    }

    /// Checks `patch` as [`configure`](Self::configure) would — the revision fence, then every
    /// field — without applying it: the keys it would change, or the error that would refuse it.
    /// What a settings page calls to block a save and name the field.
    pub fn check(&self, patch: &Value, base_revision: u64) -> Result<Vec<String>, ConfigError> {
        let current = self.fenced(base_revision)?;
        Ok(current.settings.patched(patch)?.changed.into_iter().map(str::to_owned).collect())
    }

    /// What [`Plugin::settings`](rein_runtime::plugin::Plugin::settings) shows: the current
    /// settings as JSON (their own keys) with their revision, open to run-time patches.
    pub fn shown(&self) -> PluginSettings
    where
        T: serde::Serialize,
    {
        let Snapshot { revision, settings } = self.snapshot();
        // Serializing plain settings fields cannot fail.
        let settings = serde_json::to_value(&*settings).unwrap_or(Value::Null);
        PluginSettings { revision, settings, read_only: false }
    }

    /// Applies `patch`, based on `base_revision`: refused with
    /// [`ConfigError::StaleRevision`] unless `base_revision` is the current revision (also when a
    /// concurrent patch from the same revision won meanwhile), with [`ConfigError::Invalid`]
    /// naming the first invalid field; accepted, it bumps the revision and says which fields
    /// changed.
    pub fn configure(&self, patch: &Value, base_revision: u64) -> Result<Accepted<T>, ConfigError> {
        let base = self.fenced(base_revision)?;
        let patched = base.settings.patched(patch)?;
        let settings = Arc::new(patched.settings);
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        if current.revision != base_revision {
            return Err(stale(base_revision, current.revision));
        }
        let revision = base_revision + 1;
        *current = Snapshot { revision, settings: Arc::clone(&settings) };
        Ok(Accepted { revision, changed: patched.changed, settings })
    }

    fn fenced(&self, base_revision: u64) -> Result<Snapshot<T>, ConfigError> {
        let current = self.snapshot();
        if current.revision == base_revision {
            Ok(current)
        } else {
            Err(stale(base_revision, current.revision))
        }
    }
}

fn stale(based_on: u64, current: u64) -> ConfigError {
    ConfigError::StaleRevision { based_on, current }
}

#[cfg(test)]
mod tests {
    use std::sync::Barrier;
    use std::thread;

    use serde_json::json;

    use super::*;
    use crate::settings::{FieldError, Patched, patch};

    /// Two fields, each patchable.
    #[derive(Debug, Clone, PartialEq)]
    struct Pair {
        a: u32,
        b: u32,
    }

    impl Settings for Pair {
        fn patched(&self, value: &Value) -> Result<Patched<Self>, FieldError> {
            let fields = patch::fields(value, &["a", "b"])?;
            let mut next = self.clone();
            let mut changed = Vec::new();
            if let Some(v) = fields.get("a") {
                next.a = patch::integer(v, "a", 0..=100)?;
                if next.a != self.a {
                    changed.push("a");
                }
            }
            if let Some(v) = fields.get("b") {
                next.b = patch::integer(v, "b", 0..=100)?;
                if next.b != self.b {
                    changed.push("b");
                }
            }
            Ok(Patched { settings: next, changed })
        }
    }

    #[test]
    fn the_fence_accepts_only_the_current_revision() {
        let settings = Revisioned::new(Pair { a: 1, b: 2 });
        assert_eq!(settings.revision(), 0);
        /// The accepted revision and changed keys, or the refusal's text.
        type Outcome = Result<(u64, Vec<&'static str>), &'static str>;
        // (patch, base revision) → outcome
        let cases: Vec<(Value, u64, Outcome)> = vec![
            (json!({"a": 5}), 0, Ok((1, vec!["a"]))),
            // Based on a revision that is gone: refused, nothing changes.
            (
                json!({"a": 7}),
                0,
                Err("stale revision: the patch is based on revision 0, the settings are at 1"),
            ),
            (
                json!({"a": 7}),
                9,
                Err("stale revision: the patch is based on revision 9, the settings are at 1"),
            ),
            // Invalid: refused, the revision stays.
            (json!({"a": 101}), 1, Err("a: must be an integer within 0..=100, got 101")),
            (json!({"c": 1}), 1, Err("c: unknown key (expected one of: a, b)")),
            // Accepted with no value changed: still a new revision, nothing listed.
            (json!({"a": 5}), 1, Ok((2, vec![]))),
            (json!({}), 2, Ok((3, vec![]))),
            (json!({"b": 3, "a": 6}), 3, Ok((4, vec!["a", "b"]))),
        ];
        for (patch, base, expected) in cases {
            let checked = settings.check(&patch, base);
            let got = settings.configure(&patch, base);
            match (expected, got) {
                (Ok((revision, changed)), Ok(accepted)) => {
                    assert_eq!(
                        (accepted.revision, accepted.changed.clone()),
                        (revision, changed.clone())
                    );
                    let changed: Vec<String> = changed.iter().map(|c| (*c).to_owned()).collect();
                    assert_eq!(checked, Ok(changed), "check says what configure does");
                    assert_eq!(settings.snapshot().settings, accepted.settings);
                }
                (Err(text), Err(error)) => {
                    assert_eq!(error.to_string(), text, "{patch}");
                    assert_eq!(checked, Err(error), "check refuses what configure refuses");
                }
                (expected, got) => panic!("{patch} at {base}: expected {expected:?}, got {got:?}"),
            }
        }
        let now = settings.snapshot();
        assert_eq!((now.revision, (*now.settings).clone()), (4, Pair { a: 6, b: 3 }));
    }

    #[test]
    fn checking_applies_nothing() {
        let settings = Revisioned::new(Pair { a: 1, b: 2 });
        assert_eq!(settings.check(&json!({"a": 9}), 0), Ok(vec!["a".to_owned()]));
        assert_eq!(settings.revision(), 0);
        assert_eq!(*settings.settings(), Pair { a: 1, b: 2 });
    }

    #[test]
    fn an_accepted_patch_is_the_runtimes_config_outcome() {
        let settings = Revisioned::new(Pair { a: 1, b: 2 });
        let outcome: ConfigOutcome = settings.configure(&json!({"b": 9}), 0).unwrap().into();
        assert_eq!(outcome, ConfigOutcome { revision: 1, changed: vec!["b".to_owned()] });
    }

    #[test]
    fn of_two_concurrent_patches_from_one_revision_exactly_one_wins() {
        for round in 0..200 {
            let settings = Arc::new(Revisioned::new(Pair { a: 0, b: 0 }));
            let start = Arc::new(Barrier::new(2));
            let writers: Vec<_> = [json!({"a": 1}), json!({"b": 2})]
                .into_iter()
                .map(|patch| {
                    let settings = Arc::clone(&settings);
                    let start = Arc::clone(&start);
                    thread::spawn(move || {
                        start.wait();
                        (patch.clone(), settings.configure(&patch, 0))
                    })
                })
                .collect();
            let results: Vec<_> = writers.into_iter().map(|w| w.join().unwrap()).collect();
            let winners: Vec<&Value> =
                results.iter().filter(|(_, r)| r.is_ok()).map(|(p, _)| p).collect();
            assert_eq!(winners.len(), 1, "round {round}: {results:?}");
            for (_, result) in &results {
                if let Err(error) = result {
                    assert_eq!(error, &ConfigError::StaleRevision { based_on: 0, current: 1 });
                }
            }
            // Only the winner's field was written.
            let expected = if winners[0] == &json!({"a": 1}) {
                Pair { a: 1, b: 0 }
            } else {
                Pair { a: 0, b: 2 }
            };
            let now = settings.snapshot();
            assert_eq!((now.revision, (*now.settings).clone()), (1, expected), "round {round}");
        }
    }

    #[test]
    fn a_snapshot_taken_before_a_patch_keeps_its_settings() {
        let settings = Revisioned::new(Pair { a: 1, b: 2 });
        let before = settings.snapshot();
        settings.configure(&json!({"a": 3}), 0).unwrap();
        assert_eq!((before.revision, before.settings.a), (0, 1));
        assert_eq!(settings.settings().a, 3);
    }
}
