//! Which provider `rein chat` and `rein console` talk to, and the route built for it.
//!
//! - `--provider deepseek|openai|simulated` chooses; without it, DeepSeek when
//!   `DEEPSEEK_API_KEY` is set, else the generic OpenAI-compatible preset when `OPENAI_API_KEY`
//!   is, else the embedded simulated provider — so a fresh machine with no key and no network
//!   still gets a conversation, with the retry machinery at work.
//! - The real presets read their variables (`<PREFIX>_API_KEY`, `_BASE_URL`, `_MODEL`) through
//!   [`OpenAiConfig::from_lookup`]; an invalid value is an error naming the variable. Asking for
//!   a real provider whose key is not set is an error before anything is written, not a turn
//!   that fails `MISSING_CREDENTIAL`.
//! - The simulated provider runs its default fault model with the chat's seed, keyed without
//!   the session ([`SimulatedConfig::per_session`] off: a fresh session of one seed replays the
//!   same faults and words), and a [`SIMULATED_WATCHDOG`] that ends a simulated stall after a
//!   wait a person sits through.
//!
//! The choice and every refusal are pure functions of the flags and an environment lookup; only
//! [`build`] makes an adapter (the HTTP client).

use std::sync::Arc;
use std::time::Duration;

use rein_providers::{OpenAiCompatible, OpenAiConfig, Preset, Simulated, SimulatedConfig};
use rein_runtime::provider::Adapter;

/// How long a simulated stall lasts before its watchdog fails it `TIMEOUT` (and `llm-retry`
/// retries it).
pub(crate) const SIMULATED_WATCHDOG: Duration = Duration::from_secs(10);

/// The providers `rein chat` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ProviderKind {
    /// DeepSeek (`DEEPSEEK_API_KEY`, `DEEPSEEK_BASE_URL`, `DEEPSEEK_MODEL`).
    Deepseek,
    /// Any OpenAI-compatible server (`OPENAI_API_KEY`, `OPENAI_BASE_URL`, `OPENAI_MODEL`).
    Openai,
    /// The embedded simulated provider: no key, no network, seeded faults.
    Simulated,
}

impl ProviderKind {
    fn preset(self) -> Option<Preset> {
        match self {
            ProviderKind::Deepseek => Some(Preset::DEEPSEEK),
            ProviderKind::Openai => Some(Preset::OPENAI),
            ProviderKind::Simulated => None,
        }
    }

    fn flag(self) -> &'static str {
        match self {
            ProviderKind::Deepseek => "deepseek",
            ProviderKind::Openai => "openai",
            ProviderKind::Simulated => "simulated",
        }
    }
}

/// The provider to use: `flag` when given, else the first preset whose key `lookup` finds set
/// (DeepSeek, then OpenAI), else the simulated provider.
pub(crate) fn choose(
    flag: Option<ProviderKind>,
    lookup: &impl Fn(&str) -> Option<String>,
) -> ProviderKind {
    if let Some(kind) = flag {
        return kind;
    }
    let keyed =
        |preset: Preset| lookup(&preset.var("API_KEY")).is_some_and(|k| !k.trim().is_empty());
    if keyed(Preset::DEEPSEEK) {
        ProviderKind::Deepseek
    } else if keyed(Preset::OPENAI) {
        ProviderKind::Openai
    } else {
        ProviderKind::Simulated
    }
}

/// What the flags ask of the route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Wanted {
    /// The provider.
    pub(crate) kind: ProviderKind,
    /// `--model`.
    pub(crate) model: Option<String>,
    /// `--seed` (simulated only).
    pub(crate) seed: Option<u64>,
}

/// The route's configuration, checked, before any adapter exists.
#[derive(Debug)]
pub(crate) enum Plan {
    /// A real OpenAI-compatible provider.
    Real(OpenAiConfig),
    /// The simulated provider.
    Simulated(SimulatedConfig),
}

