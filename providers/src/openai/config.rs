//! An OpenAI-compatible route's configuration: [`Preset`]s and [`OpenAiConfig`], built in code or
//! read from the environment (through the reading [`crate::config`] shares).
//!
//! An unset API key is not an error here: the adapter answers every call `MISSING_CREDENTIAL` (a
//! typed failure no plugin retries), and a caller that wants another provider instead asks
//! [`OpenAiConfig::has_api_key`] first — unless the configuration is **keyless**
//! ([`OpenAiConfig::keyless`]): a base URL of its own on a preset that allows it (the generic
//! one, or [`OpenAiConfig::custom`]) and no key is a local server (Ollama, llama.cpp, vLLM), and
//! its requests go out with no `Authorization` header.
//!
//! The output token limit goes out as `max_completion_tokens` to OpenAI's own API (which refuses
//! `max_tokens` on its reasoning models) and as `max_tokens` everywhere else (DeepSeek and the
//! compatible servers, which read only that): [`MaxTokensField`], a pure function of the preset
//! and the base URL unless set.
//!
//! The base URL is a [`BaseUrl`]: checked, and printed with its user information redacted.

use std::fmt;
use std::time::Duration;

use crate::config::{
    BaseUrl, DEFAULT_CONNECT_TIMEOUT, DEFAULT_IDLE_TIMEOUT, ProviderConfigError, checked_key,
    read_env, var,
};
use crate::secret::ApiKey;

/// A known OpenAI-compatible service: its names, defaults and environment variables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    /// The OpenTelemetry `gen_ai.provider.name` (`deepseek`, `openai`).
    pub name: &'static str,
    /// How messages name it (`DeepSeek`).
    pub label: &'static str,
    /// The public base URL (the path before `/chat/completions`).
    pub base_url: &'static str,
    /// The default model.
    pub model: &'static str,
    /// The prefix of its variables: `<PREFIX>_API_KEY`, `<PREFIX>_BASE_URL`, `<PREFIX>_MODEL`.
    pub env_prefix: &'static str,
    /// Whether a base URL other than its own may need no key: with one and no key, requests go
    /// out without an `Authorization` header (a local server). The generic preset only: a named
    /// service always wants its key.
    pub keyless_base_url: bool,
    /// Whether its own base URL takes the output token limit as `max_completion_tokens` (OpenAI's
    /// API) rather than `max_tokens`. Any other base URL gets `max_tokens`.
    pub max_completion_tokens: bool,
}

impl Preset {
    /// DeepSeek's public API (`DEEPSEEK_API_KEY`, `DEEPSEEK_BASE_URL`, `DEEPSEEK_MODEL`).
    pub const DEEPSEEK: Preset = Preset {
        name: "deepseek",
        label: "DeepSeek",
        base_url: "https://api.deepseek.com",
        model: "deepseek-chat",
        env_prefix: "DEEPSEEK",
        keyless_base_url: false,
        max_completion_tokens: false,
    };

    /// The generic preset: OpenAI's API, or any compatible server through `OPENAI_BASE_URL`
    /// (`OPENAI_API_KEY`, `OPENAI_BASE_URL`, `OPENAI_MODEL`) — without a key when that server
    /// needs none.
    pub const OPENAI: Preset = Preset {
        name: "openai",
        label: "OpenAI",
        base_url: "https://api.openai.com/v1",
        model: "gpt-4o-mini",
        env_prefix: "OPENAI",
        keyless_base_url: true,
        max_completion_tokens: true,
    };

    /// The name of one of its variables (`suffix` is `API_KEY`, `BASE_URL` or `MODEL`).
    pub fn var(&self, suffix: &str) -> String {
        var(self.env_prefix, suffix)
    }
}

/// The request field the output token limit goes out in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTokensField {
    /// `max_tokens`: DeepSeek and the OpenAI-compatible servers.
    MaxTokens,
    /// `max_completion_tokens`: OpenAI's own API.
    MaxCompletionTokens,
}

