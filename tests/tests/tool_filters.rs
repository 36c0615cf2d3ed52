//! Tool filters from the config (Codex `enabled_tools`/`disabled_tools`, Gemini CLI
//! `includeTools`/`excludeTools`, Roo Code and Windsurf `disabledTools`) apply in the view: a
//! filtered tool is neither listed nor callable, and `status` says how many were hidden.

use crate::support::{demo_server_bin, switchboard_bin};
use serde_json::{json, Value};
use std::process::{Command, Output};

fn run(dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(switchboard_bin())
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .env("HOME", dir)
        .env_remove("XDG_DATA_HOME")
        .args(["--config", "mcp.json", "--no-project-config", "--no-cache"])
        .args(args)
        .output()
        .unwrap()
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn a_filtered_tool_is_neither_listed_nor_callable_and_status_counts_it() {
    let dir = tempfile::tempdir().unwrap();
    let bin = demo_server_bin().to_string_lossy().into_owned();
    let config = json!({"mcpServers": {
        "allow": {"command": bin, "args": ["--name", "allow"], "enabled_tools": ["echo"]},
        "deny": {"command": bin, "args": ["--name", "deny"], "disabledTools": ["echo"]},
    }});
    std::fs::write(dir.path().join("mcp.json"), config.to_string()).unwrap();

    let status = json_of(&run(dir.path(), &["status", "--json"]));
    let server = |name: &str| {
        status["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap()
            .clone()
    };
    let (allow, deny) = (server("allow"), server("deny"));
    assert_eq!(allow["status"], "connected", "{status}");
    assert_eq!(allow["tools"], 1, "{status}");
    let total = allow["filtered_tools"].as_u64().unwrap() + 1;
    assert!(total > 1, "{status}");
    assert_eq!(deny["tools"].as_u64().unwrap(), total - 1, "{status}");
    assert_eq!(deny["filtered_tools"], 1, "{status}");

    let tools = json_of(&run(dir.path(), &["tools", "--json"]));
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"mcp_allow_echo"), "{names:?}");
    assert!(!names.contains(&"mcp_deny_echo"), "{names:?}");
    assert_eq!(
        names.iter().filter(|n| n.starts_with("mcp_allow_")).count(),
        1
    );

    let call = run(dir.path(), &["call", "mcp_deny_echo", r#"{"text": "x"}"#]);
    assert_eq!(call.status.code(), Some(1));
    let err = String::from_utf8_lossy(&call.stderr);
    assert!(err.contains("mcp_deny_echo"), "{err}");
    let call = run(dir.path(), &["call", "mcp_allow_echo", r#"{"text": "hi"}"#]);
    assert_eq!(call.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&call.stdout), "hi\n");
}
