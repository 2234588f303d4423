//! `rein chat` on Anthropic, as a process, against real HTTP servers on 127.0.0.1 that speak the
//! documented Messages stream: an Anthropic primary with the generation flags, a server that
//! echoes the key every way it can, an OpenAI-compatible primary out of quota handing the turn
//! to `--fallback anthropic:…` and back, which provider wins when several are configured, and
//! the flags' refusals. Every run that writes a session log ends with `rein check` of that log.

#![allow(clippy::unwrap_used)]

use rein_runtime::event::{Envelope, Event, TurnEndReason};
use rein_testkit::cli::{Run, checked_log, lines_starting, log_path, rein, rein_check, session_id};
use rein_testkit::log::{failures, turn_ends};
use rein_testkit::server::{Reply, serve, status_reply, with_headers};
use rein_testkit::{messages, server};
use serde_json::json;

const KEY: &str = "sk-ant-cli-test-9c41d7e2b05a";
const OPENAI_KEY: &str = "sk-openai-cli-test-3f8e";

/// Each attempt's (provider, model), from the log's `request/start`s.
fn attempts(events: &[Envelope]) -> Vec<(String, String)> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Event::RequestStart(r) => Some((r.provider.clone(), r.model.clone())),
            _ => None,
        })
        .collect()
}

/// The log after its invariant check and `rein check`, with no key and no system prompt in it.
fn finished_log(dir: &std::path::Path, run: &Run, system: Option<&str>) -> Vec<Envelope> {
    let path = log_path(dir, &session_id(run));
    let bytes = std::fs::read_to_string(&path).unwrap();
    assert!(!bytes.contains(KEY) && !bytes.contains(OPENAI_KEY), "the log never holds a key");
    if let Some(system) = system {
        assert!(!bytes.contains(system), "the system prompt is not in the log");
    }
    let events = checked_log(&path);
    rein_check(dir, &path);
    events
}

#[test]
fn an_anthropic_primary_answers_with_the_generation_flags() {
    let (_rt, server) = serve(vec![messages::answer(&["Bonjour", " !"])]);
    let dir = tempfile::tempdir().unwrap();
    let vars = [("ANTHROPIC_API_KEY", KEY), ("ANTHROPIC_BASE_URL", &server.base_url())];
    let args = [
        "chat",
        "--system",
        "Answer in French.",
        "--temperature",
        "0.3",
        "--max-tokens",
        "200",
        "hello",
    ];
    let run = rein(dir.path(), &args, &vars, "");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout, "Bonjour !\n");
    let banner = format!("rein chat · claude-haiku-4-5 on Anthropic at {}", server.base_url());
    assert_eq!(lines_starting(&run.stderr, "rein chat · "), [banner.as_str()], "{run:?}");
    assert!(lines_starting(&run.stderr, "also configured").is_empty(), "{run:?}");

    let [seen] = server.seen().try_into().unwrap();
    assert_eq!(seen.path, "/v1/messages");
    assert_eq!(seen.headers["x-api-key"], KEY);
    assert_eq!(seen.headers["anthropic-version"], "2023-06-01");
    assert_eq!(
        seen.json(),
        json!({"model": "claude-haiku-4-5", "max_tokens": 200, "system": "Answer in French.",
               "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
               "temperature": 0.3, "stream": true})
    );
    let events = finished_log(dir.path(), &run, Some("Answer in French."));
    assert_eq!(turn_ends(&events), [TurnEndReason::Completed]);
    assert_eq!(attempts(&events), [("anthropic".to_owned(), "claude-haiku-4-5".to_owned())]);
}

/// A 529 whose request id is the key and whose message quotes it.
fn echo_in_a_529(key: &str) -> Reply {
    messages::error(529, &[("request-id", key)], "overloaded_error", &format!("Overloaded ({key})"))
}

