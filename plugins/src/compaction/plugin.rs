//! [`Compaction`]: `compaction` as a runtime [`Plugin`] — the wiring between the waterfall
//! payload, the session's model-visible history and the pure decision ([`super::decision`]).
//!
//! One recovery, in order:
//!
//! 1. a failure other than `CONTEXT_WINDOW_EXCEEDED`, or `maxOverflowRetries = 0`, is answered
//!    `Next` at once (in the plugin's handler: no task, no log read);
//! 2. one read of the `history` projection: the turn's compactions so far and the model-visible
//!    events with their seqs;
//! 3. [`decision::decide`] with the settings in force: `Next` when the budget is spent or nothing
//!    can be removed;
//! 4. otherwise, unless the turn was cancelled or the plugin disposed meanwhile (then `Stop`,
//!    nothing written), append `context/compacted` and answer `Retry`; a refused append is `Stop`
//!    (the history did not shrink, and retrying the same request would overflow again).
//!
//! The next attempt is built by the step from the `history` projection, which applies the
//! `context/compacted` it just folded: the request carries the shrunk history. The budget is
//! read from the same fold, so it survives a restart and a manual retry (a new turn) starts
//! afresh.

use std::sync::Arc;

use rein_runtime::BoxFuture;
use rein_runtime::event::Event;
use rein_runtime::failure::CONTEXT_WINDOW_EXCEEDED;
use rein_runtime::history::{HISTORY, HistoryProjection, VisibleEvent};
use rein_runtime::plugin::{BuiltPlugin, Configured, IntoPlugin};
use rein_runtime::plugin::{ConfigError, Plugin, Recovery, Settings, Verdict};
use serde_json::Value;

use super::NAME;
use super::decision::{self, Decision};
use super::settings::CompactionSettings;
use crate::settings::Revisioned;

/// The `compaction` plugin: register it between `llm-retry` and `auto-retry`.
///
/// ```
/// use rein_plugins::compaction::Compaction;
///
/// let compaction = Compaction::from_config(&serde_json::json!({"keepRecentMessages": 0})).unwrap();
/// assert_eq!(compaction.plugin.current().keep_recent_messages(), 1, "clamped into 1..=1000");
/// assert_eq!(
///     compaction.warnings[0].to_string(),
///     "keepRecentMessages: 0 is outside 1..=1000; clamped to 1"
/// );
/// ```
#[derive(Debug)]
pub struct Compaction {
    settings: Revisioned<CompactionSettings>,
}

impl Default for Compaction {
    fn default() -> Self {
        Self::new(CompactionSettings::default())
    }
}

impl Compaction {
    /// The plugin with `settings` at revision 0.
    pub fn new(settings: CompactionSettings) -> Self {
        Self { settings: Revisioned::new(settings) }
    }

    /// The plugin from its configuration file value, read leniently: the settings and every
    /// fallback taken, as warnings whose paths are relative to the value. Never an error (the
    /// `Result` is the shape every plugin's `from_config` has).
    pub fn from_config(config: &Value) -> Result<Configured<Self>, ConfigError> {
        let (settings, warnings) = CompactionSettings::from_file(config, "");
        Ok(Configured::lenient(Self::new(settings), warnings))
    }

    /// The settings in force.
    pub fn current(&self) -> Arc<CompactionSettings> {
        self.settings.settings()
    }
}

/// Builds `compaction` from a configuration value, as a plugin registry entry (register it under
/// [`NAME`]): [`Compaction::from_config`], the plugin and the fallbacks its reader took.
pub fn factory(config: &Value) -> Result<BuiltPlugin, ConfigError> {
    Compaction::from_config(config).map(IntoPlugin::into_plugin)
}

impl Plugin for Compaction {
    fn name(&self) -> &str {
        NAME
    }

    fn recover(self: Arc<Self>, recovery: Recovery) -> BoxFuture<'static, Verdict> {
        let p = &recovery.payload;
        if p.failure.code() != CONTEXT_WINDOW_EXCEEDED || self.current().max_overflow_retries() == 0
        {
            return Box::pin(std::future::ready(Verdict::Next));
        }
        Box::pin(recover(self, recovery))
    }

    fn settings(&self) -> Option<&dyn Settings> {
        Some(&self.settings)
    }
}

