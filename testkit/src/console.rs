//! `rein console` as a process for the console tests: started on `--port 0` in a directory of
//! its own, its URL read from the line it prints; signalled, its stderr lines waited for (never
//! a fixed sleep); stopped with SIGTERM, its exit status and stderr returned; every log it
//! wrote checked against the invariants. Also a small JSON client and a reader of its
//! server-sent events.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use rein_runtime::event::Envelope;
use serde_json::Value;

use crate::cli::{checked_log, command};

/// What the child wrote on stderr so far, and whether the pipe closed (the process ended).
#[derive(Default)]
struct Stderr {
    text: String,
    closed: bool,
}

/// A running `rein console`.
pub struct Console {
    child: Child,
    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub url: String,
    /// The port.
    pub port: u16,
    stderr: Arc<(Mutex<Stderr>, Condvar)>,
    /// Reads stderr until the pipe closes (the process ended).
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Console {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Console {
    /// `rein console --port 0 ARGS` in `dir`; returns once it printed its URL.
    pub fn start(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Console {
        Self::spawn(dir, "console", args, env, "rein console: ")
    }

    /// `rein node --port 0 --node-id ID ARGS` in `dir`; returns once it printed its URL.
    pub fn start_node(dir: &Path, id: &str, args: &[&str], env: &[(&str, &str)]) -> Console {
        let mut all = vec!["--node-id", id];
        all.extend_from_slice(args);
        Self::spawn(dir, "node", &all, env, &format!("rein node {id}: "))
    }

    fn spawn(
        dir: &Path,
        subcommand: &str,
        args: &[&str],
        env: &[(&str, &str)],
        prefix: &str,
    ) -> Console {
        let mut all = vec![subcommand, "--port", "0"];
        all.extend_from_slice(args);
        let mut child = command(dir, &all, env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new((Mutex::new(Stderr::default()), Condvar::new()));
        let mut err = child.stderr.take().unwrap();
        let sink = Arc::clone(&stderr);
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.0.lock().unwrap().text.push_str(&String::from_utf8_lossy(&buf[..n]));
                sink.1.notify_all();
            }
            sink.0.lock().unwrap().closed = true;
            sink.1.notify_all();
        });
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let url = line
            .trim()
            .strip_prefix(prefix)
            .unwrap_or_else(|| {
                let _ = child.kill();
                let _ = child.wait();
                panic!("no URL printed: {line:?}\n--- stderr\n{}", stderr.0.lock().unwrap().text)
            })
            .trim_end_matches('/')
            .to_owned();
        let port = url.rsplit(':').next().unwrap().parse().unwrap();
        // Keep reading stdout so the child never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = stdout.read_to_string(&mut rest);
        });
        Console { child, url, port, stderr, reader: Some(reader) }
    }

    /// What it wrote on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.0.lock().unwrap().text.clone()
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (`TERM`, `INT`, `KILL`, `STOP`, `CONT`).
    pub fn signal(&self, signal: &str) {
        let pid = self.child.id().to_string();
        let kill = Command::new("kill").args([&format!("-{signal}"), &pid]).status().unwrap();
        assert!(kill.success());
    }

    /// How many times stderr holds `needle` so far.
    pub fn stderr_count(&self, needle: &str) -> usize {
        self.stderr.0.lock().unwrap().text.matches(needle).count()
    }

    /// Waits until stderr holds `needle` at least `times` times (true), or `limit` passed or the
    /// process ended first (false).
    pub fn wait_for_stderr_times(&self, needle: &str, times: usize, limit: Duration) -> bool {
        let (lock, written) = &*self.stderr;
        let deadline = Instant::now() + limit;
        let mut stderr = lock.lock().unwrap();
        loop {
            if stderr.text.matches(needle).count() >= times {
                return true;
            }
            let now = Instant::now();
            if stderr.closed || now >= deadline {
                return false;
            }
            stderr = written.wait_timeout(stderr, deadline - now).unwrap().0;
        }
    }

    /// Waits until stderr holds `needle` (true) or `limit` passed or the process ended without
    /// writing it (false).
    pub fn wait_for_stderr(&self, needle: &str, limit: Duration) -> bool {
        let (lock, written) = &*self.stderr;
        let deadline = Instant::now() + limit;
        let mut stderr = lock.lock().unwrap();
        loop {
            if stderr.text.contains(needle) {
                return true;
            }
            let now = Instant::now();
            if stderr.closed || now >= deadline {
                return false;
            }
            stderr = written.wait_timeout(stderr, deadline - now).unwrap().0;
        }
    }

    /// Waits at most `limit` for the process to end (its stderr closes): its exit status and
    /// stderr, or `None` (still running; it is killed when dropped).
    pub fn exits_within(&mut self, limit: Duration) -> Option<(Option<i32>, String)> {
        let (lock, written) = &*self.stderr;
        let deadline = Instant::now() + limit;
        let mut stderr = lock.lock().unwrap();
        while !stderr.closed {
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            stderr = written.wait_timeout(stderr, deadline - now).unwrap().0;
        }
        let text = stderr.text.clone();
        drop(stderr);
        let status = self.child.wait().unwrap();
        Some((status.code(), text))
    }

    /// Sends SIGTERM and waits: its exit status and its stderr.
    pub fn stop(mut self) -> (Option<i32>, String) {
        let pid = self.child.id().to_string();
        let kill = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(kill.success());
        let status = self.child.wait().unwrap();
        // The reader ends with the pipe, which closed with the process.
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        (status.code(), self.stderr())
    }
}

