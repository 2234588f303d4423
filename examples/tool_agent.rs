//! Tool calls across the steps of one turn: a tool of your own next to `echo`, an error the
//! model sees and corrects, and the answer built from the tools' results.
//!
//! Run: `cargo run --release --example tool_agent -- [TEXT]`
//!
//! The tool written here, `word_count`, implements [`Tool`]: it counts the words, lines and
//! characters of its `text` argument ([`ToolOutcome::Output`]), and answers bad arguments with
//! an error the model sees ([`ToolOutcome::Error`]: the turn goes on and the model may try
//! again). The model is a small rule-based [`Adapter`] that reads the conversation like a model
//! would:
//!
//! 1. step 1 calls `word_count` with a misnamed argument — the tool answers with an error;
//! 2. step 2 sees the error and calls `word_count` correctly, and `echo` to quote the text;
//! 3. step 3 answers from the results.
//!
//! The turn's events are printed as they stream (the step's text, `→` a tool call, `←` its
//! result; a step's calls run one after another), then how the turn ended and the invariant
//! checker's verdict:
//!
//! ```text
//! > How many words are in "The quick brown fox jumps over the lazy dog."?
//! [step 1] Let me count them.
//!   → word_count {"input":"The quick brown fox jumps over the lazy dog."}
//!   ← error: word_count: missing arguments.text (a string)
//! [step 2] I named the argument wrong; again, with `text`.
//!   → word_count {"text":"The quick brown fox jumps over the lazy dog."}
//!   ← {"chars":44,"lines":1,"words":9}
//!   → echo {"text":"The quick brown fox jumps over the lazy dog."}
//!   ← The quick brown fox jumps over the lazy dog.
//! [step 3] "The quick brown fox jumps over the lazy dog." has 9 words (1 line, 44 characters).
//! turn 1 ended: completed in 3 steps, 3 tool calls
//! invariants: every rule holds
//! after shutdown: 0 actors, 0 tasks
//! ```

use std::io::Write;
use std::sync::Arc;

use anyhow::ensure;
use clap::Parser;
use rein::invariant::check_finished_log;
use rein::prelude::*;
use rein::provider::prelude::*;
use rein::runtime::plural::count;
use rein::tool::prelude::*;
use serde_json::{Value, json};

/// Tool calls across steps.
#[derive(Debug, Parser)]
struct Args {
    /// The text whose words the agent counts.
    #[arg(default_value = "The quick brown fox jumps over the lazy dog.")]
    text: String,
}

/// `word_count`: the words, lines and characters of its `text` argument, as JSON.
struct WordCount;

impl WordCount {
    const NAME: &'static str = "word_count";
}

impl Tool for WordCount {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(Self::NAME, "Counts the words, lines and characters of a text.")
            .with_parameters(json!({
                "type": "object",
                "properties": {"text": {"type": "string", "description": "The text to count."}},
                "required": ["text"],
            }))
    }

    fn call(
        &self,
        arguments: Value,
        _cancel: CancellationToken,
    ) -> BoxFuture<'static, ToolOutcome> {
        // Counting is immediate: nothing to wait for, so nothing races the cancellation token.
        let outcome = match arguments.get("text").and_then(Value::as_str) {
            Some(text) => ToolOutcome::Output(
                json!({
                    "words": text.split_whitespace().count(),
                    "lines": text.lines().count(),
                    "chars": text.chars().count(),
                })
                .to_string(),
            ),
            None => ToolOutcome::Error("word_count: missing arguments.text (a string)".into()),
        };
        Box::pin(std::future::ready(outcome))
    }
}

/// A rule-based model: reads the turn's messages and decides its next move like a model would.
struct Model;

impl Model {
    /// The next reply for `request`: its text and the tools it calls.
    fn reply(request: &Request) -> (String, Vec<ToolCall>) {
        // This turn's messages: everything after the last user message.
        let start = request.messages.iter().rposition(|m| matches!(m, Message::User { .. }));
        let (question, this_turn) = match start {
            Some(i) => (&request.messages[i], &request.messages[i + 1..]),
            None => return ("I have nothing to answer.".into(), vec![]),
        };
        let Message::User { text: question } = question else { unreachable!("found as a user") };
        let text = quoted(question).unwrap_or(question).to_owned();
        let call = |n: u32, name: &str, arguments: Value| ToolCall {
            id: format!("call_{}_{}_{n}", request.turn, request.step),
            name: name.into(),
            arguments,
        };
        let results: Vec<(bool, &str)> = this_turn
            .iter()
            .filter_map(|m| match m {
                Message::Tool { output, is_error, .. } => Some((*is_error, output.as_str())),
                _ => None,
            })
            .collect();
        match results.first() {
            None => (
                "Let me count them.".into(),
                vec![call(1, WordCount::NAME, json!({"input": text}))],
            ),
            Some((true, _)) if results.len() == 1 => (
                "I named the argument wrong; again, with `text`.".into(),
                vec![
                    call(1, WordCount::NAME, json!({"text": text})),
                    call(2, EchoTool::NAME, json!({"text": text})),
                ],
            ),
            _ => {
                let counts: Option<Value> =
                    results.iter().find_map(|(error, out)| (!error).then(|| out.parse().ok())?);
                let answer = match counts {
                    Some(c) => format!(
                        "\"{text}\" has {} ({}, {}).",
                        count(c["words"].as_u64().unwrap_or(0), "word", "words"),
                        count(c["lines"].as_u64().unwrap_or(0), "line", "lines"),
                        count(c["chars"].as_u64().unwrap_or(0), "character", "characters")
                    ),
                    None => "I could not count them.".into(),
                };
                (answer, vec![])
            }
        }
    }
}

