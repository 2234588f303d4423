//! The scripted provider: a provider [`Adapter`] that plays a script, one entry per attempt.
//!
//! It is both the test double of the runtime (a scripted double, not a mock of its internals) and
//! the provider of scenario files (`docs/runtime-semantics.md`, "Scenario files"). Each call takes
//! the next entry of its script, whatever the turn, step or attempt, so one script is shared by
//! every attempt of every turn that uses the route:
//!
//! - [`Scripted::Reply`]: streams its chunks, waits its latency, answers a [`Completion`];
//! - [`Scripted::Fail`]: streams its chunks, waits its latency, fails with its [`Failure`];
//! - [`Scripted::Stall`]: never answers; only cancellation (dropping the future) ends it.
//!
//! When the script has run out, a call fails with [`SCRIPT_EXHAUSTED`]; the runtime ends the turn
//! with that failure without offering it to the waterfall (no policy may retry a finished script).
//! A provider made [`ScriptedProvider::recording`] keeps every [`Request`] it received, so a test
//! can assert that a retried request equals the failed one; by default it keeps none (each
//! request carries the whole history: a long session would keep all of them, quadratically).
//!
//! # Why chunks first, latency second
//!
//! An attempt streams all its chunks as soon as it is called, then waits `latency`, then answers.
//! So a cancellation inside the latency window lands *mid-stream*: the chunks are already in the
//! log, the outcome never arrives. That is the case the runtime must get right (chunks of an
//! aborted or failed attempt never reach `assistant/message` nor the next request), and a script
//! can provoke it exactly, on virtual time, with one `latencyMs`.
//!
//! # Why the entry is taken when `call` is made
//!
//! The entry is consumed (and the request recorded) synchronously in [`Adapter::call`], not when
//! the returned future is first polled. An attempt that is cancelled before it ever runs still
//! used its entry, so the mapping "n-th call ↔ n-th entry" holds whatever the timing.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rein_runtime::BoxFuture;
use rein_runtime::event::{ToolCall, Usage};
use rein_runtime::failure::{Failure, SCRIPT_EXHAUSTED};
use rein_runtime::provider::{Adapter, ChunkSink, Completion, Request};

/// One scripted attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Scripted {
    /// The attempt succeeds.
    Reply(ScriptedReply),
    /// The attempt fails.
    Fail(ScriptedFail),
    /// The attempt never answers until it is cancelled.
    Stall,
}

impl Scripted {
    /// A reply whose text streams as one chunk (none when `text` is empty).
    pub fn reply(text: impl Into<String>) -> Self {
        Scripted::Reply(ScriptedReply::text(text))
    }

    /// A failure with no chunks and no latency.
    pub fn fail(failure: Failure) -> Self {
        Scripted::Fail(ScriptedFail::new(failure))
    }

    /// An attempt that never answers.
    pub fn stall() -> Self {
        Scripted::Stall
    }
}

/// A successful scripted attempt. Its text is the concatenation of its chunks.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScriptedReply {
    /// The raw chunks, streamed in order before the outcome.
    pub chunks: Vec<String>,
    /// The tool calls the model asks for. A call with an empty `id` gets a stable one when the
    /// reply is played: `call_<turn>_<step>_<n>`, `n` its 1-based place in the reply (see
    /// [`assign_call_ids`]).
    pub tool_calls: Vec<ToolCall>,
    /// The usage reported.
    pub usage: Option<Usage>,
    /// How long after the chunks the outcome arrives.
    pub latency: Duration,
}

impl ScriptedReply {
    /// A reply streaming `text` as one chunk (no chunk at all when it is empty).
    pub fn text(text: impl Into<String>) -> Self {
        let text = text.into();
        let chunks = if text.is_empty() { Vec::new() } else { vec![text] };
        Self { chunks, ..Self::default() }
    }

