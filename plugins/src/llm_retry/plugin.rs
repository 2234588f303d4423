//! [`LlmRetry`]: the official executor's configuration, and the runtime [`Plugin`] it becomes —
//! the wiring between the waterfall payload, the retry-chain projection, the pure decisions and
//! the schedule-wait-start sequence.
//!
//! One recovery, in order:
//!
//! 1. the effective policy comes from the payload (`retryPolicy`, resolved by the runtime: the
//!    route's declared policy, else this plugin's configuration, else the defaults); `None`
//!    (`NO_ADAPTER`) → `Next`;
//! 2. the chain's count and `retryId` are read from the retry-chain projection under
//!    (provider, `policyKey`) — so a restart, a new step, a new turn or a changed policy each
//!    start a fresh chain without the plugin remembering anything;
//! 3. [`decision::on_failure`] decides; in always mode it asks downstream first and
//!    [`decision::after_downstream`] decides on the answer;
//! 4. [`decision::throttle`]: a retry it would schedule while the route's retry budget is spent
//!    (the payload's health report) becomes a throttle: `retry/throttled`, then `Next`;
//! 5. `Delegate` → `Next`; an accepted downstream `Retry` → `Retry`, nothing written; `Schedule` →
//!    [`schedule::run`]: a new UUID v4 `retryId` for retry 1 (else the chain's), `llm/retry`
//!    appended before the wait, the wait raced against the turn's cancellation and the plugin's
//!    disposal, `llm/retry-started`, `Retry`.
//!
//! # Why the plugin holds nothing but its configured policy
//!
//! One plugin actor serves every session, and the runtime runs each recovery as a task of its own.
//! Every piece of per-chain state — the count, the `retryId` — is in the session's log and read
//! back through its projection, so recoveries of different sessions share nothing, a crash-restart
//! of the plugin loses nothing, and reopening a session continues its chains where the log left
//! them. The configured policy is not even read while recovering: the runtime folds it into each
//! route's effective policy (the [`factory`] hands the policy to `RuntimeBuilder::built`) and the
//! payload carries the result, so `auto-retry` and `llm-retry` see the same curve.
//!
//! # Why its settings are read-only at run time
//!
//! Its configuration is the runtime's default route policy, which the runtime resolves into
//! every route's effective policy when it is built. [`Plugin::settings`] shows it (with the
//! configuration's keys, revision 0); a run-time patch is refused with
//! [`ConfigError::ReadOnly`] rather than accepted and silently not applied. A changed policy
//! would anyway start new retry chains, which a restart with a new configuration does too.
//!
//! # Why disposal needs no code here
//!
//! The plugin host cancels `recovery.disposed` first thing when the plugin is disposed and then
//! waits for every recovery task. The wait races that token, and
//! [`Downstream::ask`](rein_runtime::plugin::Downstream::ask) aborts a consultation in progress and
//! waits for it to settle, so every recovery ends promptly and the host's drain completes.

use std::sync::Arc;

use rein_runtime::BoxFuture;
use rein_runtime::event::LlmRetry as LlmRetryEvent;
use rein_runtime::json_number;
use rein_runtime::plugin::{
    BuiltPlugin, ConfigError, Configured, DownstreamAnswer, IntoPlugin, Plugin, ReadOnly, Recovery,
    RequestErrorPayload, Settings, Verdict,
};
use rein_runtime::random::{ChainPlace, Jitter};
use rein_runtime::retry_policy::RetryPolicy;
use serde_json::Value;

use super::NAME;
use super::config::LlmRetryConfig;
use super::decision::{self, ChainId, Consulted, Decision, Schedule};
use crate::schedule::{self, Scheduled};
use crate::throttle;

/// The `llm-retry` plugin's configuration: add it to a runtime with
/// [`RuntimeBuilder::plugin`](rein_runtime::runtime::RuntimeBuilder::plugin) like any plugin, and
/// its policy becomes the runtime's default route policy — the policy of every route that
/// declares none, which the waterfall carries to every plugin (auto-retry continues its curve).
/// It is not a [`Plugin`] itself: the plugin exists only with its policy applied, so it cannot
/// be added to a chain where its configuration would be silently ignored.
///
/// ```
/// # tokio_test::block_on(async {
/// use rein_plugins::llm_retry::LlmRetry;
/// use rein_runtime::runtime::Runtime;
///
/// let config = serde_json::json!({"maxTransientRetries": 3, "jitterRatio": 0});
/// let llm_retry = LlmRetry::from_config(&config)?; // read strictly: no warnings, or an error
/// assert_eq!(
///     llm_retry.plugin.policy().policy_key(),
///     r#"["normal",3,["RATE_LIMIT","SERVER","TIMEOUT","TRANSPORT"],500,10000,0]"#
/// );
/// let runtime = Runtime::builder().plugin(llm_retry).build().await?;
/// assert_eq!(runtime.plugins(), ["llm-retry"]);
/// runtime.shutdown().await;
///
/// let typo = LlmRetry::from_config(&serde_json::json!({"maxTransientRetires": 3})).unwrap_err();
/// assert!(typo.to_string().starts_with("maxTransientRetires: unknown key"), "{typo}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LlmRetry {
    policy: RetryPolicy,
}

