//! `compaction`'s settings: two fields, read like `auto-retry`'s.
//!
//! | key | type | default | bounds |
//! |---|---|---|---|
//! | `maxOverflowRetries` | integer | 1 | 0..=10; 0 = inert |
//! | `keepRecentMessages` | integer | 6 | 1..=1000 |
//!
//! A configuration file is read leniently ([`CompactionSettings::from_file`]: a negative number
//! → the default, out of range → clamped, a wrong type → the default, an unknown key → ignored,
//! each with a [`Warning`]); a run-time patch strictly ([`Patchable::patched`]), behind a
//! [`Revisioned`](crate::settings::Revisioned) fence.

use serde::Serialize;
use serde_json::Value;

use crate::settings::file::{FileReader, Warning};
use crate::settings::patch::{self, FieldError};
use crate::settings::{Patchable, Patched};

const MAX_OVERFLOW_RETRIES: &str = "maxOverflowRetries";
const KEEP_RECENT_MESSAGES: &str = "keepRecentMessages";

/// The default `maxOverflowRetries` (per turn).
pub const DEFAULT_MAX_OVERFLOW_RETRIES: u32 = 1;
/// The default `keepRecentMessages`.
pub const DEFAULT_KEEP_RECENT_MESSAGES: u32 = 6;
/// The largest `maxOverflowRetries`.
pub const MAX_OVERFLOW_RETRIES_BOUND: u32 = 10;
/// The bounds of `keepRecentMessages`.
pub const KEEP_RECENT_MESSAGES_BOUNDS: (u32, u32) = (1, 1000);

/// `compaction`'s settings. Valid by construction: both fields within their bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionSettings {
    max_overflow_retries: u32,
    keep_recent_messages: u32,
}

impl Default for CompactionSettings {
    fn default() -> Self {
        CompactionSettings {
            max_overflow_retries: DEFAULT_MAX_OVERFLOW_RETRIES,
            keep_recent_messages: DEFAULT_KEEP_RECENT_MESSAGES,
        }
    }
}

