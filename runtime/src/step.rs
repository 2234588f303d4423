//! [`StepActor`]: one per running step, linked under its turn. It drives the step's attempts by
//! messages and reports how the step ended through its termination (see `turn`).
//!
//! 1. It reads the model-visible history from the log and builds the request, writes
//!    `step/start` (first attempt) and `request/start`, and sends the attempt to the route's
//!    provider actor. The provider streams the chunks back ([`StepMsg::Chunks`]: the chunks that
//!    arrived together, written as one batch of `assistant/chunk`, see `chunks`) and then the
//!    outcome ([`StepMsg::AttemptDone`]).
//! 2. On success it writes `assistant/message` — built only from *this* attempt's chunks — and
//!    runs the tool calls one after another, each as a task that reports back
//!    ([`StepMsg::ToolDone`]): `tool/call` before it runs, `tool/result` after.
//! 3. On failure it writes `request/error` and offers the failure to the waterfall: the walk of
//!    the plugin chain runs as a task of the step and its verdict comes back as a message
//!    ([`StepMsg::Resolved`]). `Retry` starts the next attempt at 1. — on the route a
//!    `route/switched` written during the walk names, if one was (the step keeps that route, and
//!    its turn's later steps start on it); `Stop` ends the step with the failure.
//!
//! Its handlers never wait on anything but the session's log, so a stop is taken promptly.
//!
//! # What a step writes and what it leaves to its turn's end
//!
//! A step that lets its turn go on (its tools ran) writes its `step/end`. A step that ends its
//! turn — the model answered, a failure nobody recovered — leaves its `step/end` to the closing
//! batch its session writes with the `turn/end` (the log computes it from the open step, see
//! `SessionLog::close_turn`): one write fewer per turn, and the same log.
//!
//! # Cancellation
//!
//! The step's [`CancelScope`] is a child of its turn's: the provider's stream, the waterfall's
//! walk (and the plugin waits inside it) and a running tool all race its token. Its `post_stop`
//! cancels the token and waits for the walk or the tool in flight to settle, so nothing of the
//! step is written after it stopped; if the step is killed instead, its state's guard cancels the
//! token as the state is dropped. After its token fired the step writes nothing at all: its
//! turn's closing events say how it ended.
//!
//! # Why the request is rebuilt from the log on every attempt
//!
//! A retry's request is built from the durable log. Between two attempts plugins may have
//! appended (`llm/retry`, `context/compacted`): rebuilding from the `history` projection takes
//! compaction into account and, because failed chunks and retry events never enter the history,
//! gives a retry exactly the failed attempt's messages otherwise.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::task::JoinHandle;
use tokio_util::sync::DropGuard;
use tracing::Instrument;

use crate::agent_loop::runtime_failure;
use crate::agent_loop::{self, StepOutcome};
use crate::cancel::CancelScope;
use crate::census::{ActorKind, Alive};
use crate::context::{RouteUse, Shared};
use crate::crash::panic_message;
use crate::event::{
    AssistantChunk, Event, RequestError, RequestStart, StepRef, ToolCall, ToolCallEvent, ToolResult,
};
use crate::failure::{self, Failure};
use crate::history::{HISTORY, HistoryProjection};
use crate::plugin::RequestErrorPayload;
use crate::plugin_host::walk;
use crate::provider::message::{ProviderCall, ProviderMsg};
use crate::provider::{ChunkSink, Completion, Generation, Request, SinkClosed};
use crate::resume::plan::{self as resume, StepPoint, ToolRun};
use crate::retry_policy::RetryPolicy;
use crate::session_log::{SessionLog, StepRouteProjection};
use crate::tool::{TOOL_ERROR, ToolOutcome};
use crate::waterfall::{self, Resolution};

mod chunks;
mod message;

use chunks::PendingChunks;
pub(crate) use message::StepMsg;

/// What a turn and its steps run with (shared by them, one allocation per turn).
pub(crate) struct TurnCtx {
    pub(crate) shared: Arc<Shared>,
    pub(crate) log: SessionLog,
    pub(crate) session_id: Arc<str>,
    pub(crate) turn: u32,
    /// The route the turn starts on, as the prompt (or the retry) named it.
    pub(crate) route: RouteUse,
    /// The prompt's generation settings (none for a retry), over each route's.
    pub(crate) generation: Generation,
}

