//! What servers ask of the client, end to end: the `switchboard` CLI against the reference
//! TypeScript server (`@modelcontextprotocol/server-everything`, stdio) answers its
//! elicitation with the form's defaults (`--elicit accept-defaults`), its sampling request
//! with a command (`--sampling-command`, tests/scripts/sampling-reply.sh), and its
//! `roots/list` with the project directory. Gated on `SWITCHBOARD_PEERS=1`.

use crate::demo_server::peers_enabled;
use crate::support::{repo_root, switchboard_bin};
use serde_json::Value;
use std::process::Command;

/// A temporary project whose config runs server-everything over stdio.
fn project() -> tempfile::TempDir {
    let entry = repo_root()
        .join("tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        entry.exists(),
        "{} is missing: run ./scripts/install-peers.sh",
        entry.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let config = serde_json::json!({"mcpServers": {"everything": {
        "command": "node", "args": [entry.to_string_lossy(), "stdio"]}}});
    std::fs::write(dir.path().join("mcp.json"), config.to_string()).unwrap();
    dir
}

/// `switchboard call --json TOOL ARGS` in the project with `flags`; the result's JSON.
fn call(dir: &tempfile::TempDir, flags: &[&str], tool: &str, args: &str) -> Value {
    let out = Command::new(switchboard_bin())
        .current_dir(dir.path())
        .env_remove("RUST_LOG")
        .env("HOME", dir.path())
        .args(["--config", "mcp.json", "--no-project-config", "--no-cache"])
        .args(flags)
        .args(["call", "--json", tool, args])
        .output()
        .expect("run switchboard");
    assert!(
        out.status.success(),
        "switchboard call {tool} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

fn text(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn server_everything_elicitation_is_accepted_with_the_forms_defaults() {
    if !peers_enabled("server_everything_elicitation") {
        return;
    }
    let dir = project();
    let r = call(
        &dir,
        &["--elicit", "accept-defaults"],
        "mcp_everything_trigger_elicitation_request",
        "{}",
    );
    let t = text(&r);
    assert!(t.contains("User provided the requested information"), "{t}");
    assert!(t.contains("Favorite Integer: 42"), "{t}");
    assert!(t.contains("Favorite Number: 3.14"), "{t}");
    // Declined when asked to.
    let r = call(
        &dir,
        &["--elicit", "decline"],
        "mcp_everything_trigger_elicitation_request",
        "{}",
    );
    assert!(text(&r).contains("User declined"), "{}", text(&r));
}

#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn server_everything_sampling_is_answered_by_the_sampling_command() {
    if !peers_enabled("server_everything_sampling") {
        return;
    }
    let dir = project();
    let script = repo_root().join("tests/scripts/sampling-reply.sh");
    let r = call(
        &dir,
        &["--sampling-command", &script.to_string_lossy()],
        "mcp_everything_trigger_sampling_request",
        r#"{"prompt": "hello", "maxTokens": 5}"#,
    );
    let t = text(&r);
    assert!(t.contains("test-model"), "{t}");
    assert!(t.contains("sampled"), "{t}");
}

#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn server_everything_lists_the_project_directory_as_the_root() {
    if !peers_enabled("server_everything_roots") {
        return;
    }
    let dir = project();
    let r = call(&dir, &[], "mcp_everything_get_roots_list", "{}");
    let t = text(&r);
    let canonical = std::fs::canonicalize(dir.path()).unwrap();
    let uri = format!("file://{}", canonical.display());
    let plain = format!("file://{}", dir.path().display());
    assert!(t.contains(&uri) || t.contains(&plain), "{t}");
}

#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn library_handlers_answer_server_everything_and_set_roots_reaches_it() {
    if !peers_enabled("library_handlers_answer_server_everything") {
        return;
    }
    use std::sync::Arc;
    use switchboard::core::config::{ServerConfig, ServerSpec};
    use switchboard::{Builder, PeerAnswer, PeerFuture, PeerRequest, PeerRequestKind, Root};
    let entry = repo_root()
        .join("tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let spec = ServerSpec::new(
        "everything",
        ServerConfig::stdio("node", &[&entry.to_string_lossy(), "stdio"]),
    );
    let elicit = |r: PeerRequest| -> PeerFuture {
        Box::pin(async move {
            match r.kind {
                PeerRequestKind::ElicitForm { .. } => {
                    let mut content = serde_json::Map::new();
                    content.insert("name".into(), "Ada".into());
                    PeerAnswer::Accept {
                        content: Some(content),
                    }
                }
                _ => PeerAnswer::Decline,
            }
        })
    };
    let sample = |_r: PeerRequest| -> PeerFuture {
        Box::pin(async move {
            PeerAnswer::Result {
                result: serde_json::json!({"role": "assistant", "content": {"type": "text", "text": "from the handler"}, "model": "lib"}),
            }
        })
    };
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![spec])
            .no_cache()
            .elicitation_handler(Arc::new(elicit))
            .sampling_handler(Arc::new(sample))
            .roots(vec![Root {
                uri: "file:///first".into(),
                name: Some("first".into()),
            }])
            .start()
            .await
            .unwrap();
        assert_eq!(report.connected, vec!["everything"], "{report:?}");
        let r = sb
            .call(
                "mcp_everything_trigger_elicitation_request",
                serde_json::json!({}),
            )
            .await
            .unwrap();
        assert!(r.render_text().contains("Name: Ada"), "{}", r.render_text());
        let r = sb
            .call(
                "mcp_everything_trigger_sampling_request",
                serde_json::json!({"prompt": "p", "maxTokens": 3}),
            )
            .await
            .unwrap();
        assert!(
            r.render_text().contains("from the handler"),
            "{}",
            r.render_text()
        );
        let r = sb
            .call("mcp_everything_get_roots_list", serde_json::json!({}))
            .await
            .unwrap();
        assert!(
            r.render_text().contains("file:///first"),
            "{}",
            r.render_text()
        );
        sb.set_roots(vec![Root {
            uri: "file:///second".into(),
            name: None,
        }])
        .await
        .unwrap();
        // The server re-reads the roots when told they changed; ask until it has.
        let mut seen = String::new();
        for _ in 0..200 {
            let r = sb
                .call("mcp_everything_get_roots_list", serde_json::json!({}))
                .await
                .unwrap();
            seen = r.render_text();
            if seen.contains("file:///second") {
                break;
            }
            async_io::Timer::after(std::time::Duration::from_millis(50)).await;
        }
        assert!(seen.contains("file:///second"), "{seen}");
        sb.shutdown().await;
        assert!(sb.live_processes().is_empty());
    });
}
