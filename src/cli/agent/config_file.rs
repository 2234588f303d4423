//! `rein.toml`: the configuration file of `rein chat`, `rein console` and `rein config show`.
//!
//! ```toml
//! store = ".rein/sessions"          # a directory of JSONL logs, or postgres://USER@HOST/DB
//! chain = ["llm-retry", "compaction", "auto-retry"]   # the plugin chain, outermost first
//!
//! [console]
//! port = 4180
//!
//! [[routes]]                        # the first is the default route, the others fallbacks
//! provider = "openai"               # deepseek | anthropic | openai | simulated
//! model = "gpt-4o-mini"
//! base_url = "http://127.0.0.1:11434/v1"
//! key_env = "MY_OPENAI_KEY"         # the variable that holds its key (never the key itself)
//! retryPolicy = { mode = "normal", maxRetries = 3 }   # this route's declared retry policy
//!
//! [plugins.auto-retry]              # a plugin's settings: the keys of its settings page
//! extraRetries = 5
//! ```
//!
//! Looked up as `rein.toml` in the working directory, or named with `--config PATH` (then it
//! must exist). Every key is optional; a flag given on the command line wins over the file, the
//! file over the defaults, and a plugin's settings saved at run time (at a revision, in the
//! store) over the file.
//!
//! # Strict and lenient
//!
//! The file's own keys are read strictly: an unknown key, a value of the wrong type, a provider
//! rein does not know, a key written into the file instead of naming its variable — each an
//! error naming the key path and the file's line (`rein.toml:12: routes[1].provider: …`), and
//! nothing starts. A plugin's settings are read the way that plugin reads its configuration:
//! `llm-retry` and `fallback` strictly (an error), `auto-retry` and `compaction` leniently (each
//! value they cannot use falls back to its default with a warning naming the key and line,
//! printed before anything starts).
//!
//! - `spans`: the line of any key path.
//! - `sources`: where each plugin setting in force came from (default, the file, or the store).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rein_runtime::route_health::HealthSettings;
use serde_json::Value;

use super::provider::ProviderKind;

pub(crate) mod sources;
mod spans;

use spans::Spans;

/// The file looked up in the working directory when `--config` is not given.
pub(crate) const DEFAULT_NAME: &str = "rein.toml";

/// The longest configuration file read.
const MAX_BYTES: u64 = 1 << 20;

/// A configuration file, read and checked.
#[derive(Debug, Clone, Default)]
pub(crate) struct ConfigFile {
    /// The file, as named (or found).
    pub(crate) path: PathBuf,
    /// `store`.
    pub(crate) store: Option<Located<String>>,
    /// `console.port`.
    pub(crate) console_port: Option<Located<u16>>,
    /// `chain`, outermost first.
    pub(crate) chain: Option<Located<Vec<String>>>,
    /// `routes`: the default route, then the fallbacks.
    pub(crate) routes: Vec<FileRoute>,
    /// `plugins.NAME`: each plugin's settings (as JSON, the form plugins read), with the line of
    /// each key the file sets.
    pub(crate) plugins: BTreeMap<String, PluginEntry>,
}

/// A value and the line it is on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Located<T> {
    pub(crate) value: T,
    pub(crate) line: usize,
}

/// One `[[routes]]` entry.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct FileRoute {
    pub(crate) provider: Option<ProviderKind>,
    pub(crate) model: Option<String>,
    pub(crate) base_url: Option<String>,
    pub(crate) key_env: Option<String>,
    /// `retryPolicy`, checked, as declared.
    pub(crate) retry_policy: Option<Value>,
    /// `health`, checked, as declared: `false` (off), `true` (the defaults) or a table of
    /// route-health settings.
    pub(crate) health: Option<Value>,
    /// The line of its `[[routes]]` header (or inline table).
    pub(crate) line: usize,
}

/// One `[plugins.NAME]` table.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct PluginEntry {
    /// Its keys as JSON.
    pub(crate) config: Value,
    /// The line of each key it sets.
    pub(crate) lines: BTreeMap<String, usize>,
    /// The line of the table.
    pub(crate) line: usize,
}

impl ConfigFile {
    /// `path:line: ` — where a message about `key` (a field path) points.
    pub(crate) fn at(&self, key: &str, line: usize) -> String {
        format!("{}:{line}: {key}", self.path.display())
    }

    /// Where the file sets each key of plugin `name` (`PATH:LINE`) and to what, for
    /// [`sources::sources`].
    pub(crate) fn plugin_keys(&self, name: &str) -> BTreeMap<String, (String, Value)> {
        let Some(entry) = self.plugins.get(name) else { return BTreeMap::new() };
        let path = self.path.display();
        let value = |key: &str| entry.config.get(key).cloned().unwrap_or(Value::Null);
        entry
            .lines
            .iter()
            .map(|(key, line)| (key.clone(), (format!("{path}:{line}"), value(key))))
            .collect()
    }