/// The actor of one running step.
pub(crate) struct StepActor;

/// What a step actor starts with.
pub(crate) struct StepArgs {
    pub(crate) ctx: Arc<TurnCtx>,
    pub(crate) step: u32,
    /// The route its first attempt goes to (the turn's route, or where an earlier step of the
    /// turn was switched to).
    pub(crate) route: RouteUse,
    pub(crate) scope: CancelScope,
    /// Where a step a crash left open continues (see `resume`); `None`: a new step.
    pub(crate) resume: Option<StepPoint>,
}

/// A step actor's state.
pub(crate) struct StepState {
    ctx: Arc<TurnCtx>,
    step: u32,
    /// The route of its attempts; a `route/switched` moves the next one (its turn reads it back
    /// when the step ended: the turn's later steps stay on it).
    pub(crate) route: RouteUse,
    scope: CancelScope,
    /// The attempt in progress (0 before the first).
    attempt: u32,
    /// `step/start` is written.
    started: bool,
    /// The text the attempt in progress streamed so far (its chunks, written).
    text: String,
    /// Its chunks streamed and not yet written.
    pending: PendingChunks,
    /// The tool calls of the successful attempt.
    calls: Vec<ToolCall>,
    /// The failure being offered to the waterfall.
    failure: Option<Box<Failure>>,
    /// The walk or the tool call in flight (its task reports back as a message).
    work: Option<JoinHandle<()>>,
    /// The span of the attempt in progress.
    span: tracing::Span,
    /// Set once the step ended: what its turn decides on.
    pub(crate) report: Option<StepOutcome>,
    /// Where it resumes, until it started.
    resume: Option<StepPoint>,
    _cancel_on_drop: DropGuard,
    _alive: Alive,
}

/// Why the step cannot go on (the runtime's own failure, not offered to the waterfall).
struct Fault(Failure);

impl StepState {
    fn cancelled(&self) -> bool {
        self.scope.is_cancelled()
    }

    fn at(&self) -> StepRef {
        StepRef { turn: self.ctx.turn, step: self.step }
    }

    /// Appends a batch; a refusal is the runtime's own failure.
    async fn append(&self, events: Vec<Event>) -> Result<(), Fault> {
        self.ctx.log.write(events).await.map(|_| ()).map_err(|error| {
            Fault(runtime_failure(format!("the session log refused an append: {error}")))
        })
    }

    /// Writes `batch` (the attempt's `request/start`) and builds the request of `attempt` from
    /// the durable history, read in the same operation of the log.
    async fn start_request(&self, attempt: u32, batch: Vec<Event>) -> Result<Request, Fault> {
        let (_, messages) = self
            .ctx
            .log
            .write_and_view::<HistoryProjection, _>(batch, HISTORY, |history| history.messages())
            .await
            .map_err(|error| {
                Fault(runtime_failure(format!("the session log refused an append: {error}")))
            })?;
        let messages = messages.map_err(|error| {
            Fault(runtime_failure(format!("the request could not be built: {error}")))
        })?;
        Ok(Request {
            session: self.ctx.session_id.to_string(),
            turn: self.ctx.turn,
            step: self.step,
            attempt,
            provider: self.route.name.clone(),
            model: self.route.model(),
            messages,
            tools: self.ctx.shared.tools.specs().to_vec(),
            generation: self.route.generation(&self.ctx.generation),
        })
    }

    fn payload(&self, failure: Failure) -> RequestErrorPayload {
        let shared = &self.ctx.shared;
        RequestErrorPayload {
            session: Arc::clone(&self.ctx.session_id),
            turn: self.ctx.turn,
            step: self.step,
            attempt: self.attempt,
            provider: self.route.name.clone(),
            failure,
            retry_policy: self.route.served.as_ref().map(|route| {
                RetryPolicy::effective(route.policy.as_ref(), shared.default_policy.as_ref())
            }),
            health: shared.health_report(),
            cancel: self.scope.token().clone(),
            log: self.ctx.log.clone(),
        }
    }

