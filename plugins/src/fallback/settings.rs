//! `fallback`'s settings: five fields, their defaults and bounds, read strictly both ways they
//! arrive (a configuration file and a run-time patch).
//!
//! | key | type | default | bounds |
//! |---|---|---|---|
//! | `routes` | list of route names | — (required) | ≥ 1 name, none twice; order = preference |
//! | `codes` | list of codes | `RATE_LIMIT QUOTA SERVER TIMEOUT TRANSPORT EMPTY_RESPONSE PROVIDER_ERROR` | ≥ 1 code; never a hard-floor code |
//! | `eagerCodes` | list of codes | `QUOTA` | may be empty; each one of `codes` |
//! | `maxWaitMs` | integer | 30000 | 0..=2147483647 |
//! | `cooldownMs` | integer | 60000 | 0..=2147483647; 0 = no cooldown |
//!
//! - [`FallbackSettings::from_file`] reads a configuration file strictly, like `llm-retry`'s:
//!   `routes` is required, an unknown key or an invalid value is an error naming the field
//!   (there is no safe value to fall back to for a route name).
//! - [`Patchable::patched`] reads a run-time patch with the same rules; wrap the settings in a
//!   [`Revisioned`](crate::settings::Revisioned) for the revision fence.
//!
//! One rule spans two fields: every eager code is one of `codes` (a code outside `codes` never
//! switches, so an eager one there would be a setting without effect). A patch that drops a code
//! `eagerCodes` still lists is refused at `codes`; one that lists an eager code outside `codes`
//! at `eagerCodes[i]`.

use rein_runtime::failure::{self, HARD_FLOOR};
use rein_runtime::retry_policy::field_path;
use serde::Serialize;
use serde_json::Value;

use crate::settings::file::describe;
use crate::settings::patch::{self, FieldError};
use crate::settings::{Patchable, Patched};

const ROUTES: &str = "routes";
const CODES: &str = "codes";
const EAGER_CODES: &str = "eagerCodes";
const MAX_WAIT_MS: &str = "maxWaitMs";
const COOLDOWN_MS: &str = "cooldownMs";

/// The default `codes`: the transient codes and the quota, in this order.
pub const DEFAULT_CODES: [&str; 7] = [
    failure::RATE_LIMIT,
    failure::QUOTA,
    failure::SERVER,
    failure::TIMEOUT,
    failure::TRANSPORT,
    failure::EMPTY_RESPONSE,
    failure::PROVIDER_ERROR,
];
/// The default `eagerCodes`: a quota does not come back in seconds, so its route is left at once.
pub const DEFAULT_EAGER_CODES: [&str; 1] = [failure::QUOTA];
/// The default `maxWaitMs`: a provider that asks for a longer wait is left at once.
pub const DEFAULT_MAX_WAIT_MS: u32 = 30_000;
/// The default `cooldownMs`.
pub const DEFAULT_COOLDOWN_MS: u32 = 60_000;
/// The largest `maxWaitMs` and `cooldownMs` (2^31 − 1, the largest timer delay).
pub const MAX_MS: u32 = 2_147_483_647;

/// `fallback`'s settings. Valid by construction: at least one route, none twice; at least one
/// code, none twice, none of the hard floor; every eager code one of the codes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FallbackSettings {
    routes: Vec<String>,
    codes: Vec<String>,
    eager_codes: Vec<String>,
    max_wait_ms: u32,
    cooldown_ms: u32,
}

