//! Any JSON value, for bad-input property tests of a reader of JSON settings: nested a little,
//! its strings and object keys drawn from the ones the reader knows as often as not, so that
//! the values reach past the first check.

use proptest::prelude::*;
use serde_json::Value;

/// Any JSON value up to three levels deep: null, booleans, integers, floats, one of `strings`
/// or any short string; arrays of up to three values; objects of up to five keys from `keys`.
pub fn json(
    strings: &[&'static str],
    keys: &[&'static str],
) -> impl Strategy<Value = Value> + use<> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop::sample::select(strings.to_vec()).prop_map(Value::from),
        ".{0,8}".prop_map(Value::from),
    ];
    let keys = prop::sample::select(keys.to_vec());
    leaf.prop_recursive(3, 24, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(keys.clone(), inner, 0..6).prop_map(|m| Value::Object(
                m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
            )),
        ]
    })
}