/// Every log of `store`, each checked: a finished log (no turn left open) that satisfies every
/// invariant.
pub fn checked_logs(store: &Path) -> Vec<(String, Vec<Envelope>)> {
    let mut logs = Vec::new();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(store)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    paths.sort();
    for path in paths {
        let events = checked_log(&path);
        let id = path.file_stem().unwrap().to_str().unwrap().to_owned();
        logs.push((id, events));
    }
    logs
}

/// An HTTP answer: status and JSON body (`Value::Null` when the body is not JSON).
#[derive(Debug)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The body as JSON.
    pub body: Value,
}

/// A JSON request to the console.
pub async fn call(method: &str, url: &str, body: Option<Value>) -> Answer {
    let client = reqwest::Client::new();
    let mut request = client.request(method.parse().unwrap(), url);
    if let Some(body) = body {
        request = request.header("content-type", "application/json").body(body.to_string());
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let bytes = response.bytes().await.unwrap();
    Answer { status, body: serde_json::from_slice(&bytes).unwrap_or(Value::Null) }
}

/// The `update` events of a server-sent event stream, as JSON.
pub struct Updates {
    stream: futures::stream::BoxStream<'static, Value>,
}

impl Updates {
    /// Opens `url`.
    pub async fn open(url: &str) -> Updates {
        let response = reqwest::get(url).await.unwrap();
        assert_eq!(response.status(), 200, "{url}");
        let events = sse_stream::SseByteStream::new(response.bytes_stream());
        let stream = events
            .filter_map(|event| async move {
                let event = event.ok()?;
                if event.event.as_deref() != Some("update") {
                    return None;
                }
                serde_json::from_str(event.data.as_deref()?).ok()
            })
            .boxed();
        Updates { stream }
    }

    /// The next update (fails if the stream ends).
    pub async fn next(&mut self) -> Value {
        self.stream.next().await.expect("the event stream ended")
    }

    /// Reads updates until one satisfies `done`; returns it.
    pub async fn until(&mut self, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let wait = async {
            loop {
                let update = self.next().await;
                if done(&update) {
                    return update;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(60), wait)
            .await
            .unwrap_or_else(|_| panic!("no update with {what} within 60 s"))
    }

    /// Whether the stream ends (the server closed it) within `limit`.
    pub async fn ends_within(mut self, limit: Duration) -> bool {
        tokio::time::timeout(limit, async { while self.stream.next().await.is_some() {} })
            .await
            .is_ok()
    }
}
