//! mcp-demo-server, our standalone stdio MCP peer: it must speak MCP 2025-11-25 correctly and
//! each fault flag must do what `--help` says, since the shell's tests rely on both. Also checked
//! against the official TypeScript and Python SDK clients (gated on `SWITCHBOARD_PEERS=1`,
//! which `scripts/test.sh` sets after `scripts/install-peers.sh`).

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{
    demo_server_bin, initialize_params, process_alive, repo_root, DemoServer, ANSWER_TIMEOUT,
};

const SHORT: Duration = Duration::from_millis(300);

fn tool_names(result: &Value) -> Vec<String> {
    result["tools"]
        .as_array()
        .expect("tools array")
        .iter()
        .map(|t| t["name"].as_str().expect("tool name").to_string())
        .collect()
}

fn text_of(response: &Value) -> &str {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content in {response}"))
}

fn call(server: &mut DemoServer, tool: &str, arguments: Value) -> Value {
    server.request("tools/call", json!({"name": tool, "arguments": arguments}))
}

#[test]
fn demo_server_initializes_lists_paginated_tools_and_calls_echo_and_add() {
    let mut server = DemoServer::spawn(&["--name", "demo-a", "--tools", "3", "--page-size", "2"]);
    let init = server.initialize();
    let result = &init["result"];
    assert_eq!(result["protocolVersion"], "2025-11-25");
    assert_eq!(
        result["capabilities"],
        json!({"tools": {"listChanged": true}})
    );
    assert_eq!(result["serverInfo"]["name"], "demo-a");

    let mut names = Vec::new();
    let mut cursor: Option<Value> = None;
    let mut pages = 0;
    loop {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let page = server.request("tools/list", params);
        pages += 1;
        let result = &page["result"];
        let tools = result["tools"].as_array().expect("tools");
        assert!(tools.len() <= 2, "page larger than --page-size: {page}");
        for tool in tools {
            assert!(tool["description"].is_string(), "{tool}");
            assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
        }
        names.extend(tool_names(result));
        match result.get("nextCursor") {
            Some(next) => cursor = Some(next.clone()),
            None => break,
        }
    }
    assert_eq!(
        names,
        ["echo", "add", "sleep", "tool_0", "tool_1", "tool_2"]
    );
    assert_eq!(pages, 3);

    let echo = call(&mut server, "echo", json!({"text": "héllo"}));
    assert_eq!(text_of(&echo), "héllo");
    let generated = call(&mut server, "tool_1", json!({"text": "gen"}));
    assert_eq!(text_of(&generated), "gen");
    let add = call(&mut server, "add", json!({"a": 2, "b": 40}));
    assert_eq!(text_of(&add), "42");
    assert_eq!(add["result"]["structuredContent"], json!({"sum": 42}));
    let add = call(&mut server, "add", json!({"a": 0.5, "b": 1}));
    assert_eq!(add["result"]["structuredContent"], json!({"sum": 1.5}));
}

#[test]
fn demo_server_negotiates_protocol_version() {
    for (asked, answered) in [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2024-11-05"),
        ("1999-01-01", "2025-11-25"),
    ] {
        let mut server = DemoServer::spawn(&[]);
        let init = server.request("initialize", initialize_params(asked));
        assert_eq!(init["result"]["protocolVersion"], answered, "asked {asked}");
        assert_eq!(init["result"]["serverInfo"]["name"], "mcp-demo-server");
    }
}

#[test]
fn demo_server_answers_ping_unknown_methods_and_bad_json() {
    let mut server = DemoServer::spawn(&[]);
    // ping works even before initialize.
    let pong = server.request("ping", json!({}));
    assert_eq!(pong["result"], json!({}));
    server.initialize();
    let unknown = server.request("resources/list", json!({}));
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");

    server.send_raw("{this is not json");
    let parse_error = server.next_message(ANSWER_TIMEOUT).expect("parse error");
    assert_eq!(parse_error["error"]["code"], -32700, "{parse_error}");
    assert_eq!(parse_error["id"], Value::Null);

    let unknown_tool = call(&mut server, "no_such_tool", json!({}));
    assert_eq!(unknown_tool["error"]["code"], -32602, "{unknown_tool}");
    // Bad arguments are a tool execution error: a result with isError.
    let bad_args = call(&mut server, "add", json!({"a": "two"}));
    assert_eq!(bad_args["result"]["isError"], true, "{bad_args}");
}

