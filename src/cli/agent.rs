//! The runtime `rein chat` talks through and `rein console` serves — built in one place so that
//! both serve the same agent: one provider route (chosen from the flags and the environment),
//! the `--fallback` routes, rein's default plugin chain (with `fallback` first when there are
//! fallback routes), and a JSONL store of session logs.
//!
//! - [`provider`] (pure): which provider, its configuration and every refusal; `build` is the one
//!   place an adapter is made.
//! - [`plugins`]: the default chain (`llm-retry`, `compaction`, `auto-retry`), built by name,
//!   with `fallback` first when routes are given to it.
//! - [`sessions`]: the store directory and a session's place in it, checked before anything is
//!   written.
//! - [`config_file`]: `rein.toml` (routes, chain and plugin settings, store, console port), read
//!   strictly with the line of every key, and where each plugin setting in force came from.
//! - [`generation`] (pure): the generation flags (`--system`, `--temperature`, `--max-tokens`),
//!   checked against the routes they apply to.
//! - [`ProviderArgs`]: the provider flags both commands take; [`plan`] checks them against the
//!   environment; [`routes`] makes the adapters; [`build`] starts the runtime over a store.

use std::collections::BTreeMap;
use std::sync::Arc;

use rein_runtime::provider::Generation;
use rein_runtime::random::SeededJitter;
use rein_runtime::retry_policy::RetryPolicy;
use rein_runtime::route_health::HealthSettings;
use rein_runtime::runtime::{Route, Runtime};
use rein_runtime::store::SessionStore;

pub(crate) mod config_file;
pub(crate) mod generation;
pub(crate) mod plugins;
pub(crate) mod provider;
pub(crate) mod sessions;

use provider::{FallbackSpec, Plan, ProviderKind, Wanted};

use config_file::ConfigFile;

/// The provider flags of `rein chat` and `rein console`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ProviderArgs {
    /// The provider (default: the first configured of deepseek (DEEPSEEK_API_KEY), anthropic
    /// (ANTHROPIC_API_KEY) and openai (OPENAI_API_KEY or OPENAI_BASE_URL), else simulated).
    #[arg(long, value_enum, value_name = "PROVIDER")]
    pub(crate) provider: Option<ProviderKind>,
    /// The model to ask (default: the provider's, or its *_MODEL variable).
    #[arg(long, value_name = "NAME")]
    pub(crate) model: Option<String>,
    /// The simulated provider's seed: the same seed replays the same faults and answers.
    #[arg(long, value_name = "N")]
    pub(crate) seed: Option<u64>,
    /// A route to finish a turn on when the provider keeps failing (repeatable, in order of
    /// preference): MODEL (another model of the provider) or PROVIDER:MODEL (deepseek,
    /// anthropic, openai or simulated, configured by that provider's variables).
    #[arg(long = "fallback", value_name = "ROUTE")]
    pub(crate) fallback: Vec<String>,
    /// The configuration file (default: rein.toml in the working directory, if there is one):
    /// routes, the plugin chain and its settings, the store, the console port. A flag wins over
    /// the file.
    #[arg(long, value_name = "PATH")]
    pub(crate) config: Option<std::path::PathBuf>,
}

/// The routes the flags ask for, checked, before any adapter exists.
#[derive(Debug)]
pub(crate) struct Planned {
    primary: Plan,
    fallbacks: Vec<(FallbackSpec, Plan)>,
    /// Without `--provider`: the other providers the environment configures.
    also: Vec<(ProviderKind, String)>,
    /// The configuration file, when there is one.
    file: Option<ConfigFile>,
    /// The declared retry policy of the primary and of each fallback, from the file.
    policies: Vec<Option<RetryPolicy>>,
    /// The route health of the primary and of each fallback: the file's `health`, else off.
    health: Vec<Option<HealthSettings>>,
}

