//! One step of a turn — request, attempts, waterfall, tools — run by the turn's task.
//!
//! [`run`] runs the step as one procedure:
//!
//! 1. read the model-visible history from the log (the `history` projection) and build the
//!    request; write `step/start` (first attempt) and `request/start`;
//! 2. send the attempt to the route's provider actor; write each streamed chunk as
//!    `assistant/chunk` as it arrives;
//! 3. on success write `assistant/message` — built only from *this* attempt's chunks — then, per
//!    tool call, `tool/call`, the tool's run, `tool/result`; then `step/end`;
//! 4. on failure write `request/error` and offer the failure to the waterfall with the route's
//!    effective retry policy; `Retry` starts a new attempt at 1. (the request is rebuilt from the
//!    durable log, so it equals the failed one), `Stop` ends the step with the failure.
//!
//! Cancellation is checked before every write and raced by every wait (the provider, a tool,
//! the waterfall): once the turn's token fired, the step writes nothing but its `step/end`.
//!
//! # Why the request is rebuilt from the log on every attempt
//!
//! SPEC §4 rule 2: a retry's request is built from the durable log. Between two attempts plugins
//! may have appended (`llm/retry`, `context/compacted`): rebuilding from the `history`
//! projection takes compaction into account and, because failed chunks and retry events never
//! enter the history, gives a retry exactly the failed attempt's messages otherwise.
//!
//! # Why a step is a stage of the turn's task, and still a unit of supervision
//!
//! A step used to be an actor of its own; it never received a message (it ran one procedure and
//! reported its outcome), so its mailbox — two channels ractor allocates eagerly, ≈ 6 KiB with
//! its task — was pure cost for every turn parked in a retry wait (DESIGN §6 budgets 24 KiB for
//! the whole turn). The step now runs inline in its turn's task, and keeps what being an actor
//! gave it: its panic is caught at the step's boundary ([`run`]), the open `step/end` is
//! written, and the turn ends with the runtime's failure (or `aborted`, if it was cancelled),
//! exactly as when the turn actor supervised a crashed step actor.
//!
//! # Why the rarely awaited stages are boxed
//!
//! A future is as large as its largest state. The state a step spends its long waits in is the
//! waterfall (a plugin's backoff); streaming an attempt, building a request and running tools
//! are short. Each of those is boxed while it runs, so a turn parked in a retry wait carries only
//! the waterfall's small state, not the largest stage's.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::FutureExt;
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;

use crate::agent_loop::{self, StepOutcome};
use crate::crash::panic_message;
use crate::event::{
    AssistantChunk, Event, RequestError, RequestStart, StepRef, ToolCall, ToolCallEvent, ToolResult,
};
use crate::failure::{self, Failure};
use crate::history::{HISTORY, HistoryProjection};
use crate::plugin::RequestErrorPayload;
use crate::provider::actor::{AttemptResult, ProviderCall, ProviderMsg};
use crate::provider::{Completion, Request};
use crate::retry_policy::RetryPolicy;
use crate::runtime::Route;
use crate::session::actor::runtime_failure;
use crate::store::BoxFuture;
use crate::tool::TOOL_ERROR;
use crate::turn::TurnArgs;
use crate::waterfall::{self, Outcome};

/// Runs step `step` of a turn and returns how it ended (its `step/end` written, if it started).
///
/// A panic in the step's code is caught here: the step is closed (`step/end`, if the log shows
/// it open) and it ends `Failed` with the runtime's failure, which the turn turns into
/// `turn/end {error}` — or `aborted`, if the turn was cancelled.
pub(crate) async fn run(turn: &TurnArgs, step: u32) -> Ended {
    let span = tracing::info_span!("step", session.id = %turn.session_id, turn = turn.turn, step);
    let mut running = Step::new(turn, step);
    let ran = AssertUnwindSafe(running.run()).catch_unwind().instrument(span).await;
    match ran {
        Ok(outcome) => {
            let end =
                running.end_left.load(Ordering::Relaxed).then(|| Event::StepEnd(running.at()));
            Ended { outcome, end }
        }
        Err(panic) => {
            let error = panic_message(panic.as_ref());
            tracing::error!(session.id = %turn.session_id, turn = turn.turn, step, %error, "a step crashed");
            let at = StepRef { turn: turn.turn, step };
            if turn.log.open_turn().await.ok().and_then(|open| open.step) == Some(step) {
                let _ = turn.log.append(vec![Event::StepEnd(at)]).await;
            }
            let failure = runtime_failure(format!("step {step} crashed: {error}"));
            Ended { outcome: StepOutcome::Failed(failure), end: None }
        }
    }
}

