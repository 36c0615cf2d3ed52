//! Failures that say why at once instead of hiding behind a timeout: an answer that cannot be
//! read fails its request with the reason (when its id can still be read), and a response to
//! an id the connection never sent is a warning, not a debug line. Asserted by the kind of
//! each outcome, never by how long it took.

use crate::script::*;
use crate::support::repo_root;
use bytes::Bytes;
use serde_json::json;
use std::time::Duration;
use switchboard::{
    Builder, CallError, Error, Event, Level, ServerConfig, ServerErrorKind, ServerSpec,
};
use switchboard_core::manager::{CallOutcome, Input, ServerStatus, TransportEvent};

#[test]
fn an_unreadable_answer_with_a_readable_id_fails_its_call_at_once() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("a")]);
    s.cache(1, "a", None);
    s.ready(2, "a", &["echo"]);
    s.call(10, 1, "mcp_a_echo", json!({}));
    // Calls are numbered after initialize (0) and tools/list (1): this one is request 2.
    let conn = s.conn("a");
    let mut frame =
        br#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"XX"}]}}"#.to_vec();
    let at = frame.windows(2).position(|w| w == b"XX").unwrap();
    frame[at] = 0xff;
    frame[at + 1] = 0xfe;
    s.at(
        11,
        Input::Transport {
            conn,
            event: TransportEvent::Frame(Bytes::from(frame)),
        },
    );
    let outcome = s.outcome(1);
    assert_eq!(outcome.len(), 1, "the call completed at once: {outcome:?}");
    match outcome[0] {
        CallOutcome::Err(CallError::Transport(e)) => {
            assert_eq!(e.kind, ServerErrorKind::RequestFailed);
            assert!(e.message.contains("could not be read"), "{e}");
        }
        other => panic!("expected a transport error, got {other:?}"),
    }
    // The server stays: one bad frame fails one request.
    assert_eq!(s.m.status("a"), ServerStatus::Connected);
    assert_eq!(s.m.counters().unreadable_answers, 1);
}

#[test]
fn unreadable_frames_that_name_no_request_are_ignored_with_a_warning() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("a")]);
    s.cache(1, "a", None);
    s.ready(2, "a", &["echo"]);
    let conn = s.conn("a");
    for frame in [&b"not json"[..], br#"{"jsonrpc":"2.0","id":77,"result":"#] {
        s.at(
            10,
            Input::Transport {
                conn,
                event: TransportEvent::Frame(Bytes::copy_from_slice(frame)),
            },
        );
    }
    let warnings = s
        .events()
        .filter(|e| matches!(e, switchboard_core::manager::Event::Diagnostic { level: Level::Warn, message, .. } if message.starts_with("ignored a frame")))
        .count();
    assert_eq!(warnings, 2);
    assert_eq!(s.m.status("a"), ServerStatus::Connected);
    assert_eq!(s.m.counters().unreadable_answers, 0);
}

fn broken() -> ServerSpec {
    let script = repo_root().join("tests/scripts/broken_answers.py");
    ServerSpec::new(
        "broken",
        ServerConfig::stdio("python3", &[script.to_string_lossy().as_ref()]),
    )
}

#[test]
fn a_real_server_s_broken_answers_fail_their_calls_with_the_reason() {
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![broken()])
            .no_cache()
            .call_timeout(Duration::from_secs(120))
            .start()
            .await
            .unwrap();
        assert_eq!(report.connected, vec!["broken"], "{report:?}");
        let events = sb.events();

        for (tool, reason) in [
            ("mcp_broken_bad_utf8", "frame is not JSON"),
            ("mcp_broken_no_jsonrpc", "\"jsonrpc\": \"2.0\""),
        ] {
            let e = sb.call(tool, json!({})).await.unwrap_err();
            match &e {
                Error::Call(CallError::Transport(s))
                    if s.kind == ServerErrorKind::RequestFailed =>
                {
                    assert!(s.message.contains(reason), "{tool}: {e}");
                }
                other => panic!("{tool}: expected a failed request, got {other:?}"),
            }
        }
        // A stray id is warned about; the call it precedes is answered as usual.
        let r = sb.call("mcp_broken_stray_id", json!({})).await.unwrap();
        assert_eq!(r.render_text(), "fine");
        let ok = sb.call("mcp_broken_ok", json!({})).await.unwrap();
        assert_eq!(ok.render_text(), "fine");
        let mut stray = 0;
        while let Ok(e) = events.try_recv() {
            if let Ok(Event::Diagnostic {
                level: Level::Warn,
                message,
                ..
            }) = &e
            {
                stray += usize::from(
                    message.contains("request id 987654, which this connection never sent"),
                );
            }
        }
        assert_eq!(stray, 1);
        sb.shutdown().await;
    });
}

