//! Scripted traces of the gateway: a downstream client's frames in, the manager's events in,
//! and exactly the frames and manager inputs expected out.

use super::*;
use crate::catalog::OperationOutcome;
use crate::manager::{CallError, CallOutcome, ServerError, ServerErrorKind};
use crate::tool::{ToolDef, ToolResult};
use serde_json::json;

const S: SessionId = SessionId(1);
const X: ExchangeId = ExchangeId(7);

fn tool(server: &str, name: &str) -> Tool {
    Tool {
        qualified_name: format!("mcp_{server}_{name}"),
        server: server.into(),
        def: ToolDef::named(name),
        deferred: false,
    }
}

fn view(tools: Vec<Tool>) -> View {
    View {
        tools: Arc::new(tools),
        ..View::default()
    }
}

fn gateway() -> Gateway {
    let mut g = Gateway::new(GatewayOptions {
        first_call: 100,
        ..GatewayOptions::default()
    });
    g.handle(GatewayInput::Opened {
        session: S,
        strict: false,
    });
    g
}

fn drain(g: &mut Gateway) -> Vec<GatewayOutput> {
    std::iter::from_fn(|| g.poll_output()).collect()
}

fn send(g: &mut Gateway, msg: Value) -> Vec<GatewayOutput> {
    g.handle(GatewayInput::Frame {
        session: S,
        exchange: X,
        frame: Bytes::from(msg.to_string()),
    });
    drain(g)
}

/// The frames of `outs` as JSON, with where each went.
fn frames(outs: &[GatewayOutput]) -> Vec<(Target, Value)> {
    outs.iter()
        .filter_map(|o| match o {
            GatewayOutput::Send { target, frame, .. } => {
                Some((*target, serde_json::from_slice(frame).unwrap()))
            }
            _ => None,
        })
        .collect()
}

fn answer(outs: &[GatewayOutput]) -> Value {
    let f = frames(outs);
    assert_eq!(f.len(), 1, "{outs:?}");
    assert_eq!(
        f[0].0,
        Target::Exchange {
            exchange: X,
            last: true
        }
    );
    f[0].1.clone()
}

fn initialize(g: &mut Gateway) -> Value {
    let outs = send(
        g,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}
        }}),
    );
    answer(&outs)
}

#[test]
fn initialize_agrees_on_the_clients_version_and_declares_list_changed() {
    let mut g = gateway();
    let r = initialize(&mut g);
    assert_eq!(r["id"], 0);
    assert_eq!(r["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(r["result"]["capabilities"]["tools"]["listChanged"], true);
    assert_eq!(r["result"]["serverInfo"]["name"], "switchboard");
    // An unknown version gets the newest.
    let mut g = gateway();
    let outs = send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "1999-01-01"}}),
    );
    assert_eq!(answer(&outs)["result"]["protocolVersion"], "2025-11-25");
}

#[test]
fn tools_list_is_the_view_under_qualified_names_without_execution() {
    let mut g = gateway();
    let mut t = tool("fast", "echo");
    t.def.execution = Some(crate::tool::RawJson::from_value(
        &json!({"taskSupport": "required"}),
    ));
    t.deferred = true;
    g.handle(GatewayInput::View(view(vec![t, tool("slow", "sleep")])));
    assert!(drain(&mut g).is_empty(), "no session initialized yet");
    initialize(&mut g);
    let r = answer(&send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": "a", "method": "tools/list"}),
    ));
    assert_eq!(r["id"], "a");
    assert_eq!(
        r["result"],
        json!({"tools": [
            {"name": "mcp_fast_echo", "inputSchema": {"type": "object"}},
            {"name": "mcp_slow_sleep", "inputSchema": {"type": "object"}},
        ]})
    );
}

#[test]
fn lists_are_paged_by_the_page_size() {
    let mut g = Gateway::new(GatewayOptions {
        page_size: 1,
        ..GatewayOptions::default()
    });
    g.handle(GatewayInput::Opened {
        session: S,
        strict: false,
    });
    g.handle(GatewayInput::View(view(vec![
        tool("a", "x"),
        tool("b", "y"),
    ])));
    let r = answer(&send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    ));
    assert_eq!(r["result"]["tools"][0]["name"], "mcp_a_x");
    assert_eq!(r["result"]["nextCursor"], "1");
    let r = answer(&send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"cursor": "1"}}),
    ));
    assert_eq!(r["result"]["tools"][0]["name"], "mcp_b_y");
    assert!(r["result"].get("nextCursor").is_none());
    let r = answer(&send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"cursor": "x"}}),
    ));
    assert_eq!(r["error"]["code"], wire::INVALID_PARAMS);
}

