//! [`Fallback`]: `fallback` as a runtime [`Plugin`] — the wiring between the waterfall payload,
//! the step-routes projection, the pure decision ([`super::decision`]), the cooldown table, the
//! settings behind their revision fence and the switch ([`Recovery::switch_route`]).
//!
//! One recovery, in order:
//!
//! 1. a `RATE_LIMIT` or `QUOTA` failure cools its route down (for every session of the runtime);
//!    a code outside `codes` is answered `Next` at once, before anything waits;
//! 2. the routes the step has asked are read from the session's log;
//! 3. [`decision::on_failure`]: switch now (an eager code, an over-long provider delay), or ask
//!    downstream first and decide with [`decision::after_downstream`] on its answer, with the
//!    settings in force then;
//! 4. a switch appends `route/switched` (durable before the retry) and answers `Retry`: the
//!    step reads the switch from its log and sends its next attempt to the new route.
//!
//! # Why the cooldowns live in the plugin
//!
//! A route that answered "rate limited" or "out of quota" to one session will answer the same to
//! the next one: the cooldown is a fact about the route, shared by every session of the runtime.
//! One plugin value serves them all (its actor is the runtime's one `fallback`), so the table is
//! a field behind a short lock, read and written only around decisions, never across a wait. It
//! is lost with the plugin (a restart of the runtime forgets it), which costs at most one more
//! failed request per route. Its instants are tokio's, so paused time in tests moves them.

use std::sync::{Arc, Mutex, PoisonError, RwLock};

use rein_runtime::BoxFuture;
use rein_runtime::plugin::{
    BuiltPlugin, ConfigError, Configured, IntoPlugin, Plugin, Recovery, Settings, SwitchError,
    Verdict,
};
use serde_json::Value;
use tokio::time::Instant;

use super::NAME;
use super::decision::{self, Cooldowns, Decision, Declined, Failed, Switch};
use super::settings::FallbackSettings;
use crate::settings::Revisioned;

/// The `fallback` plugin. Register it first (before `llm-retry`): it lets the rest of the chain
/// retry the failing route first, except for an eager code or an over-long provider delay.
///
/// ```
/// # tokio_test::block_on(async {
/// use std::sync::Arc;
/// use rein_plugins::fallback::Fallback;
///
/// let config = serde_json::json!({"routes": ["backup"], "maxWaitMs": 5000});
/// let fallback = Fallback::from_config(&config)?;
/// assert_eq!(fallback.plugin.current().routes(), ["backup"]);
/// // `routes` is required, and every field is read strictly.
/// let error = Fallback::from_config(&serde_json::json!({"routes": []})).unwrap_err();
/// assert_eq!(error.to_string(), "routes: must list at least one route");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct Fallback {
    settings: Revisioned<FallbackSettings>,
    /// Until when each route is skipped, for every session of the runtime.
    cooldowns: Mutex<Cooldowns<Instant>>,
    /// The routes the runtime serves, once it told ([`Plugin::known_routes`]); shared with the
    /// settings' guard, which refuses a patch naming another.
    known: Arc<RwLock<Option<Vec<String>>>>,
}

impl Fallback {
    /// The plugin with `settings` at revision 0.
    pub fn new(settings: FallbackSettings) -> Self {
        let known = Arc::new(RwLock::new(None));
        let served = Arc::clone(&known);
        let settings = Revisioned::new(settings)
            .guard(move |settings: &FallbackSettings| check_known(&served, settings.routes()));
        Self { settings, cooldowns: Mutex::new(Cooldowns::new()), known }
    }

    /// The plugin from its configuration file value, read strictly: an unknown key or an invalid
    /// value is a [`ConfigError::Invalid`] naming the field relative to the value (`routes[1]`);
    /// `routes` is required; no fallback is ever taken.
    pub fn from_config(config: &Value) -> Result<Configured<Self>, ConfigError> {
        let settings = FallbackSettings::from_file(config).map_err(ConfigError::from)?;
        Ok(Configured::strict(Self::new(settings)))
    }

