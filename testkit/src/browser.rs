//! A real headless Chromium for the browser tests, driven through chromedriver (WebDriver, with
//! `fantoccini`): shared by `tests/report_browser.rs` and `tests/console_browser.rs`.
//!
//! Needs `/usr/bin/chromium` and `/usr/bin/chromedriver` (Debian's `chromium` and
//! `chromium-driver`; `bash .ci/install-deps` installs them); `REIN_CHROMIUM` and
//! `REIN_CHROMEDRIVER` name others. When they are missing the test fails and says so: it never
//! passes without a browser. chromedriver is started on a port it picks itself (`--port=0`,
//! read back from the line it prints), and each browser session gets a fresh profile directory.
//!
//! Waiting for a page to change ([`until`]) is event-driven: a script in the page resolves when
//! a condition holds, checked at once and on every DOM mutation (a `MutationObserver`), within
//! the WebDriver script timeout — never a sleep.

use std::io::{BufRead, BufReader};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use fantoccini::wd::TimeoutConfiguration;
use fantoccini::{Client, ClientBuilder, Locator, elements::Element};
use futures::FutureExt;
use serde_json::{Value, json};

/// How long [`until`] waits for a page to get where a test expects.
pub const WAIT: Duration = Duration::from_secs(30);

/// The path of a tool the test needs, from `variable` or `default`; fails saying how to install
/// it when it is missing.
pub fn tool(variable: &str, default: &str, package: &str) -> PathBuf {
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

/// Chromium.
pub fn chromium() -> PathBuf {
    tool("REIN_CHROMIUM", "/usr/bin/chromium", "chromium")
}

/// chromedriver.
pub fn chromedriver() -> PathBuf {
    tool("REIN_CHROMEDRIVER", "/usr/bin/chromedriver", "chromium-driver")
}

/// `target/screenshots/`, created: where the screenshots for people go (the target directory is
/// the one that holds the running test, `target/<profile>/deps/<test>`).
pub fn screenshots() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let target = exe.ancestors().nth(3).expect("a test executable under target/<profile>/deps");
    let shots = target.join("screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    shots
}

/// chromedriver, on a port it chose; killed when dropped.
pub struct Driver {
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
    /// Starts the chromedriver at `path`.
    pub fn start(path: &Path) -> Self {
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
    pub async fn session(&self, chromium: &Path, profile: &Path, extra: &[&str]) -> Client {
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
        let client = ClientBuilder::new(connector)
            .capabilities(capabilities)
            .connect(&self.url)
            .await
            .unwrap_or_else(|e| panic!("cannot open a Chromium session: {e}"));
        let timeouts = TimeoutConfiguration::new(Some(WAIT), Some(WAIT), Some(Duration::ZERO));
        client.update_timeouts(timeouts).await.unwrap();
        client
    }
}

/// Runs `check` with `client`, then ends the session whatever happened, then reports.
pub async fn with_session<F>(client: Client, check: impl FnOnce(Client) -> F)
where
    F: std::future::Future<Output = ()>,
{
    let outcome = AssertUnwindSafe(check(client.clone())).catch_unwind().await;
    client.close().await.ok();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// Runs `script` (a function body; `arguments` are `args`) in the page.
pub async fn js(client: &Client, script: &str, args: Vec<Value>) -> Value {
    client.execute(script, args).await.unwrap()
}

/// Waits until `condition` — a JavaScript expression over the page — is truthy, and returns its
/// value: checked at once, then on every change of the DOM. A navigation while it waits (a click
/// that loads another page) ends that page's watch (the driver answers it with a script
/// timeout), and so does a second without a change: the watch then starts again on the page that
/// is there now. Fails with `what` and the page's text after [`WAIT`].
pub async fn until(client: &Client, what: &str, condition: &str) -> Value {
    let script = format!(
        "const done = arguments[arguments.length - 1];
         const check = () => {{ try {{ return ({condition}); }} catch (e) {{ return null; }} }};
         const now = check();
         if (now) {{ done({{value: now}}); return; }}
         let timer = null;
         const observer = new MutationObserver(() => {{
           const value = check();
           if (value) {{ clearTimeout(timer); observer.disconnect(); done({{value}}); }}
         }});
         const again = () => {{ clearTimeout(timer); observer.disconnect(); done(null); }};
         timer = setTimeout(again, 1000);
         window.addEventListener('pagehide', again, {{once: true}});
         observer.observe(document, {{subtree: true, childList: true, characterData: true,
                                      attributes: true}});"
    );
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let error = match client.execute_async(&script, vec![]).await {
            Ok(Value::Object(mut found)) => return found.remove("value").unwrap_or(Value::Null),
            // The page went away while it was watched: watch the one that replaced it.
            Ok(_) if std::time::Instant::now() < deadline => continue,
            Ok(_) => "the page kept changing".to_owned(),
            // The driver ends an asynchronous script whose page was unloaded with a "script
            // timeout" at once, not after the timeout: watch the new page.
            Err(e) if std::time::Instant::now() < deadline && e.to_string().contains("timeout") => {
                continue;
            }
            Err(e) => e.to_string(),
        };
        let text = js(client, "return document.body ? document.body.innerText : '';", vec![]).await;
        panic!("waited {WAIT:?} for {what} ({condition}): {error}\n--- the page:\n{text}")
    }
}

/// Whether a `<details>` is open.
pub async fn is_open(client: &Client, panel: &Element) -> bool {
    let open = js(client, "return arguments[0].open;", vec![json!(panel)]).await;
    open.as_bool().unwrap()
}

/// An element's `textContent`.
pub async fn text_content(client: &Client, element: &Element) -> String {
    let text = js(client, "return arguments[0].textContent;", vec![json!(element)]).await;
    text.as_str().unwrap().to_owned()
}

/// Writes a screenshot of the window to `path`.
pub async fn screenshot(client: &Client, path: &Path) {
    std::fs::write(path, client.screenshot().await.unwrap()).unwrap();
}

/// The body's computed background colour.
pub async fn background(client: &Client) -> String {
    let colour = js(client, "return getComputedStyle(document.body).backgroundColor;", vec![]);
    colour.await.as_str().unwrap().to_owned()
}

/// The element `css` finds.
pub async fn find(client: &Client, css: &str) -> Element {
    client.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("no element {css}: {e}"))
}