#[test]
fn a_changed_view_is_announced_once_to_each_initialized_session() {
    let mut g = gateway();
    initialize(&mut g);
    g.handle(GatewayInput::Opened {
        session: SessionId(2),
        strict: true,
    });
    g.handle(GatewayInput::View(view(vec![tool("a", "x")])));
    let outs = drain(&mut g);
    assert_eq!(
        frames(&outs),
        vec![(
            Target::Session,
            json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        )]
    );
    // The same view again changes nothing downstream.
    g.handle(GatewayInput::View(view(vec![tool("a", "x")])));
    assert!(drain(&mut g).is_empty());
    assert_eq!(g.counters().list_changed, 1);
    // A deferred tool turning live is announced: its definitions are confirmed.
    let mut cached = tool("a", "x");
    cached.deferred = true;
    g.handle(GatewayInput::View(view(vec![cached])));
    g.handle(GatewayInput::View(view(vec![tool("a", "x")])));
    assert_eq!(frames(&drain(&mut g)).len(), 2);
}

#[test]
fn a_tool_call_goes_to_the_manager_and_its_result_back_as_sent() {
    let mut g = gateway();
    g.handle(GatewayInput::View(view(vec![tool("fast", "echo")])));
    initialize(&mut g);
    let outs = send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
            "name": "mcp_fast_echo", "arguments": {"text": "hi"},
            "_meta": {"progressToken": "p1", "trace": 1}
        }}),
    );
    assert_eq!(
        outs,
        vec![GatewayOutput::Manager(Input::CallTool {
            call: CallId(100),
            tool: "mcp_fast_echo".into(),
            arguments: Some(json!({"text": "hi"})),
            timeout: None,
            progress: true,
            meta: Some(json!({"trace": 1}).as_object().unwrap().clone()),
        })]
    );
    g.handle_event(
        &(Event::Progress {
            server: "fast".into(),
            call: Some(CallId(100)),
            progress: 1.0,
            total: Some(2.0),
            message: None,
        }),
    );
    let outs = drain(&mut g);
    assert_eq!(
        frames(&outs),
        vec![(
            Target::Exchange {
                exchange: X,
                last: false
            },
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
                "progressToken": "p1", "progress": 1.0, "total": 2.0
            }})
        )]
    );
    let raw = r#"{"content":[{"type":"text","text":"hi"}],"_meta":{"x":1}}"#;
    let mut result: ToolResult = serde_json::from_str(raw).unwrap();
    result.raw = Some(crate::tool::RawJson::from_value(
        &serde_json::from_str(raw).unwrap(),
    ));
    g.handle_event(
        &(Event::CallCompleted {
            call: CallId(100),
            outcome: CallOutcome::Ok(result),
        }),
    );
    let r = answer(&drain(&mut g));
    assert_eq!(
        r,
        json!({"jsonrpc": "2.0", "id": 5, "result": serde_json::from_str::<Value>(raw).unwrap()})
    );
    assert_eq!(g.in_flight().count(), 0);
    assert_eq!(g.counters().answered, 2);
}

#[test]
fn a_failed_server_is_a_tool_error_naming_it_and_why() {
    let mut g = gateway();
    g.handle(GatewayInput::View(view(vec![tool("slow", "sleep")])));
    send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "mcp_slow_sleep"}}),
    );
    g.handle_event(
        &(Event::CallCompleted {
            call: CallId(100),
            outcome: CallOutcome::Err(CallError::NotConnected {
                server: "slow".into(),
                reason: Some(ServerError::new(
                    ServerErrorKind::ConnectTimeout,
                    "connect timed out after 30000 ms",
                )),
            }),
        }),
    );
    let r = answer(&drain(&mut g));
    assert_eq!(r["result"]["isError"], true);
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("server \"slow\""), "{text}");
    assert!(text.contains("connect timed out"), "{text}");
}

#[test]
fn server_rpc_errors_pass_through_and_unknown_tools_are_invalid_params() {
    let mut g = gateway();
    send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}}),
    );
    send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "y"}}),
    );
    g.handle_event(
        &(Event::CallCompleted {
            call: CallId(100),
            outcome: CallOutcome::Err(CallError::Rpc {
                code: -32042,
                message: "nope".into(),
                data: Some(json!({"a": 1})),
            }),
        }),
    );
    let r = answer(&drain(&mut g));
    assert_eq!(
        r["error"],
        json!({"code": -32042, "message": "nope", "data": {"a": 1}})
    );
    g.handle_event(
        &(Event::CallCompleted {
            call: CallId(101),
            outcome: CallOutcome::Err(CallError::UnknownTool { tool: "y".into() }),
        }),
    );
    let r = answer(&drain(&mut g));
    assert_eq!(r["id"], 2);
    assert_eq!(r["error"]["code"], wire::INVALID_PARAMS);
}