    /// The settings in force.
    pub fn current(&self) -> Arc<FallbackSettings> {
        self.settings.settings()
    }

    /// The routes cooling down now.
    pub fn cooling(&self) -> Vec<String> {
        self.cooldowns.lock().unwrap_or_else(PoisonError::into_inner).cooling(Instant::now())
    }
}

/// Refuses a route name the runtime does not serve (once it said which it serves), naming the
/// field (`routes[1]`).
fn check_known(known: &RwLock<Option<Vec<String>>>, routes: &[String]) -> Result<(), ConfigError> {
    let known = known.read().unwrap_or_else(PoisonError::into_inner);
    let Some(known) = known.as_ref() else { return Ok(()) };
    match routes.iter().position(|route| !known.contains(route)) {
        None => Ok(()),
        Some(i) => {
            let mut served: Vec<&str> = known.iter().map(String::as_str).collect();
            served.sort_unstable();
            Err(ConfigError::Invalid {
                path: format!("routes[{i}]"),
                message: format!(
                    "no provider route named {:?} is served (served: {})",
                    routes[i],
                    served.join(", ")
                ),
            })
        }
    }
}

/// Builds `fallback` from a configuration value, as a plugin registry entry (scenarios, the CLI;
/// register it under [`NAME`]): [`Fallback::from_config`].
pub fn factory(config: &Value) -> Result<BuiltPlugin, ConfigError> {
    Fallback::from_config(config).map(IntoPlugin::into_plugin)
}

impl Plugin for Fallback {
    fn name(&self) -> &str {
        NAME
    }

    fn recover(self: Arc<Self>, recovery: Recovery) -> BoxFuture<'static, Verdict> {
        let p = &recovery.payload;
        let settings = self.current();
        if let Some(cooldown) = decision::cooldown(&settings, &p.failure) {
            let mut cooldowns = self.cooldowns.lock().unwrap_or_else(PoisonError::into_inner);
            cooldowns.cool(&p.provider, Instant::now() + cooldown);
        }
        if !decision::considers(&settings, p.failure.code()) {
            // Answered in the plugin's handler: no task, no log read.
            return Box::pin(std::future::ready(Verdict::Next));
        }
        Box::pin(recover(self, recovery))
    }

    fn settings(&self) -> Option<&dyn Settings> {
        Some(&self.settings)
    }

    fn known_routes(&self, routes: &[String]) -> Result<(), ConfigError> {
        *self.known.write().unwrap_or_else(PoisonError::into_inner) = Some(routes.to_vec());
        check_known(&self.known, self.current().routes())
    }
}

/// One recovery of a listed code (see the module docs for the steps).
async fn recover(plugin: Arc<Fallback>, recovery: Recovery) -> Verdict {
    let mut recovery = recovery;
    let payload = Arc::clone(&recovery.payload);
    if recovery.interrupted().is_some() {
        return Verdict::Stop;
    }
    let routes = match payload.log.step_routes().await {
        Ok(routes) => routes,
        Err(error) => {
            // The session's log is gone (the session is closing): no switch could be durable.
            tracing::warn!(%error, "could not read the step's routes: no switch");
            return Verdict::Stop;
        }
    };
    let cooling = plugin.cooling();
    let open = payload.health.open_routes();
    let failed =
        Failed { failure: &payload.failure, used: routes.used(), cooling: &cooling, open: &open };
    let decision = match decision::on_failure(&plugin.current(), &failed) {
        Decision::AskDownstream => {
            let answer = recovery.downstream.ask().await;
            if recovery.interrupted().is_some() {
                return Verdict::Stop;
            }
            // The settings and cooldowns in force now: the consultation may have taken long.
            let cooling = plugin.cooling();
            let failed = Failed { cooling: &cooling, ..failed };
            decision::after_downstream(&plugin.current(), &failed, answer)
        }
        decided => decided,
    };
    match decision {
        Decision::Switch(switch) => perform(&recovery, switch).await,
        Decision::Decline(why) => {
            if why == Declined::NoRouteLeft {
                tracing::info!("no fallback route left for this step");
            } else {
                tracing::debug!(?why, "no switch");
            }
            Verdict::Next
        }
        // `after_downstream` never asks again; were it to, the rest of the chain decides.
        Decision::AskDownstream => Verdict::Next,
    }
}

