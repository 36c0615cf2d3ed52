//! Scripted traces of the stateless revision downstream: HTTP exchanges on sessions opened
//! for them alone, the envelope and header checks, discovery, results, listen streams and
//! multi round-trip requests.

use super::*;
use crate::catalog::{Operation, OperationOutcome};
use crate::manager::{CallError, CallOutcome, PeerRequestKey};
use crate::protocol::{PeerAnswer, PeerRequestKind};
use crate::tool::{ToolDef, ToolResult};
use serde_json::json;

const V: &str = "2026-07-28";
const KEY: StateKey = StateKey([9; 32]);

fn tool(server: &str, name: &str) -> Tool {
    Tool {
        qualified_name: format!("mcp_{server}_{name}"),
        server: server.into(),
        def: ToolDef::named(name),
        deferred: false,
    }
}

fn gateway() -> Gateway {
    let mut g = Gateway::new(GatewayOptions {
        first_call: 100,
        request_state_key: Some(KEY),
        ..GatewayOptions::default()
    });
    g.handle(GatewayInput::View(View {
        tools: Arc::new(vec![tool("llm", "ask"), tool("fs", "read")]),
        ..View::default()
    }));
    g
}

fn drain(g: &mut Gateway) -> Vec<GatewayOutput> {
    std::iter::from_fn(|| g.poll_output()).collect()
}

fn meta(caps: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": { "name": "t", "version": "1" },
    })
}

/// The name the `Mcp-Name` header carries for a request.
fn name_of(method: &str, params: &Value) -> Option<String> {
    let key = if method == "resources/read" {
        "uri"
    } else {
        "name"
    };
    matches!(method, "tools/call" | "prompts/get" | "resources/read")
        .then(|| params.get(key).and_then(Value::as_str).map(str::to_string))
        .flatten()
}

/// One POST without a session id: the shell opens session `n` and exchange `n` for it.
fn post(g: &mut Gateway, n: u64, msg: Value) -> Vec<GatewayOutput> {
    let method = msg["method"].as_str().unwrap_or("").to_string();
    let headers = RequestHeaders {
        protocol_version: Some(V.into()),
        name: name_of(&method, &msg["params"]),
        method: Some(method),
    };
    post_with(g, n, msg, headers)
}

fn post_with(g: &mut Gateway, n: u64, msg: Value, headers: RequestHeaders) -> Vec<GatewayOutput> {
    g.handle(GatewayInput::Opened {
        session: SessionId(n),
        strict: true,
    });
    g.handle(GatewayInput::HttpFrame {
        session: SessionId(n),
        exchange: ExchangeId(n),
        frame: Bytes::from(msg.to_string()),
        headers,
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

fn status(outs: &[GatewayOutput]) -> Option<ExchangeStatus> {
    outs.iter().rev().find_map(|o| match o {
        GatewayOutput::Stateless { status, .. } => Some(*status),
        _ => None,
    })
}

fn closed(outs: &[GatewayOutput], n: u64) -> bool {
    outs.iter()
        .any(|o| matches!(o, GatewayOutput::Close { session } if *session == SessionId(n)))
}

fn manager_inputs(outs: &[GatewayOutput]) -> Vec<Input> {
    outs.iter()
        .filter_map(|o| match o {
            GatewayOutput::Manager(i) => Some(i.clone()),
            _ => None,
        })
        .collect()
}

fn call_of(outs: &[GatewayOutput]) -> CallId {
    match manager_inputs(outs).as_slice() {
        [Input::CallTool { call, .. }] => *call,
        other => panic!("expected one call, got {other:?}"),
    }
}

fn elicit() -> PeerRequestKind {
    PeerRequestKind::ElicitForm {
        message: "name?".into(),
        requested_schema: json!({ "type": "object", "properties": { "name": { "type": "string" } } }),
    }
}

fn ok_result(text: &str) -> CallOutcome {
    CallOutcome::Ok(
        serde_json::from_value::<ToolResult>(
            json!({ "content": [{ "type": "text", "text": text }] }),
        )
        .unwrap(),
    )
}

fn ask(n: u64, tool: &str, caps: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {
        "name": tool, "arguments": {}, "_meta": meta(caps)
    }})
}

#[test]
fn discover_answers_without_a_session_and_the_session_closes_once_answered() {
    let mut g = gateway();
    let outs = post(
        &mut g,
        1,
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta(json!({}))}}),
    );
    let f = frames(&outs);
    assert_eq!(f.len(), 1);
    let r = &f[0]["result"];
    assert_eq!(r["supportedVersions"][0], V);
    assert!(r["supportedVersions"]
        .as_array()
        .unwrap()
        .contains(&json!("2025-11-25")));
    assert_eq!(r["capabilities"]["tools"]["listChanged"], true);
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "switchboard"
    );
    assert_eq!(r["resultType"], "complete");
    assert_eq!(status(&outs), Some(ExchangeStatus::Ok));
    assert!(closed(&outs, 1), "{outs:?}");
    assert_eq!(g.sessions().count(), 0);
}