/// One overflow to recover (see the module docs for the steps).
async fn recover(plugin: Arc<Compaction>, recovery: Recovery) -> Verdict {
    let Recovery { payload, disposed, .. } = recovery;
    let turn = payload.turn;
    let read = payload
        .log
        .view::<HistoryProjection, (u32, Vec<VisibleEvent>)>(HISTORY, move |history| {
            (history.compactions_in_turn(turn), history.visible().to_vec())
        })
        .await;
    let (compactions, visible) = match read {
        Ok(read) => read,
        Err(error) => {
            // The session's log is gone (the session is closing): nothing could shrink.
            tracing::warn!(%error, "could not read the history: no compaction");
            return Verdict::Stop;
        }
    };
    let cut = match decision::decide(&plugin.current(), &payload.failure, compactions, &visible) {
        Decision::Compact(cut) => cut,
        Decision::Decline(why) => {
            tracing::debug!(?why, "no compaction");
            return Verdict::Next;
        }
    };
    if payload.cancel.is_cancelled() || disposed.is_cancelled() {
        return Verdict::Stop;
    }
    let (removed, kept) = (cut.removed.len(), cut.kept);
    let event = Event::ContextCompacted(cut.event(payload.turn, payload.step));
    match payload.log.append(vec![event]).await {
        Ok(_) => {
            tracing::debug!(removed, kept, "history compacted");
            Verdict::Retry
        }
        Err(error) => {
            tracing::warn!(%error, "the session log refused the compaction: no retry");
            Verdict::Stop
        }
    }
}

#[cfg(test)]
mod tests {
    use rein_runtime::clock::VirtualClock;
    use rein_runtime::event::{
        AssistantMessage, RequestError, RequestStart, StepRef, TurnStart, UserMessage,
    };
    use rein_runtime::failure::Failure;
    use rein_runtime::plugin::{Downstream, RequestErrorPayload};
    use rein_runtime::random::Constant;
    use rein_runtime::session_log::{OpenOptions, SessionLog};
    use rein_runtime::store::memory::MemoryStore;
    use rein_scenario::reject::RejectAppends;
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    use super::*;

    /// A log with an earlier exchange and turn 2's first attempt failed with `code`.
    async fn overflowed(code: &str) -> (MemoryStore, SessionLog, Failure) {
        let store = MemoryStore::new();
        let clock = Arc::new(VirtualClock::start());
        let options = OpenOptions::new().projection(HistoryProjection);
        let (log, _) =
            SessionLog::open_with(Arc::new(store.clone()), clock, "s", options).await.unwrap();
        let failure = Failure::new(code, "too long").unwrap();
        let mut events = Vec::new();
        for turn in 1..=2 {
            events.push(Event::UserMessage(UserMessage { text: format!("q{turn}") }));
            events.push(Event::TurnStart(TurnStart { turn }));
            events.push(Event::StepStart(StepRef { turn, step: 1 }));
            let attempt = RequestStart {
                turn,
                step: 1,
                attempt: 1,
                provider: "mock".into(),
                model: "m".into(),
            };
            events.push(Event::RequestStart(attempt));
            if turn == 1 {
                events.push(Event::AssistantMessage(AssistantMessage {
                    turn,
                    step: 1,
                    text: "a1".into(),
                    tool_calls: None,
                    usage: None,
                }));
                events.push(Event::StepEnd(StepRef { turn, step: 1 }));
                events.push(Event::TurnEnd(rein_runtime::event::TurnEnd {
                    turn,
                    reason: rein_runtime::event::TurnEndReason::Completed,
                }));
            }
        }
        events.push(Event::RequestError(RequestError {
            turn: 2,
            step: 1,
            attempt: 1,
            provider: "mock".into(),
            failure: failure.clone(),
        }));
        log.append(events).await.unwrap();
        (store, log, failure)
    }

    async fn offer(
        plugin: Compaction,
        log: &SessionLog,
        failure: Failure,
        cancel: CancellationToken,
        disposed: CancellationToken,
    ) -> Verdict {
        let payload = RequestErrorPayload {
            session: Arc::from("s"),
            turn: 2,
            step: 1,
            attempt: 1,
            provider: "mock".into(),
            failure,
            retry_policy: None,
            health: Default::default(),
            cancel,
            log: log.clone(),
        };
        let recovery = Recovery {
            payload: Arc::new(payload),
            downstream: Downstream::end(),
            disposed,
            jitter: Arc::new(Constant::new(0.5).unwrap()),
        };
        Arc::new(plugin).recover(recovery).await
    }

