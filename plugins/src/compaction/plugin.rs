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

use rein_runtime::event::Event;
use rein_runtime::failure::CONTEXT_WINDOW_EXCEEDED;
use rein_runtime::history::{HISTORY, HistoryProjection, VisibleEvent};
use rein_runtime::plugin::{ConfigError, ConfigOutcome, Plugin, PluginSettings, Recovery, Verdict};
use rein_runtime::scenario::registry::BuiltPlugin;
use rein_runtime::store::BoxFuture;
use serde_json::Value;
use tracing::Instrument;

use super::NAME;
use super::decision::{self, Decision};
use super::settings::CompactionSettings;
use crate::settings::{Revisioned, Warning};

/// The `compaction` plugin: register it between `llm-retry` and `auto-retry`.
///
/// ```
/// use rein_plugins::compaction::Compaction;
///
/// let (compaction, warnings) = Compaction::from_config(&serde_json::json!({"keepRecentMessages": 0}));
/// assert_eq!(compaction.current().keep_recent_messages(), 1, "clamped into 1..=1000");
/// assert_eq!(warnings.len(), 1);
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
    /// fallback taken, as [`Warning`]s whose paths are relative to the value.
    pub fn from_config(config: &Value) -> (Self, Vec<Warning>) {
        let (settings, warnings) = CompactionSettings::from_file(config, "");
        (Self::new(settings), warnings)
    }

    /// The settings in force.
    pub fn current(&self) -> Arc<CompactionSettings> {
        self.settings.settings()
    }
}

/// Builds `compaction` from a configuration value, as a lenient plugin registry entry (register
/// it under [`NAME`]): the plugin and the fallbacks its reader took.
pub fn factory(config: &Value) -> Result<BuiltPlugin, ConfigError> {
    let (plugin, warnings) = Compaction::from_config(config);
    Ok(BuiltPlugin {
        plugin: Arc::new(plugin),
        warnings: warnings.into_iter().map(Into::into).collect(),
    })
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
        let span = tracing::info_span!(
            "compaction",
            session.id = %p.session,
            turn = p.turn,
            step = p.step,
            attempt = p.attempt,
            gen_ai.provider.name = %p.provider,
        );
        Box::pin(recover(self, recovery).instrument(span))
    }

    fn configure(&self, patch: Value, base_revision: u64) -> Result<ConfigOutcome, ConfigError> {
        Ok(self.settings.configure(&patch, base_revision)?.into())
    }

    fn revision(&self) -> u64 {
        self.settings.revision()
    }

    fn settings(&self) -> Option<PluginSettings> {
        let snapshot = self.settings.snapshot();
        Some(PluginSettings {
            revision: snapshot.revision,
            settings: snapshot.settings.to_json(),
            read_only: false,
        })
    }

    fn check_settings(
        &self,
        patch: &Value,
        base_revision: u64,
    ) -> Result<Vec<String>, ConfigError> {
        let changed = self.settings.check(patch, base_revision)?;
        Ok(changed.into_iter().map(str::to_owned).collect())
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
