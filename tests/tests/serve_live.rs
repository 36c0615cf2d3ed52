//! `switchboard serve` keeps up with what changes under it while it serves, through the
//! library's own re-discovery: an approval given meanwhile starts the server and its
//! "awaiting approval" error goes, a project server added to the config is named as awaiting
//! approval, and a `${file:…}` value that changed restarts that server alone.

use crate::support::{demo_server_bin, switchboard_bin, DemoServer};
use serde_json::{json, Value};
use std::fs;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);

use crate::discovery::{dirs, write, Dirs};

/// The environment every command of one test runs with: its own home, data and cache.
fn env(d: &Dirs) -> Vec<(String, String)> {
    let home = d.home.display().to_string();
    vec![
        ("HOME".into(), home.clone()),
        ("XDG_DATA_HOME".into(), format!("{home}/.local/share")),
        ("XDG_CACHE_HOME".into(), format!("{home}/.cache")),
        ("NO_COLOR".into(), "1".into()),
    ]
}

fn serve(d: &Dirs) -> DemoServer {
    let project = d.project.display().to_string();
    let env = env(d);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut s = DemoServer::spawn_program(
        &switchboard_bin(),
        &["--project", &project, "--no-cache", "serve"],
        &env,
    );
    s.initialize();
    s
}

/// `.mcp.json` (a project file: its servers await approval) with these demo servers.
fn project_servers(d: &Dirs, names: &[&str]) {
    let demo = demo_server_bin().display().to_string();
    let servers: serde_json::Map<String, Value> = names
        .iter()
        .map(|n| {
            (
                n.to_string(),
                json!({"command": demo, "args": ["--name", n]}),
            )
        })
        .collect();
    write(
        &d.project,
        ".mcp.json",
        &json!({ "mcpServers": servers }).to_string(),
    );
}

fn tool_names(s: &mut DemoServer) -> Vec<String> {
    let list = s.request("tools/list", json!({}));
    list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// Lists again after every `list_changed` until `done` holds for the names (the wait only
/// guards against a hang: what is checked is that the change is announced).
fn listed_until(s: &mut DemoServer, what: &str, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    let mut names = tool_names(s);
    for _ in 0..20 {
        if done(&names) {
            return names;
        }
        s.wait_for(WAIT, |m| m["method"] == "notifications/tools/list_changed")
            .unwrap_or_else(|| panic!("no list_changed: {what}; stderr:\n{}", s.stderr()));
        names = tool_names(s);
    }
    panic!("{what}: {names:?}");
}

fn call_text(s: &mut DemoServer, tool: &str) -> (bool, String) {
    let r = s.request(
        "tools/call",
        json!({"name": tool, "arguments": {"text": "hi"}}),
    );
    let error = r["result"]["isError"] == true;
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .map_or_else(|| r.to_string(), str::to_string);
    (error, text)
}

fn shut(mut s: DemoServer) {
    s.close_stdin();
    let status = s.wait_exit(WAIT).expect("serve exits when stdin closes");
    assert!(status.success(), "{status:?}\n{}", s.stderr());
}

#[test]
fn what_awaits_approval_follows_approvals_and_config_edits_while_serving() {
    let d = dirs();
    project_servers(&d, &["proj"]);
    let mut s = serve(&d);
    let (error, text) = call_text(&mut s, "mcp_proj_echo");
    assert!(error, "{text}");
    assert!(
        text.contains("awaiting approval") && text.contains("proj"),
        "{text}"
    );

    // Approved from another terminal while serve runs: the server starts, its tools are
    // announced, and calls reach it.
    let out = std::process::Command::new(switchboard_bin())
        .args([
            "--project",
            &d.project.display().to_string(),
            "trust",
            "proj",
        ])
        .envs(env(&d))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    listed_until(&mut s, "the approved server's tools", |n| {
        n.iter().any(|t| t == "mcp_proj_echo")
    });
    let (error, text) = call_text(&mut s, "mcp_proj_echo");
    assert!(!error, "{text}");

    // A project server added to the config awaits approval, and a call of its tool says so.
    project_servers(&d, &["proj", "newcomer"]);
    let deadline = Instant::now() + WAIT;
    loop {
        let (error, text) = call_text(&mut s, "mcp_newcomer_echo");
        if error && text.contains("approved: newcomer;") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new server was never named as awaiting approval: {text}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The approved server kept running throughout.
    let (error, text) = call_text(&mut s, "mcp_proj_echo");
    assert!(!error, "{text}");
    shut(s);
}

/// The processes whose environment has `TAG=tag`.
fn tagged(tag: &str) -> Vec<u32> {
    let want = format!("TAG={tag}");
    let mut pids: Vec<u32> = fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|pid: &u32| {
            fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == want.as_bytes()))
        })
        .collect();
    pids.sort_unstable();
    pids
}

#[test]
fn a_changed_file_value_restarts_only_its_server_while_serving() {
    let d = dirs();
    let count = d.home.join("count.txt");
    fs::write(&count, "1\n").unwrap();
    let fixed_tag = format!("fixed-{}", d.home.display());
    let demo = demo_server_bin().display().to_string();
    // Windsurf's `${file:…}`: the file's trimmed text, here how many tools to generate.
    write(
        &d.home,
        ".codeium/windsurf/mcp_config.json",
        &json!({"mcpServers": {
            "filed": {"command": demo, "args": [
                "--name", "filed", "--tools", format!("${{file:{}}}", count.display())]},
            "fixed": {"command": demo, "args": ["--name", "fixed"], "env": {"TAG": fixed_tag}},
        }})
        .to_string(),
    );
    let mut s = serve(&d);
    let names = tool_names(&mut s);
    assert!(names.iter().any(|t| t == "mcp_filed_tool_0"), "{names:?}");
    assert!(!names.iter().any(|t| t == "mcp_filed_tool_1"), "{names:?}");
    let fixed = tagged(&fixed_tag);
    assert_eq!(fixed.len(), 1, "{fixed:?}");

    // Only the value file changes (no config file does): the server it feeds restarts with
    // the new value, and the other keeps its process.
    fs::write(&count, "2\n").unwrap();
    listed_until(&mut s, "the restarted server's new tools", |n| {
        n.iter().any(|t| t == "mcp_filed_tool_1")
    });
    assert_eq!(tagged(&fixed_tag), fixed, "the other server was left alone");
    let (error, text) = call_text(&mut s, "mcp_fixed_echo");
    assert!(!error, "{text}");
    shut(s);
}
