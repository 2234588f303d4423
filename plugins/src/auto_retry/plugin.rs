//! [`AutoRetry`]: `auto-retry` as a runtime [`Plugin`] — the wiring between the waterfall payload,
//! the retry-chain projection, the pure decision ([`super::decision`]), the settings behind their
//! revision fence and the shared schedule-wait-start sequence ([`crate::schedule`]).
//!
//! One recovery, in order:
//!
//! 1. the switch token is taken, then the settings in force; a failure `auto-retry` could not
//!    retry whatever the chains say (switched off, `extraRetries = 0`, a hard-floor or unlisted
//!    code) is answered `Next` at once, before anything waits;
//! 2. the retry chains are read once from the session's log (the own chain under the own
//!    `policyKey`, the official one under the payload's effective policy);
//! 3. [`decision::on_failure`]: decline (`Next`) or ask downstream first;
//! 4. [`decision::after_downstream`] with the settings in force *now* (a run-time update during
//!    the consultation applies): downstream's answer, `Stop` when the turn was cancelled or the
//!    plugin disposed meanwhile, decline, or an own retry;
//! 5. [`decision::throttle`]: an own retry while the route's retry budget is spent (the
//!    payload's health report) is declined instead — `retry/throttled`, then `Next`;
//! 6. an own retry is an `llm/retry` (`plugin: "auto-retry"`, mode `normal`) scheduled, waited
//!    and started by [`schedule::run`], the wait also ended by a switch to `enabled = false`.
//!
//! # Why a switch token
//!
//! `enabled = false` must stop the chains that are waiting (the turn ends with its failure, no
//! `llm/retry-started`), not only the next ones. A patch that switches the plugin off cancels the
//! current token and puts a fresh one in its place. A recovery takes the token *before* it reads
//! the settings it decides with: so either it sees the switch in the settings and declines, or
//! its token is the one the switch cancels. Nothing else is remembered between recoveries —
//! counts and retry ids live in the log — so a restart of the plugin's actor, or a new plugin
//! value over the same log, continues every chain where the log left it.

use std::sync::{Arc, Mutex, PoisonError};

use rein_runtime::BoxFuture;
use rein_runtime::plugin::{BuiltPlugin, Configured, Interrupted, IntoPlugin};
use rein_runtime::plugin::{ConfigError, Plugin, Recovery, RequestErrorPayload, Settings, Verdict};
use rein_runtime::random::ChainPlace;
use rein_runtime::session_log::retry_chains::RetryChains;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::NAME;
use super::decision::{self, Decision, Declined, Failed, Gone};
use super::settings::AutoRetrySettings;
use crate::schedule::{self, Scheduled};
use crate::settings::Revisioned;
use crate::throttle;

/// The `auto-retry` plugin. Register it after `llm-retry` (and `compaction`): it takes over the
/// failures the rest of the chain declines.
///
/// ```
/// # tokio_test::block_on(async {
/// use rein_plugins::auto_retry::AutoRetry;
/// use rein_plugins::llm_retry::LlmRetry;
/// use rein_runtime::runtime::Runtime;
///
/// // A configuration file is read leniently: every fallback comes back as a warning.
/// let auto_retry = AutoRetry::from_config(&serde_json::json!({"extraRetries": -1}))?;
/// assert_eq!(auto_retry.plugin.current().extra_retries(), 3, "a negative number is the default");
/// assert_eq!(auto_retry.warnings[0].to_string(), "extraRetries: -1 is negative; using the default 3");
/// let runtime = Runtime::builder()
///     .plugin(LlmRetry::default())
///     .plugin(auto_retry) // the chain's order is the order of registration
///     .build()
///     .await?;
/// // The builder kept the warning, with the plugin's name.
/// assert_eq!(
///     runtime.config_warnings()[0].to_string(),
///     "plugin auto-retry: extraRetries: -1 is negative; using the default 3"
/// );
/// let settings = runtime.plugin_settings("auto-retry")?;
/// assert_eq!((settings.revision, &settings.settings["extraRetries"]), (0, &serde_json::json!(3)));
/// runtime.shutdown().await;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct AutoRetry {
    settings: Revisioned<AutoRetrySettings>,
    /// Cancelled (and replaced) when a patch switches the plugin off (shared with the settings'
    /// commit hook).
    switch: Arc<Mutex<CancellationToken>>,
}