#[test]
fn demo_server_rejects_tool_requests_before_initialized_notification() {
    let mut server = DemoServer::spawn(&[]);
    server.request("initialize", initialize_params("2025-11-25"));
    let early = server.request("tools/list", json!({}));
    assert!(early.get("error").is_some(), "{early}");
    server.notify("notifications/initialized", json!({}));
    let list = server.request("tools/list", json!({}));
    assert!(list.get("result").is_some(), "{list}");
}

#[test]
fn demo_server_cancelled_sleep_gets_no_response_while_echo_does() {
    let mut server = DemoServer::spawn(&[]);
    server.initialize();
    let started = Instant::now();
    // Long enough that a loaded machine still gets the echo, the ping and the cancellation
    // in well before the sleep would end.
    let sleep = Duration::from_millis(4000);
    let sleep_id = server.start_request(
        "tools/call",
        json!({"name": "sleep", "arguments": {"ms": sleep.as_millis() as u64}}),
    );
    // The long sleep does not block other calls or pings.
    let echo = call(&mut server, "echo", json!({"text": "not blocked"}));
    assert_eq!(text_of(&echo), "not blocked");
    server.request("ping", json!({}));
    assert!(started.elapsed() < Duration::from_millis(3000));

    server.notify(
        "notifications/cancelled",
        json!({"requestId": sleep_id, "reason": "test"}),
    );
    // No answer, even well past the moment the sleep would have ended.
    assert_eq!(
        server.response(sleep_id, sleep + Duration::from_millis(1000)),
        None
    );
    let stderr = server.wait_stderr("cancelled", ANSWER_TIMEOUT);
    assert!(stderr.contains("cancelled"), "{stderr}");

    // An uncancelled sleep completes.
    let slept = call(&mut server, "sleep", json!({"ms": 20}));
    assert_eq!(text_of(&slept), "slept 20ms");
}

#[test]
fn demo_server_exits_zero_on_stdin_eof() {
    let mut server = DemoServer::spawn(&[]);
    server.initialize();
    server.close_stdin();
    let status = server.wait_exit(ANSWER_TIMEOUT).expect("exit after EOF");
    assert_eq!(status.code(), Some(0));
}

#[test]
fn demo_server_fail_init_answers_initialize_with_an_error() {
    let mut server = DemoServer::spawn(&["--fail-init"]);
    let init = server.request("initialize", initialize_params("2025-11-25"));
    assert!(init["error"]["code"].is_i64(), "{init}");
}

#[test]
fn demo_server_fail_list_fails_tools_list_after_good_initialize() {
    let mut server = DemoServer::spawn(&["--fail-list"]);
    server.initialize();
    let list = server.request("tools/list", json!({}));
    assert!(list["error"]["code"].is_i64(), "{list}");
}

#[test]
fn demo_server_hang_init_never_answers_initialize() {
    let mut server = DemoServer::spawn(&["--hang-init"]);
    let id = server.start_request("initialize", initialize_params("2025-11-25"));
    assert_eq!(server.response(id, Duration::from_millis(500)), None);
    // Still alive and reading: ping works, EOF exits cleanly.
    server.request("ping", json!({}));
    server.close_stdin();
    assert_eq!(
        server.wait_exit(ANSWER_TIMEOUT).and_then(|s| s.code()),
        Some(0)
    );
}

