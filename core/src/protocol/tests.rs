//! Tests of the codec through the module's public paths: decoding, the `tools/list` reader,
//! answers to server requests and the request tracker.

use super::*;
use crate::tool::RawJson;
use serde_json::value::RawValue;
use serde_json::{json, Value};

fn frame(v: Value) -> Vec<u8> {
    serde_json::to_vec(&v).unwrap()
}

fn raw(v: Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(&v).unwrap()
}

#[test]
fn decodes_responses_requests_and_notifications() {
    let r = decode(
        &frame(json!({"jsonrpc":"2.0","id":3,"result":{"a":1}})),
        1 << 20,
    );
    assert_eq!(
        r,
        Ok(Incoming::Response {
            id: Some(3),
            result: Ok(raw(json!({"a":1})))
        })
    );
    let e = decode(
        &frame(json!({"jsonrpc":"2.0","id":"4","error":{"code":-32601,"message":"nope"}})),
        1 << 20,
    )
    .unwrap();
    let Incoming::Response {
        id,
        result: Err(err),
    } = e
    else {
        panic!("expected an error response")
    };
    assert_eq!(id, Some(4));
    assert_eq!(err.to_string(), "MCP error -32601: nope");
    assert!(matches!(
        decode(&frame(json!({"jsonrpc":"2.0","id":"x","method":"ping"})), 1 << 20),
        Ok(Incoming::Request { ref method, .. }) if method == "ping"
    ));
    assert_eq!(
        decode(
            &frame(json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"})),
            1 << 20
        ),
        Ok(Incoming::Notification(ServerNotification::ToolsListChanged))
    );
}

#[test]
fn garbage_is_an_error_not_a_panic() {
    assert!(matches!(
        decode(b"hello", 100),
        Err(DecodeError::NotJson(_))
    ));
    assert!(matches!(decode(b"[]", 100), Err(DecodeError::Batch)));
    assert!(matches!(decode(b"3", 100), Err(DecodeError::NotJsonRpc(_))));
    assert!(matches!(
        decode(br#"{"id":1,"result":{}}"#, 100),
        Err(DecodeError::NotJsonRpc(_))
    ));
    assert!(matches!(
        decode(&[b' '; 101], 100),
        Err(DecodeError::TooLarge {
            len: 101,
            limit: 100
        })
    ));
}

#[test]
fn initialize_rejects_unknown_versions() {
    let ok = parse_initialize_result(&raw(json!({
        "protocolVersion": "2025-06-18",
        "capabilities": {"tools": {"listChanged": true}},
        "serverInfo": {"name": "s", "version": "1"}
    })))
    .unwrap();
    assert!(ok.has_tools && ok.tools_list_changed);
    assert_eq!(
        parse_initialize_result(&raw(
            json!({"protocolVersion": "1999-01-01", "capabilities": {}})
        )),
        Err(ProtocolError::UnsupportedVersion("1999-01-01".into()))
    );
}

#[test]
fn list_tools_page_parses_cursor_and_skips_bad_tools() {
    let page = parse_list_tools_result(&raw(json!({
        "tools": [{"name": "a", "inputSchema": {"type": "object"}}, {"nope": 1}],
        "nextCursor": "p2"
    })))
    .unwrap();
    assert_eq!(page.tools.len(), 1);
    assert_eq!(page.next_cursor.as_deref(), Some("p2"));
    assert_eq!(page.skipped, vec!["(unnamed)".to_string()]);
}

#[test]
fn list_tools_page_keeps_schemas_as_sent() {
    let text = r#"{"tools":[
        {"name":"a","inputSchema":{"type":"object","properties":{"z":{},"a":{}}},
         "outputSchema":null,"annotations":{"readOnlyHint":true}},
        {"name":"b","title":3},
        {"name":"c","name":"d","description":null},
        ["e"],
        {"name":""}
    ],"nextCursor":null}"#;
    let raw: Box<RawValue> = serde_json::from_str(text).unwrap();
    let page = parse_list_tools_result(&raw).unwrap();
    let names: Vec<&str> = page.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a", "d"]);
    let a = &page.tools[0];
    // Key order and text as the server sent them; `null` counts as absent.
    assert_eq!(
        a.input_schema.get(),
        r#"{"type":"object","properties":{"z":{},"a":{}}}"#
    );
    assert_eq!(a.output_schema, None);
    assert_eq!(
        a.annotations.as_ref().map(RawJson::get),
        Some(r#"{"readOnlyHint":true}"#)
    );
    // No schema listed: the empty object schema.
    assert_eq!(page.tools[1].input_schema.get(), r#"{"type":"object"}"#);
    assert_eq!(page.skipped, ["b", "(unnamed)", ""]);
    assert_eq!(page.next_cursor, None);
    for bad in [r#"{"tools":{}}"#, r#"[]"#, r#"{"tools":[],"nextCursor":1}"#] {
        let raw: Box<RawValue> = serde_json::from_str(bad).unwrap();
        assert!(parse_list_tools_result(&raw).is_err(), "{bad}");
    }
}

#[test]
fn a_tools_list_answer_is_read_as_a_page_when_its_id_comes_first() {
    let result = json!({"tools": [{"name": "a"}, {"title": 1}], "nextCursor": "c"});
    let page = parse_list_tools_result(&raw(result.clone()));
    let pages = |id: u64| {
        if id == 7 {
            Expect::ToolsPage
        } else {
            Expect::Raw
        }
    };
    let text = |s: &str| s.replace("R", &result.to_string()).into_bytes();
    assert_eq!(
        decode_expecting(
            &text(r#"{"jsonrpc":"2.0","id":7,"result":R}"#),
            1 << 20,
            &pages
        ),
        Ok(Incoming::ToolsPage { id: 7, page })
    );
    // Another id, the result before the id, a repeated id, an error: the result stays raw
    // (or the error wins), exactly as `decode` reads the frame.
    for frame in [
        r#"{"jsonrpc":"2.0","id":8,"result":R}"#,
        r#"{"jsonrpc":"2.0","result":R,"id":7}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":R,"id":8}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":R,"id":null}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":R,"error":{"code":1,"message":"m"}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":R,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":R,"#,
    ] {
        let frame = text(frame);
        let got = decode_expecting(&frame, 1 << 20, &pages);
        assert!(!matches!(got, Ok(Incoming::ToolsPage { .. })));
        assert_eq!(got, decode(&frame, 1 << 20));
    }
    // Valid JSON that only a parse (not a validation) refuses, where a page reads it: the
    // frame decodes as `decode` reads it, and the page then fails to parse either way.
    for result in [
        r#"{"tools":[{"name":"\ud800"}]}"#,
        r#"{"tools":[{"name":"a","description":1e400}]}"#,
    ] {
        let frame = format!(r#"{{"jsonrpc":"2.0","id":7,"result":{result}}}"#);
        let got = decode_expecting(frame.as_bytes(), 1 << 20, &pages);
        assert_eq!(got, decode(frame.as_bytes(), 1 << 20));
        let Ok(Incoming::Response {
            result: Ok(raw), ..
        }) = got
        else {
            panic!("expected a raw result, got {got:?}")
        };
        assert!(parse_list_tools_result(&raw).is_err());
    }
}

#[test]
fn peer_requests_get_answers() {
    let id = PeerRequestId(json!("srv-1"));
    let pong: Value = serde_json::from_slice(&answer_peer_request(&id, "ping", &[])).unwrap();
    assert_eq!(pong, json!({"jsonrpc":"2.0","id":"srv-1","result":{}}));
    let roots = [Root {
        uri: "file:///p".into(),
        name: Some("p".into()),
    }];
    let r: Value = serde_json::from_slice(&answer_peer_request(&id, "roots/list", &roots)).unwrap();
    assert_eq!(r["result"]["roots"][0]["uri"], "file:///p");
    let e: Value =
        serde_json::from_slice(&answer_peer_request(&id, "sampling/createMessage", &[])).unwrap();
    assert_eq!(e["error"]["code"], -32601);
}

#[test]
fn tracker_matches_each_response_once() {
    let mut t = RequestTracker::default();
    let a = t.issue("a");
    let b = t.issue("b");
    assert_eq!((a, b), (0, 1));
    assert_eq!(t.complete(b), Some("b"));
    assert_eq!(t.complete(b), None);
    assert!(t.was_issued(a) && !t.was_issued(7));
}

fn all_on() -> ClientFeatures {
    ClientFeatures {
        sampling: true,
        elicitation_form: true,
        elicitation_url: true,
        roots: true,
    }
}

#[test]
fn client_requests_parse_into_what_the_embedder_answers() {
    let f = all_on();
    let form = json!({"message": "m", "requestedSchema": {"type": "object", "properties": {}}});
    assert_eq!(
        parse_client_request("elicitation/create", &form, &f),
        Ok(Some(PeerRequestKind::ElicitForm {
            message: "m".into(),
            requested_schema: json!({"type": "object", "properties": {}}),
        }))
    );
    let url = json!({"mode": "url", "message": "m", "url": "https://x", "elicitationId": "e"});
    assert_eq!(
        parse_client_request("elicitation/create", &url, &f),
        Ok(Some(PeerRequestKind::ElicitUrl {
            message: "m".into(),
            url: "https://x".into(),
            elicitation_id: "e".into(),
        }))
    );
    let sampling = json!({"messages": [], "maxTokens": 1});
    assert!(matches!(
        parse_client_request("sampling/createMessage", &sampling, &f),
        Ok(Some(PeerRequestKind::Sampling { .. }))
    ));
    assert_eq!(parse_client_request("ping", &Value::Null, &f), Ok(None));
    // Malformed: the embedder never sees them.
    for (method, params) in [
        ("sampling/createMessage", json!({})),
        ("elicitation/create", json!({"requestedSchema": {}})),
        ("elicitation/create", json!({"message": "m"})),
        (
            "elicitation/create",
            json!({"mode": "url", "message": "m", "url": "u"}),
        ),
        ("elicitation/create", json!({"mode": "sms", "message": "m"})),
    ] {
        let r = parse_client_request(method, &params, &f);
        assert!(
            matches!(&r, Err(e) if e.code == codes::INVALID_PARAMS && !e.off),
            "{params}: {r:?}"
        );
    }
    // Off: method not found; a mode not offered: invalid params.
    let off = ClientFeatures::default();
    let r = parse_client_request("elicitation/create", &form, &off).unwrap_err();
    assert!(r.off && r.code == codes::METHOD_NOT_FOUND);
    let form_only = ClientFeatures {
        elicitation_form: true,
        ..Default::default()
    };
    let r = parse_client_request("elicitation/create", &url, &form_only).unwrap_err();
    assert!(r.off && r.code == codes::INVALID_PARAMS);
}

#[test]
fn peer_answers_encode_per_kind() {
    let id = PeerRequestId(json!(4));
    let form = PeerRequestKind::ElicitForm {
        message: "m".into(),
        requested_schema: json!({}),
    };
    let sampling = PeerRequestKind::Sampling { params: json!({}) };
    let enc = |kind: &PeerRequestKind, a: PeerAnswer| {
        let (frame, class) = encode_peer_answer(&id, kind, &a);
        (serde_json::from_slice::<Value>(&frame).unwrap(), class)
    };
    let mut content = serde_json::Map::new();
    content.insert("a".into(), json!(1));
    let (v, c) = enc(
        &form,
        PeerAnswer::Accept {
            content: Some(content),
        },
    );
    assert_eq!(
        (v["result"].clone(), c),
        (
            json!({"action": "accept", "content": {"a": 1}}),
            AnswerClass::Answered
        )
    );
    let (v, c) = enc(&form, PeerAnswer::Decline);
    assert_eq!(
        (v["result"].clone(), c),
        (json!({"action": "decline"}), AnswerClass::Declined)
    );
    let (v, c) = enc(&sampling, PeerAnswer::Cancel);
    assert_eq!(
        (v["error"]["code"].clone(), c),
        (json!(USER_REJECTED), AnswerClass::Declined)
    );
    let (v, c) = enc(&sampling, PeerAnswer::Accept { content: None });
    assert_eq!(
        (v["error"]["code"].clone(), c),
        (json!(codes::INTERNAL_ERROR), AnswerClass::Failed)
    );
    let (v, c) = enc(
        &sampling,
        PeerAnswer::Result {
            result: json!("text"),
        },
    );
    assert_eq!(
        (v["error"]["code"].clone(), c),
        (json!(codes::INTERNAL_ERROR), AnswerClass::Failed)
    );
    let caps = |f: &ClientFeatures| serde_json::to_value(client_capabilities(f)).unwrap();
    assert_eq!(caps(&ClientFeatures::default()), json!({}));
    assert_eq!(
        caps(&all_on()),
        json!({"roots": {"listChanged": true}, "sampling": {}, "elicitation": {"form": {}, "url": {}}})
    );
}

#[test]
fn elicitation_complete_decodes_with_its_id() {
    let n = decode(
        &frame(
            json!({"jsonrpc": "2.0", "method": "notifications/elicitation/complete", "params": {"elicitationId": "e-1"}}),
        ),
        1 << 20,
    );
    assert_eq!(
        n,
        Ok(Incoming::Notification(
            ServerNotification::ElicitationComplete {
                elicitation_id: "e-1".into()
            }
        ))
    );
    // Without an id it is just another notification.
    let n = decode(
        &frame(json!({"jsonrpc": "2.0", "method": "notifications/elicitation/complete"})),
        1 << 20,
    );
    assert!(matches!(
        n,
        Ok(Incoming::Notification(ServerNotification::Other { .. }))
    ));
}

/// The frames as they were written before the typed encoders: each params object built as a
/// `Value` (keys sorted by its map), the stateless `_meta` merged into it. The typed encoders
/// must write the same bytes.
mod value_built {
    use super::super::META_PROTOCOL_VERSION;
    use super::super::{META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL};
    use serde_json::{json, Map, Value};

    pub fn request(id: u64, method: &str, params: Option<Value>) -> Vec<u8> {
        let mut obj = Map::new();
        obj.insert("id".into(), json!(id));
        obj.insert("jsonrpc".into(), json!("2.0"));
        obj.insert("method".into(), json!(method));
        if let Some(p) = params {
            obj.insert("params".into(), p);
        }
        serde_json::to_vec(&Value::Object(obj)).unwrap()
    }

    pub fn stateless(
        params: Option<Value>,
        version: &str,
        caps: Value,
        client: &str,
        level: Option<&str>,
    ) -> Value {
        let mut meta = Map::new();
        meta.insert(META_PROTOCOL_VERSION.into(), json!(version));
        meta.insert(META_CLIENT_CAPABILITIES.into(), caps);
        meta.insert(
            META_CLIENT_INFO.into(),
            json!({"name": "switchboard", "version": client}),
        );
        if let Some(level) = level {
            meta.insert(META_LOG_LEVEL.into(), json!(level));
        }
        let mut obj = match params {
            Some(Value::Object(o)) => o,
            _ => Map::new(),
        };
        let mut merged = match obj.remove("_meta") {
            Some(Value::Object(o)) => o,
            _ => Map::new(),
        };
        for (k, v) in meta {
            merged.insert(k, v);
        }
        obj.insert("_meta".into(), Value::Object(merged));
        Value::Object(obj)
    }
}

/// A request frame as the manager writes one: params left out when absent.
fn frame_of<B: serde::Serialize>(params: RequestParams<'_, B>) -> bytes::Bytes {
    encode_request(5, "m", (!params.is_absent()).then_some(params))
}

#[test]
fn typed_requests_write_the_bytes_value_built_ones_did() {
    let features = [ClientFeatures::default(), all_on()];
    let caps = |f: &ClientFeatures| serde_json::to_value(client_capabilities(f)).unwrap();
    let args = json!({"b": [1, {"z": null, "a": "x"}], "a": "é\"\n"});
    let mut own = serde_json::Map::new();
    own.insert("progressToken".into(), json!(7));
    own.insert("aaa".into(), json!({"k": 1}));
    own.insert(META_CLIENT_INFO.into(), json!("the caller's, replaced"));
    own.insert("zzz".into(), json!(true));
    let no_meta = serde_json::Map::new();
    for f in &features {
        // initialize.
        let new = encode_request(
            0,
            "initialize",
            Some(initialize_params("1.2.3", client_capabilities(f))),
        );
        let old = value_built::request(
            0,
            "initialize",
            Some(
                json!({"protocolVersion": PROTOCOL_VERSION, "capabilities": caps(f),
                        "clientInfo": {"name": "switchboard", "version": "1.2.3"}}),
            ),
        );
        assert_eq!(new.as_ref(), old.as_slice());
        for level in [None, Some("debug")] {
            let stateless = StatelessMeta {
                version: MODERN_VERSION,
                capabilities: client_capabilities(f),
                client_info: ClientInfo::new("1.2.3"),
                log_level: level,
            };
            for modern in [false, true] {
                let meta = |own| RequestMeta {
                    stateless: modern.then_some(stateless),
                    own,
                };
                let old_of = |p: Option<Value>| {
                    if modern {
                        Some(value_built::stateless(
                            p,
                            MODERN_VERSION,
                            caps(f),
                            "1.2.3",
                            level,
                        ))
                    } else {
                        p
                    }
                };
                // No params (ping, server/discover).
                let new = frame_of(RequestParams {
                    meta: meta(None),
                    body: NO_PARAMS,
                });
                assert_eq!(
                    new.as_ref(),
                    value_built::request(5, "m", old_of(None)).as_slice()
                );
                // A list page with and without a cursor.
                for cursor in [None, Some("c\u{1}1")] {
                    let new = frame_of(RequestParams {
                        meta: meta(None),
                        body: list_params(cursor),
                    });
                    let old = old_of(cursor.map(|c| json!({"cursor": c})));
                    assert_eq!(new.as_ref(), value_built::request(5, "m", old).as_slice());
                }
                // A tool call, with and without arguments, its own `_meta` and a task.
                for (arguments, own_meta, task) in [
                    (None, None, false),
                    (Some(&args), Some(&own), true),
                    (Some(&args), Some(&no_meta), false),
                ] {
                    let mut p = call_tool_params("t-1", arguments);
                    p.task = task.then_some(Empty {});
                    let new = frame_of(RequestParams {
                        meta: meta(own_meta),
                        body: Some(p),
                    });
                    let mut old = json!({"name": "t-1", "arguments": arguments.cloned().unwrap_or(json!({}))});
                    if task {
                        old["task"] = json!({});
                    }
                    if let Some(m) = own_meta.filter(|m| !m.is_empty()) {
                        old["_meta"] = Value::Object(m.clone());
                    }
                    assert_eq!(
                        new.as_ref(),
                        value_built::request(5, "m", old_of(Some(old))).as_slice()
                    );
                }
                // A body still built as a `Value` (an operation's).
                let body = json!({"uri": "file:///a", "ref": {"type": "ref/prompt"}});
                let new = frame_of(RequestParams {
                    meta: meta(None),
                    body: Some(&body),
                });
                assert_eq!(
                    new.as_ref(),
                    value_built::request(5, "m", old_of(Some(body.clone()))).as_slice()
                );
            }
        }
    }
    // Notifications and answers.
    let old = serde_json::to_vec(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 42, "reason": "timed \"out\""}}),
    )
    .unwrap();
    assert_eq!(
        encode_cancelled(42, "timed \"out\"").as_ref(),
        old.as_slice()
    );
    let old = serde_json::to_vec(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .unwrap();
    assert_eq!(
        encode_notification("notifications/initialized", NO_PARAMS).as_ref(),
        old.as_slice()
    );
    for id in [json!(3), json!("x-1")] {
        let id = PeerRequestId(id);
        let old =
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id.0, "result": {"roots": []}}))
                .unwrap();
        assert_eq!(
            encode_result(&id, json!({"roots": []})).as_ref(),
            old.as_slice()
        );
        let old = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id.0,
            "error": {"code": -32601, "message": "Method not found: x"}}))
        .unwrap();
        assert_eq!(
            encode_error(&id, -32601, "Method not found: x").as_ref(),
            old.as_slice()
        );
    }
}
