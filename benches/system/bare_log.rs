//! The bare trees' session log (`bare_tree`, `bare_agents`): one ractor actor per session, linked
//! under its session actor, the only writer of its log. Its `pre_start` loads the log through the
//! store (its length is the next `seq`) and appends `session/start` to a new one; each
//! [`LogMsg::Append`] stamps its events with `seq` and time and appends them as one batch, and
//! the reply goes out after the store's ack.
//!
//! What it leaves out is what rein's log actor adds: validators, projections, subscriptions,
//! closing a turn left open.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use rein::runtime::clock::{Clock as _, WallClock};
use rein::runtime::event::{Envelope, Event, LOG_FORMAT, SessionStart};
use rein::runtime::store::{SessionStore, StoreError};
use tokio::sync::oneshot;

/// Appends `events` through the log actor; resolves after the store's ack.
pub(crate) async fn append(
    log: &ActorRef<LogMsg>,
    events: Vec<Event>,
) -> Result<Arc<[Envelope]>, StoreError> {
    let (reply, appended) = oneshot::channel();
    log.send_message(LogMsg::Append(events, reply)).map_err(|_| StoreError::Closed)?;
    appended.await.map_err(|_| StoreError::Closed)?
}

/// What the log actor is asked.
pub(crate) enum LogMsg {
    /// Append these events as one batch; the reply carries them as written (the batch the
    /// store keeps, shared).
    Append(Vec<Event>, oneshot::Sender<Result<Arc<[Envelope]>, StoreError>>),
}

/// The log actor; its arguments are the store and the session's id.
pub(crate) struct BareLog;

/// The log actor's state: where it appends, and the next `seq`.
pub(crate) struct LogState {
    store: Arc<dyn SessionStore>,
    id: Arc<str>,
    next_seq: u64,
}

impl Actor for BareLog {
    type Msg = LogMsg;
    type State = LogState;
    type Arguments = (Arc<dyn SessionStore>, Arc<str>);

    async fn pre_start(
        &self,
        _: ActorRef<LogMsg>,
        (store, id): Self::Arguments,
    ) -> Result<LogState, ActorProcessingErr> {
        let next_seq = store.load(&id).await?.map_or(0, |loaded| loaded.events.len() as u64);
        let mut state = LogState { store, id, next_seq };
        if next_seq == 0 {
            let start = SessionStart { session: state.id.to_string(), format: LOG_FORMAT };
            stamp_and_append(&mut state, vec![Event::SessionStart(start)]).await?;
        }
        Ok(state)
    }

    async fn handle(
        &self,
        _: ActorRef<LogMsg>,
        LogMsg::Append(events, reply): LogMsg,
        state: &mut LogState,
    ) -> Result<(), ActorProcessingErr> {
        let _ = reply.send(stamp_and_append(state, events).await);
        Ok(())
    }
}

/// Stamps `events` with `seq` and `time`, appends them as one batch (shared with the store, as
/// rein's log shares it), returns them as written.
async fn stamp_and_append(
    state: &mut LogState,
    events: Vec<Event>,
) -> Result<Arc<[Envelope]>, StoreError> {
    let time = WallClock.now_ms();
    let first = state.next_seq;
    let batch: Arc<[Envelope]> =
        (first..).zip(events).map(|(seq, event)| Envelope { seq, time, event }).collect();
    state.store.append_shared(&state.id, &batch).await?;
    state.next_seq += batch.len() as u64;
    Ok(batch)
}