/// A stream that starts, then fails with an in-stream error echoing the key, under it as the
/// request id.
fn echo_in_an_in_stream_error(key: &str) -> Reply {
    let mut parts = messages::text_parts(&["half "]);
    parts.truncate(4);
    parts.push(messages::error_event("api_error", &format!("internal error; you sent {key}")));
    with_headers(&[("request-id", key)], Reply::Sse(parts))
}

/// An answer that streams the key, cut across three chunks.
fn echo_in_the_answer(key: &str) -> Reply {
    let (a, rest) = key.split_at(7);
    let (b, c) = rest.split_at(8);
    let pieces = ["Your key is ", a, b, &format!("{c}.")];
    with_headers(&[("request-id", key)], messages::answer(&pieces))
}

#[test]
fn a_server_echoing_the_key_in_headers_bodies_and_streams_leaks_it_nowhere_and_each_attempt_names_its_provider()
 {
    let (_rt, server) = serve(vec![
        Reply::FromHeader("x-api-key", echo_in_a_529),
        Reply::FromHeader("x-api-key", echo_in_an_in_stream_error),
        Reply::FromHeader("x-api-key", echo_in_the_answer),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let vars = [
        ("ANTHROPIC_API_KEY", KEY),
        ("ANTHROPIC_BASE_URL", &server.base_url()),
        ("RUST_LOG", "trace"),
    ];
    let run = rein(dir.path(), &["chat", "--expand", "what is my key?"], &vars, "");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(server.seen().len(), 3, "two retries, then the answer");
    assert!(run.stdout.ends_with("Your key is [redacted].\n"), "{run:?}");
    assert!(!run.stdout.contains(KEY) && !run.stderr.contains(KEY), "{run:?}");
    assert!(!run.stdout.contains(&KEY[..7]), "no piece of it either: {run:?}");
    let retries = lines_starting(&run.stderr, "retry ");
    assert_eq!(retries.len(), 2, "{run:?}");
    assert!(retries[0].starts_with("retry 1/2 in ") && retries[0].ends_with(" · SERVER 529"));
    assert!(retries[1].starts_with("retry 2/2 in ") && retries[1].ends_with(" · SERVER"));
    assert!(run.stderr.contains("Overloaded ([redacted])"), "{run:?}");
    assert!(run.stderr.contains("internal error; you sent [redacted]"), "{run:?}");
    // The expanded panel names each attempt's provider.
    let panel: Vec<&str> = run.stderr.lines().filter(|l| l.contains("turn 1·step 1 · ")).collect();
    assert_eq!(panel.len(), 3, "{run:?}");
    assert!(panel.iter().all(|l| l.contains("turn 1·step 1 · anthropic · ")), "{panel:?}");

    let events = finished_log(dir.path(), &run, None);
    assert_eq!(turn_ends(&events), [TurnEndReason::Completed]);
    let failures = failures(&events);
    let id = Some("[redacted]".to_owned());
    assert_eq!(
        failures,
        [
            ("SERVER".to_owned(), id.clone(), "Overloaded ([redacted])".to_owned()),
            ("SERVER".to_owned(), id, "internal error; you sent [redacted]".to_owned()),
        ]
    );
    let log = log_path(dir.path(), &session_id(&run));
    let show =
        rein(dir.path(), &["show", "--expand", "--color", "never", log.to_str().unwrap()], &[], "");
    assert_eq!(show.code, Some(0), "{show:?}");
    assert!(!show.stdout.contains(KEY) && show.stdout.contains("[redacted]"), "{show:?}");
}

#[test]
fn an_openai_compatible_primary_out_of_quota_finishes_the_turn_on_the_anthropic_fallback() {
    let quota = r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota"}}"#;
    let (_rt, primary) = serve(vec![status_reply(429, &[], quota)]);
    let (_rt2, fallback) = serve(vec![messages::answer(&["answered ", "by Claude"])]);
    let dir = tempfile::tempdir().unwrap();
    let vars = [
        ("OPENAI_API_KEY", OPENAI_KEY),
        ("OPENAI_BASE_URL", &primary.base_url()),
        ("ANTHROPIC_API_KEY", KEY),
        ("ANTHROPIC_BASE_URL", &fallback.base_url()),
    ];
    let args = [
        "chat",
        "--provider",
        "openai",
        "--fallback",
        "anthropic:claude-sonnet-4-5",
        "--system",
        "Be brief.",
        "--expand",
        "hello",
    ];
    let run = rein(dir.path(), &args, &vars, "");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout, "answered by Claude\n");
    let banner =
        format!("fallback: anthropic:claude-sonnet-4-5 (Anthropic at {})", fallback.base_url());
    assert_eq!(lines_starting(&run.stderr, "fallback: "), [banner.as_str()], "{run:?}");
    assert_eq!(
        lines_starting(&run.stderr, "switched to "),
        ["switched to anthropic:claude-sonnet-4-5 · QUOTA"],
        "{run:?}"
    );
    assert!(lines_starting(&run.stderr, "retry ").is_empty(), "a quota is not retried: {run:?}");
    assert!(run.stderr.contains("turn 1·step 1 · openai · failed QUOTA · HTTP 429"), "{run:?}");
    assert!(
        run.stderr.contains("turn 1·step 1 · anthropic:claude-sonnet-4-5 · answered"),
        "{run:?}"
    );
    assert!(!run.stderr.contains(KEY) && !run.stderr.contains(OPENAI_KEY), "{run:?}");

    let first = primary.seen()[0].json();
    assert_eq!(first["messages"][0], json!({"role": "system", "content": "Be brief."}));
    let [asked] = fallback.seen().try_into().unwrap();
    assert_eq!(asked.headers["x-api-key"], KEY);
    assert_eq!(asked.json()["model"], "claude-sonnet-4-5");
    assert_eq!(asked.json()["system"], "Be brief.", "the flags apply to every route");
    let events = finished_log(dir.path(), &run, Some("Be brief."));
    assert_eq!(turn_ends(&events), [TurnEndReason::Completed]);
    assert_eq!(
        attempts(&events),
        [
            ("openai".to_owned(), "gpt-4o-mini".to_owned()),
            ("anthropic:claude-sonnet-4-5".to_owned(), "claude-sonnet-4-5".to_owned()),
        ]
    );
}

#[test]
fn an_anthropic_primary_out_of_credit_finishes_the_turn_on_an_openai_compatible_fallback() {
    let credit = "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.";
    let (_rt, primary) = serve(vec![messages::error(400, &[], "invalid_request_error", credit)]);
    let (_rt2, fallback) = serve(vec![server::answer(&["from the ", "local model"])]);
    let dir = tempfile::tempdir().unwrap();
    let vars = [
        ("ANTHROPIC_API_KEY", KEY),
        ("ANTHROPIC_BASE_URL", &primary.base_url()),
        ("OPENAI_BASE_URL", &fallback.base_url()),
    ];
    let run = rein(dir.path(), &["chat", "--fallback", "openai:llama3", "hello"], &vars, "");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout, "from the local model\n");
    // Anthropic wins the default over a keyless local server; the banner says what it passed over.
    assert_eq!(
        lines_starting(&run.stderr, "also configured: "),
        ["also configured: openai (OPENAI_BASE_URL) · --provider chooses"],
        "{run:?}"
    );
    assert_eq!(lines_starting(&run.stderr, "switched to "), ["switched to openai:llama3 · QUOTA"]);
    assert_eq!(fallback.seen()[0].headers.get("authorization"), None, "keyless");
    let events = finished_log(dir.path(), &run, None);
    assert_eq!(
        attempts(&events),
        [
            ("anthropic".to_owned(), "claude-haiku-4-5".to_owned()),
            ("openai:llama3".to_owned(), "llama3".to_owned()),
        ]
    );
}

