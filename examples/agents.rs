//! Spawns many example agents at once and stress-tests cancellation.
//!
//! Run: `cargo run --release --example agents -- [SESSIONS]` (default 200).
//!
//! Every agent is a session on one runtime with a durable JSONL store (in a temp directory), the
//! default plugin chain — `llm-retry` (configured like the seed: 2 retries, 500 ms → 10 s, 10 %
//! jitter, here scaled down to 5 ms → 100 ms so the example is quick on the wall clock),
//! `compaction` and `auto-retry` (its delays scaled down the same way) — and the `echo` tool.
//! The provider is a local simulation: per session, the first attempt is rate limited, the
//! second streams a tool call, the third answers. One agent in ten is cancelled while its
//! retry waits. At the end every log is read back from disk and checked by `rein-invariant`, and
//! the runtime is shut down with no actor and no task left.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rein::invariant::check_finished_log;
use rein::plugins::auto_retry::AutoRetry;
use rein::plugins::compaction::Compaction;
use rein::plugins::llm_retry::LlmRetry;
use rein::runtime::BoxFuture;
use rein::runtime::event::{CancelCause, ToolCall, TurnEndReason};
use rein::runtime::failure::Failure;
use rein::runtime::provider::{Adapter, ChunkSink, Completion, Request};
use rein::runtime::runtime::{Route, Runtime};
use rein::runtime::store::jsonl::JsonlStore;
use rein::runtime::store::{Durability, SessionStore};
use rein::runtime::tool::echo::EchoTool;

/// A simulated provider: attempt 1 of a session's first step is rate limited, step 1 then asks
/// for the `echo` tool, step 2 answers.
#[derive(Default)]
struct Simulated {
    calls: Mutex<HashMap<String, u32>>,
}

impl Adapter for Simulated {
    fn call(
        &self,
        request: Request,
        chunks: ChunkSink,
    ) -> BoxFuture<'static, Result<Completion, Failure>> {
        let n = {
            let mut calls = self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let n = calls.entry(request.session.clone()).or_default();
            *n += 1;
            *n
        };
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(2)).await;
            match n {
                1 => Err(Failure::new("RATE_LIMIT", "429: slow down")
                    .and_then(|f| f.with_status(429))
                    .expect("a valid failure")),
                2 => {
                    let _ = chunks.send("Let me echo that.".into());
                    Ok(Completion {
                        tool_calls: vec![ToolCall {
                            id: "call-1".into(),
                            name: "echo".into(),
                            arguments: serde_json::json!({"text": request.session}),
                        }],
                        usage: None,
                    })
                }
                _ => {
                    let _ = chunks.send("Done.".into());
                    Ok(Completion::default())
                }
            }
        })
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let sessions: usize = std::env::args().nth(1).map(|s| s.parse()).transpose()?.unwrap_or(200);
    let dir = std::env::temp_dir().join(format!("rein-agents-{}", std::process::id()));
    let store = Arc::new(JsonlStore::open(&dir, Durability::Os)?);
    let llm_retry = LlmRetry::from_config(&serde_json::json!({
        "maxTransientRetries": 2, "initialDelayMs": 5, "maxDelayMs": 100, "jitterRatio": 0.1
    }))?;
    // The default chain: the official executor, the overflow recovery, the takeover of what they
    // decline (its delays scaled down like llm-retry's).
    let (auto_retry, warnings) = AutoRetry::from_config(&serde_json::json!({
        "initialDelayMs": 5, "maxDelayMs": 100
    }));
    anyhow::ensure!(warnings.is_empty(), "auto-retry configuration: {warnings:?}");
    let runtime = Runtime::builder()
        .store(store.clone())
        .route(Route::new("sim", Arc::new(Simulated::default())).model("sim-1"))
        .plugin(Arc::new(llm_retry))
        .plugin(Arc::new(Compaction::default()))
        .plugin(Arc::new(auto_retry))
        .tool(Arc::new(EchoTool))
        .build()
        .await?;

    let started = Instant::now();
    let mut agents = Vec::with_capacity(sessions);
    for i in 0..sessions {
        let session = runtime.session(&format!("agent-{i:04}")).await?;
        let turn = session.prompt("Please echo my name")?;
        if i % 10 == 0 {
            // Cancelled while llm-retry waits out its backoff (or earlier): the turn must end
            // `aborted` and nothing after the cancel may be written but the closing events.
            session.cancel(CancelCause::User).await?;
        }
        agents.push(turn);
    }
    let mut tally: HashMap<&'static str, usize> = HashMap::new();
    for turn in agents {
        let kind = match turn.outcome().await?.reason {
            TurnEndReason::Completed => "completed",
            TurnEndReason::Aborted { .. } => "aborted",
            TurnEndReason::Error { .. } => "error",
            TurnEndReason::MaxSteps => "max-steps",
            TurnEndReason::Interrupted => "interrupted",
        };
        *tally.entry(kind).or_default() += 1;
    }
    let elapsed = started.elapsed();

    runtime.shutdown().await;
    let (actors, tasks) = (runtime.census().actors(), runtime.census().tasks());

    let mut violations = 0;
    for id in store.sessions().await? {
        let log = store.load(&id).await?.map(|l| l.events).unwrap_or_default();
        for v in check_finished_log(&log) {
            violations += 1;
            eprintln!("{id}: {v}");
        }
    }
    let mut tally: Vec<_> = tally.into_iter().collect();
    tally.sort();
    println!("{sessions} agents in {elapsed:.2?}: {tally:?}");
    println!("logs: {} ({} violations)", dir.display(), violations);
    println!("after shutdown: {actors} actors, {tasks} tasks");
    anyhow::ensure!(violations == 0 && actors == 0 && tasks == 0, "the run broke a guarantee");
    Ok(())
}
