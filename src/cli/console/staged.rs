//! What a settings patch contains, from a form's staged edits.
//!
//! The Plugins page keeps edits in the form (staged) until Save; each time they change, and on
//! Save, it sends the whole form as it stands — a switch as `true`/`false`, a number as the text
//! typed, the code switches as `{"switches": [codes switched on], "other": "text, one per
//! line"}`, route names as the text typed (one per line) — with the revision the form was drawn
//! at. [`stage`] turns that into:
//!
//! - the **patch**: only the fields whose staged value differs from the accepted one (a number
//!   compared as a number, `1000.0` is `1000`; codes as a set, so reordering alone is no edit);
//! - the **problems**, each naming its field, that block the save: a number that does not parse
//!   or is outside the field's bounds (`extraRetries: must be an integer within 0..=10, got
//!   11`), a code list left empty (where it must hold one), a code typed under "other codes"
//!   that is not one code, is listed twice or has a switch of its own, a never-retried code
//!   switched on, a route list left empty, a route name with a space or listed twice.
//!
//! The code list a patch carries is the switched-on codes in catalogue order, then the other
//! codes in the order typed; a route list keeps the order typed (it is the order of preference,
//! so reordering is an edit). The bounds are the plugins' own constants; the plugin stays the
//! authority (the server also runs the patch through `Runtime::check_plugin_settings` before it
//! saves), the page's checks only make sure a save is never sent that would be refused.
//!
//! [`form`] has the fields of the plugins whose settings the console can edit: `auto-retry`,
//! `compaction` and `fallback`.

use rein_plugins::auto_retry::catalogue::{CATALOGUE, CodeGroup, is_hard_floor};
use rein_plugins::auto_retry::settings as auto_retry;
use rein_plugins::compaction::settings as compaction;
use rein_plugins::fallback::settings as fallback;
use rein_runtime::json_number;
use serde_json::{Map, Value};

/// How a field is edited.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Kind {
    /// A switch (`true`/`false`).
    Switch,
    /// A whole number within `min..=max`, typed.
    Integer {
        /// The smallest value.
        min: u32,
        /// The largest value.
        max: u32,
    },
    /// A number within `[min, max]`, typed.
    Number {
        /// The smallest value.
        min: f64,
        /// The largest value.
        max: f64,
    },
    /// A code list: a switch per catalogue code (in the catalogue's three groups when
    /// `grouped`: they are `auto-retry`'s defaults) and "other codes", one per line. `empty`:
    /// the problem an empty list is, or `None` when an empty list is a valid value.
    Codes {
        /// Show the catalogue's groups.
        grouped: bool,
        /// Why an empty list cannot be saved (`None`: it can).
        empty: Option<&'static str>,
    },
    /// Route names, one per line, in order of preference (at least one).
    Routes,
}

/// One field of a settings form.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Field {
    /// The settings key (what a patch names).
    pub(crate) key: &'static str,
    /// How it is edited.
    pub(crate) kind: Kind,
    /// What it means, in a few words.
    pub(crate) help: &'static str,
}

const AUTO_RETRY: &[Field] = &[
    Field {
        key: "enabled",
        kind: Kind::Switch,
        help: "the master switch: off takes over nothing, and ends the waits in progress at once",
    },
    Field {
        key: "extraRetries",
        kind: Kind::Integer { min: 0, max: auto_retry::MAX_EXTRA_RETRIES },
        help: "attempts on top of llm-retry's budget; 0 keeps it inert",
    },
    Field {
        key: "initialDelayMs",
        kind: Kind::Integer { min: 0, max: auto_retry::MAX_DELAY_BOUND_MS },
        help: "the first delay when llm-retry never tried",
    },
    Field {
        key: "maxDelayMs",
        kind: Kind::Integer { min: 0, max: auto_retry::MAX_DELAY_BOUND_MS },
        help: "the ceiling of every delay, a provider's Retry-After included",
    },
    Field {
        key: "jitterRatio",
        kind: Kind::Number { min: 0.0, max: 1.0 },
        help: "symmetric jitter of the own delays",
    },
    Field {
        key: "retryableCodes",
        kind: Kind::Codes {
            grouped: true,
            empty: Some(
                "no code left. An empty list would fall back to the default codes, not take \
                 over nothing: keep at least one, or switch enabled off (or set extraRetries to \
                 0) to take over nothing",
            ),
        },
        help: "the failure codes auto-retry is willing to take over (at least one)",
    },
];

