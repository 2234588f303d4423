//! `rein console --store postgres://…` as a real process on a throwaway PostgreSQL cluster
//! (`rein-testkit`'s `PgCluster`), talking to the providers' scripted server through the
//! DeepSeek preset: a session created, prompted and followed live over the HTTP API, read back
//! (its log, its row, its pages); a plugin setting saved from the Plugins form, then — the
//! console restarted, the password from `PGPASSWORD` this time — found at its revision, durably
//! in the database; the same store served `--read-only`; a wrong password and a database that
//! is down refused at start as a store that cannot be opened (exit 2), with a clear error. The
//! password never appears in any output or page. The log ends with the invariant check.
//!
//! Without PostgreSQL installed the tests say how to install it and pass; with `CI=true` they
//! fail.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use rein::invariant::check_finished_log;
use rein::runtime::event::TurnEndReason;
use rein::runtime::store::postgres::PostgresStore;
use rein::runtime::store::{Durability, SessionStore};
use rein_testkit::PgCluster;
use rein_testkit::cli::command;
use rein_testkit::console::{Console, Updates, call};
use rein_testkit::log::turn_ends;
use rein_testkit::postgres::PASSWORD;
use rein_testkit::server::{Server, answer};
use serde_json::json;

const KEY: &str = "sk-console-pg-secret";

/// A console on the store `url`, in `dir`, talking to `server` (with `PGPASSWORD` when given).
fn console(
    dir: &Path,
    url: &str,
    server: &Server,
    pgpassword: Option<&str>,
    more: &[&str],
) -> Console {
    let base = server.base_url();
    let mut env = vec![("DEEPSEEK_API_KEY", KEY), ("DEEPSEEK_BASE_URL", base.as_str())];
    env.extend(pgpassword.map(|p| ("PGPASSWORD", p)));
    let mut args = vec!["--store", url];
    args.extend_from_slice(more);
    if !more.contains(&"--read-only") {
        args.extend(["--provider", "deepseek"]);
    }
    Console::start(dir, &args, &env)
}

/// Stops `console` (SIGTERM): it exits 0, and its stderr never shows the password or the key.
fn stopped(console: Console) -> String {
    let (code, stderr) = console.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("rein console stopped"), "{stderr}");
    no_secret(&stderr);
    stderr
}

fn no_secret(text: &str) {
    assert!(!text.contains(PASSWORD), "the password shows: {text}");
    assert!(!text.contains(KEY), "the key shows: {text}");
}

