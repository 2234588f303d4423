//! The plugin chain of `rein chat` and `rein console`: rein's default chain
//! (`rein_plugins::DEFAULT_CHAIN`: `llm-retry`, `compaction`, `auto-retry`, outermost first), each
//! plugin with its default settings.

use rein_runtime::plugin::BuiltPlugin;

/// The default chain, outermost first, each plugin built from its default settings (an empty
/// configuration object). A factory that refuses its defaults is an error naming the plugin.
pub(crate) fn default_chain() -> Result<Vec<BuiltPlugin>, String> {
    rein_plugins::DEFAULT_CHAIN
        .iter()
        .map(|name| {
            let (_, factory) = rein_plugins::ALL
                .iter()
                .find(|(known, _)| known == name)
                .ok_or_else(|| format!("plugin {name}: not in this build"))?;
            factory(&serde_json::json!({}))
                .map_err(|e| format!("plugin {name}: its default settings: {e}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_chain_is_llm_retry_compaction_auto_retry_in_that_order() {
        let chain = default_chain().unwrap();
        let names: Vec<&str> = chain.iter().map(|p| p.plugin.name()).collect();
        assert_eq!(names, ["llm-retry", "compaction", "auto-retry"]);
    }
}