impl Default for AutoRetry {
    fn default() -> Self {
        Self::new(AutoRetrySettings::default())
    }
}

impl AutoRetry {
    /// The plugin with `settings` at revision 0.
    pub fn new(settings: AutoRetrySettings) -> Self {
        let switch = Arc::new(Mutex::new(CancellationToken::new()));
        let switched = Arc::clone(&switch);
        let settings = Revisioned::new(settings).on_commit(move |before, after| {
            if before.enabled() && !after.enabled() {
                switch_off(&switched);
            }
        });
        Self { settings, switch }
    }

    /// The plugin from its configuration file value, read leniently: the settings it describes
    /// and every fallback taken, as warnings whose paths are relative to the value
    /// (`extraRetries`, `retryableCodes[2]`). `null` is the defaults, without a warning. Never an
    /// error: a lenient reader falls back instead (the `Result` is the shape every plugin's
    /// `from_config` has).
    pub fn from_config(config: &Value) -> Result<Configured<Self>, ConfigError> {
        let (settings, warnings) = AutoRetrySettings::from_file(config, "");
        Ok(Configured::lenient(Self::new(settings), warnings))
    }

    /// The settings in force.
    pub fn current(&self) -> Arc<AutoRetrySettings> {
        self.settings.settings()
    }

    /// The token the current waits race; cancelled when the plugin is switched off.
    fn switch_token(&self) -> CancellationToken {
        self.switch.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// Ends every wait of the plugin (after the settings already say `enabled = false`).
fn switch_off(switch: &Mutex<CancellationToken>) {
    let mut switch = switch.lock().unwrap_or_else(PoisonError::into_inner);
    switch.cancel();
    *switch = CancellationToken::new();
}

/// Builds `auto-retry` from a configuration value, as a plugin registry entry (scenarios, the
/// CLI; register it under [`NAME`]): [`AutoRetry::from_config`], the plugin and the fallbacks its
/// reader took. It never refuses a configuration.
pub fn factory(config: &Value) -> Result<BuiltPlugin, ConfigError> {
    AutoRetry::from_config(config).map(IntoPlugin::into_plugin)
}

impl Plugin for AutoRetry {
    fn name(&self) -> &str {
        NAME
    }

    fn recover(self: Arc<Self>, recovery: Recovery) -> BoxFuture<'static, Verdict> {
        let p = &recovery.payload;
        // Taken before any settings are read (see the module docs).
        let switched_off = self.switch_token();
        let settings = self.current();
        // Declined whatever the chains say: answered in the plugin's handler, no task.
        let no_chains = RetryChains::default();
        let failed = Failed {
            failure: &p.failure,
            provider: &p.provider,
            official: p.retry_policy.as_ref(),
            chains: &no_chains,
        };
        if let Decision::Decline(why) = decision::on_failure(&settings, &failed) {
            tracing::debug!(?why, "not auto-retry's to retry");
            return Box::pin(std::future::ready(Verdict::Next));
        }
        Box::pin(recover(self, recovery, switched_off))
    }

    fn settings(&self) -> Option<&dyn Settings> {
        Some(&self.settings)
    }
}

/// One recovery that may retry (see the module docs for the steps).
async fn recover(
    plugin: Arc<AutoRetry>,
    recovery: Recovery,
    switched_off: CancellationToken,
) -> Verdict {
    let mut recovery = recovery;
    let payload = Arc::clone(&recovery.payload);
    let jitter = Arc::clone(&recovery.jitter);
    let chains = match payload.log.retry_chains().await {
        Ok(chains) => chains,
        Err(error) => {
            // The session's log is gone (the session is closing): nothing could be made durable.
            tracing::warn!(%error, "could not read the retry chains: no retry");
            return Verdict::Stop;
        }
    };
    let failed = failed(&payload, &chains);
    let throttled = payload.health.retries_throttled(&payload.provider);
    // A throttled retry is not sent: its backoff draws no sample (the sequence stays one sample
    // per backoff-timed retry).
    let sample = || if throttled { 0.0 } else { jitter.sample() };
    let decision = match decision::on_failure(&plugin.current(), &failed) {
        Decision::AskDownstream => {
            let answer = recovery.downstream.ask().await;
            let gone = recovery.interrupted().map(|interrupted| match interrupted {
                Interrupted::Cancelled => Gone::Cancelled,
                _ => Gone::Disposed,
            });
            // The settings in force now: an update during the consultation applies.
            decision::after_downstream(&plugin.current(), &failed, answer, gone, sample)
        }
        decided => decided,
    };
    let schedule = match decision::throttle(decision, throttled) {
        Decision::Schedule(schedule) => schedule,
        Decision::Throttle => return throttle::run(&recovery, NAME).await,
        Decision::Decline(why) => {
            if let Declined::BudgetSpent { retries, extra_retries } = why {
                tracing::warn!(retries, extra_retries, "auto-retry: the extra retries are spent");
            } else {
                tracing::debug!(?why, "not auto-retry's to retry");
            }
            return Verdict::Next;
        }
        other => {
            tracing::debug!(decision = ?other, "no own retry");
            return other.verdict().unwrap_or(Verdict::Next);
        }
    };
    let span = tracing::Span::current();
    span.record("retry.delay_ms", schedule.delay_ms);
    span.record("retry.number", schedule.retry);
    let event = schedule.event(
        payload.turn,
        payload.step,
        &payload.provider,
        &payload.failure,
        |policy_key| {
            jitter.retry_id(&ChainPlace {
                session: &payload.session,
                turn: payload.turn,
                step: payload.step,
                attempt: payload.attempt,
                provider: &payload.provider,
                policy_key,
            })
        },
    );
    let outcome = schedule::run(&recovery, Some(&switched_off), event).await;
    match &outcome {
        Scheduled::Started => tracing::debug!("retry started"),
        Scheduled::Rejected(error) | Scheduled::StartRejected(error) => {
            tracing::warn!(%error, "the session log refused the retry: no retry");
        }
        other => tracing::debug!(outcome = ?other, "retry abandoned"),
    }
    outcome.verdict()
}

/// What the decision reads of the payload.
fn failed<'a>(payload: &'a RequestErrorPayload, chains: &'a RetryChains) -> Failed<'a> {
    Failed {
        failure: &payload.failure,
        provider: &payload.provider,
        official: payload.retry_policy.as_ref(),
        chains,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rein_runtime::event::Event;
    use rein_runtime::failure::Failure;
    use rein_runtime::plugin::{Downstream, DownstreamAnswer};
    use rein_runtime::random::Constant;
    use rein_runtime::session_log::SessionLog;
    use rein_runtime::store::memory::MemoryStore;
    use rein_testkit::failed::failed_log;
    use serde_json::json;

    use super::*;

    /// A log with turn 1, step 1, attempt 1 failed with `code` on `mock`.
    async fn failed(code: &str) -> (MemoryStore, SessionLog, Failure) {
        let failure = Failure::new(code, "boom").unwrap();
        let (store, log) = failed_log("mock", &failure).await;
        (store, log, failure)
    }

    fn recovery(
        log: &SessionLog,
        failure: Failure,
        downstream: Downstream,
        cancel: CancellationToken,
    ) -> Recovery {
        let payload = RequestErrorPayload {
            session: Arc::from("s"),
            turn: 1,
            step: 1,
            attempt: 1,
            provider: "mock".into(),
            failure,
            retry_policy: None,
            health: Default::default(),
            cancel,
            log: log.clone(),
        };
        Recovery {
            payload: Arc::new(payload),
            downstream,
            disposed: CancellationToken::new(),
            jitter: Arc::new(Constant::new(0.5).unwrap()),
        }
    }

    fn written(store: &MemoryStore) -> Vec<&'static str> {
        store.events("s")[5..].iter().map(|e| e.kind()).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn what_it_could_never_retry_is_handed_on_without_reading_the_log_or_asking() {
        let plugin = Arc::new(AutoRetry::default());
        plugin
            .settings()
            .unwrap()
            .configure(&json!({"retryableCodes": ["SERVER", "QUOTA"]}), 0)
            .unwrap();
        for code in ["AUTH", "ABORTED", "PI_AI_ERROR"] {
            let (store, log, failure) = failed(code).await;
            // A closed log: reading it (which comes before asking downstream) would make the
            // recovery answer Stop.
            log.clone().close().await;
            let verdict = Arc::clone(&plugin)
                .recover(recovery(&log, failure, Downstream::end(), CancellationToken::new()))
                .await;
            assert_eq!(verdict, Verdict::Next, "{code}");
            assert_eq!(written(&store), Vec::<&str>::new());
        }
    }

    #[tokio::test(start_paused = true)]
    async fn downstream_speaks_first_and_its_retry_is_the_answer() {
        let (store, log, failure) = failed("PROVIDER_ERROR").await;
        let downstream = Downstream::answering(DownstreamAnswer::Retry);
        let plugin = Arc::new(AutoRetry::default());
        let verdict =
            plugin.recover(recovery(&log, failure, downstream, CancellationToken::new())).await;
        assert_eq!(verdict, Verdict::Next, "Next passes downstream's Retry on");
        assert!(written(&store).is_empty(), "nothing written");
    }

    #[tokio::test(start_paused = true)]
    async fn an_own_retry_is_scheduled_waited_and_started() {
        let (store, log, failure) = failed("PROVIDER_ERROR").await;
        let plugin = Arc::new(AutoRetry::from_config(&json!({"jitterRatio": 0})).unwrap().plugin);
        let begun = tokio::time::Instant::now();
        let verdict =
            plugin.recover(recovery(&log, failure, Downstream::end(), CancellationToken::new()));
        assert_eq!(verdict.await, Verdict::Retry);
        assert_eq!(begun.elapsed(), Duration::from_millis(1000));
        assert_eq!(written(&store), ["llm/retry", "llm/retry-started"]);
        let Event::LlmRetry(retry) = &store.events("s")[5].event else { panic!("llm/retry") };
        assert_eq!(
            (retry.plugin.as_str(), retry.mode.as_str(), retry.retry, retry.max_retries),
            ("auto-retry", "normal", 1, Some(3))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn switching_off_ends_the_wait_and_a_cancelled_turn_writes_nothing() {
        let (store, log, failure) = failed("PROVIDER_ERROR").await;
        let plugin = Arc::new(AutoRetry::default());
        let waiting = tokio::spawn(Arc::clone(&plugin).recover(recovery(
            &log,
            failure.clone(),
            Downstream::end(),
            CancellationToken::new(),
        )));
        tokio::time::sleep(Duration::from_millis(100)).await;
        plugin.settings().unwrap().configure(&json!({"enabled": false}), 0).unwrap();
        assert_eq!(waiting.await.unwrap(), Verdict::Stop);
        assert_eq!(written(&store), ["llm/retry"], "no llm/retry-started");

        // Switched on again; a turn cancelled before the recovery: nothing is written.
        plugin.settings().unwrap().configure(&json!({"enabled": true}), 1).unwrap();
        let (store, log, failure) = failed("PROVIDER_ERROR").await;
        let cancel = CancellationToken::new();
        cancel.cancel();
        let verdict = plugin.recover(recovery(&log, failure, Downstream::end(), cancel)).await;
        assert_eq!(verdict, Verdict::Stop);
        assert!(written(&store).is_empty());
    }
}
