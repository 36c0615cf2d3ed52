//! The `switchboard` command line, run as a real process against `mcp-demo-server` peers:
//! stable `--json` output (snapshots), exit statuses, config errors, the demo, and no colour
//! codes when the output is not a terminal.

use crate::support::{demo_server_bin, switchboard_bin, with_snapshots};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A temporary project with a config file of demo servers.
struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    /// `servers`: (name, mcp-demo-server flags).
    fn new(servers: &[(&str, &[&str])]) -> Self {
        let project = Project {
            dir: tempfile::tempdir().unwrap(),
        };
        project.write_config("mcp.json", servers);
        project
    }

    fn write_config(&self, file: &str, servers: &[(&str, &[&str])]) -> PathBuf {
        let bin = demo_server_bin();
        let mut map = serde_json::Map::new();
        for (name, flags) in servers {
            let mut args = vec!["--name".to_string(), name.to_string()];
            args.extend(flags.iter().map(|f| f.to_string()));
            map.insert(
                name.to_string(),
                json!({"command": bin.to_string_lossy(), "args": args}),
            );
        }
        let path = self.dir.path().join(file);
        std::fs::write(&path, json!({ "mcpServers": map }).to_string()).unwrap();
        path
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Run `switchboard` in the project with its config, a private cache and no discovery.
    fn run(&self, args: &[&str]) -> Output {
        self.run_with_configs(&["mcp.json"], args)
    }

    fn run_with_configs(&self, configs: &[&str], args: &[&str]) -> Output {
        let mut cmd = Command::new(switchboard_bin());
        cmd.current_dir(self.path())
            .env_remove("RUST_LOG")
            .env_remove("NO_COLOR")
            .arg("--cache-dir")
            .arg(self.path().join("cache"));
        for c in configs {
            cmd.arg("--config").arg(c);
        }
        cmd.args(args).output().expect("run switchboard")
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited, not killed")
}

fn json_stdout(o: &Output) -> Value {
    serde_json::from_str(&stdout(o)).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}):\n{}\nstderr:\n{}",
            stdout(o),
            stderr(o)
        )
    })
}

/// Replace machine- and run-specific values (paths, timings) so the JSON snapshots are stable.
fn redact(value: &mut Value, project: &Path) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                match key.as_str() {
                    "gate_ms" | "time_to_ready_ms" if v.is_number() => *v = json!("[ms]"),
                    // Keep the file name: it says which file won a shadowing.
                    "path" => {
                        let name = v.as_str().and_then(|p| Path::new(p).file_name());
                        *v = json!(format!(
                            "[dir]/{}",
                            name.map(|n| n.to_string_lossy()).unwrap_or_default()
                        ));
                    }
                    _ => redact(v, project),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| redact(v, project)),
        Value::String(s) => {
            let dir = project.to_string_lossy();
            if s.contains(dir.as_ref()) {
                *s = s.replace(dir.as_ref(), "[project]");
            }
        }
        _ => {}
    }
}

#[test]
fn status_json_lists_every_server_with_its_source_state_and_error() {
    let project = Project::new(&[("fast", &[]), ("failing", &["--fail-list"])]);
    // A second file that names `fast` again (shadowed) and has an invalid entry.
    let second = project.write_config("more.json", &[("fast", &["--tools", "5"])]);
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&second).unwrap()).unwrap();
    doc["mcpServers"]["bad name!"] = json!({"command": "x"});
    std::fs::write(&second, doc.to_string()).unwrap();

    let out = project.run_with_configs(&["mcp.json", "more.json"], &["status", "--json"]);
    assert_eq!(code(&out), 0, "stderr:\n{}", stderr(&out));
    let mut value = json_stdout(&out);
    let servers = value["servers"].as_array().unwrap();
    assert!(servers[1]["time_to_ready_ms"].is_number(), "{value}");
    redact(&mut value, project.path());
    with_snapshots(|| insta::assert_json_snapshot!("cli_status_json", value));
}