impl MaxTokensField {
    /// The field's name in the request body.
    pub fn name(self) -> &'static str {
        match self {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        }
    }
}

/// The configuration of one OpenAI-compatible route. Its `Debug` redacts the key.
#[derive(Clone, PartialEq)]
pub struct OpenAiConfig {
    name: String,
    label: String,
    base_url: BaseUrl,
    model: String,
    api_key: Option<ApiKey>,
    /// The preset allows a base URL of its own without a key.
    keyless_base_url: bool,
    /// The base URL is not the preset's own.
    own_base_url: bool,
    /// The base URL that takes `max_completion_tokens` (the preset's own, when it does).
    completion_tokens_url: Option<&'static str>,
    /// Set in code: wins over the preset's rule.
    max_tokens_field: Option<MaxTokensField>,
    idle_timeout: Duration,
    connect_timeout: Duration,
    key_var: Option<String>,
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("name", &self.name)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| crate::secret::REDACTED))
            .field("keyless", &self.keyless())
            .field("idle_timeout", &self.idle_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("max_tokens_field", &self.max_tokens_field())
            .finish_non_exhaustive()
    }
}

impl OpenAiConfig {
    /// A preset's defaults, with no API key.
    pub fn preset(preset: Preset) -> Self {
        Self {
            name: preset.name.to_owned(),
            label: preset.label.to_owned(),
            base_url: BaseUrl::parse(preset.base_url, "base_url")
                .unwrap_or_else(|e| unreachable!("a preset's own base URL is valid: {e}")),
            model: preset.model.to_owned(),
            api_key: None,
            keyless_base_url: preset.keyless_base_url,
            own_base_url: false,
            completion_tokens_url: preset.max_completion_tokens.then_some(preset.base_url),
            max_tokens_field: None,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            key_var: Some(preset.var("API_KEY")),
        }
    }

    /// DeepSeek's defaults ([`Preset::DEEPSEEK`]), with no API key.
    pub fn deepseek() -> Self {
        Self::preset(Preset::DEEPSEEK)
    }

    /// OpenAI's defaults ([`Preset::OPENAI`]), with no API key.
    pub fn openai() -> Self {
        Self::preset(Preset::OPENAI)
    }

    /// Any OpenAI-compatible server: `name` is its `gen_ai.provider.name`, `label` how messages
    /// name it; `base_url` is the path before `/chat/completions`. Without a key
    /// ([`OpenAiConfig::with_api_key`]) it is keyless: no `Authorization` header.
    pub fn custom(
        name: impl Into<String>,
        label: impl Into<String>,
        base_url: &str,
        model: impl Into<String>,
    ) -> Result<Self, ProviderConfigError> {
        let mut config = Self::preset(Preset::OPENAI);
        config.name = name.into();
        config.label = label.into();
        config.base_url = BaseUrl::parse(base_url, "base_url")?;
        config.own_base_url = true;
        config.keyless_base_url = true;
        config.model = model.into();
        config.key_var = None;
        Ok(config)
    }

    /// A preset read from the process environment (see [`OpenAiConfig::from_lookup`]).
    pub fn from_env(preset: Preset) -> Result<Self, ProviderConfigError> {
        Self::from_lookup(preset, |name| std::env::var(name).ok())
    }