impl FallbackSettings {
    /// The keys, in the order `changed` lists them.
    pub const KEYS: &'static [&'static str] =
        &[ROUTES, CODES, EAGER_CODES, MAX_WAIT_MS, COOLDOWN_MS];

    /// The defaults with `routes` as the fallback routes, in order of preference: an error
    /// naming `routes[i]` for an empty or repeated name, or `routes` for an empty list.
    pub fn new<S: Into<String>>(routes: impl IntoIterator<Item = S>) -> Result<Self, FieldError> {
        let routes: Vec<Value> = routes.into_iter().map(|r| Value::String(r.into())).collect();
        Self::from_file(&serde_json::json!({ ROUTES: routes }))
    }

    /// Reads a configuration file's value strictly: `routes` is required, every other key takes
    /// its default when absent; an unknown key or an invalid value is an error naming the field
    /// (relative to the value: `routes[1]`, `eagerCodes`).
    pub fn from_file(value: &Value) -> Result<Self, FieldError> {
        let fields = patch::fields(value, Self::KEYS)?;
        if !fields.contains_key(ROUTES) {
            return Err(FieldError::new(
                ROUTES,
                "required: the routes to fall back to, in order of preference",
            ));
        }
        let base = FallbackSettings {
            routes: Vec::new(),
            codes: DEFAULT_CODES.iter().map(|c| (*c).to_owned()).collect(),
            eager_codes: DEFAULT_EAGER_CODES.iter().map(|c| (*c).to_owned()).collect(),
            max_wait_ms: DEFAULT_MAX_WAIT_MS,
            cooldown_ms: DEFAULT_COOLDOWN_MS,
        };
        base.patched(value).map(|patched| patched.settings)
    }

    /// The fallback routes, in order of preference.
    pub fn routes(&self) -> &[String] {
        &self.routes
    }

    /// The codes that may switch.
    pub fn codes(&self) -> &[String] {
        &self.codes
    }

    /// The codes that switch at once, without asking the rest of the chain.
    pub fn eager_codes(&self) -> &[String] {
        &self.eager_codes
    }

    /// The longest provider delay (`Retry-After`) worth waiting for on the failing route.
    pub fn max_wait_ms(&self) -> u32 {
        self.max_wait_ms
    }

    /// How long a route that failed with `RATE_LIMIT` or `QUOTA` is skipped (at least; a longer
    /// provider delay wins).
    pub fn cooldown_ms(&self) -> u32 {
        self.cooldown_ms
    }

    /// Whether `codes` lists `code`.
    pub fn lists(&self, code: &str) -> bool {
        self.codes.iter().any(|c| c == code)
    }

    /// Whether `eagerCodes` lists `code`.
    pub fn is_eager(&self, code: &str) -> bool {
        self.eager_codes.iter().any(|c| c == code)
    }

    /// The settings as JSON, with the file's and a patch's keys (what a settings page shows).
    pub fn to_json(&self) -> Value {
        // Serializing plain fields cannot fail.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl Patchable for FallbackSettings {
    fn patched(&self, value: &Value) -> Result<Patched<Self>, FieldError> {
        let fields = patch::fields(value, Self::KEYS)?;
        let mut next = self.clone();
        if let Some(v) = fields.get(ROUTES) {
            next.routes = route_names(v, ROUTES)?;
        }
        if let Some(v) = fields.get(CODES) {
            let codes = patch::codes(v, CODES)?;
            for (i, code) in codes.iter().enumerate() {
                if code == failure::CIRCUIT_OPEN {
                    return Err(FieldError::new(
                        format!("{CODES}[{i}]"),
                        format_args!("{code} always switches at once and cannot be listed"),
                    ));
                }
                if HARD_FLOOR.contains(&code.as_str()) {
                    return Err(FieldError::new(
                        format!("{CODES}[{i}]"),
                        format_args!("{code} never switches (hard floor) and cannot be listed"),
                    ));
                }
            }
            // Reordering alone is not an edit: the order in force stays.
            if !patch::same_codes(&codes, &self.codes) {
                next.codes = codes;
            }
        }
        if let Some(v) = fields.get(EAGER_CODES) {
            let codes = match v.as_array() {
                Some(list) if list.is_empty() => Vec::new(),
                _ => patch::codes(v, EAGER_CODES)?,
            };
            if !patch::same_codes(&codes, &self.eager_codes) {
                next.eager_codes = codes;
            }
        }
        for (i, code) in next.eager_codes.iter().enumerate() {
            if next.lists(code) {
                continue;
            }
            return Err(if fields.contains_key(EAGER_CODES) {
                FieldError::new(
                    format!("{EAGER_CODES}[{i}]"),
                    format_args!(
                        "{code} is not one of codes (a code outside codes never switches)"
                    ),
                )
            } else {
                FieldError::new(
                    CODES,
                    format_args!("must keep {code}, which eagerCodes lists (remove it there too)"),
                )
            });
        }
        if let Some(v) = fields.get(MAX_WAIT_MS) {
            next.max_wait_ms = patch::integer(v, MAX_WAIT_MS, 0..=MAX_MS)?;
        }
        if let Some(v) = fields.get(COOLDOWN_MS) {
            next.cooldown_ms = patch::integer(v, COOLDOWN_MS, 0..=MAX_MS)?;
        }
        let changed = Self::KEYS
            .iter()
            .copied()
            .filter(|key| match *key {
                ROUTES => next.routes != self.routes,
                CODES => next.codes != self.codes,
                EAGER_CODES => next.eager_codes != self.eager_codes,
                MAX_WAIT_MS => next.max_wait_ms != self.max_wait_ms,
                _ => next.cooldown_ms != self.cooldown_ms,
            })
            .collect();
        Ok(Patched { settings: next, changed })
    }
}

