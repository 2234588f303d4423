//! [`SettingsRecord`]: a plugin's accepted run-time settings as a store keeps them, and the
//! pure rules every store applies to them (the compare-and-set, the lenient read).
//!
//! A run-time patch is made durable before it takes effect: the runtime stages it, asks the store
//! to save the staged settings at their new revision *based on* the revision the patch named, and
//! commits only once the store said yes. The save is a compare-and-set: it is refused
//! ([`StoreError::SettingsConflict`], nothing written) unless the record the store holds is at that
//! base revision (no record counts as revision 0), so two runtimes on one store, or two pages of
//! one, cannot both win from the same revision.
//!
//! A runtime started on a store begins each plugin at its latest saved revision. The read is
//! lenient: a record that cannot be read is [`StoredSettings::Damaged`] (where, and why) and the
//! runtime warns and keeps the plugin's built settings; a damaged record never stops a start.
//! For the compare-and-set, a damaged record counts at the revision the store can still read
//! (a database row's revision column), else 0; the runtime starts the plugin's fence there, so
//! the first accepted patch replaces it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::StoreError;

/// A plugin's accepted settings at a revision, as saved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SettingsRecord {
    /// The plugin's name.
    pub plugin: String,
    /// The revision these settings were accepted at (1 for the first patch).
    pub revision: u64,
    /// The settings, in the form the plugin shows them
    /// ([`PluginSettings::settings`](crate::plugin::PluginSettings)).
    pub settings: Value,
}

/// What a store read back for one plugin.
#[derive(Debug, Clone, PartialEq)]
pub enum StoredSettings {
    /// A record as saved.
    Record(SettingsRecord),
    /// A record that could not be read: `at` names it (a file, `db#settings/plugin`),
    /// `message` says why.
    Damaged {
        /// The plugin the record is for.
        plugin: String,
        /// Where the record is.
        at: String,
        /// Why it cannot be read.
        message: String,
        /// The revision the store holds it at, when that much can be read (a database row's
        /// revision column); 0 otherwise. The next save must be based on it.
        revision: u64,
    },
}

impl StoredSettings {
    /// The plugin this is for.
    pub fn plugin(&self) -> &str {
        match self {
            Self::Record(record) => &record.plugin,
            Self::Damaged { plugin, .. } => plugin,
        }
    }

    /// The revision a compare-and-set compares with.
    pub fn revision(&self) -> u64 {
        match self {
            Self::Record(record) => record.revision,
            Self::Damaged { revision, .. } => *revision,
        }
    }
}

/// The compare-and-set: a save of `record` based on `base` over what the store holds for that
/// plugin (`stored`: its revision, `None` without a record) is allowed only when the stored
/// revision is `base` and the record is `base + 1`.
pub fn check_base(
    record: &SettingsRecord,
    base: u64,
    stored: Option<u64>,
) -> Result<(), StoreError> {
    let found = stored.unwrap_or(0);
    if found != base || record.revision != base + 1 {
        return Err(StoreError::SettingsConflict { plugin: record.plugin.clone(), base, found });
    }
    Ok(())
}

/// Reads one record from `text` (a JSON document), leniently: a document that does not parse,
/// or names another plugin, is [`StoredSettings::Damaged`] at `at`.
pub fn read_record(plugin: &str, at: &str, text: &str) -> StoredSettings {
    let damaged = |message: String| StoredSettings::Damaged {
        plugin: plugin.to_owned(),
        at: at.to_owned(),
        message,
        revision: 0,
    };
    match serde_json::from_str::<SettingsRecord>(text) {
        Ok(record) if record.plugin != plugin => {
            damaged(format!("the record is for plugin {}", crate::quote::value(&record.plugin)))
        }
        Ok(record) if record.revision == 0 => damaged("revision 0 is never saved".to_owned()),
        Ok(record) => StoredSettings::Record(record),
        Err(e) => damaged(crate::quote::message(&e.to_string()).into_owned()),
    }
}

/// Reads a database row (its revision column already read) as a record, leniently: the
/// settings column must hold JSON; a damaged row keeps its revision for the compare-and-set.
pub fn read_row(plugin: &str, at: &str, revision: u64, settings: &str) -> StoredSettings {
    let text = format!(
        r#"{{"plugin":{},"revision":{revision},"settings":{settings}}}"#,
        Value::String(plugin.to_owned())
    );
    match read_record(plugin, at, &text) {
        StoredSettings::Damaged { plugin, at, message, .. } => {
            StoredSettings::Damaged { plugin, at, message, revision }
        }
        record => record,
    }
}

/// Checks that a plugin name can name a record (a file in a JSONL directory): the rule of
/// session ids.
pub fn check_plugin_name(plugin: &str) -> Result<(), StoreError> {
    super::check_session_id(plugin)
        .map_err(|_| StoreError::InvalidPluginName(crate::quote::value(plugin)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn record(revision: u64) -> SettingsRecord {
        SettingsRecord { plugin: "llm-retry".into(), revision, settings: json!({"a": 1}) }
    }

    #[test]
    fn a_save_must_continue_the_stored_revision() {
        // (record's revision, base, stored revision) → allowed?
        let cases = [
            (1, 0, None, true),
            (1, 0, Some(0), true),
            (2, 1, Some(1), true),
            (8, 7, Some(7), true),
            (1, 0, Some(1), false), // another saved first
            (2, 1, None, false),    // the record is gone (or never was)
            (3, 1, Some(1), false), // not the next revision
            (2, 1, Some(2), false),
        ];
        for (revision, base, stored, allowed) in cases {
            let result = check_base(&record(revision), base, stored);
            assert_eq!(result.is_ok(), allowed, "{revision} on {base} over {stored:?}: {result:?}");
            if let Err(e) = result {
                let found = stored.unwrap_or(0);
                assert!(
                    matches!(&e, StoreError::SettingsConflict { plugin, base: b, found: f }
                        if plugin == "llm-retry" && *b == base && *f == found),
                    "{e:?}"
                );
            }
        }
    }

    #[test]
    fn a_record_is_read_leniently() {
        let good = serde_json::to_string(&record(3)).unwrap();
        assert_eq!(read_record("llm-retry", "f", &good), StoredSettings::Record(record(3)));
        let cases = [
            ("{not json", "key must be a string"),
            (r#"{"plugin":"other","revision":1,"settings":{}}"#, r#"for plugin "other""#),
            (r#"{"plugin":"llm-retry","revision":0,"settings":{}}"#, "revision 0"),
            (r#"{"plugin":"llm-retry","revision":-1,"settings":{}}"#, "invalid value"),
            (r#"{"plugin":"llm-retry","revision":1}"#, "missing field `settings`"),
            (r#"{"plugin":"llm-retry","revision":1,"settings":{},"x":1}"#, "unknown field"),
        ];
        for (text, why) in cases {
            let read = read_record("llm-retry", "dir/llm-retry.settings.json", text);
            let StoredSettings::Damaged { plugin, at, message, .. } = &read else {
                panic!("{text}: {read:?}")
            };
            assert_eq!(
                (plugin.as_str(), at.as_str()),
                ("llm-retry", "dir/llm-retry.settings.json")
            );
            assert!(message.contains(why), "{text}: {message}");
            assert_eq!(read.revision(), 0);
        }
    }
}
