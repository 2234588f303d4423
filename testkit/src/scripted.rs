//! [`Scripted`]: a test adapter that answers each attempt with the next [`Answer`] of a script
//! and records every request with the (virtual) instant it arrived.
//!
//! One script is shared by every session ([`Scripted::new`]), or each session plays its own
//! copy ([`Scripted::per_session`]); [`Scripted::always`] answers every attempt alike. An
//! attempt past the end of its script fails with `SCRIPT_EXHAUSTED`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rein_runtime::BoxFuture;
use rein_runtime::event::ToolCall;
use rein_runtime::failure::{self, Failure};
use rein_runtime::provider::{Adapter, ChunkSink, Completion, Request};
use tokio::time::Instant;

/// One attempt's answer.
#[derive(Debug, Clone)]
pub enum Answer {
    /// Stream `chunks`, then answer with these tool calls.
    Reply {
        /// The text chunks, streamed in order.
        chunks: Vec<String>,
        /// The tool calls of the answer.
        tool_calls: Vec<ToolCall>,
    },
    /// Stream `chunks`, then fail.
    Fail {
        /// The text chunks streamed before the failure.
        chunks: Vec<String>,
        /// The failure.
        failure: Failure,
    },
    /// Stream `chunks`, then never answer (until cancelled).
    Stall {
        /// The text chunks streamed before the stall.
        chunks: Vec<String>,
    },
    /// Wait (on tokio's clock), then answer.
    After(Duration, Box<Answer>),
}

fn owned(chunks: &[&str]) -> Vec<String> {
    chunks.iter().map(|c| (*c).to_owned()).collect()
}

/// Streams `chunks`, then answers without tool calls.
pub fn reply(chunks: &[&str]) -> Answer {
    Answer::Reply { chunks: owned(chunks), tool_calls: vec![] }
}

/// Streams `chunks`, then calls the tools `calls` (`(id, name, arguments)`).
pub fn call(chunks: &[&str], calls: &[(&str, &str, serde_json::Value)]) -> Answer {
    Answer::Reply {
        chunks: owned(chunks),
        tool_calls: calls
            .iter()
            .map(|(id, name, arguments)| ToolCall {
                id: (*id).to_owned(),
                name: (*name).to_owned(),
                arguments: arguments.clone(),
            })
            .collect(),
    }
}

/// Streams `text` as one chunk and calls the echo tool once with it (id `call-TEXT`).
pub fn echo(text: &str) -> Answer {
    call(&[text], &[(&format!("call-{text}"), "echo", serde_json::json!({"text": text}))])
}

/// Fails at once with `code` and `message`.
pub fn fail(code: &str, message: &str) -> Answer {
    Answer::Fail { chunks: vec![], failure: Failure::new(code, message).unwrap() }
}

/// Fails at once with `code` and `message`, the provider suggesting a retry after
/// `retry_after_ms`.
pub fn fail_after(code: &str, message: &str, retry_after_ms: f64) -> Answer {
    let failure = Failure::new(code, message).unwrap().with_retry_after_ms(retry_after_ms).unwrap();
    Answer::Fail { chunks: vec![], failure }
}

/// Streams `chunks`, then fails with `code` (message `CODE happened`).
pub fn fail_streamed(code: &str, chunks: &[&str]) -> Answer {
    Answer::Fail {
        chunks: owned(chunks),
        failure: Failure::new(code, format!("{code} happened")).unwrap(),
    }
}

/// Streams `chunks`, then never answers.
pub fn stall(chunks: &[&str]) -> Answer {
    Answer::Stall { chunks: owned(chunks) }
}

/// Waits `ms`, then answers `answer`.
pub fn after(ms: u64, answer: Answer) -> Answer {
    Answer::After(Duration::from_millis(ms), Box::new(answer))
}

/// A request as the adapter saw it, and when.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The request.
    pub request: Request,
    /// When it arrived (tokio's clock).
    pub at: Instant,
}

/// Where the next answer comes from.
enum Script {
    /// One queue for every session.
    Shared(Mutex<VecDeque<Answer>>),
    /// Each session's own copy of the script, taken on its first request.
    PerSession { script: Vec<Answer>, sessions: Mutex<HashMap<String, VecDeque<Answer>>> },
}

/// Answers attempts from a script, in order; records the requests.
pub struct Scripted {
    script: Script,
    /// What an attempt past the script's end gets (`SCRIPT_EXHAUSTED` when `None`).
    repeat: Option<Answer>,
    seen: Mutex<Vec<Seen>>,
}

impl Scripted {
    fn with(script: Script, repeat: Option<Answer>) -> Arc<Self> {
        Arc::new(Self { script, repeat, seen: Mutex::default() })
    }

    /// Plays `script` once, whichever session asks.
    pub fn new(script: Vec<Answer>) -> Arc<Self> {
        Self::with(Script::Shared(Mutex::new(script.into())), None)
    }

    /// Plays `script` from its start for each session.
    pub fn per_session(script: Vec<Answer>) -> Arc<Self> {
        Self::with(Script::PerSession { script, sessions: Mutex::default() }, None)
    }

    /// Answers every attempt with `answer`.
    pub fn always(answer: Answer) -> Arc<Self> {
        Self::with(Script::Shared(Mutex::default()), Some(answer))
    }

    /// Every request, in arrival order, with when it arrived.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// Every request, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        self.seen.lock().unwrap().iter().map(|s| s.request.clone()).collect()
    }

    /// How many requests arrived.
    pub fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// When each request arrived, as time since `origin`.
    pub fn times(&self, origin: Instant) -> Vec<Duration> {
        self.seen.lock().unwrap().iter().map(|s| s.at - origin).collect()
    }

    fn next(&self, session: &str) -> Option<Answer> {
        let next = match &self.script {
            Script::Shared(queue) => queue.lock().unwrap().pop_front(),
            Script::PerSession { script, sessions } => sessions
                .lock()
                .unwrap()
                .entry(session.to_owned())
                .or_insert_with(|| script.clone().into())
                .pop_front(),
        };
        next.or_else(|| self.repeat.clone())
    }
}

fn stream(texts: Vec<String>, chunks: &ChunkSink) {
    for text in texts {
        let _ = chunks.send(text);
    }
}

async fn play(answer: Answer, chunks: ChunkSink) -> Result<Completion, Failure> {
    match answer {
        Answer::After(delay, answer) => {
            tokio::time::sleep(delay).await;
            Box::pin(play(*answer, chunks)).await
        }
        Answer::Reply { chunks: texts, tool_calls } => {
            stream(texts, &chunks);
            Ok(Completion { tool_calls, usage: None })
        }
        Answer::Fail { chunks: texts, failure } => {
            stream(texts, &chunks);
            Err(failure)
        }
        Answer::Stall { chunks: texts } => {
            stream(texts, &chunks);
            std::future::pending().await
        }
    }
}

impl Adapter for Scripted {
    fn call(
        &self,
        request: Request,
        chunks: ChunkSink,
    ) -> BoxFuture<'static, Result<Completion, Failure>> {
        let next = self.next(&request.session);
        self.seen.lock().unwrap().push(Seen { request, at: Instant::now() });
        Box::pin(async move {
            match next {
                Some(answer) => play(answer, chunks).await,
                None => Err(Failure::new(failure::SCRIPT_EXHAUSTED, "the script ran out").unwrap()),
            }
        })
    }
}