#[test]
fn with_several_keys_the_first_named_service_wins_and_provider_chooses_another() {
    let (_rt, deepseek) = serve(vec![server::answer(&["from DeepSeek"])]);
    let (_rt2, anthropic) = serve(vec![messages::answer(&["from Claude"])]);
    let dir = tempfile::tempdir().unwrap();
    let vars = [
        ("DEEPSEEK_API_KEY", OPENAI_KEY),
        ("DEEPSEEK_BASE_URL", &deepseek.base_url()),
        ("ANTHROPIC_API_KEY", KEY),
        ("ANTHROPIC_BASE_URL", &anthropic.base_url()),
    ];
    let run = rein(dir.path(), &["chat", "hi"], &vars, "");
    assert_eq!((run.code, run.stdout.as_str()), (Some(0), "from DeepSeek\n"), "{run:?}");
    assert_eq!(
        lines_starting(&run.stderr, "also configured: "),
        ["also configured: anthropic (ANTHROPIC_API_KEY) · --provider chooses"],
        "{run:?}"
    );
    finished_log(dir.path(), &run, None);
    let run = rein(dir.path(), &["chat", "--provider", "anthropic", "hi"], &vars, "");
    assert_eq!((run.code, run.stdout.as_str()), (Some(0), "from Claude\n"), "{run:?}");
    assert!(lines_starting(&run.stderr, "also configured").is_empty(), "asked: {run:?}");
    finished_log(dir.path(), &run, None);
    assert_eq!((deepseek.seen().len(), anthropic.seen().len()), (1, 1));
}