const FALLBACK: &[Field] = &[
    Field {
        key: "routes",
        kind: Kind::Routes,
        help: "the routes a turn moves to when its route keeps failing, in order of preference, \
               one per line (each a route this runtime serves)",
    },
    Field {
        key: "codes",
        kind: Kind::Codes {
            grouped: false,
            empty: Some(
                "no code left: keep at least one (to switch nothing, remove fallback from the \
                 chain)",
            ),
        },
        help: "the failure codes that may move a turn to another route (at least one)",
    },
    Field {
        key: "eagerCodes",
        kind: Kind::Codes { grouped: false, empty: None },
        help: "codes that switch at once, without retrying the failing route (each also one of \
               codes; none: the rest of the chain always retries first)",
    },
    Field {
        key: "maxWaitMs",
        kind: Kind::Integer { min: 0, max: fallback::MAX_MS },
        help: "a provider's Retry-After longer than this switches at once",
    },
    Field {
        key: "cooldownMs",
        kind: Kind::Integer { min: 0, max: fallback::MAX_MS },
        help: "how long a rate-limited or out-of-quota route is skipped, for every session; 0: \
               never skipped",
    },
];

const COMPACTION: &[Field] = &[
    Field {
        key: "maxOverflowRetries",
        kind: Kind::Integer { min: 0, max: compaction::MAX_OVERFLOW_RETRIES_BOUND },
        help: "compactions per turn after a context overflow; 0 keeps it inert",
    },
    Field {
        key: "keepRecentMessages",
        kind: Kind::Integer {
            min: compaction::KEEP_RECENT_MESSAGES_BOUNDS.0,
            max: compaction::KEEP_RECENT_MESSAGES_BOUNDS.1,
        },
        help: "the newest messages a compaction keeps, besides the latest user message",
    },
];

/// The form of the plugin named `plugin`, when the console can edit its settings.
pub(crate) fn form(plugin: &str) -> Option<&'static [Field]> {
    match plugin {
        rein_plugins::auto_retry::NAME => Some(AUTO_RETRY),
        rein_plugins::compaction::NAME => Some(COMPACTION),
        rein_plugins::fallback::NAME => Some(FALLBACK),
        _ => None,
    }
}

/// A staged value that blocks the save.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Problem {
    /// The field's key.
    pub(crate) field: String,
    /// What is wrong, starting with the field (`extraRetries: must be …`).
    pub(crate) message: String,
}

impl Problem {
    fn new(field: &str, message: impl std::fmt::Display) -> Self {
        Problem { field: field.to_owned(), message: format!("{field}: {message}") }
    }
}

/// A form's staged edits, read.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Staged {
    /// The fields whose staged value differs from the accepted one, as a patch.
    pub(crate) patch: Map<String, Value>,
    /// The keys of `patch`, in the form's order.
    pub(crate) changed: Vec<&'static str>,
    /// What blocks the save, in the form's order.
    pub(crate) problems: Vec<Problem>,
}

/// Reads `staged` (a form's fields as the page sends them) against `accepted` (the settings the
/// form was drawn from): the patch of what changed and the problems that block the save. A
/// field the form did not send is unchanged; a key that is not a field of the form is a
/// problem.
pub(crate) fn stage(fields: &[Field], accepted: &Value, staged: &Map<String, Value>) -> Staged {
    let mut out = Staged::default();
    for key in staged.keys() {
        if !fields.iter().any(|f| f.key == key) {
            out.problems.push(Problem::new(key, "not a field of this form"));
        }
    }
    for field in fields {
        let Some(value) = staged.get(field.key) else { continue };
        let current = accepted.get(field.key);
        let read = match field.kind {
            Kind::Switch => switch(field.key, value, current),
            Kind::Integer { min, max } => integer(field.key, value, min, max, current),
            Kind::Number { min, max } => number(field.key, value, min, max, current),
            Kind::Codes { empty, .. } => codes(field.key, value, current, empty),
            Kind::Routes => routes(field.key, value, current),
        };
        match read {
            Ok(Some(patched)) => {
                out.patch.insert(field.key.to_owned(), patched);
                out.changed.push(field.key);
            }
            Ok(None) => {}
            Err(mut problems) => out.problems.append(&mut problems),
        }
    }
    out
}

