//! The floor of the `agents` metric: the `agents` workload (`agents_workload`) as a hand-rolled
//! tokio loop — one task per agent, no actor, no store — writing the same events, in the same
//! batches, to the same files (`<dir>/<session>.jsonl`, one line per event).
//!
//! It is what a user writing it by hand would write: the driver opens each agent's file (and
//! writes its `session/start`) one after another, spawns the agent's task and cancels one in
//! ten right away; each task owns its file and writes each batch with one `write`, calls the
//! provider, retries with [`backon`]'s exponential backoff (the workload's delays; llm-retry's
//! two transient retries, then auto-retry's two, logged as `llm/retry` and
//! `llm/retry-started`), runs `echo` itself, and races every wait against its cancellation
//! token.
//!
//! [`Writes`] says how a batch is written: [`Writes::Std`] (the floor) writes from the task —
//! a write to the page cache, acknowledged at `Os` durability like rein's, with no thread
//! hand-off; [`Writes::TokioFs`] (for the record) goes through `tokio::fs`, whose every write
//! and flush is a hop to tokio's blocking pool, as a user reaching for tokio's file API gets.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rein::runtime::clock::{Clock as _, WallClock};
use rein::runtime::event::{
    AgentIdle, AssistantChunk, AssistantMessage, CancelCause, Envelope, Event, LOG_FORMAT,
    LlmRetryStarted, RequestError, RequestStart, SessionStart, StepRef, ToolCallEvent, ToolResult,
    TurnEnd, TurnEndReason, TurnStart, UserMessage,
};
use rein::runtime::provider::{Adapter, ChunkSink, Messages, Request};
use tokio_util::sync::CancellationToken;

use crate::agents::Side;
use crate::agents_workload::{
    AgentsProvider, CANCELLED, PROMPT, ROUTE, backoff, jittered, retry_event, session_id,
};
use crate::cpu::process_seconds;
use crate::heap::allocations;

/// How the loop writes a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writes {
    /// `std::fs::File::write_all` from the agent's task.
    Std,
    /// `tokio::fs::File::write_all` then `flush` (the bytes handed to the OS before it goes on).
    TokioFs,
}

/// Runs `agents` agents in `dir`; the measurement.
pub(crate) async fn run(dir: &Path, agents: usize, writes: Writes) -> anyhow::Result<Side> {
    let (cpu, allocs, started) = (process_seconds(), allocations(), Instant::now());
    let ran = agents_in(dir, agents, writes).await?;
    let reasons = ran.reasons;
    let side = Side {
        elapsed: started.elapsed(),
        started: ran.all_started,
        opening: ran.opening,
        cancelling: ran.cancelling,
        cpu_seconds: process_seconds() - cpu,
        allocations: allocations() - allocs,
    };
    for (i, reason) in reasons.iter().enumerate() {
        let expected = match i % CANCELLED {
            0 => matches!(reason, TurnEndReason::Aborted { .. }),
            _ => *reason == TurnEndReason::Completed,
        };
        anyhow::ensure!(expected, "hand-rolled agent {i} ended {reason:?}");
    }
    Ok(side)
}

/// Runs `agents` agents in `dir`; how many appends each session made.
pub(crate) async fn appends(
    dir: &Path,
    agents: usize,
    writes: Writes,
) -> anyhow::Result<BTreeMap<String, usize>> {
    let appends = agents_in(dir, agents, writes).await?.appends;
    Ok((0..agents).map(session_id).zip(appends).collect())
}

/// The log of `session` in `dir`.
pub(crate) fn read(dir: &Path, session: &str) -> anyhow::Result<Vec<Envelope>> {
    let text = std::fs::read_to_string(dir.join(format!("{session}.jsonl")))?;
    text.lines().map(|line| Ok(serde_json::from_str(line)?)).collect()
}

/// How many lines the logs in `dir` hold.
pub(crate) fn lines(dir: &Path) -> anyhow::Result<usize> {
    let mut lines = 0;
    for entry in std::fs::read_dir(dir)? {
        lines += std::fs::read(entry?.path())?.iter().filter(|b| **b == b'\n').count();
    }
    Ok(lines)
}

