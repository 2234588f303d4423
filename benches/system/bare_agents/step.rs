//! The bare step actor: drives its attempts by messages. It appends `step/start` +
//! `request/start` (reading the history its request carries in the same log operation) and sends
//! the attempt to the provider actor; appends the chunks that came back since its last batch as
//! one batch; on success appends `assistant/message` (with `tool/call`s, whose task's results it
//! appends with `step/end`); on failure appends `request/error` and runs the waterfall walk as
//! its task, whose answer is the next attempt or the step's end. It stops with how it ended in
//! its state; its `post_stop` cancels its token (the attempt, the walk and its wait race it) and
//! waits for its task. Once the session recorded a cancel cause, it starts no attempt or walk.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use rein::runtime::event::{
    AssistantChunk, AssistantMessage, Event, RequestError, RequestStart, StepRef, ToolCallEvent,
    ToolResult,
};
use rein::runtime::failure::Failure;
use rein::runtime::provider::{Completion, Request};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::Ctx;
use super::plugin::{Chain, walk};
use super::provider::{Pending, ProviderMsg};
use super::turn::TurnShared;
use crate::bare_log::{LogMsg, append, append_and_read};

/// What the step is told.
pub(super) enum StepMsg {
    /// Attempt `.0` pushed chunks into its buffer.
    Chunks(u32),
    /// Attempt `.0`'s outcome (after its chunks).
    Done(u32, Result<Completion, Failure>),
    /// The waterfall's answer to the failed attempt.
    Resolved(Resolution),
    /// The results of the tool calls, in order.
    ToolsDone(Vec<ToolResult>),
    /// Its task could not go on (the log closed): the step fails.
    Broken(String),
}

/// What the waterfall answers a failed attempt.
pub(super) enum Resolution {
    /// Run the next attempt; the retry chain as it now stands.
    Retry(Chain),
    /// End the step with the failure.
    Stop(Failure),
}

/// How a step ended.
pub(super) enum StepEnd {
    /// Its tool calls ran and `step/end` is written: the turn goes on with the next step.
    ToolsRan,
    /// The model answered with no tool call: the turn completed (its step left open).
    Answered,
    /// The chain did not retry the failure: the turn ends in error.
    Failed(Failure),
}

pub(super) struct BareStep;

pub(super) struct StepArgs {
    pub(super) ctx: Arc<Ctx>,
    pub(super) log: ActorRef<LogMsg>,
    pub(super) session: Arc<str>,
    pub(super) turn: u32,
    pub(super) step: u32,
    pub(super) shared: Arc<TurnShared>,
}

pub(super) struct StepState {
    args: StepArgs,
    attempt: u32,
    /// The running attempt's chunk buffer, and its text so far.
    pending: Pending,
    text: String,
    /// The step's retry chain, once it retried.
    chain: Option<Chain>,
    token: CancellationToken,
    /// The walk or the tool calls.
    task: Option<JoinHandle<()>>,
    /// How it ended, once it did.
    pub(super) ended: Option<StepEnd>,
}

impl StepState {
    fn at(&self) -> StepRef {
        StepRef { turn: self.args.turn, step: self.args.step }
    }

    fn request_start(&self) -> Event {
        let StepRef { turn, step } = self.at();
        let (provider, model) = (self.args.ctx.route.0.clone(), self.args.ctx.route.1.clone());
        Event::RequestStart(RequestStart { turn, step, attempt: self.attempt, provider, model })
    }

    /// Appends `batch` (ending with the attempt's `request/start`), reading the history, and sends
    /// the attempt to the provider actor.
    async fn start(
        &mut self,
        myself: &ActorRef<StepMsg>,
        batch: Vec<Event>,
    ) -> Result<(), ActorProcessingErr> {
        let messages = append_and_read(&self.args.log, batch).await?;
        let StepArgs { ctx, session, turn, step, .. } = &self.args;
        let request = Request {
            session: session.to_string(),
            turn: *turn,
            step: *step,
            attempt: self.attempt,
            provider: ctx.route.0.clone(),
            model: ctx.route.1.clone(),
            messages,
            tools: Vec::new(),
            generation: Default::default(),
        };
        (self.pending, self.text) = (Pending::default(), String::new());
        let call =
            ProviderMsg::Call(request, myself.clone(), self.pending.clone(), self.token.clone());
        ctx.provider.send_message(call)?;
        Ok(())
    }

    /// Whether the session is cancelling the turn (it records the cause before it stops the
    /// turn): no new attempt or walk starts then, as in rein; the stop is on its way.
    fn cancelling(&self) -> bool {
        self.args.shared.cause.get().is_some()
    }

    fn end(&mut self, myself: &ActorRef<StepMsg>, end: StepEnd) {
        self.ended = Some(end);
        myself.stop(None);
    }
}