#[test]
fn the_envelope_and_headers_are_checked_with_the_revisions_codes_and_statuses() {
    let mut g = gateway();
    let req = |id: u64, method: &str, params: Value| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    // No envelope.
    let outs = post(&mut g, 1, req(1, "tools/list", json!({})));
    assert_eq!(frames(&outs)[0]["error"]["code"], wire::INVALID_PARAMS);
    assert_eq!(status(&outs), Some(ExchangeStatus::BadRequest));
    // A version we do not speak, in the header and the envelope alike.
    let mut m = meta(json!({}));
    m["io.modelcontextprotocol/protocolVersion"] = json!("v999");
    let headers = RequestHeaders {
        protocol_version: Some("v999".into()),
        method: Some("tools/list".into()),
        name: None,
    };
    let outs = post_with(
        &mut g,
        2,
        req(2, "tools/list", json!({"_meta": m})),
        headers,
    );
    let e = &frames(&outs)[0];
    assert_eq!(e["id"], 2);
    assert_eq!(e["error"]["code"], -32022);
    assert_eq!(e["error"]["data"]["requested"], "v999");
    assert_eq!(e["error"]["data"]["supported"][0], V);
    assert_eq!(status(&outs), Some(ExchangeStatus::BadRequest));
    // The header says one version, the envelope another.
    let outs = post(&mut g, 3, req(3, "tools/list", json!({"_meta": m})));
    assert_eq!(frames(&outs)[0]["error"]["code"], -32020);
    // Mcp-Method missing; Mcp-Name not the tool called.
    let headers = RequestHeaders {
        protocol_version: Some(V.into()),
        method: None,
        name: None,
    };
    let outs = post_with(
        &mut g,
        4,
        req(4, "tools/list", json!({"_meta": meta(json!({}))})),
        headers,
    );
    assert_eq!(frames(&outs)[0]["error"]["code"], -32020);
    let headers = RequestHeaders {
        protocol_version: Some(V.into()),
        method: Some("tools/call".into()),
        name: Some("other".into()),
    };
    let outs = post_with(&mut g, 5, ask(5, "mcp_llm_ask", json!({})), headers);
    assert_eq!(frames(&outs)[0]["error"]["code"], -32020);
    assert_eq!(status(&outs), Some(ExchangeStatus::BadRequest));
    assert!(manager_inputs(&outs).is_empty());
    // Removed and unknown methods: not found, 404.
    for (n, method) in [
        (6, "initialize"),
        (7, "ping"),
        (8, "logging/setLevel"),
        (9, "nope/x"),
    ] {
        let outs = post(&mut g, n, req(n, method, json!({"_meta": meta(json!({}))})));
        assert_eq!(
            frames(&outs)[0]["error"]["code"],
            wire::METHOD_NOT_FOUND,
            "{method}"
        );
        assert_eq!(status(&outs), Some(ExchangeStatus::NotFound), "{method}");
    }
    assert_eq!(g.sessions().count(), 0, "every one-exchange session closed");
}