impl LlmRetry {
    /// The plugin with `policy` as the runtime's default route policy.
    pub fn new(policy: RetryPolicy) -> Self {
        Self { policy }
    }

    /// The plugin from its configuration file value (the original executor's keys), read
    /// strictly: an unknown key or an invalid value is a [`ConfigError::Invalid`] naming the
    /// field path relative to the value (`maxTransientRetires`, empty for the value itself;
    /// prefix it with [`ConfigError::within`]), and no fallback is ever taken. `null` is the
    /// default configuration.
    pub fn from_config(config: &Value) -> Result<Configured<Self>, ConfigError> {
        match LlmRetryConfig::parse(config, "") {
            Ok(policy) => Ok(Configured::strict(Self::new(policy))),
            Err(error) => Err(ConfigError::Invalid {
                path: error.path.clone(),
                message: error.kind.to_string(),
            }),
        }
    }

    /// The configured policy (the runtime's default route policy).
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }
}

/// The plugin, with its policy as the runtime's default route policy.
impl IntoPlugin for LlmRetry {
    fn into_plugin(self) -> BuiltPlugin {
        let settings = ReadOnly::new(NAME, config_json(&self.policy), READ_ONLY);
        let official = Arc::new(Official { settings });
        BuiltPlugin { default_route_policy: Some(self.policy), ..BuiltPlugin::strict(official) }
    }
}

/// Builds `llm-retry` from a configuration value, as a plugin registry entry (scenarios, the
/// CLI; register it under [`NAME`]): [`LlmRetry::from_config`], with its policy as the runtime's
/// default route policy.
pub fn factory(config: &Value) -> Result<BuiltPlugin, ConfigError> {
    LlmRetry::from_config(config).map(IntoPlugin::into_plugin)
}

/// The plugin in the chain: the configured policy, only shown in its settings (the payload
/// carries the effective policy of each failure).
#[derive(Debug)]
struct Official {
    /// The configured policy with the configuration's keys, read-only.
    settings: ReadOnly,
}

impl Plugin for Official {
    fn name(&self) -> &str {
        NAME
    }

    fn recover(self: Arc<Self>, recovery: Recovery) -> BoxFuture<'static, Verdict> {
        Box::pin(recover(recovery))
    }

    fn settings(&self) -> Option<&dyn Settings> {
        Some(&self.settings)
    }
}

/// Why `llm-retry` refuses run-time patches.
const READ_ONLY: &str = "its policy is the runtime's default route policy, fixed when the \
                         runtime is built; change its configuration and start the runtime again";

/// The configured policy with the configuration's keys (a normal policy, the original
/// executor's keys); an always-mode policy given in code also names its `mode`.
fn config_json(policy: &RetryPolicy) -> Value {
    let backoff = policy.backoff();
    let number = |ms: f64| Value::Number(json_number::number(ms));
    let mut fields = serde_json::Map::new();
    match policy {
        RetryPolicy::Normal { max_retries, retryable_codes, .. } => {
            fields.insert("maxTransientRetries".into(), (*max_retries).into());
            fields.insert("initialDelayMs".into(), number(backoff.initial_delay_ms()));
            fields.insert("maxDelayMs".into(), number(backoff.max_delay_ms()));
            fields.insert("jitterRatio".into(), number(backoff.jitter_ratio()));
            fields.insert("retryableCodes".into(), retryable_codes.as_slice().into());
        }
        RetryPolicy::Always { .. } => {
            fields.insert("mode".into(), policy.mode().into());
            fields.insert("initialDelayMs".into(), number(backoff.initial_delay_ms()));
            fields.insert("maxDelayMs".into(), number(backoff.max_delay_ms()));
            fields.insert("jitterRatio".into(), number(backoff.jitter_ratio()));
        }
    }
    Value::Object(fields)
}