#[test]
fn a_cancelled_request_is_cancelled_upstream_and_never_answered() {
    let mut g = gateway();
    send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "x"}}),
    );
    let outs = send(
        &mut g,
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}),
    );
    assert_eq!(
        outs,
        vec![
            GatewayOutput::Accepted {
                session: S,
                exchange: X
            },
            GatewayOutput::Manager(Input::CancelCall { call: CallId(100) }),
        ]
    );
    g.handle_event(
        &(Event::CallCompleted {
            call: CallId(100),
            outcome: CallOutcome::Cancelled,
        }),
    );
    assert!(drain(&mut g).is_empty());
}

#[test]
fn a_closed_session_cancels_its_requests_and_releases_its_subscriptions() {
    let mut g = gateway();
    send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe", "params": {"uri": "file:///a"}}),
    );
    g.handle_event(
        &(Event::OperationCompleted {
            call: CallId(100),
            outcome: OperationOutcome::Ok(crate::catalog::OperationResult::Done {
                server: "s".into(),
            }),
        }),
    );
    assert_eq!(answer(&drain(&mut g))["result"], json!({}));
    g.handle_event(
        &(Event::ResourceUpdated {
            server: "s".into(),
            uri: "file:///a".into(),
        }),
    );
    assert_eq!(
        frames(&drain(&mut g)),
        vec![(
            Target::Session,
            json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "file:///a"}})
        )]
    );
    send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "x"}}),
    );
    g.handle(GatewayInput::Closed { session: S });
    let outs = drain(&mut g);
    assert_eq!(
        outs,
        vec![
            GatewayOutput::Manager(Input::CancelCall { call: CallId(101) }),
            GatewayOutput::Manager(Input::Operation {
                call: CallId(102),
                op: crate::catalog::Operation::Unsubscribe {
                    uri: "file:///a".into(),
                    server: None
                },
                timeout: None,
            }),
        ]
    );
    assert_eq!(g.in_flight().count(), 0);
}

#[test]
fn a_strict_session_must_start_with_initialize() {
    let mut g = Gateway::new(GatewayOptions::default());
    g.handle(GatewayInput::Opened {
        session: S,
        strict: true,
    });
    let outs = send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    );
    assert_eq!(outs.len(), 2);
    assert_eq!(frames(&outs)[0].1["error"]["code"], wire::INVALID_REQUEST);
    assert_eq!(outs[1], GatewayOutput::Close { session: S });
    assert_eq!(g.sessions().count(), 0);
}

#[test]
fn malformed_frames_and_unknown_methods_get_errors() {
    let mut g = gateway();
    let r = answer(&send(&mut g, json!([1, 2])));
    assert_eq!(r["error"]["code"], wire::INVALID_REQUEST);
    g.handle(GatewayInput::Frame {
        session: S,
        exchange: X,
        frame: Bytes::from_static(b"{not json"),
    });
    let r = answer(&drain(&mut g));
    assert_eq!(r["error"]["code"], wire::PARSE_ERROR);
    assert_eq!(r["id"], Value::Null);
    let r = answer(&send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": 3, "method": "nope/nope"}),
    ));
    assert_eq!(r["error"]["code"], wire::METHOD_NOT_FOUND);
    assert_eq!(g.counters().malformed, 2);
}

#[test]
fn requests_in_flight_are_bounded_per_session() {
    let mut g = Gateway::new(GatewayOptions {
        max_in_flight: 1,
        ..GatewayOptions::default()
    });
    g.handle(GatewayInput::Opened {
        session: S,
        strict: false,
    });
    send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}}),
    );
    let r = answer(&send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "x"}}),
    ));
    assert_eq!(r["error"]["code"], wire::TOO_MANY_REQUESTS);
}

#[test]
fn server_logs_reach_sessions_that_set_a_level_at_or_above_it() {
    let mut g = gateway();
    initialize(&mut g);
    let log = |severity: &str| Event::ServerLog {
        server: "s".into(),
        level: crate::manager::Level::Info,
        severity: severity.into(),
        logger: Some("db".into()),
        data: json!("hello"),
    };
    g.handle_event(&log("error"));
    assert!(drain(&mut g).is_empty(), "no level set: nothing forwarded");
    send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "warning"}}),
    );
    g.handle_event(&log("info"));
    assert!(drain(&mut g).is_empty());
    g.handle_event(&log("error"));
    assert_eq!(
        frames(&drain(&mut g))[0].1["params"],
        json!({"level": "error", "logger": "s/db", "data": "hello"})
    );
}