#[test]
fn lists_carry_result_type_and_cache_hints_and_calls_result_type() {
    let mut g = gateway();
    let outs = post(
        &mut g,
        1,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta(json!({}))}}),
    );
    let r = &frames(&outs)[0]["result"];
    assert_eq!(r["tools"][0]["name"], "mcp_llm_ask");
    assert_eq!(r["resultType"], "complete");
    assert_eq!(r["ttlMs"], 0);
    assert_eq!(r["cacheScope"], "private");
    // A call: the envelope does not go upstream, the answer says it is complete.
    let outs = post(&mut g, 2, ask(2, "mcp_fs_read", json!({})));
    let inputs = manager_inputs(&outs);
    let Input::CallTool { call, meta, .. } = &inputs[0] else {
        panic!("{inputs:?}")
    };
    assert_eq!(meta, &None);
    assert!(!closed(&outs, 2), "open while the call is in flight");
    g.handle_event(&Event::CallCompleted {
        call: *call,
        outcome: ok_result("hi"),
    });
    let outs = drain(&mut g);
    let r = &frames(&outs)[0];
    assert_eq!(r["id"], 2);
    assert_eq!(r["result"]["resultType"], "complete");
    assert_eq!(r["result"]["content"][0]["text"], "hi");
    assert!(closed(&outs, 2));
}

#[test]
fn a_missing_resource_is_invalid_params_in_the_stateless_revision() {
    let mut g = gateway();
    let outs = post(
        &mut g,
        1,
        json!({"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {
            "uri": "x://nope", "_meta": meta(json!({}))
        }}),
    );
    let call = match manager_inputs(&outs).as_slice() {
        [Input::Operation {
            call,
            op: Operation::ReadResource { .. },
            ..
        }] => *call,
        other => panic!("{other:?}"),
    };
    g.handle_event(&Event::OperationCompleted {
        call,
        outcome: OperationOutcome::Err(CallError::UnknownResource {
            uri: "x://nope".into(),
        }),
    });
    let f = frames(&drain(&mut g));
    assert_eq!(f[0]["error"]["code"], wire::INVALID_PARAMS);
    assert_eq!(f[0]["error"]["data"]["uri"], "x://nope");
}

