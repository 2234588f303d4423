//! [`Revisioned`]: a plugin's current settings behind a revision fence (compare-and-set) — the
//! one implementation of the runtime's [`Settings`] seam (show, stage, commit, restore) that
//! every settings type shares.
//!
//! The settings start at revision 0. A patch names the revision it was based on; it is staged
//! only if that is still the current revision, and committed only if no other commit moved the
//! revision since: then the revision goes up by one. A patch based on any other revision is
//! refused with [`ConfigError::StaleRevision`] and nothing is overwritten, so of two writers that
//! read the same revision exactly one wins and the other must reload. Every committed patch bumps
//! the revision, also one that changed no value (its `changed` is empty): the revision counts
//! accepted writes. Restoring puts settings and a revision back as a durable record holds them:
//! read strictly like a patch, with no fence.
//!
//! A plugin adds what its settings type cannot know on its own: a [`guard`](Revisioned::guard)
//! that also refuses settings (`fallback`: a route the runtime does not serve), checked when a
//! patch is staged and when settings are restored; and an [`on_commit`](Revisioned::on_commit)
//! hook that sees the settings before and after each commit or restore (`auto-retry`: a switch to
//! disabled ends the waits in progress).
//!
//! Readers take a [`Snapshot`] — the revision and an `Arc` of the settings — and keep deciding
//! with it; a commit swaps the `Arc`, so a recovery in progress sees the new settings the next
//! time it takes a snapshot, without locking anything while it waits.
//!
//! # Why a lock and no async
//!
//! The critical section is a comparison and an `Arc` swap: a `std` lock held for nanoseconds, and
//! the patch itself is read when it is staged, before the lock is taken. Nothing here waits, so it
//! is usable from any thread, and stays free of the runtime's executor.

use std::sync::{Arc, PoisonError, RwLock};

use rein_runtime::plugin::{ConfigError, ConfigOutcome, PluginSettings, Settings, Staged};
use serde::Serialize;
use serde_json::Value;

use super::Patchable;

/// A guard's check of the settings a patch or a restore would leave.
type Guard<T> = Box<dyn Fn(&T) -> Result<(), ConfigError> + Send + Sync>;
/// A hook run after a commit or a restore, with the settings before and after.
type Hook<T> = Box<dyn Fn(&T, &T) + Send + Sync>;

/// A plugin's settings and their revision.
pub struct Revisioned<T> {
    current: RwLock<Snapshot<T>>,
    guard: Option<Guard<T>>,
    on_commit: Option<Hook<T>>,
}

impl<T: std::fmt::Debug> std::fmt::Debug for Revisioned<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Revisioned").field("current", &*current).finish_non_exhaustive()
    }
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

impl<T: Patchable> Revisioned<T> {
    /// `settings` at revision 0.
    pub fn new(settings: T) -> Self {
        let current = RwLock::new(Snapshot { revision: 0, settings: Arc::new(settings) });
        Revisioned { current, guard: None, on_commit: None }
    }

    /// Also refuses the settings a patch (when staged) or a restore would leave when `guard`
    /// refuses them, with its error (which names the field).
    #[must_use]
    pub fn guard(
        mut self,
        guard: impl Fn(&T) -> Result<(), ConfigError> + Send + Sync + 'static,
    ) -> Self {
        self.guard = Some(Box::new(guard));
        self
    }