/// What a run of the agents did.
struct Ran {
    /// How each agent's turn ended, in agent order.
    reasons: Vec<TurnEndReason>,
    /// How many appends each agent's log made, in agent order.
    appends: Vec<usize>,
    /// From the start until the last agent was started.
    all_started: Duration,
    /// Opening the agents' logs (file and `session/start`), in all.
    opening: Duration,
    /// Cancelling the agents cancelled right after their start, in all.
    cancelling: Duration,
}

/// Runs the agents.
async fn agents_in(dir: &Path, agents: usize, writes: Writes) -> anyhow::Result<Ran> {
    let provider: Arc<dyn Adapter> = Arc::new(AgentsProvider::new()?);
    let (started, mut opening, mut cancelling) = (Instant::now(), Duration::ZERO, Duration::ZERO);
    let mut tasks = Vec::with_capacity(agents);
    for i in 0..agents {
        let id = session_id(i);
        let open = Instant::now();
        let mut log = Log::create(dir, &id, writes).await?;
        let start = SessionStart { session: id, format: LOG_FORMAT };
        log.append(vec![Event::SessionStart(start)]).await?;
        opening += open.elapsed();
        let cancel = CancellationToken::new();
        tasks.push(tokio::spawn(agent(log, Arc::clone(&provider), cancel.clone())));
        if i % CANCELLED == 0 {
            let at = Instant::now();
            cancel.cancel();
            cancelling += at.elapsed();
        }
    }
    let all_started = started.elapsed();
    let (mut reasons, mut appends) = (Vec::with_capacity(agents), Vec::with_capacity(agents));
    for task in tasks {
        let (reason, n) = task.await??;
        reasons.push(reason);
        appends.push(n);
    }
    Ok(Ran { reasons, appends, all_started, opening, cancelling })
}

/// A log file, written one way or the other.
enum LogFile {
    Std(File),
    TokioFs(tokio::fs::File),
}

/// One session's file, its next `seq`, and how many appends it made.
struct Log {
    file: LogFile,
    id: String,
    next_seq: u64,
    appends: usize,
    buffer: Vec<u8>,
}

impl Log {
    async fn create(dir: &Path, id: &str, writes: Writes) -> anyhow::Result<Self> {
        let path = dir.join(format!("{id}.jsonl"));
        let file = match writes {
            Writes::Std => {
                LogFile::Std(OpenOptions::new().create_new(true).append(true).open(path)?)
            }
            Writes::TokioFs => LogFile::TokioFs(
                tokio::fs::OpenOptions::new().create_new(true).append(true).open(path).await?,
            ),
        };
        Ok(Self { file, id: id.to_owned(), next_seq: 0, appends: 0, buffer: Vec::new() })
    }

    /// Writes `events` stamped with `seq` and `time`, one line each, with one `write`.
    async fn append(&mut self, events: Vec<Event>) -> anyhow::Result<()> {
        let time = WallClock.now_ms();
        self.buffer.clear();
        for event in events {
            let envelope = Envelope { seq: self.next_seq, time, event };
            serde_json::to_writer(&mut self.buffer, &envelope)?;
            self.buffer.push(b'\n');
            self.next_seq += 1;
        }
        match &mut self.file {
            LogFile::Std(file) => file.write_all(&self.buffer)?,
            LogFile::TokioFs(file) => {
                use tokio::io::AsyncWriteExt as _;
                file.write_all(&self.buffer).await?;
                file.flush().await?;
            }
        }
        self.appends += 1;
        Ok(())
    }
}

/// One retry chain of a step: its id and how many retries it made.
struct Chain {
    id: String,
    retries: u64,
}

