//! The bodies of the console's JSON requests, read strictly: a body that is not what its route
//! takes is a [`BadRequest`] naming the field (`text: must not be empty`), and nothing happens.
//!
//! | route | body |
//! |---|---|
//! | `POST /api/sessions` | empty, `{}` or `{"id": "name"}` |
//! | `POST /api/sessions/{id}/prompt` | `{"text": "…"}` (not blank, at most [`MAX_PROMPT_BYTES`]) |
//! | `POST /api/plugins/{name}/staged`, `…/save` | `{"revision": n, "fields": {…}}` (a form's edits, see `staged.rs`) |
//! | `PATCH /api/plugins/{name}` | `{"revision": n, "patch": {…}}` (a settings patch as the runtime takes it) |
//!
//! Unknown keys are refused, so a typo (`"txt"`) is not silently an empty request; so is a key
//! given twice at any depth (`{"id": "a", "id": "b"}`), which a plain JSON reader would settle
//! silently by keeping the last.

use std::cell::RefCell;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// The largest prompt the console accepts (1 MiB).
pub(crate) const MAX_PROMPT_BYTES: usize = 1 << 20;

/// A request body that cannot be used. Displays as `field: problem` (`body: …` for the body
/// itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadRequest {
    /// The field (`text`, `revision`; `body` for the body itself).
    pub(crate) field: String,
    /// What is wrong.
    pub(crate) message: String,
}

impl std::fmt::Display for BadRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

fn bad(field: &str, message: impl Into<String>) -> BadRequest {
    BadRequest { field: field.to_owned(), message: message.into() }
}

/// The body as a JSON object with only `keys` (an empty body is `{}` when `empty_ok`).
fn object(body: &[u8], keys: &[&str], empty_ok: bool) -> Result<Map<String, Value>, BadRequest> {
    if empty_ok && body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    let value = strict(body)?;
    let Value::Object(fields) = value else {
        return Err(bad("body", "must be a JSON object"));
    };
    if let Some(key) = fields.keys().find(|k| !keys.contains(&k.as_str())) {
        return Err(bad(key, format!("unknown key (expected: {})", keys.join(", "))));
    }
    Ok(fields)
}

/// `body` as JSON, refusing a key given twice in one object (the [`BadRequest`] names its path:
/// `fields.extraRetries`).
fn strict(body: &[u8]) -> Result<Value, BadRequest> {
    let twice = RefCell::new(None);
    let mut reader = serde_json::Deserializer::from_slice(body);
    let read = Strict { path: "", twice: &twice }
        .deserialize(&mut reader)
        .and_then(|value| reader.end().map(|()| value));
    match (read, twice.into_inner()) {
        (Err(_), Some(path)) => Err(bad(&path, "given twice (each key at most once)")),
        (Err(e), None) => Err(bad("body", format!("not valid JSON ({e})"))),
        (Ok(value), _) => Ok(value),
    }
}

/// Reads one JSON value at `path` as a [`Value`]; the path of a key found twice goes to
/// `twice`, and the read fails.
#[derive(Clone, Copy)]
struct Strict<'a> {
    path: &'a str,
    twice: &'a RefCell<Option<String>>,
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        let mut index = 0usize;
        loop {
            let path = format!("{}[{index}]", self.path);
            match seq.next_element_seed(Strict { path: &path, twice: self.twice })? {
                Some(item) => items.push(item),
                None => return Ok(Value::Array(items)),
            }
            index += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let path =
                if self.path.is_empty() { key.clone() } else { format!("{}.{key}", self.path) };
            if object.contains_key(&key) {
                *self.twice.borrow_mut() = Some(path);
                return Err(de::Error::custom("a key given twice"));
            }
            let value = map.next_value_seed(Strict { path: &path, twice: self.twice })?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// `POST /api/sessions`: the id asked for, if any (checked as a session id by the caller's
/// store).
pub(crate) fn new_session(body: &[u8]) -> Result<Option<String>, BadRequest> {
    let fields = object(body, &["id"], true)?;
    match fields.get("id") {
        None => Ok(None),
        Some(Value::String(id)) => Ok(Some(id.clone())),
        Some(_) => Err(bad("id", "must be a string")),
    }
}

/// `POST /api/sessions/{id}/prompt`: the prompt, as written.
pub(crate) fn prompt(body: &[u8]) -> Result<String, BadRequest> {
    let fields = object(body, &["text"], false)?;
    match fields.get("text") {
        None => Err(bad("text", "missing")),
        Some(Value::String(text)) if text.trim().is_empty() => {
            Err(bad("text", "must not be empty"))
        }
        Some(Value::String(text)) if text.len() > MAX_PROMPT_BYTES => {
            Err(bad("text", format!("too long ({} bytes; at most {MAX_PROMPT_BYTES})", text.len())))
        }
        Some(Value::String(text)) => Ok(text.clone()),
        Some(_) => Err(bad("text", "must be a string")),
    }
}

/// A request about a plugin's settings: the revision it is based on and its object (`fields`
/// of a form, or a `patch`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Based {
    /// The settings revision the page (or program) read.
    pub(crate) revision: u64,
    /// The form's fields or the patch.
    pub(crate) object: Map<String, Value>,
}

fn based(body: &[u8], key: &str) -> Result<Based, BadRequest> {
    let mut fields = object(body, &["revision", key], false)?;
    let revision = match fields.get("revision") {
        None => return Err(bad("revision", "missing (the revision the settings were read at)")),
        Some(value) => value
            .as_u64()
            .ok_or_else(|| bad("revision", format!("must be a whole number, got {value}")))?,
    };
    match fields.remove(key) {
        None => Err(bad(key, "missing")),
        Some(Value::Object(object)) => Ok(Based { revision, object }),
        Some(_) => Err(bad(key, "must be an object")),
    }
}