    fn compactions(store: &MemoryStore) -> usize {
        store.events("s").iter().filter(|e| e.kind() == "context/compacted").count()
    }

    fn keep_one() -> Compaction {
        Compaction::from_config(&json!({"keepRecentMessages": 1})).unwrap().plugin
    }

    #[tokio::test]
    async fn an_overflow_is_compacted_and_retried() {
        let (store, log, failure) = overflowed(CONTEXT_WINDOW_EXCEEDED).await;
        let (cancel, disposed) = (CancellationToken::new(), CancellationToken::new());
        assert_eq!(offer(keep_one(), &log, failure, cancel, disposed).await, Verdict::Retry);
        let last = store.events("s").pop().unwrap();
        let Event::ContextCompacted(c) = last.event else { panic!("{last:?}") };
        // q1 (seq 1) and a1 (seq 5) dropped; q2 kept.
        assert_eq!((c.turn, c.step, c.removed, c.kept), (2, 1, vec![1, 5], 1));
    }

    #[tokio::test]
    async fn a_cancelled_turn_or_a_disposed_plugin_writes_nothing_and_stops() {
        for (cancelled, disposed_too) in [(true, false), (false, true)] {
            let (store, log, failure) = overflowed(CONTEXT_WINDOW_EXCEEDED).await;
            let (cancel, disposed) = (CancellationToken::new(), CancellationToken::new());
            if cancelled {
                cancel.cancel();
            }
            if disposed_too {
                disposed.cancel();
            }
            assert_eq!(offer(keep_one(), &log, failure, cancel, disposed).await, Verdict::Stop);
            assert_eq!(compactions(&store), 0);
        }
    }

    #[tokio::test]
    async fn a_refused_append_stops() {
        let (store, log, failure) = overflowed(CONTEXT_WINDOW_EXCEEDED).await;
        log.add_validator(Box::new(RejectAppends::new(["context/compacted"]))).await.unwrap();
        let (cancel, disposed) = (CancellationToken::new(), CancellationToken::new());
        assert_eq!(offer(keep_one(), &log, failure, cancel, disposed).await, Verdict::Stop);
        assert_eq!(compactions(&store), 0);
    }

    #[tokio::test]
    async fn other_codes_an_inert_budget_or_nothing_to_drop_hand_the_failure_on() {
        let (cancel, disposed) = (CancellationToken::new(), CancellationToken::new());
        let (store, log, failure) = overflowed("SERVER").await;
        assert_eq!(
            offer(keep_one(), &log, failure, cancel.clone(), disposed.clone()).await,
            Verdict::Next
        );
        let (_, log, failure) = overflowed(CONTEXT_WINDOW_EXCEEDED).await;
        let inert = Compaction::from_config(&json!({"maxOverflowRetries": 0})).unwrap().plugin;
        assert_eq!(
            offer(inert, &log, failure, cancel.clone(), disposed.clone()).await,
            Verdict::Next
        );
        let (_, log, failure) = overflowed(CONTEXT_WINDOW_EXCEEDED).await;
        let keep_all = Compaction::default();
        assert_eq!(offer(keep_all, &log, failure, cancel, disposed).await, Verdict::Next);
        assert_eq!(compactions(&store), 0);
    }

    #[test]
    fn settings_are_readable_checkable_and_patchable() {
        let plugin = Compaction::default();
        let settings = plugin.settings().unwrap();
        let read = settings.shown();
        assert_eq!(read.settings, json!({"maxOverflowRetries": 1, "keepRecentMessages": 6}));
        assert!(!read.read_only);
        assert_eq!(
            settings.stage(&json!({"keepRecentMessages": 0}), 0).unwrap_err().to_string(),
            "keepRecentMessages: must be an integer within 1..=1000, got 0"
        );
        let outcome = settings.configure(&json!({"maxOverflowRetries": 2}), 0).unwrap();
        assert_eq!((outcome.revision, outcome.changed), (1, vec!["maxOverflowRetries".to_owned()]));
        assert_eq!(plugin.current().max_overflow_retries(), 2);
    }
}
