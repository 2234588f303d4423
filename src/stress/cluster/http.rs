//! The run's HTTP client for the nodes' API (`rein node` serves `rein console`'s): JSON requests,
//! and the streams of a turn's events (`POST /api/sessions/{id}/turns`, `GET
//! /api/sessions/{id}/turns/{turn}`), one JSON object a line. Loopback only, HTTP/1.1, pooled
//! connections kept idle for less than the console's head timeout (10 s), so a pooled
//! connection is not closed under a request by the server.

use std::time::Duration;

use axum::body::{Body, BodyDataStream};
use futures::StreamExt as _;
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

/// How long a pooled connection may stay idle.
const IDLE: Duration = Duration::from_secs(4);

/// The client.
#[derive(Clone)]
pub(crate) struct Http {
    client: Client<HttpConnector, Body>,
}

/// Why a request got no answer worth reading.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Failed {
    /// No answer: the node is down or went away mid-request (whether the request had effects
    /// is unknown).
    Unreachable(String),
    /// The node answered with an error (`{"error": {"kind", "message"}}`).
    Refused {
        /// The status.
        status: u16,
        /// The error's kind.
        kind: String,
        /// Its message.
        message: String,
    },
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failed::Unreachable(why) => write!(f, "no answer: {why}"),
            Failed::Refused { status, kind, message } => write!(f, "{status} {kind}: {message}"),
        }
    }
}

impl Http {
    /// A client.
    pub(crate) fn new() -> Self {
        let client = Client::builder(TokioExecutor::new()).pool_idle_timeout(IDLE).build_http();
        Self { client }
    }

    async fn send(
        &self,
        method: Method,
        url: &str,
        body: Option<&Value>,
    ) -> Result<hyper::Response<hyper::body::Incoming>, Failed> {
        let mut request = Request::builder().method(method).uri(url);
        let body = match body {
            Some(value) => {
                request = request.header("content-type", "application/json");
                Body::from(value.to_string())
            }
            None => Body::empty(),
        };
        let request = request.body(body).map_err(|e| Failed::Unreachable(e.to_string()))?;
        self.client.request(request).await.map_err(|e| Failed::Unreachable(error_text(&e)))
    }

    /// A JSON request and its JSON answer (a status other than 2xx is [`Failed::Refused`]).
    pub(crate) async fn json(
        &self,
        method: Method,
        url: &str,
        body: Option<&Value>,
    ) -> Result<Value, Failed> {
        let response = self.send(method, url, body).await?;
        let status = response.status();
        let mut data = Body::new(response.into_body()).into_data_stream();
        let mut bytes = Vec::new();
        while let Some(chunk) = data.next().await {
            bytes.extend_from_slice(&chunk.map_err(|e| Failed::Unreachable(e.to_string()))?);
        }
        let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if status.is_success() { Ok(value) } else { Err(refused(status, &value)) }
    }

    /// A request whose answer is a stream of JSON lines.
    pub(crate) async fn lines(
        &self,
        method: Method,
        url: &str,
        body: Option<&Value>,
    ) -> Result<Lines, Failed> {
        let response = self.send(method, url, body).await?;
        let status = response.status();
        let data = Body::new(response.into_body()).into_data_stream();
        if !status.is_success() {
            let mut lines = Lines { data, buffer: Vec::new() };
            let mut bytes = Vec::new();
            while let Some(Ok(chunk)) = lines.data.next().await {
                bytes.extend_from_slice(&chunk);
            }
            let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            return Err(refused(status, &value));
        }
        Ok(Lines { data, buffer: Vec::new() })
    }
}

/// A streamed answer, a JSON value a line.
pub(crate) struct Lines {
    data: BodyDataStream,
    buffer: Vec<u8>,
}

impl Lines {
    /// The next line's value; `None` at the answer's end; an error when the stream was cut (the
    /// node went away) or a line is not JSON.
    pub(crate) async fn next(&mut self) -> Option<Result<Value, String>> {
        loop {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                let line = &line[..line.len() - 1];
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return Some(serde_json::from_slice(line).map_err(|e| format!("a line: {e}")));
            }
            match self.data.next().await {
                Some(Ok(chunk)) => self.buffer.extend_from_slice(&chunk),
                Some(Err(e)) => return Some(Err(e.to_string())),
                None if self.buffer.iter().all(u8::is_ascii_whitespace) => return None,
                None => return Some(Err("the answer ended within a line".to_owned())),
            }
        }
    }
}

fn refused(status: StatusCode, value: &Value) -> Failed {
    let error = &value["error"];
    Failed::Refused {
        status: status.as_u16(),
        kind: error["kind"].as_str().unwrap_or("unknown").to_owned(),
        message: error["message"].as_str().unwrap_or("").to_owned(),
    }
}

/// An error and its causes, in one line.
fn error_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
