//! Where each plugin setting in force came from: its default, the configuration file (at a
//! line), or the store (saved at a revision) — what `rein config show` prints and the console's
//! Plugins page shows beside each value.
//!
//! A pure function of four things: the settings the plugin was built with (defaults overlaid
//! with the file's values), the keys the file set (with their lines), the settings in force now
//! with their revision, and whether any were saved. A value in force that differs from the
//! built one came from a saved revision (the store's record at the current revision holds it);
//! a value equal to the built one came from the file if the file set that key to it, else from
//! the default (a lenient plugin that could not use the file's value took its default).

use std::collections::BTreeMap;

use serde_json::Value;

/// Where one value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// The plugin's default.
    Default,
    /// The configuration file: `PATH:LINE`.
    File(String),
    /// A change accepted at run time and saved to the store, whose record is now at this
    /// revision.
    Saved(u64),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Default => f.write_str("default"),
            Self::File(at) => f.write_str(at),
            Self::Saved(revision) => write!(f, "saved at revision {revision}"),
        }
    }
}

/// The source of every key of `now` (the settings in force at `revision`), given the `built`
/// settings and the keys the `file` set, each with where (`PATH:LINE`) and its value there.
pub(crate) fn sources(
    built: &Value,
    file: &BTreeMap<String, (String, Value)>,
    now: &Value,
    revision: u64,
) -> BTreeMap<String, Source> {
    let Some(now) = now.as_object() else { return BTreeMap::new() };
    now.iter()
        .map(|(key, value)| {
            let source = if revision > 0 && built.get(key) != Some(value) {
                Source::Saved(revision)
            } else if let Some((at, _)) = file.get(key).filter(|(_, set)| set == value) {
                Source::File(at.clone())
            } else {
                Source::Default
            };
            (key.clone(), source)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_value_is_the_default_the_files_or_a_saved_revisions() {
        let built = json!({"a": 1, "b": 2, "c": 3});
        let file = BTreeMap::from([
            ("b".to_owned(), ("rein.toml:7".to_owned(), json!(2))),
            ("c".to_owned(), ("rein.toml:8".to_owned(), json!(-3))), // refused: built is 3
        ]);
        let f = || Source::File("rein.toml:7".to_owned());
        let cases = [
            // (in force, revision) → sources of a, b, c
            (json!({"a": 1, "b": 2, "c": 3}), 0, [Source::Default, f(), Source::Default]),
            (json!({"a": 9, "b": 2, "c": 3}), 2, [Source::Saved(2), f(), Source::Default]),
            (
                json!({"a": 1, "b": 5, "c": 3}),
                4,
                [Source::Default, Source::Saved(4), Source::Default],
            ),
            // Saved back to the built value: the value is the file's or the default again.
            (json!({"a": 1, "b": 2, "c": 3}), 3, [Source::Default, f(), Source::Default]),
        ];
        for (now, revision, want) in cases {
            let got = sources(&built, &file, &now, revision);
            let got: Vec<Source> = ["a", "b", "c"].iter().map(|k| got[*k].clone()).collect();
            assert_eq!(got, want, "{now} at {revision}");
        }
        assert_eq!(f().to_string(), "rein.toml:7");
        assert_eq!(Source::Saved(4).to_string(), "saved at revision 4");
    }
}
