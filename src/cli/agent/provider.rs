//! Which provider `rein chat` and `rein console` talk to, and the route built for it.
//!
//! - `--provider deepseek|anthropic|openai|simulated` chooses; without it, the first provider
//!   whose key is set, named services before the generic one — DeepSeek (`DEEPSEEK_API_KEY`),
//!   then Anthropic (`ANTHROPIC_API_KEY`), then the generic OpenAI-compatible preset
//!   (`OPENAI_API_KEY`, or `OPENAI_BASE_URL` alone: a local server) — else the embedded
//!   simulated provider, so a fresh machine with no key and no network still gets a
//!   conversation, with the retry machinery at work. When more than one is configured, the
//!   banner names the others ([`also_configured`]): the choice is never a silent surprise.
//! - The real providers read their variables (`<PREFIX>_API_KEY`, `_BASE_URL`, `_MODEL`)
//!   through [`OpenAiConfig::from_lookup`] and [`AnthropicConfig::from_lookup`]; an invalid value
//!   is an error naming the variable. Asking for a real provider whose key is not set is an
//!   error before anything is written, not a turn that fails `MISSING_CREDENTIAL` — except a
//!   keyless route ([`OpenAiConfig::keyless`]: `OPENAI_BASE_URL` and no `OPENAI_API_KEY`, a
//!   local server such as Ollama, llama.cpp or vLLM), whose requests carry no `Authorization`
//!   header, as its label says.
//! - The simulated provider runs its default fault model with the chat's seed, keyed without
//!   the session ([`SimulatedConfig::per_session`] off: a fresh session of one seed replays the
//!   same faults and words), and a [`SIMULATED_WATCHDOG`] that ends a simulated stall after a
//!   wait a person sits through.
//!
//! - `--fallback ROUTE` (repeatable) adds a route `fallback` moves a turn to when the primary
//!   keeps failing: `MODEL` is another model of the primary's provider, `PROVIDER:MODEL` a model
//!   of `deepseek`, `anthropic`, `openai` (any OpenAI-compatible server, through
//!   `OPENAI_BASE_URL`) or `simulated`, each configured from its own variables
//!   ([`plan_fallbacks`]). The route is named
//!   `PROVIDER:MODEL` in the log. A prefix that is not a provider is part of the model
//!   (`llama3:8b`). A simulated fallback gets the chat's seed plus its place in the list, so it
//!   does not replay the primary's faults.
//!
//! The choice and every refusal are pure functions of the flags and an environment lookup; only
//! [`build`] makes an adapter (the HTTP client).

use std::sync::Arc;
use std::time::Duration;

use rein_providers::{
    Anthropic, AnthropicConfig, OpenAiCompatible, OpenAiConfig, Preset, Simulated, SimulatedConfig,
};
use rein_runtime::provider::Adapter;

/// How long a simulated stall lasts before its watchdog fails it `TIMEOUT` (and `llm-retry`
/// retries it).
pub(crate) const SIMULATED_WATCHDOG: Duration = Duration::from_secs(10);

/// The providers `rein chat` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ProviderKind {
    /// DeepSeek (`DEEPSEEK_API_KEY`, `DEEPSEEK_BASE_URL`, `DEEPSEEK_MODEL`).
    Deepseek,
    /// Anthropic's Messages API (`ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`, `ANTHROPIC_MODEL`).
    Anthropic,
    /// Any OpenAI-compatible server (`OPENAI_API_KEY`, `OPENAI_BASE_URL`, `OPENAI_MODEL`).
    Openai,
    /// The embedded simulated provider: no key, no network, seeded faults.
    Simulated,
}

impl ProviderKind {
    /// Every provider, in the order a default is chosen.
    const ALL: [ProviderKind; 4] = [
        ProviderKind::Deepseek,
        ProviderKind::Anthropic,
        ProviderKind::Openai,
        ProviderKind::Simulated,
    ];

    fn preset(self) -> Option<Preset> {
        match self {
            ProviderKind::Deepseek => Some(Preset::DEEPSEEK),
            ProviderKind::Openai => Some(Preset::OPENAI),
            ProviderKind::Anthropic | ProviderKind::Simulated => None,
        }
    }

