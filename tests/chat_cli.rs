//! `rein chat` — the README's main job — run as a process: on the embedded simulated provider with
//! no key and no server; against a real HTTP server on 127.0.0.1 through the DeepSeek preset;
//! interactively with piped stdin; cancelled with Ctrl-C; refusing bad input. Every run that
//! writes a session log ends with the invariant check of that log.

#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use rein_runtime::event::{CancelCause, Event, TurnEndReason};
use rein_testkit::cli::{Run, checked_log, command, lines_starting, log_path, rein, session_id};
use rein_testkit::log::{answers, turn_ends};
use rein_testkit::server::{Part, Reply, Server, answer, delta, serve, status_reply};
use serde_json::json;

const KEY: &str = "sk-chat-test-secret";

/// Whether `line` is the close of a span named `name` (the innermost span of the line).
fn closes(line: &str, name: &str) -> bool {
    let Some(start) = line.rfind(&format!("{name}{{")) else { return false };
    let rest = &line[start..];
    let inner = rest.find('}').is_some_and(|end| rest[end + 1..].starts_with(": "));
    let named = start == 0 || [b' ', b':'].contains(&line.as_bytes()[start - 1]);
    inner && named && line.contains(" close ")
}

#[test]
fn with_no_key_a_seeded_prompt_meets_a_rate_limit_recovers_and_replays_exactly() {
    let runs: Vec<(tempfile::TempDir, Run)> = (0..2)
        .map(|_| {
            let dir = tempfile::tempdir().unwrap();
            let run = rein(dir.path(), &["chat", "--seed", "1", "what is a retry?"], &[], "");
            (dir, run)
        })
        .collect();
    let (dir, run) = &runs[0];
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stderr.contains("simulated-1 on the simulated provider (seed 1)"), "{run:?}");

    // Seed 1: the first attempt is rate limited (the simulated server asks for 519 ms), the
    // second answers.
    assert_eq!(lines_starting(&run.stderr, "retry "), ["retry 1/2 in 519 ms · RATE_LIMIT 429"]);
    assert!(run.stderr.contains("▸ turn 1 · Retried 1 time this turn · recovered"), "{run:?}");
    let id = session_id(run);
    assert!(run.stderr.contains(&format!("continue it: rein chat --session {id}")), "{run:?}");

    let path = log_path(dir.path(), &id);
    let events = checked_log(&path);
    assert_eq!(turn_ends(&events), [TurnEndReason::Completed]);
    let [answer] = answers(&events).try_into().unwrap();
    assert!(answer.contains("“what is a retry?”"), "{answer}");
    assert_eq!(run.stdout, format!("{answer}\n"), "stdout is the streamed answer");
    let check = rein(dir.path(), &["check", "--finished", path.to_str().unwrap()], &[], "");
    assert_eq!(check.code, Some(0), "{check:?}");

    // The same seed, another fresh session: the same answer and the same retries.
    let (other_dir, other) = &runs[1];
    assert_eq!(other.code, Some(0), "{other:?}");
    assert_ne!(session_id(other), id);
    assert_eq!(other.stdout, run.stdout);
    assert_eq!(lines_starting(&other.stderr, "retry "), lines_starting(&run.stderr, "retry "));
    checked_log(&log_path(other_dir.path(), &session_id(other)));
}

#[test]
fn interactive_mode_reads_prompts_from_piped_stdin_until_exit() {
    let dir = tempfile::tempdir().unwrap();
    let stdin = "first prompt\n\n   \nsecond prompt\n/exit\nnever sent\n";
    let run = rein(dir.path(), &["chat", "--seed", "9"], &[], stdin);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(lines_starting(&run.stderr, "> "), ["> first prompt", "> second prompt"]);
    // Seed 9: turn 2's first attempt gets a 500; the retry answers.
    assert_eq!(lines_starting(&run.stderr, "retry "), ["retry 1/2 in 461 ms · SERVER 500"]);
    assert!(run.stderr.contains("▸ turn 2 · Retried 1 time this turn · recovered"));

    let events = checked_log(&log_path(dir.path(), &session_id(&run)));
    assert_eq!(turn_ends(&events), [TurnEndReason::Completed, TurnEndReason::Completed]);
    let answers = answers(&events);
    assert!(answers[0].contains("“first prompt”") && answers[1].contains("“second prompt”"));
    assert_eq!(run.stdout, format!("{}\n{}\n", answers[0], answers[1]));
    assert!(!run.stdout.contains("never sent") && !run.stderr.contains("never sent"));

    // The end of input ends it too; no prompt at all is not a failure.
    let empty = rein(dir.path(), &["chat", "--seed", "9"], &[], "");
    assert_eq!(empty.code, Some(0), "{empty:?}");
    checked_log(&log_path(dir.path(), &session_id(&empty)));
}

