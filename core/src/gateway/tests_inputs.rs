//! Inputs of stateless clients' calls: the key each is asked under (the server's own when it
//! is free in the call's round, the gateway's otherwise), and roots asked of the client that
//! declared them or answered from the gateway's.

use super::*;
use crate::manager::{CallOutcome, PeerRequestKey, RoundInput};
use crate::protocol::{PeerAnswer, PeerRequestKind, Root};
use crate::tool::{ToolDef, ToolResult};
use serde_json::json;

const V: &str = "2026-07-28";

fn gateway() -> Gateway {
    let mut g = Gateway::new(GatewayOptions {
        first_call: 100,
        request_state_key: Some(StateKey([3; 32])),
        roots: vec![Root {
            uri: "file:///configured".into(),
            name: None,
        }],
        ..GatewayOptions::default()
    });
    g.handle(GatewayInput::View(View {
        tools: Arc::new(vec![Tool {
            qualified_name: "mcp_up_ask".into(),
            server: "up".into(),
            def: ToolDef::named("ask"),
            deferred: false,
        }]),
        ..View::default()
    }));
    g
}

fn drain(g: &mut Gateway) -> Vec<GatewayOutput> {
    std::iter::from_fn(|| g.poll_output()).collect()
}

/// A `tools/call` of a stateless client declaring `caps`, on session and exchange `n`, with
/// `extra` params (a retry's state and answers).
fn call(g: &mut Gateway, n: u64, caps: Value, extra: Value) -> Vec<GatewayOutput> {
    let mut params = json!({
        "name": "mcp_up_ask", "arguments": {},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": V,
            "io.modelcontextprotocol/clientCapabilities": caps,
            "io.modelcontextprotocol/clientInfo": { "name": "t", "version": "1" },
        }
    });
    if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    g.handle(GatewayInput::Opened {
        session: SessionId(n),
        strict: true,
    });
    g.handle(GatewayInput::HttpFrame {
        session: SessionId(n),
        exchange: ExchangeId(n),
        frame: Bytes::from(
            json!({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params})
                .to_string(),
        ),
        headers: RequestHeaders {
            protocol_version: Some(V.into()),
            name: Some("mcp_up_ask".into()),
            method: Some("tools/call".into()),
        },
    });
    drain(g)
}

fn frames(outs: &[GatewayOutput]) -> Vec<Value> {
    outs.iter()
        .filter_map(|o| match o {
            GatewayOutput::Send { frame, .. } => Some(serde_json::from_slice(frame).unwrap()),
            _ => None,
        })
        .collect()
}

fn answers(outs: &[GatewayOutput]) -> Vec<(PeerRequestKey, PeerAnswer)> {
    outs.iter()
        .filter_map(|o| match o {
            GatewayOutput::Manager(Input::AnswerPeerRequest { request, answer }) => {
                Some((*request, answer.clone()))
            }
            _ => None,
        })
        .collect()
}

fn call_id(outs: &[GatewayOutput]) -> CallId {
    outs.iter()
        .find_map(|o| match o {
            GatewayOutput::Manager(Input::CallTool { call, .. }) => Some(*call),
            _ => None,
        })
        .expect("the call goes to the manager")
}

/// Input `request` of the server's, the input `key` of a round of `of` (none: a request of
/// the server's own).
fn ask(g: &mut Gateway, request: u64, kind: PeerRequestKind, input: Option<(&str, usize)>) {
    g.handle_event(&Event::PeerRequest {
        server: "up".into(),
        request: PeerRequestKey(request),
        kind,
        input: input.map(|(key, of)| RoundInput {
            key: key.to_string(),
            of,
        }),
    });
}

fn name() -> PeerRequestKind {
    PeerRequestKind::ElicitForm {
        message: "What is your name?".into(),
        requested_schema: json!({"type": "object", "properties": {"name": {"type": "string"}}}),
    }
}

fn sampling() -> PeerRequestKind {
    PeerRequestKind::Sampling {
        params: json!({"messages": [], "maxTokens": 5}),
    }
}

/// The keys and methods of an `InputRequiredResult`, and its state.
fn asked(frame: &Value) -> (BTreeMap<String, String>, String) {
    assert_eq!(frame["result"]["resultType"], "input_required", "{frame}");
    let keys = frame["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v["method"].as_str().unwrap().to_string()))
        .collect();
    let state = frame["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_string();
    (keys, state)
}

#[test]
fn the_client_is_asked_under_the_servers_own_key_and_its_answer_reaches_that_input() {
    let mut g = gateway();
    let caps = json!({"elicitation": {}});
    let c = call_id(&call(&mut g, 1, caps.clone(), json!({})));
    ask(&mut g, 7, name(), Some(("user_name", 1)));
    let (keys, state) = asked(&frames(&drain(&mut g))[0]);
    assert_eq!(keys.keys().collect::<Vec<_>>(), vec!["user_name"]);
    let retry = json!({
        "requestState": state,
        "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Ada"}}}
    });
    let outs = call(&mut g, 2, caps, retry);
    assert_eq!(
        answers(&outs),
        vec![(
            PeerRequestKey(7),
            PeerAnswer::Accept {
                content: json!({"name": "Ada"}).as_object().cloned()
            }
        )]
    );
    g.handle_event(&Event::CallCompleted {
        call: c,
        outcome: CallOutcome::Ok(
            serde_json::from_value::<ToolResult>(json!({"content": []})).unwrap(),
        ),
    });
    assert_eq!(frames(&drain(&mut g))[0]["id"], 2);
}

