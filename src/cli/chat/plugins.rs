//! The plugin chain of `rein chat`: [`DEFAULT_PLUGINS`], built by name through the plugin
//! registry (`rein_plugins::register_all`), each with its default settings.
//!
//! A default name the registry does not know (a plugin this build does not ship yet) is left out
//! of the chain rather than refusing to chat; the chain keeps the order of the list, whose first
//! plugin is the outermost of the waterfall.

use std::sync::Arc;

use rein_runtime::plugin::Plugin;
use rein_runtime::scenario::PluginRegistry;

/// The default chain, outermost first.
pub(crate) const DEFAULT_PLUGINS: [&str; 3] = ["llm-retry", "compaction", "auto-retry"];

/// A chain built from names.
pub(crate) struct Chain {
    /// The plugins, outermost first.
    pub(crate) plugins: Vec<Arc<dyn Plugin>>,
    /// The names the registry does not know.
    pub(crate) unknown: Vec<String>,
}

/// The chain built from `names` in order, each plugin from its default settings (an empty
/// configuration object), and the names the registry does not know. A factory that refuses its
/// defaults is an error naming the plugin.
pub(crate) fn chain(registry: &PluginRegistry, names: &[&str]) -> Result<Chain, String> {
    let mut plugins = Vec::new();
    let mut unknown = Vec::new();
    for name in names {
        match registry.get(name) {
            Some(factory) => {
                let plugin = factory(&serde_json::json!({}))
                    .map_err(|e| format!("plugin {name}: its default settings: {e}"))?;
                plugins.push(plugin);
            }
            None => unknown.push((*name).to_owned()),
        }
    }
    Ok(Chain { plugins, unknown })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_chain_holds_every_registered_default_in_order() {
        let registry = rein::scenario::plugins();
        let Chain { plugins, unknown } = chain(&registry, &DEFAULT_PLUGINS).unwrap();
        let built: Vec<&str> = plugins.iter().map(|p| p.name()).collect();
        let registered: Vec<&str> =
            DEFAULT_PLUGINS.into_iter().filter(|n| registry.get(n).is_some()).collect();
        assert_eq!(built, registered);
        assert_eq!(built.first(), Some(&"llm-retry"), "llm-retry is the outermost");
        for name in &unknown {
            assert!(DEFAULT_PLUGINS.contains(&name.as_str()) && registry.get(name).is_none());
        }
        assert_eq!(built.len() + unknown.len(), DEFAULT_PLUGINS.len());
    }

    #[test]
    fn an_unknown_name_is_reported_not_built() {
        let registry = rein::scenario::plugins();
        let Chain { plugins, unknown } =
            chain(&registry, &["no-such-plugin", "llm-retry"]).unwrap();
        assert_eq!(plugins.len(), 1);
        assert_eq!(unknown, ["no-such-plugin"]);
    }
}