#[test]
fn demo_server_delays_hold_answers_back_without_blocking_ping() {
    // The init delay is long so that a ping answered well before it proves ping is not
    // blocked, even on a loaded machine.
    let mut server = DemoServer::spawn(&["--init-delay-ms", "3000", "--list-delay-ms", "300"]);
    let started = Instant::now();
    let id = server.start_request("initialize", initialize_params("2025-11-25"));
    server.request("ping", json!({}));
    assert!(
        started.elapsed() < Duration::from_millis(2500),
        "ping blocked by init delay"
    );
    server
        .response(id, ANSWER_TIMEOUT)
        .expect("delayed initialize");
    assert!(started.elapsed() >= Duration::from_millis(3000));
    server.notify("notifications/initialized", json!({}));
    let listed = Instant::now();
    server.request("tools/list", json!({}));
    assert!(listed.elapsed() >= Duration::from_millis(300));
}

#[test]
fn demo_server_crash_after_ms_exits_one_with_a_message() {
    let mut server = DemoServer::spawn(&["--crash-after-ms", "100"]);
    let status = server.wait_exit(ANSWER_TIMEOUT).expect("crash");
    assert_eq!(status.code(), Some(1));
    let stderr = server.wait_stderr("crashing", ANSWER_TIMEOUT);
    assert!(stderr.contains("crashing"), "{stderr}");
}

#[test]
fn demo_server_stall_after_ms_stops_answering_and_ignores_eof() {
    // The stall timer starts with the process: leave a loaded machine ample time to finish
    // initialize first, then wait past it (measured from after initialize, so surely past).
    let mut server = DemoServer::spawn(&["--stall-after-ms", "1500"]);
    server.initialize();
    std::thread::sleep(Duration::from_millis(1600));
    let id = server.start_request("ping", json!({}));
    assert_eq!(server.response(id, SHORT), None);
    server.close_stdin();
    assert_eq!(
        server.wait_exit(SHORT),
        None,
        "a stalled server must not exit on EOF"
    );
}

#[test]
fn demo_server_garbage_stdout_mixes_non_json_lines_with_real_ones() {
    let mut server = DemoServer::spawn(&["--garbage-stdout"]);
    server.initialize();
    let list = server.request("tools/list", json!({}));
    assert_eq!(tool_names(&list["result"]).len(), 3);
    assert!(
        server.garbage.len() >= 2,
        "garbage seen: {:?}",
        server.garbage
    );
}

#[test]
fn demo_server_oversized_frame_sends_one_line_over_16_mib() {
    let mut server = DemoServer::spawn(&["--oversized-frame"]);
    server.initialize();
    server.start_request("tools/list", json!({}));
    let line = server.next_line(ANSWER_TIMEOUT).expect("oversized line");
    assert!(
        line.len() > 16 * 1024 * 1024,
        "line is only {} bytes",
        line.len()
    );
    let message: Value = serde_json::from_str(&line).expect("still valid JSON");
    assert_eq!(message["result"]["tools"][0]["name"], "huge");
}

#[test]
fn demo_server_list_changed_after_ms_adds_late_tool_and_notifies() {
    let mut server = DemoServer::spawn(&["--list-changed-after-ms", "100"]);
    server.initialize();
    let note = server
        .wait_for(ANSWER_TIMEOUT, |m| {
            m["method"] == "notifications/tools/list_changed"
        })
        .expect("list_changed notification");
    assert!(note.get("id").is_none(), "a notification has no id: {note}");
    let list = server.request("tools/list", json!({}));
    assert!(tool_names(&list["result"]).contains(&"late_tool".to_string()));
    let late = call(&mut server, "late_tool", json!({"text": "late"}));
    assert_eq!(text_of(&late), "late");
}

#[test]
fn demo_server_remove_on_change_withdraws_the_tool_with_the_list_change() {
    let mut server = DemoServer::spawn(&[
        "--list-changed-after-ms",
        "100",
        "--remove-on-change",
        "echo",
    ]);
    server.initialize();
    let before = server.request("tools/list", json!({}));
    // Before the change (or racing it): echo is there unless late_tool already is.
    let names = tool_names(&before["result"]);
    assert!(
        names.contains(&"echo".to_string()) != names.contains(&"late_tool".to_string()),
        "{names:?}"
    );
    server
        .wait_for(ANSWER_TIMEOUT, |m| {
            m["method"] == "notifications/tools/list_changed"
        })
        .expect("list_changed notification");
    let after = tool_names(&server.request("tools/list", json!({}))["result"]);
    assert!(after.contains(&"late_tool".to_string()), "{after:?}");
    assert!(!after.contains(&"echo".to_string()), "{after:?}");
    let gone = call(&mut server, "echo", json!({"text": "x"}));
    assert!(
        gone["error"]["message"].as_str().unwrap().contains("echo"),
        "{gone}"
    );
}

