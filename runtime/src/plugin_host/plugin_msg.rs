//! The messages of a plugin actor (`plugin_actor`): what the walk sends it (one recovery to run)
//! and what it answers, and the report a panicked recovery sends the actor that ran it.
//!
//! They sit apart from the actor so that what sends them (the slot, the runtime's supervision)
//! needs only this file.

use std::sync::Arc;

use tokio::sync::oneshot;

use crate::plugin::{Downstream, RequestErrorPayload};
use crate::waterfall::Answered;

/// A message to a plugin actor.
pub(crate) enum PluginMsg {
    /// Answer one failed attempt.
    /// (Not boxed: ractor boxes every message already; a second box is one more allocation per
    /// hop.)
    Recover(RecoverCall),
    /// One of this incarnation's recoveries panicked: fail, so the supervisor restarts it.
    RecoveryCrashed(CrashNotice),
}

/// One recovery to run.
pub(crate) struct RecoverCall {
    /// The failure and its context.
    pub(crate) payload: Arc<RequestErrorPayload>,
    /// The rest of the chain.
    pub(crate) downstream: Downstream,
    /// Where the answer goes.
    pub(crate) reply: oneshot::Sender<PluginReply>,
}

/// A plugin's answer as the waterfall receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PluginReply {
    /// What the recovery gave.
    pub(crate) answer: Answered,
    /// Whether the plugin had left the chain (disposed) by the time its recovery ended.
    pub(crate) disposed: bool,
}

/// A panicked recovery's report, on its way to the supervisor.
pub(crate) struct CrashNotice {
    pub(crate) error: String,
    pub(crate) report: oneshot::Sender<u32>,
}