    /// The `tool/result` of call `index` (which exists).
    fn tool_result(&self, index: usize, output: String, is_error: bool) -> ToolResult {
        ToolResult {
            turn: self.ctx.turn,
            step: self.step,
            id: self.calls.get(index).map(|call| call.id.clone()).unwrap_or_default(),
            output,
            is_error,
        }
    }

    fn tool_call(&self, index: usize) -> Option<Event> {
        self.calls.get(index).map(|call| {
            Event::ToolCall(ToolCallEvent {
                turn: self.ctx.turn,
                step: self.step,
                id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            })
        })
    }
}

impl StepActor {
    /// Starts attempt `attempt`: the request from the durable history, `step/start` (first
    /// attempt) and `request/start`, then the call to the provider.
    async fn begin(
        &self,
        myself: &ActorRef<StepMsg>,
        state: &mut StepState,
        attempt: u32,
    ) -> Result<(), Fault> {
        if state.cancelled() {
            return Ok(());
        }
        state.attempt = attempt;
        state.text = String::new();
        state.pending = PendingChunks::default();
        let model = state.route.model();
        // A root span: the step's messages run inside the previous attempt's span.
        state.span = tracing::info_span!(
            parent: None,
            "attempt",
            session.id = %state.ctx.session_id,
            turn = state.ctx.turn,
            step = state.step,
            attempt,
            gen_ai.provider.name = %state.route.name,
            gen_ai.request.model = %model,
            error.r#type = tracing::field::Empty,
            route.health = tracing::field::Empty,
        );
        let mut batch = Vec::with_capacity(2);
        if !state.started {
            batch.push(Event::StepStart(state.at()));
        }
        let provider = state.route.name.clone();
        batch.push(Event::RequestStart(RequestStart {
            turn: state.ctx.turn,
            step: state.step,
            attempt,
            provider,
            model,
        }));
        let request = state.start_request(attempt, batch).await?;
        state.started = true;
        let Some(route) = state.route.served.clone() else {
            let message = format!("no provider route named {:?}", state.route.name);
            return self
                .failed(myself, state, Failure::internal(failure::NO_ADAPTER, message))
                .await;
        };
        let sink = {
            let (step, pending) = (myself.clone(), state.pending.clone());
            ChunkSink::new(move |text| {
                if pending.push(text) {
                    step.send_message(StepMsg::Chunks { attempt }).map_err(|_| SinkClosed)
                } else if step.get_status() >= ractor::ActorStatus::Stopping {
                    Err(SinkClosed)
                } else {
                    Ok(())
                }
            })
        };
        let reply = {
            let step = myself.clone();
            Box::new(move |result| {
                let _ = step.send_message(StepMsg::AttemptDone { attempt, result });
            })
        };
        let call =
            ProviderCall { request, chunks: sink, cancel: state.scope.token().clone(), reply };
        if route.actor.send_message(ProviderMsg::Call(call)).is_err() {
            let message = format!("provider route {:?} is stopped", route.name);
            return self
                .failed(myself, state, Failure::internal(failure::NO_ADAPTER, message))
                .await;
        }
        Ok(())
    }

    /// Before a retry: a `route/switched` written during the waterfall (after the failed
    /// attempt's `request/start`) sends the next attempt to its `to`.
    async fn follow_switch(&self, state: &mut StepState) -> Result<(), Fault> {
        let switched = state
            .ctx
            .log
            .view::<StepRouteProjection, _>(StepRouteProjection::KEY, |routes| {
                routes.switched_to().map(str::to_owned)
            })
            .await
            .map_err(|error| {
                Fault(runtime_failure(format!("the route switch could not be read: {error}")))
            })?;
        if let Some(to) = switched
            && to != state.route.name
        {
            state.route = state.ctx.shared.route(&to);
        }
        Ok(())
    }

    /// The chunks of the attempt in progress that arrived since the last batch: written as one.
    async fn chunks(&self, state: &mut StepState) -> Result<(), Fault> {
        let texts = state.pending.take();
        if texts.is_empty() {
            return Ok(());
        }
        let (turn, step, attempt) = (state.ctx.turn, state.step, state.attempt);
        let mut streamed = std::mem::take(&mut state.text);
        let events = texts
            .into_iter()
            .map(|text| {
                streamed.push_str(&text);
                Event::AssistantChunk(AssistantChunk { turn, step, attempt, text })
            })
            .collect();
        state.append(events).await?;
        state.text = streamed;
        Ok(())
    }