    /// A reply streaming these chunks.
    pub fn chunks<S: Into<String>>(chunks: impl IntoIterator<Item = S>) -> Self {
        Self { chunks: chunks.into_iter().map(Into::into).collect(), ..Self::default() }
    }

    /// With tool calls.
    #[must_use]
    pub fn with_tool_calls(mut self, tool_calls: Vec<ToolCall>) -> Self {
        self.tool_calls = tool_calls;
        self
    }

    /// With usage.
    #[must_use]
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// With a latency between the chunks and the outcome.
    #[must_use]
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// The text the chunks make.
    pub fn full_text(&self) -> String {
        self.chunks.concat()
    }
}

/// A failing scripted attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptedFail {
    /// The failure it ends with.
    pub failure: Failure,
    /// Raw chunks streamed before the failure (a partial answer).
    pub chunks: Vec<String>,
    /// How long after the chunks the failure arrives.
    pub latency: Duration,
}

impl ScriptedFail {
    /// A failure with no chunks and no latency.
    pub fn new(failure: Failure) -> Self {
        Self { failure, chunks: Vec::new(), latency: Duration::ZERO }
    }

    /// With chunks streamed before the failure.
    #[must_use]
    pub fn with_chunks<S: Into<String>>(mut self, chunks: impl IntoIterator<Item = S>) -> Self {
        self.chunks = chunks.into_iter().map(Into::into).collect();
        self
    }

    /// With a latency between the chunks and the failure.
    #[must_use]
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }
}

/// A provider adapter playing a script. Clones share the script and the record of requests, so a
/// test keeps one clone and hands another to the runtime.
#[derive(Debug, Clone, Default)]
pub struct ScriptedProvider {
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    script: VecDeque<Scripted>,
    length: usize,
    /// The requests received, when recording.
    requests: Option<Vec<Request>>,
}

impl ScriptedProvider {
    /// A provider playing `script`, one entry per attempt.
    pub fn new(script: impl IntoIterator<Item = Scripted>) -> Self {
        let script: VecDeque<Scripted> = script.into_iter().collect();
        let length = script.len();
        Self { state: Arc::new(Mutex::new(State { script, length, requests: None })) }
    }

    /// The same provider, keeping every request it receives from now on (see
    /// [`ScriptedProvider::requests`]).
    #[must_use]
    pub fn recording(self) -> Self {
        self.lock().requests.get_or_insert_with(Vec::new);
        self
    }

    /// Every request received while recording, in call order (including those that found the
    /// script exhausted); empty unless the provider is [`ScriptedProvider::recording`].
    pub fn requests(&self) -> Vec<Request> {
        self.lock().requests.clone().unwrap_or_default()
    }