#[test]
fn demo_server_progress_every_ms_reports_progress_with_the_callers_token() {
    let mut server = DemoServer::spawn(&["--progress-every-ms", "50", "--stats-tool"]);
    server.initialize();
    let id = server.start_request(
        "tools/call",
        json!({"name": "sleep", "arguments": {"ms": 200}, "_meta": {"progressToken": "tok-7"}}),
    );
    let response = server.response(id, ANSWER_TIMEOUT).expect("sleep answers");
    assert_eq!(text_of(&response), "slept 200ms");
    // 200 ms in 50 ms steps: progress after each step but the last, all before the answer.
    let progress: Vec<&Value> = server
        .backlog
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 3, "{:?}", server.backlog);
    for (i, p) in progress.iter().enumerate() {
        assert_eq!(p["params"]["progressToken"], "tok-7");
        assert_eq!(p["params"]["progress"], i as u64 + 1);
        assert_eq!(p["params"]["total"], 4);
    }
    // Without a token there is nobody to report to.
    server.backlog.clear();
    let plain = call(&mut server, "sleep", json!({"ms": 120}));
    assert_eq!(text_of(&plain), "slept 120ms");
    assert!(server.backlog.is_empty(), "{:?}", server.backlog);
    let stats: Value =
        serde_json::from_str(text_of(&call(&mut server, "stats", json!({})))).unwrap();
    assert_eq!(stats["progress_sent"], 3);
}

#[test]
fn demo_server_stats_tool_counts_cancellations_in_order() {
    let mut server = DemoServer::spawn(&["--stats-tool"]);
    server.initialize();
    let sleep_id = server.start_request(
        "tools/call",
        json!({"name": "sleep", "arguments": {"ms": 60000}}),
    );
    // The echo is answered only once the sleep is surely in flight (one reader thread).
    call(&mut server, "echo", json!({"text": "in flight"}));
    server.notify("notifications/cancelled", json!({"requestId": sleep_id}));
    server.notify("notifications/cancelled", json!({"requestId": 999}));
    // Notifications are handled in order before the next request: no wait needed.
    let stats: Value =
        serde_json::from_str(text_of(&call(&mut server, "stats", json!({})))).unwrap();
    assert_eq!(stats["cancelled"], json!([sleep_id, 999]));
    assert_eq!(
        stats["cancelled_in_flight"], 1,
        "only the sleep was in flight"
    );
    assert_eq!(stats["progress_sent"], 0);
}

#[test]
fn demo_server_garbage_lines_prints_that_many_non_json_lines_first() {
    let mut server = DemoServer::spawn(&["--garbage-lines", "120"]);
    server.initialize();
    assert_eq!(server.garbage.len(), 120, "{:?}", server.garbage.first());
}

#[test]
fn demo_server_fail_init_once_fails_only_the_first_start() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started");
    let marker = marker.to_str().unwrap();
    let mut first = DemoServer::spawn(&["--fail-init-once", marker]);
    let init = first.request("initialize", initialize_params("2025-11-25"));
    assert!(
        init["error"]["message"]
            .as_str()
            .unwrap()
            .contains("first start"),
        "{init}"
    );
    let mut second = DemoServer::spawn(&["--fail-init-once", marker]);
    second.initialize();
}

