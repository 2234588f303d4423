//! `rein chat` against a real OpenAI-compatible HTTP server on 127.0.0.1, as a process: a server
//! that echoes the key it was sent every way it can, the statuses and the truncated stream that
//! are retried, a local server that needs no key, and base URLs that carry credentials or a
//! control character. Every run that writes a session log ends with `rein check` of that log.

#![allow(clippy::unwrap_used)]

use rein_runtime::event::{Event, TurnEndReason};
use rein_testkit::cli::{checked_log, lines_starting, log_path, rein, rein_check, session_id};
use rein_testkit::log::{failures, turn_ends};
use rein_testkit::server::{
    Part, Reply, answer, delta, done, serve, status_reply, usage, with_headers,
};
use serde_json::json;

const KEY: &str = "sk-echo-test-5f3a9c1e77d0";

/// The key a server was sent, from its `Authorization: Bearer KEY` header.
fn echoed(auth: &str) -> String {
    auth.trim_start_matches("Bearer ").to_owned()
}

/// A 503 whose request id is the Authorization header and whose message quotes the key.
fn echo_in_an_error(auth: &str) -> Reply {
    let body = json!({"error": {"message": format!("Server busy (key {})", echoed(auth))}});
    status_reply(503, &[("x-request-id", auth)], &body.to_string())
}

/// A stream that starts, then fails with an in-stream error echoing the header, under it as the
/// request id.
fn echo_in_an_in_stream_error(auth: &str) -> Reply {
    let error = json!({"error": {"message": format!("overloaded; you sent {auth}"), "code": 503}});
    with_headers(
        &[("x-request-id", auth)],
        Reply::Sse(vec![delta("half "), Part::Data(error.to_string())]),
    )
}

/// An answer that streams the key, cut across three chunks.
fn echo_in_the_answer(auth: &str) -> Reply {
    let key = echoed(auth);
    let (a, rest) = key.split_at(7);
    let (b, c) = rest.split_at(8);
    with_headers(
        &[("x-request-id", auth)],
        Reply::Sse(vec![
            delta("Your key is "),
            delta(a),
            delta(b),
            delta(&format!("{c}.")),
            usage(3, 5),
            done(),
        ]),
    )
}

