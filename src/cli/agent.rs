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
//! - [`generation`] (pure): the generation flags (`--system`, `--temperature`, `--max-tokens`),
//!   checked against the routes they apply to.
//! - [`ProviderArgs`]: the provider flags both commands take; [`plan`] checks them against the
//!   environment; [`routes`] makes the adapters; [`build`] starts the runtime over a store.

use std::sync::Arc;

use rein_runtime::provider::Generation;
use rein_runtime::random::SeededJitter;
use rein_runtime::runtime::{Route, Runtime};
use rein_runtime::store::SessionStore;

pub(crate) mod generation;
pub(crate) mod plugins;
pub(crate) mod provider;
pub(crate) mod sessions;

use provider::{FallbackSpec, Plan, ProviderKind, Wanted};

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
}

/// The routes the flags ask for, checked, before any adapter exists.
#[derive(Debug)]
pub(crate) struct Planned {
    primary: Plan,
    fallbacks: Vec<(FallbackSpec, Plan)>,
    /// Without `--provider`: the other providers the environment configures.
    also: Vec<(ProviderKind, String)>,
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

/// Checks the provider flags against the process's environment: the route's configuration, or
/// an error for the person naming the flag or variable (never quoting a key). Without `--seed`,
/// the simulated provider gets a random seed below 10^6 (printed by the caller, so a run can be
/// replayed).
pub(crate) fn plan(args: &ProviderArgs) -> Result<Planned, String> {
    let lookup = |name: &str| std::env::var(name).ok();
    let kind = provider::choose(args.provider, &lookup);
    let wanted = Wanted { kind, model: args.model.clone(), seed: args.seed };
    let random_seed = uuid::Uuid::new_v4().as_u64_pair().0 % 1_000_000;
    let primary = provider::plan(&wanted, random_seed, lookup)?;
    let seed = match &primary {
        Plan::Simulated(config) => config.seed,
        Plan::Real(_) | Plan::Anthropic(_) => random_seed,
    };
    let fallbacks = provider::plan_fallbacks(&args.fallback, kind, primary.model(), seed, lookup)?;
    let also = match args.provider {
        Some(_) => Vec::new(),
        None => provider::also_configured(kind, &lookup),
    };
    Ok(Planned { primary, fallbacks, also })
}

/// Makes the adapters of `planned`; each fallback route is named `PROVIDER:MODEL`.
pub(crate) fn routes(planned: Planned) -> Result<Routes, String> {
    let primary = provider::build(planned.primary)?;
    let mut fallbacks = Vec::with_capacity(planned.fallbacks.len());
    for (spec, plan) in planned.fallbacks {
        let route = provider::build(plan)?;
        fallbacks.push(provider::Route { name: spec.route_name(), ..route });
    }
    Ok(Routes { primary, fallbacks, generation: Generation::default(), also: planned.also })
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
) -> Result<Runtime, String> {
    let route = &routes.primary;
    let names: Vec<String> = routes.fallbacks.iter().map(|r| r.name.clone()).collect();
    let chain = plugins::chain(&names)?;
    let served = |route: &provider::Route| {
        Route::new(route.name.clone(), route.adapter.clone())
            .model(route.model.clone())
            .generation(routes.generation.clone())
    };
    let mut builder = Runtime::builder()
        .store(store)
        .idle_grace(idle_grace)
        .route(served(route))
        .default_route(route.name.clone());
    for fallback in &routes.fallbacks {
        builder = builder.route(served(fallback));
    }
    for plugin in chain {
        builder = builder.plugin(plugin);
    }
    if let Some(seed) = route.seed {
        builder = builder.jitter(Arc::new(SeededJitter::new(seed)));
    }
    let runtime = builder.build().await.map_err(|e| format!("cannot start the runtime: {e}"))?;
    // A configuration value a plugin could not use fell back to its default: say so.
    for warning in runtime.config_warnings() {
        eprintln!("warning: {warning}");
    }
    Ok(runtime)
}