#[test]
fn tools_json_marks_deferred_tools_and_filters_by_server() {
    // The slow server's delay is far above the 250 ms gate, so a loaded machine still reaches
    // the warm run's gate before it answers.
    let project = Project::new(&[("fast", &[]), ("slow", &["--init-delay-ms", "4000"])]);
    // Cold: the slow server is waited for (no cache), and its tools are cached.
    let cold = project.run(&["tools", "--json"]);
    assert_eq!(code(&cold), 0, "stderr:\n{}", stderr(&cold));
    let cold = json_stdout(&cold);
    assert!(cold["tools"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["deferred"] == json!(false)));
    // Warm: the slow server's tools come from the cache, deferred, at the gate.
    let warm = project.run(&["tools", "--json", "--server", "slow"]);
    assert_eq!(code(&warm), 0, "stderr:\n{}", stderr(&warm));
    let mut warm = json_stdout(&warm);
    redact(&mut warm, project.path());
    with_snapshots(|| insta::assert_json_snapshot!("cli_tools_json_warm_slow", warm));
}

#[test]
fn call_prints_the_result_and_exits_1_on_is_error_or_failure() {
    let project = Project::new(&[("fast", &[])]);
    let out = project.run(&["call", "mcp_fast_add", r#"{"a": 2, "b": 3}"#, "--json"]);
    assert_eq!(code(&out), 0, "stderr:\n{}", stderr(&out));
    let value = json_stdout(&out);
    with_snapshots(|| insta::assert_json_snapshot!("cli_call_add_json", value));

    let text = project.run(&["call", "mcp_fast_echo", r#"{"text": "hello"}"#]);
    assert_eq!(code(&text), 0, "stderr:\n{}", stderr(&text));
    assert_eq!(stdout(&text), "hello\n");

    // The tool ran and reported an error (`isError`): exit 1, the error text on stdout.
    let is_error = project.run(&["call", "mcp_fast_add", r#"{"a": "x"}"#]);
    assert_eq!(code(&is_error), 1);
    assert!(
        stdout(&is_error).contains("add needs numbers"),
        "{is_error:?}"
    );

    // The call itself fails (unknown tool): exit 1 with the error on stderr.
    let unknown = project.run(&["call", "mcp_fast_nope"]);
    assert_eq!(code(&unknown), 1);
    assert!(stderr(&unknown).contains("unknown tool"), "{unknown:?}");

    // Arguments that are not JSON are a usage error.
    let bad = project.run(&["call", "mcp_fast_echo", "{"]);
    assert_eq!(code(&bad), 2, "{bad:?}");
}

#[test]
fn a_config_file_that_does_not_parse_exits_2_naming_file_line_and_column() {
    let project = Project::new(&[]);
    std::fs::write(
        project.path().join("broken.json"),
        "{\"mcpServers\": {\n  \"a\": {\"command\": \"x\" \"args\": []}\n}}",
    )
    .unwrap();
    let out = project.run_with_configs(&["broken.json"], &["status"]);
    assert_eq!(code(&out), 2, "{out:?}");
    let err = stderr(&out);
    assert!(err.contains("broken.json:2:24:"), "{err}");
    assert!(stdout(&out).is_empty());
}

#[test]
fn a_failing_server_is_reported_and_fails_the_run_only_with_strict() {
    let project = Project::new(&[("fast", &[]), ("failing", &["--fail-init"])]);
    let out = project.run(&["status"]);
    assert_eq!(code(&out), 0, "{out:?}");
    let text = stdout(&out);
    assert!(text.contains("failed"), "{text}");
    assert!(
        text.contains("initialize failed: MCP error -32603: initialize failed (--fail-init)"),
        "{text}"
    );
    let strict = project.run(&["--strict", "status"]);
    assert_eq!(code(&strict), 1, "{strict:?}");
}

#[test]
fn demo_runs_to_the_end_with_no_process_left() {
    let out = Command::new(switchboard_bin())
        .arg("demo")
        .env_remove("NO_COLOR")
        .output()
        .expect("run switchboard demo");
    let text = stdout(&out);
    assert_eq!(code(&out), 0, "stdout:\n{text}\nstderr:\n{}", stderr(&out));
    assert_eq!(text.matches("processes left: 0").count(), 2, "{text}");
    assert!(text.contains(", 0 left running."), "{text}");
    assert!(text.contains("-> \"hello from a deferred call\""), "{text}");
    assert!(text.contains("hanging failed: connect timed out"), "{text}");
    assert!(
        !text.contains("\x1b["),
        "colour codes in piped output:\n{text}"
    );
}

#[test]
fn no_colour_codes_when_output_is_not_a_terminal() {
    let project = Project::new(&[("fast", &[]), ("failing", &["--fail-list"])]);
    for args in [&["status"][..], &["tools"], &["-v", "status"]] {
        let out = project.run(args);
        assert_eq!(code(&out), 0, "{out:?}");
        assert!(
            !stdout(&out).contains("\x1b["),
            "{args:?}: {}",
            stdout(&out)
        );
        assert!(
            !stderr(&out).contains("\x1b["),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn watch_json_shows_a_crashed_server_reconnected_and_its_tools_back() {
    // Both timers start with the processes: long enough for a loaded machine to finish startup
    // and subscribe before they fire, and a watch long enough for the crash, the reconnect
    // backoff (~500 ms) and the reconnect to fit with room to spare.
    let p = Project::new(&[
        ("crashy", &["--crash-after-ms", "1500"]),
        ("steady", &["--list-changed-after-ms", "1500"]),
    ]);
    let out = p.run(&["watch", "--json", "--for-ms", "6000"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let lines: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    for l in &lines {
        assert!(
            l["time_ms"].is_u64() && l["event"].is_string() && l.get("server").is_some(),
            "{l}"
        );
    }
    let find = |pred: &dyn Fn(&Value) -> bool| lines.iter().position(pred);
    let crashed = find(&|l| l["event"] == "reconnect_scheduled" && l["server"] == "crashy")
        .expect("the crash is seen as a scheduled reconnect");
    let back = lines[crashed..]
        .iter()
        .position(|l| {
            l["event"] == "status_changed" && l["server"] == "crashy" && l["status"] == "connected"
        })
        .expect("the crashed server connects again");
    assert!(lines[crashed + back..]
        .iter()
        .any(|l| l["event"] == "tools_changed"
            && l["server"] == "crashy"
            && l["tools"] == 3
            && l["deferred"] == 0));
    assert!(
        find(&|l| l["event"] == "tools_changed" && l["server"] == "steady" && l["tools"] == 4)
            .is_some(),
        "list_changed brought steady's new tool"
    );
    let last = lines.last().unwrap();
    assert_eq!(last["event"], "stopped");
    assert_eq!(last["processes_left"], 0);
}

#[test]
fn status_and_call_work_against_the_reference_typescript_server() {
    if !crate::demo_server::peers_enabled("cli against server-everything") {
        return;
    }
    let p = Project::new(&[]);
    let entry = crate::support::repo_root()
        .join("tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let config = json!({"mcpServers": {"everything": {"command": "node", "args": [entry.to_string_lossy(), "stdio"]}}});
    std::fs::write(p.path().join("everything.json"), config.to_string()).unwrap();
    let out = p.run_with_configs(&["everything.json"], &["status", "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v = json_stdout(&out);
    assert_eq!(v["servers"][0]["status"], "connected", "{v}");
    assert!(v["servers"][0]["tools"].as_u64().unwrap() >= 10, "{v}");
    let out = p.run_with_configs(
        &["everything.json"],
        &[
            "call",
            "mcp_everything_echo",
            r#"{"message": "from the CLI"}"#,
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "Echo: from the CLI");
}