/// Appends `route/switched` and answers `Retry`; a switch that could not be made durable retries
/// nothing (`Stop`: the rest of the chain already gave up, or would retry a route this plugin
/// decided to leave).
async fn perform(recovery: &Recovery, switch: Switch) -> Verdict {
    let Switch { to, reason } = switch;
    match recovery.switch_route(&to, reason.as_str()).await {
        Ok(()) => {
            tracing::info!(to = %to, reason = reason.as_str(), "switched route");
            Verdict::Retry
        }
        Err(SwitchError::Interrupted(interrupted)) => {
            tracing::debug!(?interrupted, "no switch");
            Verdict::Stop
        }
        Err(error) => {
            tracing::warn!(%error, "the session log refused the route switch: no retry");
            Verdict::Stop
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rein_runtime::event::Event;
    use rein_runtime::failure::Failure;
    use rein_runtime::plugin::{Downstream, DownstreamAnswer, RequestErrorPayload};
    use rein_runtime::random::Constant;
    use rein_runtime::session_log::SessionLog;
    use rein_runtime::store::memory::MemoryStore;
    use rein_testkit::failed::failed_log;
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    use super::*;

    /// A log with turn 1, step 1, attempt 1 on `main` failed with `failure`.
    async fn failed(failure: &Failure) -> (MemoryStore, SessionLog) {
        failed_log("main", failure).await
    }

    fn recovery(log: &SessionLog, failure: Failure, downstream: Downstream) -> Recovery {
        let payload = RequestErrorPayload {
            session: Arc::from("s"),
            turn: 1,
            step: 1,
            attempt: 1,
            provider: "main".into(),
            failure,
            retry_policy: None,
            health: Default::default(),
            cancel: CancellationToken::new(),
            log: log.clone(),
        };
        Recovery {
            payload: Arc::new(payload),
            downstream,
            disposed: CancellationToken::new(),
            jitter: Arc::new(Constant::new(0.5).unwrap()),
        }
    }

    /// The events written after the failure: `(type, to)`.
    fn written(store: &MemoryStore) -> Vec<(&'static str, String)> {
        store.events("s")[5..]
            .iter()
            .map(|e| match &e.event {
                Event::RouteSwitched(s) => {
                    (e.kind(), format!("{}→{} {} {}", s.from, s.to, s.code, s.reason))
                }
                other => (e.kind(), format!("{other:?}")),
            })
            .collect()
    }

    fn plugin(config: Value) -> Arc<Fallback> {
        Arc::new(Fallback::from_config(&config).unwrap().plugin)
    }

    #[tokio::test(start_paused = true)]
    async fn an_eager_code_switches_without_asking_and_writes_the_switch_first() {
        let quota = Failure::new("QUOTA", "out of credit").unwrap();
        let (store, log) = failed(&quota).await;
        // Downstream would retry; it must not be asked.
        let downstream = Downstream::answering(DownstreamAnswer::Retry);
        let fallback = plugin(json!({"routes": ["backup"]}));
        let verdict = fallback.recover(recovery(&log, quota, downstream)).await;
        assert_eq!(verdict, Verdict::Retry);
        assert_eq!(written(&store), [("route/switched", "main→backup QUOTA eager".to_owned())]);
        assert_eq!(log.step_routes().await.unwrap().switched_to(), Some("backup"));
    }

    #[tokio::test(start_paused = true)]
    async fn downstream_speaks_first_its_retry_wins_and_its_stop_switches() {
        let server = Failure::new("SERVER", "down").unwrap();
        let fallback = plugin(json!({"routes": ["backup"]}));
        let (store, log) = failed(&server).await;
        let retry = Downstream::answering(DownstreamAnswer::Retry);
        let verdict = Arc::clone(&fallback).recover(recovery(&log, server.clone(), retry)).await;
        assert_eq!(verdict, Verdict::Next, "Next passes downstream's Retry on");
        assert!(written(&store).is_empty());

        let (store, log) = failed(&server).await;
        let verdict = fallback.recover(recovery(&log, server, Downstream::end())).await;
        assert_eq!(verdict, Verdict::Retry);
        assert_eq!(
            written(&store),
            [("route/switched", "main→backup SERVER exhausted".to_owned())]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_quota_cools_its_route_down_for_every_session_until_the_cooldown_passed() {
        let fallback = plugin(json!({"routes": ["main", "backup"], "cooldownMs": 1000}));
        let quota = Failure::new("QUOTA", "out of credit").unwrap();
        let (_, log) = failed(&quota).await;
        let _ = Arc::clone(&fallback).recover(recovery(&log, quota, Downstream::end())).await;
        assert_eq!(fallback.cooling(), ["main"]);
        tokio::time::advance(Duration::from_millis(999)).await;
        assert_eq!(fallback.cooling(), ["main"]);
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(fallback.cooling().is_empty(), "over after cooldownMs");
        // A longer provider delay wins; a code other than RATE_LIMIT and QUOTA cools nothing.
        let limited =
            Failure::new("RATE_LIMIT", "slow").unwrap().with_retry_after_ms(5000.0).unwrap();
        let (_, log) = failed(&limited).await;
        let _ = Arc::clone(&fallback).recover(recovery(&log, limited, Downstream::end())).await;
        tokio::time::advance(Duration::from_millis(4999)).await;
        assert_eq!(fallback.cooling(), ["main"]);
        let server = Failure::new("SERVER", "down").unwrap();
        let (_, log) = failed(&server).await;
        tokio::time::advance(Duration::from_millis(1)).await;
        let _ = Arc::clone(&fallback).recover(recovery(&log, server, Downstream::end())).await;
        assert!(fallback.cooling().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_turn_writes_nothing_and_answers_stop() {
        let quota = Failure::new("QUOTA", "out of credit").unwrap();
        let (store, log) = failed(&quota).await;
        let recovery = recovery(&log, quota, Downstream::end());
        recovery.payload.cancel.cancel();
        let verdict = plugin(json!({"routes": ["backup"]})).recover(recovery).await;
        assert_eq!(verdict, Verdict::Stop);
        assert!(written(&store).is_empty());
    }

    #[test]
    fn routes_the_runtime_does_not_serve_are_refused_by_name() {
        let fallback =
            Fallback::from_config(&json!({"routes": ["backup", "bakup"]})).unwrap().plugin;
        let served = ["main".to_owned(), "backup".to_owned()];
        assert_eq!(
            fallback.known_routes(&served).unwrap_err().to_string(),
            "routes[1]: no provider route named \"bakup\" is served (served: backup, main)"
        );
        let fallback = Fallback::from_config(&json!({"routes": ["backup"]})).unwrap().plugin;
        fallback.known_routes(&served).unwrap();
        let settings = fallback.settings().unwrap();
        let patch = json!({"routes": ["main", "elsewhere"]});
        let refused =
            "routes[1]: no provider route named \"elsewhere\" is served (served: backup, main)";
        assert_eq!(settings.stage(&patch, 0).unwrap_err().to_string(), refused);
        assert_eq!(settings.configure(&patch, 0).unwrap_err().to_string(), refused);
        assert_eq!(settings.revision(), 0, "nothing changed");
        // Nor can a restore bring such a route back.
        let restored = settings.restore(&json!({"routes": ["elsewhere"]}), 3).unwrap_err();
        assert!(restored.to_string().starts_with("routes[0]: no provider route"), "{restored}");
        // The revision fence comes first.
        let stale = settings.configure(&json!({"routes": ["elsewhere"]}), 7).unwrap_err();
        assert!(matches!(stale, ConfigError::StaleRevision { .. }), "{stale}");
        let accepted = settings.configure(&json!({"routes": ["main", "backup"]}), 0).unwrap();
        assert_eq!((accepted.revision, accepted.changed), (1, vec!["routes".to_owned()]));
    }
}