/// The text between the first and the last double quote of `question`, if any.
fn quoted(question: &str) -> Option<&str> {
    let (start, end) = (question.find('"')?, question.rfind('"')?);
    (end > start).then(|| &question[start + 1..end])
}

impl Adapter for Model {
    fn call(
        &self,
        request: Request,
        chunks: ChunkSink,
    ) -> BoxFuture<'static, Result<Completion, Failure>> {
        let (text, tool_calls) = Self::reply(&request);
        Box::pin(async move {
            let _ = chunks.send(text);
            Ok(Completion { tool_calls, usage: None })
        })
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    run(&Args::parse(), &mut anstream::stdout()).await
}

async fn run(args: &Args, out: &mut impl Write) -> anyhow::Result<()> {
    let runtime = Runtime::builder()
        .route(Route::new("rules", Arc::new(Model)).model("rules-1"))
        .tool(Arc::new(WordCount))
        .tool(Arc::new(EchoTool))
        .build()
        .await?;
    let session = runtime.session("tool-agent").await?;

    let prompt = format!("How many words are in \"{}\"?", args.text);
    writeln!(out, "> {prompt}")?;
    let mut turn = session.prompt(prompt)?;
    let (mut steps, mut calls) = (0, 0);
    while let Some(event) = turn.next_event().await {
        match &event.event {
            Event::StepStart(step) => {
                steps += 1;
                write!(out, "[step {}] ", step.step)?;
            }
            Event::AssistantMessage(message) => writeln!(out, "{}", message.text)?,
            Event::ToolCall(call) => {
                calls += 1;
                writeln!(out, "  → {} {}", call.name, call.arguments)?;
            }
            Event::ToolResult(result) if result.is_error => {
                writeln!(out, "  ← error: {}", result.output)?;
            }
            Event::ToolResult(result) => writeln!(out, "  ← {}", result.output)?,
            _ => {}
        }
    }
    let outcome = turn.await?;
    match &outcome.reason {
        TurnEndReason::Completed => writeln!(
            out,
            "turn {} ended: completed in {steps} steps, {calls} tool calls",
            outcome.turn
        )?,
        other => writeln!(out, "turn {} ended: {other:?}", outcome.turn)?,
    }

    let events = session.events().await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_model_corrects_a_tool_error_and_answers_from_the_results() {
        let mut out = Vec::new();
        run(&Args { text: "to be or not to be".into() }, &mut out).await.unwrap();
        let out = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines,
            [
                r#"> How many words are in "to be or not to be"?"#,
                "[step 1] Let me count them.",
                r#"  → word_count {"input":"to be or not to be"}"#,
                "  ← error: word_count: missing arguments.text (a string)",
                "[step 2] I named the argument wrong; again, with `text`.",
                r#"  → word_count {"text":"to be or not to be"}"#,
                r#"  ← {"chars":18,"lines":1,"words":6}"#,
                r#"  → echo {"text":"to be or not to be"}"#,
                "  ← to be or not to be",
                r#"[step 3] "to be or not to be" has 6 words (1 line, 18 characters)."#,
                "turn 1 ended: completed in 3 steps, 3 tool calls",
                "invariants: every rule holds",
                "after shutdown: 0 actors, 0 tasks",
            ]
        );
    }

    #[test]
    fn word_count_counts_and_answers_bad_arguments_with_an_error_the_model_sees() {
        let cases = [
            (
                json!({"text": "a b  c\nd"}),
                ToolOutcome::Output(r#"{"chars":8,"lines":2,"words":4}"#.into()),
            ),
            (json!({"text": ""}), ToolOutcome::Output(r#"{"chars":0,"lines":0,"words":0}"#.into())),
            (
                json!({"txt": "a"}),
                ToolOutcome::Error("word_count: missing arguments.text (a string)".into()),
            ),
            (
                json!({"text": 3}),
                ToolOutcome::Error("word_count: missing arguments.text (a string)".into()),
            ),
        ];
        for (arguments, want) in cases {
            let got =
                tokio_test::block_on(WordCount.call(arguments.clone(), CancellationToken::new()));
            assert_eq!(got, want, "{arguments}");
        }
    }
}