/// One recovery (see the module docs for the steps).
async fn recover(recovery: Recovery) -> Verdict {
    let mut recovery = recovery;
    let payload = Arc::clone(&recovery.payload);
    let jitter = Arc::clone(&recovery.jitter);
    let Some(policy) = payload.retry_policy.as_ref() else {
        tracing::debug!("no effective policy (no adapter served the attempt): delegating");
        return Verdict::Next;
    };
    let policy_key = policy.policy_key();
    let chains = match payload.log.retry_chains().await {
        Ok(chains) => chains,
        Err(error) => {
            // The session's log is gone (the session is closing): nothing could be made durable.
            tracing::warn!(%error, "could not read the retry chains: no retry");
            return Verdict::Stop;
        }
    };
    let chain = chains.get(&payload.provider, &policy_key).map(|c| (c.retry, c.retry_id.as_str()));
    // Drawn only if a decision computes a backoff (one sample per backoff-timed retry; a
    // throttled retry is not sent and draws none).
    let throttled = payload.health.retries_throttled(&payload.provider);
    let sample = || if throttled { 0.0 } else { jitter.sample() };
    let decision = match decision::on_failure(Some(policy), &payload.failure, chain, sample) {
        Decision::AskDownstream => {
            let answer = recovery.downstream.ask().await;
            tracing::debug!(?answer, "always mode: downstream answered");
            let answer = match answer {
                DownstreamAnswer::Retry => Consulted::Retry,
                DownstreamAnswer::Stop => Consulted::Declined,
                DownstreamAnswer::Crashed => Consulted::Crashed,
            };
            decision::after_downstream(policy.backoff(), answer, &payload.failure, chain, sample)
        }
        decided => decided,
    };
    match decision::throttle(decision, throttled) {
        Decision::Throttle => throttle::run(&recovery, NAME).await,
        Decision::Delegate(why) => {
            tracing::debug!(?why, "delegating");
            Verdict::Next
        }
        Decision::AcceptDownstreamRetry => Verdict::Retry,
        // `after_downstream` never asks again; were it to, the rest of the chain decides.
        Decision::AskDownstream => Verdict::Next,
        Decision::Schedule(scheduled) => {
            let span = tracing::Span::current();
            span.record("retry.delay_ms", scheduled.delay_ms);
            span.record("retry.number", scheduled.retry);
            let event = retry_event(&payload, policy, policy_key, scheduled, jitter.as_ref());
            let outcome = schedule::run(&recovery, None, event).await;
            match &outcome {
                Scheduled::Started => tracing::debug!("retry started"),
                Scheduled::Rejected(error) | Scheduled::StartRejected(error) => {
                    tracing::warn!(%error, "the session log refused the retry: no retry");
                }
                other => tracing::debug!(outcome = ?other, "retry abandoned"),
            }
            outcome.verdict()
        }
    }
}

/// The `llm/retry` event of a scheduled retry: `maxRetries` only in normal mode, a new UUID v4
/// `retryId` from the runtime's randomness when the retry opens its chain (derived from the seed
/// and the chain's place in a seeded run, so two runs write the same ids and no two chains one).
fn retry_event(
    payload: &RequestErrorPayload,
    policy: &RetryPolicy,
    policy_key: String,
    scheduled: Schedule,
    randomness: &dyn Jitter,
) -> LlmRetryEvent {
    let retry_id = match scheduled.chain {
        ChainId::New => randomness.retry_id(&ChainPlace {
            session: &payload.session,
            turn: payload.turn,
            step: payload.step,
            attempt: payload.attempt,
            provider: &payload.provider,
            policy_key: &policy_key,
        }),
        ChainId::Continue(id) => id,
    };
    LlmRetryEvent {
        retry_id,
        turn: payload.turn,
        step: payload.step,
        provider: payload.provider.clone(),
        plugin: NAME.to_owned(),
        mode: policy.mode().to_owned(),
        policy_key,
        retry: scheduled.retry,
        max_retries: policy.max_retries(),
        delay_ms: scheduled.delay_ms,
        failure: payload.failure.clone(),
    }
}