/// `POST /api/plugins/{name}/staged` and `…/save`: a form's staged fields.
pub(crate) fn form(body: &[u8]) -> Result<Based, BadRequest> {
    based(body, "fields")
}

/// `PATCH /api/plugins/{name}`: a settings patch.
pub(crate) fn patch(body: &[u8]) -> Result<Based, BadRequest> {
    based(body, "patch")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn shown<T: std::fmt::Debug>(result: Result<T, BadRequest>) -> String {
        match result {
            Ok(value) => format!("ok {value:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn prompts_are_read_strictly() {
        let long = json!({"text": "x".repeat(MAX_PROMPT_BYTES + 1)}).to_string();
        let cases: Vec<(&str, String)> = vec![
            (r#"{"text": "hello"}"#, r#"ok "hello""#.into()),
            (r#"{"text": "  two\nlines "}"#, r#"ok "  two\nlines ""#.into()),
            (r#"{"text": "   "}"#, "text: must not be empty".into()),
            (r#"{"text": 3}"#, "text: must be a string".into()),
            ("{}", "text: missing".into()),
            (r#"{"txt": "hello"}"#, "txt: unknown key (expected: text)".into()),
            ("[1]", "body: must be a JSON object".into()),
            ("", "body: not valid JSON (EOF while parsing a value at line 1 column 0)".into()),
            (
                "{\"text\": ",
                "body: not valid JSON (EOF while parsing a value at line 1 column 9)".into(),
            ),
            (&long, format!("text: too long ({} bytes; at most 1048576)", MAX_PROMPT_BYTES + 1)),
        ];
        for (body, want) in cases {
            assert_eq!(shown(prompt(body.as_bytes())), want, "{}", &body[..body.len().min(40)]);
        }
    }

    #[test]
    fn a_key_given_twice_is_refused_at_any_depth() {
        let twice = "given twice (each key at most once)";
        let cases = [
            (r#"{"id": "a", "id": "b"}"#, format!("id: {twice}")),
            (r#"{"id": "a", "id": "a"}"#, format!("id: {twice}")),
            (
                r#"{"revision": 1, "fields": {"extraRetries": "3", "extraRetries": "9"}}"#,
                format!("fields.extraRetries: {twice}"),
            ),
            (
                r#"{"revision": 1, "fields": {"codes": {"switches": [{"a": 1, "a": 2}], "other": ""}}}"#,
                format!("fields.codes.switches[0].a: {twice}"),
            ),
            // Different keys, and the same key in different objects, are fine.
            (r#"{"revision": 1, "fields": {"a": {"x": 1}, "b": {"x": 1}}}"#, "ok".to_owned()),
            (
                r#"{"revision": 1, "fields": {"n": 1.5, "m": -2, "t": true, "z": null}}"#,
                "ok".to_owned(),
            ),
            // Still one JSON value: trailing text is not.
            (
                r#"{"revision": 1, "fields": {}} {}"#,
                "body: not valid JSON (trailing characters at line 1 column 31)".to_owned(),
            ),
        ];
        for (body, want) in cases {
            let got = match form(body.as_bytes()) {
                Ok(_) => "ok".to_owned(),
                Err(e) => e.to_string(),
            };
            assert_eq!(got, want, "{body}");
        }
        assert_eq!(shown(new_session(br#"{"id": "a", "id": "b"}"#)), format!("id: {twice}"));
        let read = form(br#"{"revision": 1, "fields": {"n": 1.5, "m": -2, "u": 3}}"#).unwrap();
        assert_eq!(Value::Object(read.object), json!({"n": 1.5, "m": -2, "u": 3}));
    }

    #[test]
    fn a_new_session_may_name_its_id() {
        let cases = [
            ("", "ok None"),
            ("  ", "ok None"),
            ("{}", "ok None"),
            (r#"{"id": "mine"}"#, r#"ok Some("mine")"#),
            (r#"{"id": 7}"#, "id: must be a string"),
            (r#"{"name": "x"}"#, "name: unknown key (expected: id)"),
        ];
        for (body, want) in cases {
            assert_eq!(shown(new_session(body.as_bytes())), want, "{body}");
        }
    }

    #[test]
    fn settings_requests_name_their_revision() {
        let cases = [
            (r#"{"revision": 2, "fields": {"enabled": false}}"#, true, "ok"),
            (r#"{"revision": 2, "patch": {}}"#, false, "ok"),
            (
                r#"{"fields": {}}"#,
                true,
                "revision: missing (the revision the settings were read at)",
            ),
            (r#"{"revision": -1, "fields": {}}"#, true, "revision: must be a whole number, got -1"),
            (
                r#"{"revision": "2", "fields": {}}"#,
                true,
                "revision: must be a whole number, got \"2\"",
            ),
            (r#"{"revision": 2}"#, true, "fields: missing"),
            (r#"{"revision": 2, "fields": []}"#, true, "fields: must be an object"),
            (
                r#"{"revision": 2, "patch": {}}"#,
                true,
                "patch: unknown key (expected: revision, fields)",
            ),
        ];
        for (body, is_form, want) in cases {
            let got = if is_form { form(body.as_bytes()) } else { patch(body.as_bytes()) };
            let got = match got {
                Ok(_) => "ok".to_owned(),
                Err(e) => e.to_string(),
            };
            assert_eq!(got, want, "{body}");
        }
        let read = form(br#"{"revision": 7, "fields": {"extraRetries": "5"}}"#).unwrap();
        assert_eq!(read.revision, 7);
        assert_eq!(Value::Object(read.object), json!({"extraRetries": "5"}));
    }
}