/// How a step ended, and its `step/end` if the step left it to the turn.
///
/// # Why a cancelled step leaves its `step/end` to the turn
///
/// A cancelled step always ends its turn, and the turn's next write is `turn/end`. Writing the
/// two as one batch is one log round trip instead of two for every aborted turn — the bulk of
/// a mass cancel (DESIGN §6) — and the log reads exactly as before: `step/end`, `turn/end`.
pub(crate) struct Ended {
    /// How the step ended.
    pub(crate) outcome: StepOutcome,
    /// The step's `step/end`, not yet written: the turn writes it first thing.
    pub(crate) end: Option<Event>,
}

/// A running step: its turn, its number, and whether its `step/start` is written.
struct Step<'a> {
    a: &'a TurnArgs,
    step: u32,
    route: Option<Arc<Route>>,
    started: bool,
    /// The step was cancelled after its `step/start`: its `step/end` is left to the turn.
    end_left: AtomicBool,
}

/// Why the step cannot go on (the runtime's own failure, not offered to the waterfall).
struct Fault(Failure);

impl<'a> Step<'a> {
    fn new(a: &'a TurnArgs, step: u32) -> Self {
        Self {
            a,
            step,
            route: a.shared.routes.get(&a.route).cloned(),
            started: false,
            end_left: AtomicBool::new(false),
        }
    }

    fn cancelled(&self) -> bool {
        self.a.scope.is_cancelled()
    }

    fn at(&self) -> StepRef {
        StepRef { turn: self.a.turn, step: self.step }
    }

