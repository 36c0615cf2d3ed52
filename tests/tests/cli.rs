//! The `switchboard` command line, run as a real process against `mcp-demo-server` peers:
//! stable `--json` output (snapshots), exit statuses, config errors, every global flag, Ctrl-C,
//! `watch`, the demo, and colour only on a terminal without `NO_COLOR`.

use crate::support::{demo_server_bin, process_alive, switchboard_bin, with_snapshots};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long a test waits for something that should happen (a process to appear or go).
const WAIT: Duration = Duration::from_secs(20);

/// A temporary project with a config file of demo servers.
pub(crate) struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    /// `servers`: (name, mcp-demo-server flags).
    pub(crate) fn new(servers: &[(&str, &[&str])]) -> Self {
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

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Run `switchboard` in the project with its config, a private cache and no discovery.
    pub(crate) fn run(&self, args: &[&str]) -> Output {
        self.run_with_configs(&["mcp.json"], args)
    }

    pub(crate) fn run_with_configs(&self, configs: &[&str], args: &[&str]) -> Output {
        let mut cmd = self.command(configs);
        cmd.arg("--cache-dir").arg(self.path().join("cache"));
        cmd.args(args).output().expect("run switchboard")
    }

    /// `switchboard` in the project with these configs, no `RUST_LOG`, no `NO_COLOR`, and a
    /// private `HOME` and `XDG_CACHE_HOME` (so nothing of the user's is read or written).
    pub(crate) fn command(&self, configs: &[&str]) -> Command {
        let mut cmd = Command::new(switchboard_bin());
        let home = self.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        cmd.current_dir(self.path())
            .env_remove("RUST_LOG")
            .env_remove("NO_COLOR")
            .env("HOME", &home)
            .env_remove("XDG_DATA_HOME")
            .env("XDG_CACHE_HOME", self.path().join("xdg-cache"));
        for c in configs {
            cmd.arg("--config").arg(c);
        }
        cmd
    }
}

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub(crate) fn code(o: &Output) -> i32 {
    o.status.code().expect("exited, not killed")
}

pub(crate) fn json_stdout(o: &Output) -> Value {
    serde_json::from_str(&stdout(o)).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}):\n{}\nstderr:\n{}",
            stdout(o),
            stderr(o)
        )
    })
}

