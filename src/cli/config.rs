//! `rein config show`: the configuration `rein chat` and `rein console` would start with, and
//! where each value came from — a flag's default, the configuration file (at its line), or a
//! plugin's settings saved in the store at a revision (which win over the file).
//!
//! It reads the file and the store's saved settings and writes nothing; the routes are shown as
//! the file declares them (the environment chooses the rest at start, as the chat's banner says).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use rein_runtime::store::jsonl::JsonlStore;
use rein_runtime::store::{Durability, SessionStore, StoredSettings};
use serde_json::Value;

use super::agent::config_file::{self, ConfigFile, sources};
use super::agent::{self, plugins, sessions};

pub(crate) const CONFIG_HELP: &str = "\
Output:
  stdout   the configuration file read (or none), the store and the console port, the routes the
           file declares, the plugin chain, and each plugin's settings in force with where each
           value came from: default, the file (PATH:LINE), or saved at revision N (a change
           accepted at run time, kept in the store; it wins over the file).
  stderr   an error, or a warning for each value a plugin could not use and each saved record
           it could not take.

Exit status:
  0  printed
  1  the store could not be read
  2  the configuration file is invalid, or a usage error";

/// Arguments of `rein config`.
#[derive(Debug, clap::Args)]
pub(crate) struct ConfigArgs {
    #[command(subcommand)]
    command: ConfigCommand,
}

#[derive(Debug, clap::Subcommand)]
enum ConfigCommand {
    /// Print the effective configuration and where each value came from.
    #[command(after_help = CONFIG_HELP)]
    Show(ShowArgs),
}

#[derive(Debug, clap::Args)]
struct ShowArgs {
    /// The configuration file (default: rein.toml in the working directory, if there is one).
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// The store whose saved plugin settings to read [default: the file's `store`, else
    /// .rein/sessions].
    #[arg(long, value_name = "DIR|URL")]
    store: Option<PathBuf>,
}

/// Runs `rein config`.
pub(crate) fn run(args: &ConfigArgs) -> ExitCode {
    let ConfigCommand::Show(args) = &args.command;
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(show(args)) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err((status, e)) => {
            eprintln!("error: {e}");
            ExitCode::from(status)
        }
    }
}

async fn show(args: &ShowArgs) -> Result<String, (u8, String)> {
    let file = config_file::load(args.config.as_deref()).map_err(|e| (2, e))?;
    let store = agent::store(args.store.as_deref(), file.as_ref());
    let saved = saved_settings(&store).await.map_err(|e| (1, e))?;
    let fallbacks: Vec<String> = file.as_ref().map_or_else(Vec::new, |f| {
        f.routes
            .iter()
            .skip(1)
            .filter_map(|r| {
                let kind = r.provider.or(f.routes[0].provider)?;
                Some(format!("{}:{}", kind.flag(), r.model.as_deref()?))
            })
            .collect()
    });
    let (chain, warnings) = plugins::chain(&fallbacks, file.as_ref()).map_err(|e| (2, e))?;
    for warning in &warnings {
        eprintln!("warning: {warning}");
    }
    Ok(render(file.as_ref(), &store, &chain, &saved))
}

/// The saved settings of the store at `store` (none for a directory that does not exist yet).
async fn saved_settings(store: &std::path::Path) -> Result<Vec<StoredSettings>, String> {
    let opened: Arc<dyn SessionStore> = if sessions::is_postgres(store) {
        sessions::open_postgres_store(&store.to_string_lossy()).await? as Arc<dyn SessionStore>
    } else {
        if !store.exists() {
            return Ok(Vec::new());
        }
        let dir = store.display();
        Arc::new(
            JsonlStore::open(store, Durability::Os).map_err(|e| format!("--store {dir}: {e}"))?,
        )
    };
    opened.load_settings().await.map_err(|e| format!("reading the saved plugin settings: {e}"))
}