    /// The settings the file gives plugin `name` (an empty object when none).
    pub(crate) fn plugin_config(&self, name: &str) -> Value {
        self.plugins
            .get(name)
            .map_or_else(|| Value::Object(Default::default()), |p| p.config.clone())
    }

    /// `plugins.NAME.FIELD` with its line, for a message about a plugin's field (the line of
    /// the field if the file sets it, else of the plugin's table; `None`: the file does not
    /// mention the plugin).
    pub(crate) fn plugin_field(&self, name: &str, field: &str) -> Option<String> {
        let entry = self.plugins.get(name)?;
        let top = field.split(['.', '[']).next().unwrap_or(field);
        let line = entry.lines.get(top).copied().unwrap_or(entry.line);
        let path = if field.is_empty() {
            format!("plugins.{name}")
        } else {
            format!("plugins.{name}.{field}")
        };
        Some(self.at(&path, line))
    }
}

/// Finds the configuration: `explicit` (which must exist), else [`DEFAULT_NAME`] in the working
/// directory if there is one, else none. The error is a line for the person.
pub(crate) fn load(explicit: Option<&Path>) -> Result<Option<ConfigFile>, String> {
    let path = match explicit {
        Some(path) => path.to_path_buf(),
        None => {
            let path = PathBuf::from(DEFAULT_NAME);
            if !path.exists() {
                return Ok(None);
            }
            path
        }
    };
    let text = rein_runtime::file::read_to_string(&path, MAX_BYTES)
        .map_err(|e| format!("--config {}: {e}", path.display()))?;
    read(&path, &text).map(Some)
}

/// Reads `text` (the file at `path`), strictly (see the module docs).
pub(crate) fn read(path: &Path, text: &str) -> Result<ConfigFile, String> {
    let shown = path.display();
    let table: toml::Table = toml::from_str(text).map_err(|e| {
        // toml's message names the line and column and quotes the line; keep it on few lines.
        format!("{shown}: not valid TOML: {}", e.to_string().trim_end())
    })?;
    let spans = Spans::parse(text);
    let line = |key: &str| spans.as_ref().and_then(|s| s.line(key)).unwrap_or(1);
    let fail = |key: &str, message: String| format!("{shown}:{}: {key}: {message}", line(key));
    let mut file = ConfigFile { path: path.to_path_buf(), ..ConfigFile::default() };
    for (key, value) in &table {
        match key.as_str() {
            "store" => {
                let store = string(value).ok_or_else(|| fail(key, wrong(value, "a string")))?;
                if store.trim().is_empty() {
                    return Err(fail(key, "must not be empty".into()));
                }
                file.store = Some(Located { value: store.to_owned(), line: line(key) });
            }
            "chain" => {
                let names = strings(value)
                    .ok_or_else(|| fail(key, wrong(value, "a list of plugin names")))?;
                for (i, name) in names.iter().enumerate() {
                    if !rein_plugins::ALL.iter().any(|(known, _)| known == name) {
                        let known: Vec<&str> = rein_plugins::ALL.iter().map(|(n, _)| *n).collect();
                        let message =
                            format!("no plugin named {name:?}; known: {}", known.join(", "));
                        return Err(fail(&format!("chain[{i}]"), message));
                    }
                    if names[..i].contains(name) {
                        return Err(fail(
                            &format!("chain[{i}]"),
                            format!("{name} is already in the chain"),
                        ));
                    }
                }
                file.chain = Some(Located { value: names, line: line(key) });
            }
            "console" => {
                let console = value.as_table().ok_or_else(|| fail(key, wrong(value, "a table")))?;
                for (inner, value) in console {
                    let path = format!("console.{inner}");
                    match inner.as_str() {
                        "port" => {
                            let port = value
                                .as_integer()
                                .and_then(|p| u16::try_from(p).ok())
                                .ok_or_else(|| fail(&path, wrong(value, "a port, 0 to 65535")))?;
                            file.console_port = Some(Located { value: port, line: line(&path) });
                        }
                        _ => return Err(fail(&path, "unknown key; known: port".into())),
                    }
                }
            }
            "routes" => {
                let routes = value
                    .as_array()
                    .ok_or_else(|| fail(key, wrong(value, "an array of tables ([[routes]])")))?;
                for (i, route) in routes.iter().enumerate() {
                    let at = format!("routes[{i}]");
                    file.routes.push(read_route(route, &at, &fail, line(&at))?);
                }
            }
            "plugins" => {
                let plugins = value
                    .as_table()
                    .ok_or_else(|| fail(key, wrong(value, "a table of plugin tables")))?;
                for (name, settings) in plugins {
                    let at = format!("plugins.{name}");
                    if !rein_plugins::ALL.iter().any(|(known, _)| known == name) {
                        let known: Vec<&str> = rein_plugins::ALL.iter().map(|(n, _)| *n).collect();
                        return Err(fail(
                            &at,
                            format!("no plugin of that name; known: {}", known.join(", ")),
                        ));
                    }
                    let table =
                        settings.as_table().ok_or_else(|| fail(&at, wrong(settings, "a table")))?;
                    let config =
                        serde_json::to_value(table).map_err(|e| fail(&at, e.to_string()))?;
                    let lines =
                        table.keys().map(|k| (k.clone(), line(&format!("{at}.{k}")))).collect();
                    file.plugins
                        .insert(name.clone(), PluginEntry { config, lines, line: line(&at) });
                }
            }
            _ => {
                return Err(fail(
                    key,
                    "unknown key; known: store, chain, console, routes, plugins".into(),
                ));
            }
        }
    }
    Ok(file)
}