    /// A preset whose key, base URL and model come from `lookup` (an environment): an unset or
    /// empty variable keeps the preset's default (no key for the key). An invalid value is an
    /// error naming the variable; the key's value is never quoted. A base URL variable with no
    /// key on a preset that allows it ([`Preset::keyless_base_url`]) is keyless.
    pub fn from_lookup(
        preset: Preset,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ProviderConfigError> {
        let mut config = Self::preset(preset);
        let vars = read_env(preset.env_prefix, lookup)?;
        config.api_key = vars.api_key;
        if let Some(url) = vars.base_url {
            config.base_url = url;
            config.own_base_url = true;
        }
        if let Some(model) = vars.model {
            config.model = model;
        }
        Ok(config)
    }

    /// The same configuration with `key` (an empty key unsets it).
    pub fn with_api_key(mut self, key: impl Into<String>) -> Result<Self, ProviderConfigError> {
        self.api_key = checked_key(key, "api_key")?;
        Ok(self)
    }

    /// The same configuration with another base URL (`http` or `https`; keyless without a key
    /// on a preset that allows it).
    pub fn with_base_url(mut self, url: &str) -> Result<Self, ProviderConfigError> {
        self.base_url = BaseUrl::parse(url, "base_url")?;
        self.own_base_url = true;
        Ok(self)
    }

    /// The same configuration with another model.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// The same configuration with another dead-air watchdog ([`DEFAULT_IDLE_TIMEOUT`]).
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// The same configuration with another connect timeout ([`DEFAULT_CONNECT_TIMEOUT`]).
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The same configuration with the output token limit sent in `field`, whatever the preset
    /// and the base URL say.
    pub fn with_max_tokens_field(mut self, field: MaxTokensField) -> Self {
        self.max_tokens_field = Some(field);
        self
    }

    /// The `gen_ai.provider.name` (`deepseek`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How messages name the provider (`DeepSeek`).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The model a route on this provider should request.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The base URL as it prints: its user information, if any, reads `[redacted]`.
    pub fn base_url(&self) -> &str {
        self.base_url.shown()
    }

    /// The endpoint: the base URL (credentials included) followed by `/chat/completions`.
    pub(crate) fn endpoint(&self) -> String {
        self.base_url.endpoint("/chat/completions")
    }

    /// Whether a key is configured.
    pub fn has_api_key(&self) -> bool {
        self.api_key.is_some()
    }

    /// Whether requests go out with no `Authorization` header: no key, and a base URL of its
    /// own on a preset that allows it (a local server that needs none).
    pub fn keyless(&self) -> bool {
        self.api_key.is_none() && self.keyless_base_url && self.own_base_url
    }

    /// Every secret a server could echo back: the key and the base URL's password.
    pub(crate) fn secrets(&self) -> Vec<String> {
        let key = self.api_key.as_ref().map(|key| key.secret().to_owned());
        key.into_iter().chain(self.base_url.password()).collect()
    }

    /// The variable the key is read from, if the configuration came from a preset.
    pub fn key_var(&self) -> Option<&str> {
        self.key_var.as_deref()
    }

    pub(crate) fn api_key(&self) -> Option<&ApiKey> {
        self.api_key.as_ref()
    }

    /// The dead-air watchdog.
    pub fn idle_timeout(&self) -> Duration {
        self.idle_timeout
    }

    /// The connect timeout.
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// The field the output token limit goes out in: set in code, else `max_completion_tokens`
    /// when the base URL is the preset's own (written with or without a trailing slash) and the
    /// preset takes it there, else `max_tokens`.
    pub fn max_tokens_field(&self) -> MaxTokensField {
        let own = |url: &str| self.base_url.shown().trim_end_matches('/') == url;
        match self.max_tokens_field {
            Some(field) => field,
            None if self.completion_tokens_url.is_some_and(own) => {
                MaxTokensField::MaxCompletionTokens
            }
            None => MaxTokensField::MaxTokens,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// Environment variables as (name, value) pairs.
    type Vars<'a> = &'a [(&'a str, &'a str)];

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: HashMap<String, String> =
            vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        move |name| vars.get(name).cloned()
    }

    #[test]
    fn presets_read_their_own_variables_and_keep_defaults_for_unset_ones() {
        let cases: [(Preset, Vars, &str, &str, bool); 6] = [
            (
                Preset::DEEPSEEK,
                &[],
                "https://api.deepseek.com/chat/completions",
                "deepseek-chat",
                false,
            ),
            (
                Preset::DEEPSEEK,
                &[("DEEPSEEK_API_KEY", "sk-1"), ("DEEPSEEK_MODEL", "deepseek-reasoner")],
                "https://api.deepseek.com/chat/completions",
                "deepseek-reasoner",
                true,
            ),
            (
                Preset::DEEPSEEK,
                &[("DEEPSEEK_BASE_URL", "http://127.0.0.1:9/v1/"), ("OPENAI_API_KEY", "sk-2")],
                "http://127.0.0.1:9/v1/chat/completions",
                "deepseek-chat",
                false,
            ),
            (
                Preset::OPENAI,
                &[("OPENAI_API_KEY", "sk-2")],
                "https://api.openai.com/v1/chat/completions",
                "gpt-4o-mini",
                true,
            ),
            (
                Preset::OPENAI,
                &[("OPENAI_BASE_URL", "http://localhost:8000/v1"), ("OPENAI_MODEL", "qwen")],
                "http://localhost:8000/v1/chat/completions",
                "qwen",
                false,
            ),
            (
                Preset::OPENAI,
                &[("OPENAI_API_KEY", "  "), ("OPENAI_MODEL", "")],
                "https://api.openai.com/v1/chat/completions",
                "gpt-4o-mini",
                false,
            ),
        ];
        for (preset, vars, endpoint, model, keyed) in cases {
            let config = OpenAiConfig::from_lookup(preset, env(vars)).unwrap();
            assert_eq!(
                (config.endpoint().as_str(), config.model(), config.has_api_key()),
                (endpoint, model, keyed),
                "{vars:?}"
            );
        }
    }

    #[test]
    fn invalid_values_name_the_variable_and_never_quote_the_key() {
        let cases: [(&[(&str, &str)], &str); 6] = [
            (&[("DEEPSEEK_BASE_URL", "api.deepseek.com")], "DEEPSEEK_BASE_URL: not a URL"),
            (
                &[("DEEPSEEK_BASE_URL", "http://127.0.0.1/v1\n")],
                "DEEPSEEK_BASE_URL: must not contain a control character (U+000A at byte 19)",
            ),
            (
                &[("DEEPSEEK_BASE_URL", "ftp://me:secret@x")],
                "DEEPSEEK_BASE_URL: must be an http(s) URL, got \"ftp://[redacted]@x\"",
            ),
            (&[("DEEPSEEK_BASE_URL", "ftp://x")], "DEEPSEEK_BASE_URL: must be an http(s) URL"),
            (&[("DEEPSEEK_BASE_URL", "http://x/?a=1")], "DEEPSEEK_BASE_URL: must have no query"),
            (&[("DEEPSEEK_API_KEY", "sk secret")], "DEEPSEEK_API_KEY: must be printable ASCII"),
        ];
        for (vars, expected) in cases {
            let err = OpenAiConfig::from_lookup(Preset::DEEPSEEK, env(vars)).unwrap_err();
            let text = err.to_string();
            assert!(text.starts_with(expected), "{text}");
            assert!(!text.contains("secret"), "{text}");
        }
    }

    #[test]
    fn a_base_url_of_its_own_without_a_key_is_keyless_on_the_generic_preset_only() {
        let local = ("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1");
        let cases: [(Preset, Vars, bool, bool); 6] = [
            (Preset::OPENAI, &[local], false, true),
            (Preset::OPENAI, &[local, ("OPENAI_API_KEY", "sk-1")], true, false),
            (Preset::OPENAI, &[], false, false),
            (Preset::OPENAI, &[("OPENAI_BASE_URL", " ")], false, false),
            (Preset::DEEPSEEK, &[("DEEPSEEK_BASE_URL", "http://127.0.0.1:9")], false, false),
            (Preset::DEEPSEEK, &[local], false, false),
        ];
        for (preset, vars, keyed, keyless) in cases {
            let config = OpenAiConfig::from_lookup(preset, env(vars)).unwrap();
            assert_eq!((config.has_api_key(), config.keyless()), (keyed, keyless), "{vars:?}");
        }
        let custom = OpenAiConfig::custom("vllm", "vLLM", "http://127.0.0.1:8000/v1", "m").unwrap();
        assert!(custom.keyless());
        assert!(!custom.with_api_key("sk-2").unwrap().keyless());
        assert!(OpenAiConfig::openai().with_base_url("http://127.0.0.1:1").unwrap().keyless());
        assert!(!OpenAiConfig::deepseek().with_base_url("http://127.0.0.1:1").unwrap().keyless());
    }

    #[test]
    fn the_base_url_prints_without_its_user_information() {
        let vars = [("OPENAI_BASE_URL", "http://me:hunter2@127.0.0.1:8000/v1")];
        let config = OpenAiConfig::from_lookup(Preset::OPENAI, env(&vars)).unwrap();
        assert_eq!(config.base_url(), "http://[redacted]@127.0.0.1:8000/v1");
        assert_eq!(config.endpoint(), "http://me:hunter2@127.0.0.1:8000/v1/chat/completions");
        assert!(!format!("{config:?}").contains("hunter2"));
        assert_eq!(config.secrets(), ["hunter2"]);
    }

    #[test]
    fn debug_redacts_the_key() {
        let config = OpenAiConfig::deepseek().with_api_key("sk-very-secret").unwrap();
        let debug = format!("{config:?}");
        assert!(!debug.contains("sk-very-secret"), "{debug}");
        assert!(debug.contains("[redacted]"), "{debug}");
    }

    #[test]
    fn code_built_configurations_validate_too() {
        assert!(OpenAiConfig::deepseek().with_base_url("nope").is_err());
        assert!(OpenAiConfig::deepseek().with_api_key("a b").is_err());
        assert!(!OpenAiConfig::deepseek().with_api_key("").unwrap().has_api_key());
        let custom = OpenAiConfig::custom("vllm", "vLLM", "http://127.0.0.1:8000/v1", "m").unwrap();
        assert_eq!((custom.name(), custom.label(), custom.key_var()), ("vllm", "vLLM", None));
        assert_eq!(OpenAiConfig::openai().key_var(), Some("OPENAI_API_KEY"));
    }

    #[test]
    fn the_token_limit_field_is_max_completion_tokens_on_openais_own_api_only() {
        use MaxTokensField::*;
        let local = ("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1");
        let cases: [(Preset, Vars, MaxTokensField); 6] = [
            (Preset::OPENAI, &[("OPENAI_API_KEY", "sk-1")], MaxCompletionTokens),
            (
                Preset::OPENAI,
                &[("OPENAI_BASE_URL", "https://api.openai.com/v1/")],
                MaxCompletionTokens,
            ),
            (Preset::OPENAI, &[local], MaxTokens),
            (Preset::OPENAI, &[local, ("OPENAI_API_KEY", "sk-1")], MaxTokens),
            (Preset::DEEPSEEK, &[], MaxTokens),
            (Preset::DEEPSEEK, &[("DEEPSEEK_BASE_URL", "http://127.0.0.1:9")], MaxTokens),
        ];
        for (preset, vars, field) in cases {
            let config = OpenAiConfig::from_lookup(preset, env(vars)).unwrap();
            assert_eq!(config.max_tokens_field(), field, "{vars:?}");
        }
        let custom = OpenAiConfig::custom("vllm", "vLLM", "http://127.0.0.1:8000/v1", "m").unwrap();
        assert_eq!(custom.max_tokens_field(), MaxTokens);
        let forced = custom.with_max_tokens_field(MaxCompletionTokens);
        assert_eq!(forced.max_tokens_field(), MaxCompletionTokens, "set in code, it wins");
        assert_eq!(
            (MaxTokens.name(), MaxCompletionTokens.name()),
            ("max_tokens", "max_completion_tokens")
        );
    }
}
