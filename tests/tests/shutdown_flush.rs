//! Frames queued just before a shutdown still reach the server: the `notifications/cancelled`
//! of every call given up at shutdown arrives before the server's stdin closes (stdio), or
//! before the session ends (HTTP). Asserted on what the server recorded, never on timing.

use crate::http_edge::{empty, json_reply, mcp_answer, EdgeServer, Req};
use crate::support::repo_root;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use switchboard::core::config::{ServerConfig, ServerSpec};
use switchboard::{Builder, CallOptions, StdioOptions};

/// Calls given up at shutdown: more than a pipe's buffer of frames with their arguments.
const CALLS: usize = 400;

/// The record `tests/scripts/record_stdin.py` wrote: one JSON value per line.
fn record(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn cancellations_queued_at_shutdown_reach_a_stdio_server_before_its_stdin_closes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("record");
    let script = repo_root().join("tests/scripts/record_stdin.py");
    // The server stops reading for a moment at the first call, so the calls and their
    // cancellations are still in the pipe and the write queue when the shutdown comes.
    let spec = ServerSpec::new(
        "rec",
        ServerConfig::stdio(
            "python3",
            &[
                script.to_string_lossy().as_ref(),
                file.to_string_lossy().as_ref(),
                "--pause",
                "0.3",
            ],
        ),
    );
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![spec])
            .no_cache()
            // A grace period that a loaded machine cannot outlast: the flush is what is
            // tested, not its speed.
            .stdio_options(StdioOptions {
                stdin_close_wait: Duration::from_secs(20),
                ..StdioOptions::default()
            })
            .start()
            .await
            .unwrap();
        assert_eq!(report.connected, vec!["rec"], "{report:?}");
        let pid = sb.live_processes()[0];
        let padding = "x".repeat(1024);
        let calls: Vec<_> = (0..CALLS)
            .map(|i| {
                sb.call_with(
                    "mcp_rec_hold",
                    json!({ "n": i, "padding": padding }),
                    CallOptions::default(),
                )
            })
            .collect();
        // Dropping a call cancels it: one `notifications/cancelled` each, queued behind it.
        drop(calls);
        sb.shutdown().await;
        assert!(sb.live_processes().is_empty());
        assert!(!crate::support::process_alive(pid as i32));
    });
    let seen = record(&file);
    let calls: BTreeSet<u64> = seen
        .iter()
        .filter(|m| m["method"] == "tools/call")
        .filter_map(|m| m["id"].as_u64())
        .collect();
    let cancelled: BTreeSet<u64> = seen
        .iter()
        .filter(|m| m["method"] == "notifications/cancelled")
        .filter_map(|m| m["cancels"].as_u64())
        .collect();
    assert_eq!(calls.len(), CALLS, "every call reached the server");
    assert_eq!(
        cancelled, calls,
        "every call's cancellation reached the server"
    );
    // It saw its stdin close after them (it was not signalled first).
    assert_eq!(
        seen.last(),
        Some(&json!({"eof": true})),
        "{:?}",
        seen.last()
    );
}

#[test]
fn notifications_queued_at_shutdown_reach_an_http_server_before_the_session_ends() {
    const HTTP_CALLS: usize = 50;
    // A stateless server whose tool calls are never answered (the POST hangs) and which
    // accepts every notification.
    let server = EdgeServer::start(Arc::new(|req: &Req| {
        if req.method != "POST" {
            return empty(405);
        }
        let msg = req.json();
        if msg["method"] == "tools/call" {
            return crate::http_edge::Reply::Stream {
                headers: vec![("content-type".into(), "text/event-stream".into())],
                pieces: vec![],
                hang: true,
            };
        }
        match mcp_answer(&msg) {
            Some(answer) => json_reply(200, vec![], &answer),
            None => empty(202),
        }
    }));
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![ServerSpec::new(
            "web",
            ServerConfig::http(server.url()),
        )])
        .no_cache()
        .start()
        .await
        .unwrap();
        assert_eq!(report.connected, vec!["web"], "{report:?}");
        let calls: Vec<_> = (0..HTTP_CALLS)
            .map(|i| sb.call_with("mcp_web_echo", json!({ "text": i }), CallOptions::default()))
            .collect();
        // Every call is on the wire (the server holds it) before they are given up.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while server
            .requests()
            .iter()
            .filter(|r| r.rpc_method().as_deref() == Some("tools/call"))
            .count()
            < HTTP_CALLS
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the calls never arrived"
            );
            smol::Timer::after(Duration::from_millis(10)).await;
        }
        drop(calls);
        sb.shutdown().await;
    });
    let requests = server.requests();
    let called: BTreeSet<u64> = requests
        .iter()
        .filter(|r| r.rpc_method().as_deref() == Some("tools/call"))
        .filter_map(|r| r.json()["id"].as_u64())
        .collect();
    let cancelled: BTreeSet<u64> = requests
        .iter()
        .filter(|r| r.rpc_method().as_deref() == Some("notifications/cancelled"))
        .filter_map(|r| r.json()["params"]["requestId"].as_u64())
        .collect();
    assert_eq!(called.len(), HTTP_CALLS);
    assert_eq!(
        cancelled, called,
        "every call's cancellation reached the server"
    );
    // The held calls' connections were closed by the client, none left behind (the server
    // notices each close on its own time).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while server.hung_closed.load(Ordering::SeqCst) < HTTP_CALLS {
        assert!(
            std::time::Instant::now() < deadline,
            "held calls' connections left open: {} of {HTTP_CALLS} closed",
            server.hung_closed.load(Ordering::SeqCst)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
