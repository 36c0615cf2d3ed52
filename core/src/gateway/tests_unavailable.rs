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

#[test]
fn the_shells_latest_word_on_what_awaits_approval_replaces_the_last() {
    let mut g = serving();
    let unknown = || {
        CallOutcome::Err(CallError::UnknownTool {
            tool: "mcp_project_db_query".into(),
        })
    };
    g.handle(GatewayInput::Unavailable(UnavailableServers::from([(
        "project_db".to_string(),
        Unavailable::AwaitingApproval,
    )])));
    let text = tool_error_text(&call_fails_with(&mut g, "mcp_project_db_query", unknown()));
    assert!(text.contains("approved: project_db;"), "{text}");
    // Approved since (or gone from the config): no longer named; another one now awaits.
    g.handle(GatewayInput::Unavailable(UnavailableServers::from([(
        "fresh".to_string(),
        Unavailable::AwaitingApproval,
    )])));
    let text = tool_error_text(&call_fails_with(&mut g, "mcp_project_db_query", unknown()));
    assert!(text.contains("approved: fresh;"), "{text}");
    g.handle(GatewayInput::Unavailable(UnavailableServers::new()));
    let plain = call_fails_with(&mut g, "mcp_project_db_query", unknown());
    assert_eq!(plain["error"]["code"], wire::INVALID_PARAMS, "{plain}");
}