/// Replace machine- and run-specific values (paths, timings) so the JSON snapshots are stable.
pub(crate) fn redact(value: &mut Value, project: &Path) {
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
    // Every process each run spawned (4 servers per run), checked with kill(pid, 0).
    assert_eq!(
        text.matches("still alive by kill(pid, 0): 0 of the 4 server processes this run spawned")
            .count(),
        2,
        "{text}"
    );
    assert!(
        text.contains(": 8 server processes spawned and checked, 0 left running."),
        "{text}"
    );
    // Both gates, the cold one with nothing deferred, the warm one with slow's tools deferred.
    assert_eq!(text.matches("gate opened after ").count(), 2, "{text}");
    assert!(text.contains("deferred (-): none"), "{text}");
    assert!(
        text.contains("deferred (slow): mcp_slow_add, mcp_slow_echo, mcp_slow_sleep"),
        "{text}"
    );
    // The failing server's precise error, in both runs.
    assert_eq!(
        text.matches(
            "failed   failing: tools/list failed: MCP error -32603: tools/list failed (--fail-list)"
        )
        .count(),
        2,
        "{text}"
    );
    assert!(text.contains("slow connected after the gate"), "{text}");
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
    // Each server's state at the gate comes first, then the first round's report.
    let mut first: Vec<&str> = lines[..2]
        .iter()
        .map(|l| {
            assert_eq!(l["event"], "server", "{l}");
            l["server"].as_str().unwrap()
        })
        .collect();
    first.sort();
    assert_eq!(first, ["crashy", "steady"]);
    assert_eq!(lines[2]["event"], "startup_complete", "{}", lines[2]);
    let find = |pred: &dyn Fn(&Value) -> bool| lines.iter().position(pred);
    let crashed = find(&|l| l["event"] == "reconnect_scheduled" && l["server"] == "crashy")
        .expect("the crash is seen as a scheduled reconnect");
    let scheduled = &lines[crashed];
    assert_eq!(scheduled["attempt"], 1, "{scheduled}");
    assert!(scheduled["next_attempt_in_ms"].is_u64(), "{scheduled}");
    assert!(
        scheduled["error"]
            .as_str()
            .unwrap()
            .contains("crashing on purpose"),
        "the error carries the server's last stderr line: {scheduled}"
    );
    let started = crashed
        + lines[crashed..]
            .iter()
            .position(|l| l["event"] == "reconnect_started" && l["server"] == "crashy")
            .expect("the attempt's start is reported");
    assert_eq!(lines[started]["attempt"], 1);
    let back = lines[started..]
        .iter()
        .position(|l| {
            l["event"] == "status_changed" && l["server"] == "crashy" && l["status"] == "connected"
        })
        .expect("the crashed server connects again after its attempt started");
    let back = started + back - crashed;
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

/// The JSON lines of a `watch --json` run, each checked for the three common fields.
fn watch_lines(out: &Output) -> Vec<Value> {
    assert_eq!(code(out), 0, "{}", stderr(out));
    let lines: Vec<Value> = stdout(out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    for l in &lines {
        assert!(
            l["time_ms"].is_u64() && l["event"].is_string() && l.get("server").is_some(),
            "{l}"
        );
    }
    let last = lines.last().expect("at least the stopped line");
    assert_eq!(last["event"], "stopped");
    assert_eq!(last["processes_left"], 0);
    lines
}

#[test]
fn watch_reports_every_reconnect_attempt_scheduled_and_started_in_order() {
    let p = Project::new(&[]);
    // Starts a demo server the first time (it crashes after a second), then fails at once on
    // every reconnect attempt: attempts 1, 2, 3 ... each fail and schedule the next.
    let script = p.path().join("flaky.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nif [ -e \"$0.ran\" ]; then echo 'refusing to start again' >&2; exit 3; fi\n\
             touch \"$0.ran\"\nexec '{}' --name flaky --crash-after-ms 1000\n",
            demo_server_bin().display()
        ),
    )
    .unwrap();
    let mut perms = std::fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&script, perms).unwrap();
    let config = json!({"mcpServers": {"flaky": {"command": script.to_string_lossy()}}});
    std::fs::write(p.path().join("flaky.json"), config.to_string()).unwrap();
    // Attempts 1-3 start within about 5 s of the crash (0.5 + 1 + 2 s, ±20%).
    let out = p.run_with_configs(&["flaky.json"], &["watch", "--json", "--for-ms", "9000"]);
    let lines = watch_lines(&out);
    let reconnects: Vec<(String, u64)> = lines
        .iter()
        .filter(|l| l["server"] == "flaky")
        .filter_map(|l| {
            let event = l["event"].as_str()?;
            event
                .starts_with("reconnect_")
                .then(|| (event.to_string(), l["attempt"].as_u64().unwrap()))
        })
        .collect();
    let expected: Vec<(String, u64)> = (1..=3)
        .flat_map(|a| {
            [
                ("reconnect_scheduled".to_string(), a),
                ("reconnect_started".to_string(), a),
            ]
        })
        .collect();
    assert!(
        reconnects.len() >= 6 && reconnects[..6] == expected[..],
        "{reconnects:?}\n{}",
        stdout(&out)
    );
    // Attempt 1 follows the lost connection; later ones follow the failed attempt.
    let scheduled: Vec<&Value> = lines
        .iter()
        .filter(|l| l["event"] == "reconnect_scheduled")
        .collect();
    assert!(scheduled[0]["error"]
        .as_str()
        .unwrap()
        .contains("exit status: 1"));
    for s in &scheduled[1..3] {
        assert!(
            s["error"].as_str().unwrap().contains("exit status: 3"),
            "{s}"
        );
        assert!(s["next_attempt_in_ms"].as_u64().unwrap() > 0, "{s}");
    }
}