impl CompactionSettings {
    /// The keys, in the order `changed` lists them.
    pub const KEYS: &'static [&'static str] = &[MAX_OVERFLOW_RETRIES, KEEP_RECENT_MESSAGES];

    /// Reads a configuration file's value (found at `path`) leniently: the settings and every
    /// fallback as a [`Warning`]. `null` is the defaults.
    pub fn from_file(value: &Value, path: &str) -> (Self, Vec<Warning>) {
        let (min_keep, max_keep) = KEEP_RECENT_MESSAGES_BOUNDS;
        let mut file = FileReader::new(value, path, Self::KEYS);
        let settings = CompactionSettings {
            max_overflow_retries: file.integer(
                MAX_OVERFLOW_RETRIES,
                DEFAULT_MAX_OVERFLOW_RETRIES,
                0..=MAX_OVERFLOW_RETRIES_BOUND,
            ),
            keep_recent_messages: file.integer(
                KEEP_RECENT_MESSAGES,
                DEFAULT_KEEP_RECENT_MESSAGES,
                min_keep..=max_keep,
            ),
        };
        (settings, file.finish())
    }

    /// How many compactions a turn may make (0 = inert).
    pub fn max_overflow_retries(&self) -> u32 {
        self.max_overflow_retries
    }

    /// How many of the newest messages a compaction keeps (besides the latest user message).
    pub fn keep_recent_messages(&self) -> u32 {
        self.keep_recent_messages
    }

    /// The settings as JSON, with the file's keys.
    pub fn to_json(&self) -> Value {
        // Serializing two integers cannot fail.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl Patchable for CompactionSettings {
    fn patched(&self, value: &Value) -> Result<Patched<Self>, FieldError> {
        let fields = patch::fields(value, Self::KEYS)?;
        let mut next = *self;
        if let Some(v) = fields.get(MAX_OVERFLOW_RETRIES) {
            next.max_overflow_retries =
                patch::integer(v, MAX_OVERFLOW_RETRIES, 0..=MAX_OVERFLOW_RETRIES_BOUND)?;
        }
        if let Some(v) = fields.get(KEEP_RECENT_MESSAGES) {
            let (min, max) = KEEP_RECENT_MESSAGES_BOUNDS;
            next.keep_recent_messages = patch::integer(v, KEEP_RECENT_MESSAGES, min..=max)?;
        }
        let mut changed = Vec::new();
        if next.max_overflow_retries != self.max_overflow_retries {
            changed.push(MAX_OVERFLOW_RETRIES);
        }
        if next.keep_recent_messages != self.keep_recent_messages {
            changed.push(KEEP_RECENT_MESSAGES);
        }
        Ok(Patched { settings: next, changed })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn settings(max: u32, keep: u32) -> CompactionSettings {
        CompactionSettings { max_overflow_retries: max, keep_recent_messages: keep }
    }

    #[test]
    fn the_file_is_read_leniently() {
        let p = "plugins[1].config";
        let cases: Vec<(Value, CompactionSettings, Vec<String>)> = vec![
            (Value::Null, settings(1, 6), vec![]),
            (json!({}), settings(1, 6), vec![]),
            (json!({"maxOverflowRetries": 0, "keepRecentMessages": 2}), settings(0, 2), vec![]),
            (
                json!({"maxOverflowRetries": -1, "keepRecentMessages": -6}),
                settings(1, 6),
                vec![
                    format!("{p}.maxOverflowRetries: -1 is negative; using the default 1"),
                    format!("{p}.keepRecentMessages: -6 is negative; using the default 6"),
                ],
            ),
            (
                json!({"maxOverflowRetries": 50, "keepRecentMessages": 0}),
                settings(10, 1),
                vec![
                    format!("{p}.maxOverflowRetries: 50 is outside 0..=10; clamped to 10"),
                    format!("{p}.keepRecentMessages: 0 is outside 1..=1000; clamped to 1"),
                ],
            ),
            (
                json!({"keepRecentMessages": "6", "keep": 3}),
                settings(1, 6),
                vec![
                    format!(
                        "{p}.keep: unknown key (expected one of: maxOverflowRetries, \
                         keepRecentMessages); ignored"
                    ),
                    format!(
                        "{p}.keepRecentMessages: must be an integer, got \"6\"; using the default 6"
                    ),
                ],
            ),
        ];
        for (value, expected, warnings) in cases {
            let (got, got_warnings) = CompactionSettings::from_file(&value, p);
            let got_warnings: Vec<String> = got_warnings.iter().map(ToString::to_string).collect();
            assert_eq!((got, got_warnings), (expected, warnings), "{value}");
        }
        assert_eq!(
            CompactionSettings::default().to_json(),
            json!({"maxOverflowRetries": 1, "keepRecentMessages": 6})
        );
    }

    #[test]
    fn a_patch_is_strict_and_reports_what_changed() {
        let base = CompactionSettings::default();
        let ok: Vec<(Value, CompactionSettings, Vec<&str>)> = vec![
            (json!({}), base, vec![]),
            (json!({"keepRecentMessages": 6}), base, vec![]),
            (json!({"keepRecentMessages": 10}), settings(1, 10), vec!["keepRecentMessages"]),
            (
                json!({"keepRecentMessages": 2, "maxOverflowRetries": 0}),
                settings(0, 2),
                vec!["maxOverflowRetries", "keepRecentMessages"],
            ),
        ];
        for (patch, expected, changed) in ok {
            assert_eq!(
                base.patched(&patch),
                Ok(Patched { settings: expected, changed }),
                "{patch}"
            );
        }
        let refused = [
            (
                json!({"keepRecentMessages": 0}),
                "keepRecentMessages: must be an integer within 1..=1000, got 0",
            ),
            (
                json!({"maxOverflowRetries": 11}),
                "maxOverflowRetries: must be an integer within 0..=10, got 11",
            ),
            (
                json!({"keep": 1}),
                "keep: unknown key (expected one of: maxOverflowRetries, keepRecentMessages)",
            ),
        ];
        for (patch, expected) in refused {
            assert_eq!(base.patched(&patch).unwrap_err().to_string(), expected);
        }
    }
}