/// One agent's turn; how it ended and how many appends its log made.
async fn agent(
    mut log: Log,
    provider: Arc<dyn Adapter>,
    cancel: CancellationToken,
) -> anyhow::Result<(TurnEndReason, usize)> {
    let turn = 1;
    log.append(vec![
        Event::UserMessage(UserMessage { text: PROMPT.to_owned() }),
        Event::TurnStart(TurnStart { turn }),
    ])
    .await?;
    let mut open: Option<StepRef> = None;
    let reason = 'turn: {
        for step in 1.. {
            let at = StepRef { turn, step };
            let mut delays = backoff();
            let mut chain: Option<Chain> = None;
            let mut attempt = 1;
            let completion = loop {
                if cancel.is_cancelled() {
                    break 'turn aborted();
                }
                let mut batch = Vec::with_capacity(2);
                if open.is_none() {
                    batch.push(Event::StepStart(at));
                    open = Some(at);
                }
                let (provider_name, model) = (ROUTE.0.to_owned(), ROUTE.1.to_owned());
                let start = RequestStart { turn, step, attempt, provider: provider_name, model };
                batch.push(Event::RequestStart(start));
                log.append(batch).await?;
                let request = Request {
                    session: log.id.clone(),
                    turn,
                    step,
                    attempt,
                    provider: ROUTE.0.to_owned(),
                    model: ROUTE.1.to_owned(),
                    messages: Messages::new(),
                    tools: Vec::new(),
                    generation: Default::default(),
                };
                let (sink, mut chunks) = ChunkSink::channel();
                let result = tokio::select! {
                    biased;
                    () = cancel.cancelled() => break 'turn aborted(),
                    result = provider.call(request, sink) => result,
                };
                let mut text = String::new();
                while let Ok(chunk) = chunks.try_recv() {
                    let event = AssistantChunk { turn, step, attempt, text: chunk.clone() };
                    log.append(vec![Event::AssistantChunk(event)]).await?;
                    text.push_str(&chunk);
                }
                match result {
                    Ok(completion) => break (text, completion),
                    Err(failure) => {
                        let provider = ROUTE.0.to_owned();
                        let error = RequestError {
                            turn,
                            step,
                            attempt,
                            provider,
                            failure: failure.clone(),
                        };
                        log.append(vec![Event::RequestError(error)]).await?;
                        let Some(delay) = delays.next() else {
                            break 'turn TurnEndReason::Error { failure };
                        };
                        let delay = jittered(delay);
                        let chain = chain.get_or_insert_with(|| Chain {
                            id: uuid::Uuid::new_v4().to_string(),
                            retries: 0,
                        });
                        chain.retries += 1;
                        let retry = retry_event(&chain.id, chain.retries, at, delay, failure);
                        log.append(vec![Event::LlmRetry(retry)]).await?;
                        tokio::select! {
                            biased;
                            () = cancel.cancelled() => break 'turn aborted(),
                            () = tokio::time::sleep(delay) => {}
                        }
                        let started = LlmRetryStarted {
                            retry_id: chain.id.clone(),
                            turn,
                            step,
                            retry: chain.retries,
                        };
                        log.append(vec![Event::LlmRetryStarted(started)]).await?;
                        attempt += 1;
                    }
                }
            };
            let (text, completion) = completion;
            let calls = completion.tool_calls;
            let message = AssistantMessage {
                turn,
                step,
                text,
                tool_calls: (!calls.is_empty()).then(|| calls.clone()),
                usage: completion.usage,
            };
            let Some(call) = calls.first() else {
                log.append(vec![Event::AssistantMessage(message)]).await?;
                break 'turn TurnEndReason::Completed;
            };
            let tool_call = ToolCallEvent {
                turn,
                step,
                id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            };
            log.append(vec![Event::AssistantMessage(message), Event::ToolCall(tool_call)]).await?;
            let output = call.arguments["text"].as_str().unwrap_or_default().to_owned();
            let result = ToolResult { turn, step, id: call.id.clone(), output, is_error: false };
            log.append(vec![Event::ToolResult(result), Event::StepEnd(at)]).await?;
            open = None;
        }
        TurnEndReason::Completed
    };
    let mut closing = Vec::with_capacity(3);
    closing.extend(open.map(Event::StepEnd));
    closing.push(Event::TurnEnd(TurnEnd { turn, reason: reason.clone() }));
    closing.push(Event::AgentIdle(AgentIdle {}));
    log.append(closing).await?;
    Ok((reason, log.appends))
}

fn aborted() -> TurnEndReason {
    TurnEndReason::Aborted { cause: CancelCause::User }
}