#[test]
fn a_key_taken_in_the_round_or_too_long_gets_a_gateway_key_and_each_answer_its_input() {
    let mut g = gateway();
    let caps = json!({"elicitation": {}, "sampling": {}});
    call(&mut g, 1, caps.clone(), json!({}));
    // One round of three: the first takes the server's key; the second, under the same key,
    // gets the gateway's (whose plain form the first already holds); an overlong key too.
    ask(&mut g, 7, name(), Some(("input-8", 3)));
    assert!(frames(&drain(&mut g)).is_empty(), "the round is not in yet");
    ask(&mut g, 8, sampling(), Some(("input-8", 3)));
    let long = "k".repeat(mrtr::MAX_KEY_LEN + 1);
    ask(&mut g, 10, sampling(), Some((&long, 3)));
    let f = frames(&drain(&mut g));
    assert_eq!(f.len(), 1, "one answer for the whole round");
    let (keys, state) = asked(&f[0]);
    let expected: BTreeMap<String, String> = [
        ("input-8", "elicitation/create"),
        ("input-8-1", "sampling/createMessage"),
        ("input-10", "sampling/createMessage"),
    ]
    .into_iter()
    .map(|(k, m)| (k.to_string(), m.to_string()))
    .collect();
    assert_eq!(keys, expected);
    let sampled = json!({"role": "assistant", "content": {"type": "text", "text": "hi"}});
    let retry = json!({
        "requestState": state,
        "inputResponses": {
            "input-8": {"action": "accept", "content": {"name": "first"}},
            "input-8-1": sampled,
            "input-10": sampled,
        }
    });
    let mut got = answers(&call(&mut g, 2, caps, retry));
    got.sort_by_key(|(k, _)| *k);
    assert_eq!(
        got,
        vec![
            (
                PeerRequestKey(7),
                PeerAnswer::Accept {
                    content: json!({"name": "first"}).as_object().cloned()
                }
            ),
            (
                PeerRequestKey(8),
                PeerAnswer::Result {
                    result: sampled.clone()
                }
            ),
            (PeerRequestKey(10), PeerAnswer::Result { result: sampled }),
        ]
    );
}

#[test]
fn a_round_is_asked_whole_and_what_the_client_did_not_declare_is_declined_or_answered() {
    // The client declared everything: one InputRequiredResult with all three.
    let mut g = gateway();
    call(
        &mut g,
        1,
        json!({"elicitation": {}, "sampling": {}, "roots": {}}),
        json!({}),
    );
    ask(&mut g, 1, name(), Some(("user_name", 3)));
    ask(&mut g, 2, sampling(), Some(("greeting", 3)));
    ask(&mut g, 3, PeerRequestKind::Roots, Some(("client_roots", 3)));
    let (keys, _) = asked(&frames(&drain(&mut g))[0]);
    assert_eq!(
        keys.values().map(String::as_str).collect::<Vec<_>>(),
        vec!["roots/list", "sampling/createMessage", "elicitation/create"]
    );

    // Sampling only (the upstream asked for what switchboard declared to it): the client is
    // asked for sampling alone, the elicitation is refused naming why, the roots are the
    // gateway's.
    let mut g = gateway();
    call(&mut g, 1, json!({"sampling": {}}), json!({}));
    ask(&mut g, 1, sampling(), Some(("a_completion", 3)));
    ask(&mut g, 2, name(), Some(("a_name", 3)));
    ask(&mut g, 3, PeerRequestKind::Roots, Some(("the_roots", 3)));
    let outs = drain(&mut g);
    let (keys, _) = asked(&frames(&outs)[0]);
    assert_eq!(keys.keys().collect::<Vec<_>>(), vec!["a_completion"]);
    let got: BTreeMap<PeerRequestKey, PeerAnswer> = answers(&outs).into_iter().collect();
    assert!(matches!(
        &got[&PeerRequestKey(2)],
        PeerAnswer::Error { message, .. }
            if message.contains("did not declare the elicitation capability")
    ));
    assert_eq!(
        got[&PeerRequestKey(3)],
        PeerAnswer::Result {
            result: json!({"roots": [{"uri": "file:///configured"}]})
        }
    );
    assert_eq!(got.len(), 2);

    // Nothing the client declared: MissingRequiredClientCapability, and the call cancelled.
    let mut g = gateway();
    let c = call_id(&call(&mut g, 1, json!({}), json!({})));
    ask(&mut g, 1, name(), Some(("a_name", 1)));
    let outs = drain(&mut g);
    assert_eq!(frames(&outs)[0]["error"]["code"], -32021);
    assert!(outs
        .iter()
        .any(|o| matches!(o, GatewayOutput::Manager(Input::CancelCall { call }) if *call == c)));
}

