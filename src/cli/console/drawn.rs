//! The settings each revision had, as this console saw them: what a stale form is read against.
//!
//! A settings form is drawn at a revision and sends that revision with its staged edits. After
//! another client saved, the form's edits are still the differences from the settings it was
//! drawn from; read against the current settings instead, every field the other client changed
//! would show as an edit of this form's. So the console keeps, per plugin, the settings of the
//! last [`KEPT`] revisions it saw (drawn in a page, read through the API, saved). Every change
//! of settings goes through this console, which sees the revision it makes; a form older than
//! that (or drawn by an earlier run of the console) finds nothing, and its edits cannot be told.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use serde_json::Value;

/// How many revisions are kept per plugin.
pub(crate) const KEPT: usize = 32;

/// The settings of recent revisions, per plugin.
#[derive(Debug, Default)]
pub(crate) struct Drawn {
    seen: Mutex<HashMap<String, VecDeque<(u64, Value)>>>,
}

impl Drawn {
    /// Notes that `plugin`'s settings at `revision` are `settings`.
    pub(crate) fn saw(&self, plugin: &str, revision: u64, settings: &Value) {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let revisions = seen.entry(plugin.to_owned()).or_default();
        if revisions.iter().any(|(known, _)| *known == revision) {
            return;
        }
        if revisions.len() == KEPT {
            revisions.pop_front();
        }
        revisions.push_back((revision, settings.clone()));
    }

    /// `plugin`'s settings at `revision`, if this console saw them and still keeps them.
    pub(crate) fn at(&self, plugin: &str, revision: u64) -> Option<Value> {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let revisions = seen.get(plugin)?;
        revisions.iter().find(|(known, _)| *known == revision).map(|(_, settings)| settings.clone())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn recent_revisions_are_kept_per_plugin() {
        let drawn = Drawn::default();
        drawn.saw("auto-retry", 0, &json!({"extraRetries": 3}));
        drawn.saw("auto-retry", 1, &json!({"extraRetries": 5}));
        drawn.saw("auto-retry", 1, &json!({"extraRetries": 99}));
        drawn.saw("compaction", 0, &json!({"keepRecentMessages": 6}));
        assert_eq!(drawn.at("auto-retry", 0), Some(json!({"extraRetries": 3})));
        assert_eq!(drawn.at("auto-retry", 1), Some(json!({"extraRetries": 5})), "first seen");
        assert_eq!(drawn.at("compaction", 0), Some(json!({"keepRecentMessages": 6})));
        assert_eq!(drawn.at("auto-retry", 2), None);
        assert_eq!(drawn.at("fallback", 0), None);
        for revision in 2..=KEPT as u64 {
            drawn.saw("auto-retry", revision, &json!({"extraRetries": revision}));
        }
        assert_eq!(drawn.at("auto-retry", 0), None, "the oldest goes first");
        assert_eq!(drawn.at("auto-retry", 1), Some(json!({"extraRetries": 5})));
        assert_eq!(drawn.at("compaction", 0), Some(json!({"keepRecentMessages": 6})));
    }
}
