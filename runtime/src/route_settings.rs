//! [`RouteSettings`]: a route's health settings as run-time settings, through the same
//! [`Settings`] seam as a plugin's — shown with their revision, staged behind the revision fence,
//! committed, restored — so the runtime changes, saves and restores them exactly as it does a
//! plugin's (`Runtime::configure_route_health`).
//!
//! It lives apart from `route_health` because the plugin seam already reads route health (the
//! waterfall payload carries a [`HealthReport`](crate::route_health::HealthReport)): the fence is
//! wiring between the two, not a part of either.

use std::sync::Arc;

use serde_json::Value;

use crate::plugin::{ConfigError, ConfigOutcome, PluginSettings, Settings, Staged};
use crate::route_health::cell::HealthCell;
use crate::route_health::{HealthError, HealthSettings};

/// One route's health settings, behind the revision fence. See the module docs.
pub(crate) struct RouteSettings(pub(crate) Arc<HealthCell>);

fn invalid(error: HealthError) -> ConfigError {
    ConfigError::Invalid { path: error.path, message: error.reason }
}

impl Settings for RouteSettings {
    fn shown(&self) -> PluginSettings {
        let (settings, revision) = self.0.settings();
        PluginSettings { revision, settings: settings.to_value(), read_only: false }
    }

    fn stage(&self, patch: &Value, base_revision: u64) -> Result<Staged, ConfigError> {
        let (current, revision) = self.0.settings();
        if base_revision != revision {
            return Err(ConfigError::StaleRevision { based_on: base_revision, current: revision });
        }
        let (settings, changed) = current.patched(patch).map_err(invalid)?;
        Ok(Staged::new(base_revision, changed, settings.to_value(), settings))
    }

    fn commit(&self, staged: Staged) -> Result<ConfigOutcome, ConfigError> {
        let base = staged.base_revision();
        let (settings, changed) =
            staged.into_value::<HealthSettings>().map_err(|_| ConfigError::Foreign)?;
        match self.0.reconfigure(settings, Some(base), base + 1) {
            Ok(()) => Ok(ConfigOutcome { revision: base + 1, changed }),
            Err(current) => Err(ConfigError::StaleRevision { based_on: base, current }),
        }
    }

    fn restore(&self, settings: &Value, revision: u64) -> Result<(), ConfigError> {
        let settings = HealthSettings::from_value(settings, "").map_err(invalid)?;
        let _ = self.0.reconfigure(settings, None, revision);
        Ok(())
    }
}
