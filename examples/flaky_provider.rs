//! A provider that keeps failing, and the default chain recovering the turn: `llm-retry` retries
//! until its budget is spent, then `auto-retry` takes over; the turn-tail panel shows who retried
//! what.
//!
//! Run: `cargo run --release --example flaky_provider -- [--failures N]`
//!
//! The provider (an [`Adapter`] written here) fails its first N attempts (default 4) with a 503
//! `SERVER` error after streaming a partial answer, then answers. The chain is the default one:
//! `llm-retry` (2 retries), `compaction` (not concerned: no context overflow), `auto-retry`
//! (3 more retries), with waits scaled down to 200 ms–1 s. With the default 4 failures,
//! `llm-retry` retries twice, declines the third failure (its budget is spent), and `auto-retry`
//! retries twice more; the fifth attempt answers. With `--failures 6` both budgets are spent and
//! the turn ends with the failure.
//!
//! It prints each retry as it is scheduled, the answer, how the turn ended, the turn-tail panel
//! expanded (what `rein show --expand` prints for the log) and the invariant checker's verdict:
//!
//! ```text
//! chain: llm-retry → compaction → auto-retry
//! > What is the capital of France?
//!   attempt 1 failed with SERVER: llm-retry retries (1/2) in 215 ms
//!   attempt 2 failed with SERVER: llm-retry retries (2/2) in 417 ms
//!   attempt 3 failed with SERVER: auto-retry retries (1/3) in 769 ms
//!   attempt 4 failed with SERVER: auto-retry retries (2/3) in 1000 ms
//! Paris is the capital of France.
//! turn 1 ended: completed after 5 attempts
//!
//! flaky: session flaky · 1 turn, 1 retried or failed
//! ▾ turn 1 · Retried 4 times this turn · recovered
//!     harness · turn 1·step 1 · flaky · failed SERVER · HTTP 503 · request req-1
//!       upstream overloaded, try again (attempt 1)
//!       streamed before it ended:
//!         Par
//!     llm-retry · attempt 1/2 · waited 215 ms · turn 1·step 1 · flaky · failed …
//!     …
//!     auto-retry · attempt 2/3 · waited 1000 ms · turn 1·step 1 · flaky · answered
//! invariants: every rule holds
//! after shutdown: 0 actors, 0 tasks
//! ```

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::ensure;
use clap::Parser;
use rein::invariant::check_finished_log;
use rein::prelude::*;
use rein::provider::prelude::*;
use rein::runtime::plural::count;
use rein::runtime::session::Answer;
use serde_json::json;

/// A provider that fails first, then answers.
#[derive(Debug, Parser)]
struct Args {
    /// How many attempts fail before the provider answers (more than 5 spends both budgets).
    #[arg(long, default_value_t = 4)]
    failures: u32,
}

/// Fails its first `failures` calls with a 503 after streaming a partial answer, then answers.
struct Flaky {
    failures: u32,
    calls: AtomicU32,
}

impl Adapter for Flaky {
    fn call(
        &self,
        _: Request,
        chunks: ChunkSink,
    ) -> BoxFuture<'static, Result<Completion, Failure>> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let fails = n <= self.failures;
        Box::pin(async move {
            if fails {
                // A partial answer, then the error: what the model streamed is shown in the
                // panel, and never becomes part of the answer.
                let _ = chunks.send("Par".into());
                let message = format!("upstream overloaded, try again (attempt {n})");
                return Err(Failure::new("SERVER", message)
                    .and_then(|f| f.with_status(503))
                    .and_then(|f| f.with_request_id(format!("req-{n}")))
                    .expect("a valid failure"));
            }
            for chunk in ["Paris", " is the capital", " of France."] {
                let _ = chunks.send(chunk.into());
            }
            Ok(Completion::default())
        })
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    run(&Args::parse(), Arc::new(WallClock), &mut anstream::stdout()).await.map(drop)
}

