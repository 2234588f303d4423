//! The plugin chaos of a stress run: one task that disposes plugins and registers them again,
//! and changes their settings, when the agents ask for it.
//!
//! Agents only ask ([`Request`]); this task decides which plugin, with the run's chaos RNG, one
//! request at a time, so two agents never dispose the same plugin or register the same name
//! twice. A disposal runs as a task of its own (it resolves only once the plugin's recoveries
//! settled, while other requests keep coming): dispose, wait a random moment, register a fresh
//! instance at the end of the chain. A plugin found out of the chain without a disposal was
//! removed by its supervisor (it crashed past its restart intensity); it is registered again.
//!
//! Settings changes go to any plugin in the chain that has run-time settings: one that answers
//! `Unsupported` is not asked again. The patch is [`plan::patch`]; one in ten is sent on a
//! revision that is not the current one, to exercise the revision fence (refused, counted
//! `stale`).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use crate::runtime::plugin::{BuiltPlugin, ConfigError};
use crate::runtime::runtime::Runtime;
use rand::Rng;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use super::plan::{self, StressRng};
use super::summary::PluginChaos;

/// Makes a fresh instance of a plugin.
pub(crate) type MakePlugin = Arc<dyn Fn() -> Result<BuiltPlugin, String> + Send + Sync>;

/// A plugin the run registered, and how to make it again.
#[derive(Clone)]
pub(crate) struct PluginSpec {
    /// Its name.
    pub(crate) name: String,
    /// A fresh instance.
    pub(crate) make: MakePlugin,
}

/// What an agent asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Request {
    /// Dispose a plugin (and bring it back later).
    Dispose,
    /// Change a plugin's settings.
    Configure,
}

/// How the chaos task is set up.
pub(crate) struct Chaos {
    /// The runtime.
    pub(crate) runtime: Runtime,
    /// Every plugin of the chain, in order.
    pub(crate) specs: Vec<PluginSpec>,
    /// The chaos RNG.
    pub(crate) rng: StressRng,
    /// How long a disposed plugin stays out, at most.
    pub(crate) away: Duration,
    /// The backoff the settings patches stay near.
    pub(crate) backoff_ms: u64,
}

/// What a disposal task reports when its plugin is back (or could not come back).
struct Back {
    name: String,
    disposed: bool,
    registered: Result<(), String>,
}

impl Chaos {
    /// Serves `requests` until every sender is gone or `stop` turns true, then waits for its
    /// disposals to finish (their plugins registered again) and reports what it did.
    pub(crate) async fn run(
        mut self,
        mut requests: mpsc::UnboundedReceiver<Request>,
        mut stop: watch::Receiver<bool>,
    ) -> PluginChaos {
        let mut report = PluginChaos::default();
        let mut away: HashSet<String> = HashSet::new();
        let mut unsupported: HashSet<String> = HashSet::new();
        let mut disposals: JoinSet<Back> = JoinSet::new();
        let mut open = true;
        loop {
            tokio::select! {
                request = requests.recv(), if open => match request {
                    Some(request) => {
                        self.restore_removed(&away, &mut report).await;
                        match request {
                            Request::Dispose => {
                                report.dispose_requests += 1;
                                self.dispose(&mut away, &mut disposals);
                            }
                            Request::Configure => {
                                report.config_requests += 1;
                                self.configure(&away, &mut unsupported, &mut report).await;
                            }
                        }
                    }
                    None => open = false,
                },
                Some(back) = disposals.join_next(), if !disposals.is_empty() => {
                    if let Ok(back) = back {
                        away.remove(&back.name);
                        if back.disposed {
                            report.disposed += 1;
                        } else {
                            // It left the chain by itself before its disposal: its supervisor
                            // removed it after too many crashes.
                            report.removed += 1;
                        }
                        match back.registered {
                            Ok(()) => report.registered += 1,
                            Err(error) => tracing::warn!(plugin = %back.name, %error, "could not register the plugin again"),
                        }
                    }
                }
                changed = stop.changed(), if open => {
                    if changed.is_err() || *stop.borrow() {
                        open = false;
                    }
                }
                else => break,
            }
        }
        report
    }

