//! The plugin chain of `rein chat` and `rein console`: rein's default chain
//! (`rein_plugins::DEFAULT_CHAIN`: `llm-retry`, `compaction`, `auto-retry`, outermost first), each
//! plugin with its default settings — and, when `--fallback` gives routes, `fallback` first
//! (`rein_plugins::FALLBACK_FIRST`), naming them in order.

use rein_runtime::plugin::BuiltPlugin;
use serde_json::json;

/// The chain, outermost first, each plugin built from its default settings (an empty
/// configuration object), `fallback` first with `routes` when there are any. A factory that
/// refuses its configuration is an error naming the plugin.
pub(crate) fn chain(fallback_routes: &[String]) -> Result<Vec<BuiltPlugin>, String> {
    let names: &[&str] = if fallback_routes.is_empty() {
        &rein_plugins::DEFAULT_CHAIN
    } else {
        &rein_plugins::FALLBACK_FIRST
    };
    names
        .iter()
        .map(|name| {
            let (_, factory) = rein_plugins::ALL
                .iter()
                .find(|(known, _)| known == name)
                .ok_or_else(|| format!("plugin {name}: not in this build"))?;
            let config = if *name == rein_plugins::fallback::NAME {
                json!({ "routes": fallback_routes })
            } else {
                json!({})
            };
            factory(&config).map_err(|e| format!("plugin {name}: its settings: {e}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(chain: &[BuiltPlugin]) -> Vec<&str> {
        chain.iter().map(|p| p.plugin.name()).collect()
    }

    #[test]
    fn the_default_chain_and_fallback_first_when_it_has_routes() {
        let chain = chain(&[]).unwrap();
        assert_eq!(names(&chain), ["llm-retry", "compaction", "auto-retry"]);
        let routes = ["openai:small".to_owned(), "deepseek:deepseek-reasoner".to_owned()];
        let chain = super::chain(&routes).unwrap();
        assert_eq!(names(&chain), ["fallback", "llm-retry", "compaction", "auto-retry"]);
        let settings = chain[0].plugin.settings().unwrap().shown().settings;
        assert_eq!(settings["routes"], json!(routes), "in the order given");
    }
}
