//! Schedule, wait, start (`docs/runtime-semantics.md`, "Schedule, wait, start"): how a retry plugin
//! performs a retry it decided on.
//!
//! [`run`] takes a complete `llm/retry` event and does the four steps in order:
//!
//! 1. the turn is already cancelled or the plugin disposed → write nothing
//!    ([`Scheduled::NotScheduled`]);
//! 2. append `llm/retry` and wait for the log's acknowledgement; a rejected append (a live
//!    invariant, a closed log) abandons the retry ([`Scheduled::Rejected`]);
//! 3. wait `delayMs` ([`Recovery::wait_or`]: the turn's cancellation and the plugin's disposal —
//!    and, for `auto-retry`, its switch to `enabled = false` — end the wait at once); nothing
//!    more is written ([`Scheduled::Aborted`]);
//! 4. append `llm/retry-started` ([`Scheduled::Started`]: answer `Retry`).
//!
//! Every outcome but `Started` answers `Stop` ([`Scheduled::verdict`]): a retry that was decided
//! on but could not be performed must not fall through to the rest of the chain, which would
//! then retry a failure this plugin already claimed (and, after a cancellation or disposal, the
//! waterfall fails closed anyway).
//!
//! It is shared by every plugin that schedules `llm/retry` events (`llm-retry`; `auto-retry` writes
//! the same events with `plugin: "auto-retry"`).
//!
//! # Why durable before the wait
//!
//! The event is the retry's only durable trace. Written first, a crash during the wait leaves a
//! log that says a retry was scheduled — reopening folds it into the retry-chain projection, so
//! the budget is not spent twice — and a person reading the log sees why the turn paused. Written
//! after, a crash would lose the pause and the count. So the wait starts only once the session
//! log acknowledged the append at the store's durability.
//!
//! # Why the wait is the recovery's own
//!
//! The wait runs inside the recovery's own task (the plugin host runs each recovery as a tracked
//! task), so it needs no task of its own: [`Recovery::wait_or`] races the sleep against the
//! tokens, returns the moment one fires, drops the sleep (no timer is left behind) and lets the
//! plugin host's drain (`post_stop` waits for every recovery) complete at once on disposal.

use std::time::Duration;

use rein_runtime::event::{Event, LlmRetry, LlmRetryStarted};
use rein_runtime::plugin::{Interrupted, Recovery, Verdict};
use rein_runtime::session_log::AppendError;
use tokio_util::sync::CancellationToken;

/// How a scheduled retry ended.
#[derive(Debug)]
#[non_exhaustive]
pub enum Scheduled {
    /// The wait elapsed and `llm/retry-started` is written: answer `Retry`.
    Started,
    /// The turn was cancelled, the plugin disposed or switched off before anything was written.
    NotScheduled(Interrupted),
    /// The log refused `llm/retry` (nothing was written).
    Rejected(AppendError),
    /// `llm/retry` is written, but the wait was aborted; `llm/retry-started` is not written.
    Aborted(Interrupted),
    /// The wait elapsed but the log refused `llm/retry-started`.
    StartRejected(AppendError),
}

impl Scheduled {
    /// The plugin's answer: `Retry` once started, `Stop` otherwise.
    pub fn verdict(&self) -> Verdict {
        match self {
            Scheduled::Started => Verdict::Retry,
            _ => Verdict::Stop,
        }
    }
}

/// Performs the retry `retry` for `recovery`: on its session's log, its wait ended by the turn's
/// cancellation, the plugin's disposal ([`Recovery::wait_or`]) or `switched_off` (a plugin that
/// can be switched off at run time: `auto-retry`'s `enabled = false`).
pub async fn run(
    recovery: &Recovery,
    switched_off: Option<&CancellationToken>,
    retry: LlmRetry,
) -> Scheduled {
    let never = CancellationToken::new();
    let switched_off = switched_off.unwrap_or(&never);
    let fired = || {
        recovery.interrupted().or_else(|| switched_off.is_cancelled().then_some(Interrupted::Also))
    };
    if let Some(interrupted) = fired() {
        return Scheduled::NotScheduled(interrupted);
    }
    let log = &recovery.payload.log;
    let delay = wait_duration(retry.delay_ms);
    let started = LlmRetryStarted {
        retry_id: retry.retry_id.clone(),
        turn: retry.turn,
        step: retry.step,
        retry: retry.retry,
    };
    if let Err(error) = log.append(vec![Event::LlmRetry(retry)]).await {
        return Scheduled::Rejected(error);
    }
    if let Err(interrupted) = recovery.wait_or(delay, switched_off).await {
        return Scheduled::Aborted(interrupted);
    }
    match log.append(vec![Event::LlmRetryStarted(started)]).await {
        Ok(_) => Scheduled::Started,
        Err(error) => Scheduled::StartRejected(error),
    }
}