    /// Registers again every plugin of the run that left the chain without a disposal.
    async fn restore_removed(&self, away: &HashSet<String>, report: &mut PluginChaos) {
        let present = self.runtime.plugins();
        for spec in &self.specs {
            if away.contains(&spec.name) || present.contains(&spec.name) {
                continue;
            }
            report.removed += 1;
            let registered = match (spec.make)() {
                Ok(built) => {
                    self.runtime.register_plugin(built.plugin).await.map_err(|e| e.to_string())
                }
                Err(error) => Err(error),
            };
            match registered {
                Ok(()) => report.registered += 1,
                Err(error) => {
                    tracing::warn!(plugin = %spec.name, %error, "could not register the plugin again")
                }
            }
        }
    }

    /// The plugins of the run in the chain now, not away.
    fn candidates(&self, away: &HashSet<String>) -> Vec<PluginSpec> {
        let present = self.runtime.plugins();
        self.specs
            .iter()
            .filter(|s| present.contains(&s.name) && !away.contains(&s.name))
            .cloned()
            .collect()
    }

    fn dispose(&mut self, away: &mut HashSet<String>, disposals: &mut JoinSet<Back>) {
        let candidates = self.candidates(away);
        if candidates.is_empty() {
            return;
        }
        let spec = candidates[self.rng.random_range(0..candidates.len())].clone();
        let pause = self.away.mul_f64(self.rng.random::<f64>());
        away.insert(spec.name.clone());
        let runtime = self.runtime.clone();
        disposals.spawn(async move {
            let disposed = runtime.dispose_plugin(&spec.name).await.is_ok();
            tokio::time::sleep(pause).await;
            let registered = match (spec.make)() {
                Ok(built) => runtime.register_plugin(built.plugin).await.map_err(|e| e.to_string()),
                Err(error) => Err(error),
            };
            Back { name: spec.name, disposed, registered }
        });
    }

    async fn configure(
        &mut self,
        away: &HashSet<String>,
        unsupported: &mut HashSet<String>,
        report: &mut PluginChaos,
    ) {
        let candidates: Vec<PluginSpec> =
            self.candidates(away).into_iter().filter(|s| !unsupported.contains(&s.name)).collect();
        if candidates.is_empty() {
            count(&mut report.config, "none");
            return;
        }
        let spec = &candidates[self.rng.random_range(0..candidates.len())];
        let stale = self.rng.random_bool(0.1);
        let patch = plan::patch(&spec.name, self.backoff_ms, &mut self.rng);
        let Some(revision) = self.runtime.plugin_revision(&spec.name) else {
            count(&mut report.config, "gone");
            return;
        };
        let base = if stale { revision + 1 } else { revision };
        let result = self.runtime.configure_plugin(&spec.name, patch, base).await;
        let kind = match result {
            Ok(_) => "accepted",
            Err(ConfigError::StaleRevision { .. }) => "stale",
            Err(ConfigError::Unsupported(_)) => {
                unsupported.insert(spec.name.clone());
                "unsupported"
            }
            Err(ConfigError::ReadOnly { .. }) => {
                unsupported.insert(spec.name.clone());
                "read-only"
            }
            Err(ConfigError::UnknownPlugin(_)) => "gone",
            Err(error @ ConfigError::NotSaved { .. }) => {
                tracing::warn!(plugin = %spec.name, %error, "a settings patch was not saved");
                "not-saved"
            }
            Err(error) => {
                tracing::warn!(plugin = %spec.name, %error, "a settings patch was refused");
                "invalid"
            }
        };
        count(&mut report.config, kind);
    }
}