#[test]
fn a_servers_input_request_becomes_an_input_required_result_and_the_retry_answers_it_once() {
    let mut g = gateway();
    let call = call_of(&post(
        &mut g,
        1,
        ask(1, "mcp_llm_ask", json!({"elicitation": {}})),
    ));
    g.handle_event(&Event::PeerRequest {
        server: "llm".into(),
        request: PeerRequestKey(7),
        kind: elicit(),
        input: None,
    });
    let outs = drain(&mut g);
    let r = &frames(&outs)[0];
    assert_eq!(r["id"], 1);
    assert_eq!(r["result"]["resultType"], "input_required");
    let (key, input) = r["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .map(|(k, v)| (k.clone(), v.clone()))
        .unwrap();
    assert_eq!(input["method"], "elicitation/create");
    assert_eq!(input["params"]["message"], "name?");
    let state = r["result"]["requestState"].as_str().unwrap().to_string();
    assert!(closed(&outs, 1), "the exchange is over; the call is not");
    assert!(
        manager_inputs(&outs).is_empty(),
        "the call is not cancelled"
    );
    assert_eq!(g.parked_calls().collect::<Vec<_>>(), vec![call]);

    // A changed state is refused, and nothing is answered upstream.
    let retry = |n: u64, state: &str, responses: Value| {
        json!({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {
            "name": "mcp_llm_ask", "arguments": {}, "_meta": meta(json!({"elicitation": {}})),
            "requestState": state, "inputResponses": responses
        }})
    };
    let answer = json!({ key.clone(): { "action": "accept", "content": { "name": "Ada" } } });
    let outs = post(&mut g, 2, retry(2, &format!("{state}x"), answer.clone()));
    assert_eq!(frames(&outs)[0]["error"]["code"], wire::INVALID_PARAMS);
    assert!(manager_inputs(&outs).is_empty());

    // The retry answers the server once and takes the call's answer.
    let outs = post(&mut g, 3, retry(3, &state, answer.clone()));
    let inputs = manager_inputs(&outs);
    assert_eq!(
        inputs,
        vec![Input::AnswerPeerRequest {
            request: PeerRequestKey(7),
            answer: PeerAnswer::Accept {
                content: json!({ "name": "Ada" }).as_object().cloned()
            }
        }]
    );
    assert!(frames(&outs).is_empty(), "waits for the call");
    g.handle_event(&Event::CallCompleted {
        call,
        outcome: ok_result("Hello, Ada!"),
    });
    let outs = drain(&mut g);
    let r = &frames(&outs)[0];
    assert_eq!(r["id"], 3);
    assert_eq!(r["result"]["resultType"], "complete");
    assert!(closed(&outs, 3));
    assert_eq!(g.counters().peer_answered, 1);
    // The same state again, once the call is over: the call runs again (as a stateless
    // server would run it), and its server's request is answered from the state.
    let again = call_of(&post(&mut g, 4, retry(4, &state, answer)));
    assert_ne!(again, call);
    g.handle_event(&Event::PeerRequest {
        server: "llm".into(),
        request: PeerRequestKey(8),
        kind: elicit(),
        input: None,
    });
    let outs = drain(&mut g);
    assert!(frames(&outs).is_empty(), "the client is not asked again");
    assert!(matches!(
        manager_inputs(&outs).as_slice(),
        [Input::AnswerPeerRequest {
            request: PeerRequestKey(8),
            answer: PeerAnswer::Accept { .. }
        }]
    ));
}

#[test]
fn a_retry_that_lands_on_another_gateway_with_the_key_runs_the_call_there_with_its_answers() {
    let mut a = gateway();
    let mut b = Gateway::new(GatewayOptions {
        first_call: 100,
        request_state_key: Some(KEY),
        instance: 2,
        ..GatewayOptions::default()
    });
    b.handle(GatewayInput::View(a.view().clone()));
    let call_a = call_of(&post(
        &mut a,
        1,
        ask(1, "mcp_llm_ask", json!({"elicitation": {}})),
    ));
    a.handle_event(&Event::PeerRequest {
        server: "llm".into(),
        request: PeerRequestKey(1),
        kind: elicit(),
        input: None,
    });
    let r = frames(&drain(&mut a))[0]["result"].clone();
    let key = r["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let retry = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "mcp_llm_ask", "arguments": {}, "_meta": meta(json!({"elicitation": {}})),
        "requestState": r["requestState"],
        "inputResponses": { key: { "action": "accept", "content": { "name": "Ada" } } }
    }});
    // B has no such call: it runs it, and answers the server's request from the state.
    let outs = post(&mut b, 2, retry);
    let call_b = call_of(&outs);
    assert_eq!(call_b, call_a, "each gateway numbers its own calls");
    b.handle_event(&Event::PeerRequest {
        server: "llm".into(),
        request: PeerRequestKey(1),
        kind: elicit(),
        input: None,
    });
    let outs = drain(&mut b);
    assert!(frames(&outs).is_empty());
    assert!(matches!(
        manager_inputs(&outs).as_slice(),
        [Input::AnswerPeerRequest { answer: PeerAnswer::Accept { content: Some(c) }, .. }] if c["name"] == "Ada"
    ));
    b.handle_event(&Event::CallCompleted {
        call: call_b,
        outcome: ok_result("Hello, Ada!"),
    });
    let f = frames(&drain(&mut b));
    assert_eq!(f[0]["id"], 2);
    assert_eq!(f[0]["result"]["content"][0]["text"], "Hello, Ada!");
    assert_eq!(b.counters().replayed, 1);
    // A gateway with another key opens none of it.
    let mut c = Gateway::new(GatewayOptions {
        request_state_key: Some(StateKey([1; 32])),
        ..GatewayOptions::default()
    });
    let mut retry = ask(3, "mcp_llm_ask", json!({}));
    retry["params"]["requestState"] = r["requestState"].clone();
    let outs = post(&mut c, 3, retry);
    assert_eq!(frames(&outs)[0]["error"]["code"], wire::INVALID_PARAMS);
    assert!(manager_inputs(&outs).is_empty());
}

