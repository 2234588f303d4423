//! `rein console` in a real headless Chromium, driven through chromedriver (WebDriver, with
//! `fantoccini`; `rein_testkit::browser` says what it needs), against the binary started on
//! `--port 0` and the providers' scripted axum server on 127.0.0.1 (DeepSeek preset).
//!
//! - The session view: a new session from the sessions list; a prompt answered after a retry,
//!   shown live over server-sent events without a reload, with its turn-tail panel; a turn that
//!   streams then stalls, shown as it streams and cancelled with the Cancel button.
//! - The Plugins page: switches seeded from the accepted settings, not the defaults; edits
//!   staged, not saved; an out-of-range or unparseable number blocking the save and naming the
//!   field; an empty code list refused while staging; leaving the page discarding the staged
//!   edits; a save that wins, and a save refused because another browser session saved first
//!   (its edits kept, nothing overwritten); `enabled: false` saved while a turn waits in
//!   auto-retry's wait ending the turn, visibly, in the session view. With `--fallback`, the
//!   `fallback` form: its routes, one per line; a route the console does not serve blocking the
//!   save, named under its field; a save.
//! - The Routes page: a route's breaker shown closed, then open — its state, its deadline, the
//!   change in its list — as a turn's failure opens it, without a reload.
//! - Provider text with `<script>` and `<img onerror>` shown as text; nothing of it runs.
//!
//! Waits are event-driven (a `MutationObserver` in the page). Screenshots of the sessions list,
//! a session with a panel and the Plugins page go to `target/screenshots/`. Every log the
//! console wrote passes the invariant check after it stopped.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use fantoccini::{Client, Locator};
use rein_runtime::event::{CancelCause, Event, TurnEndReason};
use rein_testkit::browser;
use rein_testkit::browser::{Driver, find, js, screenshot, text_content, until, with_session};
use rein_testkit::console::{Console, call, checked_logs};
use rein_testkit::server::{Part, Reply, Server, answer, delta, error, status_reply};
use serde_json::{Value, json};

const KEY: &str = "sk-console-browser-secret";

/// A provider message that would run if it were ever markup.
const HOSTILE: &str = "<script>window.pwned=1</script><img src=x onerror=\"window.pwned=2\"> \
                       slow down & \"retry later\"";

fn against(dir: &Path, server: &Server) -> Console {
    let base = server.base_url();
    Console::start(
        dir,
        &["--provider", "deepseek"],
        &[("DEEPSEEK_API_KEY", KEY), ("DEEPSEEK_BASE_URL", &base)],
    )
}

fn stop(console: Console) {
    let (code, stderr) = console.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains(KEY), "{stderr}");
}

/// Replaces the text of the input `css` with `text`.
async fn type_into(client: &Client, css: &str, text: &str) {
    let input = find(client, css).await;
    input.clear().await.unwrap();
    if !text.is_empty() {
        input.send_keys(text).await.unwrap();
    }
}

/// Waits until the settings form of `plugin` has heard back about its latest edit.
async fn checked(client: &Client, plugin: &str) {
    let form = format!("document.querySelector('form.settings[data-plugin=\"{plugin}\"]')");
    until(
        client,
        "the staged edits checked",
        &format!("{form} && !{form}.dataset.checking && {form}.dataset.problems !== undefined"),
    )
    .await;
}