/// Checks `wanted` against the environment: the configuration to build, or an error for the
/// person (naming the flag or variable; never quoting a key). `seed` is the simulated
/// provider's seed when `--seed` is not given.
pub(crate) fn plan(
    wanted: &Wanted,
    seed: u64,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Plan, String> {
    if let Some(model) = &wanted.model {
        if model.trim().is_empty() {
            return Err("--model: must not be empty".to_owned());
        }
    }
    let Some(preset) = wanted.kind.preset() else {
        let mut config = SimulatedConfig {
            seed: wanted.seed.unwrap_or(seed),
            idle_timeout: Some(SIMULATED_WATCHDOG),
            per_session: false,
            ..SimulatedConfig::default()
        };
        if let Some(model) = &wanted.model {
            config.model = model.trim().to_owned();
        }
        config.validate().map_err(|e| e.to_string())?;
        return Ok(Plan::Simulated(config));
    };
    if wanted.seed.is_some() {
        return Err(format!(
            "--seed: applies to the simulated provider only (the provider is {})",
            wanted.kind.flag()
        ));
    }
    let config = OpenAiConfig::from_lookup(preset, lookup).map_err(|e| e.to_string())?;
    if !config.has_api_key() {
        return Err(format!(
            "--provider {}: {} is not set (without a key, use --provider simulated)",
            wanted.kind.flag(),
            preset.var("API_KEY")
        ));
    }
    Ok(Plan::Real(match &wanted.model {
        Some(model) => config.with_model(model.trim()),
        None => config,
    }))
}

/// A route ready for the runtime.
pub(crate) struct Route {
    /// The route's name: the provider's `gen_ai.provider.name` (`deepseek`, `openai`,
    /// `simulated`).
    pub(crate) name: String,
    /// The adapter.
    pub(crate) adapter: Arc<dyn Adapter>,
    /// The model asked.
    pub(crate) model: String,
    /// The simulated provider's seed.
    pub(crate) seed: Option<u64>,
    /// How the banner names it (`DeepSeek at https://api.deepseek.com`).
    pub(crate) label: String,
}

/// Builds the adapter of `plan`.
pub(crate) fn build(plan: Plan) -> Result<Route, String> {
    match plan {
        Plan::Real(config) => {
            let name = config.name().to_owned();
            let model = config.model().to_owned();
            let label = format!("{} at {}", config.label(), config.base_url());
            let adapter = OpenAiCompatible::new(config).map_err(|e| e.to_string())?;
            Ok(Route { name, adapter: Arc::new(adapter), model, seed: None, label })
        }
        Plan::Simulated(config) => {
            let seed = config.seed;
            let simulated = Simulated::new(config).map_err(|e| e.to_string())?;
            Ok(Route {
                name: rein_providers::simulated::NAME.to_owned(),
                model: simulated.model().to_owned(),
                adapter: Arc::new(simulated),
                seed: Some(seed),
                label: "the simulated provider".to_owned(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// Environment variables as (name, value) pairs.
    type Vars<'a> = &'a [(&'a str, &'a str)];

    fn env(vars: Vars) -> impl Fn(&str) -> Option<String> {
        let vars: HashMap<String, String> =
            vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        move |name| vars.get(name).cloned()
    }

    #[test]
    fn the_default_provider_follows_the_keys_that_are_set() {
        use ProviderKind::*;
        let cases: [(Option<ProviderKind>, Vars, ProviderKind); 7] = [
            (None, &[], Simulated),
            (None, &[("DEEPSEEK_API_KEY", "sk-1")], Deepseek),
            (None, &[("OPENAI_API_KEY", "sk-2")], Openai),
            (None, &[("DEEPSEEK_API_KEY", "sk-1"), ("OPENAI_API_KEY", "sk-2")], Deepseek),
            (None, &[("DEEPSEEK_API_KEY", "  "), ("DEEPSEEK_BASE_URL", "http://x")], Simulated),
            (Some(Simulated), &[("DEEPSEEK_API_KEY", "sk-1")], Simulated),
            (Some(Openai), &[], Openai),
        ];
        for (flag, vars, want) in cases {
            assert_eq!(choose(flag, &env(vars)), want, "{flag:?} {vars:?}");
        }
    }

    fn wanted(kind: ProviderKind, model: Option<&str>, seed: Option<u64>) -> Wanted {
        Wanted { kind, model: model.map(str::to_owned), seed }
    }

    #[test]
    fn refusals_name_the_flag_or_the_variable_and_never_the_key() {
        use ProviderKind::*;
        let key = ("DEEPSEEK_API_KEY", "sk-never-printed");
        let cases: [(Wanted, Vars, &str); 6] = [
            (
                wanted(Deepseek, None, None),
                &[],
                "--provider deepseek: DEEPSEEK_API_KEY is not set (without a key, use --provider simulated)",
            ),
            (wanted(Openai, None, None), &[key], "--provider openai: OPENAI_API_KEY is not set"),
            (
                wanted(Deepseek, None, Some(3)),
                &[key],
                "--seed: applies to the simulated provider only (the provider is deepseek)",
            ),
            (
                wanted(Deepseek, None, None),
                &[key, ("DEEPSEEK_BASE_URL", "nope")],
                "DEEPSEEK_BASE_URL: not a URL",
            ),
            (
                wanted(Deepseek, None, None),
                &[("DEEPSEEK_API_KEY", "sk never")],
                "DEEPSEEK_API_KEY: must be printable ASCII",
            ),
            (wanted(Simulated, Some(" "), None), &[], "--model: must not be empty"),
        ];
        for (wanted, vars, expected) in cases {
            let error = plan(&wanted, 0, env(vars)).unwrap_err();
            assert!(error.starts_with(expected), "{error}");
            assert!(!error.contains("never"), "{error}");
        }
    }

    #[test]
    fn the_simulated_provider_replays_by_seed_and_the_real_ones_take_the_model() {
        let Plan::Simulated(config) =
            plan(&wanted(ProviderKind::Simulated, None, None), 42, env(&[])).unwrap()
        else {
            panic!("simulated")
        };
        assert_eq!(
            (config.seed, config.per_session, config.idle_timeout),
            (42, false, Some(SIMULATED_WATCHDOG))
        );
        let Plan::Simulated(config) =
            plan(&wanted(ProviderKind::Simulated, Some("sim-2"), Some(7)), 42, env(&[])).unwrap()
        else {
            panic!("simulated")
        };
        assert_eq!((config.seed, config.model.as_str()), (7, "sim-2"));

        let vars = [("DEEPSEEK_API_KEY", "sk-1"), ("DEEPSEEK_MODEL", "deepseek-reasoner")];
        let Plan::Real(config) =
            plan(&wanted(ProviderKind::Deepseek, None, None), 0, env(&vars)).unwrap()
        else {
            panic!("real")
        };
        assert_eq!(config.model(), "deepseek-reasoner");
        let Plan::Real(config) =
            plan(&wanted(ProviderKind::Deepseek, Some("m-9"), None), 0, env(&vars)).unwrap()
        else {
            panic!("real")
        };
        assert_eq!(config.model(), "m-9", "--model wins over DEEPSEEK_MODEL");
    }
}
