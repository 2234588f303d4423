//! A test adapter: each session plays its own copy of one script, one entry per attempt, and
//! every request is recorded with the (virtual) instant it arrived.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

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
    /// Stream the text as one chunk, then answer with these tool calls.
    Reply { text: String, tool_calls: Vec<ToolCall> },
    /// Fail.
    Fail(Failure),
    /// Never answer (until cancelled).
    Stall,
}

/// A reply without tool calls.
pub fn reply(text: &str) -> Answer {
    Answer::Reply { text: text.to_owned(), tool_calls: vec![] }
}

/// A reply that calls the echo tool once.
pub fn echo(text: &str) -> Answer {
    Answer::Reply {
        text: text.to_owned(),
        tool_calls: vec![ToolCall {
            id: format!("call-{text}"),
            name: "echo".into(),
            arguments: serde_json::json!({"text": text}),
        }],
    }
}

/// A failure with `code` and `message`.
pub fn fail(code: &str, message: &str) -> Answer {
    Answer::Fail(Failure::new(code, message).unwrap())
}

/// A failure with a provider-suggested delay.
pub fn fail_after(code: &str, message: &str, retry_after_ms: f64) -> Answer {
    Answer::Fail(Failure::new(code, message).unwrap().with_retry_after_ms(retry_after_ms).unwrap())
}

/// A request as the adapter saw it, and when.
#[derive(Debug, Clone)]
pub struct Seen {
    pub request: Request,
    pub at: Instant,
}

/// Plays a script per session; a session whose script ran out gets `SCRIPT_EXHAUSTED`.
pub struct ScriptAdapter {
    script: Vec<Answer>,
    sessions: Mutex<HashMap<String, VecDeque<Answer>>>,
    seen: Mutex<Vec<Seen>>,
}

impl ScriptAdapter {
    pub fn new(script: Vec<Answer>) -> Arc<Self> {
        Arc::new(Self { script, sessions: Mutex::default(), seen: Mutex::default() })
    }

    /// Every request, in arrival order.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// How many requests arrived.
    pub fn requests(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// When each request arrived, as time since `origin`.
    pub fn times(&self, origin: Instant) -> Vec<Duration> {
        self.seen().iter().map(|s| s.at - origin).collect()
    }
}

impl Adapter for ScriptAdapter {
    fn call(
        &self,
        request: Request,
        chunks: ChunkSink,
    ) -> BoxFuture<'static, Result<Completion, Failure>> {
        let next = self
            .sessions
            .lock()
            .unwrap()
            .entry(request.session.clone())
            .or_insert_with(|| self.script.clone().into())
            .pop_front();
        self.seen.lock().unwrap().push(Seen { request, at: Instant::now() });
        Box::pin(async move {
            match next {
                Some(Answer::Reply { text, tool_calls }) => {
                    let _ = chunks.send(text);
                    Ok(Completion { tool_calls, usage: None })
                }
                Some(Answer::Fail(failure)) => Err(failure),
                Some(Answer::Stall) => std::future::pending().await,
                None => Err(Failure::new(failure::SCRIPT_EXHAUSTED, "the script ran out").unwrap()),
            }
        })
    }
}