fn initialize_with(g: &mut Gateway, capabilities: Value) {
    let outs = send(
        g,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": capabilities,
            "clientInfo": {"name": "t", "version": "1"}
        }}),
    );
    answer(&outs);
}

/// The manager input of `outs`, the only one.
fn manager_input(outs: &[GatewayOutput]) -> Input {
    let inputs: Vec<&Input> = outs
        .iter()
        .filter_map(|o| match o {
            GatewayOutput::Manager(i) => Some(i),
            _ => None,
        })
        .collect();
    assert_eq!(inputs.len(), 1, "{outs:?}");
    inputs[0].clone()
}

fn sampling() -> crate::protocol::PeerRequestKind {
    crate::protocol::PeerRequestKind::Sampling {
        params: json!({"messages": [], "maxTokens": 10}),
    }
}

#[test]
fn a_servers_sampling_request_is_forwarded_on_the_calls_exchange_and_answered_once() {
    use crate::manager::PeerRequestKey;
    use crate::protocol::PeerAnswer;
    let mut g = gateway();
    g.handle(GatewayInput::View(view(vec![tool("llm", "ask")])));
    initialize_with(&mut g, json!({"sampling": {}}));
    let outs = send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "mcp_llm_ask"}}),
    );
    assert!(matches!(manager_input(&outs), Input::CallTool { .. }));
    let key = PeerRequestKey(3);
    g.handle_event(&Event::PeerRequest {
        server: "llm".into(),
        request: key,
        kind: sampling(),
        input: None,
    });
    let f = frames(&drain(&mut g));
    assert_eq!(f.len(), 1);
    assert_eq!(
        f[0].0,
        Target::Exchange {
            exchange: X,
            last: false
        }
    );
    assert_eq!(f[0].1["method"], "sampling/createMessage");
    assert_eq!(f[0].1["params"]["maxTokens"], 10);
    let id = f[0].1["id"].clone();
    assert_eq!(g.forwarded_peer_requests().collect::<Vec<_>>(), [key]);

    let result =
        json!({"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"});
    let outs = send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": id, "result": result}),
    );
    assert_eq!(
        manager_input(&outs),
        Input::AnswerPeerRequest {
            request: key,
            answer: PeerAnswer::Result { result }
        }
    );
    // A second response to the same id is not a second answer.
    let outs = send(&mut g, json!({"jsonrpc": "2.0", "id": id, "result": {}}));
    assert!(outs.iter().all(|o| !matches!(o, GatewayOutput::Manager(_))));
    assert_eq!(g.counters().peer_forwarded, 1);
    assert_eq!(g.counters().peer_answered, 1);
}

