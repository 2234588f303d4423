//! `rein console`: rein's browser half — a local web console over the runtime `rein chat`
//! builds (or over a store, read-only).
//!
//! It serves, on 127.0.0.1 only: the sessions list; a session's conversation with its
//! turn-tail panels, updated live (server-sent events) as the log grows, with a prompt box and
//! a cancel button for a running turn; and the Plugins page, a settings form per plugin whose
//! settings change at run time (staged until Save, saved under the revision fence). There is no
//! login: the console listens on loopback only and refuses any request whose `Host` or `Origin`
//! is not its own. The decisions are in `docs/runtime-semantics.md` ("rein console").
//!
//! Pure core: [`guard`] (who may talk to it), [`request`] (request bodies), [`staged`] (a
//! settings patch from a form's staged edits), [`status`] (what a session is doing), [`tail`]
//! (what of a log can still change on a page), [`drawn`] (the settings a form was drawn from),
//! [`health`] (what the Routes page shows of a route's health).
//! Shells: [`connections`] (HTTP on each socket, timeouts, a stop bounded in time), [`body`]
//! (reading a body within its size and time), [`server`] (routes), [`pages`] (markup),
//! [`feed`] (how it learns a log grew), [`logs`] (where it reads logs: through the store, any
//! kind — a JSONL directory, a PostgreSQL database — or the files of a directory served
//! read-only), [`reader`] and [`follow`] (reading logs as they grow for the live streams); the
//! page script and stylesheet are `console/console.js` and `console/console.css`, embedded.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use rein_runtime::cluster::{Node, NodeOptions};
use rein_runtime::store::SessionStore;
use rein_runtime::store::postgres::PostgresStore;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::agent::config_file::{self, ConfigFile};
use super::agent::{self, ProviderArgs, sessions};
use super::chat::signals::{self, Signal};
use super::chat::telemetry;

mod body;
mod connections;
mod drawn;
mod feed;
mod follow;
mod guard;
mod health;
mod logs;
mod pages;
mod reader;
mod request;
mod server;
mod staged;
mod status;
mod tail;

/// The port when `--port` is not given.
pub(crate) const DEFAULT_PORT: u16 = 4180;
/// Exit status: a usage error or bad input (nothing was written).
const BAD_INPUT: u8 = 2;
/// Exit status: the console could not start (the port is taken…) or the runtime failed.
const FAILED: u8 = 1;
/// Exit status: a second Ctrl-C or SIGTERM stopped it at once.
const FORCED: u8 = 130;

/// What `rein console --help` says after the options.
pub(crate) const CONSOLE_HELP: &str = "\
What it serves:
  On http://127.0.0.1:PORT/ only (never another interface): the sessions of the store, newest
  first; a session's conversation with the turn-tail panel of each turn that retried or failed,
  updated live as the log grows, a prompt box and a Cancel button for the running turn; the
  Plugins page, a settings form for auto-retry and compaction (llm-retry's settings are shown,
  read-only). Edits stay staged until Save, which sends only the changed fields under the
  revision the form was drawn at: a save based on a revision another client already replaced is
  refused, never overwritten. There is no login; a request whose Host or Origin is not the
  console's own is refused (403), and a write without a JSON body too (415).