impl Actor for BareStep {
    type Msg = StepMsg;
    type State = StepState;
    type Arguments = StepArgs;

    async fn pre_start(
        &self,
        _: ActorRef<StepMsg>,
        args: StepArgs,
    ) -> Result<StepState, ActorProcessingErr> {
        let token = args.shared.token.child_token();
        Ok(StepState {
            args,
            attempt: 1,
            pending: Pending::default(),
            text: String::new(),
            chain: None,
            token,
            task: None,
            ended: None,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<StepMsg>,
        state: &mut StepState,
    ) -> Result<(), ActorProcessingErr> {
        if state.cancelling() {
            return Ok(());
        }
        let at = state.at();
        let batch = vec![Event::StepStart(at), state.request_start()];
        state.args.shared.open_step.store(at.step, Ordering::Release);
        state.start(&myself, batch).await
    }

    async fn handle(
        &self,
        myself: ActorRef<StepMsg>,
        message: StepMsg,
        state: &mut StepState,
    ) -> Result<(), ActorProcessingErr> {
        let StepRef { turn, step } = state.at();
        let (attempt, log) = (state.attempt, &state.args.log);
        match message {
            StepMsg::Chunks(of) | StepMsg::Done(of, _) if of != attempt => {}
            StepMsg::Chunks(_) => {
                let texts = state.pending.take();
                if texts.is_empty() {
                    return Ok(());
                }
                let mut streamed = std::mem::take(&mut state.text);
                let batch = texts
                    .into_iter()
                    .map(|text| {
                        streamed.push_str(&text);
                        Event::AssistantChunk(AssistantChunk { turn, step, attempt, text })
                    })
                    .collect();
                append(log, batch).await?;
                state.text = streamed;
            }
            StepMsg::Done(_, Ok(completion)) => {
                let text = std::mem::take(&mut state.text);
                let calls = completion.tool_calls;
                let message = AssistantMessage {
                    turn,
                    step,
                    text,
                    tool_calls: (!calls.is_empty()).then(|| calls.clone()),
                    usage: completion.usage,
                };
                let mut batch = Vec::with_capacity(1 + calls.len());
                batch.push(Event::AssistantMessage(message));
                batch.extend(calls.iter().map(|call| {
                    Event::ToolCall(ToolCallEvent {
                        turn,
                        step,
                        id: call.id.clone(),
                        name: call.name.clone(),
                        arguments: call.arguments.clone(),
                    })
                }));
                append(log, batch).await?;
                if calls.is_empty() {
                    state.end(&myself, StepEnd::Answered);
                    return Ok(());
                }
                // `echo`, the workload's one tool: its output is its `text` argument.
                let me = myself.clone();
                state.task = Some(tokio::spawn(async move {
                    let results = calls
                        .into_iter()
                        .map(|call| ToolResult {
                            turn,
                            step,
                            output: call.arguments["text"].as_str().unwrap_or_default().to_owned(),
                            id: call.id,
                            is_error: false,
                        })
                        .collect();
                    let _ = me.send_message(StepMsg::ToolsDone(results));
                }));
            }
            StepMsg::ToolsDone(results) => {
                let mut batch: Vec<Event> = results.into_iter().map(Event::ToolResult).collect();
                batch.push(Event::StepEnd(state.at()));
                append(log, batch).await?;
                state.args.shared.open_step.store(0, Ordering::Release);
                state.end(&myself, StepEnd::ToolsRan);
            }
            StepMsg::Done(_, Err(failure)) => {
                state.text.clear();
                let provider = state.args.ctx.route.0.clone();
                let error =
                    RequestError { turn, step, attempt, provider, failure: failure.clone() };
                append(log, vec![Event::RequestError(error)]).await?;
                if state.cancelling() {
                    return Ok(());
                }
                let walk = walk(
                    Arc::clone(&state.args.ctx),
                    log.clone(),
                    state.at(),
                    failure,
                    state.chain.clone(),
                    state.token.clone(),
                    myself.clone(),
                );
                state.task = Some(tokio::spawn(walk));
            }
            StepMsg::Resolved(Resolution::Retry(chain)) => {
                state.chain = Some(chain);
                if state.cancelling() {
                    return Ok(());
                }
                state.attempt += 1;
                let batch = vec![state.request_start()];
                state.start(&myself, batch).await?;
            }
            StepMsg::Resolved(Resolution::Stop(failure)) => {
                state.end(&myself, StepEnd::Failed(failure));
            }
            StepMsg::Broken(error) => return Err(error.into()),
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _: ActorRef<StepMsg>,
        state: &mut StepState,
    ) -> Result<(), ActorProcessingErr> {
        state.token.cancel();
        if let Some(task) = state.task.take() {
            let _ = task.await;
        }
        Ok(())
    }
}