async fn nothing_ran(client: &Client) {
    let page = js(client, "return [typeof window.pwned, document.images.length];", vec![]).await;
    assert_eq!(page, json!(["undefined", 0]), "nothing of the provider's text ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_view_follows_turns_live_and_prompt_and_cancel_work() {
    let (chromium, chromedriver) = (browser::chromium(), browser::chromedriver());
    let shots = browser::screenshots();
    let script = vec![
        error(503, HOSTILE),
        answer(&["Hello", ", <b>world</b>"]),
        Reply::Sse(vec![delta("thinking <i>hard</i>"), Part::Stall]),
    ];
    let server = Server::start(script).await;
    let dir = tempfile::tempdir().unwrap();
    let console = against(dir.path(), &server);
    let url = console.url.clone();

    let driver = Driver::start(&chromedriver);
    let client = driver.session(&chromium, &dir.path().join("profile"), &[]).await;
    let (page_url, page_shots) = (url.clone(), shots.clone());
    with_session(client, |client| async move {
        let (url, shots) = (page_url, page_shots);
        client.goto(&format!("{url}/")).await.unwrap();
        assert_eq!(client.title().await.unwrap(), "Sessions · rein console");
        assert_eq!(find(&client, "#session-rows").await.text().await.unwrap(), "No sessions yet.");

        // A new session, then a prompt: the page never reloads, the turn arrives live.
        find(&client, "#new-session").await.click().await.unwrap();
        until(&client, "the session view", "document.body.dataset.page === 'session'").await;
        let id = js(&client, "return document.body.dataset.session;", vec![]).await;
        let id = id.as_str().unwrap().to_owned();
        js(&client, "window.marker = 42; return null;", vec![]).await;
        type_into(&client, "#prompt", "Say <hello>").await;
        find(&client, "#send").await.click().await.unwrap();
        until(
            &client,
            "the answered turn",
            "document.querySelector('#conversation-turn-1 .badge[data-ending=\"completed\"]')",
        )
        .await;
        js(
            &client,
            "window.turnOne = document.getElementById('conversation-turn-1'); return null;",
            vec![],
        )
        .await;
        let marker =
            js(&client, "return [window.marker, document.getElementById('prompt').value];", vec![]);
        assert_eq!(marker.await, json!([42, ""]), "no reload; the prompt box was emptied");
        let texts = client.find_all(Locator::Css("#conversation-turn-1 .msg .text")).await.unwrap();
        let mut shown = Vec::new();
        for text in &texts {
            shown.push(text.text().await.unwrap());
        }
        assert_eq!(shown, ["Say <hello>", "Hello, <b>world</b>"]);

        // The turn retried: its panel, collapsed, opens on a click with the provider's text.
        let panel = find(&client, "#conversation-turn-1 details.rein-panel").await;
        let summary = panel.find(Locator::Css("summary")).await.unwrap();
        assert_eq!(summary.text().await.unwrap(), "Retried 1 time this turn · recovered");
        summary.click().await.unwrap();
        let raw = panel.find(Locator::Css("pre.rein-raw")).await.unwrap();
        assert_eq!(text_content(&client, &raw).await, HOSTILE);
        nothing_ran(&client).await;

        // A turn that streams, then stalls: its text shows as it comes; Cancel ends it.
        type_into(&client, "#prompt", "Think").await;
        find(&client, "#send").await.click().await.unwrap();
        let streamed = until(
            &client,
            "the streamed text",
            "(() => { const s = document.querySelector('#conversation-turn-2 .streaming .text'); \
             return s && !document.getElementById('cancel').disabled && s.textContent; })()",
        )
        .await;
        assert_eq!(streamed, "thinking <i>hard</i>");
        let state =
            js(&client, "return document.querySelector('#status .state').textContent;", vec![]);
        assert_eq!(state.await, "turn 2 running");
        // The panel opened before the updates is still open.
        let open = js(
            &client,
            "return document.querySelector('#conversation-turn-1 details.rein-panel').open;",
            vec![],
        );
        assert_eq!(open.await, true, "updates keep what the reader opened");
        find(&client, "#cancel").await.click().await.unwrap();
        until(
            &client,
            "the cancelled turn",
            "document.querySelector('#conversation-turn-2 .badge[data-ending=\"aborted\"]') \
             && document.getElementById('cancel').disabled \
             && document.querySelector('#status .state').textContent === 'idle'",
        )
        .await;
        assert_eq!(
            find(&client, "#conversation-turn-2 .badge").await.text().await.unwrap(),
            "cancelled"
        );
        // Turn 1 ended before: its article was kept as it was, not drawn again.
        let kept = js(
            &client,
            "return [document.getElementById('conversation-turn-1') === window.turnOne, \
             document.querySelectorAll('#conversation > article.turn').length];",
            vec![],
        );
        assert_eq!(kept.await, json!([true, 2]));
        client.set_window_size(1200, 1500).await.unwrap();
        screenshot(&client, &shots.join("console-session-live.png")).await;

        // The sessions list shows it.
        client.goto(&format!("{url}/")).await.unwrap();
        // Read at once: the live list may replace its rows at any moment.
        let script = format!(
            "const row = document.querySelector('tr[data-session=\"{id}\"]');
             return Array.from(row.querySelectorAll('td')).slice(0, 6).map(td => td.innerText);"
        );
        let texts = js(&client, &script, vec![]).await;
        assert_eq!(texts, json!([id, "Say <hello>", "2", "idle", "cancelled", "1"]));
        screenshot(&client, &shots.join("console-sessions.png")).await;
    })
    .await;

    stop(console);
    let logs = checked_logs(&dir.path().join(".rein/sessions"));
    let ends: Vec<TurnEndReason> = logs[0]
        .1
        .iter()
        .filter_map(|e| match &e.event {
            Event::TurnEnd(end) => Some(end.reason.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        ends,
        [TurnEndReason::Completed, TurnEndReason::Aborted { cause: CancelCause::User }]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_routes_page_shows_a_breaker_opening_without_a_reload() {
    let (chromium, chromedriver) = (browser::chromium(), browser::chromedriver());
    let shots = browser::screenshots();
    let down = status_reply(503, &[("retry-after-ms", "10")], r#"{"error":{"message":"down"}}"#);
    let server = Server::start(vec![down]).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("rein.toml"),
        "[[routes]]\nprovider = \"deepseek\"\nhealth = { minAttempts = 1, openMs = 60000 }\n",
    )
    .unwrap();
    let base = server.base_url();
    let console =
        Console::start(dir.path(), &[], &[("DEEPSEEK_API_KEY", KEY), ("DEEPSEEK_BASE_URL", &base)]);
    let url = console.url.clone();

    let driver = Driver::start(&chromedriver);
    let client = driver.session(&chromium, &dir.path().join("profile"), &[]).await;
    let page_url = url.clone();
    with_session(client, |client| async move {
        let url = page_url;
        client.goto(&format!("{url}/routes")).await.unwrap();
        assert_eq!(client.title().await.unwrap(), "Routes · rein console");
        until(&client, "the live routes", "document.body.dataset.routes === 'deepseek:closed'")
            .await;
        let now =
            js(&client, "return document.querySelector('section.route p.now').innerText;", vec![]);
        assert_eq!(now.await, "Closed: attempts go through.");
        js(&client, "window.marker = 42; return null;", vec![]).await;

        // A turn fails: its failure opens the breaker, the retry after it is short-circuited.
        let made = call("POST", &format!("{url}/api/sessions"), Some(json!({}))).await;
        let id = made.body["id"].as_str().unwrap().to_owned();
        let prompt = format!("{url}/api/sessions/{id}/prompt");
        assert_eq!(call("POST", &prompt, Some(json!({"text": "hi"}))).await.status, 202);
        until(
            &client,
            "the breaker open",
            "document.querySelector('section.route[data-state=\"open\"] ol.changes \
             li[data-to=\"open\"]')",
        )
        .await;
        let shown = js(
            &client,
            "return [window.marker, document.querySelector('section.route p.now').innerText, \
             document.querySelectorAll('ol.changes li').length, \
             document.querySelector('.breaker').innerText];",
            vec![],
        );
        let shown = shown.await;
        assert_eq!((shown[0].clone(), shown[2].clone()), (json!(42), json!(1)), "no reload");
        assert!(shown[1].as_str().unwrap().starts_with("Open until "), "{shown}");
        assert_eq!(shown[3], "open");
        screenshot(&client, &shots.join("console-routes.png")).await;
    })
    .await;

    stop(console);
    let logs = checked_logs(&dir.path().join(".rein/sessions"));
    let ended: Vec<String> = logs[0]
        .1
        .iter()
        .filter_map(|e| match &e.event {
            Event::TurnEnd(end) => Some(format!("{:?}", end.reason)),
            _ => None,
        })
        .collect();
    assert_eq!(ended.len(), 1);
    assert!(ended[0].contains("CIRCUIT_OPEN"), "{ended:?}");
    assert_eq!(server.seen().len(), 1, "the short-circuited retry sent no request");
}

/// The state of the auto-retry form a page shows.
async fn form_state(client: &Client) -> Value {
    js(
        client,
        "const form = document.querySelector('form.settings[data-plugin=\"auto-retry\"]');
         const on = Array.from(form.querySelectorAll('input[data-code]'));
         return {
           revision: form.dataset.revision,
           extraRetries: form.querySelector('input[name=extraRetries]').value,
           on: on.filter(i => i.checked).map(i => i.dataset.code),
           disabled: on.filter(i => i.disabled).map(i => i.dataset.code),
           other: form.querySelector('textarea').value,
           staged: form.dataset.staged || '',
           save: !form.querySelector('button.save').disabled,
         };",
        vec![],
    )
    .await
}

/// The problem line of the auto-retry form's field `key` ("" when hidden).
async fn problem(client: &Client, key: &str) -> String {
    let script = format!(
        "const p = document.querySelector('form.settings[data-plugin=\"auto-retry\"] \
         .field[data-field=\"{key}\"] .problem'); return p.hidden ? '' : p.textContent;"
    );
    js(client, &script, vec![]).await.as_str().unwrap().to_owned()
}

async fn accepted(url: &str) -> Value {
    call("GET", &format!("{url}/api/plugins/auto-retry"), None).await.body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plugins_page_stages_saves_under_the_fence_and_switching_off_ends_a_wait() {
    let (chromium, chromedriver) = (browser::chromium(), browser::chromedriver());
    let shots = browser::screenshots();
    // llm-retry gives a one-hour Retry-After up; auto-retry waits, clamped to maxDelayMs.
    let body = json!({"error": {"message": HOSTILE}}).to_string();
    let server = Server::start(vec![status_reply(429, &[("retry-after", "3600")], &body)]).await;
    let dir = tempfile::tempdir().unwrap();
    let console = against(dir.path(), &server);
    let url = console.url.clone();

    // Accepted settings other than the defaults: QUOTA on, PI_AI_ERROR off, an adapter's own code.
    let codes = json!([
        "EMPTY_RESPONSE",
        "RATE_LIMIT",
        "SERVER",
        "TIMEOUT",
        "TRANSPORT",
        "PROVIDER_ERROR",
        "QUOTA",
        "HTTP_418"
    ]);
    let seeded = call(
        "PATCH",
        &format!("{url}/api/plugins/auto-retry"),
        Some(json!({"revision": 0, "patch": {"retryableCodes": codes}})),
    )
    .await;
    assert_eq!(seeded.status, 200, "{:?}", seeded.body);

    let driver = Driver::start(&chromedriver);
    let a = driver.session(&chromium, &dir.path().join("profile-a"), &[]).await;
    let b = driver.session(&chromium, &dir.path().join("profile-b"), &[]).await;
    with_session(b, |b| async move {
        with_session(a, |a| plugins_page(a, b, url.clone(), shots)).await;
    })
    .await;

    stop(console);
    let logs = checked_logs(&dir.path().join(".rein/sessions"));
    let kinds: Vec<&str> = logs[0].1.iter().map(|e| e.kind()).collect();
    assert!(!kinds.contains(&"llm/retry-started"), "the wait never ended in a retry: {kinds:?}");
    assert_eq!(server.seen().len(), 1, "no second attempt");
}

/// The Plugins page in two browser sessions, `a` and `b`, against the console at `url`.
async fn plugins_page(a: Client, b_page: Client, url: String, shots: std::path::PathBuf) {
    let plugins = format!("{url}/plugins");
    let b_url = url.clone();
    a.goto(&plugins).await.unwrap();
    assert_eq!(a.title().await.unwrap(), "Plugins · rein console");
    let sections = a.find_all(Locator::Css("section.plugin h2")).await.unwrap();
    let mut names = Vec::new();
    for section in &sections {
        names.push(section.text().await.unwrap());
    }
    assert_eq!(names, ["llm-retry", "compaction", "auto-retry"]);
    let llm = find(&a, "#plugin-llm-retry").await.text().await.unwrap();
    assert!(llm.contains("Read-only at run time"), "{llm}");
    assert!(a.find(Locator::Css("#plugin-llm-retry form")).await.is_err(), "no form");

    // Seeded from the accepted settings; the never-retried group shown, disabled.
    let never = [
        "AUTH",
        "MISSING_CREDENTIAL",
        "INVALID_CREDENTIAL",
        "NO_ADAPTER",
        "INVALID_MODEL",
        "INVALID_CONFIG",
        "CONTEXT_WINDOW_EXCEEDED",
        "IMAGE_OFFLOAD_REQUIRED",
        "ABORTED",
        "CIRCUIT_OPEN",
    ];
    assert_eq!(
        form_state(&a).await,
        json!({
            "revision": "1", "extraRetries": "3",
            "on": ["EMPTY_RESPONSE", "RATE_LIMIT", "SERVER", "TIMEOUT", "TRANSPORT",
                   "PROVIDER_ERROR", "QUOTA"],
            "disabled": never, "other": "HTTP_418", "staged": "", "save": false,
        })
    );

    // Staged, not saved.
    type_into(&a, "#auto-retry-extraRetries", "5").await;
    checked(&a, "auto-retry").await;
    let state = form_state(&a).await;
    assert_eq!(
        (state["staged"].clone(), state["save"].clone()),
        (json!("extraRetries"), json!(true))
    );
    assert_eq!(
        find(&a, "#plugin-auto-retry .staged").await.text().await.unwrap(),
        "Staged, not saved: extraRetries."
    );
    let server_side = accepted(&url).await;
    assert_eq!(
        (server_side["revision"].clone(), server_side["settings"]["extraRetries"].clone()),
        (json!(1), json!(3))
    );

    // Out of range, unparseable: the save is blocked and the field named.
    for (typed, message) in [
        ("11", "extraRetries: must be an integer within 0..=10, got 11"),
        ("1x", "extraRetries: must be an integer within 0..=10, got \"1x\""),
    ] {
        type_into(&a, "#auto-retry-extraRetries", typed).await;
        checked(&a, "auto-retry").await;
        assert_eq!(problem(&a, "extraRetries").await, message);
        assert_eq!(form_state(&a).await["save"], false, "{typed}: Save is blocked");
        assert_eq!(
            find(&a, "#plugin-auto-retry .staged").await.text().await.unwrap(),
            "Cannot save: extraRetries."
        );
        let invalid = js(
            &a,
            "return document.getElementById('auto-retry-extraRetries').getAttribute('aria-invalid');",
            vec![],
        );
        assert_eq!(invalid.await, "true");
    }
    type_into(&a, "#auto-retry-extraRetries", "5").await;
    checked(&a, "auto-retry").await;
    assert_eq!(problem(&a, "extraRetries").await, "");

    // No code at all: refused while staging.
    let on = a
        .find_all(Locator::Css("#plugin-auto-retry input[data-code]:checked:not(:disabled)"))
        .await
        .unwrap();
    for switch in &on {
        switch.click().await.unwrap();
    }
    type_into(&a, "#auto-retry-retryableCodes-other", "").await;
    checked(&a, "auto-retry").await;
    let empty = problem(&a, "retryableCodes").await;
    assert!(empty.starts_with("retryableCodes: no code left."), "{empty}");
    assert_eq!(form_state(&a).await["save"], false);
    screenshot(&a, &shots.join("console-plugins-staging.png")).await;
    assert_eq!(accepted(&url).await["revision"], 1, "nothing was saved");

    // Leaving the page discards the staged edits, even coming back through history.
    a.goto(&format!("{url}/")).await.unwrap();
    a.back().await.unwrap();
    until(&a, "the Plugins page again", "document.body.dataset.page === 'plugins'").await;
    let state = form_state(&a).await;
    assert_eq!(
        (state["extraRetries"].clone(), state["other"].clone(), state["save"].clone()),
        (json!("3"), json!("HTTP_418"), json!(false))
    );
    assert_eq!(state["on"].as_array().unwrap().len(), 7);
    assert_eq!(problem(&a, "retryableCodes").await, "");

    // Two pages at revision 1: the one that saves first wins.
    b_page.goto(&format!("{b_url}/plugins")).await.unwrap();
    type_into(&b_page, "#auto-retry-initialDelayMs", "600000").await;
    type_into(&b_page, "#auto-retry-maxDelayMs", "600000").await;
    checked(&b_page, "auto-retry").await;
    find(&b_page, "#plugin-auto-retry button.save").await.click().await.unwrap();
    let saved = until(
        &b_page,
        "the saved form",
        "(() => { const o = document.querySelector('#plugin-auto-retry .outcome'); \
         return o && !o.hidden && o.textContent; })()",
    )
    .await;
    assert_eq!(saved, "Saved revision 2: initialDelayMs, maxDelayMs.");
    assert_eq!(form_state(&b_page).await["revision"], "2");

    // A, still drawn at revision 1, changes only initialDelayMs: that is its one staged edit,
    // not the fields B changed; the page says the settings changed underneath; Save is off.
    type_into(&a, "#auto-retry-initialDelayMs", "2000").await;
    checked(&a, "auto-retry").await;
    assert_eq!(
        find(&a, "#plugin-auto-retry .staged").await.text().await.unwrap(),
        "Staged, not saved: initialDelayMs."
    );
    let warned = find(&a, "#plugin-auto-retry .outcome").await.text().await.unwrap();
    assert_eq!(
        warned,
        "The settings changed underneath: another client saved revision 2 after revision 1, \
         which this form shows. Reload to see them (the staged edits are not kept); Save is off, \
         since it would be refused."
    );
    let state = form_state(&a).await;
    assert_eq!(
        (state["staged"].clone(), state["save"].clone()),
        (json!("initialDelayMs"), json!(false))
    );
    let server_side = accepted(&url).await;
    assert_eq!(
        (
            server_side["revision"].clone(),
            server_side["settings"]["initialDelayMs"].clone(),
            server_side["settings"]["maxDelayMs"].clone()
        ),
        (json!(2), json!(600000), json!(600000)),
        "B's save stands"
    );

    // Reloaded, A is at revision 2. A save that races another client's (saved after A's last
    // check) is refused: nothing overwritten, the edits kept, Save off.
    a.goto(&plugins).await.unwrap();
    type_into(&a, "#auto-retry-extraRetries", "5").await;
    // Out of the field (its `change` checks again), so the click on Save sends at once.
    find(&a, "h1").await.click().await.unwrap();
    checked(&a, "auto-retry").await;
    assert_eq!(form_state(&a).await["save"], true);
    let raced = call(
        "PATCH",
        &format!("{url}/api/plugins/auto-retry"),
        Some(json!({"revision": 2, "patch": {"jitterRatio": 0.1}})),
    )
    .await;
    assert_eq!(raced.body["revision"], 3, "{:?}", raced.body);
    find(&a, "#plugin-auto-retry button.save").await.click().await.unwrap();
    let refused = until(
        &a,
        "the refused save",
        "(() => { const o = document.querySelector('#plugin-auto-retry .outcome'); \
         return o.dataset.outcome === 'stale' && o.textContent.startsWith('Not saved') && o.textContent; })()",
    )
    .await;
    assert_eq!(
        refused,
        "Not saved: another client saved revision 3 after revision 2, which these edits are \
         based on. Nothing was overwritten; reload to start from the current settings"
    );
    let state = form_state(&a).await;
    assert_eq!(
        (state["extraRetries"].clone(), state["save"].clone()),
        (json!("5"), json!(false)),
        "the edits stay in the form"
    );
    let server_side = accepted(&url).await;
    assert_eq!(
        (server_side["revision"].clone(), server_side["settings"]["extraRetries"].clone()),
        (json!(3), json!(3)),
        "the other save stands, nothing overwritten"
    );

    // A turn parked in auto-retry's wait (ten minutes now); B switches auto-retry off; A
    // sees the turn end.
    let made = call("POST", &format!("{url}/api/sessions"), Some(json!({"id": "waiting"}))).await;
    assert_eq!(made.status, 201);
    a.goto(&format!("{url}/sessions/waiting")).await.unwrap();
    type_into(&a, "#prompt", "Wait for it").await;
    find(&a, "#send").await.click().await.unwrap();
    let waiting = until(
        &a,
        "auto-retry's wait",
        "(() => { const s = document.querySelector('#status .state[data-state=\"waiting\"]'); \
         return s && s.textContent; })()",
    )
    .await;
    assert_eq!(waiting, "turn 1 waiting 10 min for auto-retry's retry 1/3 (RATE_LIMIT)");
    let line = find(&a, "#conversation-turn-1 .rein-waiting").await;
    assert!(text_content(&a, &line).await.contains("waiting"));
    find(&a, "#conversation-turn-1 details.rein-panel summary").await.click().await.unwrap();
    a.set_window_size(1200, 760).await.unwrap();
    screenshot(&a, &shots.join("console-session-waiting.png")).await;

    b_page.goto(&format!("{b_url}/plugins")).await.unwrap();
    find(&b_page, "#auto-retry-enabled").await.click().await.unwrap();
    checked(&b_page, "auto-retry").await;
    find(&b_page, "#plugin-auto-retry button.save").await.click().await.unwrap();
    let saved = until(
        &b_page,
        "the switch saved",
        "(() => { const o = document.querySelector('#plugin-auto-retry .outcome'); \
         return o && !o.hidden && o.textContent; })()",
    )
    .await;
    assert_eq!(saved, "Saved revision 4: enabled.");
    b_page.set_window_size(1200, 2000).await.unwrap();
    b_page.goto(&format!("{b_url}/plugins")).await.unwrap();
    screenshot(&b_page, &shots.join("console-plugins.png")).await;

    until(
        &a,
        "the ended turn",
        "document.querySelector('#conversation-turn-1 .badge[data-ending=\"error\"]') \
         && document.querySelector('#status .state').textContent === 'idle'",
    )
    .await;
    assert_eq!(
        find(&a, "#conversation-turn-1 .badge").await.text().await.unwrap(),
        "failed: RATE_LIMIT"
    );
    let panel = find(&a, "#conversation-turn-1 details.rein-panel").await;
    let summary = panel.find(Locator::Css("summary")).await.unwrap();
    // The retry was scheduled; switching auto-retry off ended its wait.
    assert_eq!(
        summary.text().await.unwrap(),
        "Retried 1 time this turn · finally failed with RATE_LIMIT"
    );
    assert!(browser::is_open(&a, &panel).await, "opened while waiting, still open");
    let lines = panel.find_all(Locator::Css("li.rein-line .rein-fields")).await.unwrap();
    let mut shown = Vec::new();
    for line in &lines {
        shown.push(line.text().await.unwrap());
    }
    // `config/changed` is written to the session's log once the patch is accepted; the turn
    // ends at the same moment, so the line is in the turn's panel only when it came first.
    let changed = "settings changed · auto-retry · revision 4 · enabled";
    assert!(shown.len() == 2 || shown.len() == 3 && shown[1] == changed, "{shown:?}");
    assert!(
        shown[0].starts_with("harness · turn 1·step 1 · deepseek · RATE_LIMIT · HTTP 429"),
        "{shown:?}"
    );
    let not_started = shown.last().unwrap();
    assert!(not_started.starts_with("auto-retry · attempt 1/3 · wait 600000 ms"), "{shown:?}");
    assert!(not_started.ends_with("never started (retrying RATE_LIMIT)"), "{shown:?}");
    let raw = panel.find(Locator::Css("pre.rein-raw")).await.unwrap();
    assert_eq!(text_content(&a, &raw).await, HOSTILE);
    nothing_ran(&a).await;
    a.set_window_size(1200, 1100).await.unwrap();
    screenshot(&a, &shots.join("console-session.png")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_fallback_its_form_stages_route_edits_and_refuses_a_route_not_served() {
    let (chromium, chromedriver) = (browser::chromium(), browser::chromedriver());
    let dir = tempfile::tempdir().unwrap();
    // The simulated provider and a simulated fallback: no key, no server.
    let console = Console::start(dir.path(), &["--seed", "3", "--fallback", "sim-2"], &[]);
    let url = console.url.clone();
    let driver = Driver::start(&chromedriver);
    let client = driver.session(&chromium, &dir.path().join("profile"), &[]).await;
    let page = url.clone();
    with_session(client, |client| async move {
        client.goto(&format!("{page}/plugins")).await.unwrap();
        let sections = client.find_all(Locator::Css("section.plugin h2")).await.unwrap();
        let mut names = Vec::new();
        for section in &sections {
            names.push(section.text().await.unwrap());
        }
        assert_eq!(names, ["fallback", "llm-retry", "compaction", "auto-retry"]);
        let routes =
            js(&client, "return document.getElementById('fallback-routes').value;", vec![]);
        assert_eq!(routes.await, "simulated:sim-2");

        // A route this console does not serve blocks the save, named under its field.
        type_into(&client, "#fallback-routes", "simulated:sim-2\nnowhere").await;
        checked(&client, "fallback").await;
        let problem = js(
            &client,
            "const p = document.querySelector('#plugin-fallback .field[data-field=\"routes\"] \
             .problem'); return p.hidden ? '' : p.textContent;",
            vec![],
        )
        .await;
        assert!(
            problem.as_str().unwrap().contains("routes[1]: no provider route named \"nowhere\""),
            "{problem}"
        );
        assert!(!find(&client, "#plugin-fallback button.save").await.is_enabled().await.unwrap());

        // Back to the served route, the cooldown off: saved.
        type_into(&client, "#fallback-routes", "simulated:sim-2").await;
        type_into(&client, "#fallback-cooldownMs", "0").await;
        checked(&client, "fallback").await;
        find(&client, "#plugin-fallback button.save").await.click().await.unwrap();
        let saved = until(
            &client,
            "the saved fallback form",
            "(() => { const o = document.querySelector('#plugin-fallback .outcome'); \
             return o && !o.hidden && o.textContent; })()",
        )
        .await;
        assert_eq!(saved, "Saved revision 1: cooldownMs.");
    })
    .await;
    let accepted = call("GET", &format!("{url}/api/plugins/fallback"), None).await.body;
    assert_eq!(
        (accepted["revision"].clone(), accepted["settings"]["cooldownMs"].clone()),
        (json!(1), json!(0))
    );
    stop(console);
    checked_logs(&dir.path().join(".rein/sessions"));
}