/// A command line.
type Args<'a> = &'a [&'a str];
/// Environment variables as (name, value) pairs.
type Vars<'a> = &'a [(&'a str, &'a str)];

#[test]
fn bad_generation_flags_and_missing_anthropic_keys_exit_2_naming_the_flag_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let claude = [("ANTHROPIC_API_KEY", KEY)];
    let cases: Vec<(Args, Vars, &str)> = vec![
        (
            &["chat", "--temperature", "hot", "hi"],
            &[],
            "invalid value 'hot' for '--temperature <T>'",
        ),
        (
            &["chat", "--temperature", "3", "hi"],
            &[],
            "error: --temperature: must be a number from 0 to 2, got 3",
        ),
        (
            &["chat", "--temperature", "-0.5", "hi"],
            &[],
            "error: --temperature: must be a number from 0 to 2, got -0.5",
        ),
        (
            &["chat", "--temperature", "NaN", "hi"],
            &[],
            "error: --temperature: must be a number from 0 to 2, got NaN",
        ),
        (
            &["chat", "--temperature", "1.5", "hi"],
            &claude,
            "error: --temperature: route anthropic takes 0 to 1, got 1.5",
        ),
        (&["chat", "--max-tokens", "0", "hi"], &[], "error: --max-tokens: must be at least 1"),
        (&["chat", "--max-tokens", "-5", "hi"], &[], "invalid value '-5' for '--max-tokens <N>'"),
        (
            &["chat", "--max-tokens", "many", "hi"],
            &[],
            "invalid value 'many' for '--max-tokens <N>'",
        ),
        (&["chat", "--system", " ", "hi"], &[], "error: --system: must not be empty"),
        (
            &["chat", "--provider", "anthropic", "hi"],
            &[],
            "error: --provider anthropic: ANTHROPIC_API_KEY is not set (without a key, use --provider simulated)",
        ),
        (
            &["chat", "--seed", "1", "--fallback", "anthropic:claude-x", "hi"],
            &[],
            "error: --fallback anthropic:claude-x: ANTHROPIC_API_KEY is not set",
        ),
        (
            &["chat", "hi"],
            &[("ANTHROPIC_API_KEY", KEY), ("ANTHROPIC_BASE_URL", "http://h/v1\n")],
            "error: ANTHROPIC_BASE_URL: must not contain a control character (U+000A at byte 11)",
        ),
    ];
    for (args, vars, want) in cases {
        let run = rein(root, args, vars, "");
        assert_eq!(run.code, Some(2), "{args:?}: {run:?}");
        assert!(run.stderr.contains(want), "{args:?}: {run:?}");
        assert!(!run.stderr.contains(KEY), "{run:?}");
        assert_eq!(run.stdout, "");
    }
    assert!(!root.join(".rein").exists(), "nothing written");
}
