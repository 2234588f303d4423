//! The smallest agent: one turn on the scripted provider.
//!
//! Run: `cargo run --release --example hello -- [PROMPT]`
//!
//! A runtime with one route on a [`ScriptedProvider`] (a provider that plays a script, one entry
//! per attempt: here a single answer streamed in four chunks) and no plugin. The program sends
//! one prompt, prints the answer as its chunks stream in, then how the turn ended, the kinds of
//! the events the session log holds and the invariant checker's verdict on it, and shuts the
//! runtime down (no actor and no task left).
//!
//! What it prints:
//!
//! ```text
//! > Hello!
//! Hello! I am a scripted model, and this is my whole script.
//! turn 1 ended: completed
//! log: 13 events — session/start user/message turn/start step/start request/start assistant/chunk ×4 assistant/message step/end turn/end agent/idle
//! invariants: every rule holds
//! after shutdown: 0 actors, 0 tasks
//! ```

use std::io::Write;
use std::sync::Arc;

use anyhow::ensure;
use clap::Parser;
use rein::invariant::check_finished_log;
use rein::prelude::*;
use rein::runtime::plural::count;
use rein_scenario::scripted::{Scripted, ScriptedProvider, ScriptedReply};

/// One turn on the scripted provider.
#[derive(Debug, Parser)]
struct Args {
    /// What to say (the scripted model answers the same whatever it is).
    #[arg(default_value = "Hello!")]
    prompt: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    run(&Args::parse(), &mut anstream::stdout()).await
}

async fn run(args: &Args, out: &mut impl Write) -> anyhow::Result<()> {
    // The model's whole script: one answer, streamed as four chunks.
    let model = ScriptedProvider::new([Scripted::Reply(ScriptedReply::chunks([
        "Hello!",
        " I am a scripted model,",
        " and this is",
        " my whole script.",
    ]))]);
    let runtime = Runtime::builder()
        .route(Route::new("scripted", Arc::new(model)).model("scripted-1"))
        .build()
        .await?;
    let session = runtime.session("hello").await?;

    writeln!(out, "> {}", args.prompt)?;
    // The answer as it streams (a failed attempt's text would come with a reset to erase it).
    let mut answer = session.prompt(args.prompt.as_str())?.answer();
    while let Some(delta) = answer.next_delta().await {
        if let AnswerDelta::Text(text) = delta {
            write!(out, "{text}")?;
            out.flush()?;
        }
    }
    let outcome = answer.await?;
    writeln!(out)?;
    let ended = match &outcome.reason {
        TurnEndReason::Completed => "completed".to_owned(),
        other => format!("{other:?}"),
    };
    writeln!(out, "turn {} ended: {ended}", outcome.turn)?;

    let events = session.events().await?;
    writeln!(out, "log: {} events — {}", events.len(), kinds(&events))?;
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
    ensure!(outcome.reason == TurnEndReason::Completed, "the turn did not complete");
    ensure!(violations.is_empty() && actors == 0 && tasks == 0, "the run broke a guarantee");
    Ok(())
}

/// The events' kinds in order, a run of one kind written once with its count (`kind ×4`).
fn kinds(events: &[Envelope]) -> String {
    let mut runs: Vec<(&str, usize)> = Vec::new();
    for event in events {
        match runs.last_mut() {
            Some((kind, n)) if *kind == event.kind() => *n += 1,
            _ => runs.push((event.kind(), 1)),
        }
    }
    let words: Vec<String> = runs
        .into_iter()
        .map(|(kind, n)| if n == 1 { kind.to_owned() } else { format!("{kind} ×{n}") })
        .collect();
    words.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn one_turn_streams_the_answer_and_leaves_a_clean_log() {
        let mut out = Vec::new();
        run(&Args { prompt: "Hi there".into() }, &mut out).await.unwrap();
        let out = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[..3],
            [
                "> Hi there",
                "Hello! I am a scripted model, and this is my whole script.",
                "turn 1 ended: completed",
            ]
        );
        assert!(lines[3].starts_with("log: "), "{out}");
        assert!(lines[3].contains("assistant/chunk ×4 assistant/message"), "{out}");
        assert_eq!(
            lines[4..],
            ["invariants: every rule holds", "after shutdown: 0 actors, 0 tasks"]
        );
    }
}
