//! The registries a scenario's names are looked up in: plugins (a factory per name, fed the
//! `plugins[i].config` object) and tools (an instance per name).
//!
//! # Why factories keyed by name
//!
//! The runtime never imports a plugin, yet a scenario file says `"use": "llm-retry"`.
//! So whoever assembles a program — the `rein` binary, a test — registers the plugins it knows
//! under their names, and the runner builds one per scenario from its configuration. A plugin
//! that does not exist (yet) is simply not registered, and a scenario naming it is invalid
//! (`plugins[0].use: unknown plugin "llm-retry"`), not a crash.
//!
//! A factory reads its configuration strictly ([`PluginRegistry::register`]: it builds, or names
//! the wrong field) or leniently ([`PluginRegistry::register_lenient`]: it always builds, and
//! returns the fallbacks it took as `ConfigWarning`s for the program to show).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use rein_runtime::plugin::{BuiltPlugin, ConfigError, Plugin};
use rein_runtime::tool::Tool;
use rein_runtime::tool::echo::EchoTool;

/// Builds a plugin from its configuration (a JSON object, read as that plugin's configuration
/// file). An invalid configuration is a [`ConfigError::Invalid`] whose `path` is relative to the
/// configuration object (`maxTransientRetries`), or empty for the object itself.
pub type PluginFactory = Arc<dyn Fn(&Value) -> Result<Arc<dyn Plugin>, ConfigError> + Send + Sync>;

/// Builds a plugin from a configuration read leniently: the plugin and the fallbacks taken
/// (`ConfigWarning`s, paths relative to the configuration object), or an error for what even a
/// lenient reader refuses.
pub type LenientFactory = Arc<dyn Fn(&Value) -> Result<BuiltPlugin, ConfigError> + Send + Sync>;

/// Plugin factories by name.
#[derive(Clone, Default)]
pub struct PluginRegistry {
    factories: BTreeMap<String, LenientFactory>,
}

impl std::fmt::Debug for PluginRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.factories.keys()).finish()
    }
}

impl PluginRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `factory` under `name` (replacing an earlier registration of that name): a
    /// plugin whose configuration is read strictly (it either builds or names the field that is
    /// wrong). The plugins it builds are known by their own [`Plugin::name`] (actions,
    /// `plugin/crashed`): normally `name`; a factory that lets its configuration choose another
    /// (`scripted`) allows one scenario to use it twice.
    pub fn register(
        &mut self,
        name: impl Into<String>,
        factory: impl Fn(&Value) -> Result<Arc<dyn Plugin>, ConfigError> + Send + Sync + 'static,
    ) -> &mut Self {
        self.register_lenient(name, move |config: &Value| factory(config).map(BuiltPlugin::strict))
    }

    /// Registers a `factory` whose configuration is read leniently: it also returns the
    /// fallbacks it took, which the program shows (the scenario runner as `warning:` lines,
    /// placed under `plugins[i].config`).
    pub fn register_lenient(
        &mut self,
        name: impl Into<String>,
        factory: impl Fn(&Value) -> Result<BuiltPlugin, ConfigError> + Send + Sync + 'static,
    ) -> &mut Self {
        self.factories.insert(name.into(), Arc::new(factory));
        self
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.factories.keys().map(String::as_str).collect()
    }

    /// The factory registered under `name`.
    pub fn get(&self, name: &str) -> Option<&LenientFactory> {
        self.factories.get(name)
    }

    /// Builds the plugin registered under `name` from `config`; `None` when nothing is
    /// registered under that name.
    pub fn build(&self, name: &str, config: &Value) -> Option<Result<BuiltPlugin, ConfigError>> {
        self.factories.get(name).map(|factory| factory(config))
    }
}

/// Tools by name. [`ToolRegistry::default`] holds the `echo` tool.
#[derive(Clone)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.tools.keys()).finish()
    }
}

impl Default for ToolRegistry {
    fn default() -> Self {
        let mut registry = Self::empty();
        registry.register(Arc::new(EchoTool));
        registry
    }
}

impl ToolRegistry {
    /// A registry without any tool.
    pub fn empty() -> Self {
        Self { tools: BTreeMap::new() }
    }

    /// Registers `tool` under the name its spec gives (replacing one of that name).
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> &mut Self {
        self.tools.insert(tool.spec().name, tool);
        self
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.tools.keys().map(String::as_str).collect()
    }

    /// The tool registered under `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }
}