#[test]
fn a_retry_without_an_answer_is_asked_again_and_a_call_that_ended_meanwhile_is_answered() {
    let mut g = gateway();
    let call = call_of(&post(
        &mut g,
        1,
        ask(1, "mcp_llm_ask", json!({"elicitation": {}})),
    ));
    g.handle_event(&Event::PeerRequest {
        server: "llm".into(),
        request: PeerRequestKey(1),
        kind: elicit(),
        input: None,
    });
    let first = frames(&drain(&mut g))[0]["result"].clone();
    let retry = |n: u64, state: &Value, responses: Value| {
        json!({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {
            "name": "mcp_llm_ask", "_meta": meta(json!({"elicitation": {}})),
            "requestState": state, "inputResponses": responses
        }})
    };
    // A wrong key: the same input is asked again, in a new round.
    let outs = post(
        &mut g,
        2,
        retry(2, &first["requestState"], json!({"wrong": {}})),
    );
    assert!(manager_inputs(&outs).is_empty());
    let again = frames(&outs)[0]["result"].clone();
    assert_eq!(again["resultType"], "input_required");
    assert_eq!(again["inputRequests"], first["inputRequests"]);
    assert_ne!(again["requestState"], first["requestState"]);
    // The call times out while the client is away: the retry gets that answer.
    g.handle_event(&Event::PeerRequestWithdrawn {
        server: "llm".into(),
        request: PeerRequestKey(1),
        reason: crate::manager::WithdrawReason::RequestEnded,
    });
    g.handle_event(&Event::CallCompleted {
        call,
        outcome: CallOutcome::Err(CallError::Protocol("gave up".into())),
    });
    assert!(frames(&drain(&mut g)).is_empty());
    let outs = post(&mut g, 3, retry(3, &again["requestState"], json!({})));
    let r = &frames(&outs)[0];
    assert_eq!(r["id"], 3);
    assert_eq!(r["result"]["isError"], true);
    assert_eq!(g.parked_calls().count(), 0);
}

#[test]
fn an_input_the_client_did_not_declare_is_missing_client_capability() {
    let mut g = gateway();
    let call = call_of(&post(&mut g, 1, ask(1, "mcp_llm_ask", json!({}))));
    g.handle_event(&Event::PeerRequest {
        server: "llm".into(),
        request: PeerRequestKey(4),
        kind: PeerRequestKind::Sampling {
            params: json!({ "messages": [], "maxTokens": 5 }),
        },
        input: None,
    });
    let outs = drain(&mut g);
    let e = &frames(&outs)[0];
    assert_eq!(e["error"]["code"], -32021);
    assert_eq!(
        e["error"]["data"]["requiredCapabilities"],
        json!({ "sampling": {} })
    );
    assert_eq!(status(&outs), Some(ExchangeStatus::BadRequest));
    let inputs = manager_inputs(&outs);
    assert!(inputs.contains(&Input::CancelCall { call }), "{inputs:?}");
    assert!(inputs.iter().any(|i| matches!(
        i,
        Input::AnswerPeerRequest {
            request: PeerRequestKey(4),
            answer: PeerAnswer::Error { .. }
        }
    )));
}

#[test]
fn without_a_key_inputs_are_refused_and_states_are_not_taken() {
    let mut g = Gateway::new(GatewayOptions::default());
    g.handle(GatewayInput::View(View {
        tools: Arc::new(vec![tool("llm", "ask")]),
        ..View::default()
    }));
    let outs = post(&mut g, 1, ask(1, "mcp_llm_ask", json!({"elicitation": {}})));
    assert_eq!(manager_inputs(&outs).len(), 1);
    g.handle_event(&Event::PeerRequest {
        server: "llm".into(),
        request: PeerRequestKey(1),
        kind: elicit(),
        input: None,
    });
    let inputs = manager_inputs(&drain(&mut g));
    assert!(matches!(
        inputs.as_slice(),
        [Input::AnswerPeerRequest {
            answer: PeerAnswer::Error { .. },
            ..
        }]
    ));
    let mut retry = ask(2, "mcp_llm_ask", json!({}));
    retry["params"]["requestState"] = json!("v1.1.1.00");
    let outs = post(&mut g, 2, retry);
    assert_eq!(frames(&outs)[0]["error"]["code"], wire::INVALID_PARAMS);
}

