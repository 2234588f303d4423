//! The floor of the `stress` metrics: the `rein stress` workload (less its plugin chaos) as a
//! hand-rolled tokio + [`backon`] loop — one task per agent, no actor, each agent's log a `Vec`
//! of the events rein would write for the same turn.
//!
//! An agent runs its turns one after another, as a stress agent does: each turn's plan (cancel
//! or not, and when) is drawn from the same seeded stream (`rein_cli::stress::plan`), so both sides
//! cancel the same turns at the same moments. A turn appends `user/message` + `turn/start`, then
//! per attempt `step/start` + `request/start`, calls the same simulated provider
//! (`StressConfig::simulated`) and appends each chunk as it arrives; a failure appends
//! `request/error`, and the retry waits backon's exponential backoff (the stress run's: from the
//! backoff doubling to 20 ×, llm-retry's two retries and auto-retry's two) or the provider's
//! `Retry-After` when it is within the ceiling, appending `llm/retry` and then
//! `llm/retry-started` with the next `request/start`. Success appends `assistant/message`. The
//! turn ends with `step/end` + `turn/end` + `agent/idle`. Every wait races the turn's
//! cancellation token; the cancel's latency is measured from `cancel()` to the closing events
//! being in the log, as rein's is to its closing events being durable.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use backon::{BackoffBuilder as _, ExponentialBuilder};
use rein::providers::Simulated;
use rein::runtime::clock::{Clock as _, WallClock};
use rein::runtime::event::{
    AgentIdle, AssistantChunk, AssistantMessage, CancelCause, Envelope, Event, LOG_FORMAT,
    LlmRetry, LlmRetryStarted, RequestError, RequestStart, SessionStart, StepRef, TurnEnd,
    TurnEndReason, TurnStart, UserMessage,
};
use rein::runtime::failure::Failure;
use rein::runtime::provider::{Adapter, ChunkSink, Message, Messages, Request};
use rein_cli::stress::StressConfig;
use rein_cli::stress::plan::{self, Rates};
use rein_cli::stress::summary::{Latencies, outcome_kind};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::child::{self, Run};
use crate::cpu::process_seconds;

/// The policy key the `llm/retry` lines carry (llm-retry's, as rein writes it).
const POLICY_KEY: &str = r#"["normal",2,["RATE_LIMIT","SERVER","TIMEOUT","TRANSPORT"],5,100,0.1]"#;

/// The route the requests name.
const ROUTE: &str = "simulated";

/// What every agent shares.
struct Shared {
    provider: Arc<dyn Adapter>,
    model: String,
    seed: u64,
    turns: u32,
    rates: Rates,
    cancel_window: Duration,
    /// The backoff's first delay and its ceiling.
    backoff: (Duration, Duration),
}

/// What one agent did.
#[derive(Default)]
struct AgentReport {
    log: Vec<Envelope>,
    latencies: Vec<Duration>,
    ends: BTreeMap<&'static str, u64>,
}