#[test]
fn watch_with_health_pings_detects_a_stalled_server_and_reconnects_it() {
    // The server stops answering (and ignores stdin EOF) 1 s after it starts.
    let p = Project::new(&[("stally", &["--stall-after-ms", "1000"])]);
    let out = p.run(&["--health-ms", "200", "watch", "--json", "--for-ms", "6000"]);
    let lines = watch_lines(&out);
    let lost = lines
        .iter()
        .find(|l| l["event"] == "reconnect_scheduled" && l["server"] == "stally")
        .unwrap_or_else(|| panic!("the stall is detected:\n{}", stdout(&out)));
    // The client ended the attempt; its error still carries the server's last stderr lines.
    let error = lost["error"].as_str().unwrap();
    assert!(
        error.starts_with(
            "health check failed: 2 pings in a row went unanswered; last stderr lines:\n"
        ),
        "{error}"
    );
    assert!(error.contains("stalling on purpose"), "{error}");
    assert!(lines.iter().any(|l| l["event"] == "status_changed"
        && l["server"] == "stally"
        && l["status"] == "connected"
        && l["attempts"].as_u64() > Some(1)));
    // Without the flag nobody pings: the stalled server is never noticed.
    let quiet = p.run(&["watch", "--json", "--for-ms", "3000"]);
    let lines = watch_lines(&quiet);
    assert!(
        !lines.iter().any(|l| l["event"] == "reconnect_scheduled"),
        "{}",
        stdout(&quiet)
    );
}

#[test]
fn timeout_ms_keeps_the_cache_and_zero_or_garbage_is_a_usage_error() {
    let project = Project::new(&[("fast", &[]), ("slow", &["--init-delay-ms", "4000"])]);
    let cold = project.run(&["--timeout-ms", "20000", "tools", "--json"]);
    assert_eq!(code(&cold), 0, "stderr:\n{}", stderr(&cold));
    // The flag is not part of the cache key: a warm run with or without it (or with another
    // value) still serves the slow server's tools from the cache.
    for args in [&["--timeout-ms", "25000"][..], &[]] {
        let mut all = args.to_vec();
        all.extend(["tools", "--json", "--server", "slow"]);
        let warm = project.run(&all);
        assert_eq!(code(&warm), 0, "stderr:\n{}", stderr(&warm));
        let warm = json_stdout(&warm);
        let tools = warm["tools"].as_array().unwrap();
        assert!(
            !tools.is_empty() && tools.iter().all(|t| t["deferred"] == json!(true)),
            "{args:?}: {warm}"
        );
    }
    // It is the connect timeout of a server whose config sets none.
    let hanging = Project::new(&[("hanging", &["--hang-init"])]);
    let out = hanging.run(&["--timeout-ms", "300", "status", "--json"]);
    assert_eq!(code(&out), 0, "stderr:\n{}", stderr(&out));
    // (The error goes on with the server's last stderr lines, when it wrote any.)
    let error = json_stdout(&out)["servers"][0]["error"].clone();
    assert!(
        error
            .as_str()
            .is_some_and(|e| e.starts_with("connect timed out after 300 ms")),
        "{error}"
    );
    for bad in ["0", "soon", "-5"] {
        for flag in ["--timeout-ms", "--health-ms"] {
            let out = project.run(&[&format!("{flag}={bad}"), "status"]);
            assert_eq!(code(&out), 2, "{flag}={bad}: {out:?}");
            assert!(
                stderr(&out).contains(&format!("invalid value '{bad}' for '{flag} <MS>'")),
                "{}",
                stderr(&out)
            );
        }
    }
}

