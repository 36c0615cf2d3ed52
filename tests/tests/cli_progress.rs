//! `switchboard call`'s progress, against the demo server: drawn on a terminal, never on
//! stdout or a pipe.

use crate::cli::{code, json_stdout, stderr, Project};
use crate::support::switchboard_bin;
use serde_json::json;
use std::process::Command;

/// `call` asks for progress: on a terminal it is drawn on stderr (and cleared), while stdout
/// only ever gets the result; without a terminal nothing of it is printed at all.
#[test]
fn call_shows_progress_on_a_terminal_and_leaves_stdout_alone() {
    let project = Project::new(&[("p", &["--progress-every-ms", "20"])]);
    let args = ["call", "mcp_p_sleep", r#"{"ms": 300}"#, "--json"];
    let piped = project.run(&args);
    assert_eq!(code(&piped), 0, "stderr:\n{}", stderr(&piped));
    assert_eq!(
        json_stdout(&piped),
        json!({"content": [{"type": "text", "text": "slept 300ms"}]})
    );
    assert!(!stderr(&piped).contains('\r'), "{}", stderr(&piped));
    assert!(!stderr(&piped).contains("/15"), "{}", stderr(&piped));

    // The same command on a pseudo-terminal (util-linux `script`): the bar names the tool
    // and counts the server's steps (300 ms in steps of 20 ms: 15).
    let mut line = format!("exec {}", switchboard_bin().display());
    for c in ["--config", "mcp.json", "--cache-dir", "cache"] {
        line.push_str(&format!(" {c}"));
    }
    for a in ["call", "mcp_p_sleep", "'{\"ms\": 300}'"] {
        line.push_str(&format!(" {a}"));
    }
    let mut cmd = project.command(&[]);
    cmd.env("TERM", "xterm");
    let mut script = Command::new("script");
    script.args(["-qec", &line, "/dev/null"]);
    script.current_dir(project.path());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => script.env(k, v),
            None => script.env_remove(k),
        };
    }
    let tty = script.output().expect("run script");
    let all = String::from_utf8_lossy(&tty.stdout);
    assert_eq!(code(&tty), 0, "{all}");
    assert!(all.contains("mcp_p_sleep"), "{all}");
    assert!(all.contains("/15"), "{all}");
    assert!(all.contains("slept 300ms"), "{all}");
}
