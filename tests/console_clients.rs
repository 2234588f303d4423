//! `rein console` against clients that do not play along, and under load: the binary started on
//! `--port 0`, talking to the providers' scripted axum server on 127.0.0.1 (DeepSeek preset),
//! driven with raw TCP connections and a plain HTTP client.
//!
//! - Stopping: a client holding a half-sent head and one holding a body shorter than its
//!   `Content-Length` do not hold the console: SIGTERM stops it within its grace period, the
//!   running turn ends `aborted: disposed` and every log passes the invariant check. A second
//!   signal exits at once (130), leaving a log the next open repairs.
//! - Slow clients: a head sent byte by byte is cut off at the head timeout, a body that never
//!   completes is answered 408 at the body timeout, and the console serves others meanwhile.
//! - Load: concurrent creations of one session id give exactly one 201; a body over the limit
//!   is a JSON 413; duplicate JSON keys are refused naming the key; many live event streams on a
//!   long log are sent each new event once, the work per update independent of the log's length.
//!
//! Waits are on the console's stderr lines, on its answers and on connections closing, never on
//! fixed sleeps.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use rein_runtime::event::{CancelCause, TurnEndReason};
use rein_runtime::store::jsonl::read_log;
use rein_testkit::cli::command;
use rein_testkit::console::{Console, Updates, call, checked_logs};
use rein_testkit::log::turn_ends;
use rein_testkit::server;
use rein_testkit::server::{Part, Reply, Server, delta};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const KEY: &str = "sk-console-clients-secret";

/// The console's head timeout (`connections.rs`).
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// The console's body timeout (`body.rs`).
const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// What a stop may take at most here: the grace period (3 s) and the runtime's shutdown, with
/// room for a loaded machine. Before the bound, a half-sent request held the console forever.
const STOP_BOUND: Duration = Duration::from_secs(20);

/// A console in `dir` talking to `server` through the DeepSeek preset.
fn against(dir: &Path, server: &Server) -> Console {
    let base = server.base_url();
    Console::start(
        dir,
        &["--provider", "deepseek"],
        &[("DEEPSEEK_API_KEY", KEY), ("DEEPSEEK_BASE_URL", &base)],
    )
}

fn store(dir: &Path) -> std::path::PathBuf {
    dir.join(".rein/sessions")
}

/// A new session named `id`, with a turn that streams a little and then stalls, running.
async fn stalled_turn(url: &str, id: &str) -> Updates {
    let made = call("POST", &format!("{url}/api/sessions"), Some(json!({"id": id}))).await;
    assert_eq!(made.status, 201, "{:?}", made.body);
    let mut updates = Updates::open(&format!("{url}/api/sessions/{id}/events")).await;
    let sent =
        call("POST", &format!("{url}/api/sessions/{id}/prompt"), Some(json!({"text": "go"}))).await;
    assert_eq!(sent.status, 202);
    updates.until("the running turn", |u| u["running"] == json!(true)).await;
    updates
}

/// A raw connection that sent `bytes` and waits.
async fn holding(port: u16, bytes: &str) -> TcpStream {
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    tcp.write_all(bytes.as_bytes()).await.unwrap();
    tcp
}

/// A head that never ends, and a body shorter than its `Content-Length`.
async fn half_sent(port: u16) -> (TcpStream, TcpStream) {
    let head = format!("GET /api/sessions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n");
    let head = holding(port, &head).await;
    let body = holding(
        port,
        &format!(
            "POST /api/sessions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: \
             application/json\r\nContent-Length: 100\r\n\r\n{{\"id\": "
        ),
    )
    .await;
    (head, body)
}

