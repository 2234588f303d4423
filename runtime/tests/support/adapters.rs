//! A test adapter: one scripted answer per attempt, recording every request it saw.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rein_runtime::BoxFuture;
use rein_runtime::event::ToolCall;
use rein_runtime::failure::{self, Failure};
use rein_runtime::provider::{Adapter, ChunkSink, Completion, Request};

/// One attempt's answer.
#[derive(Debug, Clone)]
pub enum Answer {
    /// Stream `chunks`, then answer with these tool calls.
    Reply { chunks: Vec<String>, tool_calls: Vec<ToolCall> },
    /// Stream `chunks`, then fail.
    Fail { chunks: Vec<String>, failure: Failure },
    /// Stream `chunks`, then never answer.
    Stall { chunks: Vec<String> },
    /// Wait, then answer.
    After(Duration, Box<Answer>),
}

pub fn reply(chunks: &[&str]) -> Answer {
    Answer::Reply { chunks: chunks.iter().map(|c| c.to_string()).collect(), tool_calls: vec![] }
}

pub fn call(chunks: &[&str], calls: &[(&str, &str, serde_json::Value)]) -> Answer {
    Answer::Reply {
        chunks: chunks.iter().map(|c| c.to_string()).collect(),
        tool_calls: calls
            .iter()
            .map(|(id, name, arguments)| ToolCall {
                id: id.to_string(),
                name: name.to_string(),
                arguments: arguments.clone(),
            })
            .collect(),
    }
}

pub fn fail(code: &str, chunks: &[&str]) -> Answer {
    Answer::Fail {
        chunks: chunks.iter().map(|c| c.to_string()).collect(),
        failure: Failure::new(code, format!("{code} happened")).unwrap(),
    }
}

pub fn stall(chunks: &[&str]) -> Answer {
    Answer::Stall { chunks: chunks.iter().map(|c| c.to_string()).collect() }
}

pub fn after(ms: u64, answer: Answer) -> Answer {
    Answer::After(Duration::from_millis(ms), Box::new(answer))
}

/// Answers attempts from a script, in order; records the requests.
#[derive(Default)]
pub struct Scripted {
    script: Mutex<VecDeque<Answer>>,
    seen: Mutex<Vec<Request>>,
    repeat: Mutex<Option<Answer>>,
}

impl Scripted {
    pub fn new(script: Vec<Answer>) -> Arc<Self> {
        Arc::new(Self { script: Mutex::new(script.into()), ..Self::default() })
    }

    /// Answers every attempt with `answer`.
    pub fn always(answer: Answer) -> Arc<Self> {
        let s = Self::default();
        *s.repeat.lock().unwrap() = Some(answer);
        Arc::new(s)
    }

    /// The requests seen so far.
    pub fn seen(&self) -> Vec<Request> {
        self.seen.lock().unwrap().clone()
    }
}

async fn play(answer: Answer, chunks: ChunkSink) -> Result<Completion, Failure> {
    match answer {
        Answer::After(delay, answer) => {
            tokio::time::sleep(delay).await;
            Box::pin(play(*answer, chunks)).await
        }
        Answer::Reply { chunks: texts, tool_calls } => {
            for text in texts {
                let _ = chunks.send(text);
            }
            Ok(Completion { tool_calls, usage: None })
        }
        Answer::Fail { chunks: texts, failure } => {
            for text in texts {
                let _ = chunks.send(text);
            }
            Err(failure)
        }
        Answer::Stall { chunks: texts } => {
            for text in texts {
                let _ = chunks.send(text);
            }
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
        self.seen.lock().unwrap().push(request);
        let next =
            self.script.lock().unwrap().pop_front().or_else(|| self.repeat.lock().unwrap().clone());
        Box::pin(async move {
            match next {
                Some(answer) => play(answer, chunks).await,
                None => Err(Failure::new(failure::SCRIPT_EXHAUSTED, "the script ran out").unwrap()),
            }
        })
    }
}
