//! [`SessionLogActor`]: one per open session log, the only writer of that log.
//!
//! Wiring only. `pre_start` loads the log and repairs what a crash left open (`reopen`); each
//! message is then one [`LogState`] operation and its reply. The mailbox serializes them, so the
//! `seq`s the state hands out are contiguous and every batch is judged against a committed
//! predecessor, without a lock.
//!
//! # Why an append holds the mailbox until the store acknowledged
//!
//! "Durable before effect": an append's reply is the store's ack at its durability, and the next
//! batch of the session must be checked against it. So the handler awaits the store; appends of
//! one session are serialized by design, while different sessions' log actors append
//! concurrently — which is what lets a group-committing store batch them.
//!
//! # Why a failure here fails only this log
//!
//! A validator or a projection that panics makes the handler panic: ractor fails this actor,
//! every caller waiting on it (and every message still queued) gets `Closed` when its reply port
//! is dropped, and its supervisor — the session — is told through its link. The panic never
//! reaches the caller, so a plugin whose `llm/retry` append hit it is not counted as crashed.
//!
//! An append the store failed ends the log the same way, right after its caller got the store's
//! error (see `state`, "Why a store error ends the log"): the handler returns [`Failed`], so no
//! operation queued behind it runs, the claim on the session goes with the state, and the
//! session learns it from `ActorFailed`, with the store's error as the reason.

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::oneshot;

use crate::census::{ActorKind, Alive, Census};
use crate::clock::Clock;
use crate::store::SessionStore;

use super::message::LogMsg;
use super::reopen::reopen;
use super::state::LogState;
use super::{OpenOptions, OpenReport};

use std::sync::{Arc, OnceLock};

/// What a log actor opens.
pub(crate) struct OpenArgs {
    pub(crate) store: Arc<dyn SessionStore>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) session: Arc<str>,
    pub(crate) options: OpenOptions,
    /// Where the open's report goes.
    pub(crate) report: oneshot::Sender<OpenReport>,
    /// The runtime's census, when the log belongs to one.
    pub(crate) census: Option<Census>,
    /// Where the log's handles read why it failed, once it did.
    pub(crate) failure: Arc<OnceLock<String>>,
}

/// The actor; its state is the open log.
pub(crate) struct SessionLogActor;

/// The actor's state: the log, and its census mark.
pub(crate) struct Open {
    log: LogState,
    failure: Arc<OnceLock<String>>,
    _alive: Option<Alive>,
}

impl Actor for SessionLogActor {
    type Msg = LogMsg;
    type State = Open;
    type Arguments = OpenArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<LogMsg>,
        args: OpenArgs,
    ) -> Result<Open, ActorProcessingErr> {
        let OpenArgs { store, clock, session, options, report, census, failure } = args;
        let (log, opened) = reopen(store, clock, &session, options).await?;
        let _ = report.send(opened);
        Ok(Open { log, failure, _alive: census.map(|c| c.enter(ActorKind::SessionLog)) })
    }

    async fn handle(
        &self,
        _myself: ActorRef<LogMsg>,
        message: LogMsg,
        state: &mut Open,
    ) -> Result<(), ActorProcessingErr> {
        // A caller that stopped waiting dropped its port; the operation is done either way.
        match message {
            LogMsg::Append(events, reply) => {
                // Boxed: ractor keeps the processing loop's future for the actor's whole life,
                // sized for its largest handler; boxed, an append's state is held only while
                // it runs.
                let appended = Box::pin(state.log.append(events)).await;
                let _ = reply.send(appended);
            }
            LogMsg::Run(op) => op(&mut state.log).await,
        }
        match state.log.failed() {
            Some(error) => {
                let failed = Failed(error.to_owned());
                let _ = state.failure.set(failed.to_string());
                Err(Box::new(failed))
            }
            None => Ok(()),
        }
    }
}

/// Why a log actor failed: the store failed an append (its error).
#[derive(Debug, thiserror::Error)]
#[error("the store failed an append: {0}")]
pub(crate) struct Failed(pub(crate) String);
