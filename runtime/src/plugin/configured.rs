//! A plugin read from its configuration, the fallbacks its reader took, and the one shape every
//! plugin takes to join a chain ([`IntoPlugin`], for
//! [`RuntimeBuilder::plugin`](crate::runtime::RuntimeBuilder::plugin)).
//!
//! # Why warnings travel with the plugin
//!
//! A configuration read leniently never stops the program over a typo: the field falls back to
//! its default (or is clamped) and the reader says so with a [`ConfigWarning`] naming the field.
//! A warning that a caller can drop without noticing is a typo that silently runs the default.
//! So a plugin read from a configuration is a [`Configured`] value (`#[must_use]`), which the
//! builder takes whole: every warning is kept, logged at `warn` when the runtime is built, and
//! readable afterwards ([`Runtime::config_warnings`](crate::runtime::Runtime::config_warnings)),
//! where a program shows it to a person (the `rein` CLI prints each on stderr).

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

impl ConfigWarning {
    /// The warning with its path prefixed by `prefix` (`plugins[2].config`), for a configuration
    /// found inside a larger file.
    #[must_use]
    pub fn within(mut self, prefix: &str) -> Self {
        self.path = crate::retry_policy::field_path(prefix, &self.path);
        self
    }
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

/// A [`ConfigWarning`] of a plugin added to a runtime, with the plugin's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginWarning {
    /// The plugin's name in the chain.
    pub plugin: String,
    /// The fallback its configuration reader took.
    pub warning: ConfigWarning,
}

impl std::fmt::Display for PluginWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "plugin {}: {}", self.plugin, self.warning)
    }
}

/// A plugin read from its configuration, and the fallbacks its reader took (empty for a strict
/// reader, which refuses instead, and for a configuration that needed none), in field order.
/// Every shipped plugin's `from_config` returns one; add it with
/// [`RuntimeBuilder::plugin`](crate::runtime::RuntimeBuilder::plugin), which keeps the warnings.
#[must_use = "its warnings name configuration fields that fell back to a default: add it with \
              `RuntimeBuilder::plugin` (which keeps them) or show them"]
#[derive(Debug, Clone)]
pub struct Configured<P> {
    /// The plugin (or, for `llm-retry`, the configuration that becomes it).
    pub plugin: P,
    /// The fallbacks its configuration reader took.
    pub warnings: Vec<ConfigWarning>,
}

impl<P> Configured<P> {
    /// A plugin read with no fallback taken.
    pub fn strict(plugin: P) -> Self {
        Self { plugin, warnings: Vec::new() }
    }

    /// A plugin read leniently, with the fallbacks its reader took.
    pub fn lenient<W: Into<ConfigWarning>>(
        plugin: P,
        warnings: impl IntoIterator<Item = W>,
    ) -> Self {
        Self { plugin, warnings: warnings.into_iter().map(Into::into).collect() }
    }

    /// The warnings' paths prefixed by `prefix` (`plugins[2].config`).
    pub fn within(mut self, prefix: &str) -> Self {
        self.warnings = self.warnings.into_iter().map(|w| w.within(prefix)).collect();
        self
    }
}

/// A plugin ready to join a chain, as the builder, a scenario's registry and the CLI hold it:
/// the plugin, the fallbacks its configuration reader took, and the runtime's default route
/// policy its configuration sets (`llm-retry`'s configuration is the policy of every route that
/// declares none).
#[derive(Clone)]
pub struct BuiltPlugin {
    /// The plugin.
    pub plugin: Arc<dyn Plugin>,
    /// The fallbacks its configuration reader took.
    pub warnings: Vec<ConfigWarning>,
    /// The runtime's default route policy this configuration sets, if any
    /// ([`RuntimeBuilder::plugin`](crate::runtime::RuntimeBuilder::plugin) applies the first one
    /// unless one is set already).
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

/// What [`RuntimeBuilder::plugin`](crate::runtime::RuntimeBuilder::plugin) takes: any plugin
/// value, an `Arc` of one, a [`Configured`] plugin (its warnings kept), a [`BuiltPlugin`] from a
/// registry — and `llm-retry`'s configuration, which becomes its plugin and the default route
/// policy.
pub trait IntoPlugin {
    /// The plugin as the chain holds it.
    fn into_plugin(self) -> BuiltPlugin;
}

impl<P: Plugin> IntoPlugin for P {
    fn into_plugin(self) -> BuiltPlugin {
        BuiltPlugin::strict(Arc::new(self))
    }
}

impl<P: Plugin> IntoPlugin for Arc<P> {
    fn into_plugin(self) -> BuiltPlugin {
        BuiltPlugin::strict(self)
    }
}

impl IntoPlugin for Arc<dyn Plugin> {
    fn into_plugin(self) -> BuiltPlugin {
        BuiltPlugin::strict(self)
    }
}

impl IntoPlugin for BuiltPlugin {
    fn into_plugin(self) -> BuiltPlugin {
        self
    }
}

impl<P: IntoPlugin> IntoPlugin for Configured<P> {
    fn into_plugin(self) -> BuiltPlugin {
        let mut built = self.plugin.into_plugin();
        let mut warnings = self.warnings;
        warnings.append(&mut built.warnings);
        built.warnings = warnings;
        built
    }
}
