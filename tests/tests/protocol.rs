//! Property tests of the MCP codec: what any server sends never panics the decoder, and what
//! we encode decodes back to the same message.

use bytes::Bytes;
use proptest::prelude::*;
use serde_json::{json, Value};
use switchboard_core::protocol::{
    self, decode, encode_cancelled, encode_request, DecodeError, Incoming, PeerRequestId,
    ServerNotification,
};
use switchboard_core::tool::ToolResult;

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    // Invariant: decoding arbitrary bytes never panics; it either yields a message or a
    // typed error, and a frame over the limit is always `TooLarge`.
    #[test]
    fn decode_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256), limit in 0usize..300) {
        match decode(&bytes, limit) {
            Err(DecodeError::TooLarge { len, limit: l }) => prop_assert!(len > l),
            _ => prop_assert!(bytes.len() <= limit),
        }
    }

    // Invariant: decoding any JSON value (not just bytes) never panics, and a value without
    // `"jsonrpc": "2.0"` is never accepted as a message.
    #[test]
    fn decode_never_accepts_non_jsonrpc(v in arb_json()) {
        let frame = serde_json::to_vec(&v).unwrap();
        let r = decode(&frame, usize::MAX);
        if v.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            prop_assert!(r.is_err());
        }
    }

    // Invariant: a request we encode decodes as that request (method, id and params intact).
    #[test]
    fn requests_round_trip(id in any::<u64>(), method in "[a-z/_]{1,20}", params in proptest::option::of(arb_json())) {
        let frame = encode_request(id, &method, params.clone());
        match decode(&frame, usize::MAX) {
            Ok(Incoming::Request { id: PeerRequestId(got), method: m, params: p }) => {
                prop_assert_eq!(got, json!(id));
                prop_assert_eq!(m, method);
                prop_assert_eq!(p, params.unwrap_or(Value::Null));
            }
            other => prop_assert!(false, "unexpected {:?}", other),
        }
    }

    // Invariant: a server's response to any id we issued is matched to that id, whether the
    // id comes back as a number or as a numeric string, and its result is kept verbatim.
    #[test]
    fn responses_match_their_id(id in any::<u64>(), as_string in any::<bool>(), result in arb_json()) {
        let idv = if as_string { json!(id.to_string()) } else { json!(id) };
        let frame = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": idv, "result": result})).unwrap();
        prop_assert_eq!(decode(&frame, usize::MAX), Ok(Incoming::Response { id: Some(id), result: Ok(result) }));
    }

    // Invariant: any tool result a server might send renders to text without panicking, and
    // an `isError` result always renders with the `Error: ` prefix.
    #[test]
    fn tool_results_always_render(v in arb_json(), is_error in any::<bool>()) {
        let mut obj = json!({"content": [v.clone(), {"type": "text", "text": "t"}], "isError": is_error});
        if let Ok(r) = protocol::parse_call_tool_result(&obj) {
            let text = r.render_text();
            prop_assert_eq!(text.starts_with("Error: "), is_error);
        }
        obj["content"] = v;
        let _ = serde_json::from_value::<ToolResult>(obj).map(|r| r.render_text());
    }
}

#[test]
fn cancellation_notice_names_the_request_and_reason() {
    let f: Bytes = encode_cancelled(42, "request timed out");
    let v: Value = serde_json::from_slice(&f).unwrap();
    assert_eq!(
        v,
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
               "params": {"requestId": 42, "reason": "request timed out"}})
    );
    assert!(matches!(
        decode(&f, 1024),
        Ok(Incoming::Notification(ServerNotification::Cancelled { .. }))
    ));
}