#[test]
fn a_listen_stream_is_acknowledged_then_told_the_changes_it_asked_for() {
    let mut g = gateway();
    let outs = post(
        &mut g,
        1,
        json!({"jsonrpc": "2.0", "id": "L", "method": "subscriptions/listen", "params": {
            "_meta": meta(json!({})),
            "notifications": { "toolsListChanged": true, "resourceSubscriptions": ["file:///a"] }
        }}),
    );
    let f = frames(&outs);
    assert_eq!(f[0]["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        f[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "L"
    );
    assert!(!closed(&outs, 1), "the stream stays open");
    // The resource is watched upstream.
    assert!(manager_inputs(&outs).iter().any(|i| matches!(
        i,
        Input::Operation { op: Operation::Subscribe { uri, .. }, .. } if uri == "file:///a"
    )));
    // Tools change: told; prompts change: not asked for.
    g.handle(GatewayInput::View(View {
        tools: Arc::new(vec![tool("llm", "ask")]),
        prompts: Arc::new(vec![]),
        ..View::default()
    }));
    let f = frames(&drain(&mut g));
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["method"], "notifications/tools/list_changed");
    assert_eq!(
        f[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "L"
    );
    g.handle_event(&Event::ResourceUpdated {
        server: "fs".into(),
        uri: "file:///a".into(),
    });
    let f = frames(&drain(&mut g));
    assert_eq!(f[0]["method"], "notifications/resources/updated");
    assert_eq!(f[0]["params"]["uri"], "file:///a");
    // The client goes: the resource is released upstream.
    g.handle(GatewayInput::Closed {
        session: SessionId(1),
    });
    assert!(manager_inputs(&drain(&mut g)).iter().any(|i| matches!(
        i,
        Input::Operation { op: Operation::Unsubscribe { uri, .. }, .. } if uri == "file:///a"
    )));
}

#[test]
fn a_legacy_session_and_a_stateless_request_are_served_side_by_side() {
    let mut g = gateway();
    g.handle(GatewayInput::Opened {
        session: SessionId(50),
        strict: true,
    });
    g.handle(GatewayInput::HttpFrame {
        session: SessionId(50),
        exchange: ExchangeId(50),
        frame: Bytes::from(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}
            }})
            .to_string(),
        ),
        headers: RequestHeaders::default(),
    });
    let outs = drain(&mut g);
    assert_eq!(frames(&outs)[0]["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(status(&outs), None, "a session's exchange");
    let outs = post(
        &mut g,
        1,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta(json!({}))}}),
    );
    assert_eq!(frames(&outs)[0]["result"]["resultType"], "complete");
    assert!(g.is_initialized(SessionId(50)));
    assert_eq!(g.sessions().collect::<Vec<_>>(), vec![SessionId(50)]);
}

#[test]
fn server_logs_reach_a_stateless_request_only_when_it_asked_for_them() {
    let mut g = gateway();
    let quiet = call_of(&post(&mut g, 1, ask(1, "mcp_llm_ask", json!({}))));
    let mut loud = ask(2, "mcp_llm_ask", json!({}));
    loud["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = json!("info");
    let loud = call_of(&post(&mut g, 2, loud));
    assert_ne!(quiet, loud);
    for severity in ["debug", "warning"] {
        g.handle_event(&Event::ServerLog {
            server: "llm".into(),
            level: crate::manager::Level::Info,
            severity: severity.into(),
            logger: None,
            data: json!("working"),
        });
    }
    let outs = drain(&mut g);
    let sent: Vec<(SessionId, Value)> = outs
        .iter()
        .filter_map(|o| match o {
            GatewayOutput::Send { session, frame, .. } => {
                Some((*session, serde_json::from_slice(frame).unwrap()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].0, SessionId(2));
    assert_eq!(sent[0].1["method"], "notifications/message");
    assert_eq!(sent[0].1["params"]["level"], "warning");
}