#[cfg(test)]
mod tests {
    use rein_runtime::clock::VirtualClock;
    use rein_runtime::event::{
        AgentIdle, Envelope, Event, StepRef, TurnEnd, TurnEndReason, TurnStart,
    };
    use rein_runtime::failure::Failure;
    use rein_runtime::plugin::Downstream as DownstreamHandle;
    use rein_runtime::random::{Samples, derived_retry_id};
    use rein_runtime::retry_policy::{Backoff, RetryableCodes};
    use rein_runtime::session_log::SessionLog;
    use rein_runtime::store::memory::MemoryStore;
    use rein_testkit::failed::failed_request;
    use tokio_util::sync::CancellationToken;

    use super::*;

    fn normal(max_retries: u64) -> RetryPolicy {
        RetryPolicy::Normal {
            max_retries,
            retryable_codes: RetryableCodes::new(["SERVER"]).unwrap(),
            backoff: Backoff::new(100.0, 1000.0, 0.0).unwrap(),
        }
    }

    /// A session log with turn 1 and step 1 open, a counter of attempts, and the randomness
    /// every offer shares (as a runtime's plugins share one source).
    struct Step {
        store: MemoryStore,
        log: SessionLog,
        attempt: u32,
        jitter: Arc<Samples>,
    }

    /// Offers a failed attempt (turn 1, step 1) to a fresh `llm-retry` — everything it knows
    /// comes from the log — with the end of the chain downstream and `jitter` as the runtime's
    /// randomness.
    async fn offer(
        log: &SessionLog,
        jitter: Arc<Samples>,
        provider: &str,
        attempt: u32,
        failure: Failure,
        retry_policy: Option<RetryPolicy>,
    ) -> Verdict {
        let payload = RequestErrorPayload {
            session: Arc::from("s"),
            turn: 1,
            step: 1,
            attempt,
            provider: provider.into(),
            failure,
            retry_policy,
            health: Default::default(),
            cancel: CancellationToken::new(),
            log: log.clone(),
        };
        let recovery = Recovery {
            payload: Arc::new(payload),
            downstream: DownstreamHandle::end(),
            disposed: CancellationToken::new(),
            jitter,
        };
        LlmRetry::default().into_plugin().plugin.recover(recovery).await
    }

    impl Step {
        async fn open() -> Self {
            let store = MemoryStore::new();
            let clock = Arc::new(VirtualClock::start());
            let (log, _) = SessionLog::open(Arc::new(store.clone()), clock, "s").await.unwrap();
            log.append(vec![
                Event::TurnStart(TurnStart { turn: 1 }),
                Event::StepStart(StepRef { turn: 1, step: 1 }),
            ])
            .await
            .unwrap();
            Self { store, log, attempt: 0, jitter: Arc::new(Samples::new([], 0).unwrap()) }
        }

        /// Writes a failed attempt on `provider` and offers it to `llm-retry` under `policy`.
        async fn fail(&mut self, provider: &str, policy: Option<RetryPolicy>) -> Verdict {
            self.attempt += 1;
            let failure = Failure::new("SERVER", format!("attempt {}", self.attempt)).unwrap();
            let (turn, step, attempt) = (1, 1, self.attempt);
            self.log
                .append(failed_request((turn, step), attempt, provider, &failure))
                .await
                .unwrap();
            offer(&self.log, self.jitter.clone(), provider, attempt, failure, policy).await
        }

        /// The retries written, as (provider, policy key, retry, retryId).
        fn retries(&self) -> Vec<(String, String, u64, String)> {
            self.store
                .events("s")
                .into_iter()
                .filter_map(|e| match e.event {
                    Event::LlmRetry(r) => Some((r.provider, r.policy_key, r.retry, r.retry_id)),
                    _ => None,
                })
                .collect()
        }

        /// Closes the step and the turn and checks the whole log.
        async fn check(self) -> Vec<Envelope> {
            let reason = TurnEndReason::Completed;
            self.log
                .append(vec![
                    Event::StepEnd(StepRef { turn: 1, step: 1 }),
                    Event::TurnEnd(TurnEnd { turn: 1, reason }),
                    Event::AgentIdle(AgentIdle {}),
                ])
                .await
                .unwrap();
            let events = self.store.events("s");
            let violations = rein_invariant::check_finished_log(&events);
            assert!(violations.is_empty(), "{violations:#?}");
            events
        }
    }

