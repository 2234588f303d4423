//! The runtime `rein chat` talks through and `rein console` serves — built in one place so that
//! both serve the same agent: one provider route (chosen from the flags and the environment),
//! rein's default plugin chain, and a JSONL store of session logs.
//!
//! - [`provider`] (pure): which provider, its configuration and every refusal; `build` is the one
//!   place an adapter is made.
//! - [`plugins`]: the default chain (`llm-retry`, `compaction`, `auto-retry`), built by name.
//! - [`sessions`]: the store directory and a session's place in it, checked before anything is
//!   written.
//! - [`ProviderArgs`]: the provider flags both commands take; [`plan`] checks them against the
//!   environment; [`build`] starts the runtime over a store.

use std::sync::Arc;

use rein_runtime::random::SeededJitter;
use rein_runtime::runtime::{Route, Runtime};
use rein_runtime::store::SessionStore;

pub(crate) mod plugins;
pub(crate) mod provider;
pub(crate) mod sessions;

use provider::{ProviderKind, Wanted};

/// The provider flags of `rein chat` and `rein console`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ProviderArgs {
    /// The provider (default: deepseek when DEEPSEEK_API_KEY is set, else openai when
    /// OPENAI_API_KEY is, else simulated).
    #[arg(long, value_enum, value_name = "PROVIDER")]
    pub(crate) provider: Option<ProviderKind>,
    /// The model to ask (default: the provider's, or its *_MODEL variable).
    #[arg(long, value_name = "NAME")]
    pub(crate) model: Option<String>,
    /// The simulated provider's seed: the same seed replays the same faults and answers.
    #[arg(long, value_name = "N")]
    pub(crate) seed: Option<u64>,
}

/// Checks the provider flags against the process's environment: the route's configuration, or
/// an error for the person naming the flag or variable (never quoting a key). Without `--seed`,
/// the simulated provider gets a random seed below 10^6 (printed by the caller, so a run can be
/// replayed).
pub(crate) fn plan(args: &ProviderArgs) -> Result<provider::Plan, String> {
    let lookup = |name: &str| std::env::var(name).ok();
    let wanted = Wanted {
        kind: provider::choose(args.provider, &lookup),
        model: args.model.clone(),
        seed: args.seed,
    };
    let random_seed = uuid::Uuid::new_v4().as_u64_pair().0 % 1_000_000;
    provider::plan(&wanted, random_seed, lookup)
}

/// Starts the runtime: `route` as the only (default) route, the default plugin chain with each
/// plugin's default settings, the simulated provider's seed as every plugin's jitter seed, and
/// `store` for the session logs.
pub(crate) async fn build(
    route: &provider::Route,
    store: Arc<dyn SessionStore>,
) -> Result<Runtime, String> {
    let chain = plugins::default_chain()?;
    let mut builder = Runtime::builder()
        .store(store)
        .route(Route::new(route.name.clone(), route.adapter.clone()).model(route.model.clone()));
    for plugin in chain {
        builder = builder.built(plugin);
    }
    if let Some(seed) = route.seed {
        builder = builder.jitter(Arc::new(SeededJitter::new(seed)));
    }
    builder.build().await.map_err(|e| format!("cannot start the runtime: {e}"))
}
