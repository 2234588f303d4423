//! `rein console`'s own HTTP API, against the real server: the binary started on
//! `--port 0`, talking to the providers' scripted axum server on 127.0.0.1 through the DeepSeek
//! preset, driven with a plain HTTP client (reqwest; a raw TCP request for a foreign `Host`).
//!
//! Sessions created, prompted, followed over server-sent events and cancelled; plugin settings
//! read, patched under the revision fence (a stale patch refused, an invalid one naming its
//! field, a read-only plugin refused), a form's staged edits checked and saved; `enabled: false`
//! ending a turn parked in auto-retry's wait; with `--fallback`, its settings staged (a route
//! not served refused under `routes`) and saved, and a turn whose primary is out of quota
//! finishing on the fallback server, the switch in its panel; a route with route health shown
//! live on the Routes API as its breaker opens, half-opens and closes, its short-circuited
//! attempt named in the session's panel; requests with a foreign `Host`, `Origin` or
//! `Sec-Fetch-Site`, or a write without JSON, refused; a store served read-only followed as it
//! grows and never written; bad input and a taken port refused with their exit status. Every
//! console stopped with SIGTERM exits 0, and every log it wrote passes the invariant check.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use rein_runtime::event::{CancelCause, Event, TurnEndReason};
use rein_testkit::cli::command;
use rein_testkit::console::{Console, Updates, call, checked_logs};
use rein_testkit::log::turn_ends;
use rein_testkit::server::{Part, Reply, Server, answer, delta, status_reply};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const KEY: &str = "sk-console-test-secret";

/// A console in `dir` talking to `server` through the DeepSeek preset.
fn against(dir: &std::path::Path, server: &Server) -> Console {
    let base = server.base_url();
    Console::start(
        dir,
        &["--provider", "deepseek"],
        &[("DEEPSEEK_API_KEY", KEY), ("DEEPSEEK_BASE_URL", &base)],
    )
}

