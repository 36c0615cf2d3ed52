//! The codec and the lifecycle end to end, on one scripted server: protocol versions, paging
//! limits, oversized frames, stray responses, servers without tools, `Reload`, `RefreshTools`,
//! and calls whose tool or server is gone.

use super::*;
use switchboard_core::manager::Level;

#[test]
fn an_unsupported_protocol_version_fails_the_connection_with_a_clear_error() {
    let mut s = Script::new();
    initialized(
        &mut s,
        json!({"protocolVersion": "1999-01-01", "capabilities": {"tools": {}}}),
    );
    let conn = s.conn("a");
    let r = startup_reports(&s);
    assert_eq!(r.len(), 1);
    assert_eq!(failed_with(r[0], "a"), ServerErrorKind::UnsupportedVersion);
    assert_eq!(closes(&s, conn), 1);
    assert_eq!(
        sent_methods(&s, conn),
        ["initialize"],
        "no initialized, no tools/list"
    );
    assert_eq!(s.m.status("a"), ServerStatus::Disconnected);
    assert_eq!(s.m.counters().unsupported_versions, 1);
    snap("codec_unsupported_protocol_version", &s);
}

#[test]
fn a_repeated_next_cursor_fails_the_listing() {
    let mut s = Script::new();
    initialized(&mut s, init_result());
    let conn = s.conn("a");
    s.reply(
        30,
        "a",
        "tools/list",
        json!({"tools": [{"name": "x", "inputSchema": {"type": "object"}}], "nextCursor": "c1"}),
    );
    s.reply(
        40,
        "a",
        "tools/list",
        json!({"tools": [{"name": "y", "inputSchema": {"type": "object"}}], "nextCursor": "c1"}),
    );
    let r = startup_reports(&s);
    assert_eq!(failed_with(r[0], "a"), ServerErrorKind::ListFailed);
    assert_eq!(
        sent_methods(&s, conn),
        [
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/list"
        ],
        "no third page asked for"
    );
    assert_eq!(closes(&s, conn), 1);
    assert!(s.tool_names().is_empty());
    assert_eq!(s.m.counters().repeated_cursors, 1);
}

#[test]
fn more_pages_than_the_limit_fail_the_listing() {
    assert_eq!(
        ManagerOptions::default().max_tool_pages,
        1000,
        "the default limit"
    );
    let mut s = Script::with(ManagerOptions {
        max_tool_pages: 3,
        ..opts()
    });
    initialized(&mut s, init_result());
    let conn = s.conn("a");
    for (k, t) in [(1, 30), (2, 40), (3, 50)] {
        s.reply(
            t,
            "a",
            "tools/list",
            json!({"tools": [{"name": format!("t{k}"), "inputSchema": {"type": "object"}}], "nextCursor": format!("p{k}")}),
        );
    }
    let r = startup_reports(&s);
    assert_eq!(failed_with(r[0], "a"), ServerErrorKind::ListFailed);
    let lists = sent_methods(&s, conn)
        .iter()
        .filter(|m| *m == "tools/list")
        .count();
    assert_eq!(lists, 3, "the page over the limit is never asked for");
    assert_eq!(closes(&s, conn), 1);
}

#[test]
fn a_frame_over_the_size_limit_fails_the_connection() {
    let mut s = Script::with(ManagerOptions {
        max_frame_len: 1024,
        ..never_reconnect()
    });
    initialized(&mut s, init_result());
    s.reply(30, "a", "tools/list", tools_json(&["echo"]));
    assert_eq!(s.m.status("a"), ServerStatus::Connected);
    let conn = s.conn("a");
    let big = json!({"jsonrpc": "2.0", "method": "notifications/message",
                     "params": {"level": "info", "data": "x".repeat(2000)}});
    let len = big.to_string().len();
    s.frame_on(100, conn, big);
    let err = s.m.server_state("a").unwrap().last_error.unwrap();
    assert_eq!(err.kind, ServerErrorKind::FrameTooLarge);
    // The size is a fact the user needs, so it is part of the error, not only its words.
    assert!(err.message.contains(&format!("{len} bytes")), "{err}");
    assert_eq!(closes(&s, conn), 1);
    assert_eq!(s.m.status("a"), ServerStatus::Disconnected);
    assert!(s.tool_names().is_empty());
    assert_eq!(s.m.counters().bad_frames, 1);
    assert_eq!(
        s.count(|o| matches!(o, Output::Event(Event::ServerLog { .. }))),
        0,
        "the oversized message is not decoded"
    );
}