/// A page (its text), checked free of secrets.
async fn page(url: &str) -> String {
    let response = reqwest::get(url).await.unwrap();
    assert_eq!(response.status(), 200, "{url}");
    let text = response.text().await.unwrap();
    no_secret(&text);
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_on_postgres_serves_sessions_and_keeps_settings_across_a_restart() {
    let Some(cluster) = PgCluster::start() else { return };
    let url = cluster.create_database("console");
    let shown = format!("postgres://rein@127.0.0.1:{}/console", cluster.port());
    let server = Server::start(vec![answer(&["Hello", " from PostgreSQL"])]).await;
    let dir = tempfile::tempdir().unwrap();

    let first = console(dir.path(), &url, &server, None, &[]);
    assert!(first.wait_for_stderr(&format!("store {shown}"), std::time::Duration::from_secs(30)));
    let base = first.url.clone();
    let listed = call("GET", &format!("{base}/api/sessions"), None).await;
    assert_eq!(listed.body, json!({"sessions": [], "readOnly": false}));

    // A session: created, prompted, followed live until its turn ended.
    let made = call("POST", &format!("{base}/api/sessions"), Some(json!({"id": "pg1"}))).await;
    assert_eq!(made.status, 201, "{:?}", made.body);
    let again = call("POST", &format!("{base}/api/sessions"), Some(json!({"id": "pg1"}))).await;
    assert_eq!((again.status, again.body["error"]["kind"].clone()), (409, json!("exists")));
    let fresh = call("POST", &format!("{base}/api/sessions"), Some(json!({}))).await;
    assert_eq!(fresh.status, 201, "{:?}", fresh.body);
    let fresh = fresh.body["id"].as_str().unwrap().to_owned();
    let mut list = Updates::open(&format!("{base}/api/events")).await;
    let mut updates = Updates::open(&format!("{base}/api/sessions/pg1/events")).await;
    let start = updates.next().await;
    assert_eq!(start["state"], json!({"state": "idle"}), "{start}");
    let sent =
        call("POST", &format!("{base}/api/sessions/pg1/prompt"), Some(json!({"text": "hi pg"})))
            .await;
    assert_eq!((sent.status, sent.body.clone()), (202, json!({"session": "pg1"})));
    let done = updates
        .until("the answer", |u| u["tail"].as_str().unwrap().contains("data-ending=\"completed\""))
        .await;
    assert!(done["tail"].as_str().unwrap().contains("Hello from PostgreSQL"), "{done}");
    list.until("the session's turn in the list", |u| {
        u["rows"].as_str().is_some_and(|rows| rows.contains("data-session=\"pg1\""))
    })
    .await;
    drop((list, updates));

    // Read back: the log, the rows, the pages.
    let one = call("GET", &format!("{base}/api/sessions/pg1"), None).await;
    assert_eq!(
        (one.body["turns"].clone(), one.body["state"].clone()),
        (json!(1), json!({"state": "idle"}))
    );
    let listed = call("GET", &format!("{base}/api/sessions"), None).await;
    let rows = listed.body["sessions"].as_array().unwrap();
    let ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["pg1", fresh.as_str()], "newest activity first");
    assert_eq!((rows[0]["turns"].clone(), rows[0]["title"].clone()), (json!(1), json!("hi pg")));
    assert!(page(&format!("{base}/")).await.contains("data-session=\"pg1\""));
    assert!(page(&format!("{base}/sessions/pg1")).await.contains("hi pg"));
    let missing =
        call("POST", &format!("{base}/api/sessions/nope/prompt"), Some(json!({"text": "x"}))).await;
    assert_eq!(missing.status, 404);

    // A setting saved from the Plugins form: durable in the database.
    assert!(page(&format!("{base}/plugins")).await.contains("auto-retry"));
    let plugin = format!("{base}/api/plugins/auto-retry");
    let before = call("GET", &plugin, None).await;
    assert_eq!(
        (before.body["revision"].clone(), before.body["settings"]["extraRetries"].clone()),
        (json!(0), json!(3))
    );
    let saved = call(
        "POST",
        &format!("{plugin}/save"),
        Some(json!({"revision": 0, "fields": {"extraRetries": "6"}})),
    )
    .await;
    assert_eq!(
        (saved.status, saved.body["revision"].clone(), saved.body["changed"].clone()),
        (200, json!(1), json!(["extraRetries"])),
        "{:?}",
        saved.body
    );
    let stderr = stopped(first);
    assert!(stderr.contains(&format!("store {shown}")), "{stderr}");

    // Restarted, the password from PGPASSWORD: the setting is there, at its revision.
    let second =
        console(dir.path(), &cluster.url_without_password("console"), &server, Some(PASSWORD), &[]);
    let base = second.url.clone();
    let after = call("GET", &format!("{base}/api/plugins/auto-retry"), None).await;
    assert_eq!(
        (after.body["revision"].clone(), after.body["settings"]["extraRetries"].clone()),
        (json!(1), json!(6)),
        "{:?}",
        after.body
    );
    let one = call("GET", &format!("{base}/api/sessions/pg1"), None).await;
    assert_eq!(one.body["turns"], json!(1));
    stopped(second);

    // Read-only: the same sessions, nothing can change.
    let reading = console(dir.path(), &url, &server, None, &["--read-only"]);
    let base = reading.url.clone();
    let listed = call("GET", &format!("{base}/api/sessions"), None).await;
    assert_eq!(listed.body["readOnly"], json!(true));
    assert_eq!(listed.body["sessions"].as_array().unwrap().len(), 2);
    let refused =
        call("POST", &format!("{base}/api/sessions/pg1/prompt"), Some(json!({"text": "x"}))).await;
    assert_eq!((refused.status, refused.body["error"]["kind"].clone()), (403, json!("readOnly")));
    let one = call("GET", &format!("{base}/api/sessions/pg1"), None).await;
    assert_eq!(one.body["turns"], json!(1));
    let mut updates = Updates::open(&format!("{base}/api/sessions/pg1/events")).await;
    assert_eq!(updates.next().await["events"], one.body["events"].as_array().unwrap().len());
    drop(updates);
    stopped(reading);
    assert!(!dir.path().join(".rein").exists(), "nothing was written beside the console");

    // The log, checked as a finished log.
    let store = Arc::new(PostgresStore::open(&url, Durability::Os).await.unwrap());
    let events = store.load("pg1").await.unwrap().unwrap().events;
    assert_eq!(turn_ends(&events), [TurnEndReason::Completed]);
    let violations = check_finished_log(&events);
    assert!(violations.is_empty(), "{violations:?}");
    let settings = store.load_settings().await.unwrap();
    assert_eq!(settings.len(), 1, "{settings:?}");
}

#[test]
fn a_wrong_password_or_a_database_that_is_down_is_refused_at_start_without_the_password() {
    let Some(cluster) = PgCluster::start() else { return };
    let url = cluster.create_database("down");
    let shown = format!("postgres://rein@127.0.0.1:{}/down", cluster.port());
    let dir = tempfile::tempdir().unwrap();
    let run = |url: &str, more: &[&str]| {
        let mut args = vec!["console", "--port", "0", "--store", url];
        args.extend_from_slice(more);
        let out = command(dir.path(), &args, &[])
            .env_remove("PGPASSWORD")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let (stdout, stderr) =
            (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap());
        no_secret(&stdout);
        no_secret(&stderr);
        assert!(!stderr.contains("not-the-password"), "{stderr}");
        assert!(stdout.is_empty(), "it never listened: {stdout}");
        (out.status.code(), stderr)
    };
    let wrong = url.replace(PASSWORD, "not-the-password");
    for more in [&[][..], &["--read-only"][..]] {
        let (code, stderr) = run(&wrong, more);
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains(&format!("error: --store: postgres: {shown}: ")), "{stderr}");
        assert!(stderr.contains("password authentication failed"), "{stderr}");
    }
    cluster.stop_immediate();
    for more in [&[][..], &["--read-only"][..]] {
        let (code, stderr) = run(&url, more);
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains(&format!("error: --store: postgres: {shown}: ")), "{stderr}");
    }
    assert!(!dir.path().join(".rein").exists(), "nothing was written");
}
