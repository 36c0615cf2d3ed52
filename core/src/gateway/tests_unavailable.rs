//! Clear tool errors: a call to a tool of a server that failed, awaits approval or needs a
//! login is a tool error naming the server, the reason and the fix.

use super::*;
use crate::manager::{CallError, CallOutcome, ServerError, ServerErrorKind};
use crate::tool::ToolDef;
use serde_json::json;

const S: SessionId = SessionId(1);
const X: ExchangeId = ExchangeId(3);

fn tool(server: &str, name: &str) -> Tool {
    Tool {
        qualified_name: format!("mcp_{server}_{name}"),
        server: server.into(),
        def: ToolDef::named(name),
        deferred: true,
    }
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

/// A gateway serving `mcp_remote_search` (deferred), with a client initialized.
fn serving() -> Gateway {
    let mut g = Gateway::new(GatewayOptions {
        first_call: 100,
        ..GatewayOptions::default()
    });
    g.handle(GatewayInput::View(View {
        tools: Arc::new(vec![tool("remote", "search")]),
        ..View::default()
    }));
    g.handle(GatewayInput::Opened {
        session: S,
        strict: false,
    });
    send(
        &mut g,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}),
    );
    g
}

/// Call `tool`, complete the call with `outcome`, and return the answer's JSON.
fn call_fails_with(g: &mut Gateway, tool: &str, outcome: CallOutcome) -> Value {
    let outs = send(
        g,
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": tool}}),
    );
    let call = outs
        .iter()
        .find_map(|o| match o {
            GatewayOutput::Manager(Input::CallTool { call, .. }) => Some(*call),
            _ => None,
        })
        .expect("the call goes to the manager");
    g.handle_event(&Event::CallCompleted { call, outcome });
    let outs = drain(g);
    let frame = outs
        .iter()
        .find_map(|o| match o {
            GatewayOutput::Send { frame, .. } => Some(serde_json::from_slice(frame).unwrap()),
            _ => None,
        })
        .expect("an answer");
    frame
}