    #[tokio::test(start_paused = true)]
    async fn chains_are_scoped_by_provider_and_by_policy() {
        let mut step = Step::open().await;
        let (one, two) = (normal(1), normal(2));
        // Provider a, policy one: its single retry, then its budget is spent.
        assert_eq!(step.fail("a", Some(one.clone())).await, Verdict::Retry);
        assert_eq!(step.fail("a", Some(one.clone())).await, Verdict::Next);
        // Provider b in the same step: its own chain, from 1.
        assert_eq!(step.fail("b", Some(one.clone())).await, Verdict::Retry);
        // A changed policy on provider a: a new chain, from 1.
        assert_eq!(step.fail("a", Some(two.clone())).await, Verdict::Retry);
        assert_eq!(step.fail("a", Some(one.clone())).await, Verdict::Next, "still spent");
        assert_eq!(step.fail("a", Some(two.clone())).await, Verdict::Retry);
        assert_eq!(step.fail("a", Some(two.clone())).await, Verdict::Next);

        let retries = step.retries();
        let shape: Vec<(&str, &str, u64)> =
            retries.iter().map(|(p, k, n, _)| (p.as_str(), k.as_str(), *n)).collect();
        let (k1, k2) = (one.policy_key(), two.policy_key());
        assert_eq!(shape, [("a", &*k1, 1), ("b", &*k1, 1), ("a", &*k2, 1), ("a", &*k2, 2)]);
        let ids: Vec<&str> = retries.iter().map(|r| r.3.as_str()).collect();
        assert_ne!(ids[0], ids[1], "another provider, another retryId");
        assert_ne!(ids[0], ids[2], "another policy, another retryId");
        assert_ne!(ids[1], ids[2]);
        assert_eq!(ids[2], ids[3], "a chain keeps its retryId");
        // New chains take their ids from the runtime's randomness: seeded, derived from the
        // chain's place (the attempt that opened it, its provider and policy key).
        let place = |attempt, provider, policy_key| ChainPlace {
            session: "s",
            turn: 1,
            step: 1,
            attempt,
            provider,
            policy_key,
        };
        let derived: Vec<String> = [place(1, "a", &*k1), place(3, "b", &*k1), place(4, "a", &*k2)]
            .iter()
            .map(|at| derived_retry_id(0, at))
            .collect();
        assert_eq!(ids[..3], derived);
        step.check().await;
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_policy_it_delegates_and_writes_nothing() {
        let mut step = Step::open().await;
        assert_eq!(step.fail("nowhere", None).await, Verdict::Next);
        assert!(step.retries().is_empty());
        step.check().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_closed_log_fails_closed() {
        let mut step = Step::open().await;
        assert_eq!(step.fail("a", Some(normal(1))).await, Verdict::Retry);
        step.log.clone().close().await;
        // The session is closing: its chains cannot be read, nothing could be made durable.
        let failure = Failure::new("SERVER", "late").unwrap();
        assert_eq!(
            offer(&step.log, step.jitter.clone(), "a", 2, failure, Some(normal(5))).await,
            Verdict::Stop
        );
    }

    #[test]
    fn the_configuration_is_read_strictly_and_becomes_the_default_route_policy() {
        let configured = LlmRetry::from_config(&serde_json::json!({"maxTransientRetries": 5}));
        let plugin = configured.unwrap().plugin;
        assert_eq!(plugin.policy().max_retries(), Some(5));
        let built = factory(&serde_json::json!({"maxTransientRetries": 5})).unwrap();
        assert_eq!(built.default_route_policy, Some(plugin.policy().clone()));
        assert_eq!(built.plugin.name(), "llm-retry");
        let shown = built.plugin.settings().unwrap().shown();
        assert_eq!(
            (shown.settings["maxTransientRetries"].as_u64(), shown.read_only),
            (Some(5), true)
        );
        assert_eq!(LlmRetry::from_config(&Value::Null).unwrap().plugin, LlmRetry::default());
        let err = LlmRetry::from_config(&serde_json::json!({"maxTransientRetires": 5}))
            .unwrap_err()
            .within("plugins[0].config");
        assert!(
            err.to_string().starts_with("plugins[0].config.maxTransientRetires: unknown key"),
            "{err}"
        );
        let err = factory(&serde_json::json!({"jitterRatio": 2})).err().unwrap();
        assert_eq!(
            err,
            ConfigError::Invalid {
                path: "jitterRatio".into(),
                message: "must be within [0, 1], got 2".into()
            }
        );
        let err = factory(&serde_json::json!(3)).err().unwrap();
        assert_eq!(
            err,
            ConfigError::Invalid {
                path: String::new(),
                message: "must be an object, got 3".into()
            }
        );
        assert_eq!(factory(&serde_json::json!({})).unwrap().plugin.name(), "llm-retry");
    }
}
