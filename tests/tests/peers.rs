//! Real MCP peers over stdio through the public API: the reference TypeScript server
//! (`@modelcontextprotocol/server-everything`) and a FastMCP server written with the Python SDK.
//! Gated on `SWITCHBOARD_PEERS=1` (set by scripts/test.sh after installing them); with it set,
//! a missing peer is a failure.

use crate::demo_server::peers_enabled;
use crate::support::repo_root;
use serde_json::json;
use std::time::Duration;
use switchboard::core::config::{ServerConfig, ServerSpec};
use switchboard::{Builder, Error, ServerStatus};

fn everything() -> ServerSpec {
    let entry = repo_root()
        .join("tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        entry.exists(),
        "{} is missing: run ./scripts/install-peers.sh",
        entry.display()
    );
    ServerSpec::new(
        "everything",
        ServerConfig::stdio("node", &[&entry.to_string_lossy(), "stdio"]),
    )
}

/// The tools the pinned `@modelcontextprotocol/server-everything` (tests/peers/package.json,
/// 2026.8.31) offers a client that declares no sampling, elicitation or tasks capability
/// (ours), as qualified names for server `server`, in the view's order. The same in every
/// transport mode (stdio, streamableHttp, sse).
pub fn everything_tools(server: &str) -> Vec<String> {
    const RAW: [&str; 13] = [
        "echo",
        "get-annotated-message",
        "get-env",
        "get-resource-links",
        "get-resource-reference",
        "get-structured-content",
        "get-sum",
        "get-tiny-image",
        "gzip-file-as-resource",
        "simulate-research-query",
        "toggle-simulated-logging",
        "toggle-subscriber-updates",
        "trigger-long-running-operation",
    ];
    let mut names: Vec<String> = RAW
        .iter()
        .map(|t| format!("mcp_{server}_{}", t.replace('-', "_")))
        .collect();
    names.sort();
    names
}

fn fastmcp() -> ServerSpec {
    let python = repo_root().join("tests/peers/.venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run ./scripts/install-peers.sh",
        python.display()
    );
    let script = repo_root().join("tests/peers/fastmcp_server.py");
    ServerSpec::new(
        "fast-py",
        ServerConfig::stdio(python.to_string_lossy(), &[&script.to_string_lossy()]),
    )
}

#[test]
fn server_everything_over_stdio_lists_tools_echoes_and_cancels_a_long_call() {
    if !peers_enabled("server_everything_over_stdio") {
        return;
    }
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![everything()])
            .no_cache()
            .start()
            .await
            .unwrap();
        assert_eq!(report.connected, vec!["everything"], "{report:?}");
        let names: Vec<String> = sb
            .tools()
            .iter()
            .map(|t| t.qualified_name.clone())
            .collect();
        assert_eq!(
            names,
            everything_tools("everything"),
            "every tool server-everything offers over stdio"
        );
        let r = sb
            .call("mcp_everything_echo", json!({"message": "hi"}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "Echo: hi");
        // A long-running call cut short by its timeout: the server gets
        // notifications/cancelled and keeps serving.
        let err = sb
            .call_with_timeout(
                "mcp_everything_trigger_long_running_operation",
                json!({"duration": 30, "steps": 3}),
                Some(Duration::from_millis(300)),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Call(switchboard::CallError::Timeout { .. })),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "MCP error: tool call timed out after 300 ms"
        );
        let r = sb
            .call("mcp_everything_get_sum", json!({"a": 2, "b": 40}))
            .await
            .unwrap();
        assert!(r.render_text().contains("42"), "{}", r.render_text());
        assert_eq!(sb.status("everything"), ServerStatus::Connected);
        sb.shutdown().await;
        assert!(sb.live_processes().is_empty());
    });
}

#[test]
fn fastmcp_python_server_over_stdio_lists_and_calls() {
    if !peers_enabled("fastmcp_python_server_over_stdio") {
        return;
    }
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![fastmcp()])
            .no_cache()
            .start()
            .await
            .unwrap();
        assert_eq!(report.connected, vec!["fast-py"], "{report:?}");
        let mut names: Vec<String> = sb
            .tools()
            .iter()
            .map(|t| t.qualified_name.clone())
            .collect();
        names.sort();
        assert_eq!(
            names,
            vec!["mcp_fast_py_add", "mcp_fast_py_echo", "mcp_fast_py_slow"]
        );
        let r = sb
            .call("mcp_fast_py_echo", json!({"text": "from python"}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "from python");
        let r = sb
            .call("mcp_fast_py_add", json!({"a": 1.5, "b": 2}))
            .await
            .unwrap();
        assert!(r.render_text().starts_with("3.5"), "{}", r.render_text());
        sb.shutdown().await;
        assert!(sb.live_processes().is_empty());
    });
}
