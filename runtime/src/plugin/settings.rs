//! What a settings page or a CLI sees of a plugin's settings.

use serde_json::Value;

/// A run-time settings change a plugin accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigOutcome {
    /// The new revision.
    pub revision: u64,
    /// The names of the fields that changed (written in `config/changed`).
    pub changed: Vec<String>,
}

/// A plugin's settings as a settings page or a CLI reads them ([`Plugin::settings`]): the values
/// with the keys a patch uses, the revision a patch must name, and whether patches are accepted
/// at all.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginSettings {
    /// The revision the next patch must be based on (0 for the settings the plugin was built
    /// with).
    pub revision: u64,
    /// The settings, as a JSON object with the keys of the plugin's configuration and patches.
    pub settings: Value,
    /// Whether run-time patches are refused ([`ConfigError::ReadOnly`]): a page shows the
    /// values without a form.
    pub read_only: bool,
}

/// Why a run-time settings change was refused. Nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The plugin has no run-time settings.
    #[error("plugin {0} has no run-time settings")]
    Unsupported(String),
    /// No plugin of that name is registered (or it was disposed).
    #[error("no plugin named {0} is in the chain")]
    UnknownPlugin(String),
    /// The patch was based on an older revision than the current one.
    #[error(
        "stale revision: the patch is based on revision {based_on}, the settings are at {current}"
    )]
    StaleRevision {
        /// The revision the patch was based on.
        based_on: u64,
        /// The current revision.
        current: u64,
    },
    /// A field's value is invalid; `path` names it (`retryableCodes`, `extraRetries`…).
    #[error("{path}: {message}")]
    Invalid {
        /// The field.
        path: String,
        /// What is wrong with it.
        message: String,
    },
    /// The plugin's settings can be read but not changed at run time.
    #[error("the settings of plugin {plugin} are read-only at run time: {reason}")]
    ReadOnly {
        /// The plugin.
        plugin: String,
        /// Why, and what to do instead.
        reason: String,
    },
}
