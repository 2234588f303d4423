//! `rein report` in a real headless Chromium, driven through chromedriver (WebDriver, with
//! `fantoccini`): the panels are collapsed and open on a click; the provider's message is shown
//! verbatim; a message holding `<script>` and an `<img onerror>` is shown as text and never runs;
//! the dark theme follows the system's preference. Screenshots are written to
//! `target/screenshots/` for people to look at.
//!
//! The browser and its driver are started by `rein_testkit::browser` (shared with the
//! console's browser test), which says what they need.

// Helpers outside `#[test]` functions panic on purpose, like the tests themselves.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use fantoccini::Locator;
use rein_testkit::browser;
use rein_testkit::browser::{
    Driver, background, is_open, js, screenshot, text_content, with_session,
};
use serde_json::{Value, json};

/// The provider message of the first failure of `tests/panels/report.json`.
const HOSTILE: &str = "<script>document.title='pwned';window.pwned=1</script><img src=x \
                       onerror=\"window.pwned=2\"> & \"quoted\"";
/// The last failure of its third turn: leading newline, CR LF, trailing spaces.
const LAST: &str = "\n  upstream said:\r\n  <html>503</html>  \n";

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

#[tokio::test]
async fn the_report_opens_its_panels_on_click_and_shows_provider_text_as_text() {
    let chromium = browser::chromium();
    let chromedriver = browser::chromedriver();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shots = browser::screenshots();

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
        assert_eq!(summary.text().await.unwrap(), "Retried 1 time this turn · recovered");
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
