//! Decoding a client's frame member by member accepts, rejects and reads exactly what reading
//! the whole frame as a `Value` first does: the reference below is that reading, and the
//! property compares the two on generated frames, well formed or not.

use super::wire::{decode, Malformed, Message, INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR};
use crate::test_json::{nested, object};
use proptest::prelude::*;
use serde_json::Value;

/// The frame read whole as a `Value`, then taken apart: what `decode` must agree with.
fn decode_whole(frame: &[u8]) -> Result<Message, Malformed> {
    let bad = |id, code, message: &str| Malformed {
        id,
        code,
        message: message.to_string(),
    };
    let value: Value = serde_json::from_slice(frame).map_err(|e| Malformed {
        id: None,
        code: PARSE_ERROR,
        message: format!("the frame is not JSON: {e}"),
    })?;
    let Value::Object(mut obj) = value else {
        let what = if value.is_array() {
            "JSON-RPC batches are not supported"
        } else {
            "a message must be a JSON object"
        };
        return Err(bad(None, INVALID_REQUEST, what));
    };
    let id = obj.remove("id");
    let usable = id
        .clone()
        .filter(|id| id.is_string() || id.is_i64() || id.is_u64());
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(bad(usable, INVALID_REQUEST, "jsonrpc must be \"2.0\""));
    }
    let params = obj.remove("params").unwrap_or(Value::Null);
    match (obj.remove("method"), id) {
        (Some(Value::String(method)), None) => Ok(Message::Notification { method, params }),
        (Some(Value::String(method)), Some(_)) => match usable {
            Some(id) => Ok(Message::Request { id, method, params }),
            None => Err(bad(
                None,
                INVALID_REQUEST,
                "a request id must be a string or an integer",
            )),
        },
        (Some(_), _) => Err(bad(usable, INVALID_REQUEST, "method must be a string")),
        (None, Some(id)) if obj.contains_key("result") || obj.contains_key("error") => {
            let outcome = match obj.remove("result") {
                Some(result) => Ok(result),
                None => {
                    let error = obj.remove("error").unwrap_or(Value::Null);
                    let code = error
                        .get("code")
                        .and_then(Value::as_i64)
                        .unwrap_or(INTERNAL_ERROR);
                    let message = error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("no message")
                        .to_string();
                    Err((code, message))
                }
            };
            Ok(Message::Response { id, outcome })
        }
        (None, _) => Err(bad(usable, INVALID_REQUEST, "no method")),
    }
}

/// A JSON value as text, from the shapes a member of an envelope takes (and the wrong ones).
fn value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_string()),
        Just("true".to_string()),
        Just("\"2.0\"".to_string()),
        Just("\"2\\u002e0\"".to_string()),
        Just("\"1.0\"".to_string()),
        Just("2.0".to_string()),
        Just("\"tools/list\"".to_string()),
        Just("18446744073709551615".to_string()),
        Just("-7".to_string()),
        Just("1e400".to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        "[a-z]{0,6}".prop_map(|s| format!("\"{s}\"")),
    ];
    nested(leaf, key(), 0..4)
}

fn key() -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        Just("jsonrpc"),
        Just("json\\u0072pc"),
        Just("id"),
        Just("method"),
        Just("params"),
        Just("result"),
        Just("error"),
        Just("code"),
        Just("message"),
        Just("other"),
    ]
    .prop_map(str::to_string)
}

/// One member of an envelope: a key, and a value mostly of the shape that key takes, some of
/// the time of another.
fn member() -> impl Strategy<Value = (String, String)> {
    key().prop_flat_map(|k| {
        let likely: BoxedStrategy<String> = match k.as_str() {
            "jsonrpc" | "json\\u0072pc" => prop_oneof![
                4 => Just("\"2.0\"".to_string()),
                1 => prop_oneof![
                    Just("\"2\"".to_string()),
                    Just("\"2.00\"".to_string()),
                    Just("\"2.0 \"".to_string()),
                    Just("\"\"".to_string()),
                ],
            ]
            .boxed(),
            "id" => prop_oneof![
                any::<u32>().prop_map(|n| n.to_string()),
                "[a-z]{1,3}".prop_map(|s| format!("\"{s}\"")),
                Just("1.5".to_string()),
                Just("null".to_string()),
            ]
            .boxed(),
            "method" => "[a-z/]{1,8}".prop_map(|s| format!("\"{s}\"")).boxed(),
            "error" => (any::<i32>(), "[a-z ]{0,8}")
                .prop_map(|(c, m)| format!("{{\"code\":{c},\"message\":\"{m}\"}}"))
                .boxed(),
            _ => value().boxed(),
        };
        (Just(k), prop_oneof![4 => likely, 1 => value()])
    })
}

/// A frame: an envelope (members repeated, missing or of the wrong type), a bare value, or
/// either cut short or with a byte changed.
fn frame() -> impl Strategy<Value = Vec<u8>> {
    let whole = prop_oneof![
        4 => prop::collection::vec(member(), 0..8).prop_map(|m| object(&m)),
        1 => value(),
    ];
    (whole, any::<u8>(), 0..6u8, any::<prop::sample::Index>()).prop_map(
        |(text, byte, damage, at)| {
            let mut bytes = text.into_bytes();
            let i = at.index(bytes.len().max(1));
            match damage {
                0 if !bytes.is_empty() => bytes.truncate(i),
                1 if !bytes.is_empty() => bytes[i] = byte,
                _ => {}
            }
            bytes
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// Whatever the frame, decoding it member by member gives the message, or the error (its
    /// id, code and message), that reading it whole as a `Value` gives.
    #[test]
    fn decoding_member_by_member_agrees_with_reading_the_whole_value(frame in frame()) {
        prop_assert_eq!(decode(&frame), decode_whole(&frame));
    }
}

#[test]
fn the_generated_frames_reach_every_verdict() {
    // The property above is only as good as its frames: each verdict, by hand.
    let cases: [(&str, &str); 8] = [
        (r#"{"jsonrpc":"2.0","id":1,"method":"m"}"#, "request"),
        (
            r#"{"jsonrpc":"2.0","method":"m","params":[1]}"#,
            "notification",
        ),
        (
            r#"{"jsonrpc":"2.0","id":"a","error":{"code":-1}}"#,
            "response",
        ),
        (
            r#"{"jsonrpc":"2.0","jsonrpc":1,"id":1,"method":"m"}"#,
            "jsonrpc",
        ),
        (r#"{"jsonrpc":"2.0","id":1.5,"method":"m"}"#, "id"),
        (r#"[{"jsonrpc":"2.0"}]"#, "batch"),
        (r#"{"jsonrpc":"2.0","id":1,"method":"m""#, "parse"),
        (r#"{"jsonrpc":"2.0","id":1}"#, "no method"),
    ];
    for (frame, what) in cases {
        let got = decode(frame.as_bytes());
        assert_eq!(got, decode_whole(frame.as_bytes()), "{what}: {frame}");
        let kind = match &got {
            Ok(Message::Request { .. }) => "request",
            Ok(Message::Notification { .. }) => "notification",
            Ok(Message::Response { .. }) => "response",
            Err(e) if e.code == PARSE_ERROR => "parse",
            Err(e) if e.message.contains("jsonrpc") => "jsonrpc",
            Err(e) if e.message.contains("request id") => "id",
            Err(e) if e.message.contains("batches") => "batch",
            Err(e) if e.message == "no method" => "no method",
            Err(e) => panic!("{what}: unexpected {e:?}"),
        };
        assert_eq!(kind, what, "{frame}");
    }
}
