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
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
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
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
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

#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn server_everything_over_stdio_lists_reads_gets_completes_and_subscribes() {
    if !peers_enabled("server_everything_catalog") {
        return;
    }
    use std::collections::BTreeMap;
    use switchboard::core::catalog::CompletionRef;
    use switchboard::core::Event;
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![everything()])
            .no_cache()
            .start()
            .await
            .unwrap();
        assert_eq!(report.connected, vec!["everything"], "{report:?}");
        let state = sb.server_state("everything").unwrap();
        let caps = state.capabilities.clone().unwrap();
        assert!(
            caps.resources && caps.resources_subscribe && caps.prompts,
            "{caps:?}"
        );
        assert!(caps.completions && caps.logging, "{caps:?}");
        assert!(state.instructions.is_some());
        // Every resource, template and prompt the pinned server offers.
        let docs = [
            "architecture.md",
            "extension.md",
            "features.md",
            "how-it-works.md",
            "instructions.md",
            "startup.md",
            "structure.md",
        ];
        let uris: Vec<String> = sb.resources().iter().map(|r| r.def.uri.clone()).collect();
        let want: Vec<String> = docs
            .iter()
            .map(|d| format!("demo://resource/static/document/{d}"))
            .collect();
        assert_eq!(uris, want);
        let templates: Vec<String> = sb
            .resource_templates()
            .iter()
            .map(|t| t.def.uri_template.clone())
            .collect();
        assert_eq!(
            templates,
            [
                "demo://resource/dynamic/blob/{resourceId}",
                "demo://resource/dynamic/text/{resourceId}"
            ]
        );
        let prompts: Vec<String> = sb
            .prompts()
            .iter()
            .map(|p| p.qualified_name.clone())
            .collect();
        assert_eq!(
            prompts,
            [
                "mcp_everything_args_prompt",
                "mcp_everything_completable_prompt",
                "mcp_everything_resource_prompt",
                "mcp_everything_simple_prompt"
            ]
        );
        // One read of a listed resource (no server named: the one that lists it).
        let r = sb.read_resource(&want[2], None).await.unwrap();
        assert_eq!(r.server, "everything");
        assert!(r.contents[0].text.as_deref().is_some_and(|t| !t.is_empty()));
        // One prompt with an argument.
        let args = BTreeMap::from([("city".to_string(), "Paris".to_string())]);
        let p = sb
            .get_prompt("mcp_everything_args_prompt", args)
            .await
            .unwrap();
        let text = p.messages[0].content["text"].as_str().unwrap_or_default();
        assert!(text.contains("Paris"), "{p:?}");
        // One completion.
        let reference = CompletionRef::Prompt {
            name: "mcp_everything_completable_prompt".into(),
        };
        let c = sb
            .complete(reference, "department", "", BTreeMap::new())
            .await
            .unwrap();
        assert!(c.values.contains(&"Engineering".to_string()), "{c:?}");
        // A subscription: the server says the resource was updated.
        let events = sb.events();
        assert_eq!(sb.subscribe(&want[0], None).await.unwrap(), "everything");
        sb.call("mcp_everything_toggle_subscriber_updates", json!({}))
            .await
            .unwrap();
        let updated = futures_lite::future::or(
            async {
                loop {
                    match events.recv().await {
                        Ok(Event::ResourceUpdated { server, uri }) => break Some((server, uri)),
                        Ok(_) => {}
                        Err(_) => break None,
                    }
                }
            },
            async {
                async_io::Timer::after(Duration::from_secs(30)).await;
                None
            },
        )
        .await;
        assert_eq!(updated, Some(("everything".to_string(), want[0].clone())));
        assert_eq!(sb.unsubscribe(&want[0], None).await.unwrap(), "everything");
        sb.set_log_level("everything", switchboard::core::catalog::LogLevel::Error)
            .await
            .unwrap();
        sb.shutdown().await;
        assert!(sb.live_processes().is_empty());
    });
}
