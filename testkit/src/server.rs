//! A scripted model server on 127.0.0.1 (axum): each `POST /chat/completions` (OpenAI-compatible)
//! or `POST /v1/messages` (Anthropic) takes the next reply of its script and records the
//! request's path, headers and exact body bytes.
//!
//! A reply can stream SSE parts with pauses, keep-alive comments, a stall, a dropped connection
//! or a clean end without `[DONE]`, or answer any status with any headers and body; it can add
//! headers to another reply, or be made from the request's `Authorization` (or any other)
//! header (a server that echoes the credential it was sent). Each
//! streamed body reports when the server dropped it (the connection ended), so a test can see
//! that cancelling a call closed its connection.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// One piece of a streamed answer.
#[derive(Debug, Clone)]
pub enum Part {
    /// `data: <json>\n\n`.
    Data(String),
    /// `event: <name>\ndata: <json>\n\n` (a Messages stream's events).
    Event(String, String),
    /// Bytes written as they are.
    Raw(String),
    /// A keep-alive comment, `: keep-alive\n\n`.
    Comment,
    /// Wait (on tokio's clock) before the next part.
    Sleep(Duration),
    /// Send nothing more, ever.
    Stall,
    /// Abort the connection (the body fails; the client sees a cut stream).
    Drop,
    /// Keep-alive comments every `Duration`, forever.
    KeepAliveForever(Duration),
}

/// One reply.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A 200 event stream of these parts; the stream ends cleanly after the last one.
    Sse(Vec<Part>),
    /// A status with headers and a body.
    Status {
        /// The status code.
        status: u16,
        /// The headers, in order.
        headers: Vec<(String, String)>,
        /// The body.
        body: String,
    },
    /// Wait this long before answering the headers of `then`.
    Delay(Duration, Box<Reply>),
    /// Answer a 401 whose message echoes the request's Authorization header.
    EchoAuth,
    /// `then`, with these headers added (replacing its own of the same name).
    Headers(Vec<(String, String)>, Box<Reply>),
    /// The reply made of the request's `Authorization` header (`""` when it has none).
    FromAuth(fn(&str) -> Reply),
    /// The reply made of the request's header of this name (`""` when it has none).
    FromHeader(&'static str, fn(&str) -> Reply),
}

/// `then` with `headers` added.
pub fn with_headers(headers: &[(&str, &str)], then: Reply) -> Reply {
    let headers = headers.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    Reply::Headers(headers, Box::new(then))
}

/// A content delta chunk.
pub fn delta(text: &str) -> Part {
    Part::Data(
        serde_json::json!({"id": "c1", "object": "chat.completion.chunk", "model": "deepseek-chat",
            "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
        .to_string(),
    )
}

/// The final usage chunk.
pub fn usage(input: u64, output: u64) -> Part {
    Part::Data(
        serde_json::json!({"id": "c1", "choices": [],
            "usage": {"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output}})
        .to_string(),
    )
}

/// `data: [DONE]`.
pub fn done() -> Part {
    Part::Raw("data: [DONE]\n\n".into())
}

/// A complete streamed answer: one delta per piece, usage, `[DONE]`.
pub fn answer(pieces: &[&str]) -> Reply {
    let mut parts: Vec<Part> = pieces.iter().map(|p| delta(p)).collect();
    parts.push(usage(10, pieces.len() as u64));
    parts.push(done());
    Reply::Sse(parts)
}

/// A status reply with a JSON error body whose message is `message`.
pub fn error(status: u16, message: &str) -> Reply {
    status_reply(status, &[], &serde_json::json!({"error": {"message": message}}).to_string())
}

/// A status reply with headers and a raw body.
pub fn status_reply(status: u16, headers: &[(&str, &str)], body: &str) -> Reply {
    Reply::Status {
        status,
        headers: headers.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
        body: body.to_owned(),
    }
}

/// A server playing `script` on a tokio runtime of its own, for a test that is not async (the
/// process under test talks to the server); the server lives as long as the runtime.
pub fn serve(script: Vec<Reply>) -> (tokio::runtime::Runtime, Server) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(Server::start(script));
    (runtime, server)
}

/// A request as the server received it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The path (`/chat/completions` or `/v1/messages`).
    pub path: String,
    /// The headers.
    pub headers: HeaderMap,
    /// The body's exact bytes.
    pub body: Bytes,
}

impl Seen {
    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

struct Shared {
    script: Mutex<VecDeque<Reply>>,
    seen: Mutex<Vec<Seen>>,
    dropped: watch::Sender<usize>,
}

/// A running scripted server.
pub struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A loopback address nothing listens on (yet): bound, then released.
pub async fn free_addr() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap()
}

impl Server {
    /// A server on a fresh loopback port playing `script`.
    /// Bound once and kept: a port released and bound again can be taken in between.
    pub async fn start(script: Vec<Reply>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        Self::serve(listener, script)
    }

    /// A server on `addr` playing `script`.
    pub async fn start_at(addr: SocketAddr, script: Vec<Reply>) -> Server {
        let listener = TcpListener::bind(addr).await.unwrap();
        Self::serve(listener, script)
    }

    /// A server on `listener` playing `script`.
    pub fn serve(listener: TcpListener, script: Vec<Reply>) -> Server {
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            script: Mutex::new(script.into()),
            seen: Mutex::default(),
            dropped: watch::channel(0).0,
        });
        let app = Router::new()
            .route("/chat/completions", post(chat))
            .route("/v1/messages", post(chat))
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Server { addr, shared, task }
    }

    /// The base URL to configure an adapter with.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request received, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.shared.seen.lock().unwrap().clone()
    }

    /// How many replies are left.
    pub fn remaining(&self) -> usize {
        self.shared.script.lock().unwrap().len()
    }

    /// Waits until `n` streamed bodies were dropped by the server (their connections ended).
    pub async fn bodies_dropped(&self, n: usize) {
        let mut rx = self.shared.dropped.subscribe();
        rx.wait_for(|count| *count >= n).await.unwrap();
    }

    /// How many streamed bodies were dropped so far.
    pub fn dropped(&self) -> usize {
        *self.shared.dropped.borrow()
    }
}

