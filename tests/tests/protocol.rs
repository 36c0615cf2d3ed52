//! Property tests of the MCP codec: what any server sends never panics the decoder, and what
//! we encode decodes back to the same message.

use bytes::Bytes;
use proptest::prelude::*;
use serde_json::{json, Value};
use switchboard_core::protocol::{
    self, decode, encode_cancelled, encode_request, DecodeError, Incoming, PeerRequestId,
    ServerNotification,
};
use switchboard_core::tool::{ToolDef, ToolResult};

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

/// A member of a tool definition: absent, a string, or any JSON value.
fn arb_member() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        "[a-z_]{0,6}".prop_map(|s| Some(Value::String(s))),
        arb_json().prop_map(Some),
    ]
}

/// A `tools/list` entry: well-formed or not, with members of any type.
fn arb_tool() -> impl Strategy<Value = Value> {
    let members = [
        "name",
        "title",
        "description",
        "inputSchema",
        "outputSchema",
        "annotations",
        "extra",
    ];
    prop_oneof![
        1 => arb_json(),
        4 => prop::collection::vec(arb_member(), members.len()).prop_map(move |vals| {
            let mut obj = serde_json::Map::new();
            for (k, v) in members.iter().zip(vals) {
                if let Some(v) = v {
                    obj.insert(k.to_string(), v);
                }
            }
            Value::Object(obj)
        }),
    ]
}

/// How pages were read while the codec built a `Value` tree of every answer: each entry went
/// through `ToolDef`'s derived `Deserialize` (entries that are not objects are skipped, the one
/// intended difference: the derived impl also read a definition given as an array), then
/// skipped when a given `inputSchema` is not an object.
fn page_via_value(v: &Value) -> Result<protocol::ToolsPage, String> {
    use serde::Deserialize;
    let tools = v
        .get("tools")
        .and_then(Value::as_array)
        .ok_or("missing \"tools\" array")?;
    let mut page = protocol::ToolsPage {
        tools: Vec::new(),
        next_cursor: None,
        skipped: Vec::new(),
        hint: protocol::cache_hint(v.get("ttlMs"), v.get("cacheScope")),
    };
    for t in tools {
        match ToolDef::deserialize(t) {
            // A given `inputSchema` must be an object (the streaming reader skips others).
            Ok(def)
                if t.is_object()
                    && !def.name.is_empty()
                    && t.get("inputSchema").is_none_or(Value::is_object) =>
            {
                page.tools.push(def)
            }
            _ => page.skipped.push(
                t.get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("(unnamed)")
                    .to_string(),
            ),
        }
    }
    page.next_cursor = match v.get("nextCursor") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err("bad nextCursor".into()),
    };
    Ok(page)
}

proptest! {
    // Invariant: reading a `tools/list` page straight from its text (schemas kept raw) keeps
    // and skips exactly the definitions the `Value`-tree reading kept and skipped, with equal
    // fields (schemas equal as text: the frame is what a `Value` serializes to).
    #[test]
    fn tools_pages_read_from_text_as_from_a_value(
        tools in prop::collection::vec(arb_tool(), 0..6),
        tools_not_array in proptest::option::of(arb_json()),
        cursor in arb_member(),
    ) {
        let mut page = serde_json::Map::new();
        page.insert("tools".into(), tools_not_array.unwrap_or(Value::Array(tools)));
        if let Some(c) = cursor {
            page.insert("nextCursor".into(), c);
        }
        let page = Value::Object(page);
        let raw = serde_json::value::to_raw_value(&page).unwrap();
        let got = protocol::parse_list_tools_result(&raw);
        match page_via_value(&page) {
            Ok(want) => prop_assert_eq!(got, Ok(want)),
            Err(_) => prop_assert!(got.is_err()),
        }
    }

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
        let raw = serde_json::value::to_raw_value(&result).unwrap();
        prop_assert_eq!(decode(&frame, usize::MAX), Ok(Incoming::Response { id: Some(id), result: Ok(raw) }));
    }

    // Invariant: any tool result a server might send renders to text without panicking, and
    // an `isError` result always renders with the `Error: ` prefix.
    #[test]
    fn tool_results_always_render(v in arb_json(), is_error in any::<bool>()) {
        let mut obj = json!({"content": [v.clone(), {"type": "text", "text": "t"}], "isError": is_error});
        if let Ok(r) = protocol::parse_call_tool_result(&serde_json::value::to_raw_value(&obj).unwrap()) {
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

#[test]
fn a_call_result_keeps_the_servers_object_byte_for_byte_for_embedders_and_call_json() {
    let text = r#"{"content":[{"type":"text","text":"hi","annotations":{"audience":["user"]}}],"_meta":{"trace":"t-1"},"isError":false,"future":1}"#;
    let raw = serde_json::value::RawValue::from_string(text.to_string()).unwrap();
    let r = protocol::parse_call_tool_result(&raw).unwrap();
    assert_eq!(r.render_text(), "hi");
    // What the decoded fields drop (`_meta`, the part's annotations, unknown fields) is
    // still in `raw`, exactly as sent.
    assert_eq!(r.raw.as_ref().map(|j| j.get()), Some(text));
    // Equality is about the decoded result, not the bytes it came from.
    let mut other = r.clone();
    other.raw = None;
    assert_eq!(r, other);
}