    /// Runs `hook` with the settings before and after every commit and restore, once the new
    /// settings are in force.
    #[must_use]
    pub fn on_commit(mut self, hook: impl Fn(&T, &T) + Send + Sync + 'static) -> Self {
        self.on_commit = Some(Box::new(hook));
        self
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

    /// The settings `patch` leaves over `base`, and the keys it changes, if the guard lets them.
    fn patched(&self, base: &T, patch: &Value) -> Result<(T, Vec<String>), ConfigError> {
        let patched = base.patched(patch)?;
        if let Some(guard) = &self.guard {
            guard(&patched.settings)?;
        }
        Ok((patched.settings, patched.changed.into_iter().map(str::to_owned).collect()))
    }

    /// Puts `settings` in force at `revision` (the fence already passed) and runs the hook.
    fn put(&self, revision: u64, settings: Arc<T>, fence: Option<u64>) -> Result<(), ConfigError> {
        let before = {
            let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
            if let Some(base) = fence.filter(|base| *base != current.revision) {
                return Err(stale(base, current.revision));
            }
            let after = Snapshot { revision, settings: Arc::clone(&settings) };
            std::mem::replace(&mut *current, after).settings
        };
        if let Some(hook) = &self.on_commit {
            hook(&before, &settings);
        }
        Ok(())
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

/// The runtime's seam: shown as JSON with the settings' own keys, open to run-time patches.
impl<T: Patchable + Serialize> Settings for Revisioned<T> {
    fn shown(&self) -> PluginSettings {
        let Snapshot { revision, settings } = self.snapshot();
        PluginSettings { revision, settings: json(&*settings), read_only: false }
    }

    fn revision(&self) -> u64 {
        Revisioned::revision(self)
    }

    fn stage(&self, patch: &Value, base_revision: u64) -> Result<Staged, ConfigError> {
        let base = self.fenced(base_revision)?;
        let (settings, changed) = self.patched(&base.settings, patch)?;
        let shown = json(&settings);
        Ok(Staged::new(base_revision, changed, shown, Arc::new(settings)))
    }

    fn commit(&self, staged: Staged) -> Result<ConfigOutcome, ConfigError> {
        let base = staged.base_revision();
        let (settings, changed) =
            staged.into_value::<Arc<T>>().map_err(|_| ConfigError::Foreign)?;
        self.put(base + 1, settings, Some(base))?;
        Ok(ConfigOutcome { revision: base + 1, changed })
    }

    fn restore(&self, settings: &Value, revision: u64) -> Result<(), ConfigError> {
        let (restored, _) = self.patched(&self.settings(), settings)?;
        self.put(revision, Arc::new(restored), None)
    }
}

/// Plain settings fields as JSON (serializing them cannot fail).
fn json<T: Serialize>(settings: &T) -> Value {
    serde_json::to_value(settings).unwrap_or(Value::Null)
}

fn stale(based_on: u64, current: u64) -> ConfigError {
    ConfigError::StaleRevision { based_on, current }
}

#[cfg(test)]
mod tests {
    use std::sync::Barrier;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::thread;

    use serde_json::json;

    use super::*;
    use crate::settings::{FieldError, Patched, patch};

    /// Two fields, each patchable.
    #[derive(Debug, Clone, PartialEq, Serialize)]
    struct Pair {
        a: u32,
        b: u32,
    }

    impl Patchable for Pair {
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

    /// What one move on the settings did.
    #[derive(Debug, PartialEq)]
    enum Move {
        /// Stage `patch` at `base`, then commit it.
        Configure(Value, u64),
        /// Stage `first` and `second` at `base`, commit the first, then the second.
        Race(Value, Value, u64),
        /// Restore `settings` at `revision`.
        Restore(Value, u64),
    }

    /// The settings and revision after it, or the refusal's text.
    type After = Result<(u64, Vec<&'static str>), &'static str>;

    #[test]
    fn patches_are_staged_then_committed_behind_the_fence_and_restored_without_it() {
        use Move::{Configure, Race, Restore};
        let settings = Revisioned::new(Pair { a: 1, b: 2 });
        assert_eq!(Settings::revision(&settings), 0);
        // (move, the accepted revision and changed keys or the refusal, the settings after)
        let cases: Vec<(Move, After, Pair)> = vec![
            (Configure(json!({"a": 5}), 0), Ok((1, vec!["a"])), Pair { a: 5, b: 2 }),
            // Based on a revision that is gone: refused at staging, nothing changes.
            (
                Configure(json!({"a": 7}), 0),
                Err("stale revision: the patch is based on revision 0, the settings are at 1"),
                Pair { a: 5, b: 2 },
            ),
            (
                Configure(json!({"a": 7}), 9),
                Err("stale revision: the patch is based on revision 9, the settings are at 1"),
                Pair { a: 5, b: 2 },
            ),
            // Invalid: refused at staging, the revision stays.
            (
                Configure(json!({"a": 101}), 1),
                Err("a: must be an integer within 0..=100, got 101"),
                Pair { a: 5, b: 2 },
            ),
            (
                Configure(json!({"c": 1}), 1),
                Err("c: unknown key (expected one of: a, b)"),
                Pair { a: 5, b: 2 },
            ),
            // Accepted with no value changed: still a new revision, nothing listed.
            (Configure(json!({"a": 5}), 1), Ok((2, vec![])), Pair { a: 5, b: 2 }),
            (Configure(json!({}), 2), Ok((3, vec![])), Pair { a: 5, b: 2 }),
            (Configure(json!({"b": 3, "a": 6}), 3), Ok((4, vec!["a", "b"])), Pair { a: 6, b: 3 }),
            // Two staged from one revision: the first commit wins, the second is refused at
            // its commit and leaves the winner's settings.
            (
                Race(json!({"a": 8}), json!({"b": 9}), 4),
                Err("stale revision: the patch is based on revision 4, the settings are at 5"),
                Pair { a: 8, b: 3 },
            ),
            // Restored as recorded: no fence (the revision may go anywhere), read strictly.
            (Restore(json!({"a": 1, "b": 1}), 42), Ok((42, vec![])), Pair { a: 1, b: 1 }),
            (
                Restore(json!({"a": -1}), 43),
                Err("a: must be an integer within 0..=100, got -1"),
                Pair { a: 1, b: 1 },
            ),
            (Configure(json!({"b": 4}), 42), Ok((43, vec!["b"])), Pair { a: 1, b: 4 }),
        ];
        for (step, expected, after) in cases {
            let got: Result<(u64, Vec<String>), ConfigError> = match &step {
                Configure(patch, base) => settings.stage(patch, *base).and_then(|staged| {
                    assert_eq!(staged.revision(), base + 1);
                    let shown = staged.settings().clone();
                    let outcome = settings.commit(staged)?;
                    assert_eq!(settings.shown().settings, shown, "committed as staged");
                    Ok((outcome.revision, outcome.changed))
                }),
                Race(first, second, base) => {
                    let first = settings.stage(first, *base).unwrap();
                    let second = settings.stage(second, *base).unwrap();
                    settings.commit(first).unwrap();
                    settings.commit(second).map(|o| (o.revision, o.changed))
                }
                Restore(value, revision) => {
                    settings.restore(value, *revision).map(|()| (*revision, Vec::new()))
                }
            };
            match (expected, got) {
                (Ok((revision, changed)), Ok(got)) => {
                    let changed: Vec<String> = changed.iter().map(|c| (*c).to_owned()).collect();
                    assert_eq!(got, (revision, changed), "{step:?}");
                    assert_eq!(Settings::revision(&settings), revision, "{step:?}");
                }
                (Err(text), Err(error)) => assert_eq!(error.to_string(), text, "{step:?}"),
                (expected, got) => panic!("{step:?}: expected {expected:?}, got {got:?}"),
            }
            assert_eq!(*settings.settings(), after, "{step:?}");
        }
    }

    #[test]
    fn staging_applies_nothing_and_the_shown_settings_restore_themselves() {
        let settings = Revisioned::new(Pair { a: 1, b: 2 });
        let staged = settings.stage(&json!({"a": 9}), 0).unwrap();
        assert_eq!(
            (staged.changed(), staged.settings()),
            (&["a".to_owned()][..], &json!({"a": 9, "b": 2}))
        );
        assert_eq!(settings.revision(), 0);
        assert_eq!(*settings.settings(), Pair { a: 1, b: 2 });
        let shown = settings.shown();
        assert_eq!(
            shown,
            PluginSettings { revision: 0, settings: json!({"a": 1, "b": 2}), read_only: false }
        );
        settings.commit(staged).unwrap();
        settings.restore(&shown.settings, shown.revision).unwrap();
        assert_eq!(settings.shown(), shown, "what is shown is what a restore takes");
    }

    #[test]
    fn a_change_staged_elsewhere_is_refused() {
        let settings = Revisioned::new(Pair { a: 1, b: 2 });
        let foreign = Staged::new(0, vec![], json!({}), "not a Pair");
        assert_eq!(settings.commit(foreign), Err(ConfigError::Foreign));
        assert_eq!(settings.revision(), 0);
    }

    #[test]
    fn the_guard_refuses_and_the_hook_sees_every_change() {
        let hooked = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&hooked);
        let settings = Revisioned::new(Pair { a: 1, b: 2 })
            .guard(|pair: &Pair| {
                if pair.a == pair.b {
                    return Err(ConfigError::Invalid {
                        path: "b".into(),
                        message: "must differ from a".into(),
                    });
                }
                Ok(())
            })
            .on_commit(move |before: &Pair, after: &Pair| {
                assert_ne!(before, after);
                seen.fetch_add(1, Ordering::SeqCst);
            });
        assert_eq!(
            settings.stage(&json!({"b": 1}), 0).unwrap_err().to_string(),
            "b: must differ from a"
        );
        assert_eq!(
            settings.restore(&json!({"a": 2}), 5).unwrap_err().to_string(),
            "b: must differ from a"
        );
        assert_eq!(hooked.load(Ordering::SeqCst), 0, "nothing was committed");
        settings.commit(settings.stage(&json!({"b": 3}), 0).unwrap()).unwrap();
        settings.restore(&json!({"a": 5}), 7).unwrap();
        assert_eq!(hooked.load(Ordering::SeqCst), 2);
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
                        let committed =
                            settings.stage(&patch, 0).and_then(|staged| settings.commit(staged));
                        (patch.clone(), committed)
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
        settings.commit(settings.stage(&json!({"a": 3}), 0).unwrap()).unwrap();
        assert_eq!((before.revision, before.settings.a), (0, 1));
        assert_eq!(settings.settings().a, 3);
    }
}