/// The routes, built: the primary (the default route) and the fallbacks, in order.
pub(crate) struct Routes {
    /// The route every turn starts on.
    pub(crate) primary: provider::Route,
    /// The `--fallback` routes, in order of preference.
    pub(crate) fallbacks: Vec<provider::Route>,
    /// The generation settings of every route (none by default).
    pub(crate) generation: Generation,
    /// Without `--provider`: the other providers the environment configures, by the variable
    /// that does (what the banner says the choice passed over).
    pub(crate) also: Vec<(ProviderKind, String)>,
    /// The configuration file, when there is one.
    pub(crate) file: Option<ConfigFile>,
    /// The declared retry policy of the primary and of each fallback (by position), from the file.
    policies: Vec<Option<RetryPolicy>>,
    /// The route health of the primary and of each fallback (by position; `None`: off).
    health: Vec<Option<HealthSettings>>,
}

impl Routes {
    /// Each route's dead-air watchdog, by route name (what the chat's waiting line names).
    pub(crate) fn watchdogs(&self) -> Vec<(String, std::time::Duration)> {
        std::iter::once(&self.primary)
            .chain(&self.fallbacks)
            .filter_map(|r| r.watchdog.map(|limit| (r.name.clone(), limit)))
            .collect()
    }

    /// `openai:gpt-4o-mini (OpenAI at https://…), …` — what a banner says of the fallbacks.
    pub(crate) fn fallback_labels(&self) -> Option<String> {
        let labels: Vec<String> =
            self.fallbacks.iter().map(|r| format!("{} ({})", r.name, r.label)).collect();
        (!labels.is_empty()).then(|| labels.join(", "))
    }
}

/// Checks the provider flags and the configuration file (`--config`, else `rein.toml` here)
/// against the process's environment: the routes' configuration, or an error for the person
/// naming the flag, the variable or the file's key and line (never quoting a key). Without
/// `--seed`, the simulated provider gets a random seed below 10^6 (printed by the caller, so a
/// run can be replayed).
pub(crate) fn plan(args: &ProviderArgs) -> Result<Planned, String> {
    plan_from(args, config_file::load(args.config.as_deref())?)
}

/// [`plan`] with the configuration file already read (or none).
pub(crate) fn plan_from(args: &ProviderArgs, file: Option<ConfigFile>) -> Result<Planned, String> {
    plan_with(args, file, |name| std::env::var(name).ok())
}

