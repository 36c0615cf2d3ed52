//! Reading a `result` as a `Value` while its frame is decoded ([`Expect::Value`]) gives what
//! decoding the frame with the result raw and then parsing that text gives.
//!
//! The invariant, in words: whatever the frame and whichever id is expected, either the
//! answer is [`Incoming::Value`] for that id — and then `decode` reads the same frame as the
//! answer to that id with a raw result that `serde_json::from_str` parses to the same
//! `Value` — or the answer is exactly `decode`'s. The frames generated put the id before or
//! after the result, repeat members, add errors and methods, and give results a `Value`
//! cannot hold (lone surrogates, numbers out of range, nesting at the limit) or that are cut
//! short.

use super::{decode, decode_expecting, Expect, Incoming};
use crate::test_json::nested;
use proptest::prelude::*;
use serde_json::Value;

/// A JSON value as text, with the values only a parse (not a validation) refuses.
fn value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_string()),
        Just("true".to_string()),
        Just("0".to_string()),
        Just("-7".to_string()),
        Just("1.5e3".to_string()),
        Just("1e400".to_string()),
        Just("18446744073709551616".to_string()),
        Just("\"te\\u0078t\"".to_string()),
        Just("\"\\ud800\"".to_string()),
        Just("\"\\ud83d\\ude00\"".to_string()),
        "[a-z ]{0,6}".prop_map(|s| format!("\"{s}\"")),
    ];
    nested(leaf, "[a-c]{1,2}", 0..4)
}

/// A result nested `depth` arrays deep (the parser's limit is 128 levels, counted from the
/// frame when the result is read inside it).
fn deep(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// One member of a frame.
fn member() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => value().prop_map(|v| format!("\"result\":{v}")),
        1 => (125usize..129).prop_map(|d| format!("\"result\":{}", deep(d))),
        4 => prop_oneof![Just("7"), Just("8"), Just("\"7\""), Just("null"), Just("-1")]
            .prop_map(|id| format!("\"id\":{id}")),
        3 => Just("\"jsonrpc\":\"2.0\"".to_string()),
        1 => Just("\"error\":{\"code\":1,\"message\":\"m\"}".to_string()),
        1 => Just("\"method\":\"ping\"".to_string()),
        1 => value().prop_map(|v| format!("\"other\":{v}")),
    ]
}

/// A frame: the usual order most of the time, members in any order otherwise, sometimes cut.
fn frame() -> impl Strategy<Value = String> {
    let usual = value().prop_map(|v| format!("{{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{v}}}"));
    let loose = prop::collection::vec(member(), 0..6).prop_map(|m| format!("{{{}}}", m.join(",")));
    (prop_oneof![usual, loose], any::<u8>(), 0usize..64).prop_map(|(text, cut, at)| {
        if cut < 16 {
            text[..text.len().saturating_sub(at).max(1)].to_string()
        } else {
            text
        }
    })
}

/// `decode_expecting` with a `Value` asked for id 7.
fn read(frame: &[u8]) -> Result<Incoming, super::DecodeError> {
    let seven = |id: u64| if id == 7 { Expect::Value } else { Expect::Raw };
    decode_expecting(frame, 1 << 20, &seven)
}

/// Whether `got` is what the invariant allows for `frame`.
fn agrees(frame: &[u8], got: &Result<Incoming, super::DecodeError>) -> bool {
    let plain = decode(frame, 1 << 20);
    match got {
        Ok(Incoming::Value { id, result }) => match &plain {
            Ok(Incoming::Response {
                id: Some(raw_id),
                result: Ok(raw),
            }) => {
                *id == 7
                    && raw_id == id
                    && serde_json::from_str::<Value>(raw.get()).ok().as_ref() == Some(result)
            }
            _ => false,
        },
        other => *other == plain,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn a_result_read_as_a_value_is_the_raw_results_value(text in frame()) {
        let got = read(text.as_bytes());
        prop_assert!(agrees(text.as_bytes(), &got), "{text}: {got:?}");
    }
}

#[test]
fn each_way_is_reached_by_hand() {
    let value = |text: &str| match read(text.as_bytes()) {
        Ok(Incoming::Value { result, .. }) => Some(result),
        _ => None,
    };
    let cases: [(&str, bool); 9] = [
        (r#"{"jsonrpc":"2.0","id":7,"result":{"a":[1,"x"]}}"#, true),
        (r#"{"jsonrpc":"2.0","id":"7","result":{}}"#, true),
        (
            r#"{"jsonrpc":"2.0","id":7,"result":1,"result":{"b":2}}"#,
            true,
        ),
        // The id after the result, another id, an error, a method: read the plain way.
        (r#"{"jsonrpc":"2.0","result":{},"id":7}"#, false),
        (r#"{"jsonrpc":"2.0","id":8,"result":{}}"#, false),
        (
            r#"{"jsonrpc":"2.0","id":7,"result":{},"error":{"code":1,"message":"m"}}"#,
            false,
        ),
        (r#"{"jsonrpc":"2.0","id":7,"result":{},"id":8}"#, false),
        // Valid JSON a `Value` cannot hold: the raw result, which its reader then refuses.
        (r#"{"jsonrpc":"2.0","id":7,"result":{"a":"\ud800"}}"#, false),
        (r#"{"jsonrpc":"2.0","id":7,"result":[1e400]}"#, false),
    ];
    for (text, as_value) in cases {
        let got = read(text.as_bytes());
        assert!(agrees(text.as_bytes(), &got), "{text}: {got:?}");
        assert_eq!(value(text).is_some(), as_value, "{text}: {got:?}");
    }
    // Nesting: 127 levels fit in a result read alone but not inside the frame.
    let text = format!(r#"{{"jsonrpc":"2.0","id":7,"result":{}}}"#, deep(127));
    let got = read(text.as_bytes());
    assert!(agrees(text.as_bytes(), &got));
    assert!(value(&text).is_none());
    assert!(matches!(got, Ok(Incoming::Response { result: Ok(_), .. })));
}