The runtime:
  The one `rein chat` builds: the same providers and flags (see rein chat --help: DeepSeek with
  DEEPSEEK_API_KEY, Anthropic with ANTHROPIC_API_KEY, an OpenAI-compatible server with
  OPENAI_API_KEY or OPENAI_BASE_URL, else the simulated provider; the generation flags are
  rein chat's alone), the default plugin chain (llm-retry, compaction, auto-retry), the same store
  (--store: a JSONL directory, default .rein/sessions, created owner-only; or a PostgreSQL
  database, postgres://USER[:PASSWORD]@HOST[:PORT]/DB, the password from the URL or PGPASSWORD
  and never shown), so `rein chat --session ID` continues a session started here and the other
  way round (not both at once); saved plugin settings are kept in that store. With --read-only
  there is no runtime: the store must exist; its logs are shown and followed (looked at once a
  second), and nothing is written (a PostgreSQL store is opened as rein chat opens it, its
  schema brought up to date first).

Output:
  stdout   `rein console: http://127.0.0.1:PORT/` once it listens (--port 0 picks a free port).
  stderr   the provider (and the simulated provider's seed), the store; `error: ...`. With
           RUST_LOG, tracing spans as in rein chat.
  Ctrl-C (or SIGTERM) stops it: the open connections get 3 s to finish their request, then
  they are dropped; running turns end cancelled (`aborted: disposed`), every log is closed, then
  it exits. A second Ctrl-C (or SIGTERM) exits at once.

Limits:
  A request's head must arrive within 10 s, its body (at most 8 MiB) within 10 s more: a
  slower client is cut off.

Exit status:
  0  stopped by Ctrl-C or SIGTERM
  1  it could not listen (the port is taken: choose another with --port, or --port 0), or the
     runtime failed
  2  bad input, nothing written: a usage error, an invalid provider variable, a missing key for
     the --provider asked, a store that cannot be opened: not a readable directory (--read-only:
     that does not exist), a PostgreSQL database that is down, missing or refuses the password
  130  stopped at once by a second Ctrl-C or SIGTERM: a turn still running is left open in
       its log (the next start of the console, or open of the session, resumes it)";

/// Arguments of `rein console`.
#[derive(Debug, clap::Args)]
pub(crate) struct ConsoleArgs {
    /// The port on 127.0.0.1 (0: any free port, printed) [default: the configuration file's
    /// `console.port`, else 4180].
    #[arg(long, value_name = "PORT")]
    port: Option<u16>,
    #[command(flatten)]
    provider: ProviderArgs,
    /// The directory of session logs, or a PostgreSQL store: postgres://USER@HOST/DB (the
    /// password from the URL or PGPASSWORD, never printed) [default: the configuration file's
    /// `store`, else .rein/sessions].
    #[arg(long, value_name = "DIR|URL")]
    store: Option<PathBuf>,
    /// Serve the store without a runtime: show and follow its logs, change nothing.
    #[arg(long, conflicts_with_all = ["provider", "model", "seed"])]
    read_only: bool,
}

/// What a console serves: `rein console`'s flags, or `rein node`'s.
pub(crate) struct Served<'a> {
    pub(crate) port: Option<u16>,
    pub(crate) provider: &'a ProviderArgs,
    pub(crate) store: Option<&'a Path>,
    pub(crate) read_only: bool,
    /// A node of a cluster (`rein node`): the store must be PostgreSQL.
    pub(crate) node: Option<NodeOptions>,
    /// A node of `rein stress --nodes`: the stress run's runtime instead of `rein chat`'s.
    pub(crate) stress: Option<rein_cli::stress::StressConfig>,
}

/// Runs `rein console`.
pub(crate) fn run(args: &ConsoleArgs) -> ExitCode {
    run_served(Served {
        port: args.port,
        provider: &args.provider,
        store: args.store.as_deref(),
        read_only: args.read_only,
        node: None,
        stress: None,
    })
}

/// Runs a console (or a node) on a runtime of its own.
pub(crate) fn run_served(served: Served<'_>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(FAILED);
        }
    };
    let status = runtime.block_on(console(served));
    runtime.shutdown_background();
    ExitCode::from(status)
}

