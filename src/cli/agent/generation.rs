//! The generation flags of `rein chat`: `--system TEXT`, `--temperature T`, `--max-tokens N`,
//! applied to every route (the primary and each `--fallback`), so a turn that moves keeps its
//! instructions.
//!
//! A pure check ([`settings`]) of the flags against the routes they apply to: every refusal
//! names the flag (exit 2, nothing written). A value clap cannot read as a number is clap's
//! refusal, which names the flag too. The range is the runtime's (`0..=2` for the temperature,
//! at least 1 token), and a route's provider may narrow it: Anthropic takes temperatures from 0
//! to 1, so `--temperature 1.5` with an Anthropic route (primary or fallback) is refused before
//! any request rather than failing that route's turns `INVALID_REQUEST`.

use rein_runtime::provider::{Generation, GenerationError};

use super::provider::Route;

/// The generation flags.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct GenerationArgs {
    /// A system prompt sent with every request (not part of the session's history or its log).
    #[arg(long, value_name = "TEXT")]
    pub(crate) system: Option<String>,
    /// The sampling temperature, 0 to 2 (Anthropic: 0 to 1); default: the provider's.
    #[arg(long, value_name = "T", allow_negative_numbers = true)]
    pub(crate) temperature: Option<f64>,
    /// The most tokens the model may write in one answer, at least 1; default: the provider's
    /// (Anthropic, which requires one: 4096).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub(crate) max_tokens: Option<u32>,
}

/// The settings the flags ask for, checked against `routes`; or the refusal, naming the flag.
pub(crate) fn settings<'a>(
    args: &GenerationArgs,
    routes: impl IntoIterator<Item = &'a Route>,
) -> Result<Generation, String> {
    let flag = |flag: &str, e: GenerationError| format!("{flag}: {}", e.reason);
    let mut generation = Generation::new();
    if let Some(system) = &args.system {
        generation =
            generation.with_system_prompt(system.as_str()).map_err(|e| flag("--system", e))?;
    }
    if let Some(temperature) = args.temperature {
        generation =
            generation.with_temperature(temperature).map_err(|e| flag("--temperature", e))?;
        for route in routes {
            if let Some(max) = route.kind.max_temperature().filter(|max| temperature > *max) {
                return Err(format!(
                    "--temperature: route {} takes 0 to {max}, got {temperature}",
                    route.name
                ));
            }
        }
    }
    if let Some(tokens) = args.max_tokens {
        generation = generation.with_max_tokens(tokens).map_err(|e| flag("--max-tokens", e))?;
    }
    Ok(generation)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rein_providers::{Simulated, SimulatedConfig};

    use super::super::provider::ProviderKind;
    use super::*;

    fn route(name: &str, kind: ProviderKind) -> Route {
        Route {
            name: name.to_owned(),
            kind,
            adapter: Arc::new(Simulated::new(SimulatedConfig::default()).unwrap()),
            model: "m".to_owned(),
            seed: None,
            label: String::new(),
            watchdog: None,
        }
    }

    fn args(
        system: Option<&str>,
        temperature: Option<f64>,
        max_tokens: Option<u32>,
    ) -> GenerationArgs {
        GenerationArgs { system: system.map(str::to_owned), temperature, max_tokens }
    }

    #[test]
    fn the_flags_become_settings_and_every_refusal_names_its_flag() {
        let openai = [route("openai", ProviderKind::Openai)];
        let mixed = [
            route("openai", ProviderKind::Openai),
            route("anthropic:claude-x", ProviderKind::Anthropic),
        ];
        let ok = settings(&args(Some("Be brief."), Some(1.5), Some(200)), &openai).unwrap();
        assert_eq!(
            (ok.system_prompt(), ok.temperature(), ok.max_tokens()),
            (Some("Be brief."), Some(1.5), Some(200))
        );
        assert!(settings(&args(None, None, None), &mixed).unwrap().is_empty());
        assert_eq!(
            settings(&args(None, Some(1.0), None), &mixed).unwrap().temperature(),
            Some(1.0)
        );
        let refusals: [(GenerationArgs, &[Route], &str); 6] = [
            (
                args(Some("  "), None, None),
                &openai,
                "--system: must not be empty (leave it unset for no system prompt)",
            ),
            (
                args(None, Some(2.5), None),
                &openai,
                "--temperature: must be a number from 0 to 2, got 2.5",
            ),
            (
                args(None, Some(-1.0), None),
                &openai,
                "--temperature: must be a number from 0 to 2, got -1",
            ),
            (
                args(None, Some(f64::NAN), None),
                &openai,
                "--temperature: must be a number from 0 to 2, got NaN",
            ),
            (
                args(None, Some(1.5), None),
                &mixed,
                "--temperature: route anthropic:claude-x takes 0 to 1, got 1.5",
            ),
            (args(None, None, Some(0)), &openai, "--max-tokens: must be at least 1"),
        ];
        for (flags, routes, expected) in refusals {
            assert_eq!(settings(&flags, routes).unwrap_err(), expected, "{flags:?}");
        }
    }
}