#[test]
fn a_server_echoing_the_key_in_headers_bodies_and_streams_leaks_it_nowhere() {
    let (_rt, server) = serve(vec![
        Reply::FromAuth(echo_in_an_error),
        Reply::FromAuth(echo_in_an_in_stream_error),
        Reply::FromAuth(echo_in_the_answer),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let vars = [
        ("DEEPSEEK_API_KEY", KEY),
        ("DEEPSEEK_BASE_URL", &server.base_url()),
        ("RUST_LOG", "trace"),
    ];
    let run = rein(dir.path(), &["chat", "--expand", "what is my key?"], &vars, "");
    assert_eq!(run.code, Some(0), "{run:?}");
    let seen = server.seen();
    assert_eq!(seen.len(), 3, "two retries, then the answer");
    assert!(seen.iter().all(|s| s.headers["authorization"] == format!("Bearer {KEY}")));

    // The answer streamed to stdout without the key, and every line of stderr (the status lines,
    // the expanded panel with the provider's messages and request ids, every trace) without it.
    assert!(run.stdout.ends_with("Your key is [redacted].\n"), "{run:?}");
    assert!(!run.stdout.contains(KEY) && !run.stderr.contains(KEY), "{run:?}");
    assert!(!run.stdout.contains(&KEY[..7]), "no piece of it either: {run:?}");
    assert!(run.stderr.contains("Bearer [redacted]"), "the request id, scrubbed: {run:?}");
    assert!(run.stderr.contains("Server busy (key [redacted])"), "{run:?}");

    // The log, and what `rein show` and `rein report` make of it.
    let path = log_path(dir.path(), &session_id(&run));
    let bytes = std::fs::read_to_string(&path).unwrap();
    assert!(!bytes.contains(KEY), "the log never holds the key");
    let events = checked_log(&path);
    assert_eq!(turn_ends(&events), [TurnEndReason::Completed]);
    let failures = failures(&events);
    let id = Some("Bearer [redacted]".to_owned());
    assert_eq!(
        failures,
        [
            ("SERVER".to_owned(), id.clone(), "Server busy (key [redacted])".to_owned()),
            ("SERVER".to_owned(), id, "overloaded; you sent Bearer [redacted]".to_owned()),
        ]
    );
    let log = path.to_str().unwrap();
    let show = rein(dir.path(), &["show", "--expand", "--color", "never", log], &[], "");
    assert_eq!(show.code, Some(0), "{show:?}");
    assert!(show.stdout.contains("[redacted]"), "{show:?}");
    assert!(!show.stdout.contains(KEY) && !show.stderr.contains(KEY), "{show:?}");
    let page = dir.path().join("report.html");
    let report = rein(dir.path(), &["report", log, "-o", page.to_str().unwrap()], &[], "");
    assert_eq!(report.code, Some(0), "{report:?}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("[redacted]") && !html.contains(KEY));
    assert!(!report.stdout.contains(KEY) && !report.stderr.contains(KEY));
    rein_check(dir.path(), &path);
}

/// An answer to recover with.
fn recovered() -> Reply {
    answer(&["the whole ", "answer"])
}

#[test]
fn a_408_a_409_and_a_truncated_stream_are_each_recovered_on_the_next_attempt() {
    let upstream = r#"{"error":{"message":"upstream request timed out"}}"#;
    let conflict = r#"{"error":{"message":"a concurrent request holds this conversation"}}"#;
    let cases: [(Reply, &str, &str); 3] = [
        (status_reply(408, &[], upstream), "TIMEOUT 408", "llm-retry"),
        (status_reply(409, &[], conflict), "SERVER 409", "llm-retry"),
        (Reply::Sse(vec![delta("the half "), usage(1, 1)]), "STREAM_CLOSED", "auto-retry"),
    ];
    for (failing, shown, plugin) in cases {
        let (_rt, server) = serve(vec![failing, recovered()]);
        let dir = tempfile::tempdir().unwrap();
        let vars = [("DEEPSEEK_API_KEY", KEY), ("DEEPSEEK_BASE_URL", &server.base_url())];
        let run = rein(dir.path(), &["chat", "hello"], &vars, "");
        assert_eq!(run.code, Some(0), "{shown}: {run:?}");
        assert!(run.stdout.ends_with("the whole answer\n"), "{shown}: {run:?}");
        let lines = lines_starting(&run.stderr, "retry 1/");
        assert!(lines.len() == 1 && lines[0].contains(&format!(" · {shown}")), "{shown}: {run:?}");
        assert_eq!(server.seen().len(), 2, "{shown}: recovered on the next attempt");

        let path = log_path(dir.path(), &session_id(&run));
        let events = checked_log(&path);
        assert_eq!(turn_ends(&events), [TurnEndReason::Completed], "{shown}");
        let retries: Vec<(String, String)> = events
            .iter()
            .filter_map(|e| match &e.event {
                Event::LlmRetry(r) => Some((r.plugin.clone(), r.failure.code().to_owned())),
                _ => None,
            })
            .collect();
        let code = shown.split(' ').next().unwrap();
        assert_eq!(retries, [(plugin.to_owned(), code.to_owned())], "{shown}");
        rein_check(dir.path(), &path);
    }
}

#[test]
fn a_local_server_without_a_key_gets_no_authorization_header_and_the_banner_says_so() {
    let (_rt, server) = serve(vec![answer(&["local ", "answer"]), answer(&["basic ", "auth"])]);
    let dir = tempfile::tempdir().unwrap();
    let url = server.base_url();
    let vars = [("OPENAI_BASE_URL", url.as_str()), ("OPENAI_MODEL", "llama3")];
    let run = rein(dir.path(), &["chat", "hello"], &vars, "");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout, "local answer\n");
    let banner = format!(
        "rein chat · llama3 on OpenAI at {} · no API key: no Authorization header",
        server.base_url()
    );
    assert_eq!(lines_starting(&run.stderr, "rein chat · "), [banner.as_str()], "{run:?}");
    let seen = server.seen();
    assert_eq!(seen[0].headers.get("authorization"), None, "{:?}", seen[0].headers);
    assert_eq!(seen[0].json()["model"], "llama3");
    let path = log_path(dir.path(), &session_id(&run));
    let events = checked_log(&path);
    let provider = events.iter().find_map(|e| match &e.event {
        Event::RequestStart(r) => Some(r.provider.clone()),
        _ => None,
    });
    assert_eq!(provider.as_deref(), Some("openai"));
    rein_check(dir.path(), &path);

    // Credentials in the base URL go as Basic auth, and print redacted.
    let with_user = format!("http://me:hunter2@{}", server.addr());
    let run = rein(dir.path(), &["chat", "hello"], &[("OPENAI_BASE_URL", &with_user)], "");
    assert_eq!(run.code, Some(0), "{run:?}");
    let shown = format!("on OpenAI at http://[redacted]@{} · no API key", server.addr());
    assert!(run.stderr.contains(&shown), "{run:?}");
    assert!(!run.stderr.contains("hunter2") && !run.stdout.contains("hunter2"), "{run:?}");
    let auth = server.seen()[1].headers["authorization"].to_str().unwrap().to_owned();
    assert!(auth.starts_with("Basic "), "{auth}");
    let path = log_path(dir.path(), &session_id(&run));
    assert!(!std::fs::read_to_string(&path).unwrap().contains("hunter2"));
    rein_check(dir.path(), &path);
}

#[test]
fn a_base_url_with_a_control_character_is_refused_with_exit_2_and_nothing_is_written() {
    let cases: [(&[(&str, &str)], &str); 3] = [
        (
            &[("OPENAI_BASE_URL", "http://127.0.0.1:9/v1\n")],
            "error: OPENAI_BASE_URL: must not contain a control character (U+000A at byte 21)",
        ),
        (
            &[("DEEPSEEK_API_KEY", KEY), ("DEEPSEEK_BASE_URL", "http://me:hunter2@h/\r\nX: 1")],
            "error: DEEPSEEK_BASE_URL: must not contain a control character (U+000D at byte 20)",
        ),
        (
            &[("OPENAI_API_KEY", KEY), ("OPENAI_BASE_URL", "ftp://me:hunter2@127.0.0.1/v1")],
            "error: OPENAI_BASE_URL: must be an http(s) URL, got \"ftp://[redacted]@127.0.0.1/v1\"",
        ),
    ];
    for (vars, error) in cases {
        let dir = tempfile::tempdir().unwrap();
        let run = rein(dir.path(), &["chat", "hello"], vars, "");
        assert_eq!(run.code, Some(2), "{vars:?}: {run:?}");
        assert_eq!(run.stderr.lines().collect::<Vec<_>>(), [error], "{vars:?}");
        assert_eq!(run.stdout, "");
        assert!(!run.stderr.contains("hunter2") && !run.stderr.contains(KEY));
        assert!(!dir.path().join(".rein").exists(), "nothing written");
    }
}