    /// How many script entries are left.
    pub fn remaining(&self) -> usize {
        self.lock().script.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the state half-updated (each update is
        // one push or pop), so a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Gives every call with an empty id the id `call_<turn>_<step>_<n>`, `n` its 1-based place in
/// `calls`: stable across the attempts of a step (a retried step asks for the same calls), and
/// different between steps and turns. Should another call of the reply already carry that id,
/// `_2`, `_3`… is appended until it is unique.
pub fn assign_call_ids(calls: &mut [ToolCall], turn: u32, step: u32) {
    for n in 0..calls.len() {
        if !calls[n].id.is_empty() {
            continue;
        }
        let base = format!("call_{turn}_{step}_{}", n + 1);
        let mut id = base.clone();
        let mut k = 1;
        while calls.iter().any(|c| c.id == id) {
            k += 1;
            id = format!("{base}_{k}");
        }
        calls[n].id = id;
    }
}

impl Adapter for ScriptedProvider {
    fn call(
        &self,
        request: Request,
        chunks: ChunkSink,
    ) -> BoxFuture<'static, Result<Completion, Failure>> {
        let (turn, step) = (request.turn, request.step);
        let (entry, exhausted) = {
            let mut state = self.lock();
            let entry = state.script.pop_front();
            let exhausted = entry.is_none().then(|| exhausted_message(&request, state.length));
            if let Some(requests) = &mut state.requests {
                requests.push(request);
            }
            (entry, exhausted)
        };
        Box::pin(async move {
            match entry {
                None => Err(Failure::internal(
                    SCRIPT_EXHAUSTED,
                    exhausted.as_deref().unwrap_or("script exhausted"),
                )),
                Some(Scripted::Reply(mut reply)) => {
                    assign_call_ids(&mut reply.tool_calls, turn, step);
                    stream(chunks, reply.chunks);
                    wait(reply.latency).await;
                    Ok(Completion { tool_calls: reply.tool_calls, usage: reply.usage })
                }
                Some(Scripted::Fail(fail)) => {
                    stream(chunks, fail.chunks);
                    wait(fail.latency).await;
                    Err(fail.failure)
                }
                Some(Scripted::Stall) => {
                    drop(chunks);
                    std::future::pending().await
                }
            }
        })
    }
}

/// Sends every chunk, then closes the sink so the reader knows the stream is over. A reader that
/// has gone away (the attempt was cancelled) is not an error.
fn stream(sink: ChunkSink, chunks: Vec<String>) {
    for chunk in chunks {
        if sink.send(chunk).is_err() {
            break;
        }
    }
}

async fn wait(latency: Duration) {
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
}

fn exhausted_message(request: &Request, length: usize) -> String {
    format!(
        "script exhausted: provider {:?} has {length} script entries, all used \
         (turn {}, step {}, attempt {})",
        request.provider, request.turn, request.step, request.attempt
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rein_runtime::provider::Message;
    use tokio::time::Instant;

    fn request(turn: u32, attempt: u32) -> Request {
        Request {
            session: "s".into(),
            turn,
            step: 1,
            attempt,
            provider: "mock".into(),
            model: "scripted".into(),
            messages: vec![Message::User { text: "hi".into() }].into(),
            tools: Vec::new(),
            generation: Default::default(),
        }
    }

    /// Calls once; returns the chunks received and the outcome.
    async fn call(
        provider: &ScriptedProvider,
        request: Request,
    ) -> (Vec<String>, Result<Completion, Failure>) {
        let (tx, mut rx) = ChunkSink::channel();
        let outcome = provider.call(request, tx).await;
        let mut chunks = Vec::new();
        while let Ok(chunk) = rx.try_recv() {
            chunks.push(chunk);
        }
        (chunks, outcome)
    }

    fn failure() -> Failure {
        Failure::new("RATE_LIMIT", "busy").unwrap().with_status(429).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_reply_streams_its_chunks_in_order_then_answers_after_its_latency() {
        let call_id = ToolCall {
            id: "c1".into(),
            name: "echo".into(),
            arguments: serde_json::json!({"text": "x"}),
        };
        let usage = Usage { input_tokens: 3, output_tokens: 2 };
        let provider = ScriptedProvider::new([Scripted::Reply(
            ScriptedReply::chunks(["do", "n", "e"])
                .with_tool_calls(vec![call_id.clone()])
                .with_usage(usage)
                .with_latency(Duration::from_millis(250)),
        )]);
        let start = Instant::now();
        let (chunks, outcome) = call(&provider, request(1, 1)).await;
        assert_eq!(start.elapsed(), Duration::from_millis(250));
        assert_eq!(chunks, ["do", "n", "e"]);
        assert_eq!(outcome, Ok(Completion { tool_calls: vec![call_id], usage: Some(usage) }));
    }

    #[tokio::test(start_paused = true)]
    async fn chunks_arrive_before_the_latency_and_the_stream_closes_before_the_outcome() {
        let provider = ScriptedProvider::new([Scripted::Reply(
            ScriptedReply::chunks(["a", "b"]).with_latency(Duration::from_millis(100)),
        )]);
        let (tx, mut rx) = ChunkSink::channel();
        let start = Instant::now();
        let attempt = tokio::spawn(provider.call(request(1, 1), tx));
        assert_eq!(rx.recv().await.as_deref(), Some("a"));
        assert_eq!(rx.recv().await.as_deref(), Some("b"));
        assert_eq!(rx.recv().await, None, "the sink is closed once the chunks are sent");
        assert_eq!(start.elapsed(), Duration::ZERO, "chunks come first");
        assert!(attempt.await.unwrap().is_ok());
        assert_eq!(start.elapsed(), Duration::from_millis(100));
    }

    #[tokio::test(start_paused = true)]
    async fn a_text_reply_streams_the_text_as_one_chunk_and_an_empty_one_streams_nothing() {
        let provider = ScriptedProvider::new([Scripted::reply("done"), Scripted::reply("")]);
        let (chunks, outcome) = call(&provider, request(1, 1)).await;
        assert_eq!(chunks, ["done"]);
        assert_eq!(outcome, Ok(Completion::default()));
        let (chunks, outcome) = call(&provider, request(1, 2)).await;
        assert!(chunks.is_empty());
        assert_eq!(outcome, Ok(Completion::default()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_streams_its_partial_chunks_then_fails_after_its_latency() {
        let provider = ScriptedProvider::new([Scripted::Fail(
            ScriptedFail::new(failure())
                .with_chunks(["par", "tial"])
                .with_latency(Duration::from_millis(40)),
        )]);
        let start = Instant::now();
        let (chunks, outcome) = call(&provider, request(1, 1)).await;
        assert_eq!(start.elapsed(), Duration::from_millis(40));
        assert_eq!(chunks, ["par", "tial"]);
        assert_eq!(outcome, Err(failure()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stall_never_answers_until_cancelled_and_the_next_call_plays_the_next_entry() {
        let provider = ScriptedProvider::new([Scripted::stall(), Scripted::reply("after")]);
        let (tx, mut rx) = ChunkSink::channel();
        let stalled = provider.call(request(1, 1), tx);
        let hour = Duration::from_secs(3600);
        assert!(tokio::time::timeout(hour, stalled).await.is_err(), "still pending after 1 h");
        assert_eq!(rx.recv().await, None, "a stall streams nothing");
        // The timeout dropped (cancelled) the stalled future; the script moves on.
        let (chunks, outcome) = call(&provider, request(1, 2)).await;
        assert_eq!(chunks, ["after"]);
        assert!(outcome.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn cancelling_inside_the_latency_leaves_the_chunks_sent_and_no_outcome() {
        let provider = ScriptedProvider::new([
            Scripted::Reply(ScriptedReply::text("late").with_latency(Duration::from_millis(500))),
            Scripted::reply("next"),
        ]);
        let (tx, mut rx) = ChunkSink::channel();
        let attempt = provider.call(request(1, 1), tx);
        let cut = tokio::time::timeout(Duration::from_millis(499), attempt).await;
        assert!(cut.is_err(), "1 ms before its latency the attempt has not answered");
        assert_eq!(rx.recv().await.as_deref(), Some("late"));
        assert_eq!(provider.remaining(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn an_exhausted_script_fails_with_script_exhausted() {
        let provider = ScriptedProvider::new([Scripted::reply("only")]).recording();
        assert!(call(&provider, request(1, 1)).await.1.is_ok());
        for attempt in [1, 2] {
            let (chunks, outcome) = call(&provider, request(2, attempt)).await;
            assert!(chunks.is_empty());
            let failure = outcome.unwrap_err();
            assert_eq!(failure.code(), SCRIPT_EXHAUSTED);
            assert!(failure.message().contains("\"mock\" has 1 script entries"), "{failure:?}");
            assert!(failure.message().contains(&format!("attempt {attempt}")), "{failure:?}");
        }
        assert_eq!(provider.requests().len(), 3, "exhausted calls are recorded too");
    }

    #[tokio::test(start_paused = true)]
    async fn one_script_is_shared_by_every_turn_and_clones_share_it() {
        let provider = ScriptedProvider::new([
            Scripted::fail(failure()),
            Scripted::reply("one"),
            Scripted::reply("two"),
        ])
        .recording();
        let handle = provider.clone();
        assert_eq!(call(&provider, request(1, 1)).await.1, Err(failure()));
        assert_eq!(call(&provider, request(1, 2)).await.0, ["one"]);
        assert_eq!(call(&provider, request(2, 1)).await.0, ["two"]);
        assert_eq!(handle.remaining(), 0);
        let seen: Vec<(u32, u32)> = handle.requests().iter().map(|r| (r.turn, r.attempt)).collect();
        assert_eq!(seen, [(1, 1), (1, 2), (2, 1)]);
        assert_eq!(handle.requests()[0], request(1, 1), "requests are recorded verbatim");
    }

    #[tokio::test(start_paused = true)]
    async fn requests_are_kept_only_when_recording() {
        let provider = ScriptedProvider::new([Scripted::reply("a"), Scripted::reply("b")]);
        assert_eq!(call(&provider, request(1, 1)).await.0, ["a"]);
        assert!(provider.requests().is_empty(), "a long session would keep every history");
        let provider = provider.recording();
        assert_eq!(call(&provider, request(1, 2)).await.0, ["b"]);
        assert_eq!(provider.requests(), [request(1, 2)], "kept from the moment it records");
    }

    #[tokio::test(start_paused = true)]
    async fn the_entry_is_taken_at_call_time_even_if_the_future_never_runs() {
        let provider = ScriptedProvider::new([Scripted::reply("a"), Scripted::reply("b")]);
        let (tx, _rx) = ChunkSink::channel();
        drop(provider.call(request(1, 1), tx));
        assert_eq!(provider.remaining(), 1);
        assert_eq!(call(&provider, request(1, 2)).await.0, ["b"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_reader_that_went_away_does_not_break_the_attempt() {
        let provider = ScriptedProvider::new([Scripted::Reply(ScriptedReply::chunks(["x", "y"]))]);
        let (tx, rx) = ChunkSink::channel();
        drop(rx);
        assert!(provider.call(request(1, 1), tx).await.is_ok());
    }

    #[test]
    fn calls_without_an_id_get_a_stable_one_from_turn_step_and_place() {
        let call = |id: &str| ToolCall {
            id: id.into(),
            name: "echo".into(),
            arguments: serde_json::json!({}),
        };
        // (ids as written, turn, step) → ids as played
        let cases: [(&[&str], u32, u32, &[&str]); 4] = [
            (&["", ""], 2, 3, &["call_2_3_1", "call_2_3_2"]),
            (&["mine", ""], 1, 1, &["mine", "call_1_1_2"]),
            // An explicit id that happens to be the generated one: the generated one gives way.
            (&["", "call_1_1_1"], 1, 1, &["call_1_1_1_2", "call_1_1_1"]),
            (&["a", "b"], 1, 1, &["a", "b"]),
        ];
        for (written, turn, step, played) in cases {
            let mut calls: Vec<ToolCall> = written.iter().map(|id| call(id)).collect();
            assign_call_ids(&mut calls, turn, step);
            let ids: Vec<&str> = calls.iter().map(|c| c.id.as_str()).collect();
            assert_eq!(ids, played, "{written:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn every_attempt_of_a_step_gets_the_same_generated_ids() {
        let unnamed =
            ToolCall { id: String::new(), name: "echo".into(), arguments: serde_json::json!({}) };
        let reply = Scripted::Reply(ScriptedReply::text("x").with_tool_calls(vec![unnamed]));
        let provider = ScriptedProvider::new([reply.clone(), reply]);
        let first = call(&provider, request(4, 1)).await.1.unwrap();
        let second = call(&provider, request(4, 2)).await.1.unwrap();
        assert_eq!(first.tool_calls[0].id, "call_4_1_1");
        assert_eq!(first, second);
    }
}