/// One `[[routes]]` table, strictly.
fn read_route(
    value: &toml::Value,
    at: &str,
    fail: &impl Fn(&str, String) -> String,
    line: usize,
) -> Result<FileRoute, String> {
    let table = value.as_table().ok_or_else(|| fail(at, wrong(value, "a table")))?;
    let mut route = FileRoute { line, ..FileRoute::default() };
    for (key, value) in table {
        let path = format!("{at}.{key}");
        let text = || {
            string(value)
                .filter(|s| !s.trim().is_empty())
                .map(str::to_owned)
                .ok_or_else(|| fail(&path, wrong(value, "a non-empty string")))
        };
        match key.as_str() {
            "provider" => {
                let name = text()?;
                let kind = <ProviderKind as clap::ValueEnum>::from_str(&name, false).map_err(|_| {
                    fail(&path, format!("{name:?} is not a provider; known: deepseek, anthropic, openai, simulated"))
                })?;
                route.provider = Some(kind);
            }
            "model" => route.model = Some(text()?),
            "base_url" => route.base_url = Some(text()?),
            "key_env" => route.key_env = Some(text()?),
            "key" | "api_key" => {
                return Err(fail(
                    &path,
                    "a key does not belong in a file: name the variable that holds it with key_env"
                        .into(),
                ));
            }
            "retryPolicy" => {
                let declared =
                    serde_json::to_value(value).map_err(|e| fail(&path, e.to_string()))?;
                if let Err(e) =
                    rein_runtime::retry_policy::RetryPolicy::from_declared(&declared, &path)
                {
                    // The policy error names its own field path (`routes[0].retryPolicy.mode`).
                    let message = e.to_string();
                    let field = message.split(": ").next().unwrap_or(&path).to_owned();
                    let rest = message.strip_prefix(&format!("{field}: ")).unwrap_or(&message);
                    return Err(fail(&field, rest.to_owned()));
                }
                route.retry_policy = Some(declared);
            }
            "health" => {
                let declared =
                    serde_json::to_value(value).map_err(|e| fail(&path, e.to_string()))?;
                if let Err(e) = health_of(&declared, &path) {
                    // The error names its own field path (`routes[0].health.openMs`).
                    return Err(fail(&e.path, e.reason));
                }
                route.health = Some(declared);
            }
            _ => {
                return Err(fail(
                    &path,
                    "unknown key; known: provider, model, base_url, key_env, retryPolicy, health"
                        .into(),
                ));
            }
        }
    }
    Ok(route)
}

/// The route health a route's declared `health` asks for (`path` names it): `None` for `false`
/// (off), the defaults for `true`, else the table read strictly. A route that declares nothing
/// has none ([`FileRoute::health`] is `None`).
pub(crate) fn health_of(
    declared: &Value,
    path: &str,
) -> Result<Option<HealthSettings>, rein_runtime::route_health::HealthError> {
    match declared {
        Value::Bool(false) => Ok(None),
        Value::Bool(true) => Ok(Some(HealthSettings::default())),
        Value::Object(_) => HealthSettings::from_value(declared, path).map(Some),
        other => Err(rein_runtime::route_health::HealthError {
            path: path.to_owned(),
            reason: format!("must be true, false or a table, got {other}"),
        }),
    }
}

fn string(value: &toml::Value) -> Option<&str> {
    value.as_str()
}

fn strings(value: &toml::Value) -> Option<Vec<String>> {
    value.as_array()?.iter().map(|v| v.as_str().map(str::to_owned)).collect()
}

/// "must be X, got a Y".
fn wrong(value: &toml::Value, want: &str) -> String {
    format!("must be {want}, got {} {}", article(value.type_str()), value.type_str())
}

fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(text: &str) -> Result<ConfigFile, String> {
        read(Path::new("rein.toml"), text)
    }

    #[test]
    fn a_whole_file_is_read_with_the_line_of_each_value() {
        let file = read_text(
            r#"store = "logs"
chain = ["fallback", "llm-retry", "auto-retry"]

[console]
port = 7000

[[routes]]
provider = "openai"
model = "gpt-4o-mini"
base_url = "http://127.0.0.1:1/v1"
key_env = "MY_KEY"
retryPolicy = { mode = "normal", maxRetries = 3 }

[[routes]]
provider = "simulated"
model = "sim-small"

[plugins.auto-retry]
extraRetries = 5
maxDelayMs = 9000
"#,
        )
        .unwrap();
        assert_eq!(file.store, Some(Located { value: "logs".into(), line: 1 }));
        assert_eq!(file.chain.as_ref().unwrap().value, ["fallback", "llm-retry", "auto-retry"]);
        assert_eq!(file.console_port, Some(Located { value: 7000, line: 5 }));
        assert_eq!(file.routes.len(), 2);
        assert_eq!(file.routes[0].provider, Some(ProviderKind::Openai));
        assert_eq!(file.routes[0].key_env.as_deref(), Some("MY_KEY"));
        assert_eq!(file.routes[0].retry_policy.as_ref().unwrap()["maxRetries"], 3);
        assert_eq!(
            (file.routes[1].provider, file.routes[1].line),
            (Some(ProviderKind::Simulated), 14)
        );
        let auto = &file.plugins["auto-retry"];
        assert_eq!(auto.config, serde_json::json!({"extraRetries": 5, "maxDelayMs": 9000}));
        assert_eq!(auto.lines.get("maxDelayMs"), Some(&20));
        assert_eq!(
            file.plugin_field("auto-retry", "retryableCodes[1]").as_deref(),
            Some("rein.toml:18: plugins.auto-retry.retryableCodes[1]"),
            "a field the file does not set points at its plugin's table"
        );
        assert_eq!(file.plugin_field("compaction", "x"), None);
    }

    #[test]
    fn every_mistake_names_the_key_path_and_the_line() {
        let cases = [
            ("store = 3", "rein.toml:1: store: must be a string, got an integer"),
            (
                "stores = \"x\"",
                "rein.toml:1: stores: unknown key; known: store, chain, console, routes, plugins",
            ),
            (
                "chain = [\"llm-retry\", \"retry\"]",
                "rein.toml:1: chain[1]: no plugin named \"retry\"; known:",
            ),
            (
                "chain = [\"llm-retry\", \"llm-retry\"]",
                "rein.toml:1: chain[1]: llm-retry is already in the chain",
            ),
            (
                "[console]\nport = 70000",
                "rein.toml:2: console.port: must be a port, 0 to 65535, got an integer",
            ),
            ("[console]\nhost = \"x\"", "rein.toml:2: console.host: unknown key; known: port"),
            (
                "[[routes]]\nprovider = \"gemini\"",
                "rein.toml:2: routes[0].provider: \"gemini\" is not a provider",
            ),
            (
                "[[routes]]\nmodel = \"\"",
                "rein.toml:2: routes[0].model: must be a non-empty string, got a string",
            ),
            (
                "[[routes]]\n\n[[routes]]\nkey = \"sk-secret\"",
                "rein.toml:4: routes[1].key: a key does not belong in a file",
            ),
            (
                "[[routes]]\nretryPolicy = { mode = \"sometimes\" }",
                "rein.toml:2: routes[0].retryPolicy.mode:",
            ),
            (
                "[[routes]]\nhealth = { openMs = 0 }",
                "rein.toml:2: routes[0].health.openMs: must be an integer from 1 to 2147483647, got 0",
            ),
            (
                "[[routes]]\nmodel = \"m\"\n[routes.health]\nprobes = 2\nfailureRatio = 2",
                "rein.toml:5: routes[0].health.failureRatio: must be within [0, 1], got 2",
            ),
            (
                "[[routes]]\nhealth = { openMS = 5 }",
                "rein.toml:2: routes[0].health.openMS: unknown key (expected one of maxTokens,",
            ),
            (
                "[[routes]]\nhealth = 3",
                "rein.toml:2: routes[0].health: must be true, false or a table, got 3",
            ),
            (
                "[plugins.retrier]\nx = 1",
                "rein.toml:1: plugins.retrier: no plugin of that name; known:",
            ),
            (
                "plugins = 1",
                "rein.toml:1: plugins: must be a table of plugin tables, got an integer",
            ),
            ("store = ", "rein.toml: not valid TOML: TOML parse error at line 1, column 9"),
        ];
        for (text, want) in cases {
            let error = read_text(text).unwrap_err();
            assert!(error.starts_with(want), "{text:?}:\n{error}\nwant {want}");
            assert!(!error.contains("sk-secret"), "{error}");
        }
    }
}