/// Runs the turn and returns how it ended; the log's timestamps come from `clock` (the tests run
/// on paused time with a virtual clock).
async fn run(
    args: &Args,
    clock: Arc<dyn Clock>,
    out: &mut impl Write,
) -> anyhow::Result<TurnEndReason> {
    // The default chain, with the waits scaled down so the example is quick on the wall clock.
    let llm_retry = LlmRetry::from_config(&json!({
        "maxTransientRetries": 2, "initialDelayMs": 200, "maxDelayMs": 1000, "jitterRatio": 0.1
    }))?;
    let auto_retry = AutoRetry::from_config(&json!({
        "extraRetries": 3, "initialDelayMs": 200, "maxDelayMs": 1000, "jitterRatio": 0.1
    }))?;
    let flaky = Flaky { failures: args.failures, calls: AtomicU32::new(0) };
    let runtime = Runtime::builder()
        .clock(clock)
        .route(Route::new("flaky", Arc::new(flaky)).model("flaky-1"))
        .plugin(llm_retry) // its policy: the routes' default
        .plugin(Compaction::default())
        .plugin(auto_retry) // the chain's order is the order of registration
        .build()
        .await?;
    let warnings = runtime.config_warnings();
    ensure!(warnings.is_empty(), "the plugins' configuration: {warnings:?}");
    ensure!(runtime.plugins() == DEFAULT_CHAIN, "the chain is {:?}", runtime.plugins());
    writeln!(out, "chain: {}", DEFAULT_CHAIN.join(" → "))?;

    let session = runtime.session("flaky").await?;
    let prompt = "What is the capital of France?";
    writeln!(out, "> {prompt}")?;
    let mut turn = session.prompt(prompt)?;
    // The answer without the failed attempts' text (the fold behind `TurnHandle::answer`).
    let (mut failed, mut attempts, mut answer) = (None, 0, Answer::new());
    while let Some(event) = turn.next_event().await {
        answer.on(&event.event);
        match &event.event {
            Event::RequestStart(_) => attempts += 1,
            Event::RequestError(error) => failed = Some((error.attempt, error.failure.clone())),
            Event::LlmRetry(retry) => {
                let (attempt, failure) = failed.take().unwrap_or((0, retry.failure.clone()));
                let budget = retry.max_retries.map(|m| format!("/{m}")).unwrap_or_default();
                writeln!(
                    out,
                    "  attempt {attempt} failed with {}: {} retries ({}{budget}) in {:.0} ms",
                    failure.code(),
                    retry.plugin,
                    retry.retry,
                    retry.delay_ms,
                )?;
            }
            _ => {}
        }
    }
    let outcome = turn.await?;
    match &outcome.reason {
        TurnEndReason::Completed => {
            writeln!(out, "{}", answer.text())?;
            let attempts = count(attempts, "attempt", "attempts");
            writeln!(out, "turn {} ended: completed after {attempts}", outcome.turn)?;
        }
        TurnEndReason::Error { failure } => writeln!(
            out,
            "turn {} ended: failed with {} after {}: nobody retries it any more",
            outcome.turn,
            failure.code(),
            count(attempts, "attempt", "attempts")
        )?,
        other => writeln!(out, "turn {} ended: {other:?}", outcome.turn)?,
    }

    // The turn-tail panel, as `rein show --expand` prints it (in colour on a terminal).
    let events = session.events().await?;
    writeln!(out)?;
    write!(out, "{}", rein::show::render("flaky", &events, true))?;
    let violations = check_finished_log(&events);
    for violation in &violations {
        writeln!(out, "  violation: {violation}")?;
    }
    match violations.len() {
        0 => writeln!(out, "invariants: every rule holds")?,
        n => writeln!(out, "invariants: {}", count(n, "violation", "violations"))?,
    }

    runtime.shutdown().await;
    let (actors, tasks) = (runtime.census().actors(), runtime.census().tasks());
    writeln!(out, "after shutdown: {actors} actors, {tasks} tasks")?;
    ensure!(violations.is_empty() && actors == 0 && tasks == 0, "the run broke a guarantee");
    Ok(outcome.reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn output(failures: u32) -> (TurnEndReason, String) {
        let mut out = Vec::new();
        let reason = run(&Args { failures }, Arc::new(VirtualClock::start()), &mut out).await;
        let out = anstream::adapter::strip_str(&String::from_utf8(out).unwrap()).to_string();
        (reason.unwrap_or_else(|e| panic!("{e}\n{out}")), out)
    }

    /// The lines of the panel that start with `origin ·`.
    fn attempts<'a>(out: &'a str, origin: &str) -> Vec<&'a str> {
        let prefix = format!("    {origin} ·");
        out.lines().filter(|l| l.starts_with(&prefix)).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn llm_retry_spends_its_budget_then_auto_retry_recovers_the_turn() {
        let (reason, out) = output(4).await;
        assert_eq!(reason, TurnEndReason::Completed, "{out}");
        let retried: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with("  attempt "))
            .map(|l| l.split(" in ").next().unwrap())
            .collect();
        assert_eq!(
            retried,
            [
                "  attempt 1 failed with SERVER: llm-retry retries (1/2)",
                "  attempt 2 failed with SERVER: llm-retry retries (2/2)",
                "  attempt 3 failed with SERVER: auto-retry retries (1/3)",
                "  attempt 4 failed with SERVER: auto-retry retries (2/3)",
            ]
        );
        // The waits follow the configured curve (200 ms doubling, jitter ±10 %), not the
        // runtime's default policy: llm-retry's configuration is the route's policy.
        let waits: Vec<f64> = out
            .lines()
            .filter(|l| l.starts_with("  attempt "))
            .map(|l| l.rsplit(" in ").next().unwrap().trim_end_matches(" ms").parse().unwrap())
            .collect();
        assert!((180.0..=220.0).contains(&waits[0]), "{out}");
        assert!((360.0..=440.0).contains(&waits[1]), "{out}");
        assert!(out.contains("\nParis is the capital of France.\n"), "{out}");
        assert!(out.contains("turn 1 ended: completed after 5 attempts"), "{out}");
        assert!(out.contains("▾ turn 1 · Retried 4 times this turn · recovered"), "{out}");
        assert_eq!(attempts(&out, "harness").len(), 1, "{out}");
        assert_eq!(attempts(&out, "llm-retry").len(), 2, "{out}");
        let auto = attempts(&out, "auto-retry");
        assert_eq!(auto.len(), 2, "{out}");
        assert!(auto[1].ends_with("· answered"), "{out}");
        assert!(out.contains("      upstream overloaded, try again (attempt 1)"), "{out}");
        assert!(out.ends_with("invariants: every rule holds\nafter shutdown: 0 actors, 0 tasks\n"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_provider_failing_past_both_budgets_ends_the_turn_with_its_failure() {
        let (reason, out) = output(6).await;
        assert!(matches!(&reason, TurnEndReason::Error { failure } if failure.code() == "SERVER"));
        assert!(out.contains("turn 1 ended: failed with SERVER after 6 attempts"), "{out}");
        assert!(out.contains("Retried 5 times this turn · finally failed with SERVER"), "{out}");
        assert!(!out.contains("Paris is"), "{out}");
        assert!(out.ends_with("after shutdown: 0 actors, 0 tasks\n"), "{out}");
    }
}
