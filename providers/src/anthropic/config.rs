//! An Anthropic route's configuration: [`AnthropicConfig`], built in code or read from the
//! environment (`ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`, `ANTHROPIC_MODEL`, through the shared
//! reading of `crate::config`, so a bad value names its variable the same way).
//!
//! An unset key is not an error here: the adapter answers every call `MISSING_CREDENTIAL`
//! without sending anything (a caller that wants another provider asks
//! [`AnthropicConfig::has_api_key`] first). Anthropic always wants its key, so there is no
//! keyless mode: a base URL of its own without a key is still `MISSING_CREDENTIAL`.

use std::fmt;
use std::time::Duration;

use crate::config::{
    BaseUrl, DEFAULT_CONNECT_TIMEOUT, DEFAULT_IDLE_TIMEOUT, ProviderConfigError, checked_key,
    read_env, var,
};
use crate::secret::ApiKey;

/// The `gen_ai.provider.name` of the adapter (and the name `rein chat` gives its route).
pub const NAME: &str = "anthropic";

/// How messages name the provider.
pub const LABEL: &str = "Anthropic";

/// The public base URL (the path before `/v1/messages`), as the official SDKs have it.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// The default model: the alias of Anthropic's fastest, cheapest current model (the role
/// `deepseek-chat` and `gpt-4o-mini` play for the other presets).
pub const DEFAULT_MODEL: &str = "claude-haiku-4-5";

/// The prefix of its variables: `ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`, `ANTHROPIC_MODEL`.
pub const ENV_PREFIX: &str = "ANTHROPIC";

/// The `anthropic-version` header every request carries (the API's one stable version).
pub const API_VERSION: &str = "2023-06-01";

/// The output token limit sent when a request sets none: the API requires `max_tokens`, and
/// 4096 is a limit every Claude model accepts (the smallest maximum among them), long enough for
/// a chat answer or a tool call.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The configuration of one Anthropic route. Its `Debug` redacts the key.
#[derive(Clone, PartialEq)]
pub struct AnthropicConfig {
    base_url: BaseUrl,
    model: String,
    api_key: Option<ApiKey>,
    idle_timeout: Duration,
    connect_timeout: Duration,
    /// Read from the environment: the variable a missing key names.
    key_var: Option<String>,
}

impl fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| crate::secret::REDACTED))
            .field("idle_timeout", &self.idle_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .finish_non_exhaustive()
    }
}

impl Default for AnthropicConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl AnthropicConfig {
    /// Anthropic's defaults, with no API key.
    pub fn new() -> Self {
        Self {
            base_url: BaseUrl::parse(DEFAULT_BASE_URL, "base_url")
                .unwrap_or_else(|e| unreachable!("the default base URL is valid: {e}")),
            model: DEFAULT_MODEL.to_owned(),
            api_key: None,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            key_var: Some(var(ENV_PREFIX, "API_KEY")),
        }
    }