    /// The attempt failed: `request/error`, then the waterfall (a task of the step).
    async fn failed(
        &self,
        myself: &ActorRef<StepMsg>,
        state: &mut StepState,
        failure: Failure,
    ) -> Result<(), Fault> {
        state.span.record("error.type", failure.code());
        if let Some(health) = state.route.served.as_ref().and_then(|route| route.health.as_ref()) {
            // The breaker's state after this failure (`open` for a short-circuited attempt).
            state.span.record("route.health", health.snapshot().state.as_str());
        }
        let error = RequestError {
            turn: state.ctx.turn,
            step: state.step,
            attempt: state.attempt,
            provider: state.route.name.clone(),
            failure: failure.clone(),
        };
        state.append(vec![Event::RequestError(error)]).await?;
        self.offer(myself, state, failure);
        Ok(())
    }

    /// Offers the failure of the current attempt (its `request/error` is written) to the
    /// waterfall, as a task of the step; a failure the waterfall does not take ends the step.
    fn offer(&self, myself: &ActorRef<StepMsg>, state: &mut StepState, failure: Failure) {
        if !waterfall::offered(&failure, state.cancelled()) {
            self.finish(myself, state, StepOutcome::Failed(failure));
            return;
        }
        let walk = walk::run(&state.ctx.shared.chain, state.payload(failure.clone()));
        state.failure = Some(Box::new(failure));
        let (step, attempt) = (myself.clone(), state.attempt);
        let census = &state.ctx.shared.census;
        state.work = Some(census.spawn(async move {
            let resolution = walk.await;
            let _ = step.send_message(StepMsg::Resolved { attempt, resolution });
        }));
    }

    /// Continues a step a crash left open from `point` (its `step/start` is written; the turn's
    /// `turn/resumed` too): the rest of a retry wait then the next attempt, the cut attempt
    /// recorded failed and offered, the failure offered again, the tool calls from where they
    /// stood (a tool that was running gets an error result and is not run again), or the next
    /// attempt.
    async fn resume(
        &self,
        myself: &ActorRef<StepMsg>,
        state: &mut StepState,
        point: StepPoint,
    ) -> Result<(), Fault> {
        state.started = true;
        match point {
            StepPoint::Begin { attempt } => {
                self.follow_switch(state).await?;
                self.begin(myself, state, attempt).await
            }
            StepPoint::RetryWait { attempt, due_ms, started } => {
                let retried = attempt.saturating_sub(1);
                state.attempt = retried;
                let left =
                    Duration::from_millis(due_ms.saturating_sub(state.ctx.shared.clock.now_ms()));
                let token = state.scope.token().clone();
                let step = myself.clone();
                state.work = Some(state.ctx.shared.census.spawn(async move {
                    tokio::select! {
                        biased;
                        () = token.cancelled() => {}
                        () = tokio::time::sleep(left) => {
                            let _ = step.send_message(StepMsg::Waited { attempt: retried, started });
                        }
                    }
                }));
                Ok(())
            }
            StepPoint::Cut { attempt, failure } => {
                state.attempt = attempt;
                self.failed(myself, state, failure).await
            }
            StepPoint::Offer { attempt, failure } => {
                state.attempt = attempt;
                self.offer(myself, state, failure);
                Ok(())
            }
            StepPoint::Tools { calls, runs } => {
                state.calls = calls;
                // Unknown results for the calls that may have run, then the first call that
                // never ran (the rest follow it as in a live step), or the step's end.
                let mut batch = Vec::new();
                for (index, run) in runs.iter().enumerate() {
                    match run {
                        ToolRun::Answered => {}
                        ToolRun::Lost => {
                            let unknown = resume::OUTCOME_UNKNOWN.to_owned();
                            batch.push(Event::ToolResult(state.tool_result(index, unknown, true)));
                        }
                        ToolRun::NotRun => {
                            batch.extend(state.tool_call(index));
                            state.append(batch).await?;
                            self.run_tool(myself, state, index);
                            return Ok(());
                        }
                    }
                }
                batch.push(Event::StepEnd(state.at()));
                state.append(batch).await?;
                self.finish(myself, state, StepOutcome::ToolsRan);
                Ok(())
            }
        }
    }