    pub(crate) fn flag(self) -> &'static str {
        match self {
            ProviderKind::Deepseek => "deepseek",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Openai => "openai",
            ProviderKind::Simulated => "simulated",
        }
    }

    /// The variables that configure it by their presence (what [`choose`] looks for).
    fn configured_by(self) -> Vec<String> {
        match self {
            ProviderKind::Deepseek => vec![Preset::DEEPSEEK.var("API_KEY")],
            ProviderKind::Anthropic => vec![anthropic_var("API_KEY")],
            ProviderKind::Openai => {
                vec![Preset::OPENAI.var("API_KEY"), Preset::OPENAI.var("BASE_URL")]
            }
            ProviderKind::Simulated => vec![],
        }
    }

    /// The highest temperature it takes, when lower than the runtime's (Anthropic: 1).
    pub(crate) fn max_temperature(self) -> Option<f64> {
        match self {
            ProviderKind::Anthropic => Some(1.0),
            _ => None,
        }
    }
}

impl ProviderKind {
    /// The variable of `suffix` (`API_KEY`, `BASE_URL`) that configures it (`None`: the
    /// simulated provider reads none).
    pub(crate) fn var(self, suffix: &str) -> Option<String> {
        match self {
            ProviderKind::Deepseek => Some(Preset::DEEPSEEK.var(suffix)),
            ProviderKind::Openai => Some(Preset::OPENAI.var(suffix)),
            ProviderKind::Anthropic => Some(anthropic_var(suffix)),
            ProviderKind::Simulated => None,
        }
    }
}

/// The Anthropic variable of `suffix` (`ANTHROPIC_API_KEY`).
fn anthropic_var(suffix: &str) -> String {
    format!("{}_{suffix}", rein_providers::anthropic::config::ENV_PREFIX)
}

/// The provider to use: `flag` when given, else the first of DeepSeek, Anthropic and the
/// generic OpenAI-compatible preset that `lookup` finds configured (a key; for the generic
/// preset, a key or a base URL: a keyless local server), else the simulated provider.
pub(crate) fn choose(
    flag: Option<ProviderKind>,
    lookup: &impl Fn(&str) -> Option<String>,
) -> ProviderKind {
    if let Some(kind) = flag {
        return kind;
    }
    ProviderKind::ALL
        .into_iter()
        .find(|kind| configured(*kind, lookup))
        .unwrap_or(ProviderKind::Simulated)
}

/// The real providers other than `chosen` that `lookup` finds configured, by the variable that
/// configures them (`ANTHROPIC_API_KEY`), in the order a default is chosen.
pub(crate) fn also_configured(
    chosen: ProviderKind,
    lookup: &impl Fn(&str) -> Option<String>,
) -> Vec<(ProviderKind, String)> {
    let set = |name: &String| lookup(name).is_some_and(|v| !v.trim().is_empty());
    ProviderKind::ALL
        .into_iter()
        .filter(|kind| *kind != chosen)
        .filter_map(|kind| kind.configured_by().into_iter().find(set).map(|var| (kind, var)))
        .collect()
}

fn configured(kind: ProviderKind, lookup: &impl Fn(&str) -> Option<String>) -> bool {
    kind.configured_by().iter().any(|name| lookup(name).is_some_and(|v| !v.trim().is_empty()))
}