    /// The configuration read from the process environment (see
    /// [`AnthropicConfig::from_lookup`]).
    pub fn from_env() -> Result<Self, ProviderConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// The configuration whose key, base URL and model come from `lookup` (an environment): an
    /// unset or empty variable keeps the default (no key for the key); an invalid value is an
    /// error naming the variable, the key's value never quoted.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ProviderConfigError> {
        let vars = read_env(ENV_PREFIX, lookup)?;
        let mut config = Self::new();
        config.api_key = vars.api_key;
        if let Some(url) = vars.base_url {
            config.base_url = url;
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

    /// The same configuration with another base URL (`http` or `https`, the path before
    /// `/v1/messages`).
    pub fn with_base_url(mut self, url: &str) -> Result<Self, ProviderConfigError> {
        self.base_url = BaseUrl::parse(url, "base_url")?;
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

    /// The `gen_ai.provider.name`: `anthropic`.
    pub fn name(&self) -> &str {
        NAME
    }

    /// How messages name the provider: `Anthropic`.
    pub fn label(&self) -> &str {
        LABEL
    }

    /// The model a route on this provider should request.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The base URL as it prints: its user information, if any, reads `[redacted]`.
    pub fn base_url(&self) -> &str {
        self.base_url.shown()
    }

    /// The endpoint: the base URL (credentials included) followed by `/v1/messages`.
    pub(crate) fn endpoint(&self) -> String {
        self.base_url.endpoint("/v1/messages")
    }

    /// Whether a key is configured.
    pub fn has_api_key(&self) -> bool {
        self.api_key.is_some()
    }

    /// The variable the key is read from (`ANTHROPIC_API_KEY`).
    pub fn key_var(&self) -> Option<&str> {
        self.key_var.as_deref()
    }

    /// Every secret a server could echo back: the key and the base URL's password.
    pub(crate) fn secrets(&self) -> Vec<String> {
        let key = self.api_key.as_ref().map(|key| key.secret().to_owned());
        key.into_iter().chain(self.base_url.password()).collect()
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
    fn it_reads_its_own_variables_and_keeps_defaults_for_unset_ones() {
        let cases: [(Vars, &str, &str, bool); 4] = [
            (&[], "https://api.anthropic.com/v1/messages", "claude-haiku-4-5", false),
            (
                &[("ANTHROPIC_API_KEY", "sk-ant-1"), ("ANTHROPIC_MODEL", " claude-sonnet-4-5 ")],
                "https://api.anthropic.com/v1/messages",
                "claude-sonnet-4-5",
                true,
            ),
            (
                &[("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/"), ("OPENAI_API_KEY", "sk-2")],
                "http://127.0.0.1:9/v1/messages",
                "claude-haiku-4-5",
                false,
            ),
            (
                &[("ANTHROPIC_API_KEY", " "), ("ANTHROPIC_MODEL", "")],
                "https://api.anthropic.com/v1/messages",
                "claude-haiku-4-5",
                false,
            ),
        ];
        for (vars, endpoint, model, keyed) in cases {
            let config = AnthropicConfig::from_lookup(env(vars)).unwrap();
            assert_eq!(
                (config.endpoint().as_str(), config.model(), config.has_api_key()),
                (endpoint, model, keyed),
                "{vars:?}"
            );
        }
        assert_eq!(AnthropicConfig::new().key_var(), Some("ANTHROPIC_API_KEY"));
    }

    #[test]
    fn invalid_values_name_the_variable_and_never_quote_the_key_or_password() {
        let cases: [(Vars, &str); 3] = [
            (&[("ANTHROPIC_API_KEY", "sk secret")], "ANTHROPIC_API_KEY: must be printable ASCII"),
            (&[("ANTHROPIC_BASE_URL", "api.anthropic.com")], "ANTHROPIC_BASE_URL: not a URL"),
            (
                &[("ANTHROPIC_BASE_URL", "http://me:secret@127.0.0.1/\r\nX: 1")],
                "ANTHROPIC_BASE_URL: must not contain a control character",
            ),
        ];
        for (vars, expected) in cases {
            let error = AnthropicConfig::from_lookup(env(vars)).unwrap_err().to_string();
            assert!(error.starts_with(expected), "{error}");
            assert!(!error.contains("secret"), "{error}");
        }
        assert!(AnthropicConfig::new().with_api_key("a b").is_err());
        assert!(AnthropicConfig::new().with_base_url("nope").is_err());
    }

    #[test]
    fn debug_and_the_base_url_redact_the_secrets() {
        let config = AnthropicConfig::new()
            .with_api_key("sk-ant-very-secret")
            .unwrap()
            .with_base_url("http://me:hunter2@127.0.0.1:8000")
            .unwrap();
        let debug = format!("{config:?}");
        assert!(!debug.contains("sk-ant-very-secret") && !debug.contains("hunter2"), "{debug}");
        assert_eq!(config.base_url(), "http://[redacted]@127.0.0.1:8000");
        assert_eq!(config.secrets(), ["sk-ant-very-secret", "hunter2"]);
    }
}