fn stopped(console: Console) -> String {
    let (code, stderr) = console.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("rein console stopped"), "{stderr}");
    assert!(!stderr.contains(KEY), "the key never shows: {stderr}");
    stderr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_created_prompted_followed_live_and_cancelled() {
    let script = vec![
        answer(&["Hello", " <b>there</b>"]),
        Reply::Sse(vec![delta("partial <i>answer</i>"), Part::Stall]),
    ];
    let server = Server::start(script).await;
    let dir = tempfile::tempdir().unwrap();
    let console = against(dir.path(), &server);
    let url = console.url.clone();

    let listed = call("GET", &format!("{url}/api/sessions"), None).await;
    assert_eq!(
        (listed.status, listed.body.clone()),
        (200, json!({"sessions": [], "readOnly": false}))
    );

    // New sessions: a fresh id, a chosen one, a taken one, a bad one. The list follows live.
    let mut list = Updates::open(&format!("{url}/api/events")).await;
    assert!(list.next().await["rows"].as_str().unwrap().contains("No sessions yet."));
    let made = call("POST", &format!("{url}/api/sessions"), Some(json!({}))).await;
    assert_eq!(made.status, 201, "{:?}", made.body);
    let id = made.body["id"].as_str().unwrap().to_owned();
    assert_eq!(made.body["url"], format!("/sessions/{id}"));
    let mine = call("POST", &format!("{url}/api/sessions"), Some(json!({"id": "mine"}))).await;
    assert_eq!(mine.status, 201);
    let again = call("POST", &format!("{url}/api/sessions"), Some(json!({"id": "mine"}))).await;
    assert_eq!((again.status, again.body["error"]["kind"].clone()), (409, json!("exists")));
    let bad = call("POST", &format!("{url}/api/sessions"), Some(json!({"id": "../up"}))).await;
    assert_eq!((bad.status, bad.body["error"]["field"].clone()), (400, json!("id")));
    let rows = list
        .until("both new sessions", |u| {
            let rows = u["rows"].as_str().unwrap();
            rows.contains(&format!("data-session=\"{id}\""))
                && rows.contains("data-session=\"mine\"")
        })
        .await;
    assert!(!rows["rows"].as_str().unwrap().contains("No sessions yet."));
    drop(list);

    // A prompt: the stream tells the turn as it runs and once it ended.
    let mut updates = Updates::open(&format!("{url}/api/sessions/{id}/events")).await;
    let first = updates.next().await;
    assert_eq!(
        (first["state"].clone(), first["running"].clone()),
        (json!({"state": "idle"}), json!(false))
    );
    assert!(first["tail"].as_str().unwrap().contains("No turn yet."), "{first}");
    let sent =
        call("POST", &format!("{url}/api/sessions/{id}/prompt"), Some(json!({"text": "hi <you>"})))
            .await;
    assert_eq!((sent.status, sent.body.clone()), (202, json!({"session": id})));
    let done = updates
        .until("the answer", |u| u["tail"].as_str().unwrap().contains("data-ending=\"completed\""))
        .await;
    let html = done["tail"].as_str().unwrap();
    assert!(html.contains("<div class=\"text\">hi &lt;you&gt;</div>"), "escaped: {html}");
    assert!(html.contains("Hello &lt;b&gt;there&lt;/b&gt;"), "escaped: {html}");
    assert_eq!(done["state"], json!({"state": "idle"}));

    // A turn that streams, then stalls: shown as it streams; cancelled.
    let sent =
        call("POST", &format!("{url}/api/sessions/{id}/prompt"), Some(json!({"text": "and?"})))
            .await;
    assert_eq!(sent.status, 202);
    let streaming = updates
        .until("the streamed text", |u| u["tail"].as_str().unwrap().contains("streaming"))
        .await;
    assert_eq!(streaming["state"], json!({"state": "running", "turn": 2}));
    // Turn 1 ended and was sent whole: the page keeps it; updates carry turn 2 only.
    assert_eq!(streaming["kept"], 1);
    let tail = streaming["tail"].as_str().unwrap();
    assert!(tail.starts_with("<article class=\"turn\" id=\"conversation-turn-2\""), "{tail}");
    assert!(!tail.contains("conversation-turn-1"), "{tail}");
    assert!(streaming["tail"].as_str().unwrap().contains("partial &lt;i&gt;answer&lt;/i&gt;"));
    let cancelled = call("POST", &format!("{url}/api/sessions/{id}/cancel"), Some(json!({}))).await;
    assert_eq!((cancelled.status, cancelled.body.clone()), (200, json!({"cancelled": true})));
    let idle = updates.until("the cancelled turn", |u| u["running"] == json!(false)).await;
    assert!(idle["tail"].as_str().unwrap().contains(">cancelled</span>"), "{idle}");
    let nothing = call("POST", &format!("{url}/api/sessions/{id}/cancel"), Some(json!({}))).await;
    assert_eq!(nothing.body, json!({"cancelled": false}));

    // Bad prompts change nothing.
    let cases = [
        (json!({"text": "  "}), 400, "text: must not be empty"),
        (json!({"txt": "x"}), 400, "txt: unknown key (expected: text)"),
    ];
    for (body, status, message) in cases {
        let refused = call("POST", &format!("{url}/api/sessions/{id}/prompt"), Some(body)).await;
        assert_eq!(
            (refused.status, refused.body["error"]["message"].clone()),
            (status, json!(message))
        );
    }
    let missing =
        call("POST", &format!("{url}/api/sessions/nope/prompt"), Some(json!({"text": "x"}))).await;
    assert_eq!((missing.status, missing.body["error"]["kind"].clone()), (404, json!("notFound")));
    assert_eq!(call("GET", &format!("{url}/api/sessions/nope"), None).await.status, 404);
    assert_eq!(call("GET", &format!("{url}/api/nothing"), None).await.status, 404);

    let one = call("GET", &format!("{url}/api/sessions/{id}"), None).await;
    assert_eq!(
        (one.body["turns"].clone(), one.body["state"].clone()),
        (json!(2), json!({"state": "idle"}))
    );
    let listed = call("GET", &format!("{url}/api/sessions"), None).await;
    let rows = listed.body["sessions"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["id"], json!(id), "newest activity first");
    assert_eq!(
        (rows[0]["turns"].clone(), rows[0]["title"].clone(), rows[0]["lastEnding"].clone()),
        (json!(2), json!("hi <you>"), json!("cancelled"))
    );

    // Stopping ends the event stream.
    let stopping = tokio::task::spawn_blocking(move || stopped(console));
    assert!(updates.ends_within(Duration::from_secs(30)).await, "the stream ends when it stops");
    stopping.await.unwrap();
    let logs = checked_logs(&dir.path().join(".rein/sessions"));
    let ids: Vec<&str> = logs.iter().map(|(id, _)| id.as_str()).collect();
    let mut want = vec![id.as_str(), "mine"];
    want.sort_unstable();
    assert_eq!(ids, want);
    let events = &logs.iter().find(|(i, _)| *i == id).unwrap().1;
    assert_eq!(
        turn_ends(events),
        [TurnEndReason::Completed, TurnEndReason::Aborted { cause: CancelCause::User }]
    );
    // The second request carried the first turn's history.
    let second = server.seen()[1].json();
    assert_eq!(second["messages"][0]["content"], "hi <you>");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_are_patched_under_the_revision_fence_and_switching_off_ends_a_wait() {
    let limited = status_reply(
        429,
        &[("retry-after", "3600")],
        &json!({"error": {"message": "slow down <script>x</script>"}}).to_string(),
    );
    let server = Server::start(vec![limited]).await;
    let dir = tempfile::tempdir().unwrap();
    let console = against(dir.path(), &server);
    let url = console.url.clone();
    let plugin = |name: &str| format!("{url}/api/plugins/{name}");

    let all = call("GET", &format!("{url}/api/plugins"), None).await;
    let names: Vec<&str> = all.body["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["llm-retry", "compaction", "auto-retry"]);
    let llm = &all.body["plugins"][0];
    assert_eq!((llm["editable"].clone(), llm["readOnly"].clone()), (json!(false), json!(true)));
    assert!(llm["readOnlyReason"].as_str().unwrap().contains("fixed when the runtime is built"));
    let auto = call("GET", &plugin("auto-retry"), None).await;
    assert_eq!(
        (auto.body["revision"].clone(), auto.body["settings"]["extraRetries"].clone()),
        (json!(0), json!(3))
    );

    // The raw settings API: accepted, stale, invalid, read-only, unknown.
    let patched = call(
        "PATCH",
        &plugin("auto-retry"),
        Some(json!({"revision": 0, "patch": {"extraRetries": 5}})),
    )
    .await;
    assert_eq!(
        (patched.status, patched.body["revision"].clone(), patched.body["changed"].clone()),
        (200, json!(1), json!(["extraRetries"]))
    );
    let stale = call(
        "PATCH",
        &plugin("auto-retry"),
        Some(json!({"revision": 0, "patch": {"extraRetries": 6}})),
    )
    .await;
    assert_eq!(
        (
            stale.status,
            stale.body["error"]["kind"].clone(),
            stale.body["error"]["revision"].clone()
        ),
        (409, json!("stale"), json!(1))
    );
    let invalid = call(
        "PATCH",
        &plugin("auto-retry"),
        Some(json!({"revision": 1, "patch": {"extraRetries": 11}})),
    )
    .await;
    assert_eq!(invalid.status, 422);
    assert_eq!(
        invalid.body["error"]["problems"],
        json!([{"field": "extraRetries", "message": "extraRetries: must be an integer within 0..=10, got 11"}])
    );
    let read_only =
        call("PATCH", &plugin("llm-retry"), Some(json!({"revision": 0, "patch": {}}))).await;
    assert_eq!(
        (read_only.status, read_only.body["error"]["kind"].clone()),
        (403, json!("readOnly"))
    );
    let unknown = call("PATCH", &plugin("nope"), Some(json!({"revision": 0, "patch": {}}))).await;
    assert_eq!(unknown.status, 404);
    assert_eq!(
        call("GET", &plugin("auto-retry"), None).await.body["settings"]["extraRetries"],
        5,
        "unchanged by the refusals"
    );

    // A form's staged edits: checked without applying, then saved.
    let form = |revision: u64, fields: Value| json!({"revision": revision, "fields": fields});
    let checked = call(
        "POST",
        &format!("{}/staged", plugin("auto-retry")),
        Some(form(
            1,
            json!({"extraRetries": "11", "maxDelayMs": "600000",
                            "retryableCodes": {"switches": [], "other": ""}}),
        )),
    )
    .await;
    assert_eq!(checked.status, 200);
    assert_eq!(checked.body["changed"], json!(["maxDelayMs"]));
    let fields: Vec<&str> = checked.body["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["extraRetries", "retryableCodes"]);
    assert_eq!(
        call("GET", &plugin("auto-retry"), None).await.body["revision"],
        1,
        "nothing applied"
    );
    let blocked = call(
        "POST",
        &format!("{}/save", plugin("auto-retry")),
        Some(form(1, json!({"extraRetries": "1x"}))),
    )
    .await;
    assert_eq!(
        (blocked.status, blocked.body["error"]["message"].clone()),
        (422, json!("extraRetries: must be an integer within 0..=10, got \"1x\""))
    );
    let saved = call(
        "POST",
        &format!("{}/save", plugin("auto-retry")),
        Some(form(1, json!({"extraRetries": "5", "maxDelayMs": "600000"}))),
    )
    .await;
    assert_eq!(
        (saved.status, saved.body["revision"].clone(), saved.body["changed"].clone()),
        (200, json!(2), json!(["maxDelayMs"])),
        "only the changed field is sent"
    );
    assert!(saved.body["html"].as_str().unwrap().contains("Saved revision 2: maxDelayMs."));
    let late = call(
        "POST",
        &format!("{}/save", plugin("auto-retry")),
        Some(form(1, json!({"extraRetries": "4"}))),
    )
    .await;
    assert_eq!((late.status, late.body["error"]["kind"].clone()), (409, json!("stale")));
    // A form still open at revision 1 is read against revision 1's settings: its one edit is
    // extraRetries, not the maxDelayMs another client saved since.
    let stale = call(
        "POST",
        &format!("{}/staged", plugin("auto-retry")),
        Some(form(1, json!({"extraRetries": "4", "maxDelayMs": "60000"}))),
    )
    .await;
    assert_eq!(
        stale.body,
        json!({"revision": 2, "basedOn": 1, "stale": true, "changed": ["extraRetries"], "problems": []})
    );
    // A revision this console never saw: its edits cannot be told, the stale state can.
    let unknown = call(
        "POST",
        &format!("{}/staged", plugin("auto-retry")),
        Some(form(99, json!({"extraRetries": "4"}))),
    )
    .await;
    assert_eq!(
        (unknown.body["stale"].clone(), unknown.body["changed"].clone()),
        (json!(true), Value::Null)
    );
    assert_eq!(call("GET", &plugin("auto-retry"), None).await.body["settings"]["extraRetries"], 5);

    // A turn parked in auto-retry's wait (llm-retry gives a 1 h Retry-After up; auto-retry
    // clamps it to maxDelayMs, now 10 min); switching auto-retry off ends it at once.
    let id = call("POST", &format!("{url}/api/sessions"), Some(json!({}))).await.body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut updates = Updates::open(&format!("{url}/api/sessions/{id}/events")).await;
    call("POST", &format!("{url}/api/sessions/{id}/prompt"), Some(json!({"text": "wait"}))).await;
    let waiting = updates.until("auto-retry's wait", |u| u["state"]["state"] == "waiting").await;
    let state = &waiting["state"];
    assert_eq!(
        (state["plugin"].as_str(), state["code"].as_str()),
        (Some("auto-retry"), Some("RATE_LIMIT"))
    );
    // As the log writes it: `600000`, not `600000.0`.
    assert_eq!(state["delayMs"].to_string(), "600000");
    let off = call(
        "PATCH",
        &plugin("auto-retry"),
        Some(json!({"revision": 2, "patch": {"enabled": false}})),
    )
    .await;
    assert_eq!(off.status, 200);
    let ended = updates.until("the turn's end", |u| u["running"] == json!(false)).await;
    assert!(ended["tail"].as_str().unwrap().contains("failed: RATE_LIMIT"), "{ended}");

    stopped(console);
    let logs = checked_logs(&dir.path().join(".rein/sessions"));
    let events = &logs[0].1;
    let kinds: Vec<&str> = events.iter().map(|e| e.kind()).collect();
    let from_retry: Vec<&str> = kinds.iter().copied().skip_while(|k| *k != "llm/retry").collect();
    // The patch is accepted (the wait ends) and then `config/changed` is written to every awake
    // session, while the turn closes: either may come first.
    let mut closing = from_retry.clone();
    closing.retain(|k| *k != "config/changed");
    assert_eq!(
        closing,
        ["llm/retry", "step/end", "turn/end", "agent/idle"],
        "no llm/retry-started: the wait ended with the switch"
    );
    assert!(kinds.contains(&"config/changed"), "{kinds:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_fallback_its_settings_are_staged_and_saved_and_a_switch_shows_in_the_session() {
    let quota = json!({"error": {"message": "You exceeded your current quota", "type": "insufficient_quota"}});
    let primary = Server::start(vec![status_reply(429, &[], &quota.to_string())]).await;
    let secondary = Server::start(vec![answer(&["from ", "the fallback"])]).await;
    let dir = tempfile::tempdir().unwrap();
    let (primary_url, secondary_url) = (primary.base_url(), secondary.base_url());
    let console = Console::start(
        dir.path(),
        &[
            "--provider",
            "deepseek",
            "--fallback",
            "openai:small",
            "--fallback",
            "deepseek-reasoner",
        ],
        &[
            ("DEEPSEEK_API_KEY", KEY),
            ("DEEPSEEK_BASE_URL", &primary_url),
            ("OPENAI_API_KEY", KEY),
            ("OPENAI_BASE_URL", &secondary_url),
        ],
    );
    let url = console.url.clone();
    let plugin = format!("{url}/api/plugins/fallback");
    let all = call("GET", &format!("{url}/api/plugins"), None).await;
    let names: Vec<&str> = all.body["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fallback", "llm-retry", "compaction", "auto-retry"]);
    let settings = call("GET", &plugin, None).await;
    assert_eq!(
        settings.body["settings"]["routes"],
        json!(["openai:small", "deepseek:deepseek-reasoner"])
    );

    // Staged: a route this console does not serve is a problem of the routes field.
    let form = |revision: u64, fields: Value| json!({"revision": revision, "fields": fields});
    let checked = call(
        "POST",
        &format!("{plugin}/staged"),
        Some(form(0, json!({"routes": "openai:small\nnowhere"}))),
    )
    .await;
    assert_eq!(checked.status, 200);
    assert_eq!(
        checked.body["problems"],
        json!([{"field": "routes", "message": "routes[1]: no provider route named \"nowhere\" is served (served: deepseek, deepseek:deepseek-reasoner, openai:small)"}])
    );
    // Saved: the order of preference, reversed; the cooldown off.
    let saved = call(
        "POST",
        &format!("{plugin}/save"),
        Some(form(
            0,
            json!({"routes": "deepseek:deepseek-reasoner\nopenai:small", "cooldownMs": "0"}),
        )),
    )
    .await;
    assert_eq!(
        (saved.status, saved.body["revision"].clone(), saved.body["changed"].clone()),
        (200, json!(1), json!(["routes", "cooldownMs"]))
    );
    let routes = json!(["openai:small", "deepseek:deepseek-reasoner"]);
    let back =
        call("PATCH", &plugin, Some(json!({"revision": 1, "patch": {"routes": routes}}))).await;
    assert_eq!(back.status, 200);

    // A prompt: the primary is out of quota, the turn finishes on openai:small.
    let id = call("POST", &format!("{url}/api/sessions"), Some(json!({}))).await.body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut updates = Updates::open(&format!("{url}/api/sessions/{id}/events")).await;
    call("POST", &format!("{url}/api/sessions/{id}/prompt"), Some(json!({"text": "hi"}))).await;
    let done = updates
        .until("the answer", |u| u["tail"].as_str().unwrap().contains("data-ending=\"completed\""))
        .await;
    let html = done["tail"].as_str().unwrap();
    assert!(html.contains("from the fallback"), "{html}");
    assert!(html.contains("rein-route-switched"), "the panel shows the switch: {html}");
    assert!(html.contains("deepseek → openai:small"), "{html}");

    stopped(console);
    let logs = checked_logs(&dir.path().join(".rein/sessions"));
    let switched = logs[0]
        .1
        .iter()
        .any(|e| matches!(&e.event, Event::RouteSwitched(s) if s.to == "openai:small"));
    assert!(switched);
    assert_eq!((primary.seen().len(), secondary.seen().len()), (1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routes_breaker_is_shown_live_as_it_opens_half_opens_and_closes() {
    let down = || status_reply(503, &[("retry-after-ms", "20")], r#"{"error":{"message":"down"}}"#);
    let server = Server::start(vec![down(), down(), answer(&["back"])]).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("rein.toml"),
        "[[routes]]\nprovider = \"deepseek\"\nhealth = { minAttempts = 2, openMs = 300 }\n",
    )
    .unwrap();
    let base = server.base_url();
    let console =
        Console::start(dir.path(), &[], &[("DEEPSEEK_API_KEY", KEY), ("DEEPSEEK_BASE_URL", &base)]);
    let url = console.url.clone();
    let health = |answer: &Value| answer["routes"][0]["health"].clone();

    let routes = call("GET", &format!("{url}/api/routes"), None).await;
    assert_eq!((routes.status, routes.body["readOnly"].clone()), (200, json!(false)));
    assert_eq!(routes.body["routes"][0]["name"], "deepseek");
    let now = health(&routes.body);
    assert_eq!(
        (now["state"].clone(), now["tokens"].clone(), now["throttled"].clone()),
        (json!("closed"), json!(10.0), json!(false))
    );
    assert_eq!(
        (now["settings"]["openMs"].clone(), now["revision"].clone()),
        (json!(300), json!(0))
    );
    assert_eq!(now["changes"], json!([]));
    let page = reqwest::get(format!("{url}/routes")).await.unwrap().text().await.unwrap();
    assert!(page.contains(r#"<section class="route" id="route-deepseek" data-route="deepseek" data-state="closed">"#), "{page}");

    let mut live = Updates::open(&format!("{url}/api/routes/events")).await;
    let first = live.next().await;
    assert!(first["html"].as_str().unwrap().contains("Closed: attempts go through."), "{first}");

    // Two attempts fail: the second opens the breaker; the retry after it is short-circuited.
    let id = call("POST", &format!("{url}/api/sessions"), Some(json!({}))).await.body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut session = Updates::open(&format!("{url}/api/sessions/{id}/events")).await;
    call("POST", &format!("{url}/api/sessions/{id}/prompt"), Some(json!({"text": "hi"}))).await;
    let open = live.until("the breaker open", |u| health(u)["state"] == "open").await;
    let change = &health(&open)["changes"][0];
    assert_eq!((change["from"].clone(), change["to"].clone()), (json!("closed"), json!("open")));
    assert!(change["openUntilMs"].as_u64().unwrap() > change["atMs"].as_u64().unwrap());
    let html = open["html"].as_str().unwrap();
    assert!(html.contains(r#"data-state="open""#) && html.contains("CIRCUIT_OPEN"), "{html}");
    let failed = session
        .until("the turn's end", |u| u["tail"].as_str().unwrap().contains("data-ending=\"failed\""))
        .await;
    let tail = failed["tail"].as_str().unwrap();
    assert!(tail.contains("failed with CIRCUIT_OPEN"), "{tail}");
    assert!(tail.contains("rein-short-circuited"), "the panel names it: {tail}");

    // openMs later it shows half-open (nothing was appended: time alone), and the next turn's
    // attempt probes, is answered, and closes it.
    live.until("half-open", |u| health(u)["state"] == "half-open").await;
    call("POST", &format!("{url}/api/sessions/{id}/prompt"), Some(json!({"text": "again"}))).await;
    let closed = live.until("closed", |u| health(u)["closed"] == 1).await;
    let changes: Vec<(String, String)> = health(&closed)["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["from"].as_str().unwrap().to_owned(), c["to"].as_str().unwrap().to_owned()))
        .collect();
    let pair = |from: &str, to: &str| (from.to_owned(), to.to_owned());
    assert_eq!(
        changes,
        [pair("half-open", "closed"), pair("open", "half-open"), pair("closed", "open")],
        "newest first"
    );
    assert_eq!(
        (health(&closed)["state"].clone(), health(&closed)["opened"].clone()),
        (json!("closed"), json!(1))
    );
    let html = closed["html"].as_str().unwrap();
    assert!(html.contains("Opened 1 time, closed 1 time"), "{html}");

    stopped(console);
    let logs = checked_logs(&dir.path().join(".rein/sessions"));
    let ends: Vec<String> = turn_ends(&logs[0].1)
        .iter()
        .map(|end| match end {
            TurnEndReason::Error { failure } => failure.code().to_owned(),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(ends, ["CIRCUIT_OPEN", "Completed"]);
    assert_eq!(server.seen().len(), 3, "the short-circuited attempt sent no request");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_from_anywhere_but_the_console_are_refused() {
    let server = Server::start(vec![]).await;
    let dir = tempfile::tempdir().unwrap();
    let console = against(dir.path(), &server);
    let (url, port) = (console.url.clone(), console.port);
    let client = reqwest::Client::new();

    // A foreign Host (DNS rebinding) on a raw connection: refused before anything runs.
    for path in ["/", "/api/sessions"] {
        let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: evil.example:{port}\r\nConnection: close\r\n\r\n"
        );
        tcp.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        tcp.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 403 "), "{answer}");
        assert!(answer.contains("is not this console's"), "{answer}");
    }

    // A foreign Origin, on a read and on a write; a write from another site without one; a
    // write that is not JSON. None of them creates a session.
    let origin = "http://evil.example";
    let read =
        client.get(format!("{url}/api/sessions")).header("origin", origin).send().await.unwrap();
    assert_eq!(read.status(), 403);
    /// (headers, content type, status, error kind)
    type Case<'a> = (Vec<(&'a str, String)>, &'a str, u16, &'a str);
    let cases: Vec<Case> = vec![
        (vec![("origin", origin.to_owned())], "application/json", 403, "forbidden"),
        (vec![("origin", "null".to_owned())], "application/json", 403, "forbidden"),
        (
            vec![("origin", format!("http://127.0.0.1:{}", port + 1))],
            "application/json",
            403,
            "forbidden",
        ),
        (vec![("sec-fetch-site", "cross-site".to_owned())], "application/json", 403, "forbidden"),
        (vec![], "text/plain", 415, "unsupportedMediaType"),
        (vec![], "application/x-www-form-urlencoded", 415, "unsupportedMediaType"),
    ];
    for (headers, content_type, status, kind) in cases {
        let mut request = client
            .post(format!("{url}/api/sessions"))
            .header("content-type", content_type)
            .body("{}");
        for (name, value) in &headers {
            request = request.header(*name, value);
        }
        let answer = request.send().await.unwrap();
        assert_eq!(answer.status(), status, "{headers:?} {content_type}");
        let body: Value = serde_json::from_slice(&answer.bytes().await.unwrap()).unwrap();
        assert_eq!(body["error"]["kind"], kind, "{headers:?}");
    }
    let listed = call("GET", &format!("{url}/api/sessions"), None).await;
    assert_eq!(listed.body["sessions"], json!([]), "no refused write did anything");

    // The console's own pages, from themselves: accepted, with the headers that keep other
    // origins out.
    let own = client
        .post(format!("{url}/api/sessions"))
        .header("origin", format!("http://localhost:{port}"))
        .header("sec-fetch-site", "same-origin")
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(own.status(), 201);
    let page = client.get(format!("{url}/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let headers = page.headers().clone();
    assert_eq!(headers["x-frame-options"], "DENY");
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"), "{csp}");
    // Pages say commands as code, never as Markdown.
    let text = page.text().await.unwrap();
    assert!(text.contains("<code>rein chat --session ID</code>"), "{text}");
    for path in ["/plugins", "/sessions/nope", "/nothing"] {
        let text = client.get(format!("{url}{path}")).send().await.unwrap().text().await.unwrap();
        assert!(!text.contains('`'), "{path}: {text}");
    }
    assert!(!text.contains('`'), "{text}");
    let js = client.get(format!("{url}/assets/console.js")).send().await.unwrap();
    assert_eq!(js.headers()["content-type"], "text/javascript; charset=utf-8");
    let body = js.text().await.unwrap();
    assert!(
        !body.contains("http://") && !body.contains("https://"),
        "no other origin in the script"
    );

    stopped(console);
    checked_logs(&dir.path().join(".rein/sessions"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_served_read_only_is_followed_and_never_written() {
    // A store with one finished session, written by a console over the simulated provider.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("logs");
    let writer = Console::start(dir.path(), &["--store", "logs", "--seed", "3"], &[]);
    let made =
        call("POST", &format!("{}/api/sessions", writer.url), Some(json!({"id": "s1"}))).await;
    assert_eq!(made.status, 201);
    stopped(writer);
    checked_logs(&store);
    let log = store.join("s1.jsonl");
    let before = std::fs::read(&log).unwrap();

    let console = Console::start(dir.path(), &["--store", "logs", "--read-only"], &[]);
    let url = console.url.clone();
    let listed = call("GET", &format!("{url}/api/sessions"), None).await;
    assert_eq!(listed.body["readOnly"], true);
    assert_eq!(listed.body["sessions"][0]["id"], "s1");
    let routes = call("GET", &format!("{url}/api/routes"), None).await;
    assert_eq!((routes.status, routes.body), (200, json!({"routes": [], "readOnly": true})));
    let page = reqwest::get(format!("{url}/routes")).await.unwrap().text().await.unwrap();
    assert!(page.contains("<p class=\"unavailable\">Unavailable"), "{page}");
    let refusals = [
        ("POST", format!("{url}/api/sessions"), json!({})),
        ("POST", format!("{url}/api/sessions/s1/prompt"), json!({"text": "x"})),
        ("POST", format!("{url}/api/sessions/s1/cancel"), json!({})),
        ("PATCH", format!("{url}/api/plugins/auto-retry"), json!({"revision": 0, "patch": {}})),
        (
            "POST",
            format!("{url}/api/plugins/auto-retry/save"),
            json!({"revision": 0, "fields": {}}),
        ),
    ];
    for (method, target, body) in refusals {
        let refused = call(method, &target, Some(body)).await;
        assert_eq!(
            (refused.status, refused.body["error"]["kind"].clone()),
            (403, json!("readOnly")),
            "{target}"
        );
    }
    assert_eq!(
        call("GET", &format!("{url}/api/plugins"), None).await.body,
        json!({"plugins": [], "readOnly": true})
    );
    let page = reqwest::get(format!("{url}/plugins")).await.unwrap().text().await.unwrap();
    assert!(
        page.contains("Run <code>rein console</code> without <code>--read-only</code>"),
        "{page}"
    );
    let sessions = reqwest::get(format!("{url}/")).await.unwrap().text().await.unwrap();
    assert!(!page.contains('`') && !sessions.contains('`'), "{page}{sessions}");

    // Another writer appends: the stream follows the file.
    let mut updates = Updates::open(&format!("{url}/api/sessions/s1/events")).await;
    let first = updates.next().await;
    let count = first["events"].as_u64().unwrap();
    let line = format!(
        "{{\"seq\":{count},\"time\":0,\"type\":\"user/message\",\"data\":{{\"text\":\"from elsewhere\"}}}}\n"
    );
    let mut grown = before.clone();
    grown.extend_from_slice(line.as_bytes());
    std::fs::write(&log, &grown).unwrap();
    let update =
        updates.until("the appended message", |u| u["events"].as_u64() == Some(count + 1)).await;
    assert!(update["tail"].as_str().unwrap().contains("from elsewhere"), "{update}");

    stopped(console);
    assert_eq!(std::fs::read(&log).unwrap(), grown, "the read-only console wrote nothing");
    let mut names: Vec<String> = std::fs::read_dir(&store)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    // The lock file is the writing console's, left when it released the session.
    assert_eq!(names, ["s1.jsonl", "s1.jsonl.lock"]);
}

#[test]
fn bad_input_and_a_taken_port_are_refused_with_their_status() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    /// (arguments, environment, exit status, what stderr says)
    type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, i32, String);
    let cases: Vec<Case> = vec![
        (vec!["--read-only", "--store", "missing"], vec![], 2, "error: --store missing: ".into()),
        (vec!["--read-only", "--seed", "1"], vec![], 2, "cannot be used with".into()),
        (
            vec!["--store", file.to_str().unwrap()],
            vec![],
            2,
            format!("error: --store {}: not a directory", file.display()),
        ),
        (
            vec!["--provider", "deepseek"],
            vec![],
            2,
            "error: --provider deepseek: DEEPSEEK_API_KEY is not set".into(),
        ),
        (
            vec!["--provider", "deepseek"],
            vec![("DEEPSEEK_API_KEY", KEY), ("DEEPSEEK_BASE_URL", "nope")],
            2,
            "error: DEEPSEEK_BASE_URL: not a URL".into(),
        ),
        (vec!["--port", &port], vec![], 1, format!("error: cannot listen on 127.0.0.1:{port}: ")),
    ];
    for (args, env, status, want) in cases {
        if status == 2 {
            assert!(!dir.path().join(".rein").exists(), "bad input wrote nothing");
        }
        let mut all = vec!["console"];
        all.extend_from_slice(&args);
        let out = command(dir.path(), &all, &env).output().unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(status), "{args:?}: {stderr}");
        assert!(stderr.contains(&want), "{args:?}: {stderr}");
        assert!(!stderr.contains(KEY), "{stderr}");
        assert!(out.stdout.is_empty(), "no URL printed: {args:?}");
    }
    drop(taken);

    let help = command(dir.path(), &["console", "--help"], &[]).output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    for needle in
        ["Exit status:", "0  stopped by Ctrl-C or SIGTERM", "--port", "--read-only", "127.0.0.1"]
    {
        assert!(help.contains(needle), "{needle} in {help}");
    }
}