#[test]
fn demo_server_crash_after_list_ms_exits_one_after_the_first_tools_list() {
    let mut server = DemoServer::spawn(&["--crash-after-list-ms", "0"]);
    server.initialize();
    assert_eq!(
        server.wait_exit(Duration::from_millis(200)),
        None,
        "alive before tools/list"
    );
    let list = server.request("tools/list", json!({}));
    assert_eq!(tool_names(&list["result"]).len(), 3);
    let status = server
        .wait_exit(ANSWER_TIMEOUT)
        .expect("crash after the list");
    assert_eq!(status.code(), Some(1));
    let stderr = server.wait_stderr("crash-after-list-ms", ANSWER_TIMEOUT);
    assert!(stderr.contains("crashing on purpose"), "{stderr}");
}

#[test]
fn demo_server_ignore_sigterm_survives_sigterm() {
    let mut server = DemoServer::spawn(&["--ignore-sigterm"]);
    server.initialize();
    server.signal(libc::SIGTERM);
    assert_eq!(server.wait_exit(SHORT), None, "exited on SIGTERM");
    server.request("ping", json!({}));

    let mut plain = DemoServer::spawn(&[]);
    plain.initialize();
    plain.signal(libc::SIGTERM);
    assert!(
        plain.wait_exit(ANSWER_TIMEOUT).is_some(),
        "plain server ignored SIGTERM"
    );
}

#[test]
fn demo_server_spawn_grandchild_keeps_it_in_its_process_group() {
    let grandchild = {
        let mut server = DemoServer::spawn(&["--spawn-grandchild"]);
        server.initialize();
        let stderr = server.wait_stderr("grandchild pid=", ANSWER_TIMEOUT);
        let pid: i32 = stderr
            .split("grandchild pid=")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|pid| pid.parse().ok())
            .unwrap_or_else(|| panic!("no grandchild pid on stderr: {stderr}"));
        assert!(process_alive(pid));
        // SAFETY: getpgid(2) only reads.
        let group = unsafe { libc::getpgid(pid) };
        assert_eq!(
            group,
            server.pid() as i32,
            "grandchild is in the server's group"
        );
        // The server exiting on EOF leaves it running: exactly the leak the shell must stop.
        server.close_stdin();
        server.wait_exit(ANSWER_TIMEOUT).expect("exit on EOF");
        assert!(process_alive(pid), "grandchild died with its parent");
        pid
        // Dropping the guard kills the group.
    };
    let deadline = Instant::now() + ANSWER_TIMEOUT;
    while process_alive(grandchild) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        !process_alive(grandchild),
        "grandchild {grandchild} survived the group kill"
    );
}

/// Real peers: only with `SWITCHBOARD_PEERS=1` (set by scripts/test.sh); then missing peers
/// are a failure, not a skip.
pub(crate) fn peers_enabled(test: &str) -> bool {
    if std::env::var("SWITCHBOARD_PEERS").as_deref() == Ok("1") {
        return true;
    }
    eprintln!("{test}: skipped (set SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh)");
    false
}

fn run_peer_check(program: &str, script: &str) {
    let output = Command::new(program)
        .arg(repo_root().join("tests/peers").join(script))
        .arg(demo_server_bin())
        .output()
        .unwrap_or_else(|err| panic!("running {program}: {err}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{script} failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: Value = serde_json::from_str(stdout.trim()).expect("JSON summary");
    assert_eq!(summary["ok"], true, "{summary}");
}

#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn demo_server_passes_the_typescript_sdk_client_check() {
    if !peers_enabled("demo_server_passes_the_typescript_sdk_client_check") {
        return;
    }
    let sdk = repo_root().join("tests/peers/node_modules/@modelcontextprotocol/sdk");
    assert!(
        sdk.is_dir(),
        "{} is missing: run ./scripts/install-peers.sh",
        sdk.display()
    );
    run_peer_check("node", "check_demo_server.mjs");
}

#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn demo_server_passes_the_python_sdk_client_check() {
    if !peers_enabled("demo_server_passes_the_python_sdk_client_check") {
        return;
    }
    let python = repo_root().join("tests/peers/.venv/bin/python");
    assert!(
        python.is_file(),
        "{} is missing: run ./scripts/install-peers.sh",
        python.display()
    );
    run_peer_check(python.to_str().expect("utf-8 path"), "check_demo_server.py");
}
