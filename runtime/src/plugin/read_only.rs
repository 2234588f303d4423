//! [`ReadOnly`]: settings a plugin shows but cannot change at run time.

use serde_json::Value;

use super::settings::{ConfigError, ConfigOutcome, PluginSettings, Settings, Staged};

/// Settings shown at revision 0 and fixed at run time: every patch is refused with
/// [`ConfigError::ReadOnly`] and the reason, rather than accepted and silently not applied
/// (`llm-retry`'s policy, fixed when the runtime is built). Restoring them as they are is
/// accepted; restoring anything else is refused the same way.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadOnly {
    plugin: String,
    settings: Value,
    reason: String,
}

impl ReadOnly {
    /// `plugin`'s `settings`, fixed for `reason` (which says what to do instead).
    pub fn new(plugin: impl Into<String>, settings: Value, reason: impl Into<String>) -> Self {
        Self { plugin: plugin.into(), settings, reason: reason.into() }
    }

    fn refusal(&self) -> ConfigError {
        ConfigError::ReadOnly { plugin: self.plugin.clone(), reason: self.reason.clone() }
    }
}

impl Settings for ReadOnly {
    fn shown(&self) -> PluginSettings {
        PluginSettings { revision: 0, settings: self.settings.clone(), read_only: true }
    }

    fn revision(&self) -> u64 {
        0
    }

    fn stage(&self, _patch: &Value, _base_revision: u64) -> Result<Staged, ConfigError> {
        Err(self.refusal())
    }

    fn commit(&self, _staged: Staged) -> Result<ConfigOutcome, ConfigError> {
        Err(self.refusal())
    }

    fn restore(&self, settings: &Value, revision: u64) -> Result<(), ConfigError> {
        if revision == 0 && *settings == self.settings { Ok(()) } else { Err(self.refusal()) }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn read_only_settings_show_and_refuse_every_change() {
        let fixed = ReadOnly::new("p", json!({"a": 1}), "fixed at build");
        let refused = "the settings of plugin p are read-only at run time: fixed at build";
        assert_eq!(
            fixed.shown(),
            PluginSettings { revision: 0, settings: json!({"a": 1}), read_only: true }
        );
        assert_eq!(fixed.stage(&json!({"a": 2}), 0).unwrap_err().to_string(), refused);
        let foreign = Staged::new(0, vec![], json!({}), ());
        assert_eq!(fixed.commit(foreign).unwrap_err().to_string(), refused);
        assert_eq!(fixed.restore(&json!({"a": 1}), 0), Ok(()));
        assert_eq!(fixed.restore(&json!({"a": 2}), 0).unwrap_err().to_string(), refused);
        assert_eq!(fixed.restore(&json!({"a": 1}), 3).unwrap_err().to_string(), refused);
    }
}