fn deepseek(server: &Server) -> Vec<(&'static str, String)> {
    vec![("DEEPSEEK_API_KEY", KEY.to_owned()), ("DEEPSEEK_BASE_URL", server.base_url())]
}

fn env<'a>(vars: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    vars.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

#[test]
fn with_a_deepseek_key_the_answer_streams_from_the_server() {
    let (_rt, server) = serve(vec![answer(&["Hello", " from", " the server"])]);
    let dir = tempfile::tempdir().unwrap();
    let run = rein(dir.path(), &["chat", "hi there"], &env(&deepseek(&server)), "");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout, "Hello from the server\n");
    assert!(run.stderr.contains("deepseek-chat on DeepSeek at http://127.0.0.1:"), "{run:?}");
    assert!(!run.stderr.contains("retry ") && !run.stderr.contains("▸"), "no retry, no panel");

    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].headers["authorization"], format!("Bearer {KEY}"));
    assert_eq!(seen[0].json()["messages"], json!([{"role": "user", "content": "hi there"}]));
    let events = checked_log(&log_path(dir.path(), &session_id(&run)));
    assert_eq!(answers(&events), ["Hello from the server"]);
}

#[test]
fn with_only_an_openai_key_the_generic_preset_talks_to_its_base_url() {
    let (_rt, server) = serve(vec![answer(&["generic ", "answer"])]);
    let dir = tempfile::tempdir().unwrap();
    let vars = [
        ("OPENAI_API_KEY", KEY),
        ("OPENAI_BASE_URL", &server.base_url()),
        ("OPENAI_MODEL", "local-model"),
    ];
    let run = rein(dir.path(), &["chat", "hello"], &vars, "");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout, "generic answer\n");
    assert!(run.stderr.contains("local-model on OpenAI at http://127.0.0.1:"), "{run:?}");
    assert_eq!(server.seen()[0].json()["model"], "local-model");
    let events = checked_log(&log_path(dir.path(), &session_id(&run)));
    let provider = events.iter().find_map(|e| match &e.event {
        Event::RequestStart(r) => Some(r.provider.clone()),
        _ => None,
    });
    assert_eq!(provider.as_deref(), Some("openai"));
}