async fn console(args: Served<'_>) -> u8 {
    // First, so that no Ctrl-C from here on kills the process mid-write.
    let signals = match signals::listen() {
        Ok(signals) => signals,
        Err(e) => {
            eprintln!("error: cannot listen for Ctrl-C: {e}");
            return FAILED;
        }
    };
    telemetry::init();

    let file = match config_file::load(args.provider.config.as_deref()) {
        Ok(file) => file,
        Err(e) => {
            eprintln!("error: {e}");
            return BAD_INPUT;
        }
    };
    let dir = agent::store(args.store, file.as_ref());
    if args.node.is_some() && !sessions::is_postgres(&dir) {
        eprintln!(
            "error: --store {}: a node's store is a PostgreSQL database \
             (postgres://USER@HOST[:PORT]/DB)",
            dir.display()
        );
        return BAD_INPUT;
    }
    let port = args.port.or(file.as_ref().and_then(|f| f.console_port.as_ref()).map(|p| p.value));
    let port = port.unwrap_or(DEFAULT_PORT);
    let store_shown = match sessions::is_postgres(&dir) {
        true => rein_runtime::store::postgres::redact(&dir.to_string_lossy()),
        false => dir.display().to_string(),
    };
    let cluster;
    let (logs, live) = if args.read_only {
        match read_only(&dir).await {
            Ok((logs, postgres)) => {
                cluster = postgres;
                (logs, None)
            }
            Err(e) => {
                eprintln!("error: {e}");
                return BAD_INPUT;
            }
        }
    } else {
        match start(&args, file, &dir).await {
            Ok((live, label)) => {
                cluster = live.cluster.clone();
                (logs::Logs::Store(Arc::clone(&live.store)), Some((live, label)))
            }
            Err((status, e)) => {
                eprintln!("error: {e}");
                return status;
            }
        }
    };
    let label = live.as_ref().map(|(_, label)| label.clone());
    let live = live.map(|(live, _)| live);
    // What a crash left open in the store resumes now, before the console serves (a node
    // resumes what it takes over, as it takes it).
    if let Some(live) = live.as_ref().filter(|live| live.node.is_none()) {
        match live.runtime.resume_pending().await {
            Ok(found) => {
                eprintln!("rein console: {}", found.describe());
                for failed in &found.failed {
                    eprintln!(
                        "warning: cannot resume session {}: {}",
                        failed.session, failed.error
                    );
                }
            }
            Err(e) => eprintln!("warning: cannot look for sessions to resume: {e}"),
        }
    }

    let listener = match TcpListener::bind(("127.0.0.1", port)).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!(
                "error: cannot listen on 127.0.0.1:{port}: {e} (choose another port with --port, \
                 or --port 0 for any free one)"
            );
            if let Some(live) = &live {
                live.runtime.shutdown().await;
            }
            return FAILED;
        }
    };
    let port = match listener.local_addr() {
        Ok(addr) => addr.port(),
        Err(e) => {
            eprintln!("error: cannot read the address it listens on: {e}");
            return FAILED;
        }
    };

    if let Some((node, live)) = live.as_ref().and_then(|live| Some((live.node.as_ref()?, live))) {
        let mut events = node.events();
        let id = node.id().to_owned();
        tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(event) => eprintln!("rein node {id}: {}", event.describe()),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        eprintln!("rein node {id}: {n} changes not shown (too many at once)");
                    }
                    Err(_) => return,
                }
            }
        });
        if let Err(e) = node.start(&live.runtime).await {
            eprintln!("error: {e}");
            live.runtime.shutdown().await;
            return FAILED;
        }
    }

    let closing = CancellationToken::new();
    if args.stress.is_some() {
        tokio::spawn(stop_when_stdin_closes(closing.clone()));
    }
    let banner = match &label {
        Some(label) => format!("{label} · store {store_shown}"),
        None => format!("read-only · store {store_shown}"),
    };
    let app = Arc::new(server::App {
        context: pages::Context { live: label, store: store_shown, cluster: cluster.is_some() },
        own: guard::Own { port },
        logs,
        live,
        cluster,
        closing: closing.clone(),
        turns: TaskTracker::new(),
    });

    match app.live.as_ref().and_then(|live| live.node.as_ref()) {
        Some(node) => println!("rein node {}: http://127.0.0.1:{port}/", node.id()),
        None => println!("rein console: http://127.0.0.1:{port}/"),
    }
    eprintln!("{banner}");
    eprintln!("Ctrl-C stops it");

    tokio::spawn(stopper(signals, closing.clone()));
    let stopped =
        connections::serve(listener, server::router(Arc::clone(&app)), closing.cancelled()).await;
    if stopped.dropped > 0 {
        eprintln!(
            "rein console: {} still open after {} s: dropped",
            plural(stopped.dropped, "connection", "connections"),
            connections::GRACE.as_secs()
        );
    }
    if let Some(live) = &app.live {
        if let Some(node) = &live.node {
            // Handed over, not aborted: the nodes that take the partitions resume the turns.
            node.drain().await;
            eprintln!("rein node {}: drained", node.id());
        }
        live.runtime.shutdown().await;
    }
    app.turns.close();
    app.turns.wait().await;
    match app.live.as_ref().and_then(|live| live.node.as_ref()) {
        Some(node) => eprintln!("rein node {} stopped", node.id()),
        None => eprintln!("rein console stopped"),
    }
    0
}

/// Waits for Ctrl-C or SIGTERM: the first stops the console (`closing`), a second one exits at
/// once.
async fn stopper(
    mut signals: tokio::sync::mpsc::UnboundedReceiver<Signal>,
    closing: CancellationToken,
) {
    // No more signals (the handler is gone) is a stop too.
    let _: Option<Signal> = signals.recv().await;
    eprintln!("rein console: stopping (Ctrl-C or SIGTERM again stops it at once)");
    // Event streams end first: the server then waits only for short requests.
    closing.cancel();
    if signals.recv().await.is_some() {
        eprintln!(
            "rein console: stopped at once; a turn still running is left open in its log (the \
             next start resumes it)"
        );
        std::process::exit(i32::from(FORCED));
    }
}

/// A node of `rein stress --nodes` stops (drains) when its standard input closes: its run
/// ended, or died — a node never outlives the run that started it.
async fn stop_when_stdin_closes(closing: CancellationToken) {
    let _ = tokio::task::spawn_blocking(|| {
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
    })
    .await;
    closing.cancel();
}

