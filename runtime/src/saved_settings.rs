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

use crate::event::ConfigChanged;
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

/// The settings of the record named `name`: a plugin's of `chain`, or a route's of `routes`.
fn settings_named<'a>(
    chain: &'a PluginChain,
    routes: &'a BTreeMap<String, RouteSettings>,
    name: &str,
    plugin: &'a Option<std::sync::Arc<dyn crate::plugin::Plugin>>,
) -> Option<&'a dyn Settings> {
    let _ = chain;
    match (plugin, routes.get(name)) {
        (Some(plugin), _) => plugin.settings(),
        (None, Some(cell)) => Some(cell),
        (None, None) => None,
    }
}

/// Puts in force each record of `stored` newer than the revision in force (another node of a
/// cluster saved it): restored like at start, and a [`ConfigChanged`] naming the fields whose
/// values changed, for the awake sessions. A record this build refuses, or cannot read, is left
/// alone (its node reported it); one of a plugin or route not here too.
pub(crate) fn adopt(
    chain: &PluginChain,
    routes: &BTreeMap<String, RouteSettings>,
    stored: Vec<StoredSettings>,
) -> Vec<ConfigChanged> {
    let mut changes = Vec::new();
    for record in stored {
        let StoredSettings::Record(saved) = record else { continue };
        let plugin = chain.plugin(&saved.plugin);
        let Some(settings) = settings_named(chain, routes, &saved.plugin, &plugin) else {
            continue;
        };
        let before = settings.shown();
        if saved.revision <= before.revision {
            continue;
        }
        if let Err(error) = settings.restore(&saved.settings, saved.revision) {
            tracing::warn!(plugin = %saved.plugin, revision = saved.revision, %error, "saved settings refused");
            continue;
        }
        let after = settings.shown();
        let changed = changed_fields(&before.settings, &after.settings);
        changes.push(ConfigChanged { plugin: saved.plugin, revision: saved.revision, changed });
    }
    changes
}

/// The keys of `after` whose values differ from `before`'s, in key order.
fn changed_fields(before: &serde_json::Value, after: &serde_json::Value) -> Vec<String> {
    let (Some(before), Some(after)) = (before.as_object(), after.as_object()) else {
        return Vec::new();
    };
    let mut changed: Vec<String> =
        after.iter().filter(|(k, v)| before.get(*k) != Some(*v)).map(|(k, _)| k.clone()).collect();
    changed.sort();
    changed
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
