//! The bare waterfall: one actor per plugin of the workload's chain, and the walk a failing
//! step runs as its task.
//!
//! - **A plugin actor** ([`BarePlugin`]) answers each offer at once (a message and its reply)
//!   with what its plugin decides for the workload ([`decide`]): `llm-retry` retries the first
//!   [`RETRIES`]`.0` transient failures of a chain, `compaction` passes (the workload overflows
//!   no context), `auto-retry` retries the next [`RETRIES`]`.1`; each delay is the next of the
//!   workload's backoff, jittered, or the provider's `Retry-After` when it is within the
//!   backoff's ceiling — the delays the hand-rolled loops wait.
//! - **The walk** ([`walk`]) offers the failure to each plugin in order until one decides; on
//!   a retry it appends `llm/retry`, waits the delay racing the step's token, appends
//!   `llm/retry-started` and tells the step to retry; at the end of the chain the step stops
//!   with the failure. A cancelled token ends the walk with no answer (the step is stopping).

use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use rein::runtime::event::{Event, LlmRetry, LlmRetryStarted, StepRef};
use rein::runtime::failure::Failure;
use rein::runtime::store::StoreError;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::Ctx;
use super::step::{Resolution, StepMsg};
use crate::agents_workload::{BACKOFF_MS, RETRIES, backoff, jittered, retry_event};
use crate::bare_log::{LogMsg, append};

/// The failure codes `llm-retry` retries (its default transient codes).
const TRANSIENT: [&str; 4] = ["RATE_LIMIT", "SERVER", "TIMEOUT", "TRANSPORT"];

/// A step's retry chain: its id and how many retries it made.
#[derive(Clone)]
pub(super) struct Chain {
    id: Arc<str>,
    retries: u64,
}

/// Which plugin of the chain an actor stands in for.
#[derive(Debug, Clone, Copy)]
pub(super) enum StandIn {
    LlmRetry,
    Compaction,
    AutoRetry,
}

/// A plugin's answer to an offer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Verdict {
    /// Retry after this delay.
    RetryAfter(Duration),
    /// Ask the next plugin.
    Next,
}

/// What a plugin actor is offered: the failure, the retries its chain made so far, the reply.
pub(super) enum PluginMsg {
    Offer(Arc<Failure>, u64, oneshot::Sender<Verdict>),
}

/// One plugin's actor.
pub(super) struct BarePlugin(pub(super) StandIn);

impl Actor for BarePlugin {
    type Msg = PluginMsg;
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<PluginMsg>, (): ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn handle(
        &self,
        _: ActorRef<PluginMsg>,
        PluginMsg::Offer(failure, retries, reply): PluginMsg,
        (): &mut (),
    ) -> Result<(), ActorProcessingErr> {
        let _ = reply.send(decide(self.0, &failure, retries));
        Ok(())
    }
}

/// What `stand_in` answers `failure` after `retries` retries of its chain: the next delay of the
/// backoff, or the provider's `Retry-After` when it is within the backoff's ceiling.
fn decide(stand_in: StandIn, failure: &Failure, retries: u64) -> Verdict {
    let (code, retries) = (failure.code(), retries as usize);
    let retry = match stand_in {
        StandIn::LlmRetry => TRANSIENT.contains(&code) && retries < RETRIES.0,
        StandIn::Compaction => false,
        StandIn::AutoRetry => retries < RETRIES.0 + RETRIES.1,
    };
    let ceiling = Duration::from_millis(BACKOFF_MS.1);
    let asked = failure.provider_retry_after_ms().map(|ms| Duration::from_secs_f64(ms / 1000.0));
    match (backoff().nth(retries), asked) {
        (Some(_), Some(asked)) if retry && asked <= ceiling => Verdict::RetryAfter(asked),
        (Some(delay), _) if retry => Verdict::RetryAfter(jittered(delay)),
        _ => Verdict::Next,
    }
}

/// Walks the chain for the failure of the step at `at` (`chain`: its retries so far), then tells
/// the step what to do — unless `token` was cancelled.
pub(super) async fn walk(
    ctx: Arc<Ctx>,
    log: ActorRef<LogMsg>,
    at: StepRef,
    failure: Failure,
    chain: Option<Chain>,
    token: CancellationToken,
    step: ActorRef<StepMsg>,
) {
    let answer = match walk_chain(&ctx, &log, at, failure, chain, &token).await {
        Ok(Some(resolution)) => StepMsg::Resolved(resolution),
        Ok(None) => return,
        Err(error) => StepMsg::Broken(format!("the walk could not append: {error}")),
    };
    let _ = step.send_message(answer);
}

/// The chain's resolution; `None` when the token was cancelled first.
async fn walk_chain(
    ctx: &Ctx,
    log: &ActorRef<LogMsg>,
    at: StepRef,
    failure: Failure,
    chain: Option<Chain>,
    token: &CancellationToken,
) -> Result<Option<Resolution>, StoreError> {
    if token.is_cancelled() {
        return Ok(None);
    }
    let retries = chain.as_ref().map_or(0, |c| c.retries);
    let failure = Arc::new(failure);
    for plugin in &ctx.plugins {
        let (reply, answer) = oneshot::channel();
        // A plugin that is gone passes.
        let _ = plugin.send_message(PluginMsg::Offer(Arc::clone(&failure), retries, reply));
        let verdict = tokio::select! {
            biased;
            () = token.cancelled() => return Ok(None),
            verdict = answer => verdict.unwrap_or(Verdict::Next),
        };
        let Verdict::RetryAfter(delay) = verdict else { continue };
        let id = chain.map_or_else(|| Arc::from(uuid::Uuid::new_v4().to_string()), |c| c.id);
        let chain = Chain { id, retries: retries + 1 };
        let failure = Arc::unwrap_or_clone(failure);
        // One chain for the stand-ins' retries (auto-retry's follow llm-retry's).
        let retry = LlmRetry {
            provider: ctx.route.0.clone(),
            max_retries: Some((RETRIES.0 + RETRIES.1) as u64),
            ..retry_event(&chain.id, chain.retries, at, delay, failure)
        };
        append(log, vec![Event::LlmRetry(retry)]).await?;
        tokio::select! {
            biased;
            () = token.cancelled() => return Ok(None),
            () = tokio::time::sleep(delay) => {}
        }
        let StepRef { turn, step } = at;
        let started =
            LlmRetryStarted { retry_id: chain.id.to_string(), turn, step, retry: chain.retries };
        append(log, vec![Event::LlmRetryStarted(started)]).await?;
        return Ok(Some(Resolution::Retry(chain)));
    }
    Ok(Some(Resolution::Stop(Arc::unwrap_or_clone(failure))))
}