fn count(map: &mut BTreeMap<String, u64>, key: &str) {
    *map.entry(key.to_owned()).or_default() += 1;
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU64, Ordering};

    use crate::runtime::BoxFuture;
    use crate::runtime::clock::VirtualClock;
    use crate::runtime::plugin::{
        ConfigOutcome, Plugin, PluginSettings, Recovery, Settings, Staged, Verdict,
    };
    use crate::runtime::store::memory::MemoryStore;
    use serde_json::Value;

    use super::*;

    /// A plugin with run-time settings behind a revision fence; it keeps every patch it took.
    struct Fenced {
        name: &'static str,
        revision: AtomicU64,
        patches: Arc<Mutex<Vec<Value>>>,
    }

    impl Plugin for Fenced {
        fn name(&self) -> &str {
            self.name
        }
        fn recover(self: Arc<Self>, _: Recovery) -> BoxFuture<'static, Verdict> {
            Box::pin(async { Verdict::Next })
        }
        fn settings(&self) -> Option<&dyn Settings> {
            Some(self)
        }
    }

    impl Settings for Fenced {
        fn shown(&self) -> PluginSettings {
            let revision = self.revision.load(Ordering::SeqCst);
            PluginSettings { revision, settings: serde_json::json!({}), read_only: false }
        }
        fn stage(&self, patch: &Value, base: u64) -> Result<Staged, ConfigError> {
            let current = self.revision.load(Ordering::SeqCst);
            if base != current {
                return Err(ConfigError::StaleRevision { based_on: base, current });
            }
            let changed =
                patch.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default();
            Ok(Staged::new(base, changed, patch.clone(), patch.clone()))
        }
        fn commit(&self, staged: Staged) -> Result<ConfigOutcome, ConfigError> {
            let base = staged.base_revision();
            let (patch, changed) =
                staged.into_value::<Value>().map_err(|_| ConfigError::Foreign)?;
            self.revision
                .compare_exchange(base, base + 1, Ordering::SeqCst, Ordering::SeqCst)
                .map_err(|current| ConfigError::StaleRevision { based_on: base, current })?;
            self.patches.lock().unwrap().push(patch);
            Ok(ConfigOutcome { revision: base + 1, changed })
        }
        fn restore(&self, _: &Value, revision: u64) -> Result<(), ConfigError> {
            self.revision.store(revision, Ordering::SeqCst);
            Ok(())
        }
    }

    /// A plugin without run-time settings.
    struct Plain;

    impl Plugin for Plain {
        fn name(&self) -> &str {
            "plain"
        }
        fn recover(self: Arc<Self>, _: Recovery) -> BoxFuture<'static, Verdict> {
            Box::pin(async { Verdict::Next })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn settings_go_to_plugins_that_have_them_and_disposed_plugins_come_back() {
        let patches = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&patches);
        let settings: MakePlugin = Arc::new(move || {
            let patches = Arc::clone(&seen);
            Ok(BuiltPlugin::strict(Arc::new(Fenced {
                name: "auto-retry",
                revision: AtomicU64::new(0),
                patches,
            })))
        });
        let plain: MakePlugin = Arc::new(|| Ok(BuiltPlugin::strict(Arc::new(Plain))));
        let specs = vec![
            PluginSpec { name: "plain".into(), make: Arc::clone(&plain) },
            PluginSpec { name: "auto-retry".into(), make: Arc::clone(&settings) },
        ];
        let runtime = Runtime::builder()
            .store(Arc::new(MemoryStore::new()))
            .clock(Arc::new(VirtualClock::start()))
            .plugin((plain)().unwrap())
            .plugin((settings)().unwrap())
            .build()
            .await
            .unwrap();
        let chaos = Chaos {
            runtime: runtime.clone(),
            specs,
            rng: plan::chaos_rng(11),
            away: Duration::from_millis(50),
            backoff_ms: 5,
        };
        let (requests, receiver) = mpsc::unbounded_channel();
        let (_stop, stopped) = watch::channel(false);
        let task = tokio::spawn(chaos.run(receiver, stopped));
        for _ in 0..100 {
            requests.send(Request::Configure).unwrap();
        }
        for _ in 0..5 {
            requests.send(Request::Dispose).unwrap();
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        drop(requests);
        let report = task.await.unwrap();

        assert_eq!((report.config_requests, report.dispose_requests), (100, 5));
        let count = |key: &str| report.config.get(key).copied().unwrap_or(0);
        assert!(count("unsupported") <= 1, "asked once at most: {report:?}");
        assert!(count("accepted") > 50, "{report:?}");
        assert!(count("stale") > 0, "one in ten is sent stale and refused: {report:?}");
        assert_eq!(count("accepted") + count("stale") + count("unsupported"), 100, "{report:?}");
        assert_eq!(patches.lock().unwrap().len() as u64, count("accepted"));
        let keys = [
            "enabled",
            "extraRetries",
            "initialDelayMs",
            "maxDelayMs",
            "jitterRatio",
            "retryableCodes",
        ];
        for patch in patches.lock().unwrap().iter() {
            let fields: Vec<&String> = patch.as_object().unwrap().keys().collect();
            assert!(fields.len() == 1 && keys.contains(&fields[0].as_str()), "{patch}");
        }
        assert_eq!((report.disposed, report.registered, report.removed), (5, 5, 0), "{report:?}");
        let mut names = runtime.plugins();
        names.sort();
        assert_eq!(names, ["auto-retry", "plain"], "every disposed plugin is back");
        runtime.shutdown().await;
        assert_eq!((runtime.census().actors(), runtime.census().tasks()), (0, 0));
    }
}
