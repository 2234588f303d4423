//! What every real provider's configuration shares: [`ProviderConfigError`] (which names the
//! field or variable), the default timeouts, the checked [`BaseUrl`], and the reading of a
//! provider's environment variables (`<PREFIX>_API_KEY`, `<PREFIX>_BASE_URL`, `<PREFIX>_MODEL`).
//!
//! Reading the environment is a pure function of a lookup (`read_env`), so each provider's
//! `from_lookup` is table-tested without touching the process environment. An empty or blank
//! variable is unset; an invalid value is an error naming the variable, and a key's value is
//! never quoted.

use std::time::Duration;

use crate::secret::ApiKey;

mod base_url;

pub use base_url::{BaseUrl, redact_userinfo};

/// Why a configuration is invalid: the field (or environment variable) and the reason. Never
/// holds the API key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderConfigError {
    /// A field's value is invalid.
    #[error("{field}: {reason}")]
    Invalid {
        /// The field path or environment variable.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The HTTP client could not be built.
    #[error("http client: {0}")]
    Client(String),
}

impl ProviderConfigError {
    pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        ProviderConfigError::Invalid { field: field.into(), reason: reason.into() }
    }
}

/// The default dead-air watchdog: the longest silence (no byte, not even a keep-alive comment)
/// a request survives.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// The default time allowed to open a connection (TCP and TLS).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A provider's variables as an environment has them: each `None` when unset or blank.
#[derive(Debug, Default)]
pub(crate) struct EnvVars {
    /// `<PREFIX>_API_KEY`, checked.
    pub(crate) api_key: Option<ApiKey>,
    /// `<PREFIX>_BASE_URL`, checked (surrounding spaces trimmed).
    pub(crate) base_url: Option<BaseUrl>,
    /// `<PREFIX>_MODEL`, trimmed.
    pub(crate) model: Option<String>,
}

/// The variable `<prefix>_<suffix>`.
pub(crate) fn var(prefix: &str, suffix: &str) -> String {
    format!("{prefix}_{suffix}")
}

/// Reads `<prefix>_API_KEY`, `<prefix>_BASE_URL` and `<prefix>_MODEL` from `lookup`: an unset or
/// blank variable is `None`; an invalid value is an error naming the variable (the key's value
/// never quoted).
pub(crate) fn read_env(
    prefix: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<EnvVars, ProviderConfigError> {
    let read = |suffix: &str| {
        let name = var(prefix, suffix);
        let value = lookup(&name).filter(|v| !v.trim().is_empty());
        (name, value)
    };
    let mut vars = EnvVars::default();
    if let (name, Some(key)) = read("API_KEY") {
        vars.api_key = checked_key(key, &name)?;
    }
    if let (name, Some(url)) = read("BASE_URL") {
        vars.base_url = Some(BaseUrl::parse(url.trim_matches(' '), &name)?);
    }
    if let (_, Some(model)) = read("MODEL") {
        vars.model = Some(model.trim().to_owned());
    }
    Ok(vars)
}

/// `key` as a checked key (`None` when empty: unset), or an error naming `field` that never
/// quotes it.
pub(crate) fn checked_key(
    key: impl Into<String>,
    field: &str,
) -> Result<Option<ApiKey>, ProviderConfigError> {
    match ApiKey::new(key) {
        Some(key) => {
            key.check().map_err(|reason| ProviderConfigError::invalid(field, reason))?;
            Ok(Some(key))
        }
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: HashMap<String, String> =
            vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        move |name| vars.get(name).cloned()
    }

    #[test]
    fn variables_are_read_by_prefix_and_blank_ones_are_unset() {
        let vars = [
            ("X_API_KEY", " sk-1\n"),
            ("X_BASE_URL", " http://127.0.0.1:9 "),
            ("X_MODEL", " m-1 "),
            ("Y_API_KEY", "  "),
            ("Y_MODEL", ""),
        ];
        let x = read_env("X", env(&vars)).unwrap();
        assert!(x.api_key.is_some());
        assert_eq!(x.base_url.unwrap().shown(), "http://127.0.0.1:9");
        assert_eq!(x.model.as_deref(), Some("m-1"));
        let y = read_env("Y", env(&vars)).unwrap();
        assert!(y.api_key.is_none() && y.base_url.is_none() && y.model.is_none());
    }

    #[test]
    fn invalid_values_name_the_variable_and_never_quote_the_key() {
        let cases: [(&[(&str, &str)], &str); 3] = [
            (&[("X_API_KEY", "sk secret")], "X_API_KEY: must be printable ASCII"),
            (&[("X_BASE_URL", "nope")], "X_BASE_URL: not a URL"),
            (
                &[("X_BASE_URL", "http://h/v1\n")],
                "X_BASE_URL: must not contain a control character",
            ),
        ];
        for (vars, expected) in cases {
            let error = read_env("X", env(vars)).unwrap_err().to_string();
            assert!(error.starts_with(expected), "{error}");
            assert!(!error.contains("secret"), "{error}");
        }
        assert_eq!(checked_key("", "api_key").unwrap(), None);
    }
}
