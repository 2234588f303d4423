//! [`Recovery`]: everything one recovery gets — the failure and its context
//! ([`RequestErrorPayload`]), the rest of the chain, the plugin's `disposed` token, the jitter
//! source — and the waits and the route switch a recovery performs through it, each raced against
//! the turn's cancellation and the plugin's disposal.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Downstream;
use crate::event::{Event, RouteSwitched};
use crate::failure::Failure;
use crate::random::Jitter;
use crate::retry_policy::RetryPolicy;
use crate::route_health::HealthReport;
use crate::session_log::{AppendError, SessionLog};

/// The failure offered to the waterfall and its context.
#[derive(Debug, Clone)]
pub struct RequestErrorPayload {
    /// The session.
    pub session: Arc<str>,
    /// The turn.
    pub turn: u32,
    /// The step.
    pub step: u32,
    /// The failed attempt.
    pub attempt: u32,
    /// The provider route that served (or was asked to serve) the attempt.
    pub provider: String,
    /// What went wrong.
    pub failure: Failure,
    /// The route's effective retry policy; `None` when no adapter served the
    /// attempt (`NO_ADAPTER`).
    pub retry_policy: Option<RetryPolicy>,
    /// Every route's health when the failure was offered (the routes with health settings):
    /// the failing route's retry budget and breaker (`health.route(&provider)`), and which
    /// routes are open. Empty when no route has health.
    pub health: HealthReport,
    /// The turn's cancellation signal (inside a downstream consultation: a child of it, also
    /// cancelled when the consulting plugin is disposed). A plugin must watch it in every wait
    /// and write nothing once it is cancelled.
    pub cancel: CancellationToken,
    /// The session's log: read projections (`retry_chains()`), append `llm/retry`.
    pub log: SessionLog,
}

/// Everything one recovery gets.
pub struct Recovery {
    /// The failure and its context, shared by every plugin of the walk (read it through the
    /// `Arc`; clone the parts a recovery keeps).
    pub payload: Arc<RequestErrorPayload>,
    /// The rest of the chain.
    pub downstream: Downstream,
    /// Cancelled when the plugin is disposed (or leaves the chain after too many crashes).
    pub disposed: CancellationToken,
    /// The runtime's jitter source (an explicit sample sequence in scenarios).
    pub jitter: Arc<dyn Jitter>,
}

/// Why a recovery's wait ended before its delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Interrupted {
    /// The turn was cancelled.
    Cancelled,
    /// The plugin was disposed (or left the chain after too many crashes).
    Disposed,
    /// The plugin's own signal fired (given to [`Recovery::wait_or`]).
    Also,
}

/// Why [`Recovery::switch_route`] wrote nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SwitchError {
    /// The turn was cancelled or the plugin disposed first.
    #[error("the recovery was interrupted ({0:?}): no route switch")]
    Interrupted(Interrupted),
    /// The session log refused `route/switched` (a live invariant, a closed log).
    #[error(transparent)]
    Rejected(#[from] AppendError),
}

impl Recovery {
    /// Moves the failing step to route `to`: appends `route/switched {turn, step, from, to,
    /// code, reason}` — `from` the failed attempt's route, `code` its failure's — and returns
    /// once the log acknowledged it. Answer [`Verdict::Retry`](super::Verdict::Retry) next: the step's next attempt goes
    /// to `to` (its provider and model) over the same history, and the step and its turn's later
    /// steps stay there. The switch is read from the log, so a plugin that consulted this one
    /// downstream and passes its `Retry` on needs to know nothing about it. Nothing is written
    /// once the turn is cancelled or the plugin disposed.
    pub async fn switch_route(&self, to: &str, reason: &str) -> Result<(), SwitchError> {
        if let Some(interrupted) = self.interrupted() {
            return Err(SwitchError::Interrupted(interrupted));
        }
        let p = &self.payload;
        let switch = RouteSwitched {
            turn: p.turn,
            step: p.step,
            from: p.provider.clone(),
            to: to.to_owned(),
            code: p.failure.code().to_owned(),
            reason: reason.to_owned(),
        };
        p.log.append(vec![Event::RouteSwitched(switch)]).await?;
        Ok(())
    }

    /// Which of the turn's cancellation and the plugin's disposal has fired, if any — the
    /// turn's first, as it decides how the turn ends. A recovery checks it before it writes.
    pub fn interrupted(&self) -> Option<Interrupted> {
        if self.payload.cancel.is_cancelled() {
            Some(Interrupted::Cancelled)
        } else if self.disposed.is_cancelled() {
            Some(Interrupted::Disposed)
        } else {
            None
        }
    }