/// Pids of the processes whose command line has `marker` as one of its arguments.
fn pids_with_arg(marker: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if cmdline.split(|b| *b == 0).any(|a| a == marker.as_bytes()) && process_alive(pid) {
            pids.push(pid);
        }
    }
    pids
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "gave up waiting: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Ctrl-C while a server that ignores stdin EOF and SIGTERM is still starting: the command
/// exits 130 and no process of that server is left. `after_gate`: wait until the command is
/// past the startup gate (its progress line for `fast` is out) before the signal, else send it
/// while the (long) gate is still open.
fn ctrl_c_during_startup(after_gate: bool) {
    let marker = format!(
        "stuck-{}-{}",
        std::process::id(),
        if after_gate { "late" } else { "early" }
    );
    let p = Project::new(&[
        ("fast", &[]),
        (
            "stuck",
            &[
                "--hang-init",
                "--stall-after-ms",
                "0",
                "--ignore-sigterm",
                "--name",
                &marker,
            ],
        ),
    ]);
    let gate = if after_gate { "100" } else { "60000" };
    let mut child = p
        .command(&["mcp.json"])
        .args(["--cache-dir", "cache", "--gate-ms", gate, "status"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    wait_until("the stuck server to start", || {
        !pids_with_arg(&marker).is_empty()
    });
    let stuck = pids_with_arg(&marker);
    let mut seen = Vec::new();
    if after_gate {
        // The command prints this only once `start` returned at the gate.
        let line = rx
            .recv_timeout(WAIT)
            .expect("the fast server's progress line");
        assert!(line.contains("fast connected"), "{line}");
        seen.push(line);
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let mut status = None;
    wait_until("switchboard to exit after Ctrl-C", || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    seen.extend(rx.try_iter());
    let leftover = pids_with_arg(&marker);
    for pid in &leftover {
        // SAFETY: cleaning up after a failed assertion below.
        unsafe { libc::kill(*pid, libc::SIGKILL) };
    }
    assert_eq!(status.unwrap().code(), Some(130), "stderr: {seen:?}");
    assert!(
        seen.iter()
            .any(|l| l.contains("interrupted (ctrl-c); every server was shut down")),
        "{seen:?}"
    );
    assert!(
        leftover.is_empty(),
        "{stuck:?} started, {leftover:?} still running"
    );
}

#[test]
fn ctrl_c_while_the_gate_is_open_exits_130_and_leaves_no_server_running() {
    ctrl_c_during_startup(false);
}

#[test]
fn ctrl_c_while_waiting_for_servers_after_the_gate_exits_130_and_leaves_no_server_running() {
    ctrl_c_during_startup(true);
}

#[test]
fn call_reads_json_arguments_from_stdin() {
    let project = Project::new(&[("fast", &[])]);
    let mut child = project
        .command(&["mcp.json"])
        .args(["--cache-dir", "cache", "call", "mcp_fast_add", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"a": 40, "b": 2}"#)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(stdout(&out), "42\n");
    // Not an object on stdin: a usage error.
    let mut child = project
        .command(&["mcp.json"])
        .args(["call", "mcp_fast_add", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"[1, 2]").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), 2, "{out:?}");
    assert!(stderr(&out).contains("must be a JSON object"), "{out:?}");
}

#[test]
fn call_of_a_deferred_tool_waits_for_its_slow_server() {
    let project = Project::new(&[("fast", &[]), ("slow", &["--init-delay-ms", "2500"])]);
    // Cold: fills the cache (the slow server is waited for: it has none yet).
    let cold = project.run(&["tools", "--json"]);
    assert_eq!(code(&cold), 0, "{}", stderr(&cold));
    // Warm: the same setup as `tools_json_marks_deferred_tools_and_filters_by_server`, whose
    // snapshot shows slow's tools deferred at the gate; the call waits for the connection.
    let out = project.run(&["call", "mcp_slow_echo", r#"{"text": "waited"}"#]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(stdout(&out), "waited\n");
}

#[test]
fn naming_double_underscore_qualifies_names_with_double_underscores() {
    let project = Project::new(&[("fast", &[])]);
    let out = project.run(&["--naming", "double-underscore", "tools", "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let names: Vec<String> = json_stdout(&out)["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        ["mcp__fast__add", "mcp__fast__echo", "mcp__fast__sleep"]
    );
    let call = project.run(&[
        "--naming",
        "double-underscore",
        "call",
        "mcp__fast__echo",
        r#"{"text": "dunder"}"#,
    ]);
    assert_eq!(code(&call), 0, "{}", stderr(&call));
    assert_eq!(stdout(&call), "dunder\n");
    // The default scheme's name is unknown under this scheme.
    let seed_name = project.run(&["--naming", "double-underscore", "call", "mcp_fast_echo"]);
    assert_eq!(code(&seed_name), 1, "{seed_name:?}");
}

#[test]
fn project_names_where_project_configs_are_found_and_no_project_config_ignores_them() {
    let elsewhere = Project::new(&[]);
    let project = Project::new(&[]);
    // A Claude Code project config, found by discovery (no --config).
    project.write_config(".mcp.json", &[("projfast", &[])]);
    let run = |extra: &[&str]| {
        let mut cmd = elsewhere.command(&[]);
        // Where the files are found, not whether they are approved (see trust.rs).
        cmd.arg("--project")
            .arg(project.path())
            .arg("--no-cache")
            .args(extra)
            .args(["status", "--json"]);
        cmd.output().unwrap()
    };
    let found = run(&["--trust-project"]);
    assert_eq!(code(&found), 0, "{}", stderr(&found));
    let v = json_stdout(&found);
    assert_eq!(v["servers"][0]["name"], "projfast", "{v}");
    assert_eq!(v["servers"][0]["source"]["level"], "project", "{v}");
    assert_eq!(v["servers"][0]["source"]["provider"], "claude-code", "{v}");
    assert_eq!(v["servers"][0]["status"], "connected", "{v}");
    let off = run(&["--no-project-config"]);
    assert_eq!(code(&off), 0, "{}", stderr(&off));
    let v = json_stdout(&off);
    assert_eq!(v["servers"], json!([]), "{v}");
    // Run from the other directory, without --project, nothing is found either.
    let mut cmd = elsewhere.command(&[]);
    let here = cmd
        .args(["--no-cache", "status", "--json"])
        .output()
        .unwrap();
    assert_eq!(json_stdout(&here)["servers"], json!([]));
}

#[test]
fn a_long_gate_ms_waits_for_a_cached_slow_server_so_nothing_is_deferred() {
    let project = Project::new(&[("slow", &["--init-delay-ms", "1500"])]);
    let cold = project.run(&["tools", "--json"]);
    assert_eq!(code(&cold), 0, "{}", stderr(&cold));
    let deferred = |out: &Output| -> Vec<bool> {
        assert_eq!(code(out), 0, "{}", stderr(out));
        json_stdout(out)["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["deferred"].as_bool().unwrap())
            .collect()
    };
    // The default 250 ms gate opens before slow answers: its cached tools are deferred.
    assert_eq!(deferred(&project.run(&["tools", "--json"])), [true; 3]);
    // A gate far longer than slow's delay waits for it: its tools are live.
    assert_eq!(
        deferred(&project.run(&["--gate-ms", "60000", "tools", "--json"])),
        [false; 3]
    );
}

#[test]
fn no_cache_reads_and_writes_no_cache() {
    let project = Project::new(&[("slow", &["--init-delay-ms", "1500"])]);
    for _ in 0..2 {
        let out = project
            .command(&["mcp.json"])
            .args(["--no-cache", "tools", "--json"])
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        // Never deferred: there is no cache to serve from, so slow is waited for each time.
        let v = json_stdout(&out);
        assert_eq!(v["tools"].as_array().unwrap().len(), 3, "{v}");
        assert!(v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["deferred"] == false));
    }
    // The default cache directory ($XDG_CACHE_HOME/switchboard) was never created.
    assert!(!project.path().join("xdg-cache").exists());
    // Without the flag the default cache directory is used.
    let out = project
        .command(&["mcp.json"])
        .args(["tools", "--json"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(project.path().join("xdg-cache/switchboard/tools").is_dir());
}

#[test]
fn quiet_silences_progress_and_logs_and_rust_log_filters_the_logs() {
    let project = Project::new(&[("fast", &[]), ("failing", &["--fail-init"])]);
    // By default: a progress line per settled server, no logs.
    let plain = project.run(&["status"]);
    assert!(
        stderr(&plain).contains("switchboard: failing failed"),
        "{plain:?}"
    );
    assert!(!stderr(&plain).contains("DEBUG"), "{plain:?}");
    // RUST_LOG turns logs on, at the level it names.
    let mut cmd = project.command(&["mcp.json"]);
    let logged = cmd
        .env("RUST_LOG", "switchboard=debug")
        .args(["status"])
        .output()
        .unwrap();
    let err = stderr(&logged);
    assert!(
        err.lines()
            .any(|l| l.contains("DEBUG") && l.contains("started stdio server")),
        "{err}"
    );
    let mut cmd = project.command(&["mcp.json"]);
    let warn_only = cmd
        .env("RUST_LOG", "switchboard=warn")
        .args(["status"])
        .output()
        .unwrap();
    assert!(!stderr(&warn_only).contains("DEBUG"), "{warn_only:?}");
    // -q: nothing on stderr at all, even with RUST_LOG; stdout is unchanged.
    let mut cmd = project.command(&["mcp.json"]);
    let quiet = cmd
        .env("RUST_LOG", "switchboard=debug")
        .args(["-q", "status"])
        .output()
        .unwrap();
    assert_eq!(code(&quiet), 0);
    assert_eq!(stderr(&quiet), "", "{quiet:?}");
    assert!(stdout(&quiet).contains("failing"), "{quiet:?}");
}

/// Run `switchboard` with stdout and stderr on a pseudo-terminal; returns what it wrote.
fn run_on_a_terminal(mut cmd: Command) -> (i32, String) {
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty fills two descriptors we own from here on.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors are open and owned by nothing else.
    let (master, slave) = unsafe {
        use std::os::fd::FromRawFd;
        (
            std::fs::File::from_raw_fd(master),
            std::os::fd::OwnedFd::from_raw_fd(slave),
        )
    };
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave))
        .spawn()
        .unwrap();
    // Drop our copies of the slave (in `cmd`), so reading ends when the child is gone.
    drop(cmd);
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let mut master = master;
        // Ends with EIO once no process holds the terminal open.
        let _ = master.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    });
    let status = child.wait().unwrap();
    (status.code().unwrap(), reader.join().unwrap())
}

/// `ESC [ ... m`: a colour or style (the live view's cursor moves are other sequences).
fn has_sgr(text: &str) -> bool {
    text.split("\x1b[").skip(1).any(|rest| {
        let params: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == ';')
            .collect();
        rest[params.len()..].starts_with('m')
    })
}

#[test]
fn colour_on_a_terminal_and_none_with_no_color() {
    let project = Project::new(&[("fast", &[]), ("failing", &["--fail-list"])]);
    let status = |no_color: Option<&str>| {
        let mut cmd = project.command(&["mcp.json"]);
        cmd.args(["--cache-dir", "cache", "status"]);
        if let Some(v) = no_color {
            cmd.env("NO_COLOR", v);
        }
        run_on_a_terminal(cmd)
    };
    let (code, coloured) = status(None);
    assert_eq!(code, 0, "{coloured}");
    assert!(has_sgr(&coloured), "no colour on a terminal:\n{coloured:?}");
    let (code, plain) = status(Some("1"));
    assert_eq!(code, 0, "{plain}");
    assert!(plain.contains("failing"), "{plain:?}");
    assert!(!has_sgr(&plain), "colour despite NO_COLOR:\n{plain:?}");
    // An empty NO_COLOR does not count (no-color.org).
    let (_, empty) = status(Some(""));
    assert!(has_sgr(&empty), "{empty:?}");
}

#[test]
fn every_subcommand_documents_its_exit_statuses() {
    for sub in [
        "status",
        "tools",
        "call",
        "demo",
        "watch",
        "resources",
        "read",
        "prompts",
        "prompt",
        "complete",
    ] {
        let out = Command::new(switchboard_bin())
            .args([sub, "--help"])
            .output()
            .unwrap();
        assert_eq!(code(&out), 0);
        let text = stdout(&out);
        assert!(text.contains("Exit status:"), "{sub}:\n{text}");
        assert!(text.contains("130"), "{sub}:\n{text}");
    }
}