    /// The attempt succeeded: `assistant/message`, then the first tool call, if any.
    async fn succeeded(
        &self,
        myself: &ActorRef<StepMsg>,
        state: &mut StepState,
        completion: Completion,
    ) -> Result<(), Fault> {
        let text = std::mem::take(&mut state.text);
        let message = agent_loop::assistant_message(state.ctx.turn, state.step, text, &completion);
        state.calls = completion.tool_calls;
        let mut batch = vec![Event::AssistantMessage(message)];
        batch.extend(state.tool_call(0));
        state.append(batch).await?;
        if state.calls.is_empty() {
            // The turn ends: the step/end goes with its closing events.
            self.finish(myself, state, StepOutcome::Completed);
        } else {
            self.run_tool(myself, state, 0);
        }
        Ok(())
    }

    /// Runs tool call `index` as a task that reports back; a name no tool has gets
    /// `Toolbox::unknown`, an error the model sees.
    fn run_tool(&self, myself: &ActorRef<StepMsg>, state: &mut StepState, index: usize) {
        let Some(call) = state.calls.get(index).cloned() else { return };
        let tools = &state.ctx.shared.tools;
        let tool = tools.get(&call.name).cloned().ok_or_else(|| tools.unknown(&call.name));
        let token = state.scope.token().clone();
        let step = myself.clone();
        state.work = Some(state.ctx.shared.census.spawn(async move {
            let result = match tool {
                Ok(tool) => call_tool(tool.as_ref(), &call, token).await,
                Err(unknown) => unknown,
            };
            let _ = step.send_message(StepMsg::ToolDone { index, result });
        }));
    }

    /// Tool call `index` ended: `tool/result`, then the next call (in the same batch) or the
    /// step's end.
    async fn tool_done(
        &self,
        myself: &ActorRef<StepMsg>,
        state: &mut StepState,
        index: usize,
        result: ToolOutcome,
    ) -> Result<(), Fault> {
        let Some(call) = state.calls.get(index) else { return Ok(()) };
        let (output, is_error) = match &result {
            ToolOutcome::Output(text) => (text.clone(), false),
            ToolOutcome::Error(error) | ToolOutcome::Failure(error) => (error.clone(), true),
        };
        let name = call.name.clone();
        let mut batch = vec![Event::ToolResult(state.tool_result(index, output, is_error))];
        if let ToolOutcome::Failure(error) = result {
            state.append(batch).await?;
            let failure = Failure::internal(TOOL_ERROR, format!("tool {name}: {error}"));
            self.finish(myself, state, StepOutcome::Failed(failure));
            return Ok(());
        }
        match state.tool_call(index + 1) {
            Some(next) => {
                batch.push(next);
                state.append(batch).await?;
                self.run_tool(myself, state, index + 1);
            }
            None => {
                batch.push(Event::StepEnd(state.at()));
                state.append(batch).await?;
                self.finish(myself, state, StepOutcome::ToolsRan);
            }
        }
        Ok(())
    }

    /// The step ended: keep its outcome and stop (its turn reads it from the final state).
    fn finish(&self, myself: &ActorRef<StepMsg>, state: &mut StepState, outcome: StepOutcome) {
        state.report = Some(outcome);
        myself.stop(None);
    }