async fn chat(
    State(shared): State<Arc<Shared>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    shared.seen.lock().unwrap().push(Seen { path, headers: headers.clone(), body });
    let reply = shared.script.lock().unwrap().pop_front();
    let Some(reply) = reply else {
        return status(500, &[], r#"{"error":{"message":"the test server's script ran out"}}"#);
    };
    respond(reply, &headers, &shared).await
}

fn respond<'a>(
    reply: Reply,
    request: &'a HeaderMap,
    shared: &'a Arc<Shared>,
) -> futures::future::BoxFuture<'a, Response> {
    Box::pin(async move {
        match reply {
            Reply::Delay(wait, then) => {
                tokio::time::sleep(wait).await;
                respond(*then, request, shared).await
            }
            Reply::Status { status: code, headers, body } => {
                let headers: Vec<(&str, &str)> =
                    headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                status(code, &headers, &body)
            }
            Reply::EchoAuth => {
                let auth = request.get("authorization").unwrap().to_str().unwrap();
                let body = serde_json::json!({"error": {
                    "message": format!("Incorrect API key provided: {}", auth.trim_start_matches("Bearer ")),
                    "type": "authentication_error",
                }});
                status(401, &[], &body.to_string())
            }
            Reply::Sse(parts) => sse(parts, shared.clone()),
            Reply::Headers(headers, then) => {
                let mut response = respond(*then, request, shared).await;
                for (name, value) in headers {
                    let name = axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap();
                    response.headers_mut().insert(name, value.parse().unwrap());
                }
                response
            }
            Reply::FromAuth(make) => {
                let auth = request.get("authorization").map(|v| v.to_str().unwrap().to_owned());
                respond(make(auth.as_deref().unwrap_or("")), request, shared).await
            }
            Reply::FromHeader(name, make) => {
                let value = request.get(name).map(|v| v.to_str().unwrap().to_owned());
                respond(make(value.as_deref().unwrap_or("")), request, shared).await
            }
        }
    })
}

fn status(code: u16, headers: &[(&str, &str)], body: &str) -> Response {
    let mut response = Response::builder().status(StatusCode::from_u16(code).unwrap());
    for (name, value) in headers {
        response = response.header(*name, *value);
    }
    response.body(Body::from(body.to_owned())).unwrap()
}

/// Counts a streamed body as dropped when it goes.
struct DropFlag(Arc<Shared>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.dropped.send_modify(|count| *count += 1);
    }
}

fn sse(parts: Vec<Part>, shared: Arc<Shared>) -> Response {
    let flag = DropFlag(shared);
    let stream =
        futures::stream::unfold((VecDeque::from(parts), flag), |(mut parts, flag)| async move {
            loop {
                let part = parts.pop_front()?;
                let bytes = match part {
                    Part::Data(json) => format!("data: {json}\n\n"),
                    Part::Event(name, json) => format!("event: {name}\ndata: {json}\n\n"),
                    Part::Raw(raw) => raw,
                    Part::Comment => ": keep-alive\n\n".to_owned(),
                    Part::Sleep(wait) => {
                        tokio::time::sleep(wait).await;
                        continue;
                    }
                    Part::Stall => std::future::pending().await,
                    Part::Drop => {
                        // Let the parts before it reach the client first (hyper writes while
                        // the body is pending).
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        let error =
                            std::io::Error::new(std::io::ErrorKind::ConnectionReset, "drop");
                        return Some((Err(error), (VecDeque::new(), flag)));
                    }
                    Part::KeepAliveForever(every) => {
                        tokio::time::sleep(every).await;
                        parts.push_front(Part::KeepAliveForever(every));
                        ": keep-alive\n\n".to_owned()
                    }
                };
                return Some((Ok::<_, std::io::Error>(Bytes::from(bytes)), (parts, flag)));
            }
        });
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .header("x-request-id", "req-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}
