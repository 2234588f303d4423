//! [`Generation`]: what a request asks of the model besides the history — a system prompt, a
//! sampling temperature, a limit on the tokens it may write.
//!
//! Set on a route ([`Route::generation`](crate::runtime::Route::generation)) and on a prompt
//! ([`Prompt::generation`](crate::session::Prompt::generation)); each attempt's [`Request`]
//! carries the two merged, field by field, the prompt's winning ([`Generation::or`]). Every
//! field is optional: unset, the adapter sends nothing for it (the provider's default), except
//! where a provider requires a value (Anthropic's `max_tokens`, which its adapter defaults).
//!
//! # Why valid by construction
//!
//! The settings travel into every attempt of every step, on every route a turn is switched to. A
//! temperature of `NaN` or a limit of 0 tokens is a mistake of the program, not of a provider;
//! caught at the setter, it names its field there, instead of ending a turn with a provider's
//! `INVALID_REQUEST` (or, worse, being retried). So the fields are private and the setters check
//! them; deserializing checks them too.
//!
//! # Why not in the log
//!
//! The system prompt is an instruction to the model, not part of the conversation: the
//! model-visible history (what the log folds) holds only what was said. The settings are the
//! program's, like the route's model and retry policy, and are not recorded either (a system
//! prompt holding a secret of the program's stays out of every view of the log). So a prompt's
//! settings hold for its turn, in this process: a manual retry (`Session::retry`, which has no
//! prompt) runs on the route's alone. Settings that must hold across retries and restarts
//! belong on the route.
//!
//! [`Request`]: super::Request

use serde::{Deserialize, Serialize};

/// The highest temperature accepted: the widest range a known provider takes (OpenAI's
/// `0..=2`; Anthropic takes `0..=1` and refuses more itself).
pub const MAX_TEMPERATURE: f64 = 2.0;

/// A request's generation settings; every field optional. See the module docs.
///
/// ```
/// use rein_runtime::provider::Generation;
///
/// let route = Generation::new().with_system_prompt("Answer in French.")?.with_max_tokens(512)?;
/// let prompt = Generation::new().with_temperature(0.2)?;
/// let merged = prompt.or(&route);
/// assert_eq!(merged.system_prompt(), Some("Answer in French."));
/// assert_eq!((merged.temperature(), merged.max_tokens()), (Some(0.2), Some(512)));
/// assert!(Generation::new().with_temperature(f64::NAN).is_err());
/// # Ok::<(), rein_runtime::provider::GenerationError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", try_from = "Unchecked")]
pub struct Generation {
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
}

/// A setting refused: the field and why (never a secret: settings hold none).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct GenerationError {
    /// The field (`system`, `temperature`, `maxTokens`).
    pub field: &'static str,
    /// What is wrong with it.
    pub reason: String,
}

impl Generation {
    /// No settings: every field is the provider's default.
    pub fn new() -> Self {
        Self::default()
    }

    /// The same settings with a system prompt: an instruction sent ahead of the history (a
    /// `system` message for OpenAI-compatible servers, the top-level `system` for Anthropic).
    /// A prompt that is empty or only whitespace is refused.
    pub fn with_system_prompt(
        mut self,
        prompt: impl Into<String>,
    ) -> Result<Self, GenerationError> {
        let prompt = prompt.into();
        if prompt.trim().is_empty() {
            return Err(GenerationError {
                field: "system",
                reason: "must not be empty (leave it unset for no system prompt)".to_owned(),
            });
        }
        self.system = Some(prompt);
        Ok(self)
    }

    /// The same settings with a sampling temperature: a finite number from 0 to
    /// [`MAX_TEMPERATURE`].
    pub fn with_temperature(mut self, temperature: f64) -> Result<Self, GenerationError> {
        if !(temperature.is_finite() && (0.0..=MAX_TEMPERATURE).contains(&temperature)) {
            return Err(GenerationError {
                field: "temperature",
                reason: format!("must be a number from 0 to {MAX_TEMPERATURE}, got {temperature}"),
            });
        }
        self.temperature = Some(temperature);
        Ok(self)
    }

    /// The same settings with a limit on the tokens the model may write in one answer: at
    /// least 1.
    pub fn with_max_tokens(mut self, tokens: u32) -> Result<Self, GenerationError> {
        if tokens == 0 {
            return Err(GenerationError {
                field: "maxTokens",
                reason: "must be at least 1".to_owned(),
            });
        }
        self.max_tokens = Some(tokens);
        Ok(self)
    }

    /// These settings over `defaults`: each field set here wins, each unset one is the
    /// default's.
    #[must_use]
    pub fn or(&self, defaults: &Generation) -> Generation {
        Generation {
            system: self.system.clone().or_else(|| defaults.system.clone()),
            temperature: self.temperature.or(defaults.temperature),
            max_tokens: self.max_tokens.or(defaults.max_tokens),
        }
    }

