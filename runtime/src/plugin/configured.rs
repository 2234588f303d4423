//! A plugin built from its configuration, and the fallbacks its reader took.

use std::sync::Arc;

use super::Plugin;
use crate::retry_policy::RetryPolicy;

/// A fallback taken while reading a plugin's configuration file leniently: the value used
/// instead of the one written, and why. Nothing was refused; a program shows it where a person
/// reads it (`rein scenario run` prints it on stderr).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    /// The field, relative to the configuration object (`extraRetries`, `retryableCodes[2]`;
    /// empty for the object itself).
    pub path: String,
    /// What was done (`-1 is negative; using the default 3`).
    pub message: String,
}

impl std::fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// A plugin built from its configuration file, and the fallbacks the reader took (empty for a
/// strict reader, which refuses instead), in field order.
#[derive(Clone)]
pub struct BuiltPlugin {
    /// The plugin.
    pub plugin: Arc<dyn Plugin>,
    /// The fallbacks its configuration reader took.
    pub warnings: Vec<ConfigWarning>,
    /// The runtime's default route policy this configuration sets, if any: `llm-retry`'s
    /// configuration is the policy of every route that declares none
    /// ([`RuntimeBuilder::built`](crate::runtime::RuntimeBuilder::built) applies it).
    pub default_route_policy: Option<RetryPolicy>,
}

impl BuiltPlugin {
    /// A plugin whose configuration was read strictly: no fallback taken.
    pub fn strict(plugin: Arc<dyn Plugin>) -> Self {
        Self { plugin, warnings: Vec::new(), default_route_policy: None }
    }

    /// A plugin whose configuration was read leniently, with the fallbacks its reader took.
    pub fn lenient<W: Into<ConfigWarning>>(
        plugin: Arc<dyn Plugin>,
        warnings: impl IntoIterator<Item = W>,
    ) -> Self {
        let warnings = warnings.into_iter().map(Into::into).collect();
        Self { plugin, warnings, default_route_policy: None }
    }
}

impl std::fmt::Debug for BuiltPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuiltPlugin")
            .field("plugin", &self.plugin.name())
            .field("warnings", &self.warnings)
            .field("default_route_policy", &self.default_route_policy)
            .finish()
    }
}