/// Runs the workload of `config` (its plugin chaos left out) and measures it.
pub(crate) async fn run(config: &StressConfig) -> anyhow::Result<Run> {
    let simulated = Simulated::new(config.simulated())?;
    let backoff = Duration::from_millis(config.backoff_ms);
    let shared = Arc::new(Shared {
        model: simulated.model().to_owned(),
        provider: Arc::new(simulated),
        seed: config.seed,
        turns: config.turns,
        rates: config.rates,
        cancel_window: plan::cancel_window(Duration::from_millis(config.latency_ms), backoff),
        backoff: (backoff, backoff * 20),
    });
    let (rss_before_kib, _) = child::rss_kib();
    let (cpu, started) = (process_seconds(), Instant::now());
    let mut agents = JoinSet::new();
    for index in 0..config.agents {
        agents.spawn(agent(Arc::clone(&shared), index));
    }
    let mut reports = Vec::with_capacity(config.agents);
    while let Some(report) = agents.join_next().await {
        reports.push(report??);
    }
    let (elapsed, cpu) = (started.elapsed(), process_seconds() - cpu);
    // Every log is still held (as a store holds them): the peak includes them.
    let (_, peak_rss_kib) = child::rss_kib();

    let mut latencies = Latencies::default();
    let mut ends = BTreeMap::new();
    for report in &reports {
        report.latencies.iter().for_each(|latency| latencies.record(*latency));
        for (kind, n) in &report.ends {
            *ends.entry((*kind).to_owned()).or_default() += n;
        }
    }
    let latency = latencies.summary();
    Ok(Run {
        turns: ends.values().sum(),
        ends,
        events: reports.iter().map(|r| r.log.len() as u64).sum(),
        elapsed_s: elapsed.as_secs_f64(),
        cpu_s: cpu,
        cancels: latency.samples,
        cancel_p50_ms: latency.p50_ms,
        cancel_p99_ms: latency.p99_ms,
        rss_before_kib,
        peak_rss_kib,
        allocations: 0,
        failures: Vec::new(),
    })
}

/// Agent `index`: its turns one after another, each cancelled as its plan says.
async fn agent(shared: Arc<Shared>, index: usize) -> anyhow::Result<AgentReport> {
    let session = format!("agent-{index:05}");
    let mut log = Log { session, events: Vec::new(), history: Messages::new() };
    let start = SessionStart { session: log.session.clone(), format: LOG_FORMAT };
    log.append(vec![Event::SessionStart(start)]);
    let mut report = AgentReport::default();
    let mut rng = plan::agent_rng(shared.seed, index);
    for turn in 1..=shared.turns {
        let plan = plan::turn(&mut rng, &shared.rates, shared.cancel_window);
        let token = CancellationToken::new();
        let ended = run_turn(&shared, &mut log, turn, &token);
        let cancel = async {
            match plan.cancel_after {
                Some(after) => {
                    tokio::time::sleep(after).await;
                    token.cancel();
                    Instant::now()
                }
                None => std::future::pending().await,
            }
        };
        tokio::pin!(ended);
        let (reason, sent) = tokio::select! {
            reason = &mut ended => (reason?, None),
            sent = cancel => (ended.await?, Some(sent)),
        };
        let done = Instant::now();
        if let (Some(sent), TurnEndReason::Aborted { .. }) = (sent, &reason) {
            report.latencies.push(done - sent);
        }
        *report.ends.entry(outcome_kind(&reason)).or_default() += 1;
    }
    report.log = log.events;
    Ok(report)
}

/// A session's log and its model-visible history.
struct Log {
    session: String,
    events: Vec<Envelope>,
    history: Messages,
}

impl Log {
    /// Stamps `events` with `seq` and `time` and keeps them.
    fn append(&mut self, events: Vec<Event>) {
        let time = WallClock.now_ms();
        for event in events {
            let seq = self.events.len() as u64;
            self.events.push(Envelope { seq, time, event });
        }
    }
}