/// Whether the console closed `tcp` without answering (end of stream or a reset).
async fn closed_unanswered(tcp: &mut TcpStream) -> bool {
    let mut answer = Vec::new();
    match tcp.read_to_end(&mut answer).await {
        Ok(_) => answer.is_empty(),
        Err(_) => answer.is_empty(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_drops_half_sent_requests_after_its_grace_and_closes_every_log() {
    let server = Server::start(vec![Reply::Sse(vec![delta("thinking"), Part::Stall])]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut console = against(dir.path(), &server);
    let (url, port) = (console.url.clone(), console.port);
    let updates = stalled_turn(&url, "held").await;

    let (mut head, mut body) = half_sent(port).await;
    // Answered after both were taken: the console accepts connections in order.
    assert_eq!(call("GET", &format!("{url}/api/sessions"), None).await.status, 200);

    console.signal("TERM");
    assert!(console.wait_for_stderr("rein console: stopping", STOP_BOUND), "{}", console.stderr());
    assert!(updates.ends_within(STOP_BOUND).await, "the event stream ends at once");
    let (code, stderr) = console
        .exits_within(STOP_BOUND)
        .unwrap_or_else(|| panic!("still running: {}", console.stderr()));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("rein console: 2 connections still open after 3 s: dropped"),
        "{stderr}"
    );
    assert!(stderr.ends_with("rein console stopped\n"), "{stderr}");
    assert!(!stderr.contains(KEY), "{stderr}");
    assert!(closed_unanswered(&mut head).await, "the half-sent head was dropped");
    assert!(closed_unanswered(&mut body).await, "the short body was dropped");

    let logs = checked_logs(&store(dir.path()));
    assert_eq!(turn_ends(&logs[0].1), [TurnEndReason::Aborted { cause: CancelCause::Disposed }]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_stops_at_once_and_the_next_open_repairs_the_log() {
    let server = Server::start(vec![Reply::Sse(vec![delta("thinking"), Part::Stall])]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut console = against(dir.path(), &server);
    let (url, port) = (console.url.clone(), console.port);
    let _updates = stalled_turn(&url, "forced").await;
    // A client that holds the first stop in its grace period.
    let (_head, _body) = half_sent(port).await;
    assert_eq!(call("GET", &format!("{url}/api/sessions"), None).await.status, 200);

    console.signal("TERM");
    assert!(console.wait_for_stderr("rein console: stopping", STOP_BOUND), "{}", console.stderr());
    let asked = Instant::now();
    console.signal("INT");
    let (code, stderr) = console
        .exits_within(STOP_BOUND)
        .unwrap_or_else(|| panic!("still running: {}", console.stderr()));
    assert_eq!(code, Some(130), "{stderr}");
    assert!(asked.elapsed() < Duration::from_secs(3), "at once, not after the grace period");
    assert!(stderr.contains("rein console: stopped at once"), "{stderr}");
    assert!(!stderr.contains("dropped") && !stderr.contains("rein console stopped"), "{stderr}");

    // The turn was left open, as after a crash: a valid log, closed by the next open.
    let log = store(dir.path()).join("forced.jsonl");
    let events = read_log(&log).unwrap().events;
    let violations = rein_invariant::check_log(&events);
    assert!(violations.is_empty(), "{violations:?}");
    assert_eq!(turn_ends(&events), []);
    let again = command(dir.path(), &["chat", "--seed", "1", "--session", "forced", "again"], &[])
        .output()
        .unwrap();
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    let logs = checked_logs(&store(dir.path()));
    assert_eq!(turn_ends(&logs[0].1), [TurnEndReason::Interrupted, TurnEndReason::Completed]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_cut_off_at_the_timeouts_while_others_are_served() {
    let server = Server::start(vec![]).await;
    let dir = tempfile::tempdir().unwrap();
    let console = against(dir.path(), &server);
    let (url, port) = (console.url.clone(), console.port);

    // Twenty clients sending their head a byte every 200 ms, without end.
    let started = Instant::now();
    let drips: Vec<_> = (0..20)
        .map(|_| {
            tokio::spawn(async move {
                let request = format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ");
                let mut tcp = holding(port, &request).await;
                let mut tick = tokio::time::interval(Duration::from_millis(200));
                loop {
                    tick.tick().await;
                    if tcp.write_all(b"a").await.is_err() {
                        break;
                    }
                    // The console closed it: a read sees the end (or a reset) at once.
                    let mut byte = [0u8; 1];
                    if let Ok(Ok(n)) =
                        tokio::time::timeout(Duration::ZERO, tcp.read(&mut byte)).await
                    {
                        assert_eq!(n, 0, "no answer to a head that never ended");
                        break;
                    }
                }
                started.elapsed()
            })
        })
        .collect();
    // A body that stops short of its Content-Length: answered when the body timeout is up.
    let short = tokio::spawn(async move {
        let mut tcp = holding(
            port,
            &format!(
                "POST /api/sessions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: \
                 application/json\r\nContent-Length: 100\r\n\r\n{{\"id\": "
            ),
        )
        .await;
        let mut answer = String::new();
        tcp.read_to_string(&mut answer).await.unwrap();
        (started.elapsed(), answer)
    });

    // Meanwhile the console answers everyone else.
    let listed = call("GET", &format!("{url}/api/sessions"), None).await;
    assert_eq!((listed.status, listed.body["sessions"].clone()), (200, json!([])));

    let limit = HEAD_TIMEOUT + Duration::from_secs(10);
    for drip in drips {
        let cut = tokio::time::timeout(limit, drip).await.expect("cut off").unwrap();
        assert!(cut >= HEAD_TIMEOUT - Duration::from_secs(1), "not before the timeout: {cut:?}");
    }
    let (after, answer) = tokio::time::timeout(limit, short).await.expect("answered").unwrap();
    assert!(after >= BODY_TIMEOUT - Duration::from_secs(1), "{after:?}");
    assert!(answer.starts_with("HTTP/1.1 408 "), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("connection: close"), "{answer}");
    let body: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(
        body,
        json!({"error": {"kind": "timeout", "message": "the request body did not arrive within 10 s"}})
    );

    let listed = call("GET", &format!("{url}/api/sessions"), None).await;
    assert_eq!(listed.body["sessions"], json!([]), "the short body created nothing");
    let (code, stderr) = console.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("dropped"), "nothing was left to drop: {stderr}");
    checked_logs(&store(dir.path()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creations_of_one_id_make_it_once() {
    let server = Server::start(vec![]).await;
    let dir = tempfile::tempdir().unwrap();
    let console = against(dir.path(), &server);
    let url = console.url.clone();
    let tries: Vec<_> = (0..20)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move {
                call("POST", &format!("{url}/api/sessions"), Some(json!({"id": "race2"}))).await
            })
        })
        .collect();
    let mut answers = Vec::new();
    for attempt in tries {
        let answer = attempt.await.unwrap();
        answers.push((answer.status, answer.body["error"]["kind"].as_str().map(str::to_owned)));
    }
    answers.sort();
    let mut want = vec![(201, None)];
    want.extend(std::iter::repeat_n((409, Some("exists".to_owned())), 19));
    assert_eq!(answers, want);
    let listed = call("GET", &format!("{url}/api/sessions"), None).await;
    assert_eq!(listed.body["sessions"].as_array().unwrap().len(), 1);
    let (code, stderr) = console.stop();
    assert_eq!(code, Some(0), "{stderr}");
    let logs = checked_logs(&store(dir.path()));
    let starts = logs[0].1.iter().filter(|e| e.kind() == "session/start").count();
    assert_eq!((logs.len(), starts), (1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_bodies_and_duplicate_keys_get_json_errors() {
    let server = Server::start(vec![]).await;
    let dir = tempfile::tempdir().unwrap();
    let console = against(dir.path(), &server);
    let url = console.url.clone();
    let made = call("POST", &format!("{url}/api/sessions"), Some(json!({"id": "s"}))).await;
    assert_eq!(made.status, 201);
    let client = reqwest::Client::new();
    let post = |path: &str, body: String| {
        client
            .post(format!("{url}{path}"))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };

    // 3 MiB of prompt: within the body limit, over the prompt's: the prompt's own error.
    let three = json!({"text": "x".repeat(3 << 20)}).to_string();
    let answer = post("/api/sessions/s/prompt", three).await.unwrap();
    assert_eq!(answer.status(), 400);
    let body: Value = serde_json::from_slice(&answer.bytes().await.unwrap()).unwrap();
    assert_eq!(body["error"]["field"], "text");
    assert_eq!(body["error"]["message"], "text: too long (3145728 bytes; at most 1048576)");
    // Over the body limit: refused before it is read, as JSON, and the connection closed.
    let nine = json!({"text": "x".repeat(9 << 20)}).to_string();
    let answer = post("/api/sessions/s/prompt", nine).await.unwrap();
    assert_eq!(answer.status(), 413);
    assert_eq!(answer.headers()["connection"], "close");
    assert_eq!(answer.headers()["content-type"], "application/json");
    let body: Value = serde_json::from_slice(&answer.bytes().await.unwrap()).unwrap();
    assert_eq!(
        body,
        json!({"error": {"kind": "tooLarge", "message": "the request body is larger than 8 MiB"}})
    );

    // A key given twice is refused, naming it, at any depth; nothing happens.
    let cases = [
        ("/api/sessions", r#"{"id": "a", "id": "b"}"#, "id"),
        ("/api/sessions/s/prompt", r#"{"text": "one", "text": "two"}"#, "text"),
        (
            "/api/plugins/auto-retry",
            r#"{"revision": 0, "patch": {"extraRetries": 1, "extraRetries": 9}}"#,
            "patch.extraRetries",
        ),
    ];
    for (path, body, field) in cases {
        let request = if path.starts_with("/api/plugins") {
            client.patch(format!("{url}{path}")).header("content-type", "application/json")
        } else {
            client.post(format!("{url}{path}")).header("content-type", "application/json")
        };
        let answer = request.body(body).send().await.unwrap();
        assert_eq!(answer.status(), 400, "{body}");
        let got: Value = serde_json::from_slice(&answer.bytes().await.unwrap()).unwrap();
        assert_eq!(
            got["error"],
            json!({"kind": "badRequest", "field": field,
                   "message": format!("{field}: given twice (each key at most once)")}),
            "{body}"
        );
    }
    let listed = call("GET", &format!("{url}/api/sessions"), None).await;
    assert_eq!(listed.body["sessions"].as_array().unwrap().len(), 1, "no session a or b");
    let plugin = call("GET", &format!("{url}/api/plugins/auto-retry"), None).await;
    assert_eq!(
        (plugin.body["revision"].clone(), plugin.body["settings"]["extraRetries"].clone()),
        (json!(0), json!(3))
    );

    let (code, stderr) = console.stop();
    assert_eq!(code, Some(0), "{stderr}");
    let logs = checked_logs(&store(dir.path()));
    assert_eq!(turn_ends(&logs[0].1), [], "no prompt ran");
}

/// Session `id` in the store at `dir` with `turns` finished turns, each answered with `answer`:
/// written by a runtime of this test (a scripted provider), as `rein chat` would.
async fn session_with_turns(dir: &Path, id: &str, turns: usize, answer: &str) {
    use rein_cli::scenario::scripted::{Scripted, ScriptedProvider};
    use rein_runtime::runtime::{Route, Runtime};
    use rein_runtime::store::Durability;
    use rein_runtime::store::jsonl::JsonlStore;

    let store = JsonlStore::open(dir, Durability::Os).unwrap();
    let provider = ScriptedProvider::new((0..turns).map(|_| Scripted::reply(answer)));
    let runtime = Runtime::builder()
        .store(std::sync::Arc::new(store))
        .route(Route::new("deepseek", std::sync::Arc::new(provider)))
        .build()
        .await
        .unwrap();
    let session = runtime.session(id).await.unwrap();
    for n in 1..=turns {
        session.prompt(format!("question {n}")).unwrap().await.unwrap();
    }
    runtime.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_streams_on_a_long_log_are_sent_each_new_event_once() {
    const TURNS: usize = 600;
    const STREAMS: usize = 20;
    let answer = "A sentence of an answer that takes some room in the log. ".repeat(30);
    let dir = tempfile::tempdir().unwrap();
    session_with_turns(&store(dir.path()), "long", TURNS, &answer).await;
    session_with_turns(&store(dir.path()), "short", 1, &answer).await;
    let size = std::fs::metadata(store(dir.path()).join("long.jsonl")).unwrap().len();
    assert!(size > 1 << 20, "a long log: {size} bytes");

    let server = Server::start(vec![
        server::answer(&["the new ", "answer"]),
        server::answer(&["the new ", "answer"]),
    ])
    .await;
    let console = against(dir.path(), &server);
    let url = console.url.clone();
    let mut short = Updates::open(&format!("{url}/api/sessions/short/events")).await;
    let mut long = Vec::new();
    for _ in 0..STREAMS {
        long.push(Updates::open(&format!("{url}/api/sessions/long/events")).await);
    }
    // Everyone has the history before the new turns start.
    short.next().await;
    let mut histories = Vec::new();
    for stream in &mut long {
        histories.push(stream.next().await.to_string().len());
    }
    for id in ["short", "long"] {
        let prompt = format!("{url}/api/sessions/{id}/prompt");
        assert_eq!(call("POST", &prompt, Some(json!({"text": "more"}))).await.status, 202);
    }
    let short_rest = update_sizes_after_first(&mut short, 2).await;
    let largest_short = *short_rest.iter().max().unwrap();
    for (stream, history) in long.iter_mut().zip(&histories) {
        let rest = update_sizes_after_first(stream, TURNS + 1).await;
        assert!(*history > 1 << 20, "the history, once: {history} bytes");
        // The same turn on a 1-turn log and a 600-turn one: updates of the same size (how the
        // turn's events are coalesced into updates varies), not of the history's.
        let largest = *rest.iter().max().unwrap();
        assert!(largest <= 2 * largest_short, "{rest:?} against {short_rest:?}");
        assert!(rest.iter().sum::<usize>() < 16 * 1024, "{rest:?}");
    }

    let (code, stderr) = console.stop();
    assert_eq!(code, Some(0), "{stderr}");
    let logs = checked_logs(&store(dir.path()));
    let long_log = &logs.iter().find(|(id, _)| id == "long").unwrap().1;
    assert_eq!(turn_ends(long_log).len(), TURNS + 1);
}

/// The sizes of `updates`' events (as sent) after the first, until one shows turn `turn`
/// completed.
async fn update_sizes_after_first(updates: &mut Updates, turn: usize) -> Vec<usize> {
    let done = format!(
        "id=\"conversation-turn-{turn}\" data-turn=\"{turn}\"><div class=\"turn-head\"><h3>Turn \
         {turn}</h3><span class=\"badge\" data-ending=\"completed\""
    );
    let mut sizes = Vec::new();
    loop {
        let update = tokio::time::timeout(Duration::from_secs(120), updates.next())
            .await
            .expect("the turn's updates");
        sizes.push(update.to_string().len());
        if update["tail"].as_str().unwrap().contains(&done) {
            assert_eq!(update["kept"], turn - 1, "every earlier turn kept, not sent again");
            return sizes;
        }
    }
}