/// `switchboard tools --json` against `tests/scripts/odd_tools.py`: (stdout, stderr).
fn odd_tools_json() -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let script = repo_root().join("tests/scripts/odd_tools.py");
    let config = json!({"mcpServers": {"odd": {
        "command": "python3", "args": [script.to_string_lossy()]}}});
    std::fs::write(dir.path().join("mcp.json"), config.to_string()).unwrap();
    let out = std::process::Command::new(crate::support::switchboard_bin())
        .current_dir(dir.path())
        .env_remove("RUST_LOG")
        .env("HOME", dir.path())
        .args(["--config", "mcp.json", "--no-project-config", "--no-cache"])
        // Warnings reach stderr from `-v` on (they are warning `Diagnostic` events either way).
        .args(["-v", "tools", "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (String::from_utf8(out.stdout).unwrap(), stderr)
}

#[test]
fn tools_with_bad_input_schemas_are_skipped_deep_schemas_kept_and_duplicates_warned() {
    let (stdout, stderr) = odd_tools_json();
    // Deep schemas print byte for byte (deeper than the JSON parser's depth limit, so the
    // test reads the raw text, as the server sent it).
    let deep = std::process::Command::new("python3")
        .arg(repo_root().join("tests/scripts/odd_tools.py"))
        .arg("--print-deep")
        .output()
        .unwrap();
    let deep = String::from_utf8(deep.stdout).unwrap();
    let deep = deep.trim();
    assert!(deep.len() > 5_000, "{deep}");
    assert!(
        stdout.contains(&format!("\"input_schema\": {deep}")),
        "the deep schema is not in tools --json byte for byte:\n{stdout}"
    );
    for skipped in ["as_string", "as_number", "as_array", "as_null"] {
        assert!(
            !stdout.contains(&format!("\"mcp_odd_{skipped}\"")),
            "{skipped} listed:\n{stdout}"
        );
    }
    assert!(
        stderr.contains(
            "skipped malformed tool definitions: as_string, as_number, as_array, as_null"
        ),
        "{stderr}"
    );
    // One `twice`, the first definition, and a warning.
    assert_eq!(stdout.matches("\"mcp_odd_twice\"").count(), 1, "{stdout}");
    assert!(stdout.contains("\"description\": \"first\""), "{stdout}");
    assert!(
        stderr
            .contains("tools listed more than once (the first definition of each is kept): twice"),
        "{stderr}"
    );
}

#[test]
fn an_http_answer_without_the_response_fails_that_call_at_once() {
    use crate::http_edge::{empty, json_reply, mcp_answer, EdgeServer};
    // A 200 to `tools/call` whose JSON body is a notification, not the response; everything
    // else is answered properly.
    let server = EdgeServer::start(std::sync::Arc::new(|req: &crate::http_edge::Req| {
        if req.method != "POST" {
            return empty(405);
        }
        let msg = req.json();
        if msg["method"] == "tools/call" && msg["params"]["arguments"]["text"] == "lost" {
            return json_reply(
                200,
                vec![],
                &json!({"jsonrpc": "2.0", "method": "notifications/message",
                        "params": {"level": "info", "data": "no answer here"}}),
            );
        }
        match mcp_answer(&msg) {
            Some(answer) => json_reply(200, vec![], &answer),
            None => empty(202),
        }
    }));
    smol::block_on(async {
        let spec = ServerSpec::new("edge", ServerConfig::http(server.url()));
        let (sb, report) = Builder::servers(vec![spec])
            .no_cache()
            .call_timeout(Duration::from_secs(120))
            .start()
            .await
            .unwrap();
        assert_eq!(report.connected, vec!["edge"], "{report:?}");
        let r = sb.call("mcp_edge_echo", json!({"text": "lost"})).await;
        assert!(
            matches!(&r, Err(Error::Call(CallError::Transport(e)))
                if e.kind == ServerErrorKind::RequestFailed
                    && e.message.contains("held no JSON-RPC response")),
            "{r:?}"
        );
        // The transport stays: the next call is answered.
        let ok = sb
            .call("mcp_edge_echo", json!({"text": "found"}))
            .await
            .unwrap();
        assert_eq!(ok.render_text(), "found");
        sb.shutdown().await;
    });
}

#[test]
fn a_tool_list_longer_than_the_bound_fails_that_server_with_a_precise_error() {
    use switchboard_core::manager::{Event as CoreEvent, MAX_TOOLS};
    let mut s = Script::new();
    s.connect(0, vec![stdio("a"), stdio("b")]);
    s.cache(1, "a", None);
    s.cache(1, "b", None);
    s.ready(2, "b", &["fine"]);
    s.opened(2, "a");
    s.reply(3, "a", "initialize", init_result());
    // Two pages that together hold one tool more than the bound.
    let half = MAX_TOOLS / 2 + 1;
    let page = |from: usize, cursor: Option<&str>| {
        let tools: Vec<serde_json::Value> = (from..from + half)
            .map(|i| json!({"name": format!("t{i}"), "inputSchema": {"type": "object"}}))
            .collect();
        let mut page = json!({ "tools": tools });
        if let Some(c) = cursor {
            page["nextCursor"] = json!(c);
        }
        page
    };
    s.reply(4, "a", "tools/list", page(0, Some("next")));
    s.reply(5, "a", "tools/list", page(half, None));
    let report = s
        .events()
        .find_map(|e| match e {
            CoreEvent::StartupComplete { report } => Some(report.clone()),
            _ => None,
        })
        .expect("the round ended");
    let error = report.errors.get("a").expect("a failed");
    assert_eq!(error.kind, ServerErrorKind::ListFailed);
    assert_eq!(
        error.message,
        format!("tools/list failed: more than {MAX_TOOLS} tools")
    );
    // The other server is unaffected.
    assert_eq!(s.m.status("b"), ServerStatus::Connected);
    assert_eq!(s.m.status("a"), ServerStatus::Disconnected);
}