/// One turn; how it ended.
async fn run_turn(
    shared: &Shared,
    log: &mut Log,
    turn: u32,
    cancel: &CancellationToken,
) -> anyhow::Result<TurnEndReason> {
    let text = format!("stress turn {turn} of {}", log.session);
    log.history.push(Message::User { text: text.clone() });
    log.append(vec![
        Event::UserMessage(UserMessage { text }),
        Event::TurnStart(TurnStart { turn }),
    ]);
    let step = 1;
    let at = StepRef { turn, step };
    let mut delays = ExponentialBuilder::default()
        .with_min_delay(shared.backoff.0)
        .with_max_delay(shared.backoff.1)
        .with_factor(2.0)
        .with_max_times(4)
        .build();
    let (mut attempt, mut retry, mut retry_id) = (1, 0, String::new());
    let mut batch = vec![Event::StepStart(at)];
    let reason = loop {
        batch.push(Event::RequestStart(RequestStart {
            turn,
            step,
            attempt,
            provider: ROUTE.to_owned(),
            model: shared.model.clone(),
        }));
        log.append(std::mem::take(&mut batch));
        let request = Request {
            session: log.session.clone(),
            turn,
            step,
            attempt,
            provider: ROUTE.to_owned(),
            model: shared.model.clone(),
            messages: log.history.clone(),
            tools: Vec::new(),
            generation: Default::default(),
        };
        let (sink, mut chunks) = ChunkSink::channel();
        let call = shared.provider.call(request, sink);
        tokio::pin!(call);
        let mut text = String::new();
        let result = loop {
            tokio::select! {
                biased;
                () = cancel.cancelled() => break None,
                Some(chunk) = chunks.recv() => {
                    text.push_str(&chunk);
                    log.append(vec![Event::AssistantChunk(AssistantChunk { turn, step, attempt, text: chunk })]);
                }
                result = &mut call => break Some(result),
            }
        };
        let Some(result) = result else { break aborted() };
        while let Ok(chunk) = chunks.try_recv() {
            text.push_str(&chunk);
            log.append(vec![Event::AssistantChunk(AssistantChunk {
                turn,
                step,
                attempt,
                text: chunk,
            })]);
        }
        let failure = match result {
            Ok(completion) => {
                log.history.push(Message::Assistant { text: text.clone(), tool_calls: Vec::new() });
                let message = AssistantMessage {
                    turn,
                    step,
                    text,
                    tool_calls: None,
                    usage: completion.usage,
                };
                log.append(vec![Event::AssistantMessage(message)]);
                break TurnEndReason::Completed;
            }
            Err(failure) => failure,
        };
        let provider = ROUTE.to_owned();
        let error = RequestError { turn, step, attempt, provider, failure: failure.clone() };
        log.append(vec![Event::RequestError(error)]);
        if cancel.is_cancelled() {
            break aborted();
        }
        let Some(backoff) = delays.next() else { break TurnEndReason::Error { failure } };
        let delay = match failure.provider_retry_after_ms() {
            Some(ms) if Duration::from_secs_f64(ms / 1000.0) <= shared.backoff.1 => {
                Duration::from_secs_f64(ms / 1000.0)
            }
            _ => backoff,
        };
        if retry == 0 {
            retry_id = uuid::Uuid::new_v4().to_string();
        }
        retry += 1;
        log.append(vec![Event::LlmRetry(retry_event(&retry_id, at, retry, delay, failure))]);
        tokio::select! {
            biased;
            () = cancel.cancelled() => break aborted(),
            () = tokio::time::sleep(delay) => {}
        }
        log.append(vec![Event::LlmRetryStarted(LlmRetryStarted {
            retry_id: retry_id.clone(),
            turn,
            step,
            retry,
        })]);
        attempt += 1;
    };
    log.append(vec![
        Event::StepEnd(at),
        Event::TurnEnd(TurnEnd { turn, reason: reason.clone() }),
        Event::AgentIdle(AgentIdle {}),
    ]);
    Ok(reason)
}

fn aborted() -> TurnEndReason {
    TurnEndReason::Aborted { cause: CancelCause::User }
}

/// The `llm/retry` of retry `retry` of chain `retry_id`.
fn retry_event(
    retry_id: &str,
    at: StepRef,
    retry: u64,
    delay: Duration,
    failure: Failure,
) -> LlmRetry {
    LlmRetry {
        retry_id: retry_id.to_owned(),
        turn: at.turn,
        step: at.step,
        provider: ROUTE.to_owned(),
        plugin: "llm-retry".to_owned(),
        mode: "normal".to_owned(),
        policy_key: POLICY_KEY.to_owned(),
        retry,
        max_retries: Some(2),
        delay_ms: delay.as_secs_f64() * 1000.0,
        failure,
    }
}