#[test]
fn a_servers_request_nobody_can_answer_is_refused_naming_the_server() {
    use crate::manager::PeerRequestKey;
    use crate::protocol::PeerAnswer;
    let mut g = gateway();
    g.handle(GatewayInput::View(view(vec![tool("llm", "ask")])));
    // No capability declared.
    initialize_with(&mut g, json!({}));
    send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "mcp_llm_ask"}}),
    );
    g.handle_event(&Event::PeerRequest {
        server: "llm".into(),
        request: PeerRequestKey(1),
        kind: sampling(),
        input: None,
    });
    match manager_input(&drain(&mut g)) {
        Input::AnswerPeerRequest {
            answer: PeerAnswer::Error { message, code },
            ..
        } => {
            assert!(
                message.contains("did not declare sampling") && message.contains("\"llm\""),
                "{message}"
            );
            // Switchboard declared sampling upstream: the server must not read "method not
            // found" (the simulator's servers check exactly that).
            assert_eq!(code, crate::protocol::codes::INTERNAL_ERROR);
        }
        other => panic!("{other:?}"),
    }
    // No call in flight to the server that asks.
    g.handle_event(&Event::PeerRequest {
        server: "other".into(),
        request: PeerRequestKey(2),
        kind: sampling(),
        input: None,
    });
    match manager_input(&drain(&mut g)) {
        Input::AnswerPeerRequest {
            answer: PeerAnswer::Error { message, .. },
            ..
        } => assert!(message.contains("no request"), "{message}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_session_that_ends_answers_what_it_was_asked_and_a_withdrawn_request_is_cancelled_downstream() {
    use crate::manager::{PeerRequestKey, WithdrawReason};
    use crate::protocol::PeerAnswer;
    let mut g = gateway();
    g.handle(GatewayInput::View(view(vec![tool("llm", "ask")])));
    initialize_with(&mut g, json!({"sampling": {}}));
    send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "mcp_llm_ask"}}),
    );
    for k in [1, 2] {
        g.handle_event(&Event::PeerRequest {
            server: "llm".into(),
            request: PeerRequestKey(k),
            kind: sampling(),
            input: None,
        });
    }
    let asked = frames(&drain(&mut g));
    g.handle_event(&Event::PeerRequestWithdrawn {
        server: "llm".into(),
        request: PeerRequestKey(1),
        reason: WithdrawReason::TimedOut,
    });
    let f = frames(&drain(&mut g));
    assert_eq!(f[0].1["method"], "notifications/cancelled");
    assert_eq!(f[0].1["params"]["requestId"], asked[0].1["id"]);
    g.handle(GatewayInput::Closed { session: S });
    let outs = drain(&mut g);
    let answers: Vec<&Input> = outs
        .iter()
        .filter_map(|o| match o {
            GatewayOutput::Manager(i @ Input::AnswerPeerRequest { .. }) => Some(i),
            _ => None,
        })
        .collect();
    assert_eq!(answers.len(), 1, "{outs:?}");
    assert!(matches!(
        answers[0],
        Input::AnswerPeerRequest {
            request: PeerRequestKey(2),
            answer: PeerAnswer::Error { .. }
        }
    ));
    assert_eq!(g.forwarded_peer_requests().count(), 0);
}

#[test]
fn plain_names_serve_unique_tools_under_their_own_names_and_resolve_calls() {
    let mut g = Gateway::new(GatewayOptions {
        first_call: 100,
        plain_names: true,
        ..GatewayOptions::default()
    });
    g.handle(GatewayInput::Opened {
        session: S,
        strict: false,
    });
    g.handle(GatewayInput::View(view(vec![
        tool("a", "echo"),
        tool("b", "echo"),
        tool("a", "add"),
    ])));
    initialize(&mut g);
    let r = answer(&send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    ));
    let names: Vec<&str> = r["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["mcp_a_echo", "mcp_b_echo", "add"]);
    let outs = send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add"}}),
    );
    assert!(matches!(manager_input(&outs), Input::CallTool { tool, .. } if tool == "mcp_a_add"));
    // A second server with an `add` turns both back to qualified names, announced.
    g.handle(GatewayInput::View(view(vec![
        tool("a", "echo"),
        tool("b", "echo"),
        tool("a", "add"),
        tool("c", "add"),
    ])));
    let f = frames(&drain(&mut g));
    assert_eq!(f[0].1["method"], "notifications/tools/list_changed");
}

#[test]
fn tool_search_serves_two_tools_searches_the_view_and_calls_what_it_found() {
    let mut g = Gateway::new(GatewayOptions {
        first_call: 100,
        tool_search: true,
        ..GatewayOptions::default()
    });
    g.handle(GatewayInput::Opened {
        session: S,
        strict: false,
    });
    let mut weather = tool("w", "forecast");
    weather.def.description = Some("Today's weather forecast".into());
    g.handle(GatewayInput::View(view(vec![
        weather,
        tool("fs", "read_file"),
    ])));
    initialize(&mut g);
    let r = answer(&send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    ));
    let names: Vec<&str> = r["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["search_tools", "call_tool"]);
    let r = answer(&send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "search_tools", "arguments": {"query": "weather"}
        }}),
    ));
    let found = &r["result"]["structuredContent"]["tools"];
    assert_eq!(found.as_array().unwrap().len(), 1, "{r}");
    assert_eq!(found[0]["name"], "mcp_w_forecast");
    let outs = send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "call_tool", "arguments": {"name": "mcp_w_forecast", "arguments": {"day": 1}}
        }}),
    );
    assert!(matches!(
        manager_input(&outs),
        Input::CallTool { tool, arguments: Some(a), .. } if tool == "mcp_w_forecast" && a["day"] == 1
    ));
    // The view's own names are not served in this mode.
    let r = answer(&send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "mcp_fs_read_file"}}),
    ));
    assert_eq!(r["error"]["code"], wire::INVALID_PARAMS);
    // A changed view is no tools/list_changed: the two tools stay.
    g.handle(GatewayInput::View(view(vec![tool("fs", "read_file")])));
    assert!(frames(&drain(&mut g)).is_empty());
}