fn tool_error_text(answer: &Value) -> String {
    assert_eq!(answer["id"], 9, "{answer}");
    assert_eq!(answer["result"]["isError"], true, "a tool error: {answer}");
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_call_to_a_server_that_needs_a_login_names_the_login_command() {
    let mut g = serving();
    let error = ServerError::new(
        ServerErrorKind::NeedsLogin,
        "the server requires authorization",
    );
    let text = tool_error_text(&call_fails_with(
        &mut g,
        "mcp_remote_search",
        CallOutcome::Err(CallError::Transport(error)),
    ));
    assert!(text.contains("\"remote\""), "{text}");
    assert!(text.contains("requires authorization"), "{text}");
    assert!(text.contains("`switchboard login remote`"), "{text}");
}

#[test]
fn a_call_to_a_server_that_failed_names_its_error_and_where_to_look() {
    let mut g = serving();
    // The server's tools were withdrawn with it; the shell said why it failed.
    g.handle(GatewayInput::Unavailable(UnavailableServers::from([(
        "remote".to_string(),
        Unavailable::Failed(ServerError::new(
            ServerErrorKind::InitializeFailed,
            "initialize failed: bad version",
        )),
    )])));
    let text = tool_error_text(&call_fails_with(
        &mut g,
        "mcp_remote_search",
        CallOutcome::Err(CallError::WithdrawnTool {
            tool: "mcp_remote_search".into(),
            server: "remote".into(),
        }),
    ));
    assert!(text.contains("\"remote\""), "{text}");
    assert!(text.contains("initialize failed: bad version"), "{text}");
    assert!(text.contains("`switchboard status`"), "{text}");
    // A server that is not connected says its own error (the call carries it).
    let reason = ServerError::new(ServerErrorKind::Unauthorized, "401 from the server");
    let text = tool_error_text(&call_fails_with(
        &mut g,
        "mcp_remote_search",
        CallOutcome::Err(CallError::NotConnected {
            server: "remote".into(),
            reason: Some(reason),
        }),
    ));
    assert!(text.contains("401 from the server"), "{text}");
    assert!(text.contains("`switchboard login remote`"), "{text}");
}

#[test]
fn a_call_that_waited_for_a_server_awaiting_approval_names_the_trust_command() {
    let mut g = serving();
    g.handle(GatewayInput::Unavailable(UnavailableServers::from([(
        "remote".to_string(),
        Unavailable::AwaitingApproval,
    )])));
    let text = tool_error_text(&call_fails_with(
        &mut g,
        "mcp_remote_search",
        CallOutcome::Err(CallError::Timeout {
            after: std::time::Duration::from_secs(60),
            waiting_for: Some("remote".into()),
        }),
    ));
    assert!(text.contains("awaiting approval"), "{text}");
    assert!(text.contains("`switchboard trust remote`"), "{text}");
}

#[test]
fn an_unknown_tool_while_servers_await_approval_says_so_and_otherwise_is_invalid_params() {
    let mut g = serving();
    let unknown = || {
        CallOutcome::Err(CallError::UnknownTool {
            tool: "mcp_project_db_query".into(),
        })
    };
    let plain = call_fails_with(&mut g, "mcp_project_db_query", unknown());
    assert_eq!(plain["error"]["code"], wire::INVALID_PARAMS, "{plain}");
    g.handle(GatewayInput::Unavailable(UnavailableServers::from([(
        "project_db".to_string(),
        Unavailable::AwaitingApproval,
    )])));
    let text = tool_error_text(&call_fails_with(&mut g, "mcp_project_db_query", unknown()));
    assert!(text.contains("project_db"), "{text}");
    assert!(text.contains("`switchboard trust`"), "{text}");
}

// ----- roots, mirrored from the downstream client ------------------------------------------

fn roots_gateway() -> Gateway {
    let mut g = Gateway::new(GatewayOptions {
        first_call: 100,
        roots: vec![crate::protocol::Root {
            uri: "file:///configured".into(),
            name: None,
        }],
        ..GatewayOptions::default()
    });
    for session in [SessionId(1), SessionId(2)] {
        g.handle(GatewayInput::Opened {
            session,
            strict: false,
        });
    }
    g
}

fn frame_on(g: &mut Gateway, session: SessionId, msg: Value) -> Vec<GatewayOutput> {
    g.handle(GatewayInput::Frame {
        session,
        exchange: X,
        frame: Bytes::from(msg.to_string()),
    });
    drain(g)
}

/// The `roots/list` the gateway sent `session`, by its id.
fn roots_asked(outs: &[GatewayOutput], session: SessionId) -> Option<Value> {
    outs.iter().find_map(|o| match o {
        GatewayOutput::Send {
            session: s, frame, ..
        } if *s == session => {
            let v: Value = serde_json::from_slice(frame).ok()?;
            (v["method"] == "roots/list").then(|| v["id"].clone())
        }
        _ => None,
    })
}

fn roots_set(outs: &[GatewayOutput]) -> Option<Vec<String>> {
    outs.iter().find_map(|o| match o {
        GatewayOutput::Manager(Input::SetRoots { roots }) => {
            Some(roots.iter().map(|r| r.uri.clone()).collect())
        }
        _ => None,
    })
}

fn init(g: &mut Gateway, session: SessionId, caps: Value) -> Vec<GatewayOutput> {
    frame_on(
        g,
        session,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": caps}}),
    );
    frame_on(
        g,
        session,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
}

#[test]
fn a_client_that_declared_roots_is_asked_and_its_roots_become_the_managers() {
    let mut g = roots_gateway();
    // A client without the capability is never asked.
    assert_eq!(
        roots_asked(&init(&mut g, SessionId(1), json!({})), SessionId(1)),
        None
    );
    let outs = init(
        &mut g,
        SessionId(2),
        json!({"roots": {"listChanged": true}}),
    );
    let id = roots_asked(&outs, SessionId(2)).expect("asked once initialized");
    let outs = frame_on(
        &mut g,
        SessionId(2),
        json!({"jsonrpc": "2.0", "id": id, "result": {"roots": [{"uri": "file:///work/a", "name": "a"}]}}),
    );
    assert_eq!(roots_set(&outs), Some(vec!["file:///work/a".to_string()]));
    // Its change is asked again and passed on; the same roots again change nothing.
    let outs = frame_on(
        &mut g,
        SessionId(2),
        json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}),
    );
    let id = roots_asked(&outs, SessionId(2)).expect("asked again after list_changed");
    let outs = frame_on(
        &mut g,
        SessionId(2),
        json!({"jsonrpc": "2.0", "id": id, "result": {"roots": [{"uri": "file:///work/b"}]}}),
    );
    assert_eq!(roots_set(&outs), Some(vec!["file:///work/b".to_string()]));
    // A late second answer to the same question is not taken.
    let outs = frame_on(
        &mut g,
        SessionId(2),
        json!({"jsonrpc": "2.0", "id": id, "result": {"roots": [{"uri": "file:///work/c"}]}}),
    );
    assert_eq!(roots_set(&outs), None);
    // The session ends: the configured roots apply again.
    g.handle(GatewayInput::Closed {
        session: SessionId(2),
    });
    assert_eq!(
        roots_set(&drain(&mut g)),
        Some(vec!["file:///configured".to_string()])
    );
}