/// A delay in (possibly fractional) milliseconds as a timer duration, to the nanosecond.
/// Delays are valid by construction (finite, in `[0, 2147483647]`); anything else is clamped
/// into that range (NaN waits 0) rather than panicking.
pub fn wait_duration(delay_ms: f64) -> Duration {
    let ms = if delay_ms.is_nan() {
        0.0
    } else {
        delay_ms.clamp(0.0, rein_runtime::retry_policy::MAX_DELAY_MS)
    };
    // ≤ 2.2e15 ns: exact in f64's integer range and far below u64::MAX.
    Duration::from_nanos((ms * 1e6).round() as u64)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rein_runtime::failure::Failure;
    use rein_runtime::plugin::{Downstream, RequestErrorPayload};
    use rein_runtime::random::SeededJitter;
    use rein_runtime::session_log::SessionLog;
    use rein_runtime::store::memory::MemoryStore;
    use rein_scenario::reject::RejectAppends;
    use rein_testkit::failed::failed_log;

    use super::*;

    #[test]
    fn delays_become_exact_durations() {
        let cases = [
            (500.0, Duration::from_millis(500)),
            (0.0, Duration::ZERO),
            (1.1, Duration::from_nanos(1_100_000)),
            (2.2, Duration::from_nanos(2_200_000)),
            (0.5, Duration::from_micros(500)),
            (2147483647.0, Duration::from_millis(2_147_483_647)),
            (-1.0, Duration::ZERO),
            (f64::NAN, Duration::ZERO),
            (f64::INFINITY, Duration::from_millis(2_147_483_647)),
        ];
        for (ms, expected) in cases {
            assert_eq!(wait_duration(ms), expected, "{ms}");
        }
    }

    /// A recovery of `log`'s failure, ended by `cancel` and `disposed`.
    fn recovery(
        log: &SessionLog,
        cancel: &CancellationToken,
        disposed: &CancellationToken,
    ) -> Recovery {
        let payload = RequestErrorPayload {
            session: Arc::from("s"),
            turn: 1,
            step: 1,
            attempt: 1,
            provider: "mock".into(),
            failure: Failure::new("SERVER", "down").unwrap(),
            retry_policy: None,
            health: Default::default(),
            cancel: cancel.clone(),
            log: log.clone(),
        };
        Recovery {
            payload: Arc::new(payload),
            downstream: Downstream::end(),
            disposed: disposed.clone(),
            jitter: Arc::new(SeededJitter::new(0)),
        }
    }

    /// A log with turn 1, step 1, attempt 1 failed on `mock`.
    async fn failed_attempt() -> (MemoryStore, SessionLog) {
        failed_log("mock", &Failure::new("SERVER", "down").unwrap()).await
    }

    fn retry(delay_ms: f64) -> LlmRetry {
        LlmRetry {
            retry_id: "r-1".into(),
            turn: 1,
            step: 1,
            provider: "mock".into(),
            plugin: "llm-retry".into(),
            mode: "normal".into(),
            policy_key: r#"["normal",2,["SERVER"],500,10000,0]"#.into(),
            retry: 1,
            max_retries: Some(2),
            delay_ms,
            failure: Failure::new("SERVER", "down").unwrap(),
        }
    }

    /// The kinds and times of the events after the failed attempt.
    fn written(store: &MemoryStore) -> Vec<(&'static str, u64)> {
        store.events("s")[5..].iter().map(|e| (e.kind(), e.time)).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn writes_the_retry_waits_then_writes_the_start() {
        let (store, log) = failed_attempt().await;
        let (cancel, disposed) = (CancellationToken::new(), CancellationToken::new());
        let begun = tokio::time::Instant::now();
        let outcome = run(&recovery(&log, &cancel, &disposed), None, retry(1500.0)).await;
        assert!(matches!(outcome, Scheduled::Started), "{outcome:?}");
        assert_eq!(outcome.verdict(), Verdict::Retry);
        assert_eq!(begun.elapsed(), Duration::from_millis(1500));
        assert_eq!(written(&store), [("llm/retry", 0), ("llm/retry-started", 1500)]);
        let events = store.events("s");
        assert_eq!(events[5].event, Event::LlmRetry(retry(1500.0)), "the event as given");
        assert_eq!(
            events[6].event,
            Event::LlmRetryStarted(LlmRetryStarted {
                retry_id: "r-1".into(),
                turn: 1,
                step: 1,
                retry: 1
            })
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_abort_before_scheduling_writes_nothing() {
        for (cancelled, disposed, abort) in
            [(true, false, Interrupted::Cancelled), (false, true, Interrupted::Disposed)]
        {
            let (store, log) = failed_attempt().await;
            let (cancel, dispose) = (CancellationToken::new(), CancellationToken::new());
            if cancelled {
                cancel.cancel();
            }
            if disposed {
                dispose.cancel();
            }
            let outcome = run(&recovery(&log, &cancel, &dispose), None, retry(5.0)).await;
            assert!(matches!(outcome, Scheduled::NotScheduled(a) if a == abort), "{outcome:?}");
            assert_eq!(outcome.verdict(), Verdict::Stop);
            assert_eq!(written(&store), []);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_rejected_append_abandons_the_retry_without_waiting() {
        let (store, log) = failed_attempt().await;
        // A stand-in for a live invariant refusing the `llm/retry`.
        log.add_validator(Box::new(RejectAppends::new(["llm/retry"]))).await.unwrap();
        let (cancel, disposed) = (CancellationToken::new(), CancellationToken::new());
        let begun = tokio::time::Instant::now();
        let outcome = run(&recovery(&log, &cancel, &disposed), None, retry(500.0)).await;
        assert!(matches!(outcome, Scheduled::Rejected(AppendError::Rejected(_))), "{outcome:?}");
        assert_eq!(outcome.verdict(), Verdict::Stop);
        assert_eq!(begun.elapsed(), Duration::ZERO, "no wait");
        assert_eq!(written(&store), []);
    }

    #[tokio::test(start_paused = true)]
    async fn an_abort_during_the_wait_ends_it_at_once_without_a_start() {
        for abort in [Interrupted::Cancelled, Interrupted::Disposed] {
            let (store, log) = failed_attempt().await;
            let (cancel, disposed) = (CancellationToken::new(), CancellationToken::new());
            let signal = match abort {
                Interrupted::Cancelled => cancel.clone(),
                _ => disposed.clone(),
            };
            let begun = tokio::time::Instant::now();
            let waiting = {
                let (cancel, disposed) = (cancel.clone(), disposed.clone());
                tokio::spawn(async move {
                    run(&recovery(&log, &cancel, &disposed), None, retry(10_000.0)).await
                })
            };
            tokio::time::sleep(Duration::from_millis(300)).await;
            signal.cancel();
            let outcome = waiting.await.unwrap();
            assert!(matches!(outcome, Scheduled::Aborted(a) if a == abort), "{outcome:?}");
            assert_eq!(outcome.verdict(), Verdict::Stop);
            assert_eq!(begun.elapsed(), Duration::from_millis(300), "at once");
            assert_eq!(written(&store), [("llm/retry", 0)], "no llm/retry-started");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn switching_the_plugin_off_aborts_its_wait_or_keeps_it_from_scheduling() {
        let (store, log) = failed_attempt().await;
        let (cancel, disposed, off) =
            (CancellationToken::new(), CancellationToken::new(), CancellationToken::new());
        let waiting = {
            let (cancel, disposed, off) = (cancel.clone(), disposed.clone(), off.clone());
            tokio::spawn(async move {
                run(&recovery(&log, &cancel, &disposed), Some(&off), retry(10_000.0)).await
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        off.cancel();
        let outcome = waiting.await.unwrap();
        assert!(matches!(outcome, Scheduled::Aborted(Interrupted::Also)), "{outcome:?}");
        assert_eq!(written(&store), [("llm/retry", 0)], "no llm/retry-started");

        let (store, log) = failed_attempt().await;
        let outcome = run(&recovery(&log, &cancel, &disposed), Some(&off), retry(5.0)).await;
        assert!(matches!(outcome, Scheduled::NotScheduled(Interrupted::Also)), "{outcome:?}");
        assert_eq!(written(&store), []);
    }

    #[tokio::test(start_paused = true)]
    async fn a_closed_log_abandons_the_retry() {
        let (store, log) = failed_attempt().await;
        log.clone().close().await;
        let (cancel, disposed) = (CancellationToken::new(), CancellationToken::new());
        let outcome = run(&recovery(&log, &cancel, &disposed), None, retry(1.0)).await;
        assert!(matches!(outcome, Scheduled::Rejected(AppendError::Closed)), "{outcome:?}");
        assert_eq!(written(&store), []);
    }
}