#[test]
fn responses_to_unknown_and_already_answered_ids_become_diagnostics() {
    let mut s = Script::new();
    initialized(&mut s, init_result());
    s.reply(30, "a", "tools/list", tools_json(&["echo"]));
    let conn = s.conn("a");
    let mark = s.outputs.len();
    // An id never issued, then the initialize answer (id 0) again.
    s.frame_on(40, conn, json!({"jsonrpc": "2.0", "id": 99, "result": {}}));
    s.frame_on(
        50,
        conn,
        json!({"jsonrpc": "2.0", "id": 0, "result": init_result()}),
    );
    let diags: Vec<(Level, String)> = s.outputs[mark..]
        .iter()
        .map(|o| match o {
            Output::Event(Event::Diagnostic {
                server: Some(n),
                level,
                message,
            }) if n == "a" => (*level, message.clone()),
            other => panic!("unexpected output {other:?}"),
        })
        .collect();
    // An id never sent is the server's confusion: a warning. A late or repeated answer to
    // one we did send is routine (a call given up on): only for debugging.
    assert_eq!(
        diags,
        [
            (
                Level::Warn,
                "ignored a response to request id 99, which this connection never sent".into()
            ),
            (
                Level::Debug,
                "ignored a response to an unknown or already answered request id 0".into()
            ),
        ]
    );
    assert_eq!(s.m.counters().unknown_responses, 2);
    assert_eq!(
        s.m.status("a"),
        ServerStatus::Connected,
        "nothing else changed"
    );
    assert_eq!(s.tool_names(), vec!["mcp_a_echo"]);
}

#[test]
fn a_server_without_the_tools_capability_is_ready_with_no_tools_and_never_listed() {
    let mut s = Script::new();
    initialized(
        &mut s,
        json!({"protocolVersion": "2025-06-18", "capabilities": {"logging": {}}}),
    );
    let conn = s.conn("a");
    assert_eq!(s.m.status("a"), ServerStatus::Connected);
    assert_eq!(
        sent_methods(&s, conn),
        ["initialize", "notifications/initialized"]
    );
    let r = startup_reports(&s);
    assert_eq!(r[0].connected, vec!["a"]);
    assert!(r[0].tools.is_empty());
    assert!(s.tool_names().is_empty());
    assert_eq!(s.m.server_state("a").unwrap().tool_count, 0);
}

#[test]
fn reload_disconnects_every_server_then_connects_the_new_set() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("a"), stdio("b")]);
    s.cache(1, "a", None);
    s.cache(1, "b", None);
    s.ready(10, "a", &["x"]);
    s.ready(10, "b", &["y"]);
    let (a0, b0) = (s.conn("a"), s.conn("b"));
    s.reload(100, vec![stdio("b"), stdio("c")]);
    assert_eq!(closes(&s, a0), 1);
    assert_eq!(
        closes(&s, b0),
        1,
        "reload restarts even an unchanged server"
    );
    assert_ne!(s.conn("b"), b0);
    assert_eq!(s.m.status("a"), ServerStatus::Disconnected);
    assert!(s.m.server_state("a").is_none(), "a is forgotten");
    assert_eq!(s.m.pending_connections(), vec!["b", "c"]);
    assert!(s.tool_names().is_empty());
    s.cache(101, "c", None);
    s.ready(110, "b", &["y"]);
    s.ready(110, "c", &["z"]);
    let r = startup_reports(&s);
    assert_eq!(r.len(), 2);
    assert_eq!(r[1].connected, vec!["b", "c"]);
    assert_eq!(s.tool_names(), vec!["mcp_b_y", "mcp_c_z"]);
    snap("lifecycle_reload", &s);
}