    /// Waits `delay` (a backoff), unless the turn is cancelled or the plugin disposed first:
    /// either ends the wait at once. A recovery waits through here, so it cannot forget either.
    pub async fn wait(&self, delay: Duration) -> Result<(), Interrupted> {
        self.wait_or(delay, &CancellationToken::new()).await
    }

    /// [`Recovery::wait`], also ended when `also` is cancelled (a plugin's own signal: a switch
    /// to disabled, say). When the delay and a signal are ready together, the signal wins.
    pub async fn wait_or(
        &self,
        delay: Duration,
        also: &CancellationToken,
    ) -> Result<(), Interrupted> {
        tokio::select! {
            biased;
            () = self.payload.cancel.cancelled() => return Err(Interrupted::Cancelled),
            () = self.disposed.cancelled() => return Err(Interrupted::Disposed),
            () = also.cancelled() => return Err(Interrupted::Also),
            () = tokio::time::sleep(delay) => {}
        }
        match self.interrupted() {
            Some(interrupted) => Err(interrupted),
            None if also.is_cancelled() => Err(Interrupted::Also),
            None => Ok(()),
        }
    }
}

impl std::fmt::Debug for Recovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recovery")
            .field("payload", &self.payload)
            .field("downstream", &self.downstream)
            .field("disposed", &self.disposed.is_cancelled())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recovery of a failure in a fresh log, with its own cancel and disposed tokens.
    async fn recovery() -> (Recovery, CancellationToken, CancellationToken) {
        let store = Arc::new(crate::store::memory::MemoryStore::new());
        let clock = Arc::new(crate::clock::VirtualClock::start());
        let (log, _) = SessionLog::open(store, clock, "s").await.unwrap();
        let (cancel, disposed) = (CancellationToken::new(), CancellationToken::new());
        let payload = RequestErrorPayload {
            session: Arc::from("s"),
            turn: 1,
            step: 1,
            attempt: 1,
            provider: "mock".into(),
            failure: Failure::new("SERVER", "down").unwrap(),
            retry_policy: None,
            health: HealthReport::new(),
            cancel: cancel.clone(),
            log,
        };
        let recovery = Recovery {
            payload: Arc::new(payload),
            downstream: Downstream::end(),
            disposed: disposed.clone(),
            jitter: Arc::new(crate::random::SeededJitter::new(0)),
        };
        (recovery, cancel, disposed)
    }

    #[tokio::test(start_paused = true)]
    async fn a_recovery_waits_its_delay_unless_the_turn_or_the_plugin_goes_first() {
        type Fire = fn(&CancellationToken, &CancellationToken, &CancellationToken);
        let none: Fire = |_, _, _| {};
        let cancel: Fire = |c, _, _| c.cancel();
        let dispose: Fire = |_, d, _| d.cancel();
        let also: Fire = |_, _, a| a.cancel();
        let both: Fire = |c, d, _| {
            d.cancel();
            c.cancel();
        };
        let cases: [(&str, Fire, Result<(), Interrupted>, Duration); 5] = [
            ("nothing fires: the whole delay", none, Ok(()), Duration::from_secs(5)),
            ("the turn is cancelled", cancel, Err(Interrupted::Cancelled), Duration::from_secs(1)),
            ("the plugin is disposed", dispose, Err(Interrupted::Disposed), Duration::from_secs(1)),
            ("its own signal", also, Err(Interrupted::Also), Duration::from_secs(1)),
            (
                "cancelled and disposed: the turn first",
                both,
                Err(Interrupted::Cancelled),
                Duration::from_secs(1),
            ),
        ];
        for (case, fire, expected, lasted) in cases {
            let (recovery, cancel_token, disposed) = recovery().await;
            let signal = CancellationToken::new();
            let started = tokio::time::Instant::now();
            let waiting = async { recovery.wait_or(Duration::from_secs(5), &signal).await };
            let firing = async {
                tokio::time::sleep(Duration::from_secs(1)).await;
                fire(&cancel_token, &disposed, &signal);
            };
            let (waited, ()) = tokio::join!(waiting, firing);
            assert_eq!(waited, expected, "{case}");
            assert_eq!(started.elapsed(), lasted, "{case}: ended at once");
            assert_eq!(
                recovery.interrupted(),
                expected.err().filter(|i| *i != Interrupted::Also),
                "{case}"
            );
        }
        // A signal that fired already wins over a zero delay.
        let (recovery, cancel_token, _) = recovery().await;
        cancel_token.cancel();
        assert_eq!(recovery.wait(Duration::ZERO).await, Err(Interrupted::Cancelled));
    }
}