/// A list of at least one route name, each a non-empty string, none repeated. The order is the
/// order of preference.
fn route_names(value: &Value, key: &str) -> Result<Vec<String>, FieldError> {
    let Some(entries) = value.as_array() else {
        return Err(FieldError::new(
            key,
            format_args!("must be a list of route names, got {}", describe(value)),
        ));
    };
    if entries.is_empty() {
        return Err(FieldError::new(key, "must list at least one route"));
    }
    let mut routes: Vec<String> = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let at = || field_path(key, &format!("[{i}]"));
        let route = match entry.as_str() {
            Some("") => return Err(FieldError::new(at(), "must be a non-empty route name")),
            Some(route) => route,
            None => {
                return Err(FieldError::new(
                    at(),
                    format_args!("must be a route name, got {}", describe(entry)),
                ));
            }
        };
        if let Some(first) = routes.iter().position(|r| r == route) {
            return Err(FieldError::new(
                at(),
                format_args!("route {route:?} is already listed (first at index {first})"),
            ));
        }
        routes.push(route.to_owned());
    }
    Ok(routes)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn file(value: Value) -> Result<FallbackSettings, String> {
        FallbackSettings::from_file(&value).map_err(|e| e.to_string())
    }

    #[test]
    fn the_defaults_are_the_table_and_routes_are_required() {
        let settings = FallbackSettings::new(["backup"]).unwrap();
        assert_eq!(
            settings.to_json(),
            json!({
                "routes": ["backup"],
                "codes": ["RATE_LIMIT", "QUOTA", "SERVER", "TIMEOUT", "TRANSPORT",
                          "EMPTY_RESPONSE", "PROVIDER_ERROR"],
                "eagerCodes": ["QUOTA"],
                "maxWaitMs": 30000,
                "cooldownMs": 60000,
            })
        );
        assert!(settings.lists("RATE_LIMIT") && !settings.lists("AUTH"));
        assert!(settings.is_eager("QUOTA") && !settings.is_eager("RATE_LIMIT"));
        let required = "routes: required: the routes to fall back to, in order of preference";
        assert_eq!(file(json!({})), Err(required.to_owned()));
        assert_eq!(file(json!({"codes": ["SERVER"]})), Err(required.to_owned()));
        assert_eq!(file(Value::Null), Err("must be an object, got null".to_owned()));
    }

    #[test]
    fn a_file_is_read_strictly_naming_the_field() {
        let keys = "expected one of: routes, codes, eagerCodes, maxWaitMs, cooldownMs";
        let cases: Vec<(Value, String)> = vec![
            (json!({"routes": []}), "routes: must list at least one route".into()),
            (json!({"routes": "backup"}), "routes: must be a list of route names, got \"backup\"".into()),
            (json!({"routes": ["a", ""]}), "routes[1]: must be a non-empty route name".into()),
            (json!({"routes": ["a", 3]}), "routes[1]: must be a route name, got 3".into()),
            (
                json!({"routes": ["a", "b", "a"]}),
                "routes[2]: route \"a\" is already listed (first at index 0)".into(),
            ),
            (json!({"routes": ["a"], "route": ["b"]}), format!("route: unknown key ({keys})")),
            (
                json!({"routes": ["a"], "codes": ["SERVER", "AUTH"]}),
                "codes[1]: AUTH never switches (hard floor) and cannot be listed".into(),
            ),
            (json!({"routes": ["a"], "codes": []}), "codes: must list at least one code".into()),
            (
                json!({"routes": ["a"], "codes": ["SERVER"]}),
                "codes: must keep QUOTA, which eagerCodes lists (remove it there too)".into(),
            ),
            (
                json!({"routes": ["a"], "eagerCodes": ["QUOTA", "ACCOUNT_QUOTA"]}),
                "eagerCodes[1]: ACCOUNT_QUOTA is not one of codes (a code outside codes never switches)".into(),
            ),
            (
                json!({"routes": ["a"], "eagerCodes": ["AUTH"]}),
                "eagerCodes[0]: AUTH is not one of codes (a code outside codes never switches)".into(),
            ),
            (
                json!({"routes": ["a"], "maxWaitMs": -1}),
                "maxWaitMs: must be an integer within 0..=2147483647, got -1".into(),
            ),
            (
                json!({"routes": ["a"], "cooldownMs": 1.5}),
                "cooldownMs: must be an integer within 0..=2147483647, got 1.5".into(),
            ),
            (
                json!({"routes": ["a"], "cooldownMs": "60000"}),
                "cooldownMs: must be an integer within 0..=2147483647, got \"60000\"".into(),
            ),
        ];
        for (value, expected) in cases {
            assert_eq!(file(value.clone()), Err(expected), "{value}");
        }
    }

    #[test]
    fn valid_files_are_read_as_written() {
        let settings = file(json!({
            "routes": ["second", "first"], "codes": ["SERVER", "ACCOUNT_QUOTA"],
            "eagerCodes": ["ACCOUNT_QUOTA"], "maxWaitMs": 0, "cooldownMs": 0,
        }))
        .unwrap();
        assert_eq!(settings.routes(), ["second", "first"], "the order is the preference");
        assert_eq!(settings.codes(), ["SERVER", "ACCOUNT_QUOTA"]);
        assert_eq!(settings.eager_codes(), ["ACCOUNT_QUOTA"]);
        assert_eq!((settings.max_wait_ms(), settings.cooldown_ms()), (0, 0));
        let never_eager = file(json!({"routes": ["a"], "eagerCodes": []})).unwrap();
        assert!(never_eager.eager_codes().is_empty(), "no code is eager");
    }

    #[test]
    fn a_patch_changes_what_it_names_and_says_what_changed() {
        let base = FallbackSettings::new(["a", "b"]).unwrap();
        let cases: Vec<(Value, Result<Vec<&str>, &str>)> = vec![
            (json!({}), Ok(vec![])),
            (json!({"routes": ["b", "a"]}), Ok(vec!["routes"])),
            (json!({"routes": ["a", "b"]}), Ok(vec![])),
            (
                json!({"codes": ["QUOTA", "RATE_LIMIT", "SERVER", "TIMEOUT", "TRANSPORT",
                                 "EMPTY_RESPONSE", "PROVIDER_ERROR"]}),
                Ok(vec![]),
            ),
            (json!({"codes": ["QUOTA"], "eagerCodes": []}), Ok(vec!["codes", "eagerCodes"])),
            (json!({"maxWaitMs": 5000, "cooldownMs": 60000}), Ok(vec!["maxWaitMs"])),
            (
                json!({"codes": ["SERVER"]}),
                Err("codes: must keep QUOTA, which eagerCodes lists (remove it there too)"),
            ),
            (json!({"codes": ["SERVER"], "eagerCodes": []}), Ok(vec!["codes", "eagerCodes"])),
            (json!({"routes": null}), Err("routes: must be a list of route names, got null")),
            (
                json!({"enabled": false}),
                Err(
                    "enabled: unknown key (expected one of: routes, codes, eagerCodes, maxWaitMs, cooldownMs)",
                ),
            ),
        ];
        for (patch, expected) in cases {
            let got = base.patched(&patch).map(|p| p.changed).map_err(|e| e.to_string());
            assert_eq!(got, expected.map_err(str::to_owned), "{patch}");
        }
        let patched = base.patched(&json!({"routes": ["b", "a"], "maxWaitMs": 1})).unwrap();
        assert_eq!(patched.settings.routes(), ["b", "a"]);
        assert_eq!(patched.settings.max_wait_ms(), 1);
        assert_eq!(base.routes(), ["a", "b"], "the base is unchanged");
    }
}