    /// One message (boxed by `handle`: only while it is handled is its state held).
    async fn message(
        &self,
        myself: &ActorRef<StepMsg>,
        message: StepMsg,
        state: &mut StepState,
    ) -> Result<(), Fault> {
        if state.cancelled() || state.report.is_some() {
            // Stopping: nothing more is written (the turn's closing events say how it ended).
            return Ok(());
        }
        state.ctx.shared.faults.at_step(state.ctx.turn, state.step);
        match message {
            StepMsg::Chunks { attempt } if attempt == state.attempt => self.chunks(state).await,
            StepMsg::AttemptDone { attempt, result } if attempt == state.attempt => match result {
                Ok(completion) => self.succeeded(myself, state, completion).await,
                Err(failure) => self.failed(myself, state, failure).await,
            },
            StepMsg::Resolved { attempt, resolution } if attempt == state.attempt => {
                state.work = None;
                let failure = state.failure.take();
                match (resolution, failure) {
                    (Resolution::Retry, _) => {
                        self.follow_switch(state).await?;
                        self.begin(myself, state, attempt + 1).await
                    }
                    (Resolution::Stop, Some(failure)) => {
                        self.finish(myself, state, StepOutcome::Failed(*failure));
                        Ok(())
                    }
                    // Aborted: the turn is being cancelled; its stop reaches this step next.
                    _ => Ok(()),
                }
            }
            StepMsg::Waited { attempt, started } if attempt == state.attempt => {
                // A resumed retry's wait is over: its start, then the next attempt.
                state.work = None;
                state.append(vec![Event::LlmRetryStarted(started)]).await?;
                self.follow_switch(state).await?;
                self.begin(myself, state, attempt + 1).await
            }
            StepMsg::ToolDone { index, result } => {
                state.work = None;
                self.tool_done(myself, state, index, result).await
            }
            // A message of an earlier attempt.
            _ => Ok(()),
        }
    }
}

/// Runs one tool call, racing the step's cancellation; a panic is a tool error.
async fn call_tool(
    tool: &dyn crate::tool::Tool,
    call: &ToolCall,
    token: tokio_util::sync::CancellationToken,
) -> ToolOutcome {
    let panicked = |panic: Box<dyn std::any::Any + Send>| {
        ToolOutcome::Failure(format!("panicked: {}", panic_message(panic.as_ref())))
    };
    let started = std::panic::catch_unwind(AssertUnwindSafe(|| {
        tool.call(call.arguments.clone(), token.clone())
    }));
    let future = match started {
        Ok(future) => AssertUnwindSafe(future).catch_unwind(),
        Err(panic) => return panicked(panic),
    };
    tokio::select! {
        biased;
        () = token.cancelled() => ToolOutcome::Failure("cancelled".to_owned()),
        outcome = future => match outcome {
            Ok(ToolOutcome::Error(error)) if error.is_empty() => ToolOutcome::Error("failed".into()),
            Ok(ToolOutcome::Failure(error)) if error.is_empty() => {
                ToolOutcome::Failure("failed".into())
            }
            Ok(outcome) => outcome,
            Err(panic) => panicked(panic),
        },
    }
}

impl Actor for StepActor {
    type Msg = StepMsg;
    type State = StepState;
    type Arguments = StepArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<StepMsg>,
        args: StepArgs,
    ) -> Result<StepState, ActorProcessingErr> {
        let StepArgs { ctx, step, route, scope, resume } = args;
        Ok(StepState {
            _alive: ctx.shared.census.enter(ActorKind::Step),
            _cancel_on_drop: scope.guard(),
            ctx,
            step,
            route,
            scope,
            attempt: 0,
            started: false,
            text: String::new(),
            pending: PendingChunks::default(),
            calls: Vec::new(),
            failure: None,
            work: None,
            span: tracing::Span::none(),
            report: None,
            resume,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<StepMsg>,
        state: &mut StepState,
    ) -> Result<(), ActorProcessingErr> {
        let started = match state.resume.take() {
            None => Box::pin(self.begin(&myself, state, 1)).await,
            Some(point) => Box::pin(self.resume(&myself, state, point)).await,
        };
        if let Err(Fault(failure)) = started {
            self.finish(&myself, state, StepOutcome::Failed(failure));
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<StepMsg>,
        message: StepMsg,
        state: &mut StepState,
    ) -> Result<(), ActorProcessingErr> {
        let span = state.span.clone();
        if let Err(Fault(failure)) =
            Box::pin(self.message(&myself, message, state)).instrument(span).await
            && !state.cancelled()
        {
            self.finish(&myself, state, StepOutcome::Failed(failure));
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<StepMsg>,
        state: &mut StepState,
    ) -> Result<(), ActorProcessingErr> {
        // Whatever ends the step, its waits end with it, and settle before it is gone.
        state.scope.cancel(crate::event::CancelCause::Parent);
        if let Some(work) = state.work.take() {
            let _ = work.await;
        }
        Ok(())
    }
}
