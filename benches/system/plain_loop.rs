//! The least a turn can be: a hand-rolled async loop, no actor at all, that makes the turn's
//! appends — the same events in the same batches, stamped with `seq` and `time` — straight to a
//! store, and calls the adapter the way a provider actor would (a chunk sink, the chunk read back
//! and appended).

use std::sync::Arc;

use rein::runtime::clock::{Clock as _, WallClock};
use rein::runtime::event::{
    AgentIdle, AssistantChunk, AssistantMessage, Envelope, Event, LOG_FORMAT, RequestStart,
    SessionStart, StepRef, TurnEnd, TurnEndReason, TurnStart, UserMessage,
};
use rein::runtime::provider::{Adapter, ChunkSink, Messages, Request};
use rein::runtime::store::SessionStore;

/// One session's log as the loop keeps it: where it goes, its id and next `seq`.
pub(crate) struct PlainSession {
    store: Arc<dyn SessionStore>,
    adapter: Arc<dyn Adapter>,
    id: String,
    route: String,
    model: String,
    next_seq: u64,
    next_turn: u32,
}

impl PlainSession {
    /// Opens session `id` (writes `session/start`) on `store`, calling `adapter` as route
    /// `route` (model `model`).
    pub(crate) async fn open(
        store: Arc<dyn SessionStore>,
        adapter: Arc<dyn Adapter>,
        id: &str,
        (route, model): (&str, &str),
    ) -> anyhow::Result<Self> {
        let mut session = Self {
            store,
            adapter,
            id: id.to_owned(),
            route: route.to_owned(),
            model: model.to_owned(),
            next_seq: 0,
            next_turn: 1,
        };
        let start = SessionStart { session: id.to_owned(), format: LOG_FORMAT };
        session.append(vec![Event::SessionStart(start)]).await?;
        Ok(session)
    }

    /// Stamps `events` with `seq` and `time` and appends them as one batch.
    async fn append(&mut self, events: Vec<Event>) -> anyhow::Result<()> {
        let time = WallClock.now_ms();
        let first = self.next_seq;
        let batch: std::sync::Arc<[Envelope]> =
            (first..).zip(events).map(|(seq, event)| Envelope { seq, time, event }).collect();
        self.store.append_shared(&self.id, &batch).await?;
        self.next_seq += batch.len() as u64;
        Ok(())
    }

    /// One turn of prompt `text`, batched as rein batches it.
    pub(crate) async fn turn(&mut self, text: &str) -> anyhow::Result<()> {
        let (turn, step) = (self.next_turn, 1);
        self.next_turn += 1;
        let at = StepRef { turn, step };
        self.append(vec![
            Event::UserMessage(UserMessage { text: text.to_owned() }),
            Event::TurnStart(TurnStart { turn }),
        ])
        .await?;
        let (provider, model) = (self.route.clone(), self.model.clone());
        let start = RequestStart { turn, step, attempt: 1, provider, model };
        self.append(vec![Event::StepStart(at), Event::RequestStart(start)]).await?;
        let request = Request {
            session: self.id.clone(),
            turn,
            step,
            attempt: 1,
            provider: self.route.clone(),
            model: self.model.clone(),
            messages: Messages::new(),
            tools: Vec::new(),
            generation: Default::default(),
        };
        let (sink, mut chunks) = ChunkSink::channel();
        let completion = self.adapter.call(request, sink).await;
        let mut text = String::new();
        while let Ok(chunk) = chunks.try_recv() {
            let event = AssistantChunk { turn, step, attempt: 1, text: chunk.clone() };
            self.append(vec![Event::AssistantChunk(event)]).await?;
            text.push_str(&chunk);
        }
        if let Err(failure) = completion {
            anyhow::bail!("the adapter failed: {failure:?}");
        }
        let message = AssistantMessage { turn, step, text, tool_calls: None, usage: None };
        self.append(vec![Event::AssistantMessage(message)]).await?;
        self.append(vec![
            Event::StepEnd(at),
            Event::TurnEnd(TurnEnd { turn, reason: TurnEndReason::Completed }),
            Event::AgentIdle(AgentIdle {}),
        ])
        .await?;
        Ok(())
    }
}
