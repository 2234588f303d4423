//! Plugin and route-health settings a store kept, put back when a runtime starts on it.
//!
//! A runtime begins each plugin of its chain at the latest revision the store saved for it
//! ([`SessionStore::load_settings`](crate::store::SessionStore::load_settings)), so settings
//! accepted at run time survive a restart and revisions continue: a settings page opened before
//! the restart names an older revision and is refused after it, as it must be.
//!
//! The read is lenient: a record that cannot be read, or whose settings this build refuses
//! (a field a newer rein wrote, a value out of range), leaves the plugin's built settings in
//! force with a warning naming the record — but at the revision the store holds, so the next
//! accepted patch continues the store's revisions (and replaces the record). A record for a
//! plugin that is not in the chain is left alone.
//!
//! A route's health settings are kept the same way, under the name
//! [`route_health_key`](crate::runtime::route_health_key) gives (`routes.main.health`).

use std::collections::BTreeMap;

use crate::plugin::{ConfigWarning, PluginWarning, Settings};
use crate::plugin_host::PluginChain;
use crate::route_settings::RouteSettings;
use crate::store::StoredSettings;

/// What was put back: the revision each plugin was restored at (whether its saved values or,
/// for a record it refused, its built ones), and a warning for each record not taken.
#[derive(Debug, Default)]
pub(crate) struct Restored {
    pub(crate) revisions: BTreeMap<String, u64>,
    pub(crate) warnings: Vec<PluginWarning>,
}

/// Puts `stored` back into the plugins of `chain` and the route health cells of `routes` (by
/// their record names).
pub(crate) fn restore(
    chain: &PluginChain,
    routes: &BTreeMap<String, RouteSettings>,
    stored: Vec<StoredSettings>,
) -> Restored {
    let mut restored = Restored::default();
    for record in stored {
        let name = record.plugin().to_owned();
        let plugin = chain.plugin(&name);
        let settings: &dyn Settings = match (&plugin, routes.get(&name)) {
            (Some(plugin), _) => match plugin.settings() {
                Some(settings) => settings,
                None => continue,
            },
            (None, Some(cell)) => cell,
            (None, None) => continue,
        };
        let revision = record.revision();
        let refused = match &record {
            StoredSettings::Record(saved) => match settings.restore(&saved.settings, revision) {
                Ok(()) => None,
                Err(e) => Some(format!("saved settings at revision {revision} refused: {e}")),
            },
            StoredSettings::Damaged { at, message, .. } => {
                Some(format!("saved settings unreadable ({at}): {message}"))
            }
        };
        if let Some(why) = refused {
            let message = format!("{why}; using the settings it was built with");
            restored.warnings.push(PluginWarning {
                plugin: name.clone(),
                warning: ConfigWarning { path: String::new(), message },
            });
            // The fence continues from the store's revision (see the module docs).
            let built = settings.shown().settings;
            if settings.restore(&built, revision).is_err() {
                continue;
            }
        }
        restored.revisions.insert(name, revision);
    }
    restored
}