    /// The system prompt, if set.
    pub fn system_prompt(&self) -> Option<&str> {
        self.system.as_deref()
    }

    /// The temperature, if set.
    pub fn temperature(&self) -> Option<f64> {
        self.temperature
    }

    /// The output token limit, if set.
    pub fn max_tokens(&self) -> Option<u32> {
        self.max_tokens
    }

    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        *self == Generation::default()
    }
}

/// The wire form, checked into a [`Generation`].
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Unchecked {
    #[serde(default)]
    system: Option<String>,
    #[serde(default)]
    temperature: Option<f64>,
    #[serde(default)]
    max_tokens: Option<u32>,
}

impl TryFrom<Unchecked> for Generation {
    type Error = GenerationError;

    fn try_from(raw: Unchecked) -> Result<Self, GenerationError> {
        let mut generation = Generation::new();
        if let Some(system) = raw.system {
            generation = generation.with_system_prompt(system)?;
        }
        if let Some(temperature) = raw.temperature {
            generation = generation.with_temperature(temperature)?;
        }
        if let Some(tokens) = raw.max_tokens {
            generation = generation.with_max_tokens(tokens)?;
        }
        Ok(generation)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn setters_check_their_field_and_name_it() {
        let new = Generation::new;
        let refused = [
            (
                new().with_system_prompt(""),
                "system: must not be empty (leave it unset for no system prompt)",
            ),
            (
                new().with_system_prompt(" \n\t"),
                "system: must not be empty (leave it unset for no system prompt)",
            ),
            (new().with_temperature(-0.1), "temperature: must be a number from 0 to 2, got -0.1"),
            (new().with_temperature(2.5), "temperature: must be a number from 0 to 2, got 2.5"),
            (
                new().with_temperature(f64::NAN),
                "temperature: must be a number from 0 to 2, got NaN",
            ),
            (
                new().with_temperature(f64::INFINITY),
                "temperature: must be a number from 0 to 2, got inf",
            ),
            (new().with_max_tokens(0), "maxTokens: must be at least 1"),
        ];
        for (outcome, expected) in refused {
            assert_eq!(outcome.unwrap_err().to_string(), expected);
        }
        let accepted =
            new().with_system_prompt(" Be brief. ").unwrap().with_temperature(0.0).unwrap();
        let accepted = accepted.with_temperature(2.0).unwrap().with_max_tokens(1).unwrap();
        assert_eq!(accepted.system_prompt(), Some(" Be brief. "), "kept as written");
        assert_eq!((accepted.temperature(), accepted.max_tokens()), (Some(2.0), Some(1)));
    }

    #[test]
    fn the_prompts_fields_win_field_by_field() {
        let route =
            Generation::new().with_system_prompt("route").unwrap().with_max_tokens(100).unwrap();
        let cases = [
            (Generation::new(), Some("route"), None, Some(100)),
            (Generation::new().with_temperature(0.5).unwrap(), Some("route"), Some(0.5), Some(100)),
            (
                Generation::new().with_system_prompt("prompt").unwrap(),
                Some("prompt"),
                None,
                Some(100),
            ),
            (Generation::new().with_max_tokens(7).unwrap(), Some("route"), None, Some(7)),
        ];
        for (prompt, system, temperature, tokens) in cases {
            let merged = prompt.or(&route);
            assert_eq!(
                (merged.system_prompt(), merged.temperature(), merged.max_tokens()),
                (system, temperature, tokens),
                "{prompt:?}"
            );
        }
        assert!(Generation::new().or(&Generation::new()).is_empty());
    }

    #[test]
    fn it_round_trips_and_deserializing_checks_it() {
        let full =
            Generation::new().with_system_prompt("s").unwrap().with_temperature(0.7).unwrap();
        let full = full.with_max_tokens(64).unwrap();
        let text = serde_json::to_value(&full).unwrap();
        assert_eq!(text, json!({"system": "s", "temperature": 0.7, "maxTokens": 64}));
        assert_eq!(serde_json::from_value::<Generation>(text).unwrap(), full);
        assert_eq!(serde_json::to_value(Generation::new()).unwrap(), json!({}));
        let refused = [
            (json!({"temperature": 9}), "temperature: must be a number from 0 to 2, got 9"),
            (json!({"maxTokens": 0}), "maxTokens: must be at least 1"),
            (json!({"system": ""}), "system: must not be empty"),
            (json!({"topP": 1}), "unknown field `topP`"),
        ];
        for (value, expected) in refused {
            let error = serde_json::from_value::<Generation>(value.clone()).unwrap_err();
            assert!(error.to_string().starts_with(expected), "{value}: {error}");
        }
    }
}