/// [`plan`] with the file read and the environment behind `env`.
fn plan_with(
    args: &ProviderArgs,
    file: Option<ConfigFile>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Planned, String> {
    let vars = match &file {
        Some(file) => file_vars(file)?,
        None => BTreeMap::new(),
    };
    let lookup = |name: &str| match vars.get(name) {
        Some(Source::Value(value)) => Some(value.clone()),
        Some(Source::Var(var)) => env(var),
        None => env(name),
    };
    let routes = file.as_ref().map_or(&[][..], |f| f.routes.as_slice());
    let first = routes.first();
    let flag = args.provider.or(first.and_then(|r| r.provider));
    let kind = provider::choose(flag, &lookup);
    let model = args.model.clone().or_else(|| first.and_then(|r| r.model.clone()));
    let wanted = Wanted { kind, model, seed: args.seed };
    let random_seed = uuid::Uuid::new_v4().as_u64_pair().0 % 1_000_000;
    let primary = provider::plan(&wanted, random_seed, lookup)?;
    let seed = match &primary {
        Plan::Simulated(config) => config.seed,
        Plan::Real(_) | Plan::Anthropic(_) => random_seed,
    };
    // The flags' fallbacks, else the file's routes after the first (each `PROVIDER:MODEL`).
    let (specs, from_file) = if !args.fallback.is_empty() || routes.len() < 2 {
        (args.fallback.clone(), false)
    } else {
        let file = file.as_ref().expect("routes come from a file");
        let mut specs = Vec::with_capacity(routes.len() - 1);
        for (i, route) in routes.iter().enumerate().skip(1) {
            let Some(model) = &route.model else {
                let at = file.at(&format!("routes[{i}].model"), route.line);
                return Err(format!("{at}: a fallback route needs a model"));
            };
            specs.push(format!("{}:{model}", route.provider.unwrap_or(kind).flag()));
        }
        (specs, true)
    };
    let fallbacks = provider::plan_fallbacks(&specs, kind, primary.model(), seed, lookup)?;
    let also = match flag {
        Some(_) => Vec::new(),
        None => provider::also_configured(kind, &lookup),
    };
    let mut policies = vec![first.and_then(|r| declared(r, 0))];
    let declared_fallbacks = routes.iter().enumerate().skip(1).take(fallbacks.len());
    policies.extend(declared_fallbacks.map(|(i, r)| if from_file { declared(r, i) } else { None }));
    let health = (0..=fallbacks.len())
        .map(|i| route_health(routes.get(i).filter(|_| i == 0 || from_file), i))
        .collect();
    Ok(Planned { primary, fallbacks, also, file, policies, health })
}

/// Where a provider variable's value comes from when the file configures it.
enum Source {
    /// The file's value (`base_url`).
    Value(String),
    /// Another variable (`key_env`).
    Var(String),
}

/// The provider variables the file's routes set (`OPENAI_BASE_URL` from `base_url`,
/// `OPENAI_API_KEY` from the variable `key_env` names): routes of one provider share them, so
/// two that disagree are an error naming the second.
fn file_vars(file: &ConfigFile) -> Result<BTreeMap<String, Source>, String> {
    let mut vars: BTreeMap<String, (Source, usize)> = BTreeMap::new();
    for (i, route) in file.routes.iter().enumerate() {
        let settings =
            [("base_url", "BASE_URL", &route.base_url), ("key_env", "API_KEY", &route.key_env)];
        for (key, suffix, value) in settings {
            let Some(value) = value else { continue };
            let at = file.at(&format!("routes[{i}].{key}"), route.line);
            let kind = route.provider.ok_or_else(|| format!("{at}: needs the route's provider"))?;
            let var = kind
                .var(suffix)
                .ok_or_else(|| format!("{at}: the simulated provider takes none"))?;
            let source = if key == "key_env" {
                Source::Var(value.clone())
            } else {
                Source::Value(value.clone())
            };
            if let Some((earlier, j)) = vars.get(&var) {
                let same = match (earlier, &source) {
                    (Source::Value(a), Source::Value(b)) | (Source::Var(a), Source::Var(b)) => {
                        a == b
                    }
                    _ => false,
                };
                if !same {
                    return Err(format!(
                        "{at}: routes of one provider share its {key}; routes[{j}] gives another"
                    ));
                }
            }
            vars.insert(var, (source, i));
        }
    }
    Ok(vars.into_iter().map(|(var, (source, _))| (var, source)).collect())
}

/// Route `i`'s declared retry policy (checked when the file was read).
fn declared(route: &config_file::FileRoute, i: usize) -> Option<RetryPolicy> {
    let declared = route.retry_policy.as_ref()?;
    RetryPolicy::from_declared(declared, &format!("routes[{i}].retryPolicy")).ok()
}

/// The route health of route `i`: as the file declares it (checked when the file was read),
/// else off — an interactive command keeps every retry budget its plugins were given
/// (`docs/runtime-semantics.md`, "Route health").
fn route_health(route: Option<&config_file::FileRoute>, i: usize) -> Option<HealthSettings> {
    let declared = route.and_then(|r| r.health.as_ref())?;
    config_file::health_of(declared, &format!("routes[{i}].health")).ok().flatten()
}

/// The store: `--store`, else the file's `store`, else [`sessions::DEFAULT_STORE`].
pub(crate) fn store(
    flag: Option<&std::path::Path>,
    file: Option<&ConfigFile>,
) -> std::path::PathBuf {
    match (flag, file.and_then(|f| f.store.as_ref())) {
        (Some(flag), _) => flag.to_path_buf(),
        (None, Some(store)) => std::path::PathBuf::from(&store.value),
        (None, None) => std::path::PathBuf::from(sessions::DEFAULT_STORE),
    }
}

/// Makes the adapters of `planned`; each fallback route is named `PROVIDER:MODEL`.
pub(crate) fn routes(planned: Planned) -> Result<Routes, String> {
    let primary = provider::build(planned.primary)?;
    let mut fallbacks = Vec::with_capacity(planned.fallbacks.len());
    for (spec, plan) in planned.fallbacks {
        let route = provider::build(plan)?;
        fallbacks.push(provider::Route { name: spec.route_name(), ..route });
    }
    // The chain's configuration is checked here, with the routes: a plugin that refuses the
    // file's settings is bad input, found before anything starts.
    let names: Vec<String> = fallbacks.iter().map(|r| r.name.clone()).collect();
    plugins::chain(&names, planned.file.as_ref())?;
    Ok(Routes {
        primary,
        fallbacks,
        generation: Generation::default(),
        also: planned.also,
        file: planned.file,
        policies: planned.policies,
        health: planned.health,
    })
}

/// Starts the runtime: the primary route (the default) and the fallback routes, each with the
/// routes' generation settings, the default plugin chain with each plugin's default settings
/// (`fallback` first, naming the fallback routes, when there are any), the simulated provider's
/// seed as every plugin's jitter seed, `store` for the session logs, and how long an idle session
/// stays awake (holding its log and the lock on it) before it hibernates. Each fallback a
/// plugin's configuration reader took is printed on stderr (`warning: plugin …: field: …`).
pub(crate) async fn build(
    routes: &Routes,
    store: Arc<dyn SessionStore>,
    idle_grace: std::time::Duration,
) -> Result<(Runtime, BTreeMap<String, serde_json::Value>), String> {
    build_placed(routes, store, idle_grace, None).await
}

/// [`build`] for a node of a cluster: its sessions placed by `placement`.
pub(crate) async fn build_placed(
    routes: &Routes,
    store: Arc<dyn SessionStore>,
    idle_grace: std::time::Duration,
    placement: Option<rein_runtime::session::Placement>,
) -> Result<(Runtime, BTreeMap<String, serde_json::Value>), String> {
    let route = &routes.primary;
    let names: Vec<String> = routes.fallbacks.iter().map(|r| r.name.clone()).collect();
    let (chain, warnings) = plugins::chain(&names, routes.file.as_ref())?;
    for warning in &warnings {
        eprintln!("warning: {warning}");
    }
    let served = |route: &provider::Route, i: usize| {
        Route::new(route.name.clone(), route.adapter.clone())
            .model(route.model.clone())
            .generation(routes.generation.clone())
            .retry_policy(routes.policies.get(i).cloned().flatten())
            .health(routes.health.get(i).cloned().flatten())
    };
    let mut builder = Runtime::builder()
        .store(store)
        .idle_grace(idle_grace)
        .route(served(route, 0))
        .default_route(route.name.clone());
    for (i, fallback) in routes.fallbacks.iter().enumerate() {
        builder = builder.route(served(fallback, i + 1));
    }
    // Each plugin's settings as built, before the store's saved settings are restored.
    let mut built = BTreeMap::new();
    for plugin in chain {
        if let Some(settings) = plugin.plugin.settings() {
            built.insert(plugin.plugin.name().to_owned(), settings.shown().settings);
        }
        builder = builder.plugin(plugin);
    }
    if let Some(seed) = route.seed {
        builder = builder.jitter(Arc::new(SeededJitter::new(seed)));
    }
    if let Some(placement) = placement {
        builder = builder.placement(placement);
    }
    let runtime = builder.build().await.map_err(|e| format!("cannot start the runtime: {e}"))?;
    // A saved settings record the plugins could not take: say so (the configuration readers'
    // fallbacks were said above, where the file's lines are known).
    for warning in runtime.config_warnings() {
        eprintln!("warning: {warning}");
    }
    Ok((runtime, built))
}