#[test]
fn refresh_tools_relists_one_server_and_announces_its_new_tools() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("a"), stdio("b")]);
    s.cache(1, "a", None);
    s.cache(1, "b", None);
    s.ready(10, "a", &["x"]);
    s.ready(10, "b", &["y"]);
    let mark = s.outputs.len();
    s.refresh(100, "a");
    assert_eq!(sent_methods(&s, s.conn("a")).last().unwrap(), "tools/list");
    s.reply(110, "a", "tools/list", tools_json(&["x", "x2"]));
    assert_eq!(
        s.count(
            |o| matches!(o, Output::Event(Event::ToolsChanged { servers }) if servers == &["a"])
        ),
        1
    );
    assert_eq!(s.tool_names(), vec!["mcp_a_x", "mcp_a_x2", "mcp_b_y"]);
    assert!(s.outputs[mark..].iter().all(|o| !matches!(o,
        Output::Send { conn, .. } | Output::CloseTransport { conn } if *conn == s.conn("b"))));
    // A refresh of an unknown server is refused, at once and nothing more.
    let mark = s.outputs.len();
    let request = s.refresh(200, "nope");
    assert_eq!(
        s.outputs[mark..],
        [Output::Event(Event::RequestFailed {
            request,
            error: RequestError::UnknownServer("nope".into()),
        })]
    );
    snap("lifecycle_refresh_tools", &s);
}

#[test]
fn calls_to_an_unknown_tool_or_a_stopped_servers_tool_fail_at_once() {
    let mut s = Script::with(never_reconnect());
    s.call(0, 1, "mcp_nope_x", json!({}));
    assert_eq!(
        call_error(&s, 1),
        &CallError::UnknownTool {
            tool: "mcp_nope_x".into()
        }
    );
    s.connect(0, vec![stdio("a")]);
    s.cache(1, "a", None);
    s.ready(10, "a", &["echo"]);
    let conn = s.conn("a");
    s.at(
        50,
        Input::Transport {
            conn,
            event: TransportEvent::Closed {
                reason: "process exited (exit status: 1)".into(),
            },
        },
    );
    assert_eq!(s.m.status("a"), ServerStatus::Disconnected);
    s.call(60, 2, "mcp_a_echo", json!({}));
    assert_eq!(
        call_error(&s, 2),
        &CallError::WithdrawnTool {
            tool: "mcp_a_echo".into(),
            server: "a".into()
        }
    );
    assert!(s.m.calls_in_flight().is_empty());
    // The same once the server is forgotten.
    s.disconnect(70, "a");
    s.call(80, 3, "mcp_a_echo", json!({}));
    assert!(
        matches!(call_error(&s, 3), CallError::WithdrawnTool { server, .. } if server == "a"),
        "{:?}",
        s.outcome(3)
    );
}

#[test]
fn a_sent_call_completes_once_with_an_error_when_its_server_is_disconnected() {
    let mut s = Script::new();
    initialized(&mut s, init_result());
    s.reply(30, "a", "tools/list", tools_json(&["echo"]));
    let conn = s.conn("a");
    s.call(100, 1, "mcp_a_echo", json!({"text": "hi"}));
    assert_eq!(sent_methods(&s, conn).last().unwrap(), "tools/call");
    s.disconnect(150, "a");
    assert_eq!(
        call_error(&s, 1),
        &CallError::Disconnected { server: "a".into() }
    );
    // The answer arriving afterwards is stale: no second completion.
    s.frame_on(
        160,
        conn,
        json!({"jsonrpc": "2.0", "id": 2, "result": {"content": []}}),
    );
    assert_eq!(s.outcome(1).len(), 1);
    assert!(s.m.calls_in_flight().is_empty());
    assert_eq!(closes(&s, conn), 1);
}

#[test]
fn a_tools_list_that_times_out_sends_notifications_cancelled() {
    let mut s = Script::with(ManagerOptions {
        request_timeout: ms(1000),
        ..opts()
    });
    initialized(&mut s, init_result());
    let conn = s.conn("a");
    let mark = s.outputs.len();
    s.advance_to(1020);
    let cancelled = s.outputs[mark..].iter().position(|o| {
        matches!(o,
        Output::Send { conn: c, frame, .. } if *c == conn
            && serde_json::from_slice::<serde_json::Value>(frame).unwrap()
                == json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"requestId": 1, "reason": "request timed out"}}))
    });
    let closed = s.outputs[mark..]
        .iter()
        .position(|o| matches!(o, Output::CloseTransport { conn: c } if *c == conn));
    assert!(
        cancelled.is_some() && closed.is_some() && cancelled < closed,
        "cancelled, then closed: {cancelled:?} {closed:?}"
    );
    let r = startup_reports(&s);
    assert_eq!(failed_with(r[0], "a"), ServerErrorKind::ListFailed);
    assert_eq!(s.m.counters().request_timeouts, 1);
    snap("codec_tools_list_timeout_cancels", &s);
}
