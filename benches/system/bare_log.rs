//! The bare trees' session log (`bare_tree`, `bare_agents`): one ractor actor per session, linked
//! under its session actor, the only writer of its log. Its `pre_start` loads the log through the
//! store (its length is the next `seq`) and appends `session/start` to a new one; each
//! [`LogMsg::Append`] stamps its events with `seq` and time and appends them as one batch, and
//! the reply goes out after the store's ack.
//!
//! It keeps the model-visible history (prompts and answers; [`LogMsg::AppendAndRead`] reads it
//! with a step's `request/start`). A subscriber ([`LogMsg::Subscribe`]) gets every later batch as it is written, the batch itself
//! shared (as rein's turn handles get them). [`LogMsg::Close`] appends a batch and then runs a
//! continuation in the log's task (what answers a cancel's caller, as in rein), and yields.
//!
//! Like rein's, it refuses a write for a turn that ended (a cancelled turn's step still stopping
//! after the session closed it). What it leaves out is what rein's log actor adds: validators,
//! projections but the history, closing a turn left open.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use rein::runtime::clock::{Clock as _, WallClock};
use rein::runtime::event::{Envelope, Event, LOG_FORMAT, SessionStart};
use rein::runtime::provider::{Message, Messages};
use rein::runtime::store::{SessionStore, StoreError};
use tokio::sync::{mpsc, oneshot};

/// A batch as written: one shared allocation (as rein's session log shares it).
pub(crate) type Batch = Arc<[Envelope]>;

/// Appends `events` through the log actor; resolves after the store's ack.
pub(crate) async fn append(
    log: &ActorRef<LogMsg>,
    events: Vec<Event>,
) -> Result<Batch, StoreError> {
    let (reply, appended) = oneshot::channel();
    log.send_message(LogMsg::Append(events, reply)).map_err(|_| StoreError::Closed)?;
    appended.await.map_err(|_| StoreError::Closed)?
}

/// What a [`LogMsg::Close`] runs once its batch is written (or not).
pub(crate) type Then = Box<dyn FnOnce(Result<Batch, StoreError>) + Send>;

/// What the log actor is asked.
pub(crate) enum LogMsg {
    /// Append these events as one batch; the reply carries them as written (the batch the
    /// store keeps, shared).
    Append(Vec<Event>, oneshot::Sender<Result<Batch, StoreError>>),
    /// Append these events as one batch, then run the continuation with them.
    Close(Vec<Event>, Then),
    /// Send every later batch here.
    Subscribe(mpsc::UnboundedSender<Batch>),
    /// Append these events as one batch; the reply carries the model-visible history after them
    /// (what a step's request carries, read in the same operation as in rein).
    AppendAndRead(Vec<Event>, oneshot::Sender<Result<Messages, StoreError>>),
}

/// Appends `events` through the log actor and reads the history; resolves after the store's ack.
pub(crate) async fn append_and_read(
    log: &ActorRef<LogMsg>,
    events: Vec<Event>,
) -> Result<Messages, StoreError> {
    let (reply, appended) = oneshot::channel();
    log.send_message(LogMsg::AppendAndRead(events, reply)).map_err(|_| StoreError::Closed)?;
    appended.await.map_err(|_| StoreError::Closed)?
}

/// The log actor; its arguments are the store and the session's id.
pub(crate) struct BareLog;

/// The log actor's state: where it appends, the next `seq`, the subscribers, the model-visible
/// history (the prompts and the answers), the last turn ended.
pub(crate) struct LogState {
    store: Arc<dyn SessionStore>,
    id: Arc<str>,
    next_seq: u64,
    subscribers: Vec<mpsc::UnboundedSender<Batch>>,
    history: Messages,
    ended: u32,
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
        let (subscribers, history) = (Vec::new(), Messages::new());
        let mut state = LogState { store, id, next_seq, subscribers, history, ended: 0 };
        if next_seq == 0 {
            let start = SessionStart { session: state.id.to_string(), format: LOG_FORMAT };
            stamp_and_append(&mut state, vec![Event::SessionStart(start)]).await?;
        }
        Ok(state)
    }

    async fn handle(
        &self,
        _: ActorRef<LogMsg>,
        message: LogMsg,
        state: &mut LogState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            LogMsg::Append(events, reply) => {
                let _ = reply.send(stamp_and_append(state, events).await);
            }
            LogMsg::Close(events, then) => {
                then(stamp_and_append(state, events).await);
                tokio::task::yield_now().await;
            }
            LogMsg::Subscribe(subscriber) => state.subscribers.push(subscriber),
            LogMsg::AppendAndRead(events, reply) => {
                let appended = stamp_and_append(state, events).await;
                let _ = reply.send(appended.map(|_| state.history.clone()));
            }
        }
        Ok(())
    }
}

/// Stamps `events` with `seq` and `time`, appends them as one batch (shared with the store, as
/// rein's log shares it), returns them as written.
async fn stamp_and_append(state: &mut LogState, events: Vec<Event>) -> Result<Batch, StoreError> {
    // A late write of a turn that ended (a cancelled turn's step, still stopping) is refused.
    if events.iter().any(|event| turn_of(event).is_some_and(|turn| turn <= state.ended)) {
        return Err(StoreError::Closed);
    }
    let time = WallClock.now_ms();
    let first = state.next_seq;
    let batch: Batch =
        (first..).zip(events).map(|(seq, event)| Envelope { seq, time, event }).collect();
    state.store.append_shared(&state.id, &batch).await?;
    state.next_seq += batch.len() as u64;
    for envelope in batch.iter() {
        match &envelope.event {
            Event::UserMessage(user) => {
                state.history.push(Message::User { text: user.text.clone() })
            }
            Event::AssistantMessage(answer) => state.history.push(Message::Assistant {
                text: answer.text.clone(),
                tool_calls: answer.tool_calls.clone().unwrap_or_default(),
            }),
            Event::TurnEnd(end) => state.ended = end.turn,
            Event::ToolResult(result) => state.history.push(Message::Tool {
                id: result.id.clone(),
                output: result.output.clone(),
                is_error: result.is_error,
            }),
            _ => {}
        }
    }
    state.subscribers.retain(|subscriber| subscriber.send(Arc::clone(&batch)).is_ok());
    Ok(batch)
}

/// The turn a step's or a plugin's event belongs to.
fn turn_of(event: &Event) -> Option<u32> {
    match event {
        Event::StepStart(e) | Event::StepEnd(e) => Some(e.turn),
        Event::RequestStart(e) => Some(e.turn),
        Event::AssistantChunk(e) => Some(e.turn),
        Event::RequestError(e) => Some(e.turn),
        Event::LlmRetry(e) => Some(e.turn),
        Event::LlmRetryStarted(e) => Some(e.turn),
        Event::AssistantMessage(e) => Some(e.turn),
        Event::ToolCall(e) => Some(e.turn),
        Event::ToolResult(e) => Some(e.turn),
        Event::TurnEnd(e) => Some(e.turn),
        _ => None,
    }
}
