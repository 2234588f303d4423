//! The console's turn endpoints, against the real server (the binary on `--port 0`, talking to
//! the providers' scripted server through the DeepSeek preset): `POST /api/sessions/{id}/turns`
//! streams a turn's committed events, one JSON line each, then its outcome; `GET
//! /api/sessions/{id}/turns/{turn}?from=SEQ` follows a turn in the log, from its start or from
//! `SEQ`, to its end — a running one live, ended by a cancel sent meanwhile. Bad input is
//! refused naming its field; a read-only console starts no turn. Every log passes the
//! invariant check.

#![allow(clippy::unwrap_used)]

use futures::StreamExt as _;
use rein_runtime::event::{Envelope, Event};
use rein_testkit::console::{Console, call, checked_logs};
use rein_testkit::server::{Part, Reply, Server, answer, delta};
use serde_json::{Value, json};

const KEY: &str = "sk-console-turns-secret";

/// A streamed answer, read a JSON line at a time.
struct Lines {
    stream: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: Vec<u8>,
}

impl Lines {
    async fn open(method: &str, url: &str, body: Option<Value>) -> (u16, String, Lines) {
        let client = reqwest::Client::new();
        let mut request = client.request(method.parse().unwrap(), url);
        if let Some(body) = body {
            request = request.header("content-type", "application/json").body(body.to_string());
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let kind = response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        (status, kind, Lines { stream: response.bytes_stream().boxed(), buffer: Vec::new() })
    }

    /// The next line; `None` at the end of the answer.
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                return Some(serde_json::from_slice(&line).unwrap());
            }
            match self.stream.next().await {
                Some(chunk) => self.buffer.extend_from_slice(&chunk.unwrap()),
                None => {
                    assert!(self.buffer.is_empty(), "a cut line: {:?}", self.buffer);
                    return None;
                }
            }
        }
    }

    /// Every line up to the end: the events, and the last line.
    async fn all(mut self) -> (Vec<Envelope>, Value) {
        let mut events = Vec::new();
        let mut last = Value::Null;
        while let Some(line) = self.next().await {
            match line.get("event") {
                Some(event) => events.push(serde_json::from_value(event.clone()).unwrap()),
                None => last = line,
            }
        }
        (events, last)
    }
}