#[test]
fn roots_go_to_a_stateless_client_that_declared_them_and_come_back_as_its_list() {
    let mut g = gateway();
    let caps = json!({"roots": {}});
    call(&mut g, 1, caps.clone(), json!({}));
    ask(&mut g, 4, PeerRequestKind::Roots, Some(("client_roots", 1)));
    let f = frames(&drain(&mut g));
    let (keys, state) = asked(&f[0]);
    assert_eq!(keys["client_roots"], "roots/list");
    let list = json!({"roots": [{"uri": "file:///downstream", "name": "d"}]});
    let retry = json!({"requestState": state, "inputResponses": {"client_roots": list}});
    assert_eq!(
        answers(&call(&mut g, 2, caps, retry)),
        vec![(PeerRequestKey(4), PeerAnswer::Result { result: list })]
    );
    assert_eq!(g.counters().roots_answered, 0);
}

#[test]
fn roots_of_a_client_that_did_not_declare_them_or_of_no_stateless_call_are_the_gateways() {
    let configured = PeerAnswer::Result {
        result: json!({"roots": [{"uri": "file:///configured"}]}),
    };
    // A stateless client that did not declare roots: answered at once, the client is not
    // asked and its call goes on.
    let mut g = gateway();
    call(&mut g, 1, json!({"sampling": {}}), json!({}));
    ask(&mut g, 4, PeerRequestKind::Roots, Some(("client_roots", 1)));
    let outs = drain(&mut g);
    assert!(frames(&outs).is_empty(), "the client is not asked");
    assert_eq!(
        answers(&outs),
        vec![(PeerRequestKey(4), configured.clone())]
    );
    // The same call asks for sampling next: that still reaches the client.
    ask(&mut g, 5, sampling(), Some(("greeting", 1)));
    let (keys, _) = asked(&frames(&drain(&mut g))[0]);
    assert_eq!(keys.keys().collect::<Vec<_>>(), vec!["greeting"]);
    assert_eq!(g.counters().roots_answered, 1);

    // No call in flight at all, or a call of a session of the older revisions.
    let mut g = gateway();
    ask(&mut g, 6, PeerRequestKind::Roots, Some(("r", 1)));
    assert_eq!(
        answers(&drain(&mut g)),
        vec![(PeerRequestKey(6), configured)]
    );
    g.handle(GatewayInput::Opened {
        session: SessionId(9),
        strict: false,
    });
    for msg in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"roots": {}},
            "clientInfo": {"name": "old", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "mcp_up_ask"}}),
    ] {
        g.handle(GatewayInput::Frame {
            session: SessionId(9),
            exchange: ExchangeId(9),
            frame: Bytes::from(msg.to_string()),
        });
    }
    let outs = drain(&mut g);
    // The session is asked for its roots (the mirror); its answer becomes the gateway's.
    let id = frames(&outs)
        .into_iter()
        .find(|f| f["method"] == "roots/list")
        .map(|f| f["id"].clone())
        .expect("the session's roots are mirrored");
    g.handle(GatewayInput::Frame {
        session: SessionId(9),
        exchange: ExchangeId(10),
        frame: Bytes::from(
            json!({"jsonrpc": "2.0", "id": id, "result": {"roots": [{"uri": "file:///old"}]}})
                .to_string(),
        ),
    });
    drain(&mut g);
    ask(&mut g, 7, PeerRequestKind::Roots, Some(("r", 1)));
    let outs = drain(&mut g);
    assert!(
        frames(&outs).is_empty(),
        "a session is never asked per input"
    );
    assert_eq!(
        answers(&outs),
        vec![(
            PeerRequestKey(7),
            PeerAnswer::Result {
                result: json!({"roots": [{"uri": "file:///old"}]})
            }
        )]
    );
}

#[test]
fn a_legacy_upstreams_request_reaches_a_stateless_client_under_a_gateway_key() {
    let mut g = gateway();
    let caps = json!({"elicitation": {}});
    call(&mut g, 1, caps.clone(), json!({}));
    // A server of the older revisions asks with a request of its own: no key of its.
    ask(&mut g, 3, name(), None);
    let (keys, state) = asked(&frames(&drain(&mut g))[0]);
    assert_eq!(keys.keys().collect::<Vec<_>>(), vec!["input-3"]);
    let retry = json!({
        "requestState": state,
        "inputResponses": {"input-3": {"action": "accept", "content": {"name": "Bo"}}}
    });
    assert_eq!(
        answers(&call(&mut g, 2, caps, retry)),
        vec![(
            PeerRequestKey(3),
            PeerAnswer::Accept {
                content: json!({"name": "Bo"}).as_object().cloned()
            }
        )]
    );
}