/// A field's staged value: `Some(value)` when it changed, `None` when it did not.
type Read = Result<Option<Value>, Vec<Problem>>;

fn switch(key: &str, value: &Value, current: Option<&Value>) -> Read {
    let Some(on) = value.as_bool() else {
        return Err(vec![Problem::new(key, format!("must be true or false, got {value}"))]);
    };
    Ok((current.and_then(Value::as_bool) != Some(on)).then_some(Value::Bool(on)))
}

/// The text typed (a program may send a number as a number).
fn typed(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.trim().to_owned()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn shown(text: &str) -> String {
    if text.is_empty() { "nothing (the field is empty)".to_owned() } else { format!("{text:?}") }
}

fn integer(key: &str, value: &Value, min: u32, max: u32, current: Option<&Value>) -> Read {
    let refuse = |got: String| {
        vec![Problem::new(key, format!("must be an integer within {min}..={max}, got {got}"))]
    };
    let Some(text) = typed(value) else { return Err(refuse(value.to_string())) };
    let parsed = text.parse::<i64>().ok().or_else(|| {
        // `3.0` is 3, as the runtime reads it.
        text.parse::<f64>().ok().filter(|n| n.is_finite() && n.fract() == 0.0).and_then(|n| {
            #[allow(clippy::cast_possible_truncation)]
            let whole = n as i64;
            (whole as f64 == n).then_some(whole)
        })
    });
    let Some(n) = parsed else {
        let number = text.parse::<f64>().ok().filter(|n| n.is_finite());
        return Err(refuse(number.map_or_else(|| shown(&text), |_| text.clone())));
    };
    let Some(n) = u32::try_from(n).ok().filter(|n| (min..=max).contains(n)) else {
        return Err(refuse(n.to_string()));
    };
    let same = current.and_then(Value::as_f64) == Some(f64::from(n));
    Ok((!same).then(|| Value::from(n)))
}

fn number(key: &str, value: &Value, min: f64, max: f64, current: Option<&Value>) -> Read {
    let refuse = |got: String| {
        vec![Problem::new(
            key,
            format!(
                "must be a number within [{}, {}], got {got}",
                json_number::format(min),
                json_number::format(max)
            ),
        )]
    };
    let Some(text) = typed(value) else { return Err(refuse(value.to_string())) };
    // `inf` and `NaN` parse in Rust; they are not numbers a person types here.
    let parsed = text.parse::<f64>().ok().filter(|n| {
        n.is_finite() && text.chars().all(|c| c.is_ascii_digit() || ".+-eE".contains(c))
    });
    let Some(n) = parsed else { return Err(refuse(shown(&text))) };
    if !(min..=max).contains(&n) {
        return Err(refuse(text));
    }
    // `+ 0.0` turns a typed `-0` into 0.
    let n = n + 0.0;
    let same = current.and_then(Value::as_f64) == Some(n);
    Ok((!same).then(|| Value::Number(json_number::number(n))))
}

fn codes(key: &str, value: &Value, current: Option<&Value>, empty: Option<&str>) -> Read {
    let accepted: Vec<&str> = current
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let switches = value.get("switches").and_then(Value::as_array);
    let other = value.get("other").and_then(Value::as_str);
    let (Some(switches), Some(other)) = (switches, other) else {
        return Err(vec![Problem::new(
            key,
            format!(
                "must be {{\"switches\": [codes], \"other\": \"codes, one per line\"}}, got {value}"
            ),
        )]);
    };
    let mut problems = Vec::new();
    let mut on: Vec<&str> = Vec::new();
    for switch in switches {
        let Some(code) = switch.as_str() else {
            problems.push(Problem::new(key, format!("a switch must be a code, got {switch}")));
            continue;
        };
        if CodeGroup::of(code).is_none() {
            problems.push(Problem::new(key, format!("{code} has no switch")));
        } else if is_hard_floor(code) && !accepted.contains(&code) {
            problems.push(Problem::new(
                key,
                format!("{code} is never retried (hard floor) and cannot be switched on"),
            ));
        } else if !on.contains(&code) {
            on.push(code);
        }
    }
    // Switched-on codes in catalogue order.
    let mut list: Vec<String> = CATALOGUE
        .groups
        .iter()
        .flat_map(|group| group.codes)
        .filter(|info| on.contains(&info.code))
        .map(|info| info.code.to_owned())
        .collect();
    for line in other.lines().map(str::trim).filter(|line| !line.is_empty()) {
        if line.chars().any(char::is_whitespace) {
            problems.push(Problem::new(
                key,
                format!("{line:?} is not one code (other codes: one per line)"),
            ));
        } else if CodeGroup::of(line).is_some() {
            problems.push(Problem::new(
                key,
                format!("{line} has a switch of its own: use it rather than other codes"),
            ));
        } else if list.iter().any(|code| code == line) {
            problems.push(Problem::new(key, format!("{line} is listed twice in other codes")));
        } else {
            list.push(line.to_owned());
        }
    }
    if let Some(empty) = empty.filter(|_| list.is_empty() && problems.is_empty()) {
        problems.push(Problem::new(key, empty));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let same = list.len() == accepted.len() && list.iter().all(|c| accepted.contains(&c.as_str()));
    Ok((!same).then(|| Value::from(list)))
}

fn routes(key: &str, value: &Value, current: Option<&Value>) -> Read {
    let accepted: Vec<&str> = current
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(text) = value.as_str() else {
        return Err(vec![Problem::new(
            key,
            format!("must be route names, one per line, got {value}"),
        )]);
    };
    let mut problems = Vec::new();
    let mut list: Vec<&str> = Vec::new();
    for line in text.lines().map(str::trim).filter(|line| !line.is_empty()) {
        if line.chars().any(char::is_whitespace) {
            problems
                .push(Problem::new(key, format!("{line:?} is not one route name (one per line)")));
        } else if list.contains(&line) {
            problems.push(Problem::new(key, format!("{line} is listed twice")));
        } else {
            list.push(line);
        }
    }
    if list.is_empty() && problems.is_empty() {
        problems.push(Problem::new(key, "no route left: list at least one route to fall back to"));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    // The order is the preference: reordering is an edit.
    Ok((list != accepted).then(|| Value::from(list)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn accepted() -> Value {
        json!({
            "enabled": true, "extraRetries": 3, "initialDelayMs": 1000, "maxDelayMs": 60000,
            "jitterRatio": 0.2,
            "retryableCodes": ["EMPTY_RESPONSE", "RATE_LIMIT", "SERVER", "TIMEOUT", "TRANSPORT",
                               "PROVIDER_ERROR", "HTTP_418", "AUTH"],
        })
    }

    /// The form exactly as drawn from `accepted()`.
    fn untouched() -> Map<String, Value> {
        let Value::Object(form) = json!({
            "enabled": true, "extraRetries": "3", "initialDelayMs": "1000", "maxDelayMs": "60000",
            "jitterRatio": "0.2",
            "retryableCodes": {
                "switches": ["EMPTY_RESPONSE", "RATE_LIMIT", "SERVER", "TIMEOUT", "TRANSPORT",
                             "PROVIDER_ERROR", "AUTH"],
                "other": "HTTP_418\n",
            },
        }) else {
            unreachable!()
        };
        form
    }

    fn with(edits: Value) -> Map<String, Value> {
        let mut form = untouched();
        for (key, value) in edits.as_object().unwrap() {
            form.insert(key.clone(), value.clone());
        }
        form
    }

    fn codes(switches: &[&str], other: &str) -> Value {
        json!({"switches": switches, "other": other})
    }

    #[test]
    fn only_what_changed_is_patched() {
        let default_on =
            ["EMPTY_RESPONSE", "RATE_LIMIT", "SERVER", "TIMEOUT", "TRANSPORT", "PROVIDER_ERROR"];
        let mut reordered: Vec<&str> = default_on.to_vec();
        reordered.reverse();
        reordered.push("AUTH");
        let cases: Vec<(Value, Value)> = vec![
            (json!({}), json!({})),
            // Numbers compare as numbers; surrounding spaces are not an edit.
            (
                json!({"extraRetries": " 3 ", "initialDelayMs": "1000.0", "jitterRatio": "0.20"}),
                json!({}),
            ),
            (json!({"extraRetries": "5"}), json!({"extraRetries": 5})),
            (json!({"extraRetries": 5}), json!({"extraRetries": 5})),
            (json!({"enabled": false}), json!({"enabled": false})),
            (json!({"jitterRatio": "0.25"}), json!({"jitterRatio": 0.25})),
            (json!({"jitterRatio": "-0"}), json!({"jitterRatio": 0})),
            (json!({"jitterRatio": "1e-1"}), json!({"jitterRatio": 0.1})),
            (
                json!({"initialDelayMs": "600000", "maxDelayMs": "600000"}),
                json!({"initialDelayMs": 600000, "maxDelayMs": 600000}),
            ),
            // Codes: a set; the order of a patch is the catalogue's, then other codes as typed.
            (json!({"retryableCodes": codes(&reordered, "HTTP_418")}), json!({})),
            (
                json!({"retryableCodes": codes(&["SERVER", "QUOTA", "AUTH"], "B_CODE\n\nA_CODE  ")}),
                json!({"retryableCodes": ["SERVER", "QUOTA", "AUTH", "B_CODE", "A_CODE"]}),
            ),
            // A hard-floor code already listed may stay (shown on, disabled) or go.
            (
                json!({"retryableCodes": codes(&default_on, "HTTP_418")}),
                json!({"retryableCodes": ["EMPTY_RESPONSE", "RATE_LIMIT", "SERVER", "TIMEOUT",
                                          "TRANSPORT", "PROVIDER_ERROR", "HTTP_418"]}),
            ),
        ];
        for (edits, want) in cases {
            let staged = stage(AUTO_RETRY, &accepted(), &with(edits.clone()));
            assert_eq!(staged.problems, [], "{edits}");
            assert_eq!(Value::Object(staged.patch.clone()), want, "{edits}");
            let keys: Vec<&str> = want.as_object().unwrap().keys().map(String::as_str).collect();
            let mut changed = staged.changed.clone();
            changed.sort_unstable();
            assert_eq!(changed, keys, "{edits}");
        }
    }

    #[test]
    fn a_bad_value_blocks_the_save_and_names_its_field() {
        let cases: Vec<(Value, Vec<&str>)> = vec![
            (
                json!({"extraRetries": "11"}),
                vec!["extraRetries: must be an integer within 0..=10, got 11"],
            ),
            (
                json!({"extraRetries": "-1"}),
                vec!["extraRetries: must be an integer within 0..=10, got -1"],
            ),
            (
                json!({"extraRetries": "1.5"}),
                vec!["extraRetries: must be an integer within 0..=10, got 1.5"],
            ),
            (
                json!({"extraRetries": "1x"}),
                vec![r#"extraRetries: must be an integer within 0..=10, got "1x""#],
            ),
            (
                json!({"extraRetries": ""}),
                vec![
                    "extraRetries: must be an integer within 0..=10, got nothing (the field is empty)",
                ],
            ),
            (
                json!({"extraRetries": "99999999999999999999"}),
                vec!["extraRetries: must be an integer within 0..=10, got 99999999999999999999"],
            ),
            (
                json!({"extraRetries": null}),
                vec!["extraRetries: must be an integer within 0..=10, got null"],
            ),
            (
                json!({"initialDelayMs": "600001"}),
                vec!["initialDelayMs: must be an integer within 0..=600000, got 600001"],
            ),
            (
                json!({"jitterRatio": "1.5"}),
                vec!["jitterRatio: must be a number within [0, 1], got 1.5"],
            ),
            (
                json!({"jitterRatio": "NaN"}),
                vec![r#"jitterRatio: must be a number within [0, 1], got "NaN""#],
            ),
            (
                json!({"jitterRatio": "inf"}),
                vec![r#"jitterRatio: must be a number within [0, 1], got "inf""#],
            ),
            (
                json!({"jitterRatio": "0,5"}),
                vec![r#"jitterRatio: must be a number within [0, 1], got "0,5""#],
            ),
            (json!({"enabled": "no"}), vec![r#"enabled: must be true or false, got "no""#]),
            (json!({"extraRetires": "5"}), vec!["extraRetires: not a field of this form"]),
            // Two bad fields: both named, in the form's order.
            (
                json!({"maxDelayMs": "-5", "extraRetries": "11"}),
                vec![
                    "extraRetries: must be an integer within 0..=10, got 11",
                    "maxDelayMs: must be an integer within 0..=600000, got -5",
                ],
            ),
        ];
        for (edits, want) in cases {
            let staged = stage(AUTO_RETRY, &accepted(), &with(edits.clone()));
            let messages: Vec<&str> = staged.problems.iter().map(|p| p.message.as_str()).collect();
            assert_eq!(messages, want, "{edits}");
            let first = edits.as_object().unwrap().keys().next().unwrap().clone();
            assert!(staged.problems.iter().any(|p| p.field == first), "{edits}");
        }
    }

    #[test]
    fn code_lists_are_checked_while_staging() {
        let cases: Vec<(Value, &str)> = vec![
            (
                codes(&[], ""),
                "retryableCodes: no code left. An empty list would fall back to the default \
                 codes, not take over nothing: keep at least one, or switch enabled off (or set \
                 extraRetries to 0) to take over nothing",
            ),
            (codes(&[], " \n\n "), "retryableCodes: no code left."),
            (
                codes(&["SERVER", "INVALID_CREDENTIAL"], ""),
                "retryableCodes: INVALID_CREDENTIAL is never retried (hard floor) and cannot be \
                 switched on",
            ),
            (codes(&["SERVER", "NOPE"], ""), "retryableCodes: NOPE has no switch"),
            (
                codes(&["SERVER"], "QUOTA"),
                "retryableCodes: QUOTA has a switch of its own: use it rather than other codes",
            ),
            (codes(&["SERVER"], "X_1\nX_1"), "retryableCodes: X_1 is listed twice in other codes"),
            (
                codes(&["SERVER"], "TWO CODES"),
                r#"retryableCodes: "TWO CODES" is not one code (other codes: one per line)"#,
            ),
            (json!(["SERVER"]), "retryableCodes: must be {\"switches\": [codes], \"other\""),
        ];
        for (value, want) in cases {
            let staged = stage(AUTO_RETRY, &accepted(), &with(json!({"retryableCodes": value})));
            assert_eq!(staged.problems.len(), 1, "{value}: {:?}", staged.problems);
            assert_eq!(staged.problems[0].field, "retryableCodes");
            assert!(staged.problems[0].message.starts_with(want), "{}", staged.problems[0].message);
            assert!(staged.patch.is_empty(), "{value}");
        }
    }

    #[test]
    fn the_fallback_form_stages_routes_in_order_and_code_lists_that_may_be_empty() {
        let accepted = json!({
            "routes": ["b1", "b2"], "codes": ["RATE_LIMIT", "QUOTA", "SERVER"],
            "eagerCodes": ["QUOTA"], "maxWaitMs": 30000, "cooldownMs": 60000,
        });
        let Value::Object(untouched) = json!({
            "routes": "b1\nb2\n",
            "codes": codes(&["RATE_LIMIT", "QUOTA", "SERVER"], ""),
            "eagerCodes": codes(&["QUOTA"], ""),
            "maxWaitMs": "30000", "cooldownMs": "60000",
        }) else {
            unreachable!()
        };
        let edited = |edits: Value| {
            let mut form = untouched.clone();
            form.extend(edits.as_object().unwrap().clone());
            stage(FALLBACK, &accepted, &form)
        };
        let cases: Vec<(Value, Value)> = vec![
            (json!({}), json!({})),
            (json!({"routes": "  b1 \n\n b2"}), json!({})),
            (json!({"routes": "b2\nb1"}), json!({"routes": ["b2", "b1"]})),
            (json!({"routes": "b1\nb2\nb3"}), json!({"routes": ["b1", "b2", "b3"]})),
            (json!({"eagerCodes": codes(&[], "")}), json!({"eagerCodes": []})),
            (json!({"cooldownMs": "0"}), json!({"cooldownMs": 0})),
            (
                json!({"codes": codes(&["SERVER", "QUOTA", "RATE_LIMIT"], "HTTP_529")}),
                json!({"codes": ["RATE_LIMIT", "SERVER", "QUOTA", "HTTP_529"]}),
            ),
        ];
        for (edits, want) in cases {
            let staged = edited(edits.clone());
            assert_eq!(staged.problems, [], "{edits}");
            assert_eq!(Value::Object(staged.patch), want, "{edits}");
        }
        let refused: Vec<(Value, &str)> = vec![
            (
                json!({"routes": " \n "}),
                "routes: no route left: list at least one route to fall back to",
            ),
            (json!({"routes": "b1\nb1"}), "routes: b1 is listed twice"),
            (json!({"routes": "b1 b2"}), r#"routes: "b1 b2" is not one route name (one per line)"#),
            (json!({"routes": ["b1"]}), r#"routes: must be route names, one per line, got ["b1"]"#),
            (json!({"codes": codes(&[], "")}), "codes: no code left: keep at least one"),
            (
                json!({"codes": codes(&["SERVER", "AUTH"], "")}),
                "codes: AUTH is never retried (hard floor) and cannot be switched on",
            ),
            (
                json!({"maxWaitMs": "-1"}),
                "maxWaitMs: must be an integer within 0..=2147483647, got -1",
            ),
        ];
        for (edits, want) in refused {
            let staged = edited(edits.clone());
            assert_eq!(staged.problems.len(), 1, "{edits}: {:?}", staged.problems);
            assert!(staged.problems[0].message.starts_with(want), "{}", staged.problems[0].message);
        }
        assert_eq!(
            form("fallback").unwrap().iter().map(|f| f.key).collect::<Vec<_>>(),
            rein_plugins::fallback::FallbackSettings::KEYS
        );
    }

    #[test]
    fn problems_and_changes_are_reported_together() {
        let staged =
            stage(AUTO_RETRY, &accepted(), &with(json!({"extraRetries": "5", "jitterRatio": "2"})));
        assert_eq!(staged.changed, ["extraRetries"]);
        assert_eq!(staged.problems.len(), 1);
        assert_eq!(staged.problems[0].field, "jitterRatio");
    }

    #[test]
    fn the_forms_use_the_plugins_bounds() {
        let bounds = |plugin: &str, key: &str| {
            form(plugin).unwrap().iter().find(|f| f.key == key).map(|f| f.kind)
        };
        assert_eq!(bounds("auto-retry", "extraRetries"), Some(Kind::Integer { min: 0, max: 10 }));
        assert_eq!(
            bounds("auto-retry", "maxDelayMs"),
            Some(Kind::Integer { min: 0, max: 600_000 })
        );
        assert_eq!(bounds("auto-retry", "jitterRatio"), Some(Kind::Number { min: 0.0, max: 1.0 }));
        assert_eq!(
            bounds("compaction", "keepRecentMessages"),
            Some(Kind::Integer { min: 1, max: 1000 })
        );
        assert_eq!(
            form("auto-retry").unwrap().iter().map(|f| f.key).collect::<Vec<_>>(),
            rein_plugins::auto_retry::AutoRetrySettings::KEYS
        );
        assert_eq!(
            form("compaction").unwrap().iter().map(|f| f.key).collect::<Vec<_>>(),
            rein_plugins::compaction::settings::CompactionSettings::KEYS
        );
        assert!(form("llm-retry").is_none(), "read-only at run time");
        let staged = stage(
            COMPACTION,
            &json!({"maxOverflowRetries": 1, "keepRecentMessages": 6}),
            &Map::from_iter([("keepRecentMessages".to_owned(), json!("0"))]),
        );
        assert_eq!(
            staged.problems[0].message,
            "keepRecentMessages: must be an integer within 1..=1000, got 0"
        );
    }
}