fn render(
    file: Option<&ConfigFile>,
    store: &std::path::Path,
    chain: &[rein_runtime::plugin::BuiltPlugin],
    saved: &[StoredSettings],
) -> String {
    let mut out = String::new();
    let from = |line: Option<usize>| match (file, line) {
        (Some(file), Some(line)) => format!("{}:{line}", file.path.display()),
        _ => "default".to_owned(),
    };
    match file {
        Some(file) => writeln!(out, "configuration: {}", file.path.display()),
        None => writeln!(
            out,
            "configuration: none (no {} here; --config names one)",
            config_file::DEFAULT_NAME
        ),
    }
    .ok();
    let store_line = file.and_then(|f| f.store.as_ref()).map(|s| s.line);
    let shown = match sessions::is_postgres(store) {
        true => rein_runtime::store::postgres::redact(&store.to_string_lossy()),
        false => store.display().to_string(),
    };
    writeln!(out, "store: {shown} ({})", from(store_line)).ok();
    let port = file.and_then(|f| f.console_port.as_ref());
    let port_value = port.map_or(super::console::DEFAULT_PORT, |p| p.value);
    writeln!(out, "console.port: {port_value} ({})", from(port.map(|p| p.line))).ok();
    match file.map(|f| f.routes.as_slice()).filter(|r| !r.is_empty()) {
        None => {
            writeln!(out, "routes: none declared: chosen from the environment at start").ok();
        }
        Some(routes) => {
            writeln!(out, "routes (the first is the default):").ok();
            for (i, route) in routes.iter().enumerate() {
                let mut parts = vec![
                    route.provider.map_or("provider from the environment", |k| k.flag()).to_owned(),
                ];
                if let Some(model) = &route.model {
                    parts.push(format!("model {model}"));
                }
                if let Some(url) = &route.base_url {
                    parts.push(format!("base_url {}", rein_runtime::store::postgres::redact(url)));
                }
                if let Some(var) = &route.key_env {
                    parts.push(format!("key from ${var}"));
                }
                if let Some(policy) = &route.retry_policy {
                    parts.push(format!("retryPolicy {policy}"));
                }
                parts.push(match &route.health {
                    None => "health off (default)".to_owned(),
                    Some(serde_json::Value::Bool(false)) => "health off".to_owned(),
                    Some(serde_json::Value::Bool(true)) => "health on (defaults)".to_owned(),
                    Some(declared) => format!("health {declared}"),
                });
                let at = from(Some(route.line));
                writeln!(out, "  routes[{i}]: {} ({at})", parts.join(" · ")).ok();
            }
        }
    };
    let names: Vec<&str> = chain.iter().map(|p| p.plugin.name()).collect();
    let chain_line = file.and_then(|f| f.chain.as_ref()).map(|c| c.line);
    writeln!(out, "chain: {} ({})", names.join(", "), from(chain_line)).ok();
    for plugin in chain {
        let name = plugin.plugin.name();
        let Some(settings) = plugin.plugin.settings() else {
            writeln!(out, "{name}: no settings").ok();
            continue;
        };
        let built = settings.shown();
        let record = saved.iter().find(|s| s.plugin() == name);
        let (now, revision) = match record {
            Some(StoredSettings::Record(record))
                if settings.restore(&record.settings, record.revision).is_ok() =>
            {
                (record.settings.clone(), record.revision)
            }
            Some(other) => {
                eprintln!(
                    "warning: plugin {name}: its saved settings (revision {}) cannot be taken; a start uses the settings below",
                    other.revision()
                );
                (built.settings.clone(), other.revision())
            }
            None => (built.settings.clone(), 0),
        };
        let keys = file.map(|f| f.plugin_keys(name)).unwrap_or_default();
        let sources = sources::sources(&built.settings, &keys, &now, revision);
        let state = if built.read_only { " (read-only at run time)" } else { "" };
        writeln!(out, "{name}: revision {revision}{state}").ok();
        if let Value::Object(fields) = &now {
            for (key, value) in fields {
                let source =
                    sources.get(key).map_or_else(|| "default".to_owned(), ToString::to_string);
                writeln!(out, "  {key} = {value} ({source})").ok();
            }
        }
    }
    out
}
