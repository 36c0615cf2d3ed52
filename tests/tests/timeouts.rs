//! Per-server call timeouts from the config, `--call-timeout-ms` and `MCP_TOOL_TIMEOUT`: a
//! call to a server that answers too slowly fails with a timeout naming the limit that applied.

use crate::support::{demo_server_bin, switchboard_bin};
use serde_json::json;
use std::process::{Command, Output};

fn call(dir: &std::path::Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = Command::new(switchboard_bin());
    cmd.current_dir(dir)
        .env_remove("RUST_LOG")
        .env_remove("MCP_TOOL_TIMEOUT")
        .env_remove("MCP_TIMEOUT")
        .env("HOME", dir)
        .env_remove("XDG_DATA_HOME")
        .args(["--config", "mcp.json", "--no-project-config", "--no-cache"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.args(args).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_call_is_limited_by_its_servers_config_then_the_flag_then_mcp_tool_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let bin = demo_server_bin().to_string_lossy().into_owned();
    let slow = |extra: serde_json::Value| {
        let mut entry =
            json!({"command": bin, "args": ["--name", "x", "--call-delay-ms", "30000"]});
        entry
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        entry
    };
    let write = |entry: serde_json::Value| {
        std::fs::write(
            dir.path().join("mcp.json"),
            json!({"mcpServers": {"slow": entry}}).to_string(),
        )
        .unwrap();
    };
    let echo = ["call", "mcp_slow_echo", r#"{"text": "hi"}"#];

    write(slow(json!({"call_timeout_ms": 300})));
    let out = call(dir.path(), &[("MCP_TOOL_TIMEOUT", "200")], &echo);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("timed out after 300 ms"),
        "{}",
        stderr(&out)
    );

    write(slow(json!({})));
    let out = call(
        dir.path(),
        &[("MCP_TOOL_TIMEOUT", "200")],
        &[&["--call-timeout-ms", "250"][..], &echo[..]].concat(),
    );
    assert!(
        stderr(&out).contains("timed out after 250 ms"),
        "{}",
        stderr(&out)
    );
    let out = call(dir.path(), &[("MCP_TOOL_TIMEOUT", "200")], &echo);
    assert!(
        stderr(&out).contains("timed out after 200 ms"),
        "{}",
        stderr(&out)
    );
}
