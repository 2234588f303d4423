//! The plugin chain of `rein chat` and `rein console`: rein's default chain
//! (`rein_plugins::DEFAULT_CHAIN`: `llm-retry`, `compaction`, `auto-retry`, outermost first) —
//! and, when there are fallback routes, `fallback` first (`rein_plugins::FALLBACK_FIRST`), naming
//! them in order — or the configuration file's `chain`; each plugin with the file's settings for
//! it (`[plugins.NAME]`), else its defaults.
//!
//! A plugin that refuses the file's settings (`llm-retry` and `fallback` read strictly) is an
//! error naming `plugins.NAME.FIELD` and the file's line; a value a lenient plugin (`auto-retry`,
//! `compaction`) could not use is a warning, located the same way.

use rein_runtime::plugin::{BuiltPlugin, ConfigError};
use serde_json::{Value, json};

use super::config_file::ConfigFile;

/// The chain, outermost first, and the warnings of its plugins' configuration readers (each
/// naming the file's key and line when the value came from the file). A factory that refuses
/// its configuration is an error naming the plugin (and the file's key and line).
pub(crate) fn chain(
    fallback_routes: &[String],
    file: Option<&ConfigFile>,
) -> Result<(Vec<BuiltPlugin>, Vec<String>), String> {
    let default: &[&str] = if fallback_routes.is_empty() {
        &rein_plugins::DEFAULT_CHAIN
    } else {
        &rein_plugins::FALLBACK_FIRST
    };
    let names: Vec<&str> = match file.and_then(|f| f.chain.as_ref()) {
        Some(chain) => chain.value.iter().map(String::as_str).collect(),
        None => default.to_vec(),
    };
    if let (Some(file), Some(chain)) = (file, file.and_then(|f| f.chain.as_ref()))
        && !fallback_routes.is_empty()
        && !names.contains(&rein_plugins::fallback::NAME)
    {
        return Err(format!(
            "{}: the fallback routes need the fallback plugin in the chain",
            file.at("chain", chain.line)
        ));
    }
    let mut built = Vec::with_capacity(names.len());
    let mut warnings = Vec::new();
    for name in names {
        let (_, factory) = rein_plugins::ALL
            .iter()
            .find(|(known, _)| *known == name)
            .ok_or_else(|| format!("plugin {name}: not in this build"))?;
        let mut config = file.map_or_else(|| json!({}), |f| f.plugin_config(name));
        if name == rein_plugins::fallback::NAME
            && let Value::Object(fields) = &mut config
            && !fields.contains_key("routes")
        {
            fields.insert("routes".to_owned(), json!(fallback_routes));
        }
        let located = |field: &str| file.and_then(|f| f.plugin_field(name, field));
        let mut plugin = factory(&config).map_err(|e| match (&e, located(field_of(&e))) {
            (ConfigError::Invalid { message, .. }, Some(at)) => format!("{at}: {message}"),
            _ => format!("plugin {name}: its settings: {e}"),
        })?;
        for warning in std::mem::take(&mut plugin.warnings) {
            warnings.push(match located(&warning.path) {
                Some(at) => format!("{at}: {}", warning.message),
                None => format!("plugin {name}: {warning}"),
            });
        }
        built.push(plugin);
    }
    Ok((built, warnings))
}

/// The field a configuration error names (empty for none).
fn field_of(error: &ConfigError) -> &str {
    match error {
        ConfigError::Invalid { path, .. } => path,
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(chain: &[BuiltPlugin]) -> Vec<&str> {
        chain.iter().map(|p| p.plugin.name()).collect()
    }

    #[test]
    fn the_default_chain_and_fallback_first_when_it_has_routes() {
        let chain = chain(&[], None).unwrap().0;
        assert_eq!(names(&chain), ["llm-retry", "compaction", "auto-retry"]);
        let routes = ["openai:small".to_owned(), "deepseek:deepseek-reasoner".to_owned()];
        let chain = super::chain(&routes, None).unwrap().0;
        assert_eq!(names(&chain), ["fallback", "llm-retry", "compaction", "auto-retry"]);
        let settings = chain[0].plugin.settings().unwrap().shown().settings;
        assert_eq!(settings["routes"], json!(routes), "in the order given");
    }

    fn file(text: &str) -> ConfigFile {
        crate::cli::agent::config_file::read(std::path::Path::new("rein.toml"), text).unwrap()
    }

    #[test]
    fn the_files_chain_and_settings_are_used_strict_errors_and_lenient_warnings_located() {
        let good = file(
            "chain = [\"auto-retry\", \"llm-retry\"]\n\n[plugins.auto-retry]\nextraRetries = 5\nmaxDelayMs = -4\n",
        );
        let (built, warnings) = chain(&[], Some(&good)).unwrap();
        assert_eq!(names(&built), ["auto-retry", "llm-retry"]);
        let shown = built[0].plugin.settings().unwrap().shown().settings;
        assert_eq!(shown["extraRetries"], 5);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("rein.toml:5: plugins.auto-retry.maxDelayMs: "),
            "{}",
            warnings[0]
        );

        let strict = file("[plugins.llm-retry]\nmaxTransientRetries = 2\njitterRatio = 7\n");
        let error = chain(&[], Some(&strict)).err().unwrap();
        assert!(error.starts_with("rein.toml:3: plugins.llm-retry.jitterRatio: "), "{error}");

        let no_fallback = file("chain = [\"llm-retry\"]\n");
        let error = chain(&["openai:x".to_owned()], Some(&no_fallback)).err().unwrap();
        assert_eq!(
            error,
            "rein.toml:1: chain: the fallback routes need the fallback plugin in the chain"
        );
    }
}
