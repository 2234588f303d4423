//! `rein.toml` and `rein config show`, end to end through the binary: a file's store, route and
//! plugin settings used by `rein chat`; a flag winning over the file; a mistake refused with its
//! key path and line before anything is written; a lenient plugin's fallback printed as a
//! warning with its line; and a console restarted on the same store showing the settings saved
//! through it at their revision, each value's source on its Plugins API and in
//! `rein config show`. Every log written passes the invariant check.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use rein_testkit::cli::{rein, rein_check, session_id};
use rein_testkit::console::{Console, call, checked_logs};
use serde_json::json;

const FILE: &str = r#"store = "logs"

[[routes]]
provider = "simulated"
model = "sim-from-file"

[plugins.auto-retry]
extraRetries = 4
maxDelayMs = -1
"#;

#[test]
fn chat_uses_the_files_store_route_and_settings_and_prints_its_fallbacks_with_their_lines() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rein.toml"), FILE).unwrap();
    let run = rein(dir.path(), &["chat", "--seed", "3", "hello"], &[], "");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stderr.contains("sim-from-file"), "the file's model: {run:?}");
    let warning = "warning: rein.toml:9: plugins.auto-retry.maxDelayMs: ";
    assert!(run.stderr.contains(warning), "{run:?}");
    let id = session_id(&run);
    let log = dir.path().join("logs").join(format!("{id}.jsonl"));
    assert!(log.is_file(), "the file's store: {run:?}");
    assert!(!dir.path().join(".rein").exists(), "not the default store");
    rein_check(dir.path(), &log);

    // A flag wins over the file.
    let elsewhere = dir.path().join("elsewhere");
    let flags =
        ["chat", "--seed", "3", "--store", elsewhere.to_str().unwrap(), "--model", "m2", "hi"];
    let run = rein(dir.path(), &flags, &[], "");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stderr.contains("m2 on") && !run.stderr.contains("sim-from-file"), "{run:?}");
    let log = elsewhere.join(format!("{}.jsonl", session_id(&run)));
    rein_check(dir.path(), &log);
}

#[test]
fn a_mistake_in_the_file_is_refused_with_its_line_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "store = \"logs\"\n[[routes]]\nprovider = \"gemini\"\n",
            "bad.toml:3: routes[0].provider: \"gemini\" is not a provider",
        ),
        (
            "store = \"logs\"\n[plugins.llm-retry]\njitterRatio = 2\n",
            "bad.toml:3: plugins.llm-retry.jitterRatio: ",
        ),
        (
            "store = \"logs\"\n[[routes]]\nprovider = \"openai\"\nkey = \"sk-leak\"\n",
            "bad.toml:4: routes[0].key: a key does not belong in a file",
        ),
        ("store = \"logs\"\nstore2 = 1\n", "bad.toml:2: store2: unknown key"),
        (
            "store = \"logs\"\n[[routes]]\nprovider = \"simulated\"\nhealth = { probes = 0 }\n",
            "bad.toml:4: routes[0].health.probes: must be at least 1, got 0",
        ),
        ("store = [\n", "bad.toml: not valid TOML"),
    ];
    for (text, want) in cases {
        std::fs::write(dir.path().join("bad.toml"), text).unwrap();
        for command in [
            &["chat", "--config", "bad.toml", "hi"][..],
            &["config", "show", "--config", "bad.toml"],
        ] {
            let run = rein(dir.path(), command, &[], "");
            assert_eq!(run.code, Some(2), "{command:?} {text:?}: {run:?}");
            assert!(run.stderr.contains(want), "{command:?} {text:?}: {run:?}");
            assert!(!run.stderr.contains("sk-leak") && !run.stdout.contains("sk-leak"), "{run:?}");
            assert!(!dir.path().join("logs").exists(), "nothing written: {text:?}");
        }
    }
    let run = rein(dir.path(), &["chat", "--config", "missing.toml", "hi"], &[], "");
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("--config missing.toml: "), "{run:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_restarted_on_its_store_shows_the_saved_settings_at_their_revision() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rein.toml"), FILE).unwrap();
    let plugin = |url: &str| format!("{url}/api/plugins/auto-retry");

    let first = Console::start(dir.path(), &["--seed", "1"], &[]);
    let created =
        call("POST", &format!("{}/api/sessions", first.url), Some(json!({"id": "s1"}))).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let read = call("GET", &plugin(&first.url), None).await;
    assert_eq!(read.body["revision"], 0, "{:?}", read.body);
    assert_eq!(read.body["settings"]["extraRetries"], 4, "the file's value");
    assert_eq!(read.body["sources"]["extraRetries"], "rein.toml:8");
    assert_eq!(read.body["sources"]["enabled"], "default");
    let patch = json!({"revision": 0, "patch": {"extraRetries": 6, "initialDelayMs": 700}});
    let patched = call("PATCH", &plugin(&first.url), Some(patch)).await;
    assert_eq!(
        (patched.status, patched.body["revision"].clone()),
        (200, json!(1)),
        "{:?}",
        patched.body
    );
    let (code, stderr) = first.stop();
    assert_eq!(code, Some(0), "{stderr}");

    let second = Console::start(dir.path(), &["--seed", "1"], &[]);
    let read = call("GET", &plugin(&second.url), None).await;
    assert_eq!(read.body["revision"], 1, "{:?}", read.body);
    assert_eq!(read.body["settings"]["extraRetries"], 6);
    assert_eq!(read.body["sources"]["extraRetries"], "saved at revision 1");
    assert_eq!(read.body["sources"]["initialDelayMs"], "saved at revision 1");
    assert_eq!(read.body["sources"]["enabled"], "default");
    // A page opened before the restart names revision 0: refused after it.
    let stale = json!({"revision": 0, "patch": {"extraRetries": 2}});
    let refused = call("PATCH", &plugin(&second.url), Some(stale)).await;
    assert_eq!(refused.status, 409, "{:?}", refused.body);
    let page = reqwest::get(format!("{}/plugins", second.url)).await.unwrap().text().await.unwrap();
    assert!(page.contains("In force: saved at revision 1."), "the Plugins page says so");
    assert!(!page.contains("In force: rein.toml:9."), "maxDelayMs: the file's value was refused");
    assert!(page.contains("In force: default."));
    assert!(second.wait_for_stderr("Ctrl-C stops it", Duration::from_secs(10)));
    let (code, stderr) = second.stop();
    assert_eq!(code, Some(0), "{stderr}");

    let show = rein(dir.path(), &["config", "show"], &[], "");
    assert_eq!(show.code, Some(0), "{show:?}");
    for line in [
        "configuration: rein.toml",
        "store: logs (rein.toml:1)",
        "  routes[0]: simulated · model sim-from-file · health off (default) (rein.toml:3)",
        "chain: llm-retry, compaction, auto-retry (default)",
        "auto-retry: revision 1",
        "  extraRetries = 6 (saved at revision 1)",
        "  maxDelayMs = 60000 (default)",
        "llm-retry: revision 0 (read-only at run time)",
    ] {
        assert!(show.stdout.lines().any(|l| l == line), "{line:?} in:\n{}", show.stdout);
    }
    assert!(show.stderr.contains("rein.toml:9: plugins.auto-retry.maxDelayMs"), "{show:?}");
    let logs = checked_logs(&dir.path().join("logs"));
    assert_eq!(logs.len(), 1, "the session the first console created");
}
