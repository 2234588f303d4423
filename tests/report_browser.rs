//! `rein report` in a real headless Chromium, driven through chromedriver (WebDriver, with
//! `fantoccini`): the panels are collapsed and open on a click; the provider's message is shown
//! verbatim; a message holding `<script>` and an `<img onerror>` is shown as text and never runs;
//! the dark theme follows the system's preference. Screenshots are written to
//! `target/screenshots/` for people to look at.
//!
//! Needs `/usr/bin/chromium` and `/usr/bin/chromedriver` (Debian's `chromium` and
//! `chromium-driver`; `bash .ci/install-deps` installs them); `REIN_CHROMIUM` and
//! `REIN_CHROMEDRIVER` name others. When they are missing the test fails and says so: it never
//! passes without a browser. chromedriver is started on a port it picks itself (`--port=0`,
//! read back from the line it prints), and each browser session gets a fresh profile directory.

// Helpers outside `#[test]` functions panic on purpose, like the tests themselves.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator, elements::Element};
use futures::FutureExt;
use serde_json::{Value, json};

/// The provider message of the first failure of `tests/panels/report.json`.
const HOSTILE: &str = "<script>document.title='pwned';window.pwned=1</script><img src=x \
                       onerror=\"window.pwned=2\"> & \"quoted\"";
/// The last failure of its third turn: leading newline, CR LF, trailing spaces.
const LAST: &str = "\n  upstream said:\r\n  <html>503</html>  \n";

fn tool(variable: &str, default: &str, package: &str) -> PathBuf {
    let path = std::env::var_os(variable).map_or_else(|| PathBuf::from(default), PathBuf::from);
    assert!(
        path.is_file(),
        "{} not found: this test drives a real headless Chromium. Install it with \
         `bash .ci/install-deps` (Debian packages chromium and chromium-driver: apt-get install \
         {package}), or set {variable} to its path.",
        path.display()
    );
    path
}

fn rein(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rein")).args(args).output().expect("rein runs")
}

/// Runs a scenario file and writes its log to `dir/<log>`; its invariant verdict must be clean.
fn scenario_log(dir: &Path, scenario: &Path, log: &str) -> PathBuf {
    let log = dir.join(log);
    let out = rein(&[
        "scenario",
        "run",
        scenario.to_str().unwrap(),
        "--json",
        "--log",
        log.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["invariant"]["ok"], true, "{report}");
    log
}

/// chromedriver, on a port it chose; killed when dropped.
struct Driver {
    process: std::process::Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

impl Driver {
    fn start(path: &Path) -> Self {
        let mut process = Command::new(path)
            .arg("--port=0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", path.display()));
        let stdout = process.stdout.take().unwrap();
        let (port_tx, port_rx) = mpsc::channel();
        // Reads what it prints to the end, so that a full pipe never blocks it.
        std::thread::spawn(move || {
            let started = "ChromeDriver was started successfully on port ";
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix(started) {
                    let _ = port_tx.send(rest.trim_end_matches('.').parse::<u16>());
                }
            }
        });
        let mut driver = Self { process, url: String::new() };
        let port = match port_rx.recv_timeout(Duration::from_secs(60)) {
            Ok(Ok(port)) => port,
            Ok(Err(e)) => panic!("chromedriver printed a port that is not one: {e}"),
            Err(e) => panic!("chromedriver did not say it started ({e})"),
        };
        driver.url = format!("http://127.0.0.1:{port}");
        driver
    }

    /// A new browser session with a fresh profile in `profile`, and `extra` flags.
    async fn session(&self, chromium: &Path, profile: &Path, extra: &[&str]) -> Client {
        let mut args = vec![
            "--headless".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-quic".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            "--window-size=1200,1400".to_owned(),
            format!("--user-data-dir={}", profile.display()),
        ];
        args.extend(extra.iter().map(|flag| (*flag).to_owned()));
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": args},
        });
        let Value::Object(capabilities) = capabilities else { unreachable!() };
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        ClientBuilder::new(connector)
            .capabilities(capabilities)
            .connect(&self.url)
            .await
            .unwrap_or_else(|e| panic!("cannot open a Chromium session: {e}"))
    }
}