#[test]
fn a_429_then_success_shows_the_retry_line_the_panel_and_the_spans() {
    let (_rt, server) = serve(vec![
        status_reply(
            429,
            &[("retry-after-ms", "50")],
            r#"{"error":{"message":"Rate limit reached, slow down"}}"#,
        ),
        answer(&["recovered ", "answer"]),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let owned = deepseek(&server);
    let mut vars = env(&owned);
    vars.push(("RUST_LOG", "info"));
    let run = rein(dir.path(), &["chat", "hello"], &vars, "");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout, "recovered answer\n");
    assert_eq!(lines_starting(&run.stderr, "retry "), ["retry 1/2 in 50 ms · RATE_LIMIT 429"]);
    assert!(run.stderr.contains("▸ turn 1 · Retried 1 time this turn · recovered"), "{run:?}");

    // The spans of the session, the turn and its step, with GenAI fields, beside the runtime's
    // attempt spans and the adapter's chat spans.
    let span =
        |name: &str| -> Vec<&str> { run.stderr.lines().filter(|l| closes(l, name)).collect() };
    let turn = span("turn");
    assert_eq!(turn.len(), 1, "{run:?}");
    for field in [
        "turn=1",
        "gen_ai.provider.name=deepseek",
        "gen_ai.request.model=deepseek-chat",
        "gen_ai.usage.input_tokens=10",
        "retries=1",
        "turn.end=\"completed\"",
    ] {
        assert!(turn[0].contains(field), "{field}: {}", turn[0]);
    }
    assert!(span("step").iter().any(|l| l.contains("attempts=2")), "{run:?}");
    assert!(span("session").iter().any(|l| l.contains("gen_ai.conversation.id=")), "{run:?}");
    assert!(
        span("chat").iter().any(|l| l.contains("error.type=\"RATE_LIMIT\"")
            && l.contains("http.response.status_code=429")),
        "{run:?}"
    );
    assert!(span("attempt").iter().any(|l| l.contains("attempt=2")), "{run:?}");
    assert!(!run.stderr.contains(KEY) && !run.stdout.contains(KEY));

    let events = checked_log(&log_path(dir.path(), &session_id(&run)));
    assert_eq!(turn_ends(&events), [TurnEndReason::Completed]);
    assert_eq!(server.seen().len(), 2);
}

#[test]
fn a_401_fails_the_turn_naming_the_failure_and_the_key_appears_nowhere() {
    // The server echoes the key it was sent in its error message.
    let (_rt, server) = serve(vec![Reply::EchoAuth]);
    let dir = tempfile::tempdir().unwrap();
    let owned = deepseek(&server);
    let mut vars = env(&owned);
    vars.push(("RUST_LOG", "debug"));
    let run = rein(dir.path(), &["chat", "hello"], &vars, "");
    assert_eq!(run.code, Some(1), "{run:?}");
    assert_eq!(run.stdout, "");
    assert!(run.stderr.contains("▾ turn 1 · Not retried · failed with AUTH"), "{run:?}");
    assert!(run.stderr.contains("failed AUTH · HTTP 401"), "{run:?}");
    assert!(run.stderr.contains("Incorrect API key provided"), "the message verbatim: {run:?}");
    assert!(!run.stderr.contains(KEY), "{run:?}");

    let path = log_path(dir.path(), &session_id(&run));
    let events = checked_log(&path);
    let ends = turn_ends(&events);
    let [TurnEndReason::Error { failure }] = ends.as_slice() else { panic!("an error: {ends:?}") };
    assert_eq!((failure.code(), failure.status()), ("AUTH", Some(401)));
    let bytes = std::fs::read_to_string(&path).unwrap();
    assert!(!bytes.contains(KEY), "the log never holds the key");
    assert_eq!(server.seen().len(), 1, "AUTH is not retried");
}

#[test]
fn with_fallback_a_turn_whose_primary_is_out_of_quota_finishes_on_the_fallback_server() {
    let quota = r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota"}}"#;
    let (_rt, primary) = serve(vec![status_reply(429, &[], quota)]);
    let (_rt2, secondary) = serve(vec![answer(&["answered ", "by the fallback"])]);
    let dir = tempfile::tempdir().unwrap();
    let mut owned = deepseek(&primary);
    owned.push(("OPENAI_API_KEY", "sk-fallback-secret".to_owned()));
    owned.push(("OPENAI_BASE_URL", secondary.base_url()));
    let args = ["chat", "--fallback", "openai:local-model", "hello"];
    let run = rein(dir.path(), &args, &env(&owned), "");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout, "answered by the fallback\n");
    assert!(
        run.stderr.contains("fallback: openai:local-model (OpenAI at http://127.0.0.1:"),
        "{run:?}"
    );
    assert_eq!(
        lines_starting(&run.stderr, "switched to "),
        ["switched to openai:local-model · QUOTA"],
        "{run:?}"
    );
    assert!(run.stderr.contains("▸ turn 1 · Retried 1 time this turn · recovered"), "{run:?}");
    assert!(lines_starting(&run.stderr, "retry ").is_empty(), "a quota is not retried: {run:?}");
    assert!(!run.stderr.contains(KEY) && !run.stderr.contains("sk-fallback-secret"));

    assert_eq!(primary.seen().len(), 1);
    let [asked] = secondary.seen().try_into().unwrap();
    assert_eq!(asked.json()["model"], "local-model");
    assert_eq!(asked.headers["authorization"], "Bearer sk-fallback-secret");
    assert_eq!(asked.json()["messages"], json!([{"role": "user", "content": "hello"}]));
    let events = checked_log(&log_path(dir.path(), &session_id(&run)));
    assert_eq!(turn_ends(&events), [TurnEndReason::Completed]);
    let routes: Vec<(String, String)> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::RequestStart(r) => Some((r.provider.clone(), r.model.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        routes,
        [
            ("deepseek".to_owned(), "deepseek-chat".to_owned()),
            ("openai:local-model".to_owned(), "local-model".to_owned())
        ]
    );
}

#[test]
fn resuming_a_session_sends_its_earlier_history() {
    let (_rt, server) = serve(vec![answer(&["Paris."]), answer(&["About 2 million."])]);
    let dir = tempfile::tempdir().unwrap();
    let vars = deepseek(&server);
    let args = |prompt: &'static str| ["chat", "--session", "trip-1", prompt];
    let first = rein(dir.path(), &args("capital of France?"), &env(&vars), "");
    assert_eq!(first.code, Some(0), "{first:?}");
    assert!(first.stderr.contains("session trip-1 (new)"), "{first:?}");
    let second = rein(dir.path(), &args("and its population?"), &env(&vars), "");
    assert_eq!(second.code, Some(0), "{second:?}");
    assert!(second.stderr.contains("session trip-1 (resumed, 1 turn)"), "{second:?}");
    assert_eq!(second.stdout, "About 2 million.\n");

    let seen = server.seen();
    assert_eq!(
        seen[1].json()["messages"],
        json!([
            {"role": "user", "content": "capital of France?"},
            {"role": "assistant", "content": "Paris."},
            {"role": "user", "content": "and its population?"},
        ])
    );
    let events = checked_log(&log_path(dir.path(), "trip-1"));
    assert_eq!(answers(&events), ["Paris.", "About 2 million."]);
}

#[test]
fn ctrl_c_cancels_the_turn_and_the_log_says_the_user_cancelled_it() {
    let (_rt, server) = serve(vec![Reply::Sse(vec![delta("partial "), Part::Stall])]);
    let dir = tempfile::tempdir().unwrap();
    let child =
        command(dir.path(), &["chat", "--session", "c1", "hello"], &env(&deepseek(&server)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
    // Wait for the streamed text to be in the log, then press Ctrl-C.
    wait_for_line(&log_path(dir.path(), "c1"), "assistant/chunk");
    let kill = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(out.stdout, b"", "piped stdout holds only answers, and nothing answered");
    assert!(stderr.contains("cancelling the turn"), "{stderr}");
    assert!(stderr.contains("turn 1 cancelled"), "{stderr}");

    let events = checked_log(&log_path(dir.path(), "c1"));
    assert_eq!(turn_ends(&events), [TurnEndReason::Aborted { cause: CancelCause::User }]);
    assert_eq!(events.last().unwrap().kind(), "agent/idle", "the session closed the turn itself");
}

/// Waits until a line of the file at `path` contains `needle` (the file may not exist yet).
fn wait_for_line(path: &Path, needle: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !std::fs::read_to_string(path).is_ok_and(|text| text.lines().any(|l| l.contains(needle)))
    {
        assert!(std::time::Instant::now() < deadline, "no {needle} in {}", path.display());
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Arguments, environment, and the error wanted.
type Refusal<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], String);

#[test]
fn bad_input_is_refused_with_exit_2_naming_the_path_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let file = root.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let store = root.join(".rein/sessions");
    std::fs::create_dir_all(&store).unwrap();
    let corrupt = store.join("broken.jsonl");
    let bytes = concat!(
        r#"{"seq":0,"time":0,"type":"session/start","data":{"session":"broken","format":1}}"#,
        "\n",
        r#"{"seq":1,"oops"}"#,
        "\n"
    );
    std::fs::write(&corrupt, bytes).unwrap();

    let cases: [Refusal; 9] = [
        (
            &["chat", "--store", file.to_str().unwrap(), "hi"],
            &[],
            format!("--store {}: not a directory", file.display()),
        ),
        (
            &["chat", "--session", "../escape", "hi"],
            &[],
            "--session: invalid session id \"../escape\"".to_owned(),
        ),
        (
            &["chat", "--session", "broken", "hi"],
            &[],
            format!("{}:2: corrupt log line", ".rein/sessions/broken.jsonl"),
        ),
        (
            &["chat", "--provider", "deepseek", "hi"],
            &[],
            "--provider deepseek: DEEPSEEK_API_KEY is not set".to_owned(),
        ),
        (
            &["chat", "hi"],
            &[("DEEPSEEK_API_KEY", KEY), ("DEEPSEEK_BASE_URL", "ftp://x")],
            "DEEPSEEK_BASE_URL: must be an http(s) URL".to_owned(),
        ),
        (&["chat", "  "], &[], "PROMPT: must not be empty".to_owned()),
        (
            &["chat", "--fallback", "openai:gpt-4o-mini", "hi"],
            &[],
            "--fallback openai:gpt-4o-mini: OPENAI_API_KEY is not set".to_owned(),
        ),
        (
            &["chat", "--seed", "1", "--fallback", "sim-2", "--fallback", "simulated:sim-2", "hi"],
            &[],
            "--fallback simulated:sim-2: given twice".to_owned(),
        ),
        (&["chat", "--fallback", "", "hi"], &[], "--fallback: must not be empty".to_owned()),
    ];
    for (args, vars, want) in cases {
        let run = rein(root, args, vars, "");
        assert_eq!(run.code, Some(2), "{args:?}: {run:?}");
        assert!(run.stderr.contains(&format!("error: {want}")), "{args:?}: {run:?}");
        assert!(!run.stderr.contains(KEY), "{run:?}");
        assert_eq!(run.stdout, "");
    }
    assert_eq!(std::fs::read_to_string(&corrupt).unwrap(), bytes, "the log is left as it was");
    let listing: Vec<String> = std::fs::read_dir(&store)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(listing, ["broken.jsonl"], "no log, no .torn file, nothing else");
}

#[test]
fn spending_auto_retrys_budget_prints_its_status_lines_and_no_tracing_line_without_rust_log() {
    let limited =
        || status_reply(429, &[("retry-after-ms", "10")], r#"{"error":{"message":"slow down"}}"#);
    // llm-retry's 2 retries, auto-retry's 3, then its budget is spent: six 429s.
    let run_with = |rust_log: Option<&str>| {
        let (_rt, server) = serve((0..6).map(|_| limited()).collect());
        let dir = tempfile::tempdir().unwrap();
        let owned = deepseek(&server);
        let mut vars = env(&owned);
        vars.extend(rust_log.map(|level| ("RUST_LOG", level)));
        let run = rein(dir.path(), &["chat", "hello"], &vars, "");
        assert_eq!(run.code, Some(1), "{run:?}");
        assert_eq!(server.seen().len(), 6, "{run:?}");
        let events = checked_log(&log_path(dir.path(), &session_id(&run)));
        assert!(matches!(turn_ends(&events)[..], [TurnEndReason::Error { .. }]));
        run
    };

    let quiet = run_with(None);
    assert_eq!(lines_starting(&quiet.stderr, "retry ").len(), 5, "{quiet:?}");
    let spent = "auto-retry: the extra retries are spent";
    assert!(!quiet.stderr.contains(spent), "{quiet:?}");
    assert!(
        !quiet.stderr.contains(" WARN ") && !quiet.stderr.contains("rein_plugins::"),
        "no tracing line without RUST_LOG: {quiet:?}"
    );
    assert!(quiet.stderr.contains("· finally failed with RATE_LIMIT"), "the panel: {quiet:?}");

    // Asked for, the warning is there (so the quiet run above proves something).
    let traced = run_with(Some("warn"));
    assert!(traced.stderr.lines().any(|l| l.contains(" WARN ") && l.contains(spent)), "{traced:?}");
}

#[test]
fn route_health_asked_for_in_rein_toml_throttles_the_retry_its_spent_budget_cannot_pay() {
    let limited =
        || status_reply(429, &[("retry-after-ms", "10")], r#"{"error":{"message":"slow down"}}"#);
    let (_rt, server) = serve((0..6).map(|_| limited()).collect());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("rein.toml"),
        "[[routes]]\nprovider = \"deepseek\"\nhealth = true\n",
    )
    .unwrap();
    let owned = deepseek(&server);
    let run = rein(dir.path(), &["chat", "hello"], &env(&owned), "");
    assert_eq!(run.code, Some(1), "{run:?}");
    // Five failures leave the budget at half its ten tokens: the sixth attempt is not sent.
    assert_eq!(server.seen().len(), 5, "{run:?}");
    let events = checked_log(&log_path(dir.path(), &session_id(&run)));
    let throttled: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::RetryThrottled(t) => Some((t.plugin.as_str(), t.code.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(throttled, [("auto-retry", "RATE_LIMIT")], "{run:?}");
    assert!(matches!(turn_ends(&events)[..], [TurnEndReason::Error { .. }]));
    // Said as it happens, and in the panel.
    let line = "retry throttled · RATE_LIMIT: route deepseek's retry budget is spent · auto-retry";
    assert!(run.stderr.contains(line), "{run:?}");
    assert!(run.stderr.contains(", then throttled · finally failed with RATE_LIMIT"), "{run:?}");
    assert!(
        run.stderr.contains("retry throttled · auto-retry · turn 1·step 1 · deepseek"),
        "{run:?}"
    );
}

#[test]
fn the_chat_says_when_its_routes_breaker_opens_and_closes() {
    let limited =
        || status_reply(429, &[("retry-after-ms", "10")], r#"{"error":{"message":"slow down"}}"#);
    let (_rt, server) = serve(vec![limited(), limited(), answer(&["back"])]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("rein.toml"),
        "[[routes]]\nprovider = \"deepseek\"\nhealth = { minAttempts = 2, openMs = 1 }\n",
    )
    .unwrap();
    let owned = deepseek(&server);
    let run = rein(dir.path(), &["chat", "hello"], &env(&owned), "");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout, "back\n", "{run:?}");
    // The second failure opens the breaker; the retry 10 ms later finds it half-open and probes;
    // the answer closes it.
    let opened = run
        .stderr
        .find("route deepseek opened (circuit breaker): attempts fail at once with CIRCUIT_OPEN")
        .unwrap_or_else(|| panic!("{run:?}"));
    let closed = run
        .stderr
        .find("route deepseek closed (circuit breaker): requests go through again\n")
        .unwrap_or_else(|| panic!("{run:?}"));
    assert!(opened < closed, "{run:?}");
    assert_eq!(server.seen().len(), 3, "{run:?}");
    let events = checked_log(&log_path(dir.path(), &session_id(&run)));
    assert!(matches!(turn_ends(&events)[..], [TurnEndReason::Completed]));
}

#[test]
fn ctrl_c_during_a_retry_wait_says_the_turn_retried_and_was_cancelled_during_the_wait() {
    let limited =
        status_reply(429, &[("retry-after-ms", "9000")], r#"{"error":{"message":"wait"}}"#);
    let (_rt, server) = serve(vec![limited]);
    let dir = tempfile::tempdir().unwrap();
    let mut child =
        command(dir.path(), &["chat", "--session", "w1", "hello"], &env(&deepseek(&server)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
    // Wait for the retry's status line, then press Ctrl-C during its 9 s wait.
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("retry 1/2 in 9.0 s · RATE_LIMIT 429\n") {
        let n = std::io::BufRead::read_line(&mut stderr, &mut seen).unwrap();
        assert!(n > 0, "stderr closed before the retry line: {seen}");
    }
    let kill = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    stderr.read_to_string(&mut seen).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{seen}");
    assert!(
        seen.contains("▸ turn 1 · Retried 1 time this turn · cancelled during the wait\n"),
        "{seen}"
    );
    assert_eq!(server.seen().len(), 1, "the retry never started");
    let events = checked_log(&log_path(dir.path(), "w1"));
    assert_eq!(turn_ends(&events), [TurnEndReason::Aborted { cause: CancelCause::User }]);
}

#[test]
fn the_first_line_of_chat_help_names_every_provider() {
    let dir = tempfile::tempdir().unwrap();
    let help = rein(dir.path(), &["chat", "--help"], &[], "");
    let first = help.stdout.lines().next().unwrap();
    for provider in
        ["DeepSeek", "DEEPSEEK_API_KEY", "OpenAI-compatible", "OPENAI_API_KEY", "simulated"]
    {
        assert!(first.contains(provider), "{provider} in {first:?}");
    }
}

#[test]
fn piped_stdout_holds_only_the_answer_when_an_attempt_fails_after_streaming() {
    let (_rt, server) = serve(vec![
        Reply::Sse(vec![delta("a half "), delta("answer"), Part::Drop]),
        answer(&["the real ", "answer"]),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let run = rein(dir.path(), &["chat", "hello"], &env(&deepseek(&server)), "");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout, "the real answer\n", "no text of the failed attempt");
    assert_eq!(lines_starting(&run.stderr, "retry ").len(), 1, "{run:?}");
    assert!(!run.stderr.contains("cut off"), "nothing on stdout to take back: {run:?}");
    let events = checked_log(&log_path(dir.path(), &session_id(&run)));
    let chunks = events.iter().filter(|e| e.kind() == "assistant/chunk").count();
    assert_eq!(chunks, 4, "the log keeps every attempt's chunks");
    assert_eq!(answers(&events), ["the real answer"]);
}

#[test]
fn piped_stderr_gets_no_waiting_line_while_an_attempt_is_quiet() {
    // 3.5 s of silence before the first word: a terminal would show `waiting: nothing for 3 s`.
    let quiet = std::time::Duration::from_millis(3_500);
    let (_rt, server) = serve(vec![Reply::Sse(vec![
        Part::Sleep(quiet),
        delta("late "),
        delta("answer"),
        Part::Raw("data: [DONE]\n\n".into()),
    ])]);
    let dir = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let run = rein(dir.path(), &["chat", "hello"], &env(&deepseek(&server)), "");
    assert!(started.elapsed() >= quiet, "the attempt was quiet for 3.5 s");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout, "late answer\n");
    assert!(!run.stderr.contains("waiting"), "{run:?}");
    assert!(!run.stderr.contains('\r') && !run.stderr.contains('\u{1b}'), "{run:?}");
    checked_log(&log_path(dir.path(), &session_id(&run)));
}

/// An interactive `rein chat` on session `id` in `dir`, once its banner says the session is
/// open (and its lock held); the rest of its stderr is left to read.
fn holding(
    dir: &Path,
    id: &str,
    seed: &str,
) -> (std::process::Child, std::io::BufReader<std::process::ChildStderr>) {
    use std::io::BufRead;
    let mut child = command(dir, &["chat", "--seed", seed, "--session", id], &[])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.starts_with("one prompt per line") {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "the chat ended before its banner");
    }
    (child, stderr)
}

#[test]
fn a_second_chat_on_a_session_another_chat_holds_is_refused_naming_it_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // Each run its own seed: retry ids come from it (and must not repeat in one log).
    let (mut first, mut first_stderr) = holding(dir.path(), "shared", "9");
    let log = log_path(dir.path(), "shared");
    let before = std::fs::read(&log).unwrap();

    let second =
        rein(dir.path(), &["chat", "--seed", "9", "--session", "shared", "hello"], &[], "");
    assert_eq!(second.code, Some(2), "{second:?}");
    let want = format!(
        "error: session shared: .rein/sessions/shared.jsonl is in use by another process (pid {}, \
         since ",
        first.id()
    );
    assert!(second.stderr.contains(&want), "{second:?}");
    assert!(second.stderr.contains("lock file .rein/sessions/shared.jsonl.lock)"), "{second:?}");
    assert_eq!(second.stdout, "");
    assert_eq!(std::fs::read(&log).unwrap(), before, "the second chat wrote nothing");

    // The first goes on as if nothing happened.
    let mut stdin = first.stdin.take().unwrap();
    stdin.write_all(b"first prompt\n/exit\n").unwrap();
    drop(stdin);
    let out = first.wait_with_output().unwrap();
    let mut rest = String::new();
    first_stderr.read_to_string(&mut rest).unwrap();
    assert_eq!(out.status.code(), Some(0), "{rest}");
    assert_eq!(turn_ends(&checked_log(&log)), [TurnEndReason::Completed]);

    // Its lock went with its process: the session is free again, and the log continues.
    let again =
        rein(dir.path(), &["chat", "--seed", "10", "--session", "shared", "again"], &[], "");
    assert_eq!(again.code, Some(0), "{again:?}");
    assert_eq!(turn_ends(&checked_log(&log)), [TurnEndReason::Completed, TurnEndReason::Completed]);

    // A holder killed outright leaves no stale lock either.
    let (mut crashed, _stderr) = holding(dir.path(), "shared", "11");
    crashed.kill().unwrap();
    crashed.wait().unwrap();
    let after =
        rein(dir.path(), &["chat", "--seed", "12", "--session", "shared", "after"], &[], "");
    assert_eq!(after.code, Some(0), "{after:?}");
    assert_eq!(turn_ends(&checked_log(&log)), vec![TurnEndReason::Completed; 3]);
    let checked = rein(dir.path(), &["check", "--finished", log.to_str().unwrap()], &[], "");
    assert_eq!(checked.code, Some(0), "{checked:?}");
}
