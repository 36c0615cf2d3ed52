//! JSON text for the property tests that hold a faster reader to a slower one: values nested
//! from a test's own leaves, and objects written from members that are already JSON text.

use proptest::prelude::*;
use std::ops::Range;

/// `{"k":v,...}` from `(key, value)` pairs, the key written between quotes as given (so a test
/// can write escapes into it) and the value as the JSON text it already is.
pub(crate) fn object(members: &[(String, String)]) -> String {
    let members: Vec<String> = members
        .iter()
        .map(|(k, v)| format!("\"{k}\":{v}"))
        .collect();
    format!("{{{}}}", members.join(","))
}

/// JSON text nested up to three deep from `leaf`: arrays of up to three values and objects of
/// `members` pairs whose keys come from `key`.
pub(crate) fn nested<K>(
    leaf: impl Strategy<Value = String> + 'static,
    key: K,
    members: Range<usize>,
) -> impl Strategy<Value = String>
where
    K: Strategy<Value = String> + Clone + 'static,
{
    leaf.prop_recursive(3, 16, 4, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec((key.clone(), inner), members.clone()).prop_map(|m| object(&m)),
        ]
    })
}
