//! What a server chose never drives the terminal: `switchboard tools` and `call` print its
//! tool names, descriptions and results with every control sequence made visible text (a
//! name with a newline stays on its row), while `--json` keeps the strings exact.

use crate::support::{repo_root, switchboard_bin};
use serde_json::{json, Value};
use std::process::Command;

fn run(args: &[&str]) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let script = repo_root().join("tests/scripts/hostile_names.py");
    let config = json!({"mcpServers": {"hostile": {
        "command": "python3", "args": [script.to_string_lossy()]}}});
    std::fs::write(dir.path().join("mcp.json"), config.to_string()).unwrap();
    let out = Command::new(switchboard_bin())
        .current_dir(dir.path())
        .env_remove("RUST_LOG")
        .env("HOME", dir.path())
        .args(["--config", "mcp.json", "--no-project-config", "--no-cache"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn tool_names_descriptions_and_results_cannot_drive_the_terminal() {
    let (table, _) = run(&["tools"]);
    assert!(
        !table.contains('\x1b') && !table.contains('\r'),
        "{table:?}"
    );
    assert!(table.contains("\\u{1b}[2J"), "{table}");
    // Two tools, two rows: the newline in a name did not add one.
    let rows = table
        .lines()
        .filter(|l| l.starts_with("mcp_hostile_"))
        .count();
    assert_eq!(rows, 2, "{table}");
    assert!(table.lines().all(|l| !l.starts_with("name")), "{table}");
    assert!(table.contains("evil\\nname"), "{table}");

    let (json_out, _) = run(&["tools", "--json"]);
    let v: Value = serde_json::from_str(&json_out).unwrap();
    let evil = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tool"] == "evil\nname")
        .expect("the exact name is in the JSON");
    assert_eq!(evil["description"], "\x1b[2J\x1b[Hall servers connected\r");

    let (text, _) = run(&["call", "mcp_hostile_plain"]);
    assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text:?}");
    assert!(text.contains("done\\u{1b}]0;owned title\\u{7}"), "{text}");
}