fn kinds(events: &[Envelope]) -> Vec<&str> {
    events.iter().map(Envelope::kind).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_streams_its_committed_events_and_is_followed_in_the_log_to_its_end() {
    let script =
        vec![answer(&["Hello", " there"]), Reply::Sse(vec![delta("thinking"), Part::Stall])];
    let server = Server::start(script).await;
    let dir = tempfile::tempdir().unwrap();
    let base = server.base_url();
    let console = Console::start(
        dir.path(),
        &["--provider", "deepseek"],
        &[("DEEPSEEK_API_KEY", KEY), ("DEEPSEEK_BASE_URL", &base)],
    );
    let url = console.url.clone();

    // A new session's first turn, streamed: its events as the log holds them, then how it ended.
    let (status, kind, lines) =
        Lines::open("POST", &format!("{url}/api/sessions/s1/turns"), Some(json!({"text": "hi"})))
            .await;
    assert_eq!((status, kind.as_str()), (200, "application/x-ndjson"));
    let (first, outcome) = lines.all().await;
    assert_eq!(outcome, json!({"outcome": {"turn": 1, "kind": "completed"}}));
    assert_eq!(kinds(&first)[..2], ["user/message", "turn/start"]);
    assert_eq!(first.last().map(Envelope::kind), Some("turn/end"));
    let text: String = first
        .iter()
        .filter_map(|e| match &e.event {
            Event::AssistantChunk(chunk) => Some(chunk.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Hello there");
    let log = call("GET", &format!("{url}/api/sessions/s1"), None).await;
    let logged: Vec<Envelope> = serde_json::from_value(log.body["events"].clone()).unwrap();
    let from = first[0].seq as usize;
    assert_eq!(logged[from..from + first.len()], first[..], "the events as the log holds them");

    // The same turn followed in the log: from its turn/start, or from a seq.
    let (status, _, lines) =
        Lines::open("GET", &format!("{url}/api/sessions/s1/turns/1"), None).await;
    assert_eq!(status, 200);
    let (followed, outcome) = lines.all().await;
    assert_eq!(outcome, json!({"outcome": {"turn": 1, "kind": "completed"}}));
    assert_eq!(followed[..], first[1..], "from its turn/start");
    let tail = first[first.len() - 2].seq;
    let (_, _, lines) =
        Lines::open("GET", &format!("{url}/api/sessions/s1/turns/1?from={tail}"), None).await;
    let (followed, _) = lines.all().await;
    assert_eq!(followed[..], first[first.len() - 2..]);

    // A turn that stalls: its prompt's stream and a follower see it run; a cancel ends both.
    let (_, _, mut running) =
        Lines::open("POST", &format!("{url}/api/sessions/s1/turns"), Some(json!({"text": "more"})))
            .await;
    let mut seen = Vec::new();
    while !seen.iter().any(|e: &Envelope| e.kind() == "assistant/chunk") {
        let line = running.next().await.unwrap();
        seen.push(serde_json::from_value(line["event"].clone()).unwrap());
    }
    let (_, _, following) =
        Lines::open("GET", &format!("{url}/api/sessions/s1/turns/2"), None).await;
    let cancelled = call("POST", &format!("{url}/api/sessions/s1/cancel"), Some(json!({}))).await;
    assert_eq!(cancelled.body, json!({"cancelled": true}));
    let (rest, outcome) = running.all().await;
    assert_eq!(outcome, json!({"outcome": {"turn": 2, "kind": "aborted"}}));
    assert_eq!(rest.last().map(Envelope::kind), Some("turn/end"));
    let (followed, outcome) = following.all().await;
    assert_eq!(outcome, json!({"outcome": {"turn": 2, "kind": "aborted"}}));
    assert_eq!(followed.last(), rest.last(), "the follower saw the same end");
    assert_eq!(kinds(&followed)[0], "turn/start");

    // Followed from past its end: said so, not waited for.
    let after = rest.last().unwrap().seq + 1;
    let (_, _, lines) =
        Lines::open("GET", &format!("{url}/api/sessions/s1/turns/1?from={after}"), None).await;
    let (none, last) = lines.all().await;
    assert!(none.is_empty(), "{none:?}");
    assert_eq!(last["error"]["kind"], "notFound", "{last}");

    // Bad input.
    let empty =
        call("POST", &format!("{url}/api/sessions/s1/turns"), Some(json!({"text": " "}))).await;
    assert_eq!((empty.status, empty.body["error"]["field"].clone()), (400, json!("text")));
    let bad_id =
        call("POST", &format!("{url}/api/sessions/..%2Fx/turns"), Some(json!({"text": "x"}))).await;
    assert_eq!(bad_id.status, 400, "{:?}", bad_id.body);
    let unknown = call("GET", &format!("{url}/api/sessions/nobody/turns/1"), None).await;
    assert_eq!((unknown.status, unknown.body["error"]["kind"].clone()), (404, json!("notFound")));

    let (code, stderr) = console.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains(KEY), "{stderr}");
    let logs = checked_logs(&dir.path().join(".rein/sessions"));
    assert_eq!(logs.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_console_starts_no_turn() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("logs")).unwrap();
    let console = Console::start(dir.path(), &["--store", "logs", "--read-only"], &[]);
    let refused =
        call("POST", &format!("{}/api/sessions/s1/turns", console.url), Some(json!({"text": "x"})))
            .await;
    assert_eq!((refused.status, refused.body["error"]["kind"].clone()), (403, json!("readOnly")));
    let (code, stderr) = console.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(std::fs::read_dir(dir.path().join("logs")).unwrap().count(), 0, "nothing written");
}