/// The other way out of a missing key, for a preset that can go keyless (`""` otherwise).
fn keyless_hint(preset: Preset) -> String {
    match preset.keyless_base_url {
        true => format!("set {} to a local server that needs none", preset.var("BASE_URL")),
        false => String::new(),
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
    /// Anthropic's Messages API.
    Anthropic(AnthropicConfig),
    /// The simulated provider.
    Simulated(SimulatedConfig),
}

/// Anthropic's configuration from `lookup` (an invalid variable is an error naming it), and
/// whether its key is set.
fn anthropic_config(lookup: impl Fn(&str) -> Option<String>) -> Result<AnthropicConfig, String> {
    AnthropicConfig::from_lookup(lookup).map_err(|e| e.to_string())
}

/// Checks `wanted` against the environment: the configuration to build, or an error for the
/// person (naming the flag or variable; never quoting a key). `seed` is the simulated
/// provider's seed when `--seed` is not given.
pub(crate) fn plan(
    wanted: &Wanted,
    seed: u64,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Plan, String> {
    if let Some(model) = &wanted.model
        && model.trim().is_empty()
    {
        return Err("--model: must not be empty".to_owned());
    }
    if wanted.kind == ProviderKind::Anthropic {
        if wanted.seed.is_some() {
            return Err(
                "--seed: applies to the simulated provider only (the provider is anthropic)"
                    .to_owned(),
            );
        }
        let config = anthropic_config(lookup)?;
        if !config.has_api_key() {
            return Err(format!(
                "--provider anthropic: {} is not set (without a key, use --provider simulated)",
                anthropic_var("API_KEY")
            ));
        }
        return Ok(Plan::Anthropic(match &wanted.model {
            Some(model) => config.with_model(model.trim()),
            None => config,
        }));
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
    if !config.has_api_key() && !config.keyless() {
        let hint = keyless_hint(preset);
        let or = if hint.is_empty() { String::new() } else { format!(", or {hint}") };
        return Err(format!(
            "--provider {}: {} is not set (without a key, use --provider simulated{or})",
            wanted.kind.flag(),
            preset.var("API_KEY")
        ));
    }
    Ok(Plan::Real(match &wanted.model {
        Some(model) => config.with_model(model.trim()),
        None => config,
    }))
}

/// A `--fallback` route: which provider, which model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FallbackSpec {
    /// The provider.
    pub(crate) kind: ProviderKind,
    /// The model.
    pub(crate) model: String,
}

impl FallbackSpec {
    /// The route's name in the runtime and the log: `PROVIDER:MODEL`.
    pub(crate) fn route_name(&self) -> String {
        format!("{}:{}", self.kind.flag(), self.model)
    }
}

/// What `--fallback` accepts, for its errors.
const FALLBACK_SYNTAX: &str = "MODEL (another model of the provider), or PROVIDER:MODEL with PROVIDER deepseek, anthropic, \
     openai or simulated";

/// Reads one `--fallback` value: `PROVIDER:MODEL` when the prefix names a provider, else a
/// model of the `primary` provider.
pub(crate) fn parse_fallback(spec: &str, primary: ProviderKind) -> Result<FallbackSpec, String> {
    let spec = spec.trim();
    if spec.is_empty() {
        return Err(format!("--fallback: must not be empty: {FALLBACK_SYNTAX}"));
    }
    let prefixed = spec.split_once(':').and_then(|(prefix, model)| {
        let kind = ProviderKind::ALL.into_iter().find(|kind| kind.flag() == prefix);
        kind.map(|kind| (kind, model.trim()))
    });
    let (kind, model) = prefixed.unwrap_or((primary, spec));
    if model.is_empty() {
        return Err(format!("--fallback {spec}: the model is missing: {FALLBACK_SYNTAX}"));
    }
    Ok(FallbackSpec { kind, model: model.to_owned() })
}

/// Checks every `--fallback` against the environment, after the primary (`primary`, asking
/// `primary_model`): each route's configuration, or an error naming the flag and the value
/// (a missing key names its variable, never a key). `seed` is the chat's simulated seed.
pub(crate) fn plan_fallbacks(
    specs: &[String],
    primary: ProviderKind,
    primary_model: &str,
    seed: u64,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Vec<(FallbackSpec, Plan)>, String> {
    let mut planned: Vec<(FallbackSpec, Plan)> = Vec::with_capacity(specs.len());
    for (n, written) in specs.iter().enumerate() {
        let spec = parse_fallback(written, primary)?;
        let shown = written.trim();
        if spec.kind == primary && spec.model == primary_model {
            return Err(format!(
                "--fallback {shown}: is the primary route itself ({}, model {primary_model})",
                primary.flag()
            ));
        }
        if planned.iter().any(|(earlier, _)| *earlier == spec) {
            return Err(format!("--fallback {shown}: given twice"));
        }
        let plan = match spec.kind.preset() {
            None if spec.kind == ProviderKind::Anthropic => {
                let config =
                    anthropic_config(&lookup).map_err(|e| format!("--fallback {shown}: {e}"))?;
                if !config.has_api_key() {
                    let var = anthropic_var("API_KEY");
                    return Err(format!("--fallback {shown}: {var} is not set"));
                }
                Plan::Anthropic(config.with_model(spec.model.as_str()))
            }
            None => {
                let config = SimulatedConfig {
                    seed: seed.wrapping_add(n as u64 + 1),
                    idle_timeout: Some(SIMULATED_WATCHDOG),
                    per_session: false,
                    model: spec.model.clone(),
                    ..SimulatedConfig::default()
                };
                config.validate().map_err(|e| format!("--fallback {shown}: {e}"))?;
                Plan::Simulated(config)
            }
            Some(preset) => {
                let config = OpenAiConfig::from_lookup(preset, &lookup)
                    .map_err(|e| format!("--fallback {shown}: {e}"))?;
                if !config.has_api_key() && !config.keyless() {
                    let hint = keyless_hint(preset);
                    let or = if hint.is_empty() { String::new() } else { format!(" (or {hint})") };
                    return Err(format!(
                        "--fallback {shown}: {} is not set{or}",
                        preset.var("API_KEY")
                    ));
                }
                Plan::Real(config.with_model(spec.model.as_str()))
            }
        };
        planned.push((spec, plan));
    }
    Ok(planned)
}

impl Plan {
    /// The model the route asks.
    pub(crate) fn model(&self) -> &str {
        match self {
            Plan::Real(config) => config.model(),
            Plan::Anthropic(config) => config.model(),
            Plan::Simulated(config) => &config.model,
        }
    }
}

/// A route ready for the runtime.
pub(crate) struct Route {
    /// The route's name: the provider's `gen_ai.provider.name` (`deepseek`, `anthropic`,
    /// `openai`, `simulated`).
    pub(crate) name: String,
    /// The provider.
    pub(crate) kind: ProviderKind,
    /// The adapter.
    pub(crate) adapter: Arc<dyn Adapter>,
    /// The model asked.
    pub(crate) model: String,
    /// The simulated provider's seed.
    pub(crate) seed: Option<u64>,
    /// How the banner names it (`DeepSeek at https://api.deepseek.com`; a keyless route says so:
    /// `OpenAI at http://127.0.0.1:11434/v1 · no API key: no Authorization header`).
    pub(crate) label: String,
    /// Its dead-air watchdog: the silence after which an attempt fails `TIMEOUT`.
    pub(crate) watchdog: Option<Duration>,
}

/// How a banner names a real route: the provider, where (user information redacted), and whether
/// it goes without a key.
fn label(config: &OpenAiConfig) -> String {
    let mut label = format!("{} at {}", config.label(), config.base_url());
    if config.keyless() {
        label.push_str(" · no API key: no Authorization header");
    }
    label
}

/// Builds the adapter of `plan`.
pub(crate) fn build(plan: Plan) -> Result<Route, String> {
    match plan {
        Plan::Real(config) => {
            let name = config.name().to_owned();
            let kind = if name == Preset::DEEPSEEK.name {
                ProviderKind::Deepseek
            } else {
                ProviderKind::Openai
            };
            let model = config.model().to_owned();
            let label = label(&config);
            let watchdog = Some(config.idle_timeout());
            let adapter = OpenAiCompatible::new(config).map_err(|e| e.to_string())?;
            Ok(Route { name, kind, adapter: Arc::new(adapter), model, seed: None, label, watchdog })
        }
        Plan::Anthropic(config) => {
            let name = config.name().to_owned();
            let model = config.model().to_owned();
            let label = format!("{} at {}", config.label(), config.base_url());
            let watchdog = Some(config.idle_timeout());
            let adapter = Anthropic::new(config).map_err(|e| e.to_string())?;
            let kind = ProviderKind::Anthropic;
            Ok(Route { name, kind, adapter: Arc::new(adapter), model, seed: None, label, watchdog })
        }
        Plan::Simulated(config) => {
            let (seed, watchdog) = (config.seed, config.idle_timeout);
            let simulated = Simulated::new(config).map_err(|e| e.to_string())?;
            Ok(Route {
                name: rein_providers::simulated::NAME.to_owned(),
                kind: ProviderKind::Simulated,
                model: simulated.model().to_owned(),
                adapter: Arc::new(simulated),
                seed: Some(seed),
                label: "the simulated provider".to_owned(),
                watchdog,
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
    fn the_default_provider_follows_the_keys_that_are_set_named_services_first() {
        use ProviderKind::*;
        let local = ("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1");
        let claude = ("ANTHROPIC_API_KEY", "sk-ant-1");
        let cases: [(Option<ProviderKind>, Vars, ProviderKind); 15] = [
            (None, &[], Simulated),
            (None, &[("DEEPSEEK_API_KEY", "sk-1")], Deepseek),
            (None, &[("OPENAI_API_KEY", "sk-2")], Openai),
            (None, &[local], Openai),
            (None, &[("OPENAI_BASE_URL", " ")], Simulated),
            (None, &[local, ("DEEPSEEK_API_KEY", "sk-1")], Deepseek),
            (None, &[("DEEPSEEK_API_KEY", "sk-1"), ("OPENAI_API_KEY", "sk-2")], Deepseek),
            (None, &[("DEEPSEEK_API_KEY", "  "), ("DEEPSEEK_BASE_URL", "http://x")], Simulated),
            (None, &[claude], Anthropic),
            (None, &[claude, ("OPENAI_API_KEY", "sk-2")], Anthropic),
            (None, &[claude, local], Anthropic),
            (None, &[claude, ("DEEPSEEK_API_KEY", "sk-1")], Deepseek),
            (None, &[("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")], Simulated),
            (Some(Simulated), &[("DEEPSEEK_API_KEY", "sk-1")], Simulated),
            (Some(Openai), &[claude], Openai),
        ];
        for (flag, vars, want) in cases {
            assert_eq!(choose(flag, &env(vars)), want, "{flag:?} {vars:?}");
        }
    }

    #[test]
    fn the_providers_passed_over_are_named_by_the_variable_that_configures_them() {
        use ProviderKind::*;
        let all = [
            ("DEEPSEEK_API_KEY", "sk-1"),
            ("ANTHROPIC_API_KEY", "sk-ant"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:9"),
        ];
        let lookup = env(&all);
        let chosen = choose(None, &lookup);
        assert_eq!(chosen, Deepseek);
        assert_eq!(
            also_configured(chosen, &lookup),
            [(Anthropic, "ANTHROPIC_API_KEY".to_owned()), (Openai, "OPENAI_BASE_URL".to_owned())]
        );
        assert_eq!(also_configured(Openai, &lookup)[0], (Deepseek, "DEEPSEEK_API_KEY".to_owned()));
        assert!(also_configured(Anthropic, &env(&[("ANTHROPIC_API_KEY", "k")])).is_empty());
    }

    fn wanted(kind: ProviderKind, model: Option<&str>, seed: Option<u64>) -> Wanted {
        Wanted { kind, model: model.map(str::to_owned), seed }
    }

    #[test]
    fn refusals_name_the_flag_or_the_variable_and_never_the_key() {
        use ProviderKind::*;
        let key = ("DEEPSEEK_API_KEY", "sk-never-printed");
        let cases: [(Wanted, Vars, &str); 12] = [
            (
                wanted(Deepseek, None, None),
                &[],
                "--provider deepseek: DEEPSEEK_API_KEY is not set (without a key, use --provider simulated)",
            ),
            (
                wanted(Deepseek, None, None),
                &[("DEEPSEEK_BASE_URL", "http://127.0.0.1:9")],
                "--provider deepseek: DEEPSEEK_API_KEY is not set (without a key, use --provider simulated)",
            ),
            (
                wanted(Openai, None, None),
                &[key],
                "--provider openai: OPENAI_API_KEY is not set (without a key, use --provider \
                 simulated, or set OPENAI_BASE_URL to a local server that needs none)",
            ),
            (
                wanted(Openai, None, None),
                &[("OPENAI_BASE_URL", "http://me:never@127.0.0.1:9/v1\r\nX: y")],
                "OPENAI_BASE_URL: must not contain a control character (U+000D at byte 30)",
            ),
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
            (
                wanted(Anthropic, None, None),
                &[key, ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")],
                "--provider anthropic: ANTHROPIC_API_KEY is not set (without a key, use --provider simulated)",
            ),
            (
                wanted(Anthropic, None, Some(1)),
                &[("ANTHROPIC_API_KEY", "sk-ant-never")],
                "--seed: applies to the simulated provider only (the provider is anthropic)",
            ),
            (
                wanted(Anthropic, None, None),
                &[("ANTHROPIC_API_KEY", "sk-ant never")],
                "ANTHROPIC_API_KEY: must be printable ASCII",
            ),
            (
                wanted(Anthropic, None, None),
                &[
                    ("ANTHROPIC_API_KEY", "sk-ant-never"),
                    ("ANTHROPIC_BASE_URL", "api.anthropic.com"),
                ],
                "ANTHROPIC_BASE_URL: not a URL",
            ),
        ];
        for (wanted, vars, expected) in cases {
            let error = plan(&wanted, 0, env(vars)).unwrap_err();
            assert!(error.starts_with(expected), "{error}");
            assert!(!error.contains("never"), "{error}");
        }
    }

    #[test]
    fn a_fallback_is_a_model_of_the_provider_or_of_the_provider_it_names() {
        use ProviderKind::*;
        let spec = |kind, model: &str| Ok(FallbackSpec { kind, model: model.to_owned() });
        let cases: [(&str, ProviderKind, Result<FallbackSpec, String>); 9] = [
            ("deepseek-reasoner", Deepseek, spec(Deepseek, "deepseek-reasoner")),
            ("anthropic:claude-sonnet-4-5", Openai, spec(Anthropic, "claude-sonnet-4-5")),
            ("claude-opus-4-1", Anthropic, spec(Anthropic, "claude-opus-4-1")),
            ("openai:gpt-4o-mini", Deepseek, spec(Openai, "gpt-4o-mini")),
            (" simulated:sim-2 ", Openai, spec(Simulated, "sim-2")),
            ("llama3:8b", Openai, spec(Openai, "llama3:8b")),
            ("openai:llama3:8b", Deepseek, spec(Openai, "llama3:8b")),
            (
                "  ",
                Deepseek,
                Err("--fallback: must not be empty: MODEL (another model of the provider), or \
                     PROVIDER:MODEL with PROVIDER deepseek, anthropic, openai or simulated"
                    .to_owned()),
            ),
            (
                "openai:",
                Deepseek,
                Err("--fallback openai:: the model is missing: MODEL (another model of the \
                     provider), or PROVIDER:MODEL with PROVIDER deepseek, anthropic, openai or simulated"
                    .to_owned()),
            ),
        ];
        for (written, primary, expected) in cases {
            assert_eq!(parse_fallback(written, primary), expected, "{written:?}");
        }
        let named = parse_fallback("openai:gpt-4o-mini", Deepseek).unwrap();
        assert_eq!(named.route_name(), "openai:gpt-4o-mini");
    }

    #[test]
    fn fallbacks_are_planned_each_with_its_own_variables_and_refusals_name_the_flag() {
        let specs = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let vars = [
            ("DEEPSEEK_API_KEY", "sk-never-printed"),
            ("OPENAI_API_KEY", "sk-other-never-printed"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
        ];
        let planned = plan_fallbacks(
            &specs(&["deepseek-reasoner", "openai:local", "simulated:sim-2"]),
            ProviderKind::Deepseek,
            "deepseek-chat",
            41,
            env(&vars),
        )
        .unwrap();
        let shown: Vec<(String, &str)> =
            planned.iter().map(|(spec, plan)| (spec.route_name(), plan.model())).collect();
        assert_eq!(
            shown,
            [
                ("deepseek:deepseek-reasoner".to_owned(), "deepseek-reasoner"),
                ("openai:local".to_owned(), "local"),
                ("simulated:sim-2".to_owned(), "sim-2"),
            ]
        );
        let Plan::Real(openai) = &planned[1].1 else { panic!("real") };
        assert_eq!(openai.base_url(), "http://127.0.0.1:9/v1");
        let Plan::Simulated(simulated) = &planned[2].1 else { panic!("simulated") };
        assert_eq!(simulated.seed, 44, "the seed plus its place: not the primary's faults");

        let anthropic = plan_fallbacks(
            &specs(&["anthropic:claude-sonnet-4-5"]),
            ProviderKind::Openai,
            "gpt-4o-mini",
            0,
            env(&[
                ("ANTHROPIC_API_KEY", "sk-ant-never"),
                ("ANTHROPIC_BASE_URL", "http://127.0.0.1:7"),
            ]),
        )
        .unwrap();
        let Plan::Anthropic(config) = &anthropic[0].1 else { panic!("anthropic") };
        assert_eq!(
            (config.model(), config.base_url()),
            ("claude-sonnet-4-5", "http://127.0.0.1:7")
        );
        assert_eq!(anthropic[0].0.route_name(), "anthropic:claude-sonnet-4-5");

        let refusals: [(&[&str], Vars, &str); 6] = [
            (
                &["anthropic:claude-x"],
                &[("DEEPSEEK_API_KEY", "sk-never")],
                "--fallback anthropic:claude-x: ANTHROPIC_API_KEY is not set",
            ),
            (
                &["anthropic:claude-x"],
                &[("ANTHROPIC_API_KEY", "sk-never"), ("ANTHROPIC_BASE_URL", "ftp://x")],
                "--fallback anthropic:claude-x: ANTHROPIC_BASE_URL: must be an http(s) URL",
            ),
            (
                &["openai:gpt"],
                &[("DEEPSEEK_API_KEY", "sk-never")],
                "--fallback openai:gpt: OPENAI_API_KEY is not set (or set OPENAI_BASE_URL to a \
                 local server that needs none)",
            ),
            (
                &["deepseek-chat"],
                &vars,
                "--fallback deepseek-chat: is the primary route itself (deepseek, model deepseek-chat)",
            ),
            (&["r1", " r1"], &vars, "--fallback r1: given twice"),
            (
                &["openai:gpt"],
                &[("OPENAI_API_KEY", "sk-never"), ("OPENAI_BASE_URL", "nope")],
                "--fallback openai:gpt: OPENAI_BASE_URL: not a URL",
            ),
        ];
        for (list, vars, expected) in refusals {
            let error =
                plan_fallbacks(&specs(list), ProviderKind::Deepseek, "deepseek-chat", 0, env(vars))
                    .unwrap_err();
            assert!(error.starts_with(expected), "{error}");
            assert!(!error.contains("never"), "{error}");
        }
    }

    #[test]
    fn a_base_url_without_a_key_is_a_keyless_route_its_label_says_so_and_hides_the_password() {
        let local = [("OPENAI_BASE_URL", "http://me:never@127.0.0.1:11434/v1")];
        let Plan::Real(config) =
            plan(&wanted(ProviderKind::Openai, None, None), 0, env(&local)).unwrap()
        else {
            panic!("real")
        };
        assert!(config.keyless() && !config.has_api_key());
        assert_eq!(
            label(&config),
            "OpenAI at http://[redacted]@127.0.0.1:11434/v1 · no API key: no Authorization header"
        );
        let planned = plan_fallbacks(
            &["openai:llama3".to_owned()],
            ProviderKind::Deepseek,
            "deepseek-chat",
            0,
            env(&local),
        )
        .unwrap();
        let Plan::Real(fallback) = &planned[0].1 else { panic!("real") };
        assert!(fallback.keyless());
        let keyed = [local[0], ("OPENAI_API_KEY", "sk-never")];
        let Plan::Real(config) =
            plan(&wanted(ProviderKind::Openai, None, None), 0, env(&keyed)).unwrap()
        else {
            panic!("real")
        };
        assert_eq!(label(&config), "OpenAI at http://[redacted]@127.0.0.1:11434/v1");
    }

    #[test]
    fn an_anthropic_route_takes_its_variables_and_the_model_flag() {
        let vars = [("ANTHROPIC_API_KEY", "sk-ant-1"), ("ANTHROPIC_MODEL", "claude-sonnet-4-5")];
        let Plan::Anthropic(config) =
            plan(&wanted(ProviderKind::Anthropic, None, None), 0, env(&vars)).unwrap()
        else {
            panic!("anthropic")
        };
        assert_eq!(
            (config.model(), config.base_url()),
            ("claude-sonnet-4-5", "https://api.anthropic.com")
        );
        let Plan::Anthropic(config) =
            plan(&wanted(ProviderKind::Anthropic, Some("claude-opus-4-1"), None), 0, env(&vars))
                .unwrap()
        else {
            panic!("anthropic")
        };
        assert_eq!(config.model(), "claude-opus-4-1", "--model wins over ANTHROPIC_MODEL");
        let route = build(Plan::Anthropic(config)).unwrap();
        assert_eq!(
            (route.name.as_str(), route.kind, route.label.as_str()),
            ("anthropic", ProviderKind::Anthropic, "Anthropic at https://api.anthropic.com")
        );
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