/// Runs `check` with `client`, then ends the session whatever happened, then reports.
async fn with_session<F>(client: Client, check: impl FnOnce(Client) -> F)
where
    F: std::future::Future<Output = ()>,
{
    let outcome = AssertUnwindSafe(check(client.clone())).catch_unwind().await;
    client.close().await.ok();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

async fn js(client: &Client, script: &str, args: Vec<Value>) -> Value {
    client.execute(script, args).await.unwrap()
}

async fn is_open(client: &Client, panel: &Element) -> bool {
    let open = js(client, "return arguments[0].open;", vec![json!(panel)]).await;
    open.as_bool().unwrap()
}

async fn text_content(client: &Client, element: &Element) -> String {
    let text = js(client, "return arguments[0].textContent;", vec![json!(element)]).await;
    text.as_str().unwrap().to_owned()
}

async fn screenshot(client: &Client, path: &Path) {
    std::fs::write(path, client.screenshot().await.unwrap()).unwrap();
}

async fn background(client: &Client) -> String {
    let colour = js(client, "return getComputedStyle(document.body).backgroundColor;", vec![]);
    colour.await.as_str().unwrap().to_owned()
}

#[tokio::test]
async fn the_report_opens_its_panels_on_click_and_shows_provider_text_as_text() {
    let chromium = tool("REIN_CHROMIUM", "/usr/bin/chromium", "chromium");
    let chromedriver = tool("REIN_CHROMEDRIVER", "/usr/bin/chromedriver", "chromium-driver");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap().join("screenshots");
    std::fs::create_dir_all(&shots).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let mixed = scenario_log(dir.path(), &root.join("tests/panels/report.json"), "mixed.jsonl");
    let cancel = root.join("tests/scenarios/llm-retry-cancel-during-wait.json");
    let cancelled = scenario_log(dir.path(), &cancel, "cancelled.jsonl");
    let html = dir.path().join("report.html");
    let out = rein(&[
        "report",
        mixed.to_str().unwrap(),
        cancelled.to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::copy(&html, shots.join("report.html")).unwrap();
    let url = format!("file://{}", html.display());

    let driver = Driver::start(&chromedriver);
    let light = driver.session(&chromium, &dir.path().join("profile-light"), &[]).await;
    let (page_url, page_shots) = (url.clone(), shots.clone());
    with_session(light, |client| async move {
        let (url, shots) = (page_url, page_shots);
        client.goto(&url).await.unwrap();
        assert_eq!(client.title().await.unwrap(), "rein report · 2 logs");

        // Nothing from the provider became markup: no script, no image, nothing ran.
        let page = js(
            &client,
            "return {title: document.title, pwned: typeof window.pwned, \
             scripts: document.scripts.length, images: document.images.length};",
            vec![],
        )
        .await;
        assert_eq!(
            page,
            json!({"title": "rein report · 2 logs", "pwned": "undefined", "scripts": 0, "images": 0})
        );
        assert_eq!(background(&client).await, "rgb(255, 255, 255)", "the light theme");

        // One panel per turn that retried or failed, all collapsed: turns 1 and 3 of the first
        // log (turn 2 was clean), turn 1 of the second.
        let panels = client.find_all(Locator::Css("details.rein-panel")).await.unwrap();
        let turns: Vec<String> = {
            let mut turns = Vec::new();
            for panel in &panels {
                turns.push(panel.attr("data-turn").await.unwrap().unwrap());
                assert!(!is_open(&client, panel).await, "collapsed at first");
            }
            turns
        };
        assert_eq!(turns, ["1", "3", "1"]);
        let summary = panels[0].find(Locator::Css("summary")).await.unwrap();
        assert_eq!(summary.text().await.unwrap(), "Retried 1 time(s) this turn · recovered");
        screenshot(&client, &shots.join("report.png")).await;

        // A click opens the panel: the raw message appears, verbatim.
        let raw = panels[0].find(Locator::Css("pre.rein-raw")).await.unwrap();
        assert!(!raw.is_displayed().await.unwrap(), "hidden while collapsed");
        summary.click().await.unwrap();
        assert!(is_open(&client, &panels[0]).await);
        assert!(raw.is_displayed().await.unwrap());
        assert_eq!(text_content(&client, &raw).await, HOSTILE);
        let fields = panels[0].find(Locator::Css(".rein-fields")).await.unwrap();
        assert_eq!(
            fields.text().await.unwrap(),
            "harness · turn 1·step 1 · mock · RATE_LIMIT · HTTP 429 · request req-<1>"
        );
        let retried = panels[0].find_all(Locator::Css("li.rein-attempt")).await.unwrap();
        let second = retried[1].find(Locator::Css(".rein-fields")).await.unwrap();
        assert_eq!(
            second.text().await.unwrap(),
            "llm-retry · attempt 1/2 · waited 500 ms · turn 1·step 1 · mock · answered"
        );

        // The exhausted turn: its last message keeps its leading newline, CR LF and spaces.
        panels[1].find(Locator::Css("summary")).await.unwrap().click().await.unwrap();
        let raws = panels[1].find_all(Locator::Css("pre.rein-raw")).await.unwrap();
        assert_eq!(raws.len(), 3);
        assert_eq!(text_content(&client, &raws[2]).await, LAST);

        // A second click closes it again.
        summary.click().await.unwrap();
        assert!(!is_open(&client, &panels[0]).await);
        assert!(!raw.is_displayed().await.unwrap());

        // Everything open, for the people who look at the screenshots.
        for panel in &panels {
            if !is_open(&client, panel).await {
                panel.find(Locator::Css("summary")).await.unwrap().click().await.unwrap();
            }
        }
        client.set_window_size(1200, 2400).await.unwrap();
        screenshot(&client, &shots.join("report-expanded.png")).await;

        let after = js(&client, "return [document.title, typeof window.pwned];", vec![]).await;
        assert_eq!(after, json!(["rein report · 2 logs", "undefined"]), "still nothing ran");
    })
    .await;

    let dark_profile = dir.path().join("profile-dark");
    let dark = driver.session(&chromium, &dark_profile, &["--force-dark-mode"]).await;
    with_session(dark, |client| async move {
        client.goto(&url).await.unwrap();
        let prefers =
            js(&client, "return matchMedia('(prefers-color-scheme: dark)').matches;", vec![]);
        assert_eq!(prefers.await, json!(true));
        assert_eq!(background(&client).await, "rgb(13, 17, 23)", "the dark theme");
        let panel = client.find(Locator::Css("details.rein-panel")).await.unwrap();
        panel.find(Locator::Css("summary")).await.unwrap().click().await.unwrap();
        screenshot(&client, &shots.join("report-dark.png")).await;
    })
    .await;
}