/// `n` and the noun, in the singular for one.
fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The runtime `rein chat` builds, over a store that tells the console of every append, and
/// how the pages name its provider; or the exit status and the error.
async fn start(
    args: &Served<'_>,
    file: Option<ConfigFile>,
    dir: &Path,
) -> Result<(server::Live, String), (u8, String)> {
    let routes = match &args.stress {
        Some(_) => None,
        None => {
            let planned = agent::plan_from(args.provider, file).map_err(|e| (BAD_INPUT, e))?;
            Some(agent::routes(planned).map_err(|e| (BAD_INPUT, e))?)
        }
    };
    let node = match &args.node {
        Some(options) => {
            let url = dir.to_string_lossy();
            let node = Node::join(&url, options.clone()).await;
            Some(node.map_err(|e| (BAD_INPUT, format!("--store: {e}")))?)
        }
        None => None,
    };
    let cluster = match (&node, sessions::is_postgres(dir)) {
        (Some(node), _) => Some(node.store()),
        (None, true) => Some(
            sessions::open_postgres_store(&dir.to_string_lossy())
                .await
                .map_err(|e| (BAD_INPUT, e))?,
        ),
        (None, false) => None,
    };
    let store: Arc<dyn SessionStore> = match &cluster {
        Some(postgres) => Arc::clone(postgres) as Arc<dyn SessionStore>,
        None => Arc::new(sessions::open_store(dir).map_err(|e| (BAD_INPUT, e))?),
    };
    let feed = Arc::new(feed::Feed::default());
    let notifying: Arc<dyn SessionStore> =
        Arc::new(feed::NotifyingStore::new(Arc::clone(&store), Arc::clone(&feed)));
    let grace = rein_runtime::runtime::DEFAULT_IDLE_GRACE;
    let placement = node.as_ref().map(Node::placement);
    let (runtime, built, file_keys, mut label) = match (&routes, &args.stress, placement) {
        (Some(routes), _, placement) => {
            let (runtime, built) = agent::build_placed(routes, notifying, grace, placement)
                .await
                .map_err(|e| (FAILED, e))?;
            let file_keys = routes.file.as_ref().map_or_else(Default::default, |file| {
                built.keys().map(|name| (name.clone(), file.plugin_keys(name))).collect()
            });
            let route = &routes.primary;
            let mut label = format!("{} on {}", route.model, route.label);
            if let Some(seed) = route.seed {
                label.push_str(&format!(" (seed {seed})"));
            }
            if let Some(fallbacks) = routes.fallback_labels() {
                label.push_str(&format!(" · fallback: {fallbacks}"));
            }
            (runtime, built, file_keys, label)
        }
        (None, Some(stress), Some(placement)) => {
            let (runtime, built) = rein_cli::stress::node_runtime(stress, notifying, placement)
                .await
                .map_err(|e| (FAILED, e))?;
            let label = format!("the stress workload (seed {})", stress.seed);
            (runtime, built, BTreeMap::new(), label)
        }
        (None, _, _) => {
            return Err((BAD_INPUT, "the stress workload is for a node of a cluster".into()));
        }
    };
    if let Some(node) = &node {
        label.push_str(&format!(" · node {} of {} partitions", node.id(), node.partitions()));
    }
    let routes: Vec<String> = match &routes {
        Some(routes) => std::iter::once(&routes.primary)
            .chain(&routes.fallbacks)
            .map(|route| route.name.clone())
            .collect(),
        None => vec![rein_cli::stress::ROUTE.to_owned()],
    };
    let live = server::Live {
        runtime,
        node,
        cluster,
        store,
        feed,
        creating: tokio::sync::Mutex::default(),
        drawn: drawn::Drawn::default(),
        built,
        file_keys,
        routes,
    };
    Ok((live, label))
}

/// The logs of a store served read-only: a PostgreSQL store, read through it; or the files of a
/// directory, which must be a readable one.
async fn read_only(dir: &Path) -> Result<(logs::Logs, Option<Arc<PostgresStore>>), String> {
    if sessions::is_postgres(dir) {
        let store = sessions::open_postgres_store(&dir.to_string_lossy()).await?;
        let logs = logs::Logs::Store(Arc::clone(&store) as Arc<dyn SessionStore>);
        return Ok((logs, Some(store)));
    }
    readable_dir(dir)?;
    Ok((logs::Logs::Files(dir.to_path_buf()), None))
}

/// A store to serve read-only as files: it must be a readable directory.
fn readable_dir(dir: &Path) -> Result<(), String> {
    let shown = dir.display();
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => return Err(format!("--store {shown}: not a directory")),
        Err(e) => return Err(format!("--store {shown}: {e}")),
    }
    std::fs::read_dir(dir).map_err(|e| format!("--store {shown}: cannot read it: {e}"))?;
    Ok(())
}