    /// Appends a batch (boxed: awaited from most states of [`Step::attempts`]).
    fn append(&self, events: Vec<Event>) -> BoxFuture<'_, Result<(), Fault>> {
        Box::pin(async move {
            self.a.log.append(events).await.map(|_| ()).map_err(|error| {
                Fault(runtime_failure(format!("the session log refused an append: {error}")))
            })
        })
    }

    /// Ends the step: `step/end` (if it started; a cancelled step leaves it to the turn's closing
    /// batch, see [`Ended`]), and the outcome. Boxed, like the other short
    /// stages (see the module docs): it is awaited from several states of [`Step::attempts`].
    fn close(&self, outcome: StepOutcome) -> BoxFuture<'_, StepOutcome> {
        Box::pin(async move {
            if self.started && outcome == StepOutcome::Aborted {
                self.end_left.store(true, Ordering::Relaxed);
                return outcome;
            }
            if self.started {
                if let Err(Fault(failure)) = self.append(vec![Event::StepEnd(self.at())]).await {
                    return StepOutcome::Failed(failure);
                }
            }
            outcome
        })
    }

    async fn run(&mut self) -> StepOutcome {
        match self.attempts().await {
            Ok(outcome) => outcome,
            Err(Fault(failure)) => {
                if self.cancelled() {
                    self.close(StepOutcome::Aborted).await
                } else {
                    self.close(StepOutcome::Failed(failure)).await
                }
            }
        }
    }

    async fn attempts(&mut self) -> Result<StepOutcome, Fault> {
        let mut attempt = 1;
        loop {
            if self.cancelled() {
                return Ok(self.close(StepOutcome::Aborted).await);
            }
            let request = Box::pin(self.begin(attempt)).await?;
            let span = tracing::info_span!(
                "attempt",
                attempt,
                gen_ai.provider.name = %self.a.route,
                gen_ai.request.model = %request.model,
                error.r#type = tracing::field::Empty,
            );
            let result = Box::pin(self.attempt(request, attempt).instrument(span.clone())).await?;
            let failure = match result {
                Ok((chunks, completion)) => {
                    return Box::pin(self.succeeded(&chunks, &completion)).await;
                }
                Err(failure) => failure,
            };
            span.record("error.type", failure.code());
            if self.cancelled() {
                return Ok(self.close(StepOutcome::Aborted).await);
            }
            let error = RequestError {
                turn: self.a.turn,
                step: self.step,
                attempt,
                provider: self.a.route.clone(),
                failure: failure.clone(),
            };
            self.append(vec![Event::RequestError(error)]).await?;
            if !waterfall::offered(&failure, false) {
                return Ok(self.close(StepOutcome::Failed(failure)).await);
            }
            match waterfall::run(&self.a.shared.chain, self.payload(attempt, failure.clone())).await
            {
                Outcome::Retry => attempt += 1,
                Outcome::Stop => return Ok(self.close(StepOutcome::Failed(failure)).await),
                Outcome::Aborted => return Ok(self.close(StepOutcome::Aborted).await),
            }
        }
    }

    /// Starts `attempt`: builds its request from the durable history, then writes `step/start`
    /// (before the first attempt) and `request/start`.
    async fn begin(&mut self, attempt: u32) -> Result<Request, Fault> {
        let request = self.request(attempt).await?;
        let (provider, model) = match &self.route {
            Some(route) => (route.name.clone(), route.model.clone()),
            None => (self.a.route.clone(), String::new()),
        };
        let mut batch = Vec::with_capacity(2);
        if !self.started {
            batch.push(Event::StepStart(self.at()));
        }
        let start = RequestStart { turn: self.a.turn, step: self.step, attempt, provider, model };
        batch.push(Event::RequestStart(start));
        self.append(batch).await?;
        self.started = true;
        Ok(request)
    }

    /// The request of `attempt`, from the durable history.
    async fn request(&self, attempt: u32) -> Result<Request, Fault> {
        // Only the messages are cloned out of the log, not the history they come from.
        let messages = self
            .a
            .log
            .view::<HistoryProjection, _>(HISTORY, |history| history.messages())
            .await
            .map_err(|error| {
                Fault(runtime_failure(format!("the request could not be built: {error}")))
            })?;
        Ok(Request {
            session: self.a.session_id.to_string(),
            turn: self.a.turn,
            step: self.step,
            attempt,
            provider: self.a.route.clone(),
            model: self.route.as_ref().map(|r| r.model.clone()).unwrap_or_default(),
            messages,
            tools: self.a.shared.tools.specs().to_vec(),
        })
    }

    fn payload(&self, attempt: u32, failure: Failure) -> RequestErrorPayload {
        let shared = &self.a.shared;
        RequestErrorPayload {
            session: Arc::clone(&self.a.session_id),
            turn: self.a.turn,
            step: self.step,
            attempt,
            provider: self.a.route.clone(),
            failure,
            retry_policy: self.route.as_ref().map(|route| {
                RetryPolicy::effective(route.policy.as_ref(), shared.default_policy.as_ref())
            }),
            cancel: self.a.scope.token().clone(),
            log: self.a.log.clone(),
        }
    }

    /// Runs one attempt: streams its chunks into the log, returns them with the outcome.
    async fn attempt(
        &self,
        request: Request,
        attempt: u32,
    ) -> Result<Result<(Vec<String>, Completion), Failure>, Fault> {
        let Some(route) = &self.route else {
            let message = format!("no provider route named {:?}", self.a.route);
            return Ok(Err(
                Failure::new(failure::NO_ADAPTER, message).unwrap_or_else(|_| Failure::aborted())
            ));
        };
        let (chunk_tx, mut chunk_rx) = mpsc::unbounded_channel();
        let (reply, mut outcome) = oneshot::channel::<AttemptResult>();
        let call =
            ProviderCall { request, chunks: chunk_tx, cancel: self.a.scope.token().clone(), reply };
        if route.actor.send_message(ProviderMsg::Call(call)).is_err() {
            let message = format!("provider route {:?} is stopped", route.name);
            return Ok(Err(
                Failure::new(failure::NO_ADAPTER, message).unwrap_or_else(|_| Failure::aborted())
            ));
        }
        let mut chunks = Vec::new();
        let result = loop {
            tokio::select! {
                biased;
                Some(chunk) = chunk_rx.recv() => {
                    let mut batch = vec![chunk];
                    while let Ok(more) = chunk_rx.try_recv() {
                        batch.push(more);
                    }
                    self.record_chunks(attempt, &batch).await?;
                    chunks.extend(batch);
                }
                result = &mut outcome => break result,
            }
        };
        // Chunks streamed before the outcome and not yet read.
        let mut rest = Vec::new();
        while let Ok(more) = chunk_rx.try_recv() {
            rest.push(more);
        }
        if !rest.is_empty() {
            self.record_chunks(attempt, &rest).await?;
            chunks.extend(rest);
        }
        let result = result.unwrap_or_else(|_| {
            Err(Failure::new(failure::UNKNOWN, "the provider dropped the attempt")
                .unwrap_or_else(|_| Failure::aborted()))
        });
        Ok(result.map(|completion| (chunks, completion)))
    }

    async fn record_chunks(&self, attempt: u32, chunks: &[String]) -> Result<(), Fault> {
        if self.cancelled() {
            return Ok(());
        }
        let events = chunks
            .iter()
            .map(|text| {
                Event::AssistantChunk(AssistantChunk {
                    turn: self.a.turn,
                    step: self.step,
                    attempt,
                    text: text.clone(),
                })
            })
            .collect();
        self.append(events).await
    }

    /// A successful attempt: the message, then each tool call and its result.
    async fn succeeded(
        &self,
        chunks: &[String],
        completion: &Completion,
    ) -> Result<StepOutcome, Fault> {
        if self.cancelled() {
            return Ok(self.close(StepOutcome::Aborted).await);
        }
        let message = agent_loop::assistant_message(self.a.turn, self.step, chunks, completion);
        let mut batch = vec![Event::AssistantMessage(message)];
        let calls = &completion.tool_calls;
        if calls.is_empty() {
            batch.push(Event::StepEnd(self.at()));
            self.append(batch).await?;
            return Ok(StepOutcome::Completed);
        }
        for call in calls {
            batch.push(Event::ToolCall(ToolCallEvent {
                turn: self.a.turn,
                step: self.step,
                id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            }));
            self.append(std::mem::take(&mut batch)).await?;
            let output = self.call_tool(call).await;
            if self.cancelled() {
                return Ok(self.close(StepOutcome::Aborted).await);
            }
            let (text, is_error) = match &output {
                Ok(text) => (text.clone(), false),
                Err(error) => (error.clone(), true),
            };
            let result = ToolResult {
                turn: self.a.turn,
                step: self.step,
                id: call.id.clone(),
                output: text,
                is_error,
            };
            self.append(vec![Event::ToolResult(result)]).await?;
            if let Err(error) = output {
                let failure = Failure::new(TOOL_ERROR, format!("tool {}: {error}", call.name))
                    .unwrap_or_else(|_| Failure::aborted());
                return Ok(self.close(StepOutcome::Failed(failure)).await);
            }
        }
        self.append(vec![Event::StepEnd(self.at())]).await?;
        Ok(StepOutcome::ToolsRan)
    }

    /// Runs one tool call, racing the turn's cancellation; a panic is a tool error.
    async fn call_tool(&self, call: &ToolCall) -> Result<String, String> {
        let Some(tool) = self.a.shared.tools.get(&call.name) else {
            return Err(format!("no tool named {:?}", call.name));
        };
        let token = self.a.scope.token().clone();
        let started = std::panic::catch_unwind(AssertUnwindSafe(|| {
            tool.call(call.arguments.clone(), token.clone())
        }));
        let future = match started {
            Ok(future) => AssertUnwindSafe(future).catch_unwind(),
            Err(panic) => return Err(format!("panicked: {}", panic_message(panic.as_ref()))),
        };
        tokio::select! {
            biased;
            () = token.cancelled() => Err("cancelled".to_owned()),
            outcome = future => match outcome {
                Ok(Ok(output)) => Ok(output),
                Ok(Err(error)) if error.is_empty() => Err("failed".to_owned()),
                Ok(Err(error)) => Err(error),
                Err(panic) => Err(format!("panicked: {}", panic_message(panic.as_ref()))),
            },
        }
    }
}
